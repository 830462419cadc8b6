"""todo_write: DAG validation, one in_progress, storage in agent_tasks, todo_update events."""

from __future__ import annotations

import pytest

from astro_jupyter.agent.tools.todo import TodoWriteTool, find_cycle
from astro_jupyter.events import TodoUpdate
from tests.agent.tools.orch_ctx import make_ctx


def _t(i: str, status: str = "pending", *blocked: str) -> dict:
    return {"id": i, "content": f"step {i}", "status": status, "blocked_by": list(blocked)}


def test_find_cycle_reports_the_path() -> None:
    assert find_cycle({"a": ["b"], "b": ["c"], "c": []}) is None
    cycle = find_cycle({"a": ["b"], "b": ["c"], "c": ["a"]})
    assert cycle is not None and cycle[0] == cycle[-1] and set(cycle) == {"a", "b", "c"}


@pytest.mark.asyncio
async def test_valid_plan_is_stored_and_announced(services) -> None:
    ctx, events = make_ctx(services)
    todos = [_t("1", "completed"), _t("2", "in_progress", "1"), _t("3", "pending", "2")]
    out = await TodoWriteTool().execute({"todos": todos}, ctx)
    assert not out.is_error
    assert "[x] 1" in out.content and "[~] 2" in out.content and "(after 2)" in out.content
    assert await services.tasks.list("ses_test") == todos
    assert [type(e) for e in events] == [TodoUpdate] and events[0].todos == todos


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "todos, message",
    [
        ([_t("a", "pending", "b"), _t("b", "pending", "a")], "cycle: "),
        ([_t("a", "pending", "a")], "blocked by itself"),
        ([_t("a", "pending", "zz")], "unknown id(s): zz"),
        ([_t("a", "in_progress"), _t("b", "in_progress")], "only one todo may be in_progress"),
        ([_t("a"), _t("a")], "duplicate todo id"),
        ([_t("a"), _t("b", "in_progress", "a")], "are not completed"),
        ([{"id": "a", "content": "x", "status": "done"}], "status must be one of"),
    ],
)
async def test_invalid_plans_are_refused_and_nothing_changes(services, todos, message) -> None:
    ctx, events = make_ctx(services)
    good = [_t("keep", "in_progress")]
    assert not (await TodoWriteTool().execute({"todos": good}, ctx)).is_error
    out = await TodoWriteTool().execute({"todos": todos}, ctx)
    assert out.is_error and message in out.content
    assert await services.tasks.list("ses_test") == good
    assert len(events) == 1


@pytest.mark.asyncio
async def test_subagent_lists_do_not_overwrite_the_parent(services) -> None:
    parent, _ = make_ctx(services)
    child, events = make_ctx(services, subagent_id="sub_1")
    await TodoWriteTool().execute({"todos": [_t("p")]}, parent)
    await TodoWriteTool().execute({"todos": [_t("c")]}, child)
    assert [t["id"] for t in await services.tasks.list("ses_test")] == ["p"]
    assert events[0].subagent_id == "sub_1"


@pytest.mark.asyncio
async def test_through_the_runtime_events_and_storage(tmp_path, openai_server) -> None:
    from tests.agent.runtime_helpers import collect, make_config, running
    from tests.fakes.openai_server import Turn

    async with running(make_config(tmp_path, openai_server.url), TodoWriteTool()) as (services, runtime):
        plan = [_t("find", "in_progress"), _t("read", "pending", "find")]
        cyclic = [_t("find", "pending", "read"), _t("read", "pending", "find")]
        openai_server.script(
            Turn.call("todo_write", {"todos": plan}, id="t1"),
            Turn.call("todo_write", {"todos": cyclic}, id="t2"),
            Turn.say("planned"),
        )
        handle = await runtime.start_run("plan the literature review")
        events = [e for _, e in await collect(handle)]
        stored = await services.tasks.list(handle.session_id)
    updates = [e for e in events if isinstance(e, TodoUpdate)]
    assert len(updates) == 1 and updates[0].todos == plan
    assert updates[0].to_wire()["type"] == "todo_update"
    results = {e.tool_call_id: e for e in events if getattr(e, "tool_call_id", None)}
    assert results["t2"].is_error and "cycle: " in results["t2"].output
    assert stored == plan
