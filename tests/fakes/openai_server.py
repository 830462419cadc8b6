"""A scripted OpenAI-compatible server on loopback, driven by the real ``openai`` client.

The script is a queue of :class:`Turn` objects, one consumed per chat-completions request:
streamed text (several chunks), tool calls (arguments split across chunks, several per
turn), reasoning deltas (``delta.reasoning_content``), injected HTTP errors (429, 529
"overloaded", 503, 500), an error event in the middle of a stream, a slow stream (delay per
chunk), a malformed chunk, hand-made chunk payloads (``Turn.raw``: wrong types, wrong
shapes) and SSE keep-alive comments for a while (``keepalive_secs``), a model that never stops (``endless``: it
stops only at the request's ``max_tokens``, with ``finish_reason: "length"``), fragments repeating
the call's id and name, no usage chunk. The server side of a local model is there too: ``props``
(llama.cpp ``GET /props``), ``ollama_show`` (``POST /api/show``), ``model_extra`` (vLLM's
``max_model_len``), ``n_ctx`` with the context-length error of llama.cpp, vLLM or OpenAI, and
``/v1/embeddings`` answering an error (``embeddings_status``). When the queue is empty, ``responder(request_json) -> Turn``
(if set) decides, so a test can react to the tool results it sees; otherwise the server
answers 400 "script exhausted" (not retried by clients, so a test fails loudly).

SSE chunks are written one by one (chunked transfer encoding, TCP_NODELAY) so the client
really sees an incremental stream. Every request is recorded: ``server.requests`` are the
raw :class:`RecordedRequest`s, ``server.chat_requests`` the decoded JSON bodies.
"""

from __future__ import annotations

import collections
import hashlib
import itertools
import json
import math
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from .base import FakeHandler, FakeServer

_ids = itertools.count(1)

NO_ID = "<no id>"  # a ScriptedCall with this id is streamed without an id (some endpoints do that)


@dataclass
class ScriptedCall:
    name: str
    arguments: Any  # dict (JSON-encoded by the server) or a raw string (sent as-is, may be invalid JSON)
    id: str = ""

    def arguments_text(self) -> str:
        return self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)


@dataclass
class Turn:
    """One scripted answer. Build with the class methods: ``Turn.say``, ``Turn.call``, ``Turn.fail``."""

    text: str = ""
    reasoning: str = ""
    calls: list[ScriptedCall] = field(default_factory=list)
    status: int = 200  # != 200: an HTTP error answer
    error_message: str = ""
    stream_error: str = ""  # an error event sent mid-stream after the text
    delay: float = 0.0  # seconds before each chunk (and before a non-stream answer)
    first_delay: float = 0.0  # seconds before the first chunk only
    chunk_size: int = 4  # characters per text / argument fragment
    malformed: bool = False  # one chunk that is not JSON
    drop_after: int | None = None  # close the connection after this many chunks (0: right after the headers)
    finish_reason: str | None = None
    usage: dict[str, int] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    raw_chunks: list[Any] | None = None  # sent verbatim as `data:` payloads (str as-is, else JSON) instead of the script
    raw_body: bytes | None = None  # the whole streamed body, verbatim (no SSE framing, no [DONE]), then the end
    keepalive_secs: float = 0.0  # send SSE comment lines for this long (then continue) ...
    keepalive_after: int = 0  # ... after this many chunks (0: right after the headers)
    keepalive_interval: float = 0.2  # seconds between two comment lines
    endless: bool = False  # a model that never stops: one token a chunk until the request's max_tokens ("length")
    repeat_call_header: bool = False  # every argument fragment repeats the call's id and name (llama.cpp does)
    no_usage: bool = False  # no usage chunk even when stream_options asks for one (llama-cpp-python)
    hold: threading.Event | None = None  # after the first text chunk, stream nothing more until the test sets it

    @classmethod
    def raw(cls, *payloads: Any, **kw: Any) -> "Turn":
        """A stream of hand-made chunk payloads (for malformed-output tests)."""
        return cls(raw_chunks=list(payloads), **kw)

    @classmethod
    def say(cls, text: str, **kw: Any) -> "Turn":
        return cls(text=text, **kw)

    @classmethod
    def call(cls, name: str, arguments: Any = None, *, id: str = "", text: str = "", **kw: Any) -> "Turn":
        return cls(text=text, calls=[ScriptedCall(name, {} if arguments is None else arguments, id)], **kw)

    @classmethod
    def calls_(cls, *calls: tuple[str, Any] | ScriptedCall, text: str = "", **kw: Any) -> "Turn":
        built = [c if isinstance(c, ScriptedCall) else ScriptedCall(c[0], c[1]) for c in calls]
        return cls(text=text, calls=built, **kw)

    @classmethod
    def fail(cls, status: int, message: str = "", **kw: Any) -> "Turn":
        default = {429: "Rate limit reached", 529: "Overloaded", 503: "Service Unavailable"}.get(status, "Internal error")
        return cls(status=status, error_message=message or default, **kw)


