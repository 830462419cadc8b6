"""LLM streams read in a helper process (``llm/io_worker.py``), parsed chunks relayed back.

Why: the I/O thread (``io_thread.py``) took the streams' HTTP and JSON work off the server's
event loop, but not off its interpreter: with 20 runs streaming, the server process sat at one
core of Python, and every request waited for the GIL (``GET astro/api/sessions`` p95 31-42 ms,
benchmarks/bench_server_load.py). Here a child process does the socket reads, HTTP chunking,
SSE decoding, JSON parsing and shape checks; this process only reads one JSON line per batch of
checked chunks from a pipe.

The protocol is JSON lines over the child's stdin/stdout (no listener, nothing on the network):

* to the worker: ``{"op": "open", "id", "endpoint": {base_url, api_key, timeout}, "model", "body"}``
  and ``{"op": "cancel", "id"}``;
* from the worker: ``{"id", "views": [...]}`` (chunks, ``shape.encode_view``), ``{"id", "end": true}``
  and ``{"id", "error": {...}}`` (classified there, re-raised here as :class:`RemoteLlmFailure`
  or ``MalformedChunk`` so retries and messages behave exactly as in-process).

The worker starts on first use and is started again after it dies; streams that were open
when it died end with a connection error (retried like a dropped connection). It exits when
this process closes the pipe, including when this process is killed.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import queue
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, AsyncIterator

from ..errors import ServiceError
from .io_thread import Relay
from .shape import ChunkView, MalformedChunk, decode_view

log = logging.getLogger(__name__)


class RemoteLlmFailure(ServiceError):
    """An error the worker met talking to the endpoint, as the worker classified it (the client's
    ``_Failure`` reads these fields instead of an ``openai`` exception)."""

    def __init__(self, message: str, *, status: int | None = None, timeout: bool = False,
                 connection: bool = False, api: bool = True, unreachable: str = "") -> None:
        super().__init__(message)
        self.unreachable = unreachable  # why no connection opened (refused, no route, unknown host): not retried
        self.message = message
        self.status = status
        self.timeout = timeout
        self.connection = connection
        self.api = api


@dataclass(frozen=True)
class Endpoint:
    """What the worker needs to build (and cache) its ``openai.AsyncOpenAI`` client."""

    base_url: str | None
    api_key: str
    timeout: float
    batch_ms: float = 0.0  # how long the worker gathers chunks before one write (``llm_io_batch_ms``)


# Started with ``-c``: the server's working directory is the user's (a notebook folder with a
# ``json.py`` or ``random.py`` in it), so it is dropped from the path before anything is imported;
# the package's own folder is added only when the interpreter would not find it (a source checkout).
_BOOT = (
    "import sys\n"
    "if sys.path and sys.path[0] in ('', '.'):\n"
    "    del sys.path[0]\n"
    "if sys.argv[1] not in sys.path:\n"
    "    sys.path.insert(0, sys.argv[1])\n"
    "from astro_jupyter.llm.io_worker import main\n"
    "main()\n"
)


class _Worker:
    """One running worker process, with its reader and writer threads."""

    def __init__(self, owner: "LlmProcess") -> None:
        package_parent = str(Path(__file__).resolve().parents[2])  # the same astro_jupyter as this one
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _BOOT, package_parent],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            start_new_session=True,  # Ctrl+C in the server's terminal must not kill the streams under it
        )
        self.outbox: "queue.SimpleQueue[dict[str, Any] | None]" = queue.SimpleQueue()
        self.owner = owner
        threading.Thread(target=self._write_frames, name="astro-llm-process-writer", daemon=True).start()
        threading.Thread(target=owner._read, args=(self,), name="astro-llm-process-reader", daemon=True).start()
        log.info("astro_jupyter: LLM streams are read in process %d", self.proc.pid)

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def send(self, frame: dict[str, Any]) -> None:
        """Queue a frame: encoding a long history and writing it to the pipe happen off the caller's loop."""
        self.outbox.put(frame)

    def _write_frames(self) -> None:
        stdin = self.proc.stdin
        assert stdin is not None
        while True:
            frame = self.outbox.get()
            if frame is None:
                try:
                    stdin.close()
                except OSError:
                    pass
                return
            try:
                line = json.dumps(frame, separators=(",", ":")).encode() + b"\n"
            except (TypeError, ValueError) as exc:  # not JSON: that request fails, the others go on
                self.owner._end(frame.get("id"), TypeError(f"the request could not be encoded as JSON: {exc}"))
                continue
            try:
                stdin.write(line)
                stdin.flush()
            except (OSError, ValueError):  # it died: its reader sees EOF and ends what was open there
                self.proc.kill()
                return

    def close(self) -> None:
        self.outbox.put(None)


