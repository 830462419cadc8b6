"""A session's stored events as a reopened sidebar replays them: consecutive deltas folded
(``fold_event_rows``), and an ended run read from its one stored replay row instead of every
delta (``agent_run_replay``), with the same result and the same paging as reading every row."""

from __future__ import annotations

import json
from typing import Any

import pytest

from astro_jupyter.store.runs import fold_event_rows


def _t(delta: str, step: int = 1, sub: str | None = None, kind: str = "text_delta") -> dict[str, Any]:
    return {"type": kind, "delta": delta, "step": step, **({"subagent_id": sub} if sub else {})}


def _rows(items: list[tuple[str, int, dict[str, Any]]]) -> list[tuple[Any, ...]]:
    """Rows as the store's query gives them: the delta fields pulled out for delta rows only."""
    out = []
    for run_id, seq, data in items:
        kind = str(data.get("type"))
        is_delta = kind in ("text_delta", "thinking_delta")
        out.append((run_id, seq, f"t{seq}", kind, json.dumps(data),
                    data.get("delta") if is_delta else None, data.get("step") if is_delta else None,
                    data.get("subagent_id") if is_delta else None))
    return out


def test_consecutive_deltas_of_one_step_fold_and_keep_the_last_seq_and_time() -> None:
    folded = fold_event_rows(_rows([("r", 1, _t("Hel")), ("r", 2, _t("lo")), ("r", 3, _t(" world"))]))
    assert folded == [("r", 3, "t3", _t("Hello world"))]


def test_folding_stops_at_anything_that_would_start_a_new_item() -> None:
    items = [
        ("r", 1, _t("a")), ("r", 2, _t("b", sub="s1")), ("r", 3, _t("c")),  # a subagent's delta between
        ("r", 4, _t("d", step=2)),  # another step
        ("r", 5, _t("e", step=2, kind="thinking_delta")),  # thinking is its own item
        ("r", 6, {"type": "tool_call", "id": "c1", "name": "x", "arguments": {}, "step": 2}),
        ("r", 7, _t("f", step=2)), ("q", 8, _t("g", step=2)),  # another run
    ]
    assert fold_event_rows(_rows(items)) == [(r, s, f"t{s}", d) for r, s, d in items]


def test_odd_rows_pass_through_as_stored() -> None:
    items = [("r", 1, _t("x")), ("r", 2, _t("y")), ("r", 3, {"type": "text_delta", "delta": None, "step": 1}),
             ("r", 4, {"type": "unknown_future_event"})]
    assert fold_event_rows(_rows(items)) == [("r", 2, "t2", _t("xy")), ("r", 3, "t3", items[2][2]), ("r", 4, "t4", items[3][2])]


async def _run(services: Any, session_id: str, run_id: str, text: str, done: bool = True) -> list[dict[str, Any]]:
    """A run's events as the bus stores them (2-character deltas, a tool call and result, done),
    in two batches; returns them."""
    await services.runs.create(run_id, session_id, prompt="p", model="m")
    events: list[dict[str, Any]] = [{"type": "session", "session_id": session_id, "run_id": run_id}]
    events += [_t(text[k:k + 2]) for k in range(0, len(text), 2)]
    events += [{"type": "tool_call", "id": f"{run_id}_c", "name": "query_target", "arguments": {"name": "M 31"}, "step": 1},
               {"type": "tool_result", "tool_call_id": f"{run_id}_c", "name": "query_target", "output": "ok",
                "is_error": False, "metadata": {}, "step": 1, "duration_ms": 3},
               _t(text[::-1], step=2)]
    if done:
        events.append({"type": "done", "session_id": session_id, "run_id": run_id, "reason": "finished"})
    numbered = list(enumerate(events, 1))
    await services.runs.append_events(run_id, numbered[:5])
    await services.runs.append_events(run_id, numbered[5:])
    return events


async def _pages(services: Any, session_id: str, limit: int) -> tuple[list[tuple[str, int, str, dict[str, Any]]], int]:
    out, after, pages = [], None, 0
    while True:
        got, after = await services.runs.session_events(
            session_id, after_run=after[0] if after else None, after_seq=after[1] if after else 0, limit=limit
        )
        out += got
        pages += 1
        if after is None:
            return out, pages


