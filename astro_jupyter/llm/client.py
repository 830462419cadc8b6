"""The one LLM client: ``openai.AsyncOpenAI`` streaming chat completions with tools.

Why a wrapper and not the bare client: the runtime needs (1) tool-call fragments assembled
across chunks and handed over the moment a call is complete, (2) reasoning deltas passed
through, (3) retries with backoff for transient failures, (4) a model switch after repeated
overload answers, announced as an item the runtime turns into a ``model_switch`` event, and
(5) one clear ``LlmUnavailableError`` naming OPENAI_BASE_URL / OPENAI_API_KEY when nothing
is configured or reachable. ``openai`` is imported lazily so ``astro-jupyter tools`` and
``%load_ext`` stay fast.
"""

from __future__ import annotations

import asyncio
import dataclasses
import errno
import socket
import uuid
from typing import TYPE_CHECKING, Any, AsyncIterator

from ..errors import LlmAuthError, LlmError, LlmUnavailableError, ServiceTimeoutError, UnknownModelError
from ..textsafe import clean_value
from .fallback import FallbackPolicy, ModelHolder, is_overload, is_transient
from .profile import ModelProfile, is_overflow, known_window, make_profile, window_from_error, window_from_models
from .profile import DEFAULT_CONTEXT_WINDOW, window_from_ollama, window_from_props
from .shape import ChunkView, MalformedChunk, read_chunk
from .types import Completed, ModelSwitched, StreamItem, TextChunk, ThinkingChunk, ToolCallPreparing, ToolCallReady

if TYPE_CHECKING:
    from ..config import AstroConfig

_MAX_BACKOFF_SECS = 8.0

NOT_CONFIGURED = (
    "No LLM endpoint is configured: set OPENAI_BASE_URL to an OpenAI-compatible endpoint "
    "(and OPENAI_API_KEY if it needs one), or c.AstroConfig.openai_base_url / openai_api_key."
)


def _unreachable(url: str, detail: str) -> str:
    return (
        f"Cannot reach the LLM endpoint at {url or 'the default OpenAI API'} ({detail}). "
        "Check OPENAI_BASE_URL and OPENAI_API_KEY."
    )


class DeadlineExceeded(ServiceTimeoutError):
    """One request ran past ``LlmLimits.deadline_secs`` in total (each read may still have been quick)."""

    def __init__(self, secs: float) -> None:
        super().__init__(f"no complete answer within the overall deadline of {secs:g} s")
        self.secs = secs


class ContextOverflowError(LlmError):
    """The endpoint refused the prompt as longer than the model's context window."""

    reason = "context_overflow"

    def __init__(self, message: str, window: int | None = None) -> None:
        super().__init__(message)
        self.window = window


@dataclasses.dataclass(frozen=True)
class LlmLimits:
    """How hard the client tries (internal tuning, not settings; tests pass shorter ones to ``LlmClient``).

    ``deadline_secs`` bounds one request from sending it to the end of its stream (``llm_timeout_secs``
    only bounds each read, so a server sending keep-alive comments could hold a run forever); 0 disables.
    ``max_tokens`` 0: a quarter of the context window, at most 8192.
    """

    max_retries: int = 4  # transient errors retried with backoff
    retry_base_delay: float = 0.5  # first backoff in seconds, doubling each retry
    overload_switch_after: int = 3  # consecutive overload answers (429/503/529) before switching model
    deadline_secs: float = 600.0
    max_tokens: int = 0


PROBE_TIMEOUT_SECS = 5.0  # each request asking the endpoint about the model (a missing route answers at once)
MODELS_NAMED = 40  # models listed when the endpoint does not know the one asked for
PREPARING_EVERY_SECS = 1.0  # how often a tool call being written is reported while its arguments grow


# A connection that was never made, for a reason another try within seconds will not change.
_UNREACHABLE_ERRNOS = {
    errno.ECONNREFUSED: "connection refused",
    errno.EHOSTUNREACH: "no route to host",
    errno.ENETUNREACH: "network unreachable",
}


