"""CPU-heavy work nobody is waiting on interactively — a paper's word postings, its passages' embeddings,
its PDF pages — on threads below the process's CPU priority.

Why: on a hub, users' servers share a few cores. One user adding papers (tokenizing, embedding,
parsing) competed on equal terms with another user's search, whose few milliseconds of CPU then
waited behind whole batches of ingest work. Linux gives each thread its own niceness
(``setpriority(PRIO_PROCESS, native thread id, …)``), so these threads — and only these: a raised
niceness cannot be lowered again without privileges, which is why they are a pool of their own and
not asyncio's default executor, which searches use — run ``BACKGROUND_NICENESS`` above the
process. On an idle machine they get every cycle all the same; under load the scheduler gives a
niceness-10 thread about a tenth of a normal one's share. Where threads cannot be reniced (not
Linux, a policy that refuses) the work simply runs at the process's priority.

Not covered: the worker threads of a multi-threaded BLAS (the local embedding model with more than
one thread) are the library's own, started at the process's priority.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import os
import threading
from typing import Any, Callable, TypeVar

T = TypeVar("T")

BACKGROUND_NICENESS = 10  # added to the process's niceness for the background threads (19 at most)


def _usable_cpus() -> int:
    """The cores this process may run on (a hub container's cpuset, not the host's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


WORKERS = _usable_cpus()  # one thread per usable core: more would only queue for them
_lock = threading.Lock()
_executor: concurrent.futures.ThreadPoolExecutor | None = None


def _lower_priority() -> None:
    """Thread initializer: this thread's niceness = the process's + ``BACKGROUND_NICENESS``."""
    if not hasattr(os, "setpriority") or not hasattr(threading, "get_native_id"):
        return
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + BACKGROUND_NICENESS))
    except OSError:  # not allowed here: the work still runs, at the process's priority
        pass


def executor() -> concurrent.futures.ThreadPoolExecutor:
    """The process's low-priority pool, started on first use (its threads are daemons of the pool)."""
    global _executor
    with _lock:
        if _executor is None:
            _executor = concurrent.futures.ThreadPoolExecutor(
                max_workers=WORKERS, thread_name_prefix="astro-background-cpu", initializer=_lower_priority)
        return _executor


async def run(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``asyncio.to_thread`` on the low-priority pool (context variables carried along, as there)."""
    context = contextvars.copy_context()
    call = functools.partial(context.run, fn, *args, **kwargs)
    return await asyncio.get_running_loop().run_in_executor(executor(), call)
