"""save_memory: the write gate (short, vague, transient, code-like) and Jaccard >= 0.7 de-duplication."""

from __future__ import annotations

import pytest

from astro_jupyter.agent.tools.memory import SaveMemoryTool
from astro_jupyter.services.memory import jaccard, quality_problem, tokens
from tests.agent.tools.orch_ctx import make_ctx

GOOD = "The user prefers Planck 2018 cosmology (H0 = 67.4) for all distance calculations."


@pytest.mark.parametrize(
    "text, reason",
    [
        ("use planck", "too short"),
        ("Remember something about the stuff and things we saw", "vague"),
        ("Right now I am downloading the Gaia DR3 catalogue for M31", "transient"),
        ("def distance(z):\n    return cosmo.luminosity_distance(z)", "code-like"),
        ("x = {'a': [1, 2, 3]}; y = f(x); z = g(y) <= h[0]", "code-like"),
    ],
)
def test_gate_refuses_with_the_reason(text: str, reason: str) -> None:
    assert quality_problem(text).startswith(reason)


def test_gate_accepts_a_specific_fact() -> None:
    assert quality_problem(GOOD) == ""


def test_jaccard_of_word_sets() -> None:
    assert jaccard(tokens("the M31 halo mass"), tokens("M31 halo mass")) == 1.0
    assert jaccard(tokens("alpha beta"), tokens("gamma delta")) == 0.0


@pytest.mark.asyncio
async def test_saved_then_near_duplicate_is_not_written_twice(services) -> None:
    ctx, _ = make_ctx(services)
    tool = SaveMemoryTool()
    first = await tool.execute({"content": GOOD, "category": "preference"}, ctx)
    assert not first.is_error and first.metadata["status"] == "saved"
    # same fact, slightly reworded: Jaccard >= 0.7
    near = "The user prefers Planck 2018 cosmology (H0 = 67.4) for all distance estimates."
    assert jaccard(tokens(GOOD), tokens(near)) == pytest.approx(9 / 11)
    second = await tool.execute({"content": near}, ctx)
    assert second.metadata["status"] == "duplicate" and second.metadata["memory_id"] == first.metadata["memory_id"]
    assert "Jaccard" in second.content
    # two words changed: 8 shared of 12 -> Jaccard 0.67 < 0.7, so it counts as a new memory
    below = "The user prefers Planck 2018 cosmology (H0 = 67.4) for every distance calculation."
    assert jaccard(tokens(GOOD), tokens(below)) == pytest.approx(8 / 12)
    assert (await tool.execute({"content": below}, ctx)).metadata["status"] == "saved"
    other = "The Andromeda rotation curve analysis uses HI data from Chemin et al. 2009."
    third = await tool.execute({"content": other}, ctx)
    assert third.metadata["status"] == "saved"
    stored = await services.memories.repo.list()
    assert [m.content for m in stored] == [other, below, GOOD]
    block = await services.memories.prompt_block()
    assert GOOD in block and other in block


@pytest.mark.asyncio
async def test_rejected_memory_is_an_error_and_nothing_is_stored(services) -> None:
    ctx, _ = make_ctx(services)
    out = await SaveMemoryTool().execute({"content": "for now use the default settings here please"}, ctx)
    assert out.is_error and "transient" in out.content
    assert await services.memories.repo.list() == []
    bad_cat = await SaveMemoryTool().execute({"content": GOOD, "category": "gossip"}, ctx)
    assert bad_cat.is_error and "category" in bad_cat.content


@pytest.mark.asyncio
async def test_memories_saved_in_one_run_reach_the_owners_next_system_prompt(tmp_path, openai_server) -> None:
    from tests.agent.runtime_helpers import make_config, running
    from tests.fakes.openai_server import Turn

    async with running(make_config(tmp_path, openai_server.url), SaveMemoryTool()) as (services, runtime):
        openai_server.script(
            Turn.call("save_memory", {"content": GOOD, "category": "preference"}),
            Turn.call("save_memory", {"content": "ok"}),
            Turn.say("noted"),
            Turn.say("hello again"),
            Turn.say("hello bob"),
        )
        await (await runtime.start_run("I always use Planck 2018", owner="alice")).wait()
        await (await runtime.start_run("new session", owner="alice")).wait()
        await (await runtime.start_run("another user", owner="bob")).wait()
        assert [m.owner for m in await services.memories.repo.list()] == ["alice"]
    rejected = openai_server.chat_requests[2]["messages"][-1]
    assert rejected["role"] == "tool" and "memory not saved: too short" in rejected["content"]
    assert GOOD not in openai_server.chat_requests[0]["messages"][0]["content"]
    assert f"[preference] {GOOD}" in openai_server.chat_requests[3]["messages"][0]["content"]
    assert GOOD not in openai_server.chat_requests[4]["messages"][0]["content"]  # not bob's memory


@pytest.mark.asyncio
async def test_an_ownerless_run_sees_ownerless_memories_only(services) -> None:
    """The kernel, the CLI and the shared token (owner "") used to list every identity's rows (issue 22, item 3)."""
    memories = services.memories
    alice = await memories.save(GOOD, owner="alice")
    shared = await memories.save("The group measures every distance with Gaia DR3 parallaxes.", owner="")
    assert (await memories.save(GOOD, owner="")).status == "saved"  # not "already remembered as" Alice's
    ownerless = await memories.prompt_block(owner="")
    assert "Gaia DR3" in ownerless and ownerless.count("Planck 2018") == 1  # its own copy only
    assert [m.id for m in await memories.repo.list(owner="")] == [alice.memory_id + 2, shared.memory_id]
    named = await memories.prompt_block(owner="alice")
    assert "Gaia DR3" in named and "Planck 2018" in named  # her own and the ownerless ones