def unreachable_reason(exc: BaseException) -> str:
    """Why no connection to the endpoint could be opened at all ('' when it opened, or may have).

    A refused connection, no route or an unknown host name fails the same way on every retry, so
    it is reported at once; a reset mid-response or a timeout is left to the retries. Looks
    through the chain openai -> httpx2.ConnectError -> httpcore2 -> OSError (and exception groups).
    """
    import httpx2

    stack, seen, connecting, reason = [exc], set(), False, ""
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, httpx2.ConnectError):
            connecting = True
        if not reason and isinstance(current, socket.gaierror):
            reason = f"the host name does not resolve: {current.strerror or current}"
        elif not reason and isinstance(current, OSError) and current.errno in _UNREACHABLE_ERRNOS:
            reason = _UNREACHABLE_ERRNOS[current.errno]
        if isinstance(current, BaseExceptionGroup):
            stack.extend(current.exceptions)
        stack.extend(e for e in (current.__cause__, current.__context__) if e is not None)
    return reason if connecting else ""


class _Failure:
    """A normalised view of an exception raised by the openai client."""

    def __init__(self, exc: BaseException) -> None:
        import httpx2
        import openai

        self.exc = exc
        self.deadline = isinstance(exc, DeadlineExceeded)
        self.status: int | None = getattr(exc, "status_code", None)
        self.timeout = self.deadline or isinstance(exc, (openai.APITimeoutError, httpx2.TimeoutException))
        # a connection dropped while the body streams surfaces as a raw httpx2 error
        self.connection = isinstance(exc, (openai.APIConnectionError, httpx2.TransportError)) and not self.timeout
        self.unreachable = unreachable_reason(exc) if self.connection else ""  # not worth a retry
        self.api = isinstance(exc, openai.APIError) or isinstance(exc, httpx2.TransportError) or self.deadline
        message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
        body = getattr(exc, "body", None)
        if isinstance(body, dict):  # the endpoint's own words beat "Error code: 500 - {...}"
            inner = body.get("error") if isinstance(body.get("error"), dict) else body
            message = inner.get("message") or message
            if isinstance(inner.get("n_ctx"), int):  # llama.cpp names the window beside its overflow error
                message = f"{message} (n_ctx={inner['n_ctx']})"
        self.message = str(message)

    @property
    def overload(self) -> bool:
        return self.api and is_overload(self.status, self.message)

    @property
    def overflow(self) -> bool:
        """The prompt does not fit the model's context: retrying the same request cannot help."""
        return self.api and self.status is not None and is_overflow(self.message)

    @property
    def transient(self) -> bool:
        if self.timeout or (self.connection and not self.unreachable):
            return True
        return self.api and self.status is not None and is_transient(self.status)

    def describe(self) -> str:
        if self.deadline:
            return str(self.exc)
        if self.timeout:
            return "timed out"
        if self.unreachable:
            return self.unreachable
        if self.status is not None:
            return f"HTTP {self.status}: {self.message}"
        return self.message


async def chat_views(client: Any, model: str, body: dict[str, Any]) -> AsyncIterator[ChunkView]:
    """Send one chat-completions request, then read, decode and check every chunk, on this loop
    (the agent host's or the kernel's: neither serves Jupyter's requests)."""
    try:
        response = await open_chat_stream(client, model, body)
    except UnicodeEncodeError:
        # text no endpoint can take (a lone surrogate in a tool result or a stored message): send
        # it cleaned rather than fail the run; the check costs nothing on the normal path
        response = await open_chat_stream(client, model, clean_value(body))
    try:
        async for chunk in response:
            yield read_chunk(chunk)  # checked and cleaned: only str/int reach the runtime
    finally:
        await response.close()


async def open_chat_stream(client: Any, model: str, body: dict[str, Any]) -> Any:
    """POST chat/completions through the ``openai`` client (its retries, errors and in-stream error
    events), yielding each chunk as the JSON dict the endpoint sent.

    Why not ``chat.completions.create``: it builds a pydantic object per chunk, the largest
    per-token cost on the server's event loop (with 20 streaming runs it saturated the loop
    and ``GET astro/api/sessions`` waited; benchmarks/bench_server_load.py). The history is
    already plain JSON, so the body goes verbatim, as ``extra_body`` did.
    """
    import openai

    payload = {"model": model, "stream": True, "stream_options": {"include_usage": True}, **body}
    return await client.post("/chat/completions", body=payload, cast_to=object, stream=True,
                             stream_cls=openai.AsyncStream[object])


