"""Notes: save (paper resolved through the library), list, search (LIKE, parameterised)."""

from __future__ import annotations

import pytest

from astro_jupyter.errors import NotFoundError, ToolInputError
from astro_jupyter.services.container import ServiceContainer
from astro_jupyter.store.papers import PaperRecord


@pytest.mark.asyncio
async def test_save_list_search(services: ServiceContainer) -> None:
    await services.library.papers.insert(
        PaperRecord(id="arxiv:2501.10120", arxiv_id="2501.10120", title="PaSa", state="parsed", metadata={"pages": 15})
    )
    notes = services.notes
    a = await notes.save("2501.10120", quote="session-level PPO", comment="compare with GRPO", page=5, section="4.2 Crawler")
    assert a.paper_id == "arxiv:2501.10120" and a.page == 5 and a.section == "4.2 Crawler"
    b = await notes.save("arxiv:2501.10120", comment="100% recall? check_this")
    assert [n.id for n in await notes.list("arxiv:2501.10120")] == [b.id, a.id]
    assert [n.id for n in await notes.search("ppo")] == [a.id]
    assert [n.id for n in await notes.search("grpo crawler")] == [a.id]  # every word, any field
    # LIKE wildcards in the search text are literal
    assert [n.id for n in await notes.search("100%")] == [b.id]
    assert [n.id for n in await notes.search("check_this")] == [b.id]
    assert await notes.search("check%this") == []
    assert await notes.search("'; DROP TABLE notes; --") == []
    assert len(await notes.list()) == 2


@pytest.mark.asyncio
async def test_bad_notes_are_refused(services: ServiceContainer) -> None:
    await services.library.papers.insert(PaperRecord(id="local:x", title="X", state="parsed", metadata={"pages": 3}))
    with pytest.raises(ToolInputError, match="quote or a comment"):
        await services.notes.save("local:x")
    with pytest.raises(ToolInputError, match="beyond the paper's 3 pages"):
        await services.notes.save("local:x", comment="c", page=9)
    with pytest.raises(NotFoundError):
        await services.notes.save("local:unknown", comment="c")
    assert await services.notes.list() == []
