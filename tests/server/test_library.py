"""Papers, notes and export routes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from astro_jupyter.services.container import ServiceContainer
from tests.server.conftest import Api


@pytest.fixture
def astro_overrides(arxiv_fake) -> dict[str, Any]:  # noqa: F811
    # downloads point at a closed port: the background download fails, the library entry stays
    return {"service_urls": {"arxiv": f"{arxiv_fake.url}/api/query", "arxiv_pdf": "http://127.0.0.1:9/pdf"},
            "download_allowed_hosts": ["127.0.0.1"]}


async def test_add_list_and_get_papers(api: Api) -> None:
    status, paper = await api("POST", "astro/api/papers", body={"identifier": "arXiv:2301.01234v2", "download": False})
    assert status == 201, paper
    assert paper["id"] == "arxiv:2301.01234" and paper["state"] == "metadata" and paper["title"]
    assert paper["intake_id"] is None
    status, same = await api("POST", "astro/api/papers", body={"identifier": "https://arxiv.org/abs/2301.01234"})
    assert status == 201 and same["id"] == paper["id"]  # added once, found again
    status, listed = await api("GET", "astro/api/papers")
    assert [p["id"] for p in listed["papers"]] == ["arxiv:2301.01234"]
    status, listed = await api("GET", "astro/api/papers", params={"state": "parsed"})
    assert listed["papers"] == []
    status, one = await api("GET", "astro/api/papers/arxiv:2301.01234")
    assert status == 200 and one["title"] == paper["title"]

    status, err = await api("GET", "astro/api/papers/arxiv:9999.99999")
    assert status == 404 and err["reason"] == "not_found"
    status, err = await api("POST", "astro/api/papers", body={"identifier": "/etc/passwd"})
    assert status == 400 and err["reason"] == "invalid_identifier"
    status, err = await api("POST", "astro/api/papers", body={})
    assert status == 400
    status, err = await api("GET", "astro/api/papers", params={"state": "eaten"})
    assert status == 400 and err["reason"] == "invalid_argument"


async def test_remove_a_paper(api: Api) -> None:
    status, paper = await api("POST", "astro/api/papers", body={"identifier": "2301.01234", "download": False})
    assert status == 201
    status, removed = await api("DELETE", "astro/api/papers/arXiv:2301.01234")
    assert status == 200 and removed == {"removed": "arxiv:2301.01234", "chunks": 0}
    status, listed = await api("GET", "astro/api/papers")
    assert listed["papers"] == []
    status, err = await api("DELETE", "astro/api/papers/arxiv:2301.01234")
    assert status == 404 and err["reason"] == "not_found"


async def test_notes_route(api: Api) -> None:
    if not hasattr(ServiceContainer, "notes"):
        status, err = await api("GET", "astro/api/notes")
        assert status == 501 and err == {"message": "notes are not available yet", "reason": "not_implemented"}
        return
    status, paper = await api("POST", "astro/api/papers", body={"identifier": "2301.01234", "download": False})
    assert status == 201
    status, note = await api("POST", "astro/api/notes", body={
        "paper_id": "arXiv:2301.01234", "comment": "Check the BH mass estimate.", "page": 1, "section": "Results"})
    assert status == 201, note
    assert note["paper_id"] == "arxiv:2301.01234" and note["comment"] == "Check the BH mass estimate." and note["page"] == 1
    status, listed = await api("GET", "astro/api/notes", params={"paper_id": "arxiv:2301.01234"})
    assert status == 200 and [n["comment"] for n in listed["notes"]] == ["Check the BH mass estimate."]
    status, found = await api("GET", "astro/api/notes", params={"q": "mass"})
    assert [n["id"] for n in found["notes"]] == [note["id"]]
    status, found = await api("GET", "astro/api/notes", params={"q": "dust"})
    assert found["notes"] == []
    status, err = await api("POST", "astro/api/notes", body={"paper_id": "arxiv:2301.01234", "comment": " "})
    assert status == 400 and err["reason"] == "invalid_note"
    status, err = await api("POST", "astro/api/notes", body={"comment": "no paper"})
    assert status == 400 and err["reason"] == "invalid_note"
    status, err = await api("POST", "astro/api/notes", body={"paper_id": "arxiv:9999.99999", "comment": "x"})
    assert status == 404 and err["reason"] == "not_found"
    status, err = await api("POST", "astro/api/notes", body={"paper_id": "arxiv:2301.01234", "comment": "x", "page": "one"})
    assert status == 400


async def test_export_route(api: Api, jp_fetch: Any) -> None:
    status, session = await api("POST", "astro/api/sessions", body={"title": "M 87 notes"})
    status, err = await api("GET", "astro/api/sessions/ses_missing/export")
    assert status == 404
    response = await jp_fetch("astro", "api", "sessions", session["id"], "export")
    assert response.code == 200 and "M-87-notes.ipynb" in response.headers["Content-Disposition"]
    notebook = json.loads(response.body)
    assert notebook["nbformat"] == 4
