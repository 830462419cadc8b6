"""The session list's one-query summaries: prompt counts and the latest run's model per session,
owner-scoped, the same values the three separate queries gave."""

from __future__ import annotations

import pytest


@pytest.mark.asyncio
async def test_summaries_count_prompts_and_name_the_latest_runs_model(services) -> None:
    quiet = await services.sessions.create(title="no runs", owner="ann")
    busy = await services.sessions.create(title="two runs", owner="ann")
    other = await services.sessions.create(title="bob's", owner="bob")
    for role in ("user", "assistant", "user", "tool", "user"):
        await services.messages.append(busy.id, {"role": role, "content": "x"})
    await services.messages.append(other.id, {"role": "user", "content": "y"})
    await services.runs.create("run_a", busy.id, owner="ann", model="model-one")
    await services.runs.create("run_b", busy.id, owner="ann", model="model-two")
    await services.runs.create("run_c", other.id, owner="bob", model="model-bob")

    rows = await services.sessions.list_summaries(owner="ann")
    got = {record.id: (turns, model) for record, turns, model in rows}
    assert got == {quiet.id: (0, ""), busy.id: (3, "model-two")}  # bob's session is not ann's
    assert [r.id for r, _, _ in rows] == [r.id for r in await services.sessions.list(owner="ann")]  # same order
    everyone = {record.id: (turns, model) for record, turns, model in await services.sessions.list_summaries()}
    assert everyone[other.id] == (1, "model-bob") and len(everyone) == 3
