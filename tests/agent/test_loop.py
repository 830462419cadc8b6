"""agent/loop.py on its own: the real LLM client against the scripted OpenAI server, a real executor.

Each next-step kind (final answer, run again, cancelled, failed), the step limit, a cancel in the
middle of a slow stream, an LLM failure after a call started (the call ends and reports before
the loop does), and a sink that stores a turn before its held tool results go out.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, AsyncIterator

import pytest
import pytest_asyncio

from astro_jupyter.agent.executor import ToolExecutor
from astro_jupyter.agent.loop import (
    Cancelled,
    Failed,
    FinalOutput,
    LoopInput,
    LoopOutcome,
    MaxSteps,
    RunAgain,
    run_loop,
    run_turn,
)
from astro_jupyter.agent.permissions import PermissionChecker
from astro_jupyter.agent.run import RunState
from astro_jupyter.agent.tools.base import AgentTool, InterruptBehavior, ToolContext, ToolOutput
from astro_jupyter.agent.tools.file_state import FileStateCache
from astro_jupyter.agent.tools.registry import ToolRegistry
from astro_jupyter.errors import LlmError
from astro_jupyter.events import Event, TextDelta, ToolCall, ToolResult
from astro_jupyter.services.container import ServiceContainer
from tests.agent.runtime_helpers import fast, make_config
from tests.fakes.openai_server import ScriptedCall, Turn, last_tool_results
from tests.waiting import until


class Lookup(AgentTool):
    name = "lookup"
    description = "Look an object up."
    parameters = {"type": "object", "properties": {"name": {"type": "string"}}}
    is_readonly = True

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        return ToolOutput(f"{args.get('name', '?')}: found")


class CarefulWrite(AgentTool):
    """A Block tool that takes a while: it must finish (and report) even when the LLM fails."""

    name = "careful_write"
    description = "Write carefully."
    interrupt_behavior = InterruptBehavior.BLOCK

    def __init__(self) -> None:
        self.finished = False

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        await asyncio.sleep(0.4)
        self.finished = True
        return ToolOutput("written completely")


class Harness:
    def __init__(self, services: ServiceContainer, *tools: AgentTool, max_steps: int = 5) -> None:
        self.services = services
        self.events: list[Event] = []
        self.cancelled = asyncio.Event()
        self.registry = ToolRegistry([Lookup(), *tools])
        self.state = RunState(run_id="run_loop", session_id="ses_loop", max_steps=max_steps)
        self.state.messages = [{"role": "system", "content": "You are a test."}, {"role": "user", "content": "Go."}]

    async def emit(self, event: Event) -> None:
        self.events.append(event)

    def spec(self, **kw: Any) -> LoopInput:
        config = self.services.config
        ctx = ToolContext(config=config, services=self.services, session_id="ses_loop", cancelled=self.cancelled,
                          emit=self.emit, file_state=FileStateCache(), run_id="run_loop")
        executor = ToolExecutor(self.registry, PermissionChecker([], "auto"), None, config)
        return LoopInput(llm=self.services.llm, executor=executor, registry=self.registry, ctx=ctx,
                         state=self.state, cancelled=self.cancelled, **kw)

    def of(self, kind: type) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]


@pytest_asyncio.fixture
async def services(tmp_path: Path, openai_server: Any) -> AsyncIterator[ServiceContainer]:
    container = await ServiceContainer(make_config(tmp_path, openai_server.url), tuning=fast({"max_retries": 0})).start()
    try:
        yield container
    finally:
        await container.close()


@pytest.mark.asyncio
async def test_a_plain_answer_is_the_final_output(services: ServiceContainer, openai_server: Any) -> None:
    openai_server.script(Turn.say("M31 lies 0.78 Mpc away."))
    h = Harness(services)
    outcome = await run_loop(h.spec())
    assert outcome == LoopOutcome(FinalOutput("M31 lies 0.78 Mpc away."), steps=1, last_text="M31 lies 0.78 Mpc away.")
    assert outcome.reason == "finished"
    assert "".join(e.delta for e in h.of(TextDelta)) == "M31 lies 0.78 Mpc away."
    assert h.state.messages[-1] == {"role": "assistant", "content": "M31 lies 0.78 Mpc away."}


@pytest.mark.asyncio
async def test_a_turn_with_calls_runs_again_and_the_next_request_carries_the_results(
    services: ServiceContainer, openai_server: Any
) -> None:
    openai_server.script(Turn.call("lookup", {"name": "Vega"}, id="c1", text="Looking."), Turn.say("Vega is found."))
    h = Harness(services)
    spec = h.spec()
    h.state.step = 1
    cancel_wait = asyncio.get_running_loop().create_task(h.cancelled.wait())
    try:
        turn = await run_turn(spec, cancel_wait)
    finally:
        cancel_wait.cancel()
    assert turn.next_step == RunAgain(1)
    assert [e.output.content for e in turn.executed] == ["Vega: found"]
    outcome = await run_loop(spec)
    assert outcome.ending == FinalOutput("Vega is found.") and outcome.steps == 2
    assert last_tool_results(openai_server.chat_requests[1]) == [
        {"role": "tool", "tool_call_id": "c1", "name": "lookup", "content": "Vega: found"}
    ]
    assert [e.tool_call_id for e in h.of(ToolResult)] == ["c1"]


@pytest.mark.asyncio
async def test_the_step_limit_ends_the_loop_with_the_last_text(services: ServiceContainer, openai_server: Any) -> None:
    openai_server.script(
        Turn.call("lookup", {"name": "a"}, text="First I look up a."),
        Turn.call("lookup", {"name": "b"}),
        Turn.say("never asked for"),
    )
    h = Harness(services, max_steps=2)
    outcome = await run_loop(h.spec())
    assert outcome.ending == MaxSteps(2) and outcome.reason == "max_steps"
    assert outcome.steps == 2 and outcome.last_text == "First I look up a."
    assert len(openai_server.chat_requests) == 2 and openai_server.remaining == 1


@pytest.mark.asyncio
async def test_cancel_mid_stream_abandons_the_stream_at_once(services: ServiceContainer, openai_server: Any) -> None:
    openai_server.script(Turn.say("A long answer. " * 400, delay=0.05))  # about 70 s if read to the end
    h = Harness(services)

    async def cancel_after_first_text() -> None:
        await until(lambda: h.of(TextDelta), "the first text")
        h.cancelled.set()

    canceller = asyncio.get_running_loop().create_task(cancel_after_first_text())
    outcome = await asyncio.wait_for(run_loop(h.spec()), 30)  # reading to the end would take 70 s
    await canceller
    assert outcome.ending == Cancelled() and outcome.reason == "cancelled"
    partial = h.state.messages[-1]
    assert partial["role"] == "assistant" and partial["content"].startswith("A lo")
    assert len(partial["content"]) < len("A long answer. " * 400)
    await until(lambda: openai_server.state.get("disconnects"), "the server to see the client hang up")
    assert openai_server.stream_ends == []  # the response was closed, never read to its end


@pytest.mark.asyncio
async def test_an_llm_failure_after_a_call_started_finishes_that_call_first(
    services: ServiceContainer, openai_server: Any
) -> None:
    # role chunk, call 0 header, its "{}" arguments, call 1 header (call 0 is now complete and starts), then the
    # connection drops: the model never finishes its answer
    openai_server.script(Turn.calls_(ScriptedCall("careful_write", {}, "w1"), ScriptedCall("lookup", {}, "l1"), drop_after=4))
    write = CarefulWrite()
    h = Harness(services, write)
    outcome = await asyncio.wait_for(run_loop(h.spec()), 20)
    assert isinstance(outcome.ending, Failed) and outcome.reason == "error"
    assert isinstance(outcome.ending.error, LlmError)
    assert write.finished, "the started Block call was abandoned when the LLM failed"
    assert [(e.tool_call_id, e.output, e.is_error) for e in h.of(ToolResult)] == [("w1", "written completely", False)]
    assert [e.id for e in h.of(ToolCall)] == ["w1"]  # the cut-off second call never ran
    assistant, result = h.state.messages[-2:]
    assert [c["id"] for c in assistant["tool_calls"]] == ["w1"]
    assert result["tool_call_id"] == "w1" and result["content"] == "written completely"


@pytest.mark.asyncio
async def test_a_failing_preparer_ends_the_loop_failed(services: ServiceContainer, openai_server: Any) -> None:
    h = Harness(services)

    async def broken(state: RunState) -> None:
        raise RuntimeError("the store is locked")

    outcome = await run_loop(h.spec(preparers=[broken]))
    assert isinstance(outcome.ending, Failed) and str(outcome.ending.error) == "the store is locked"
    assert openai_server.chat_requests == []


@pytest.mark.asyncio
async def test_held_results_go_out_only_after_the_sink_stored_the_turn(
    services: ServiceContainer, openai_server: Any
) -> None:
    openai_server.script(Turn.call("lookup", {"name": "M31"}, id="c1"), Turn.say("Done."))
    h = Harness(services)
    stored: list[tuple[int, list[dict[str, Any]]]] = []

    async def sink(messages: list[dict[str, Any]]) -> None:
        stored.append((len(h.of(ToolResult)), [dict(m) for m in messages]))

    outcome = await run_loop(h.spec(sink=sink, hold_results=True))
    assert outcome.ending == FinalOutput("Done.")
    (results_seen, first), (_, second) = stored
    assert results_seen == 0, "a tool result was announced before its turn was stored"
    assert [m["role"] for m in first] == ["assistant", "tool"] and first[1]["content"] == "M31: found"
    assert second == [{"role": "assistant", "content": "Done."}]
    assert [e.tool_call_id for e in h.of(ToolResult)] == ["c1"]
