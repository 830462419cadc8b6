"""Compaction through the runtime: micro placeholders, auto summary with file restore, manual
(compress_context), the circuit breaker, the memory bridge, hooks, storage (compacted, never deleted)."""

from __future__ import annotations

from typing import Any

import pytest

from astro_jupyter.agent.compaction import (
    CompactionPolicy,
    PLACEHOLDER_PREFIX,
    RESTORE_PREFIX,
    SUMMARY_PREFIX,
    CircuitBreaker,
    choose_cut,
    micro_compact,
)
from astro_jupyter.agent.hooks import HookRegistry
from astro_jupyter.agent.tools.compress import CompressContextTool
from astro_jupyter.agent.tools.filesystem.read import ReadFileTool
from astro_jupyter.agent.tools.memory import SaveMemoryTool
from astro_jupyter.agent.tools.todo import TodoWriteTool
from astro_jupyter.events import Compaction, Subagent
from tests.agent.runtime_helpers import collect, fast, make_config, running
from tests.fakes.openai_server import Turn

OLD = [
    ("user", "Find the distance to NGC 4258 from the water maser."),
    ("assistant", "The maser distance to NGC 4258 is 7.576 Mpc (Reid et al. 2019). " * 6),
    ("user", "And the Cepheid zero point from it?"),
    ("assistant", "Using NGC 4258 as anchor the SH0ES zero point gives H0 = 73 km/s/Mpc. " * 6),
]


def _todo(i: int) -> dict[str, Any]:
    return {"todos": [{"id": f"t{i}", "content": f"step {i}", "status": "pending"}]}


async def _seed(services: Any) -> str:
    session = await services.sessions.create(title="maser distances")
    for role, content in OLD:
        await services.messages.append(session.id, {"role": role, "content": content})
    return session.id


def _hooks(seen: list[tuple[str, dict[str, Any]]]) -> HookRegistry:
    hooks = HookRegistry()

    async def record(event: Any, payload: dict[str, Any]) -> None:
        seen.append((event.value, payload))

    for name in ("PreCompact", "PostCompact", "SubagentStart", "SubagentStop"):
        hooks.register(name, record)
    return hooks


def test_estimate_micro_and_cut() -> None:
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "s"}]
    for i in range(4):
        msgs.append({"role": "assistant", "content": "", "tool_calls": [{"id": f"c{i}", "function": {"name": "x", "arguments": "{}"}}]})
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "name": "x", "content": "r" * 400})
    size = lambda: sum(len(m.get("content") or "") for m in msgs)  # noqa: E731
    before = size()
    assert micro_compact(msgs, keep_recent=1) == 3
    assert [m["content"].startswith(PLACEHOLDER_PREFIX) for m in msgs if m["role"] == "tool"] == [True, True, True, False]
    assert size() < before
    assert micro_compact(msgs, keep_recent=1) == 0  # idempotent
    cut = choose_cut(msgs, keep_recent=1)  # the last message is a tool result: keep its call with it
    assert cut is not None and msgs[cut]["role"] == "assistant" and cut == len(msgs) - 2
    assert choose_cut(msgs[:2], keep_recent=3) is None
    breaker = CircuitBreaker(2)
    breaker.record_failure()
    assert not breaker.is_open
    breaker.record_failure()
    assert breaker.is_open
    breaker.record_success()
    assert not breaker.is_open


