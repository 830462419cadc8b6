"""Executor pipeline: validation, partition, timeout, cancellation, sibling abort, errors, progress."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

sys.path.insert(0, str(Path(__file__).parent))

from executor_support import (  # noqa: E402
    BoomTool,
    EchoTool,
    ProgressTool,
    Recorder,
    SleepTool,
    Timeline,
    call,
    make_ctx,
    make_executor,
    settle,
)

from astro_jupyter.agent.executor import ToolCallRequest  # noqa: E402
from astro_jupyter.agent.tools.base import InterruptBehavior  # noqa: E402


@pytest.fixture
def timeline() -> Timeline:
    return Timeline()


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest_asyncio.fixture
async def ctx(services: Any, recorder: Recorder) -> Any:
    return make_ctx(services, recorder)


def fs_tools(timeline: Timeline) -> list[Any]:
    return [
        SleepTool("read", timeline),
        SleepTool("grep", timeline),
        SleepTool("bash", timeline, safe=False),
        SleepTool("write", timeline, safe=False, interrupt=InterruptBehavior.BLOCK),
        EchoTool(),
        BoomTool(),
        ProgressTool(),
    ]


# -- validate_and_prepare ---------------------------------------------------------------------


@pytest.mark.asyncio
async def test_bad_json_becomes_error_result_and_run_continues(services: Any, ctx: Any, recorder: Recorder) -> None:
    ex = make_executor(services, [EchoTool()])
    results = await ex.execute([call("echo", '{"text": "hi"', id="a"), call("echo", '{"text": "ok"}', id="b")], ctx)
    assert [r.id for r in results] == ["a", "b"]
    assert results[0].output.is_error and "not valid JSON" in results[0].output.content
    assert results[0].arguments is None
    assert results[1].output.content == "ok" and not results[1].output.is_error
    # The UI still sees a tool_call (with the raw text) and exactly one result per id.
    calls = recorder.of("tool_call")
    assert calls[0].arguments == '{"text": "hi"'
    assert sorted(e.tool_call_id for e in recorder.of("tool_result")) == ["a", "b"]


@pytest.mark.asyncio
async def test_non_object_json_is_rejected(services: Any, ctx: Any) -> None:
    ex = make_executor(services, [EchoTool()])
    [res] = await ex.execute([call("echo", '["hi"]')], ctx)
    assert res.output.is_error and "must be a JSON object, got array" in res.output.content


@pytest.mark.asyncio
async def test_schema_invalid_arguments_name_the_problem(services: Any, ctx: Any) -> None:
    ex = make_executor(services, [EchoTool()])
    missing, wrong_type, extra = await ex.execute(
        [call("echo", "{}"), call("echo", '{"text": 5}'), call("echo", '{"text": "a", "colour": "red"}')], ctx
    )
    assert missing.output.is_error and "missing required argument 'text'" in missing.output.content
    assert wrong_type.output.is_error and "text: expected string, got integer" in wrong_type.output.content
    assert extra.output.is_error and "unknown argument 'colour'" in extra.output.content


@pytest.mark.asyncio
async def test_unknown_tool_lists_available_tools(services: Any, ctx: Any, timeline: Timeline) -> None:
    ex = make_executor(services, fs_tools(timeline))
    [res] = await ex.execute([call("telescope", "{}")], ctx)
    assert res.output.is_error
    assert "unknown tool 'telescope'" in res.output.content
    assert "Available tools: bash, boom, echo, grep, progress, read, write" in res.output.content


@pytest.mark.asyncio
async def test_empty_tool_call_id_is_repaired(services: Any, ctx: Any, recorder: Recorder) -> None:
    ex = make_executor(services, [EchoTool()])
    first, second = await ex.execute(
        [ToolCallRequest("", "echo", '{"text": "a"}'), ToolCallRequest("  ", "echo", '{"text": "b"}')], ctx
    )
    assert first.id.startswith("call_") and len(first.id) > 20
    assert second.id.startswith("call_") and second.id != first.id
    assert first.message["tool_call_id"] == first.id
    assert [e.id for e in recorder.of("tool_call")] == [first.id, second.id]
    assert {e.tool_call_id for e in recorder.of("tool_result")} == {first.id, second.id}


@pytest.mark.asyncio
async def test_duplicate_detector_spans_turns(services: Any, ctx: Any) -> None:
    ex = make_executor(services, [EchoTool()])  # threshold 3 (config default)
    assert ex.limits.duplicate_threshold == 3
    (r1,) = await ex.execute([call("echo", '{"text": "x"}')], ctx)
    (r2,) = await ex.execute([call("echo", '{"count": 1, "text": "x"}')], ctx)  # same args, other key order
    (r3,) = await ex.execute([call("echo", '{"text": "x", "count": 1}')], ctx)
    assert not r1.output.is_error and not r2.output.is_error
    assert not r3.output.is_error  # {"text":"x"} != {"text":"x","count":1}: only two identical so far
    (r4,) = await ex.execute([call("echo", '{"text":"x","count":1}')], ctx)
    assert r4.output.is_error and "looping" in r4.output.content and "3 times in a row" in r4.output.content
    (r5,) = await ex.execute([call("echo", '{"text": "y"}')], ctx)  # a different call breaks the chain
    assert not r5.output.is_error


@pytest.mark.asyncio
async def test_duplicate_detector_within_one_turn(services: Any, ctx: Any) -> None:
    ex = make_executor(services, [EchoTool()])
    results = await ex.execute([call("echo", '{"text": "x"}') for _ in range(4)], ctx)
    assert [r.output.is_error for r in results] == [False, False, True, True]


# -- partition (observed by overlap of execution spans) -----------------------------------------


@pytest.mark.asyncio
async def test_partition_read_grep_bash_read_write(services: Any, ctx: Any, timeline: Timeline) -> None:
    ex = make_executor(services, fs_tools(timeline))
    results = await ex.execute(
        [
            call("read", '{"tag": "read1"}'),
            call("grep", '{"tag": "grep"}'),
            call("bash", '{"tag": "bash"}'),
            call("read", '{"tag": "read2"}'),
            call("write", '{"tag": "write"}'),
        ],
        ctx,
    )
    assert [r.output.content for r in results] == ["read:read1", "grep:grep", "bash:bash", "read:read2", "write:write"]
    assert timeline.overlap("read1", "grep")  # [read ∥ grep]
    assert timeline.before("read1", "bash") and timeline.before("grep", "bash")  # [bash] alone
    assert timeline.before("bash", "read2")  # [read]
    assert timeline.before("read2", "write")  # [write]


@pytest.mark.asyncio
async def test_partition_is_input_aware(services: Any, ctx: Any, timeline: Timeline) -> None:
    ex = make_executor(services, fs_tools(timeline))
    await ex.execute(
        [call("read", '{"tag": "a"}'), call("read", '{"tag": "b", "exclusive": true}'), call("read", '{"tag": "c"}')],
        ctx,
    )
    assert timeline.before("a", "b") and timeline.before("b", "c")


@pytest.mark.asyncio
async def test_results_keep_call_order_when_finishing_out_of_order(services: Any, ctx: Any, timeline: Timeline,
                                                                   recorder: Recorder) -> None:
    ex = make_executor(services, fs_tools(timeline))
    results = await ex.execute(
        [call("read", '{"tag": "slow", "secs": 0.2}'), call("read", '{"tag": "fast", "secs": 0.01}')], ctx
    )
    assert [r.output.content for r in results] == ["read:slow", "read:fast"]
    # ToolResult events arrive as each call ends (fast first): the UI updates early.
    assert [e.output for e in recorder.of("tool_result")] == ["read:fast", "read:slow"]


# -- timeout, cancellation, sibling abort ---------------------------------------------------------


@pytest.mark.asyncio
async def test_timeout_becomes_error_result(services: Any, ctx: Any, timeline: Timeline) -> None:
    services.config.tool_timeout_secs = 0.2
    ex = make_executor(services, fs_tools(timeline))
    # the read would wait forever: only the timeout ends it (the deadline fails the test otherwise)
    slow, quick = await asyncio.wait_for(
        ex.execute([call("read", '{"tag": "s", "gated": true}'), call("echo", '{"text": "q"}')], ctx), 30)
    assert slow.output.is_error and "timed out after 0.2s" in slow.output.content
    assert slow.output.metadata.get("timeout") is True
    assert quick.output.content == "q"


@pytest.mark.asyncio
async def test_cancel_stops_cancel_tools_and_answers_every_call(
    services: Any, ctx: Any, timeline: Timeline, recorder: Recorder
) -> None:
    ex = make_executor(services, fs_tools(timeline))
    calls = [
        call("read", '{"tag": "r1", "gated": true}', id="c1"),  # would never end by themselves
        call("grep", '{"tag": "g1", "gated": true}', id="c2"),
        call("bash", '{"tag": "b1"}', id="c3"),  # not started yet when the user cancels
    ]
    task = asyncio.ensure_future(ex.execute(calls, ctx))
    await timeline.started("r1", "g1")
    ctx.cancelled.set()
    results = await asyncio.wait_for(task, 30)
    assert [r.id for r in results] == ["c1", "c2", "c3"]
    assert all(r.output.is_error for r in results)
    assert "cancelled by the user" in results[0].output.content
    assert "cancelled by the user before it started" in results[2].output.content
    assert "b1" not in timeline.spans  # never started
    assert len(recorder.of("tool_result")) == 3


@pytest.mark.asyncio
async def test_cancel_is_noticed_by_polling_even_without_a_wakeup(services: Any, ctx: Any, timeline: Timeline) -> None:
    """Setting the flag without waking the loop's waiters (e.g. from another thread) is seen by polling."""
    ex = make_executor(services, fs_tools(timeline))
    task = asyncio.ensure_future(ex.execute([call("read", '{"tag": "r", "gated": true}')], ctx))
    await timeline.started("r")
    ctx.cancelled._value = True  # flag only: asyncio.Event.wait() waiters are not woken
    (res,) = await asyncio.wait_for(task, 30)  # the read never ends by itself: polling ended it
    assert "cancelled by the user" in res.output.content


