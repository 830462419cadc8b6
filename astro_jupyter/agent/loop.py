"""The one turn loop: runs, subagents, coordinator workers and teammates all go through it.

A turn is: turn preparers (compaction, background results) → one LLM stream → the
streaming executor (calls start while the answer still streams) → the turn's messages
appended (and handed to the caller's sink) → the next step. Each turn returns a typed
:data:`NextStep` (as openai-agents' run steps do) and the loop returns a typed
:class:`LoopOutcome` instead of flags or strings:

* ``FinalOutput`` — the model answered without tool calls;
* ``RunAgain`` — the turn called tools, whose results the next turn sends (turns only);
* ``Cancelled`` — the caller's cancel event was set (the stream is abandoned at once);
* ``Failed(error)`` — the LLM or a preparer failed; calls already started end first
  (Cancel tools stop, Block tools finish) and their results are kept and reported;
* ``MaxSteps`` — the step limit was reached (loop outcome only).

What differs between callers is data in :class:`LoopInput`: the emitter (the run's bus, or
the parent's with the subagent id), the registry, the limits, and the message sink (the main
run stores a turn before its tool results are announced; subagents keep messages in memory).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, AsyncIterator, Awaitable, Callable, Protocol, Sequence, Union

from ..events import Event, ModelSwitch, TextDelta, ThinkingDelta, ToolCallPreparing, ToolResult, Truncated
from .executor import ExecutedCall, ToolCallRequest, ToolExecutor
from .run import RunState

if TYPE_CHECKING:
    from ..llm.types import StreamItem
    from .tools.base import Emit, ToolContext
    from .tools.registry import ToolRegistry

TurnPreparer = Callable[[RunState], Awaitable[None]]
MessageSink = Callable[[list[dict[str, Any]]], Awaitable[None]]
ModelSwitched = Callable[[str], None]


class StreamingLLM(Protocol):
    """What the loop needs of the LLM client (``llm/client.py`` or a test's double)."""

    def stream(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None, *, model: str | None = None
    ) -> AsyncIterator["StreamItem"]: ...


@dataclass(frozen=True)
class FinalOutput:
    """The model answered without calling a tool: ``text`` is the answer."""

    text: str


@dataclass(frozen=True)
class RunAgain:
    """The turn called tools; their results go to the model in the next turn."""

    calls: int


@dataclass(frozen=True)
class Cancelled:
    """The caller's cancel event was set; the LLM stream was abandoned."""


@dataclass(frozen=True)
class Failed:
    """The LLM (or a turn preparer, or storing the turn) failed."""

    error: BaseException


@dataclass(frozen=True)
class MaxSteps:
    """The step limit was reached before a final answer."""

    limit: int


NextStep = Union[FinalOutput, RunAgain, Cancelled, Failed]
Ending = Union[FinalOutput, Cancelled, Failed, MaxSteps]


@dataclass(frozen=True)
class TurnOutcome:
    """What one turn produced and what the loop does next."""

    text: str
    calls: list[Any]  # the tool_call stream items, with the ids the executor gave their results
    executed: list[ExecutedCall]
    next_step: NextStep


@dataclass(frozen=True)
class LoopOutcome:
    ending: Ending
    steps: int  # turns started
    last_text: str  # the last non-empty assistant text (a subagent's summary when it ends early)

    @property
    def reason(self) -> str:
        """The run status this ending maps to (``Done.reason``)."""
        return {FinalOutput: "finished", Cancelled: "cancelled", Failed: "error", MaxSteps: "max_steps"}[type(self.ending)]


@dataclass
class LoopInput:
    """Everything one loop needs; callers differ only in these values."""

    llm: StreamingLLM
    executor: "ToolExecutor"
    registry: "ToolRegistry"
    ctx: "ToolContext"  # the base context of the loop's calls; ``ctx.emit`` receives the stream events
    state: RunState  # messages, step counter, max_steps, model, loaded tools, usage
    cancelled: asyncio.Event
    preparers: Sequence[TurnPreparer] = ()
    sink: MessageSink | None = None  # stores a turn's messages; None: kept in memory only
    hold_results: bool = False  # the turn's own ToolResults wait until the sink stored the turn
    on_model_switch: ModelSwitched | None = None
    # yield the event loop after this long of chunks that arrived together (requests and other runs go between)
    slice_secs: float = 0.001
    # the run's ``usage`` event after each answered call (state, that call's usage); None: not announced
    measure: "Callable[[RunState, dict[str, int]], Awaitable[Event]] | None" = None


def tool_definitions(registry: "ToolRegistry", state: RunState) -> list[dict[str, Any]]:
    """Resident tools plus the deferred ones ``load_tool`` loaded for this loop."""
    defs = registry.resident_definitions()
    if state.loaded_tools:
        defs = defs + [t.definition() for t in registry.sorted_tools() if t.defer_loading and t.name in state.loaded_tools]
        defs.sort(key=lambda d: d["function"]["name"])
    return defs


def _with_id(call: Any, call_id: str) -> Any:
    """The call as stored in the assistant message, with the id the executor gave its result.

    The executor repairs blank ids; the assistant's ``tool_calls`` must carry the same id or the
    endpoint rejects the next request (a tool result without its call).
    """
    return call if call.id == call_id else dataclasses.replace(call, id=call_id)


def _truncated(item: Any, step: int) -> Truncated:
    """The notice for an answer the output bound ended (``finish_reason: "length"``)."""
    cut = next((c for c in item.tool_calls if getattr(c, "cut_off", False)), None)
    max_tokens = int(getattr(item, "max_tokens", 0) or 0)
    bound = f"its output limit of {max_tokens} tokens" if max_tokens else "its output limit"
    if cut is not None:
        message = (f"The model reached {bound} while writing the arguments of {cut.name}; "
                   "the call was not run and the model was told.")
    else:
        message = f"The answer was cut off: the model reached {bound}."
    return Truncated(step=step, max_tokens=max_tokens, tool_name=cut.name if cut else "", message=message)


def _holding(emit: "Emit", held: list[Event]) -> "Emit":
    """The turn's own tool results wait for the turn's commit; everything else goes out now."""

    async def send(event: Event) -> None:
        if isinstance(event, ToolResult) and event.subagent_id is None:
            held.append(event)
        else:
            await emit(event)

    return send


async def run_loop(spec: LoopInput) -> LoopOutcome:
    """Turns until a final answer, cancel, failure or the step limit."""
    state = spec.state
    last_text = ""
    cancel_wait = asyncio.get_running_loop().create_task(spec.cancelled.wait())
    try:
        while True:
            if spec.cancelled.is_set():
                return LoopOutcome(Cancelled(), state.step, last_text)
            if state.step >= state.max_steps:
                return LoopOutcome(MaxSteps(state.max_steps), state.step, last_text)
            state.step += 1
            try:
                turn = await _prepare_and_run(spec, cancel_wait)
                if _overflowed(turn) and not spec.cancelled.is_set():
                    # the endpoint refused the prompt as too long: compact (the preparers see
                    # ``overflowed``) and send the turn again, once; nothing of it ran or was stored
                    state.overflowed = True
                    turn = await _prepare_and_run(spec, cancel_wait)
                    if _overflowed(turn):
                        turn = dataclasses.replace(turn, next_step=Failed(_still_too_long(turn)))
            except Exception as exc:  # noqa: BLE001 - a preparer or the sink failed: the loop ends Failed
                return LoopOutcome(Failed(exc), state.step, last_text)
            finally:
                state.overflowed = False
            last_text = turn.text.strip() or last_text
            step = turn.next_step
            if not isinstance(step, RunAgain):
                return LoopOutcome(step, state.step, last_text)
    finally:
        cancel_wait.cancel()


async def _prepare_and_run(spec: LoopInput, cancel_wait: "asyncio.Task[Any]") -> TurnOutcome:
    state = spec.state
    state.meter.set_tools(tool_definitions(spec.registry, state))  # compaction counts the schemas too
    for prepare in list(spec.preparers):
        await prepare(state)
    return await run_turn(spec, cancel_wait)


def _overflowed(turn: TurnOutcome) -> bool:
    from ..llm.client import ContextOverflowError

    step = turn.next_step
    return isinstance(step, Failed) and isinstance(step.error, ContextOverflowError) and not turn.calls


def _still_too_long(turn: TurnOutcome) -> BaseException:
    from ..llm.client import ContextOverflowError

    error = turn.next_step.error  # type: ignore[union-attr]
    return ContextOverflowError(
        f"{error} — still too long after compacting the conversation. Start a new session, ask for less at once, "
        "or use a model with a larger context (llama.cpp: -c / --ctx-size; Ollama: num_ctx; vLLM: --max-model-len; "
        "then c.AstroConfig.llm_context_window / ASTRO_LLM_CONTEXT_WINDOW if the endpoint does not say it).",
        getattr(error, "window", None),
    )


async def run_turn(spec: LoopInput, cancel_wait: "asyncio.Task[Any]") -> TurnOutcome:
    """One LLM call with its tools; stores the turn (if there is a sink) before announcing its results."""
    state, base_emit = spec.state, spec.ctx.emit
    step = state.step
    held: list[Event] = []
    turn_emit = _holding(base_emit, held) if spec.hold_results else base_emit
    streaming = spec.executor.stream(dataclasses.replace(spec.ctx, step=step, emit=turn_emit))
    text: list[str] = []
    calls: list[Any] = []
    tools = tool_definitions(spec.registry, state)

    async def consume() -> Any:
        state.meter.sending(state.messages)
        stream = spec.llm.stream(state.messages, tools, model=state.model)
        try:
            return await drain(stream)
        finally:
            await stream.aclose()  # type: ignore[attr-defined] - releases the HTTP response at once (cancel, error or done)

    async def drain(stream: AsyncIterator[Any]) -> Any:
        # Chunks that arrived together come out of the client without a pause: after
        # ``slice_secs`` of them, let the loop serve requests and the other runs.
        mark = time.perf_counter()
        async for item in stream:
            if time.perf_counter() - mark > spec.slice_secs:
                await asyncio.sleep(0)
                mark = time.perf_counter()
            kind = item.kind
            if kind == "text":
                text.append(item.delta)
                await base_emit(TextDelta(delta=item.delta, step=step))
            elif kind == "thinking":
                await base_emit(ThinkingDelta(delta=item.delta, step=step))
            elif kind == "tool_call_preparing":
                await base_emit(ToolCallPreparing(index=item.index, name=item.name, chars=item.chars, step=step))
            elif kind == "tool_call":
                request = ToolCallRequest(item.id, item.name, item.arguments_json, cut_off=getattr(item, "cut_off", False))
                calls.append(_with_id(item, streaming.add(request)))
            elif kind == "model_switch":
                state.model = item.to_model
                await base_emit(ModelSwitch(from_model=item.from_model, to_model=item.to_model, reason=item.reason))
                if spec.on_model_switch is not None:
                    spec.on_model_switch(item.to_model)
            elif kind == "completed":
                state.add_usage(item.usage)
                state.meter.calibrate(item.usage)
                if item.finish_reason == "length":
                    await base_emit(_truncated(item, step))
                if spec.measure is not None and item.usage:
                    await base_emit(await spec.measure(state, item.usage))
                return item
        return None

    consumer = asyncio.get_running_loop().create_task(consume())
    error: BaseException | None = None
    cancelled = False
    await asyncio.wait({consumer, cancel_wait}, return_when=asyncio.FIRST_COMPLETED)
    if not consumer.done():
        consumer.cancel()
        cancelled = True
    try:
        await consumer
    except asyncio.CancelledError:
        cancelled = True
    except Exception as exc:  # noqa: BLE001 - the LLM failed: finish started tools, then report
        error = exc
    executed = await streaming.finish()  # started calls end as the executor decides (Block tools finish)
    assistant: dict[str, Any] = {"role": "assistant", "content": "".join(text)}
    if calls:
        assistant["tool_calls"] = [c.to_message() for c in calls]
    new_messages = [assistant, *[e.message for e in executed]]
    if assistant["content"] or calls:
        if spec.sink is not None:
            await spec.sink(new_messages)
        state.messages.extend(new_messages)
    for event in held:
        await base_emit(event)
    next_step: NextStep
    if error is not None:
        next_step = Failed(error)
    elif cancelled or spec.cancelled.is_set():
        next_step = Cancelled()
    elif calls:
        next_step = RunAgain(len(calls))
    else:
        next_step = FinalOutput("".join(text))
    return TurnOutcome("".join(text), calls, executed, next_step)
