"""The agent host: ``python -m astro_jupyter.host``, started by the server extension like a kernel.

It owns the sidebar's runtime: ``AstroApp`` with its runs, tools and the store's writer, on one
asyncio loop. The first line it reads is ``{"op": "init", "config": {...}, "tuning": {...}, "root_dir": ...}``
(the server's ``AstroConfig`` values, the internal ``Tuning`` it was given, and the Jupyter root); it answers ``{"ready": pid}`` or dies
with the reason on stderr. Every request names its ``owner`` (the server authenticated the
user); the host applies the same ownership rules as everywhere (``app/``), so a run of one
identity cannot be followed, cancelled or answered by another.

The channel's file descriptors are moved off 0 and 1 before anything else runs: a stray
``print`` then lands on stderr and a tool's subprocess inherits ``/dev/null``, neither can
corrupt the channel.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path, PurePosixPath
from typing import Any

from ..errors import AstroError, NotebookError
from ..app.event_batches import sse_blocks
from .channel import LINE_LIMIT, error_payload, frames_message, message


class ChannelNotebookBackend:
    """Notebook tools of sidebar runs: the server's ContentsManager and kernels, asked over the channel."""

    where = "contents"

    def __init__(self, host: "Host", root: str) -> None:
        self.host = host
        self.root = Path(root)

    def client_path(self, path: Path) -> str | None:
        try:
            rel = path.relative_to(self.root)
        except ValueError:
            return None
        return PurePosixPath(*rel.parts).as_posix()

    def real_path(self, api_path: str) -> Path:
        return self.root.joinpath(*PurePosixPath(api_path).parts)

    async def _call(self, method: str, **args: Any) -> Any:
        return await self.host.call_server("notebook", method=method, **args)

    async def load(self, path: Path, *, for_edit: bool = False) -> Any:
        return _node(await self._call("load", path=str(path), for_edit=for_edit))

    async def save(self, path: Path, nb: Any, *, run_id: str) -> None:
        await self._call("save", path=str(path), nb=nb, run_id=run_id)

    async def execute(self, path: Path, nb: Any, index: int, *, run_id: str) -> Any:
        return _node(await self._call("execute", path=str(path), nb=nb, index=index, run_id=run_id))

    async def release_run(self, run_id: str) -> None:
        """Called as every run ends: never fails the run's end (a server that is gone has no clients left)."""
        try:
            await self._call("release_run", run_id=run_id)
        except AstroError as exc:
            print(f"astro host: releasing the kernels of {run_id} failed: {exc}", file=sys.stderr)

    async def aclose(self) -> None:
        return None  # the server closes its kernel clients itself


def _node(value: Any) -> Any:
    if value is None:
        return None
    import nbformat

    return nbformat.from_dict(value)