@pytest.mark.asyncio
async def test_block_tool_runs_to_completion_on_cancel(services: Any, ctx: Any, timeline: Timeline) -> None:
    tools = fs_tools(timeline)
    ex = make_executor(services, tools)
    task = asyncio.ensure_future(
        ex.execute([call("write", '{"tag": "w", "gated": true}'), call("read", '{"tag": "after"}')], ctx)
    )
    await timeline.started("w")
    ctx.cancelled.set()
    await settle()
    assert not task.done()  # the write is not cut short by the cancel
    timeline.release("w")
    write, after = await asyncio.wait_for(task, 30)
    assert write.output.content == "write:w" and not write.output.is_error
    assert tools[3].finished == ["w"]
    assert after.output.is_error and "before it started" in after.output.content


@pytest.mark.asyncio
async def test_cancel_before_execute_still_answers_each_call(services: Any, ctx: Any, timeline: Timeline,
                                                             recorder: Recorder) -> None:
    ex = make_executor(services, fs_tools(timeline))
    ctx.cancelled.set()
    results = await ex.execute([call("read", '{"tag": "a"}'), call("echo", '{"text": "b"}')], ctx)
    assert [r.output.is_error for r in results] == [True, True]
    assert timeline.spans == {}
    assert len(recorder.of("tool_call")) == 2 and len(recorder.of("tool_result")) == 2


