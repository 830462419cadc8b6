"""export_bibtex through the real executor: by paper ids, by session, bad input."""

from __future__ import annotations

import json
from typing import Any

import bibtexparser
import pytest

from astro_jupyter.agent.tools import build_default_registry
from astro_jupyter.agent.tools.data.bibtex import ExportBibtexTool
from astro_jupyter.services.container import ServiceContainer
from tests.agent.executor_support import Recorder, call, make_ctx, make_executor
from tests.fakes.base import FakeServer


async def run(services: ServiceContainer, session_id: str = "s1", owner_mode: str = "auto", **args: Any) -> Any:
    executor = make_executor(services, [ExportBibtexTool()], mode=owner_mode)
    [result] = await executor.execute([call("export_bibtex", json.dumps(args))], make_ctx(services, Recorder(), session_id=session_id))
    return result.output


def test_registered_read_only() -> None:
    from astro_jupyter.config import AstroConfig

    tool = build_default_registry(AstroConfig()).get("export_bibtex")
    assert tool is not None and tool.is_readonly


@pytest.mark.asyncio
async def test_by_paper_ids(paper_services: ServiceContainer, ads_fake: FakeServer) -> None:
    out = await run(paper_services, paper_ids=["2019ApJ...873..111I", "2301.01234"])
    assert not out.is_error, out.content
    assert "- 2019ApJ...873..111I  (arxiv:0805.2366; NASA ADS)" in out.content
    assert "- arXiv:2301.01234  (arxiv:2301.01234; built from library metadata)" in out.content
    lib = bibtexparser.parse_string(out.metadata["bibtex"])
    assert [e.key for e in lib.entries] == ["2019ApJ...873..111I", "arXiv:2301.01234"]
    assert out.metadata["keys"] == {"arxiv:0805.2366": "2019ApJ...873..111I", "arxiv:2301.01234": "arXiv:2301.01234"}


@pytest.mark.asyncio
async def test_by_session_exports_what_the_answers_cite(paper_services: ServiceContainer, ads_fake: FakeServer) -> None:
    await paper_services.sessions.create(session_id="ses_a", title="LSST")
    await paper_services.messages.append("ses_a", {"role": "user", "content": "cite 1929PNAS...15..168H please"})
    await paper_services.messages.append("ses_a", {"role": "assistant", "content": "See 2019ApJ...873..111I and arXiv:2301.01234."})
    out = await run(paper_services, session_id="ses_a", session="current")
    assert not out.is_error, out.content
    assert [e["key"] for e in out.metadata["entries"]] == ["2019ApJ...873..111I", "arXiv:2301.01234"]  # not the user's
    other = await run(paper_services, session_id="s1", session="ses_a")
    assert other.metadata["keys"] == out.metadata["keys"]


@pytest.mark.asyncio
async def test_bad_input(paper_services: ServiceContainer) -> None:
    both = await run(paper_services, paper_ids=["2301.01234"], session="current")
    assert both.is_error and "either paper_ids" in both.content
    neither = await run(paper_services)
    assert neither.is_error and "either paper_ids" in neither.content
    missing = await run(paper_services, session="ses_nope")
    assert missing.is_error and "no session 'ses_nope'" in missing.content
    await paper_services.sessions.create(session_id="ses_b", owner="someone-else")
    hidden = await run(paper_services, session="ses_b")
    assert hidden.is_error and "no session" in hidden.content
    junk = await run(paper_services, paper_ids=["not a paper id"])
    assert junk.is_error and "No BibTeX could be made" in junk.content and "not a paper id" in junk.content


@pytest.mark.asyncio
async def test_unknown_ids_are_reported_next_to_the_entries(paper_services: ServiceContainer, ads_fake: FakeServer) -> None:
    out = await run(paper_services, paper_ids=["2301.01234", "2999.99999"])
    assert not out.is_error
    assert "Notes:\n- 2999.99999:" in out.content
    assert [e["key"] for e in out.metadata["entries"]] == ["arXiv:2301.01234"]