@pytest.mark.asyncio
async def test_auto_compaction_summarises_restores_files_and_keeps_rows(tmp_path, openai_server) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("maser anchor notes: D = 7.576 Mpc\n" + "calibration row 0123456789 abcdefghij\n" * 150)
    seen: list[tuple[str, dict[str, Any]]] = []
    config = make_config(tmp_path, openai_server.url)
    policy = CompactionPolicy(
        soft_limit_tokens=800,  # step 1 is ~500 tokens, step 2 (with the file) ~1100
        micro_ratio=5.0,  # micro off: this test is about the summary layer
        keep_recent_messages=2,
        restore_chars=300,
        memory_bridge=False,
    )
    async with running(config, ReadFileTool(), hooks=_hooks(seen),
                       tuning=fast({"max_retries": 0}, compaction=policy)) as (services, runtime):
        sid = await _seed(services)
        openai_server.script(
            Turn.call("read_file", {"path": str(notes)}, id="r1"),  # step 1 (below the limit); its result is large
            Turn.say("- maser distance 7.576 Mpc\n- H0 = 73 from SH0ES"),  # step 2: the summary (complete())
            Turn.say("Done: H0 = 73 km/s/Mpc."),  # step 2: the answer
        )
        handle = await runtime.start_run("Summarise what we know.", session_id=sid)
        events = [e for _, e in await collect(handle)]
        assert (await handle.wait()).reason == "finished"
        comps = [e for e in events if isinstance(e, Compaction)]
        assert [c.layer for c in comps] == ["auto"]
        assert comps[0].tokens_after < comps[0].tokens_before
        assert "restored files: " + str(notes) in comps[0].message
        summary_req, answer_req = openai_server.chat_requests[1], openai_server.chat_requests[2]
        assert "Summarise this conversation" in summary_req["messages"][-1]["content"]
        assert "7.576 Mpc" in summary_req["messages"][-1]["content"]
        sent = answer_req["messages"]
        assert sent[0]["role"] == "system"
        assert sent[1]["content"].startswith(SUMMARY_PREFIX) and "H0 = 73 from SH0ES" in sent[1]["content"]
        assert sent[2]["content"].startswith(RESTORE_PREFIX) and "maser anchor notes" in sent[2]["content"]
        assert not any("water maser" in (m.get("content") or "") for m in sent)  # the old question is gone
        # storage: nothing deleted, the dropped rows are marked, the summary is on the session
        rows = await services.messages.list(sid)
        assert [r.content for r in rows[:4]] == [c for _, c in OLD]
        assert all(r.compacted for r in rows[:4]) and not rows[-1].compacted
        assert "H0 = 73" in (await services.sessions.get(sid)).summary
        assert [name for name, _ in seen] == ["PreCompact", "PostCompact"]
        assert seen[1][1]["layer"] == "auto" and seen[1][1]["dropped"] >= 4
        # the next run of the session starts from the summary, not from the compacted rows
        openai_server.script(Turn.say("ok"))
        nxt = await runtime.start_run("next question", session_id=sid)
        await nxt.wait()
        first = openai_server.chat_requests[-1]["messages"]
        assert first[1]["content"].startswith(SUMMARY_PREFIX)
        assert not any("water maser" in (m.get("content") or "") for m in first)


@pytest.mark.asyncio
async def test_micro_compaction_replaces_old_tool_results_before_the_limit(tmp_path, openai_server) -> None:
    config = make_config(tmp_path, openai_server.url)
    tuning = fast(compaction=CompactionPolicy(soft_limit_tokens=100_000, micro_ratio=0.0, micro_keep_recent=1,
                                              memory_bridge=False))
    big = tmp_path / "big.txt"
    big.write_text("line of data\n" * 200)
    small = tmp_path / "small.txt"
    small.write_text("tiny\n" * 60)
    async with running(config, ReadFileTool(), tuning=tuning) as (services, runtime):
        openai_server.script(
            Turn.call("read_file", {"path": str(big)}, id="a"),
            Turn.call("read_file", {"path": str(small)}, id="b"),
            Turn.say("read both"),
        )
        handle = await runtime.start_run("read the files")
        events = [e for _, e in await collect(handle)]
        micro = [e for e in events if isinstance(e, Compaction)]
        assert [c.layer for c in micro] == ["micro"] and "1 old tool result" in micro[0].message
        last = openai_server.chat_requests[-1]["messages"]
        tools = [m for m in last if m["role"] == "tool"]
        assert tools[0]["content"].startswith(PLACEHOLDER_PREFIX) and "read_file" in tools[0]["content"]
        assert "tiny" in tools[1]["content"]
        stored = [m for m in await services.messages.list(handle.session_id) if m.role == "tool"]
        assert "line of data" in stored[0].content  # the store keeps the full result


@pytest.mark.asyncio
async def test_repeated_failures_open_the_breaker_but_manual_still_works(tmp_path, openai_server) -> None:
    config = make_config(tmp_path, openai_server.url, max_steps=10)
    policy = CompactionPolicy(soft_limit_tokens=200, keep_recent_messages=2, breaker_threshold=3, memory_bridge=False)
    async with running(config, TodoWriteTool(), CompressContextTool(),
                       tuning=fast({"max_retries": 0}, compaction=policy)) as (services, runtime):
        sid = await _seed(services)
        openai_server.script(
            Turn.fail(500, "summariser down"), Turn.call("todo_write", _todo(1)),
            Turn.fail(500, "summariser down"), Turn.call("todo_write", _todo(2)),
            Turn.fail(500, "summariser down"), Turn.call("todo_write", _todo(3)),
            # step 4: breaker open -> no summary request at all
            Turn.call("compress_context", {"focus": "keep H0"}),
            # step 5: manual compaction ignores the breaker
            Turn.say("- H0 = 73"), Turn.say("finished"),
        )
        handle = await runtime.start_run("go", session_id=sid)
        events = [e for _, e in await collect(handle)]
        assert (await handle.wait()).reason == "finished"
        comps = [e for e in events if isinstance(e, Compaction)]
        assert [c.layer for c in comps] == ["auto", "auto", "auto", "manual"]
        assert all("compaction failed" in c.message and "no message was dropped" in c.message for c in comps[:3])
        assert "1/3" in comps[0].message and "circuit breaker open" in comps[2].message
        assert comps[3].message.startswith("summarised") and comps[3].tokens_after < comps[3].tokens_before
        # 3 failed summaries + 3 tool turns + compress turn + manual summary + answer: step 4 sent no summary
        assert openai_server.remaining == 0 and len(openai_server.chat_requests) == 9
        manual_req = openai_server.chat_requests[-2]
        assert "Keep especially: keep H0" in manual_req["messages"][0]["content"]
        rows = await services.messages.list(sid)
        assert [r.content for r in rows[:4]] == [c for _, c in OLD]  # failures lost nothing