@pytest.mark.asyncio
async def test_sibling_abort_cancels_running_siblings(services: Any, ctx: Any, timeline: Timeline) -> None:
    tools = [
        SleepTool("fetch", timeline, fail=True, sibling_abort=True),
        SleepTool("read", timeline),
    ]
    ex = make_executor(services, tools)
    failing, sibling = await asyncio.wait_for(ex.execute(  # the read never ends by itself: the abort ended it
        [call("fetch", '{"tag": "f", "secs": 0.05}', id="f1"), call("read", '{"tag": "r", "gated": true}', id="r1")], ctx
    ), 30)
    assert failing.output.is_error and "fetch f broke" in failing.output.content
    assert sibling.output.is_error and sibling.output.metadata.get("sibling_abort") is True
    assert "sibling call fetch (f1) failed: fetch f broke" in sibling.output.content


@pytest.mark.asyncio
async def test_failure_without_sibling_abort_flag_leaves_siblings_alone(services: Any, ctx: Any,
                                                                       timeline: Timeline) -> None:
    tools = [SleepTool("fetch", timeline, fail=True), SleepTool("read", timeline)]
    ex = make_executor(services, tools)
    failing, sibling = await ex.execute(
        [call("fetch", '{"tag": "f", "secs": 0.01}'), call("read", '{"tag": "r", "secs": 0.2}')], ctx
    )
    assert failing.output.is_error and not sibling.output.is_error


