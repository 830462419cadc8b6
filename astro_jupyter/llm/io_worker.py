"""The LLM I/O process, started by ``io_process`` (``python -m astro_jupyter.llm.io_worker`` runs one by hand).

Reads request frames (JSON lines) on stdin, streams each chat completion through the real
``openai`` client, checks every chunk (``shape.read_chunk``) and writes the checked chunks back
as JSON lines on stdout, batched: whatever arrived for a stream during one pass of the event
loop (or, with ``llm_io_batch_ms``, during that many milliseconds for all streams) goes out in
one write. Errors are classified here (``client.failure_fields``) because the
``openai`` exception objects do not cross a pipe. Exits when stdin closes (the server exited
or was killed).
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import sys
import threading
from typing import Any, BinaryIO

from .client import failure_fields, read_chat_stream
from .shape import ChunkView, MalformedChunk, encode_view

_MAX_CLIENTS = 8  # endpoints kept open at once (a server talks to one or two; tests to many)


class Worker:
    def __init__(self, out: BinaryIO) -> None:
        self.loop = asyncio.get_running_loop()
        self.out = out
        self.tasks: dict[int, asyncio.Task[None]] = {}
        self.clients: collections.OrderedDict[tuple[Any, ...], Any] = collections.OrderedDict()
        self.streaming: collections.Counter[tuple[Any, ...]] = collections.Counter()  # open streams per client
        self.pending: dict[int, list[Any]] = {}
        self.ends: list[dict[str, Any]] = []
        self.flush_scheduled = False
        self.batch_secs = 0.0  # the latest request's ``batch_ms``: one server, one setting
        self.closed = asyncio.Event()  # stdin closed, or stdout gone: the server exited

    # -- output, batched per pass of the loop ------------------------------------------------
    def _schedule_flush(self, now: bool = False) -> None:
        if not self.flush_scheduled:
            self.flush_scheduled = True
            if now or self.batch_secs <= 0:
                self.loop.call_soon(self._flush)
            else:
                self.loop.call_later(self.batch_secs, self._flush)

    def _flush(self) -> None:
        self.flush_scheduled = False
        lines = [json.dumps({"id": rid, "views": views}, separators=(",", ":")) for rid, views in self.pending.items()]
        lines += [json.dumps(end, separators=(",", ":")) for end in self.ends]  # after the stream's last views
        self.pending.clear()
        self.ends.clear()
        if lines and not self.closed.is_set():
            try:
                self.out.write(("\n".join(lines) + "\n").encode())
                self.out.flush()
            except OSError:  # the server is gone (its end of the pipe closed): nobody to stream for
                self.closed.set()

    def _put(self, rid: int, view: ChunkView) -> None:
        self.pending.setdefault(rid, []).append(encode_view(view))
        self._schedule_flush()

    def _end(self, frame: dict[str, Any]) -> None:
        self.ends.append(frame)
        self._schedule_flush(now=not self.pending)  # an error before any chunk goes at once

    # -- requests ------------------------------------------------------------------------------
    def _key(self, endpoint: dict[str, Any]) -> tuple[Any, ...]:
        return (endpoint.get("base_url"), endpoint.get("api_key"), endpoint.get("timeout"))

    def _client(self, key: tuple[Any, ...]) -> Any:
        """The cached client for an endpoint; the least recently used idle one is closed past ``_MAX_CLIENTS``."""
        import openai

        client = self.clients.pop(key, None)
        if client is None:
            client = openai.AsyncOpenAI(base_url=key[0] or None, api_key=key[1] or "not-set", max_retries=0,
                                        timeout=float(key[2] or 120.0))
            idle = [k for k in self.clients if not self.streaming[k]]
            if len(self.clients) >= _MAX_CLIENTS and idle:
                self.loop.create_task(self.clients.pop(idle[0]).close())
        self.clients[key] = client
        return client

    def handle(self, frame: dict[str, Any]) -> None:
        rid = frame.get("id")
        if not isinstance(rid, int):
            return
        if frame.get("op") == "cancel":
            task = self.tasks.pop(rid, None)
            if task is not None:
                task.cancel()
        elif frame.get("op") == "open":
            self.tasks[rid] = self.loop.create_task(self._stream(rid, frame))

    async def _stream(self, rid: int, frame: dict[str, Any]) -> None:
        endpoint = frame.get("endpoint") or {}
        key = self._key(endpoint)
        batch_ms = endpoint.get("batch_ms")
        if isinstance(batch_ms, (int, float)) and 0 <= batch_ms <= 1000:
            self.batch_secs = batch_ms / 1000
        self.streaming[key] += 1  # never closed under an open stream
        try:
            await read_chat_stream(self._client(key), str(frame.get("model")), frame.get("body") or {},
                                   lambda view: self._put(rid, view))
        except asyncio.CancelledError:
            self.pending.pop(rid, None)  # the reader hung up: nothing more is wanted
            return
        except MalformedChunk as exc:
            self._end({"id": rid, "error": {"malformed": True, "message": str(exc)}})
        except Exception as exc:  # noqa: BLE001 - classified here, re-raised in the server process
            self._end({"id": rid, "error": failure_fields(exc)})
        else:
            self._end({"id": rid, "end": True})
        finally:
            self.tasks.pop(rid, None)
            self.streaming[key] -= 1


async def serve(stdin: BinaryIO, out: BinaryIO) -> None:
    worker = Worker(out)

    def read_frames() -> None:  # blocking reads on a thread: a request body can be megabytes
        try:
            for line in stdin:
                try:
                    frame = json.loads(line)
                except ValueError:
                    continue
                if isinstance(frame, dict):
                    worker.loop.call_soon_threadsafe(worker.handle, frame)
        finally:
            worker.loop.call_soon_threadsafe(worker.closed.set)

    threading.Thread(target=read_frames, name="astro-llm-requests", daemon=True).start()
    await worker.closed.wait()
    for task in list(worker.tasks.values()):
        task.cancel()


def main() -> None:
    # The protocol owns stdout: anything a library prints goes to stderr instead.
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    asyncio.run(serve(sys.stdin.buffer, out))


if __name__ == "__main__":
    main()