@pytest.mark.asyncio
async def test_memory_bridge_saves_durable_facts_from_dropped_messages(tmp_path, openai_server) -> None:
    seen: list[tuple[str, dict[str, Any]]] = []
    config = make_config(tmp_path, openai_server.url)
    policy = CompactionPolicy(soft_limit_tokens=300, keep_recent_messages=1, memory_bridge=True)
    async with running(config, CompressContextTool(), SaveMemoryTool(), hooks=_hooks(seen),
                       tuning=fast({"max_retries": 0}, compaction=policy)) as (services, runtime):
        sid = await _seed(services)
        fact = "The maser distance to NGC 4258 is 7.576 Mpc according to Reid et al. 2019."
        openai_server.script(
            Turn.say("- maser distance 7.576 Mpc"),  # summary
            Turn.call("save_memory", {"content": fact, "category": "reference"}),  # bridge step 1
            Turn.say("saved 1 memory"),  # bridge step 2
            Turn.say("answer"),  # main loop
        )
        handle = await runtime.start_run("continue", session_id=sid)
        events = [e for _, e in await collect(handle)]
        assert (await handle.wait()).reason == "finished"
        bridge_req = openai_server.chat_requests[1]
        assert "removed from an astro-jupyter agent's context" in bridge_req["messages"][0]["content"]
        offered = sorted(t["function"]["name"] for t in bridge_req["tools"])
        assert offered == ["query_target", "save_memory"]  # read-only tools + save_memory only
        subs = [e for e in events if isinstance(e, Subagent)]
        assert [s.phase for s in subs] == ["start", "stop"] and subs[1].summary == "saved 1 memory"
        memories = await services.memories.repo.list()
        assert [(m.content, m.source) for m in memories] == [(fact, "compaction")]
        assert [n for n, _ in seen] == ["PreCompact", "PostCompact", "SubagentStart", "SubagentStop"]


@pytest.mark.asyncio
async def test_a_precompact_hook_can_veto_and_nothing_is_dropped(tmp_path, openai_server) -> None:
    from astro_jupyter.agent.hooks import HookDecision

    hooks = HookRegistry()

    async def veto(event: Any, payload: dict[str, Any]) -> HookDecision:
        return HookDecision.block("audit in progress")

    hooks.register("PreCompact", veto)
    config = make_config(tmp_path, openai_server.url)
    policy = CompactionPolicy(soft_limit_tokens=200, keep_recent_messages=2, memory_bridge=False)
    async with running(config, hooks=hooks, tuning=fast(compaction=policy)) as (services, runtime):
        sid = await _seed(services)
        openai_server.script(Turn.say("answer"))  # no summary request is made
        handle = await runtime.start_run("go", session_id=sid)
        events = [e for _, e in await collect(handle)]
        rows = await services.messages.list(sid)
    [comp] = [e for e in events if isinstance(e, Compaction)]
    assert "blocked by a PreCompact hook: audit in progress" in comp.message
    assert len(openai_server.chat_requests) == 1 and not any(r.compacted for r in rows)


@pytest.mark.asyncio
async def test_still_large_after_compaction_does_not_resummarise_every_step(tmp_path, openai_server) -> None:
    config = make_config(tmp_path, openai_server.url)
    policy = CompactionPolicy(soft_limit_tokens=150, micro_ratio=5.0, keep_recent_messages=4, memory_bridge=False)
    async with running(config, TodoWriteTool(), tuning=fast(compaction=policy)) as (services, runtime):
        sid = await _seed(services)
        openai_server.script(
            Turn.say("- summary"),  # step 1 compaction
            Turn.call("todo_write", _todo(1)),  # step 1
            Turn.say("final"),  # step 2: still over the (tiny) limit, but only 2 new messages: no new summary
        )
        handle = await runtime.start_run("go", session_id=sid)
        events = [e for _, e in await collect(handle)]
        assert (await handle.wait()).reason == "finished"
    assert [e.layer for e in events if isinstance(e, Compaction)] == ["auto"]
    assert len(openai_server.chat_requests) == 3
