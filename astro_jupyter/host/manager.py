"""The server's side of the agent host: start it, talk to it, notice when it dies, stop it.

Managed the way jupyter_server manages a kernel: started on first use, started again by the
next request after it died, stopped with the server. The host's stdin is its lifeline (it
exits on end-of-file, so even ``kill -9`` of the server leaves no orphan). The last lines of
its stderr are kept: a host that cannot start is reported with them.
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import os
import sys
import time
from typing import Any, AsyncIterator, Awaitable, Callable

from ..errors import AstroError
from ..app.event_batches import Frames
from .channel import LINE_LIMIT, STDERR_TAIL_LINES, error_from, message, parse_frames_header

log = logging.getLogger(__name__)

START_TIMEOUT_SECS = 120.0  # imports + opening the store on a loaded 2-core machine
STOP_TIMEOUT_SECS = 10.0  # a clean stop cancels the runs and closes the store
_DIED = object()

CallHandler = Callable[[dict[str, Any]], Awaitable[Any]]


class AgentHostError(AstroError):
    """The agent host could not start, or stopped while a request was open (503: try again)."""

    reason = "agent_host"


class AgentHostDied(AgentHostError):
    reason = "agent_host_died"


class AgentHost:
    """One agent host process and its channel."""

    def __init__(self, config: Any, *, root_dir: str = "", source: str = "sidebar",
                 on_call: CallHandler | None = None, on_death: Callable[[dict[str, str]], Awaitable[None]] | None = None,
                 argv: list[str] | None = None, tuning: Any = None) -> None:
        self.config = config
        self.tuning = tuning  # services.container.Tuning: internal knobs (tests), sent to the host with the settings
        self.root_dir = root_dir
        self.source = source
        self.on_call = on_call
        self.on_death = on_death
        # -P: the server's working directory is not put on the host's import path (a notebook folder's
        # modules must not shadow the agent's)
        self.argv = argv or [sys.executable, *(["-P"] if sys.version_info >= (3, 11) else []), "-m", "astro_jupyter.host"]
        self.proc: asyncio.subprocess.Process | None = None
        self.runs: dict[str, str] = {}  # live run id -> session id, in the current host
        self.starts = 0  # hosts started so far (a restart is starts > 1)
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        self._lock = asyncio.Lock()
        self._pending: dict[int, tuple[str, asyncio.Future[Any]]] = {}
        self._streams: dict[int, asyncio.Queue[Any]] = {}
        self._next = 0
        self._tasks: set[asyncio.Task[Any]] = set()
        self._recovered: asyncio.Future[None] | None = None
        self._stopping = False

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    # -- start / stop ------------------------------------------------------------------------------
    async def ensure(self) -> None:
        """A running host (started now if there is none, e.g. after the last one died)."""
        if self.alive:
            return
        async with self._lock:
            if self._recovered is not None:  # the last one's runs are closed before a new one starts
                await asyncio.shield(self._recovered)
            if not self.alive:
                await self._spawn()

    async def _spawn(self) -> None:
        started = time.monotonic()
        self.stderr_tail.clear()
        try:
            proc = await asyncio.create_subprocess_exec(
                *self.argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, limit=LINE_LIMIT, env=dict(os.environ),
            )
        except OSError as exc:
            raise AgentHostError(f"the agent host could not start: {self.argv[0]}: {exc}") from exc
        stderr_task = self._spawn_task(self._read_stderr(proc))
        assert proc.stdin is not None and proc.stdout is not None
        init = {"op": "init", "config": config_values(self.config), "root_dir": self.root_dir, "source": self.source,
                "tuning": self.tuning.to_wire() if self.tuning is not None else {}}
        try:
            proc.stdin.write(message(init))
            await proc.stdin.drain()
            line = await asyncio.wait_for(proc.stdout.readline(), START_TIMEOUT_SECS)
        except (OSError, asyncio.TimeoutError, ValueError) as exc:
            line = b""
            log.debug("agent host start: %s", exc)
        except BaseException:  # cancelled (the server stops): no half-started host left behind
            await asyncio.shield(self._spawn_task(self._kill(proc, stderr_task)))  # stop() waits for it too
            raise
        ready = _json(line)
        if "ready" not in ready:
            code = await self._kill(proc, stderr_task)
            raise AgentHostError(self.start_failure(code))
        self.proc = proc
        self.starts += 1
        self._recovered = None
        self._spawn_task(self._read(proc))
        log.info("astro_jupyter: agent host %s started in %.2f s", ready["ready"], time.monotonic() - started)

    @staticmethod
    async def _kill(proc: asyncio.subprocess.Process, stderr_task: "asyncio.Task[None]") -> int:
        """A host that never became ready: killed, its output read to the end and its exit reaped, so
        that no pipe or process outlives it (a server stopped while its host starts)."""
        if proc.returncode is None:
            proc.kill()
        assert proc.stdout is not None
        try:
            await asyncio.wait_for(proc.stdout.read(), 2)
        except (OSError, ValueError, asyncio.TimeoutError):
            pass
        code = await proc.wait()
        await asyncio.wait({stderr_task}, timeout=2)
        return code

    def start_failure(self, code: int | None) -> str:
        tail = "\n".join(self.stderr_tail) or "(nothing on stderr)"
        return (f"the agent host could not start (exit code {code}; {' '.join(self.argv[:3])}). "
                f"The end of its stderr:\n{tail}")

    async def stop(self) -> None:
        """Close the host's stdin (it cancels its runs and closes the store), then wait; kill if it hangs."""
        self._stopping = True
        proc = self.proc
        if proc is not None and proc.returncode is None:
            try:
                assert proc.stdin is not None
                proc.stdin.close()
                await asyncio.wait_for(proc.wait(), STOP_TIMEOUT_SECS)
            except (asyncio.TimeoutError, OSError):
                proc.kill()
                await proc.wait()
        for task in list(self._tasks):  # also a dead or half-started host's readers
            if not task.done():
                await asyncio.wait({task}, timeout=2)

    # -- requests ----------------------------------------------------------------------------------
    async def request(self, op: str, owner: str, **payload: Any) -> Any:
        await self.ensure()
        return await self._request(op, owner, **payload)

    async def _request(self, op: str, owner: str, **payload: Any) -> Any:
        proc = self.proc
        if proc is None or proc.returncode is not None or proc.stdin is None:
            raise AgentHostDied("the agent host is not running")
        self._next += 1
        rid = self._next
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[rid] = (op, future)
        try:
            proc.stdin.write(message({"id": rid, "op": op, "owner": owner, **payload}))
            reply = await future
        finally:
            self._pending.pop(rid, None)
        if "error" in reply:
            raise error_from(reply["error"])
        return reply.get("ok")

    async def subscribe(self, owner: str, run_id: str, after: int, pace: float = 0.0) -> AsyncIterator[Frames] | None:
        """The run's events after ``after`` as SSE bytes (everything the host sent since the last
        step, in one ``Frames``); None: the client has them all. The iterator raises
        ``AgentHostDied`` if the host dies under it. ``pace``: the host sends at most one batch per
        that many seconds while events keep coming (``event_batches.live_batches``)."""
        await self.ensure()
        rid = self._next + 1
        queue: asyncio.Queue[Any] = asyncio.Queue()
        self._streams[rid] = queue  # registered first: events may follow the reply at once
        try:
            reply = await self._request("subscribe", owner, run_id=run_id, after=after, pace=pace)
        except BaseException:
            self._streams.pop(rid, None)
            raise
        if reply is None:
            self._streams.pop(rid, None)
            return None
        return self._stream(rid, queue)

    async def _stream(self, rid: int, queue: "asyncio.Queue[Any]") -> AsyncIterator[Frames]:
        try:
            while True:
                items = [await queue.get()]
                while not queue.empty():
                    items.append(queue.get_nowait())
                batch: list[Frames] = []
                for item in items:
                    if isinstance(item, Frames):
                        batch.append(item)
                        continue
                    if batch:
                        yield _joined(batch)
                    if item is _DIED:
                        raise AgentHostDied("the agent host stopped")
                    if isinstance(item, dict) and item.get("error"):
                        raise AgentHostError(str(item["error"]))
                    return
                yield _joined(batch)
        finally:
            if self._streams.pop(rid, None) is not None and self.alive and self.proc and self.proc.stdin:
                try:
                    self.proc.stdin.write(message({"op": "unsubscribe", "stream": rid}))
                except (OSError, RuntimeError):
                    pass

    async def recovered(self) -> None:
        """Wait until the runs of a dead host are closed in the store (interrupted, error + done)."""
        if self._recovered is not None:
            await asyncio.shield(self._recovered)

    # -- reading -----------------------------------------------------------------------------------
    async def _read(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None
        while True:
            try:
                line = await proc.stdout.readline()
            except (ValueError, OSError) as exc:  # a line over the limit: the channel is broken
                log.error("astro_jupyter: agent host channel broken: %s", exc)
                proc.kill()
                line = b""
            if not line:
                break
            if line.startswith(b"F "):
                stream, last_seq, size = parse_frames_header(line)
                try:
                    data = await proc.stdout.readexactly(size)
                except (asyncio.IncompleteReadError, OSError):  # the host died mid-batch
                    break
                queue = self._streams.get(stream)
                if queue is not None:
                    queue.put_nowait(Frames(last_seq, data))
                continue
            self._dispatch(_json(line))
        await proc.wait()
        self._died(proc)

    def _dispatch(self, msg: dict[str, Any]) -> None:
        if "id" in msg:
            op, future = self._pending.get(int(msg["id"]), ("", None))
            if future is not None and not future.done():
                ok = msg.get("ok")
                if op == "start_run" and isinstance(ok, dict):  # known before any run_ended can be read
                    self.runs[str(ok["run_id"])] = str(ok["session_id"])
                future.set_result(msg)
        elif "end" in msg:
            queue = self._streams.get(int(msg["end"]))
            if queue is not None:
                queue.put_nowait(msg)
        elif "run_ended" in msg:
            self.runs.pop(str(msg["run_ended"]), None)
        elif "call" in msg:
            self._spawn_task(self._answer_call(msg))

    async def _answer_call(self, msg: dict[str, Any]) -> None:
        from .channel import error_payload

        try:
            if self.on_call is None:
                raise AgentHostError(f"the server does not answer {msg.get('op')!r}")
            reply: dict[str, Any] = {"reply": msg["call"], "ok": await self.on_call(msg)}
        except Exception as exc:  # noqa: BLE001 - the host's tool gets the error
            reply = {"reply": msg["call"], "error": error_payload(exc)}
        proc = self.proc
        if proc is not None and proc.returncode is None and proc.stdin is not None:
            proc.stdin.write(message(reply))

    def _died(self, proc: asyncio.subprocess.Process) -> None:
        if self.proc is proc:
            self.proc = None
        dead_runs, self.runs = self.runs, {}
        for _, future in list(self._pending.values()):
            if not future.done():
                future.set_exception(AgentHostDied("the agent host stopped before it answered"))
        for queue in self._streams.values():
            queue.put_nowait(_DIED)
        if self._stopping:
            return
        log.error("astro_jupyter: the agent host (pid %s) died with exit code %s; %d run(s) were interrupted. "
                  "Its stderr ended with:\n%s", proc.pid, proc.returncode, len(dead_runs), "\n".join(self.stderr_tail))
        self._recovered = asyncio.get_running_loop().create_future()
        self._spawn_task(self._recover(dead_runs, self._recovered))

    async def _recover(self, dead_runs: dict[str, str], done: "asyncio.Future[None]") -> None:
        try:
            if self.on_death is not None:
                await self.on_death(dead_runs)
        except Exception:  # noqa: BLE001
            log.exception("closing the runs of a dead agent host failed")
        finally:
            done.set_result(None)

    async def _read_stderr(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stderr is not None
        while True:
            try:
                line = await proc.stderr.readline()
            except (ValueError, OSError):
                continue
            if not line:
                return
            text = line.decode("utf-8", "replace").rstrip()
            self.stderr_tail.append(text)
            log.warning("astro host: %s", text)

    def _spawn_task(self, coro: Awaitable[Any]) -> "asyncio.Task[Any]":
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task


def _joined(frames: list[Frames]) -> Frames:
    return frames[0] if len(frames) == 1 else Frames(frames[-1].last_seq, b"".join([f.data for f in frames]))


def config_values(config: Any) -> dict[str, Any]:
    """The settings the host is built with: every configurable trait, JSON-safe."""
    values = {name: getattr(config, name) for name in config.trait_names(config=True)}
    return json.loads(json.dumps(values, default=str))


def _json(line: bytes) -> dict[str, Any]:
    try:
        value = json.loads(line) if line else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