# -- exceptions, progress, messages -------------------------------------------------------------


@pytest.mark.asyncio
async def test_exception_in_tool_becomes_error_result(services: Any, ctx: Any) -> None:
    ex = make_executor(services, [BoomTool(), EchoTool()])
    boom, echo = await ex.execute([call("boom", ""), call("echo", '{"text": "still here"}')], ctx)
    assert boom.output.is_error
    assert boom.output.content == "Error: boom failed: KeyError: \"no such key: 'flux'\""
    assert "Traceback" not in boom.output.content
    assert echo.output.content == "still here"


@pytest.mark.asyncio
async def test_progress_events(services: Any, ctx: Any, recorder: Recorder) -> None:
    ex = make_executor(services, [ProgressTool()])
    (res,) = await ex.execute([call("progress", "{}", id="p1")], ctx)
    assert res.output.content == "3 pages"
    progress = recorder.of("tool_progress")
    assert [p.progress for p in progress] == [
        {"done": i, "total": 3, "message": f"page {i}"} for i in (1, 2, 3)
    ]
    assert {p.id for p in progress} == {"p1"}
    types = [e.type for e in recorder.events]
    assert types == ["tool_call", "tool_progress", "tool_progress", "tool_progress", "tool_result"]


@pytest.mark.asyncio
async def test_tool_message_and_result_event(services: Any, recorder: Recorder) -> None:
    ctx = make_ctx(services, recorder, step=4, subagent_id="sub-1")
    ex = make_executor(services, [EchoTool()])
    (res,) = await ex.execute([call("echo", '{"text": "M31"}', id="t1")], ctx)
    assert res.message == {"role": "tool", "tool_call_id": "t1", "name": "echo", "content": "M31"}
    assert res.arguments == {"text": "M31"}
    [tc] = recorder.of("tool_call")
    [tr] = recorder.of("tool_result")
    assert tc.to_wire() == {"type": "tool_call", "subagent_id": "sub-1", "id": "t1", "name": "echo",
                            "arguments": {"text": "M31"}, "step": 4}
    assert (tr.tool_call_id, tr.output, tr.is_error, tr.step, tr.subagent_id) == ("t1", "M31", False, 4, "sub-1")
    json.dumps(tr.to_wire())


@pytest.mark.asyncio
async def test_metrics_and_audit_row(services: Any, ctx: Any, timeline: Timeline) -> None:
    ex = make_executor(services, fs_tools(timeline))
    (res,) = await ex.execute([call("read", '{"tag": "m", "secs": 0.05}', id="m1")], ctx)
    assert res.duration_ms >= 45
    assert ex.metrics["read"].calls == 1 and ex.metrics["read"].total_ms >= 45
    rows = await services.audit.list("s1")
    [row] = [r for r in rows if r["tool_call_id"] == "m1"]
    assert row["event"] == "tool_use" and row["tool_name"] == "read" and row["run_id"] == "r1"
    assert json.loads(row["arguments"]) == {"tag": "m", "secs": 0.05}
    assert row["is_error"] == 0 and row["duration_ms"] == res.duration_ms


@pytest.mark.asyncio
async def test_audit_failure_is_an_error_event_not_a_lost_result(services: Any, ctx: Any,
                                                                 recorder: Recorder) -> None:
    await services.db.execute("DROP TABLE agent_audit_log")  # the store refuses every audit insert
    ex = make_executor(services, [EchoTool()])
    (res,) = await ex.execute([call("echo", '{"text": "kept"}', id="k1")], ctx)
    assert res.output.content == "kept" and not res.output.is_error
    [err] = recorder.of("error")
    assert err.reason == "store" and "could not write the audit log for echo (k1)" in err.message
    assert [e.output for e in recorder.of("tool_result")] == ["kept"]