class LlmClient:
    """Streaming chat, one-shot completion, embeddings and model listing against one endpoint."""

    def __init__(self, config: "AstroConfig", *, holder: ModelHolder | None = None,
                 limits: LlmLimits | None = None) -> None:
        self.config = config
        self.limits = limits or LlmLimits()
        self.holder = holder or ModelHolder(config.llm_model)
        self.policy = FallbackPolicy(config.llm_fallback_model, list(config.llm_fallback_chain))
        self._client: Any = None
        self._profiles: dict[str, ModelProfile] = {}
        self._profile_locks: dict[str, asyncio.Lock] = {}
        # OpenAI's own API wants max_completion_tokens (its reasoning models refuse max_tokens); the
        # servers people run locally know max_tokens. An endpoint that refuses one gets the other.
        self._token_field = "max_tokens" if config.openai_base_url else "max_completion_tokens"

    # -- plumbing ---------------------------------------------------------------------------
    @property
    def configured(self) -> bool:
        return bool(self.config.openai_base_url or self.config.openai_api_key)

    @property
    def base_url(self) -> str:
        return self.config.openai_base_url or "https://api.openai.com/v1"

    @property
    def model(self) -> str:
        return self.holder.get()

    def switch_model(self, name: str, reason: str = "manual") -> ModelSwitched:
        record = self.holder.switch(name, reason)
        return ModelSwitched(record.from_model, record.to_model, record.reason)

    def _openai(self) -> Any:
        if not self.configured:
            raise LlmUnavailableError(NOT_CONFIGURED)
        if self._client is None:
            import openai

            self._client = openai.AsyncOpenAI(
                base_url=self.config.openai_base_url or None,
                api_key=self.config.openai_api_key or "not-set",
                max_retries=0,
                timeout=self.config.llm_timeout_secs,
            )
        return self._client

    def prepare(self) -> None:
        """Build the HTTP client now (a server does this at startup; the first turn then pays nothing)."""
        self._openai()

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()

    def _deadline(self) -> float | None:
        """Loop time by which the request now starting must be complete (None: no overall limit)."""
        secs = self.limits.deadline_secs
        return asyncio.get_running_loop().time() + secs if secs > 0 else None

    def _backoff(self, attempt: int) -> float:
        return min(_MAX_BACKOFF_SECS, self.limits.retry_base_delay * (2 ** max(0, attempt - 1)))

    # -- the model's profile ---------------------------------------------------------------
    async def profile(self, model: str | None = None) -> ModelProfile:
        """The model's context window and answer bound, asked of the endpoint once per model."""
        name = model or self.holder.get()
        known = self._profiles.get(name)
        if known is not None:
            return known
        lock = self._profile_locks.setdefault(name, asyncio.Lock())
        async with lock:
            if name not in self._profiles:
                self._profiles[name] = await self._discover(name)
        return self._profiles[name]

    async def _discover(self, model: str) -> ModelProfile:
        setting, max_tokens = int(self.config.llm_context_window), int(self.limits.max_tokens)
        if setting > 0:
            return make_profile(model, setting, "setting llm_context_window", max_tokens)
        if self.configured and self.config.openai_base_url:  # OpenAI's own API says nothing: the table knows it
            found = await self._ask_endpoint(model)
            if found is not None:
                return make_profile(model, found[0], found[1], max_tokens)
        window = known_window(model)
        if window is not None:
            return make_profile(model, window, "table of well-known models", max_tokens)
        return make_profile(model, DEFAULT_CONTEXT_WINDOW, "default (the endpoint did not say; set llm_context_window)",
                            max_tokens)

    async def _ask_endpoint(self, model: str) -> tuple[int, str] | None:
        """vLLM's ``/v1/models``, llama.cpp's ``/props``, Ollama's ``/api/show``; None when none answers."""
        client = self._openai()
        root = self.base_url.rstrip("/")
        root = root[: -len("/v1")] if root.endswith("/v1") else root
        options = {"timeout": PROBE_TIMEOUT_SECS}

        async def get(path: str) -> Any:
            return await client.get(path, cast_to=object, options=options)

        async def show() -> Any:
            return await client.post(f"{root}/api/show", body={"model": model}, cast_to=object, options=options)

        probes = (
            (lambda: get("/models"), lambda d: window_from_models(d, model), "vLLM /v1/models max_model_len"),
            (lambda: get(f"{root}/props"), window_from_props, "llama.cpp /props n_ctx"),
            (show, window_from_ollama, ""),
        )
        for op, read, source in probes:
            try:
                data = await self._call("the model's context window", model, op, retries=0)
            except LlmUnavailableError:
                return None  # nothing answers there: the chat request will say so
            except LlmError:
                continue
            found = read(data)
            if isinstance(found, tuple):
                return found
            if found:
                return found, source
        return None

    def learn_window(self, model: str, window: int, source: str) -> None:
        """The endpoint said the real window (a context-length error): later requests use it."""
        known = self._profiles.get(model) or make_profile(model, window, source, int(self.limits.max_tokens))
        self._profiles[model] = known.with_window(window, source, int(self.limits.max_tokens))

    def _final_error(self, failure: _Failure, model: str) -> LlmError:
        if failure.overflow:
            window = window_from_error(failure.message)
            if window:
                self.learn_window(model, window, "the endpoint's context-length error")
            profile = self._profiles.get(model)
            size = f"{profile.context_window} tokens, from {profile.source}" if profile else "unknown size"
            return ContextOverflowError(
                f"The prompt does not fit model {model!r}'s context window ({size}): {failure.describe()}", window)
        if failure.connection:
            return LlmUnavailableError(_unreachable(self.base_url, failure.describe()))
        if failure.status in (401, 403):
            return LlmAuthError(f"The LLM endpoint rejected the credentials ({failure.describe()}). Check OPENAI_API_KEY.")
        if failure.status == 404:
            return UnknownModelError(f"The LLM endpoint does not know model {model!r} ({failure.describe()}).")
        if failure.deadline:
            return LlmError(
                f"The LLM endpoint at {self.base_url} sent no complete answer within the overall deadline of "
                f"{self.limits.deadline_secs:g} s (model {model!r}, {self.limits.max_retries} retries)."
            )
        if failure.timeout:
            return LlmError(
                f"The LLM endpoint at {self.base_url} timed out after {self.config.llm_timeout_secs:g} s "
                f"(model {model!r}, {self.limits.max_retries} retries)."
            )
        return LlmError(f"The LLM request failed (model {model!r}): {failure.describe()}")

    # -- streaming ----------------------------------------------------------------------------
    async def stream(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None, *, model: str | None = None,
        tool_choice: str | None = None, max_tokens: int | None = None,
    ) -> AsyncIterator[StreamItem]:
        """Yield text/thinking deltas, complete tool calls, model switches, then one ``Completed``.

        Retries and model switches happen only before the first item of an attempt is
        yielded; a stream that breaks after it started raises ``LlmError`` (replaying it
        would duplicate what the user already saw).
        """
        client = self._openai()
        current = model or self.holder.get()
        tried = [current]
        overloads = 0
        retries = 0
        switched_field = False
        while True:
            started = False
            profile = await self.profile(current)
            attempt = self._stream_once(client, messages, tools, current, max_tokens or profile.max_output_tokens,
                                        tool_choice)
            deadline = self._deadline()
            try:
                while True:
                    try:
                        item = await _next_before(attempt, deadline, self.limits.deadline_secs)
                    except StopAsyncIteration:
                        return
                    started = True
                    yield item
            except LlmError:
                raise
            except asyncio.CancelledError:
                raise
            except MalformedChunk as exc:  # the endpoint answered, but not in the wire format: retrying will not help
                raise LlmError(f"Malformed answer from the LLM endpoint (model {current!r}): {exc}") from None
            except Exception as exc:  # noqa: BLE001 - converted to our own errors right here
                failure = _Failure(exc)
                if started:
                    raise LlmError(f"The LLM stream broke after it started (model {current!r}): {failure.describe()}") from exc
                if not failure.api:
                    raise LlmError(f"Malformed answer from the LLM endpoint (model {current!r}): {failure.describe()}") from exc
                if failure.overflow:
                    raise self._final_error(failure, current) from exc
                if failure.status == 400 and not switched_field and _wants_other_field(failure.message, self._token_field):
                    switched_field = True
                    self._token_field = "max_tokens" if self._token_field != "max_tokens" else "max_completion_tokens"
                    continue
                if failure.overload:
                    overloads += 1
                    if overloads >= self.limits.overload_switch_after:
                        nxt = self.policy.next_model(current, tried)
                        if nxt is None:
                            raise LlmError(
                                f"The LLM endpoint is overloaded: {overloads} consecutive overload answers for model "
                                f"{current!r} and no fallback model left (set LLM_FALLBACK_MODEL / LLM_FALLBACK_CHAIN)."
                            ) from exc
                        record = self.holder.switch(nxt, f"overloaded x{overloads}")
                        yield ModelSwitched(current, nxt, record.reason)
                        current = nxt
                        tried.append(nxt)
                        overloads = 0
                        continue
                    await asyncio.sleep(self._backoff(overloads))
                    continue
                if failure.transient and retries < self.limits.max_retries:
                    retries += 1
                    await asyncio.sleep(self._backoff(retries))
                    continue
                error = self._final_error(failure, current)
                if isinstance(error, UnknownModelError):
                    error = await self._name_served_models(error)
                raise error from exc
            finally:
                await attempt.aclose()  # a consumer that stops early must not leave the response open

    async def _stream_once(
        self, client: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, model: str,
        max_tokens: int, tool_choice: str | None = None,
    ) -> AsyncIterator[StreamItem]:
        # The history and tool definitions are already plain JSON dicts, so they go in
        # ``extra_body`` (merged verbatim into the request body) rather than through the SDK's
        # typed-dict transform, which walks every message on every call: ~7 ms/turn of CPU at
        # turn 20 of a chain and growing with the history (benchmarks/bench_turns.py).
        body: dict[str, Any] = {"messages": messages, self._token_field: max_tokens}
        if tools:
            body["tools"] = tools
            if tool_choice:
                body["tool_choice"] = tool_choice

        text: list[str] = []
        thinking: list[str] = []
        partial: dict[int, dict[str, Any]] = {}
        emitted: set[int] = set()
        finish = "stop"
        finished = False
        usage: dict[str, int] = {}
        told: dict[int, tuple[float, int]] = {}  # call index → (loop time, argument length) last reported
        clock = asyncio.get_running_loop().time

        def preparing(index: int) -> ToolCallPreparing | None:
            """A call being written: said when its name arrives, then at most every PREPARING_EVERY_SECS."""
            part = partial[index]
            size = part["chars"]
            last = told.get(index)
            now = clock()
            if last is not None and (size == last[1] or now - last[0] < PREPARING_EVERY_SECS):
                return None
            if not part["name"]:
                return None
            told[index] = (now, size)
            return ToolCallPreparing(index, part["id"], part["name"], size)

        def ready(index: int) -> ToolCallReady:
            part = partial[index]
            emitted.add(index)
            if not part["id"]:  # some endpoints omit ids; the tool result must still match its call
                part["id"] = f"call_{uuid.uuid4().hex[:24]}"
            return ToolCallReady(index, part["id"], part["name"], "".join(part["args"]))

        views = chat_views(client, model, body)
        try:
            async for view in views:
                if view.usage:
                    usage = view.usage
                for reasoning in view.reasoning:
                    thinking.append(reasoning)
                    yield ThinkingChunk(reasoning)
                for content in view.content:
                    text.append(content)
                    yield TextChunk(content)
                for frag in view.calls:
                    index = frag.index if frag.index >= 0 else len(partial)
                    if index not in partial:
                        for earlier in sorted(partial):
                            if earlier < index and earlier not in emitted:
                                yield ready(earlier)
                        partial[index] = {"id": "", "name": "", "args": [], "chars": 0}
                    part = partial[index]
                    if frag.id:
                        part["id"] = frag.id
                    if frag.name:
                        part["name"] = frag.name
                    if frag.arguments:
                        part["args"].append(frag.arguments)
                        part["chars"] += len(frag.arguments)
                    if index not in emitted:
                        note = preparing(index)
                        if note is not None:
                            yield note
                if view.finish_reason:
                    finish = view.finish_reason
                    finished = True
        finally:
            await views.aclose()
        if not (finished or text or thinking or partial):  # e.g. one huge line that never ended an event
            raise LlmError(
                f"The LLM endpoint's answer ended without a readable chunk (model {model!r}): no text, no tool call "
                "and no finish reason arrived, so there is no answer to show. The endpoint may have sent something "
                "that is not an event stream, or a line too long to end; try again or check the endpoint."
            )
        calls: list[ToolCallReady] = []
        cut = finish == "length"  # the output bound ended the answer: a call still open was cut mid-arguments
        for index in sorted(partial):
            if index not in emitted:
                yield dataclasses.replace(ready(index), cut_off=cut)
        # Rebuild in index order with the ids actually handed out.
        for index in sorted(partial):
            part = partial[index]
            calls.append(ToolCallReady(index, part["id"], part["name"], "".join(part["args"]),
                                       cut_off=cut and index == max(partial)))
        yield Completed("".join(text), calls, finish, model, usage, "".join(thinking), max_tokens=max_tokens)

    # -- one-shot calls ----------------------------------------------------------------------
    async def complete(self, messages: list[dict[str, Any]], *, model: str | None = None) -> str:
        """Plain text answer (summaries, RAG answers); same retries and fallback as ``stream``."""
        text = ""
        async for item in self.stream(messages, None, model=model):
            if isinstance(item, Completed):
                text = item.text
        return text

    async def _call(self, what: str, model: str, op: Any, *, retries: int | None = None) -> Any:
        self._openai()
        most = self.limits.max_retries if retries is None else retries
        retries = 0
        while True:
            try:
                deadline = self._deadline()
                if deadline is None:
                    return await op()
                limit = asyncio.timeout_at(deadline)
                try:
                    async with limit:
                        return await op()
                except TimeoutError:
                    if limit.expired():
                        raise DeadlineExceeded(self.limits.deadline_secs) from None
                    raise
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001
                failure = _Failure(exc)
                if failure.api and (failure.transient or failure.overload) and retries < most:
                    retries += 1
                    await asyncio.sleep(self._backoff(retries))
                    continue
                if not failure.api:
                    raise LlmError(f"Malformed answer from the LLM endpoint to {what}: {failure.describe()}") from exc
                raise self._final_error(failure, model) from exc

    async def embed(self, texts: list[str], model: str, *, retries: int | None = None) -> list[list[float]]:
        """Vectors for ``texts``; ``retries=0`` for a search's query, which has full-text search to fall back on."""
        client = self._openai()
        if not texts:
            return []

        async def op() -> list[list[float]]:
            resp = await client.embeddings.create(model=model, input=list(texts))
            return [list(d.embedding) for d in sorted(resp.data, key=lambda d: d.index)]

        return await self._call("embeddings", model, op, retries=retries)

    async def list_models(self, *, retries: int | None = None) -> list[str]:
        client = self._openai()

        async def op() -> list[str]:
            page = await client.models.list()
            return sorted(m.id for m in page.data)

        return await self._call("the model list", self.holder.get(), op, retries=retries)

    async def _name_served_models(self, error: LlmError) -> LlmError:
        """A model the endpoint does not know: say which ones it serves (one quick request, no retry).
        With any other endpoint than OpenAI's the first run's model is a guess, so this is the fix."""
        try:
            names = await asyncio.wait_for(self.list_models(retries=0), timeout=PROBE_TIMEOUT_SECS)
        except (asyncio.TimeoutError, LlmError):
            return error
        if not names:
            return error
        shown = ", ".join(names[:MODELS_NAMED]) + (f" and {len(names) - MODELS_NAMED} more" if len(names) > MODELS_NAMED else "")
        return UnknownModelError(f"{error} It serves: {shown}. Set LLM_MODEL to one of them "
                                 "(or pick one in the sidebar's model menu, or %astro model NAME).")


def _wants_other_field(message: str, sent: str) -> bool:
    """An endpoint refusing the output-bound field we sent and naming the other one."""
    other = "max_tokens" if sent != "max_tokens" else "max_completion_tokens"
    text = message.lower()
    return sent in text and any(w in text for w in (other, "unsupported", "not supported", "unrecognized", "extra"))


async def _next_before(stream: AsyncIterator[StreamItem], deadline: float | None, secs: float) -> StreamItem:
    """The stream's next item, or ``DeadlineExceeded`` once the loop time passes ``deadline``.

    The limit wraps each wait, never a ``yield``: a timer spanning a yield would cancel the
    consumer's task while it is busy elsewhere.
    """
    if deadline is None:
        return await stream.__anext__()
    limit = asyncio.timeout_at(deadline)
    try:
        async with limit:
            return await stream.__anext__()
    except TimeoutError:
        if limit.expired():
            raise DeadlineExceeded(secs) from None
        raise
