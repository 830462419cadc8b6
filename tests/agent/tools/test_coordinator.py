"""Coordinator mode through the runtime: delegation to worker subagents bounded by the semaphore,
per-task timeout, task_stop, synthesize, rows in coordinator_tasks, workers stopped with the run."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Callable

import pytest

from astro_jupyter.events import Subagent, ToolResult
from tests.agent.runtime_helpers import collect, fast, make_config, running
from tests.fakes.openai_server import ScriptedCall, Turn, last_tool_results

WORKER_MARK = "worker of an astro-jupyter coordinator"


def _router(main: list[Any], worker: Callable[[str], Turn]) -> Callable[[dict[str, Any]], Turn]:
    def respond(body: dict[str, Any]) -> Turn:
        if WORKER_MARK in body["messages"][0]["content"]:
            return worker(body["messages"][1]["content"])
        step = main.pop(0)
        return step(body) if callable(step) else step

    return respond


def _ts(value: str) -> float:
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ").timestamp()


def _max_overlap(rows: list[Any]) -> int:
    points = sorted([(_ts(r.started_at), 1) for r in rows] + [(_ts(r.finished_at), -1) for r in rows], key=lambda p: (p[0], p[1]))
    best = cur = 0
    for _, delta in points:
        cur += delta
        best = max(best, cur)
    return best


@pytest.mark.asyncio
async def test_delegated_tasks_run_bounded_by_the_pool_and_are_synthesized(tmp_path, openai_server) -> None:
    tasks = [f"Resolve object {i}" for i in range(5)]
    main = [
        Turn.calls_(*[ScriptedCall("delegate_task", {"description": t}, id=f"d{i}") for i, t in enumerate(tasks)]),
        Turn.call("synthesize", {}, id="syn"),
        Turn.say("All five resolved."),
    ]
    openai_server.respond_with(_router(main, lambda task: Turn.say(f"done: {task}", first_delay=0.3)))
    config = make_config(tmp_path, openai_server.url, coordinator_workers=2)
    async with running(config) as (services, runtime):
        plain = await runtime.start_run("not a coordinator")
        main.insert(0, Turn.say("plain answer"))
        await plain.wait()
        assert "delegate_task" not in [t["function"]["name"] for t in openai_server.chat_requests[0]["tools"]]
        handle = await runtime.start_run("Resolve five objects", coordinator=True)
        events = [e for _, e in await collect(handle)]
        assert (await handle.wait()).reason == "finished"
        rows = await services.coordinator_tasks.list(handle.session_id)
    first = next(r for r in openai_server.chat_requests if "Resolve five objects" in json.dumps(r["messages"]))
    names = [t["function"]["name"] for t in first["tools"]]
    assert {"delegate_task", "check_task", "task_stop", "synthesize"} <= set(names)
    assert "coordinator mode" in first["messages"][0]["content"]
    worker_req = next(r for r in openai_server.chat_requests if WORKER_MARK in r["messages"][0]["content"])
    assert not {"delegate_task", "synthesize"} & {t["function"]["name"] for t in worker_req.get("tools") or []}
    assert [r.status for r in rows] == ["completed"] * 5
    assert sorted(r.result for r in rows) == sorted(f"done: {t}" for t in tasks)
    assert _max_overlap(rows) == 2  # the semaphore bound, seen in the stored start/finish times
    synth = next(e for e in events if isinstance(e, ToolResult) and e.tool_call_id == "syn")
    assert "(5 completed)" in synth.output and all(f"done: {t}" in synth.output for t in tasks)
    starts = [e for e in events if isinstance(e, Subagent) and e.phase == "start"]
    assert len(starts) == 5 and {s.parent_tool_call_id for s in starts} == {f"d{i}" for i in range(5)}


@pytest.mark.asyncio
async def test_task_stop_and_workers_stopped_with_the_run(tmp_path, openai_server) -> None:
    def stop_slow(body: dict[str, Any]) -> Turn:
        ids = {m["tool_call_id"]: m["content"] for m in last_tool_results(body)}
        slow_id = ids["slow"].split("Delegated as ")[1].split(" ")[0]
        return Turn.calls_(ScriptedCall("task_stop", {"task_id": slow_id}, id="stop"), ScriptedCall("task_stop", {"task_id": "task_nope"}, id="bad"))

    main = [
        Turn.calls_(
            ScriptedCall("delegate_task", {"description": "slow: will be stopped"}, id="slow"),
            ScriptedCall("delegate_task", {"description": "orphan: still running at the end"}, id="orph"),
        ),
        stop_slow,
        Turn.call("check_task", {}, id="chk"),
        Turn.say("Finished early."),
    ]
    openai_server.respond_with(_router(main, lambda task: Turn.say("late", first_delay=3.0)))
    config = make_config(tmp_path, openai_server.url, coordinator_workers=3)
    async with running(config) as (services, runtime):
        handle = await runtime.start_run("three tasks", coordinator=True)
        events = [e for _, e in await collect(handle)]
        assert (await handle.wait()).reason == "finished"
        rows = {r.description.split(":")[0]: r for r in await services.coordinator_tasks.list(handle.session_id)}
    results = {e.tool_call_id: e for e in events if isinstance(e, ToolResult)}
    assert "is stopped" in results["stop"].output
    assert results["bad"].is_error and "no delegated task 'task_nope'" in results["bad"].output
    assert rows["slow"].status == "stopped"
    chk = results["chk"].output
    assert "[stopped] slow: will be stopped" in chk and "[running] orphan" in chk
    # the run ended while the orphan still ran: the Stop hook stopped it and recorded that
    assert rows["orphan"].status == "stopped" and rows["orphan"].error == "stopped before it finished"
    stops = [e for e in events if isinstance(e, Subagent) and e.phase == "stop"]
    assert any("stopped before it finished" in s.summary for s in stops)  # task_stop ended its subagent visibly
    assert all(r.finished_at for r in rows.values())


@pytest.mark.asyncio
async def test_per_task_timeout_is_recorded(tmp_path, openai_server) -> None:
    main = [Turn.call("delegate_task", {"description": "hangs"}, id="d"), Turn.call("synthesize", {}, id="syn"), Turn.say("ok")]
    openai_server.respond_with(_router(main, lambda task: Turn.say("too late", first_delay=1.5)))
    config = make_config(tmp_path, openai_server.url)
    async with running(config, tuning=fast(delegated_task_secs=0.3)) as (services, runtime):
        handle = await runtime.start_run("one task", coordinator=True)
        events = [e for _, e in await collect(handle)]
        [row] = await services.coordinator_tasks.list(handle.session_id)
    assert row.status == "timeout" and row.error == "timed out after 0.3 s"
    subs = [e for e in events if isinstance(e, Subagent)]
    assert [s.phase for s in subs] == ["start", "stop"] and subs[1].is_error  # the card does not hang
    synth = next(e for e in events if isinstance(e, ToolResult) and e.tool_call_id == "syn")
    assert "(1 timeout)" in synth.output and "timed out after 0.3 s" in synth.output