class Host:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.app: Any = None
        self._calls: dict[int, asyncio.Future[Any]] = {}
        self._next_call = 0
        self._streams: dict[int, asyncio.Task[None]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self.closing = False  # the server is gone or stopping us: no more calls to it

    # -- writing ----------------------------------------------------------------------------------
    def send(self, payload: dict[str, Any]) -> None:
        self.writer.write(message(payload))

    async def call_server(self, op: str, **payload: Any) -> Any:
        """A request to the server (it owns the ContentsManager and the kernels)."""
        from .channel import error_from

        if self.closing:
            raise NotebookError("the Jupyter server is gone; notebooks cannot be reached")
        self._next_call += 1
        call = self._next_call
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._calls[call] = future
        try:
            self.send({"call": call, "op": op, **payload})
            await self.writer.drain()
            reply = await future
        finally:
            self._calls.pop(call, None)
        if "error" in reply:
            raise error_from(reply["error"])
        return reply.get("ok")

    # -- lifecycle --------------------------------------------------------------------------------
    async def start(self, init: dict[str, Any]) -> None:
        from ..app import AstroApp
        from ..config import AstroConfig
        from ..services.container import Tuning
        from ..services.notebooks import NotebookService

        config = AstroConfig(**init.get("config", {}))
        self.app = AstroApp(config, serve=False, source=str(init.get("source") or "sidebar"),
                            tuning=Tuning.from_wire(init.get("tuning")))
        self.app.services.notebooks = NotebookService(config, ChannelNotebookBackend(self, str(init.get("root_dir") or os.getcwd())))
        await self.app.start()
        await self.app.runtime.start()  # runs a dead host left 'running' are closed as interrupted
        if config.llm_configured:  # openai imported before "ready": not inside the first model list or turn
            self.app.runtime.llm.prepare()

    def warm(self) -> None:
        """Import the tool families in a thread once the host is ready: the first run builds every tool's
        definition, and a prompt sent a moment after the sidebar opened then finds them imported instead
        of importing them on the loop before its first token (a prompt sent at once waits on the import
        lock, which is no later than importing them itself). Not before "ready": the sidebar's model list
        waits on that."""
        from ..app.core import import_run_modules

        async def warm() -> None:
            try:
                await asyncio.to_thread(import_run_modules)
            except Exception as exc:  # noqa: BLE001 - the first run imports them again and reports it there
                print(f"astro host: importing the tool families failed: {type(exc).__name__}: {exc}", file=sys.stderr)

        task = asyncio.create_task(warm())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def serve(self) -> None:
        while True:
            line = await self.reader.readline()
            if not line:
                break  # the server is gone (or closed the pipe to stop us)
            try:
                request = json.loads(line)
            except ValueError:
                print(f"astro host: not a JSON line: {line[:200]!r}", file=sys.stderr)
                continue
            if "reply" in request:
                future = self._calls.get(int(request["reply"]))
                if future is not None and not future.done():
                    future.set_result(request)
            elif request.get("op") == "unsubscribe":
                task = self._streams.pop(int(request.get("stream", -1)), None)
                if task is not None:
                    task.cancel()
            else:
                task = asyncio.create_task(self.handle(request))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        self.closing = True
        for task in list(self._streams.values()):
            task.cancel()
        for future in self._calls.values():
            if not future.done():
                future.set_result({"error": {"type": "NotebookError", "message": "the Jupyter server is gone"}})
        if self.app is not None:
            await self.app.close()

    # -- requests ---------------------------------------------------------------------------------
    async def handle(self, request: dict[str, Any]) -> None:
        rid = request.get("id")
        try:
            result = await self.dispatch(request)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # noqa: BLE001 - every failure goes back to the caller as data
            self.send({"id": rid, "error": error_payload(exc)})
        else:
            if result is not _STREAMING:
                self.send({"id": rid, "ok": result})
        await self.writer.drain()

    async def dispatch(self, request: dict[str, Any]) -> Any:
        app = self.app
        op = request.get("op")
        owner = request.get("owner")
        if not isinstance(owner, str):
            raise PermissionError("every request to the agent host names its owner")
        if op == "start_run":
            handle = await app.start_run_handle(owner, request.get("prompt"), **request.get("args", {}))
            self._watch(handle)
            return {"run_id": str(handle.run_id), "session_id": str(handle.session_id)}
        if op == "subscribe":
            stream = await app.run_events(owner, str(request["run_id"]), int(request.get("after") or 0),
                                          pace=float(request.get("pace") or 0.0))
            if stream is None:
                return None
            self.send({"id": request.get("id"), "ok": {"stream": request["id"]}})
            task = asyncio.create_task(self._pump(int(request["id"]), stream))
            self._streams[int(request["id"])] = task
            return _STREAMING
        if op == "cancel":
            return await app.cancel_run(owner, str(request["run_id"]))
        if op == "answer":
            return await app.answer(owner, str(request["run_id"]), str(request["request_id"]), request.get("answer"))
        if op == "list_models":  # with the model runs use now (a fallback switch changes it here)
            try:
                return {"models": await app.endpoint_models(), "current": str(app._llm().model)}
            except asyncio.TimeoutError:
                return {"models": [], "current": str(app._llm().model), "timed_out": True}
        if op == "settle":
            await app.settle_session(str(request["session_id"]))
            return True
        raise ValueError(f"unknown request {op!r}")

    def _watch(self, handle: Any) -> None:
        """Tell the server when a run is over and all its events are stored (then it may read them there)."""

        async def watch() -> None:
            try:
                await handle.wait()
                await handle.bus.aclose()
            finally:
                self.send({"run_ended": str(handle.run_id)})

        task = asyncio.create_task(watch())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _pump(self, sid: int, stream: Any) -> None:
        """One subscription: each batch of already-encoded events as SSE blocks, one write per batch
        (the server forwards the blocks as they are)."""
        error = None
        try:
            async for batch in stream:
                if batch:
                    self.writer.write(frames_message(sid, sse_blocks(batch)))
                    await self.writer.drain()
        except asyncio.CancelledError:
            return
        except Exception as exc:  # noqa: BLE001 - reported to the SSE client
            error = str(exc) or type(exc).__name__
        finally:
            self._streams.pop(sid, None)
            closer = getattr(stream, "aclose", None)
            if closer is not None:
                try:
                    await closer()
                except Exception:  # noqa: BLE001
                    pass
        self.send({"end": sid, **({"error": error} if error else {})})


# How much lower than the server's the host's CPU priority is (niceness added to the inherited one).
# Why: the server's request path is interactive (JupyterLab's file browser, a kernel's websocket, the
# sidebar's own lists wait on it); the host's work is background work a person reads at reading speed.
# Both are CPU-bound in short bursts on the same cores; at equal priority the scheduler shares them
# evenly, so a burst of 20 streaming runs in the host delays the server's next request by whole time
# slices. Ten steps lower (CFS weight 110 against 1024) the server is picked first whenever both are
# ready, yet the host still gets every core the server leaves idle: a run slows only while Jupyter
# itself is busy. The start (imports, opening the store) keeps the server's priority: a person's first
# prompt waits on it. Tools the host runs (run_bash, ...) inherit the lower priority, as background
# work should; kernels are the server's children and keep its priority. An unprivileged process cannot
# raise its priority again, so nothing in the host (a tool, a hook) can take the server's place back.
# Where Linux groups scheduling by session (autogroup, the default on desktops) or by cgroup (a hub's
# per-user container), niceness orders threads within the group only: the host yields to its own
# server and kernels, not to other users' processes, which it keeps competing with as before.
HOST_NICE_INCREMENT = 10
PROFILE_ENV = "ASTRO_HOST_PROFILE"  # a file: the host runs under cProfile and writes its stats there at exit


def lower_priority() -> int | None:
    """Lower the host's CPU priority below the server's; returns the new niceness (None: not supported).

    Every thread, not only this one: on Linux a niceness belongs to a thread, and the store's
    connection thread and the executor's threads exist by now (new threads inherit their creator's)."""
    if not hasattr(os, "setpriority"):
        return None  # Windows: the host runs at the server's priority, which works, only with more contention
    try:
        target = min(19, os.getpriority(os.PRIO_PROCESS, 0) + HOST_NICE_INCREMENT)
        os.setpriority(os.PRIO_PROCESS, 0, target)  # this thread first: the threads it starts from now inherit it
    except OSError as exc:
        print(f"astro host: could not lower the CPU priority: {exc}", file=sys.stderr)
        return None
    tasks = Path("/proc/self/task")
    for task in tasks.iterdir() if tasks.is_dir() else ():
        try:
            os.setpriority(os.PRIO_PROCESS, int(task.name), target)
        except (OSError, ValueError):  # a thread that ended meanwhile
            continue
    return target


_STREAMING = object()
STOP_GRACE_SECS = 5.0  # a stop (or the server's death) cancels the runs; after this long the host exits anyway


def _die_with_parent() -> None:
    """Linux: SIGTERM when the server dies (stdin EOF says the same, this also covers a wedged read)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _take_channel_fds() -> tuple[int, int]:
    """The channel on private descriptors; 0 becomes /dev/null and 1 a copy of stderr."""
    channel_in, channel_out = os.dup(0), os.dup(1)  # dup'ed descriptors are not inherited by children
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    return channel_in, channel_out


async def run(channel_in: int, channel_out: int) -> int:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=LINE_LIMIT)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(channel_in, "rb", 0))
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, os.fdopen(channel_out, "wb", 0))
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    host = Host(reader, writer)
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    first = await reader.readline()
    if not first:
        return 0
    init = json.loads(first)
    await host.start(init)
    lower_priority()  # after the start, which the first prompt waits on; before "ready", so it holds for every run
    host.send({"ready": os.getpid()})
    await writer.drain()
    host.warm()
    serving = asyncio.create_task(host.serve())
    stopping = asyncio.create_task(stop.wait())
    await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
    serving.cancel()
    stopping.cancel()
    try:
        await asyncio.wait_for(host.close(), STOP_GRACE_SECS)
    except asyncio.TimeoutError:
        print(f"astro host: the runs did not stop within {STOP_GRACE_SECS} s; exiting (the next start closes them)",
              file=sys.stderr)
        os._exit(1)  # no orphan: never wait on a run that does not end
    return 0


def main() -> int:
    channel_in, channel_out = _take_channel_fds()
    _die_with_parent()
    import logging

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="astro host %(levelname)s %(name)s: %(message)s")
    profile_to = os.environ.get(PROFILE_ENV)
    if not profile_to:
        return asyncio.run(run(channel_in, channel_out))
    import cProfile  # a profiling run only (benchmarks): what the host spends per streamed event

    profiler = cProfile.Profile(time.thread_time)  # CPU time of the loop thread: preemption is not cost
    try:
        return profiler.runcall(asyncio.run, run(channel_in, channel_out))
    finally:
        profiler.dump_stats(profile_to)