Responder = Callable[[dict[str, Any]], Turn]


def raw_delta(delta: Any, finish_reason: Any = None, **extra: Any) -> dict[str, Any]:
    """A chat-completion chunk around any ``delta`` (for ``Turn.raw``): the envelope is right, the inside is the test's."""
    return {"id": "chatcmpl-raw", "object": "chat.completion.chunk", "created": 0, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}], **extra}


ENDLESS_CAP = 20_000  # a model that never stops still stops here (a test without max_tokens must end)


def requested_max_tokens(body: dict[str, Any]) -> int | None:
    value = body.get("max_tokens", body.get("max_completion_tokens"))
    return value if isinstance(value, int) and value > 0 else None


def overflow_body(style: str, prompt_tokens: int, n_ctx: int, max_tokens: int) -> dict[str, Any]:
    """The context-length error as each server sends it (HTTP 400)."""
    if style == "llamacpp":
        return {"error": {"code": 400, "message": "the request exceeds the available context size, try increasing it",
                          "type": "exceed_context_size_error", "n_prompt_tokens": prompt_tokens, "n_ctx": n_ctx}}
    if style == "vllm":
        return {"object": "error", "type": "BadRequestError", "param": None, "code": 400,
                "message": f"This model's maximum context length is {n_ctx} tokens. However, you requested "
                           f"{prompt_tokens + max_tokens} tokens ({prompt_tokens} in the messages, {max_tokens} in the "
                           "completion). Please reduce the length of the messages or completion."}
    return {"error": {"message": f"This model's maximum context length is {n_ctx} tokens. However, your messages "
                                 f"resulted in {prompt_tokens} tokens. Please reduce the length of the messages.",
                      "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}


def _chunks(text: str, size: int) -> list[str]:
    size = max(1, size)
    return [text[i : i + size] for i in range(0, len(text), size)]


def fake_embedding(text: str, dim: int = 16) -> list[float]:
    """Deterministic unit vector from the text's hash (same text → same vector)."""
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    raw = [(digest[i % len(digest)] - 127.5) / 127.5 for i in range(dim)]
    norm = math.sqrt(sum(v * v for v in raw)) or 1.0
    return [v / norm for v in raw]


class _OpenAIHandler(FakeHandler):
    server_version = "FakeOpenAI/1.0"

    # -- routing -------------------------------------------------------------------------
    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        req = self.record()
        fake: FakeOpenAIServer = self.fake  # type: ignore[assignment]
        if req.path.rstrip("/").endswith("/models"):
            data = [{"id": m, "object": "model", "created": 0, "owned_by": "fake", **fake.model_extra.get(m, {})}
                    for m in fake.models]
            self.send_json(200, {"object": "list", "data": data})
        elif req.path.rstrip("/") == "/props" and fake.props is not None:  # llama.cpp's server properties
            self.send_json(200, fake.props)
        else:
            self.send_json(404, {"error": {"message": f"no route {req.path}", "type": "invalid_request_error"}})

    def do_POST(self) -> None:  # noqa: N802
        req = self.record()
        fake: FakeOpenAIServer = self.fake  # type: ignore[assignment]
        try:
            body = req.json() or {}
        except ValueError:
            self.send_json(400, {"error": {"message": "body is not JSON", "type": "invalid_request_error"}})
            return
        if req.path.endswith("/chat/completions"):
            with fake.lock:
                fake.chat_requests.append(body)
            if not self._overflow(body):  # a prompt over n_ctx is refused before any turn is used
                self._chat(body, fake.next_turn(body))
        elif req.path.rstrip("/") == "/api/show" and fake.ollama_show is not None:  # Ollama's model details
            self.send_json(200, fake.ollama_show)
        elif req.path.endswith("/embeddings") and fake.embeddings_status != 200:
            self.send_json(fake.embeddings_status, {"error": {"message": "embedding failed", "type": "server_error"}})
        elif req.path.endswith("/embeddings"):
            time.sleep(float(fake.state.get("embed_delay", 0.0)))  # a slow endpoint (deadline tests)
            inputs = body.get("input")
            texts = [inputs] if isinstance(inputs, str) else list(inputs or [])
            data = [
                {"object": "embedding", "index": i, "embedding": fake_embedding(str(t), fake.embedding_dim)}
                for i, t in enumerate(texts)
            ]
            self.send_json(
                200,
                {"object": "list", "data": data, "model": body.get("model", ""), "usage": {"prompt_tokens": 0, "total_tokens": 0}},
            )
        else:
            self.send_json(404, {"error": {"message": f"no route {req.path}", "type": "invalid_request_error"}})

    # -- chat ------------------------------------------------------------------------------
    def _overflow(self, body: dict[str, Any]) -> bool:
        fake: FakeOpenAIServer = self.fake  # type: ignore[assignment]
        prompt_tokens = fake.count_tokens(body)
        max_tokens = requested_max_tokens(body) or 0
        # vLLM counts the completion's bound in; llama.cpp and OpenAI the prompt only
        if not fake.n_ctx or prompt_tokens + (max_tokens if fake.overflow_style == "vllm" else 0) <= fake.n_ctx:
            return False
        with fake.lock:
            fake.overflows += 1
        self.send_json(400, overflow_body(fake.overflow_style, prompt_tokens, fake.n_ctx, max_tokens))
        return True

    def _chat(self, body: dict[str, Any], turn: Turn) -> None:
        if turn.status != 200:
            if turn.delay:
                time.sleep(turn.delay)
            kind = "overloaded_error" if turn.status == 529 else "rate_limit_error" if turn.status == 429 else "server_error"
            self.send_json(turn.status, {"error": {"message": turn.error_message, "type": kind, "code": None}}, turn.headers)
            return
        fake: FakeOpenAIServer = self.fake  # type: ignore[assignment]
        prompt_tokens = fake.count_tokens(body)
        model = str(body.get("model", ""))
        calls = [ScriptedCall(c.name, c.arguments, c.id or f"call_{next(_ids)}") for c in turn.calls]
        wire_id = {c.id: (None if c.id == NO_ID else c.id) for c in calls}
        finish = turn.finish_reason or ("tool_calls" if calls else "stop")
        completion = max(1, len(turn.text) // 4)
        usage = turn.usage or {"prompt_tokens": prompt_tokens, "completion_tokens": completion,
                               "total_tokens": prompt_tokens + completion}
        if body.get("stream"):
            self._stream(body, turn, model, calls, finish, usage, wire_id)
            return
        if turn.delay or turn.first_delay:
            time.sleep(turn.delay + turn.first_delay)
        message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
        if turn.reasoning:
            message["reasoning_content"] = turn.reasoning
        if calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments_text()}} for c in calls
            ]
        self.send_json(
            200,
            {
                "id": f"chatcmpl-{next(_ids)}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
                "usage": usage,
            },
        )

    def _stream(
        self,
        body: dict[str, Any],
        turn: Turn,
        model: str,
        calls: list[ScriptedCall],
        finish: str,
        usage: dict[str, int],
        wire_id: dict[str, str | None],
    ) -> None:
        head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n"
        self.wfile.write(head.encode())
        self.wfile.flush()
        cid = f"chatcmpl-{next(_ids)}"
        created = int(time.time())
        first = [True]

        def delta_chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
            return {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}],
            }

        sent = [0]

        def keepalive() -> None:
            """Comment lines only: every read succeeds, no data arrives (a per-read timeout never fires)."""
            end = time.monotonic() + turn.keepalive_secs
            while time.monotonic() < end:
                frame = b": keep-alive\n\n"
                self.wfile.write(f"{len(frame):x}\r\n".encode() + frame + b"\r\n")
                self.wfile.flush()
                time.sleep(max(0.01, turn.keepalive_interval))

        def send(payload: Any) -> None:
            if turn.drop_after is not None and sent[0] >= turn.drop_after:
                self.connection.shutdown(socket.SHUT_RDWR)
                raise ConnectionResetError("scripted drop")
            if turn.keepalive_secs and sent[0] == turn.keepalive_after:
                keepalive()
            sent[0] += 1
            if first[0] and turn.first_delay:
                time.sleep(turn.first_delay)
            first[0] = False
            if turn.delay:
                time.sleep(turn.delay)
            data = payload if isinstance(payload, str) else json.dumps(payload)
            data = data.replace("\n", "\ndata: ")  # a multi-line payload stays one SSE event
            frame = f"data: {data}\n\n".encode()
            self.wfile.write(f"{len(frame):x}\r\n".encode() + frame + b"\r\n")
            self.wfile.flush()

        try:
            if turn.raw_body is not None:  # e.g. one huge line with no newline: not even the first event ends
                for start in range(0, len(turn.raw_body), 1 << 16):
                    part = turn.raw_body[start:start + (1 << 16)]
                    self.wfile.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
                return
            send(delta_chunk({"role": "assistant", "content": ""}))
            if turn.raw_chunks is not None:
                for payload in turn.raw_chunks:
                    send(payload if isinstance(payload, str) else json.dumps(payload))
                send("[DONE]")
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
                return
            for piece in _chunks(turn.reasoning, turn.chunk_size):
                send(delta_chunk({"reasoning_content": piece}))
            if turn.malformed:
                send('{"id": "broken", "choices": [ {"delta": ')
            for n, piece in enumerate(_chunks(turn.text, turn.chunk_size)):
                send(delta_chunk({"content": piece}))
                if n == 0 and turn.hold is not None:
                    turn.hold.wait(60)  # a test's deadline, not a pace: it sets the event
            if turn.endless:  # one token a chunk until the bound the request set, if any
                bound = requested_max_tokens(body)
                for n in range(min(bound or ENDLESS_CAP, ENDLESS_CAP)):
                    send(delta_chunk({"content": f" w{n}"}))
                finish = "length" if bound is not None and bound <= ENDLESS_CAP else finish
            if turn.stream_error:
                send({"error": {"message": turn.stream_error, "type": "server_error"}})
            for index, call in enumerate(calls):
                pieces = _chunks(call.arguments_text(), turn.chunk_size) or [""]
                send(
                    delta_chunk(
                        {
                            "tool_calls": [
                                {"index": index, "id": wire_id[call.id], "type": "function", "function": {"name": call.name, "arguments": ""}}
                            ]
                        }
                    )
                )
                for piece in pieces:
                    frag: dict[str, Any] = {"index": index, "function": {"arguments": piece}}
                    if turn.repeat_call_header:
                        frag = {"index": index, "id": wire_id[call.id], "type": "function",
                                "function": {"name": call.name, "arguments": piece}}
                    send(delta_chunk({"tool_calls": [frag]}))
            send(delta_chunk({}, finish))
            if (body.get("stream_options") or {}).get("include_usage") and not turn.no_usage:
                send({"id": cid, "object": "chat.completion.chunk", "created": created, "model": model, "choices": [], "usage": usage})
            send("[DONE]")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            with self.fake.lock:
                self.fake.stream_ends.append(time.perf_counter())
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client went away (cancel or timeout): fine
            with self.fake.lock:  # counted, so a test can see a cancelled client really hung up
                self.fake.state["disconnects"] = self.fake.state.get("disconnects", 0) + 1