class LlmProcess:
    """The helper process and the streams open in it; usable from any thread and event loop."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # the worker and the stream table
        self._worker: _Worker | None = None
        self._relays: dict[int, tuple[Relay[ChunkView], _Worker]] = {}  # id -> (relay, the worker reading it)
        self._ids = itertools.count(1)

    @property
    def pid(self) -> int | None:
        worker = self._worker
        return worker.proc.pid if worker is not None and worker.alive else None

    def _alive(self) -> _Worker:
        """The running worker (started if there is none); call with the lock held."""
        if self._worker is None or not self._worker.alive:
            self._worker = _Worker(self)
        return self._worker

    def _read(self, worker: _Worker) -> None:
        """A worker's reader thread: dispatch each line to its stream until the worker's stdout closes.

        Whatever one read returns is dispatched together, and the consumers' loops are woken once
        for all of it (``Relay.wake_all``).
        """
        out = worker.proc.stdout
        assert out is not None
        pending = b""
        try:
            while True:
                data = out.read1(1 << 16)  # type: ignore[attr-defined]
                if not data:
                    return
                *lines, pending = (pending + data).split(b"\n")
                woken: list[Relay[ChunkView]] = []
                for line in lines:
                    try:
                        self._dispatch(json.loads(line), woken)
                    except Exception:  # noqa: BLE001 - one bad line must not end every other stream
                        log.exception("astro_jupyter: unreadable line from the LLM I/O process: %r", line[:200])
                Relay.wake_all(woken)
        finally:
            code = worker.proc.wait()
            with self._lock:
                orphans = [rid for rid, (_, owner) in self._relays.items() if owner is worker]
                relays = [self._relays.pop(rid)[0] for rid in orphans]
                if self._worker is worker:
                    self._worker = None
            for relay in relays:
                relay.finish(RemoteLlmFailure(f"the LLM I/O process exited (code {code})", connection=True))

    def _dispatch(self, frame: dict[str, Any], woken: list[Relay[ChunkView]]) -> None:
        rid = frame.get("id")
        if "views" in frame:
            entry = self._relays.get(rid)  # type: ignore[arg-type]
            if entry is not None:
                try:
                    views = [decode_view(v) for v in frame["views"]]
                except (TypeError, ValueError) as exc:
                    self._end(rid, MalformedChunk(f"the LLM I/O process sent an unreadable chunk ({exc})"))
                else:
                    if entry[0].add(views):
                        woken.append(entry[0])
            return
        error = frame.get("error")
        if not error:
            self._end(rid, None)
        elif isinstance(error, dict) and error.get("malformed"):
            self._end(rid, MalformedChunk(str(error.get("message"))))
        elif isinstance(error, dict):
            status = error.get("status")
            self._end(rid, RemoteLlmFailure(
                str(error.get("message") or "the LLM request failed"),
                status=status if isinstance(status, int) else None, timeout=bool(error.get("timeout")),
                connection=bool(error.get("connection")), api=bool(error.get("api")),
                unreachable=str(error.get("unreachable") or ""),
            ))

    def _end(self, rid: Any, error: BaseException | None) -> None:
        with self._lock:
            entry = self._relays.pop(rid, None)
        if entry is not None:  # None: cancelled meanwhile
            entry[0].finish(error)

    # -- streams ---------------------------------------------------------------------------
    def _open(self, relay: Relay[ChunkView], endpoint: Endpoint, model: str, body: dict[str, Any]) -> int:
        with self._lock:
            rid = next(self._ids)
            try:
                worker = self._alive()
            except OSError as exc:  # the interpreter could not be started
                relay.finish(RemoteLlmFailure(f"cannot start the LLM I/O process: {exc}", connection=True))
                return rid
            self._relays[rid] = (relay, worker)  # before the frame goes: the first answer may come at once
        worker.send({"op": "open", "id": rid, "endpoint": endpoint.__dict__, "model": model, "body": body})
        return rid

    def _cancel(self, rid: int) -> None:
        with self._lock:
            entry = self._relays.pop(rid, None)
        if entry is not None and entry[1].alive:  # None: it ended already
            entry[1].send({"op": "cancel", "id": rid})

    async def stream(self, endpoint: Endpoint, model: str, body: dict[str, Any]) -> AsyncIterator[ChunkView]:
        """The checked chunks of one chat-completions stream, read in the worker.

        Closing this generator early (the run was cancelled, or its deadline passed) tells the
        worker to hang up the HTTP stream.
        """
        relay: Relay[ChunkView] = Relay(asyncio.get_running_loop())
        rid = self._open(relay, endpoint, model, body)
        try:
            async for batch in relay.batches():
                for view in batch:
                    yield view
        finally:
            self._cancel(rid)

    def stop(self, timeout: float = 5.0) -> None:
        """Close the worker's stdin (it exits) and wait; a later stream starts a new worker."""
        with self._lock:
            worker, self._worker = self._worker, None
        if worker is None:
            return
        worker.close()
        try:
            worker.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            worker.proc.kill()
            worker.proc.wait()


LLM_PROCESS = LlmProcess()