@pytest.mark.asyncio
async def test_an_ended_run_is_read_from_its_replay_with_the_same_events_as_its_rows(services: Any) -> None:
    session = await services.sessions.create(title="replay")
    await _run(services, session.id, "run_a", "Hello there, Andromeda")
    await _run(services, session.id, "run_b", "Second answer", done=False)  # still running: no replay
    stored = await services.db.fetchall("SELECT run_id, last_seq FROM agent_run_replay")
    assert [(r["run_id"], r["last_seq"]) for r in stored] == [("run_a", 16)]

    from_replay, after = await services.runs.session_events(session.id, limit=1000)
    assert after is None
    await services.db.execute("DELETE FROM agent_run_replay")
    from_rows, _ = await services.runs.session_events(session.id, limit=1000)
    assert from_replay == from_rows
    texts = [d["delta"] for r, _, _, d in from_rows if r == "run_a" and d["type"] == "text_delta"]
    assert texts == ["Hello there, Andromeda", "ademordnA ,ereht olleH"]
    assert [s for r, s, _, _ in from_rows if r == "run_a"] == [1, 12, 13, 14, 15, 16]


@pytest.mark.asyncio
async def test_events_stored_after_the_replay_are_not_lost(services: Any) -> None:
    session = await services.sessions.create(title="late")
    await _run(services, session.id, "run_a", "Some text")
    await services.runs.append_events("run_a", [(30, {"type": "question_answered", "request_id": "q", "answer": "yes"})])
    got, _ = await services.runs.session_events(session.id, limit=1000)
    assert got[-1][1:] == (30, got[-1][2], {"type": "question_answered", "request_id": "q", "answer": "yes"})
    assert "".join(d["delta"] for _, _, _, d in got if d["type"] == "text_delta" and d["step"] == 1) == "Some text"


@pytest.mark.asyncio
@pytest.mark.parametrize("limit", [1, 3, 7, 16, 17, 40, 1000])
async def test_pages_give_every_event_once_whatever_mix_of_replays_and_rows(services: Any, limit: int) -> None:
    session = await services.sessions.create(title="paged")
    await _run(services, session.id, "run_a", "first answer text")
    await _run(services, session.id, "run_b", "second")
    await services.db.execute("DELETE FROM agent_run_replay WHERE run_id = 'run_b'")  # as if stored before replays
    await _run(services, session.id, "run_c", "third answer", done=False)
    await _run(services, session.id, "run_d", "fourth one here")
    await services.db.execute("DELETE FROM agent_run_replay")
    every, _ = await services.runs.session_events(session.id, limit=10_000)  # every row, one read
    for run_id in ("run_a", "run_d"):
        await services.runs._store_replay(run_id)

    got, pages = await _pages(services, session.id, limit)
    assert len({(r, s) for r, s, _, _ in got}) == len(got)
    # pages may fold a little less (a group cut by a page's end), never change what is shown
    def shown(events: list[tuple[str, int, str, dict[str, Any]]]) -> list[tuple[Any, ...]]:
        out: list[tuple[Any, ...]] = []
        for r, _, _, d in events:
            if d["type"] == "text_delta" and out and out[-1][:3] == (r, "text", d["step"]):
                out[-1] = (r, "text", d["step"], out[-1][3] + d["delta"])
            elif d["type"] == "text_delta":
                out.append((r, "text", d["step"], d["delta"]))
            else:
                out.append((r, d["type"], None, None))
        return out

    assert shown(got) == shown(every)
    assert [(r, s) for r, s, _, _ in got if s == max(x for q, x, _, _ in every if q == r)] == \
        [(r, max(x for q, x, _, _ in every if q == r)) for r in ("run_a", "run_b", "run_c", "run_d")]
    if limit == 1000:
        assert pages == 1 and got == every
        # the JSON text a reopen copies (replays as stored, other runs folded): the same events
        texts = await services.runs.session_events_json(session.id)
        assert json.loads("[" + ",".join(texts) + "]") == [
            {"run_id": r, "seq": s, "time": t, "event": d} for r, s, t, d in every]
    if limit == 1:
        assert pages >= 40


@pytest.mark.asyncio
async def test_a_run_closed_after_its_process_died_gets_its_replay_too(services: Any) -> None:
    session = await services.sessions.create(title="killed")
    await _run(services, session.id, "run_a", "cut short", done=False)
    done_seq = await services.runs.close_interrupted("run_a")
    stored = await services.db.fetchall("SELECT last_seq FROM agent_run_replay WHERE run_id = 'run_a'")
    assert done_seq is not None and [r["last_seq"] for r in stored] == [done_seq]
    got, _ = await services.runs.session_events(session.id, limit=1000)
    assert [d["type"] for _, _, _, d in got[-2:]] == ["error", "done"] and got[-1][1] == done_seq