@dataclass
class FakeOpenAIServer(FakeServer):
    """``FakeOpenAIServer().start()``; ``.url`` ends with ``/v1``; ``.script(Turn...)`` queues answers."""

    handler: type[FakeHandler] = _OpenAIHandler
    models: list[str] = field(default_factory=lambda: ["gpt-4o-mini", "fallback-model", "chain-a", "chain-b"])
    embedding_dim: int = 16
    responder: Responder | None = None
    chat_requests: list[dict[str, Any]] = field(default_factory=list)
    turns: collections.deque = field(default_factory=collections.deque)
    stream_ends: list[float] = field(default_factory=list)  # perf_counter() when each stream's last byte went out
    model_extra: dict[str, dict[str, Any]] = field(default_factory=dict)  # extra /v1/models fields (vLLM max_model_len)
    props: dict[str, Any] | None = None  # GET /props answers this (llama.cpp), else 404
    ollama_show: dict[str, Any] | None = None  # POST /api/show answers this (Ollama), else 404
    embeddings_status: int = 200  # != 200: /v1/embeddings answers this status
    n_ctx: int = 0  # > 0: a chat request counted above it gets the context-length error of overflow_style
    overflow_style: str = "llamacpp"  # llamacpp | vllm | openai
    chars_per_token: float = 4.0  # the server's "tokenizer": characters of the request's messages and tools per token
    overflows: int = 0  # context-length errors sent

    def count_tokens(self, body: dict[str, Any]) -> int:
        """What the server counts for a request's prompt (reported as usage.prompt_tokens)."""
        chars = len(json.dumps(body.get("messages") or [])) + len(json.dumps(body.get("tools") or []))
        return int(chars / self.chars_per_token)

    @property
    def url(self) -> str:  # type: ignore[override]
        return f"http://127.0.0.1:{self.port}/v1"

    def script(self, *turns: Turn) -> "FakeOpenAIServer":
        with self.lock:
            self.turns.extend(turns)
        return self

    def respond_with(self, responder: Responder | None) -> "FakeOpenAIServer":
        self.responder = responder
        return self

    def next_turn(self, body: dict[str, Any]) -> Turn:
        with self.lock:
            if self.turns:
                return self.turns.popleft()
        if self.responder is not None:
            return self.responder(body)
        return Turn.fail(400, "fake openai server: script exhausted (no turn queued and no responder)")

    @property
    def remaining(self) -> int:
        with self.lock:
            return len(self.turns)

    def models_requested(self) -> list[str]:
        with self.lock:
            return [str(r.get("model")) for r in self.chat_requests]


def last_tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``tool`` messages after the last assistant message of a request (for responders)."""
    out: list[dict[str, Any]] = []
    for msg in reversed(body.get("messages") or []):
        if msg.get("role") == "tool":
            out.append(msg)
        else:
            break
    return list(reversed(out))


def main() -> None:  # pragma: no cover - manual use: python -m tests.fakes.openai_server
    import argparse

    parser = argparse.ArgumentParser(description="Run the fake OpenAI server answering a fixed text.")
    parser.add_argument("--text", default="Hello from the fake model.")
    args = parser.parse_args()
    server = FakeOpenAIServer(responder=lambda body: Turn.say(args.text)).start()
    print(server.url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()


if __name__ == "__main__":  # pragma: no cover
    main()
