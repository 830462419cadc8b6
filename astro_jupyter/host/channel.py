"""The one channel between the Jupyter server and its agent host: lines over the host's stdin/stdout.

Why pipes: the host is the server's child and nobody else's, so a pipe needs no address,
no file permissions and no authentication (a unix socket in a shared directory needs all
three), and the pipe is also the host's lifeline: when the server dies, even by ``kill -9``,
the host reads end-of-file and shuts down. Both ends are asyncio streams.

Two kinds of line, told apart by their first byte:

* ``{...}``: a JSON object, a control message. Requests carry ``id`` and get one reply
  ``{"id", "ok"}`` or ``{"id", "error": {"type", "message", "reason", "status"}}``; the host's
  own requests to the server (notebook calls) carry ``call`` and get ``{"reply", ...}``;
  notices (``ready``, ``run_ended``, ``end`` of a stream) carry neither.
* ``F <stream> <last seq> <size>`` and then ``size`` bytes: one batch of events of a subscribed
  run, already written as SSE blocks (``id:`` + ``data:``, ``event_batches.sse_blocks``) from the
  JSON the host encoded once. The server reads the bytes in one call and hands them to the SSE
  response as they are: per batch one header line, nothing per event (a line per event cost the
  server a read, a split, a decode, a queue hop and an SSE block each).
"""

from __future__ import annotations

import json
from typing import Any

from .. import errors
from ..app.event_batches import Frames
from ..errors import AstroError

LINE_LIMIT = 1 << 26  # one line may hold a large tool result; asyncio's default (64 KiB) would not do
STDERR_TAIL_LINES = 40  # what a failed start shows of the host's stderr


def message(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"), default=str).encode("utf-8") + b"\n"


def frames_message(stream: int, frames: Frames) -> bytes:
    """The header line and the SSE bytes of one batch, as one write."""
    return b"".join((f"F {stream} {frames.last_seq} {len(frames.data)}\n".encode("ascii"), frames.data))


def parse_frames_header(line: bytes) -> tuple[int, int, int]:
    """``(stream, last seq, size of the bytes that follow)`` of an ``F`` line."""
    _, stream, last_seq, size = line.split()
    return int(stream), int(last_seq), int(size)


def error_payload(exc: BaseException) -> dict[str, Any]:
    """An exception as data; only the project's own errors keep their type (and so their HTTP status)."""
    if isinstance(exc, AstroError):
        return {"type": f"{type(exc).__module__}.{type(exc).__qualname__}", "message": str(exc), "reason": exc.reason,
                "status": getattr(exc, "status", None), "retry_after": getattr(exc, "retry_after", None)}
    return {"type": "AstroError", "message": f"the agent host failed: {type(exc).__name__}: {exc}", "reason": "host"}


def _error_classes() -> dict[str, type[AstroError]]:
    """Every class of the exception tree by its full name (subclasses live beside the code that raises them,
    e.g. ``app.runs.TooManyRuns``); both ends import the same package, so the names agree."""
    found: dict[str, type[AstroError]] = {}
    todo: list[type[AstroError]] = [AstroError]
    while todo:
        cls = todo.pop()
        found[f"{cls.__module__}.{cls.__qualname__}"] = cls
        todo.extend(cls.__subclasses__())
    return found


def error_from(payload: dict[str, Any]) -> AstroError:
    """The error a host reply describes, as the same class on this side (unknown names: ``AstroError``)."""
    name = str(payload.get("type"))
    cls = _error_classes().get(name) or getattr(errors, name, None)
    if not (isinstance(cls, type) and issubclass(cls, AstroError)):
        cls = AstroError
    exc = cls.__new__(cls)
    Exception.__init__(exc, str(payload.get("message") or cls.__name__))
    if payload.get("reason"):
        exc.reason = str(payload["reason"])
    if isinstance(payload.get("status"), int):
        exc.status = payload["status"]  # type: ignore[attr-defined]
    if isinstance(payload.get("retry_after"), (int, float)):
        exc.retry_after = float(payload["retry_after"])  # type: ignore[attr-defined]
    return exc
