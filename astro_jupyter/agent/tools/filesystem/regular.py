"""Only regular files are opened, and file work runs on its own small pool of daemon threads.

Why: opening a FIFO blocks until a writer appears, and reading a device may never end. A model
steered by a hostile paper can point ``read_file``/``grep_files`` at such a node inside a root;
seven of those used to take every thread of the default executor, so every other run's reads
(and anything else the server ran in threads) stalled. So:

* ``check_regular`` refuses anything but a regular file from ``stat`` *before* opening, and
  ``read_regular`` opens with ``O_NONBLOCK`` and re-checks with ``fstat``, so a file swapped for
  a FIFO between the two cannot block the open either;
* ``run_fs`` runs the blocking part of a file tool on a dedicated pool of ``FS_POOL_THREADS``
  daemon threads: whatever still hangs (a dead network mount) holds one of those, never the
  default executor, and the executor's tool timeout ends the call for the model; a queued job
  whose call timed out is dropped before it starts. Daemon threads never block process exit.
  The pool runs in the agent host (or the kernel), never in the Jupyter server's interpreter.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import queue
import stat
import threading
from pathlib import Path
from typing import Any, Callable, TypeVar

from ....errors import FileRefused

T = TypeVar("T")

FS_POOL_THREADS = 4  # hung reads tolerated at once before file tools queue behind them

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class NotRegularFile(FileRefused):
    """The path exists but is not a regular file; ``kind`` says what it is."""

    def __init__(self, kind: str) -> None:
        super().__init__(f"is {kind}, not a regular file; only regular files are read")
        self.kind = kind


class FileTooLarge(FileRefused):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"is {size} bytes, over the {limit}-byte limit")
        self.size, self.limit = size, limit


def kind_of(mode: int) -> str:
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def check_regular(path: Path | str) -> os.stat_result:
    """``stat`` (following links) and refuse non-regular files; never opens anything."""
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise NotRegularFile(kind_of(st.st_mode))
    return st


def read_regular(path: Path | str, max_bytes: int | None = None) -> bytes:
    """The bytes of a regular file (``NotRegularFile`` / ``FileTooLarge`` / ``OSError`` otherwise).

    Checked before opening, opened non-blocking (a FIFO swapped in meanwhile opens at once instead
    of waiting for a writer) and checked again on the open descriptor.
    """
    check_regular(path)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(kind_of(st.st_mode))
        if max_bytes is not None and st.st_size > max_bytes:
            raise FileTooLarge(st.st_size, max_bytes)
        if max_bytes is None:
            data = fh.read()
        else:  # sized by the file, not the limit: read(limit + 1) allocated the whole limit (20 MB) per file
            data = fh.read(st.st_size + 1)
            if len(data) > st.st_size:  # it grows while we read: up to one byte past the limit
                data += fh.read(max_bytes + 1 - len(data))
    if max_bytes is not None and len(data) > max_bytes:  # grew after the check
        raise FileTooLarge(len(data), max_bytes)
    return data


class FsPool:
    """A bounded pool of daemon threads for file-tool work (see the module docstring)."""

    def __init__(self, size: int) -> None:
        self.size = max(1, int(size))
        self._jobs: "queue.SimpleQueue[tuple[concurrent.futures.Future[Any], Callable[[], Any]]]" = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self.busy = 0

    def submit(self, fn: Callable[[], T]) -> "concurrent.futures.Future[T]":
        """Run ``fn`` on the pool (a thread is added up to the bound when all are taken)."""
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._jobs.put((future, fn))
        with self._lock:
            if len(self._threads) < self.size:  # grown lazily up to the bound; idle threads just wait
                thread = threading.Thread(target=self._work, name=f"astro-fs-{len(self._threads)}", daemon=True)
                self._threads.append(thread)
                thread.start()
        return future

    def _work(self) -> None:
        while True:
            future, fn = self._jobs.get()
            if not future.set_running_or_notify_cancel():  # its call timed out or was cancelled while queued
                continue
            with self._lock:
                self.busy += 1
            try:
                result = fn()
            except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine
                self._idle()
                future.set_exception(exc)
            else:
                self._idle()  # before the result: the awaiting coroutine may look at ``busy`` at once
                future.set_result(result)

    def _idle(self) -> None:
        with self._lock:
            self.busy -= 1


_pools: dict[int, FsPool] = {}
_pools_lock = threading.Lock()


def fs_pool(size: int) -> FsPool:
    """The process's pool of ``size`` threads (one per distinct size, created on first use)."""
    with _pools_lock:
        pool = _pools.get(size)
        if pool is None:
            pool = _pools[size] = FsPool(size)
        return pool


async def run_fs(fn: Callable[..., T], *args: Any) -> T:
    """Run ``fn(*args)`` on the file-tool pool; cancelling the await drops it if it has not started."""
    return await asyncio.wrap_future(fs_pool(FS_POOL_THREADS).submit(lambda: fn(*args)))
