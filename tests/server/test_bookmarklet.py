"""The bookmarklet: page, token rotation/revocation, the cross-origin intake and its queue."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
from typing import Any
from urllib.parse import unquote

import pytest

from astro_jupyter.services.container import ServiceContainer
from tests.fakes.file_server import Route, make_pdf
from astro_jupyter.app.intake import INTAKE_RATE_PER_MINUTE
from tests.server.conftest import Api

INTAKE = "astro/api/bookmarklet/intake"


@pytest.fixture
def astro_overrides(arxiv_fake, file_fake) -> dict[str, Any]:  # noqa: F811
    file_fake.state["routes"]["/pdf/2301.01234"] = Route(body=make_pdf("Quasars at z = 7"))
    return {
        "service_urls": {"arxiv": f"{arxiv_fake.url}/api/query", "arxiv_pdf": f"{file_fake.url}/pdf"},
        "download_allowed_hosts": ["127.0.0.1"],
    }


def _token(href: str) -> str:
    match = re.search(r'T="([^"]+)"', unquote(href))
    assert match
    return match.group(1)


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "Origin": "https://arxiv.org"}


async def _page(jp_fetch: Any) -> str:
    response = await jp_fetch("astro", "bookmarklet")
    assert response.code == 200 and response.headers["Content-Type"].startswith("text/html")
    return response.body.decode()


async def _wait_done(service: Any, item_id: int, timeout: float = 20.0) -> Any:
    repo = service.intake.repo
    for _ in range(int(timeout / 0.05)):
        item = await repo.get(item_id)
        if item.status in ("done", "error"):
            return item
        await asyncio.sleep(0.05)
    raise AssertionError(f"intake item {item_id} still {item.status}")


async def test_page_token_intake_and_background_download(api: Api, jp_fetch: Any, astro_service: Any) -> None:
    page = await _page(jp_fetch)
    assert "no bookmarklet yet" in page and "javascript:" not in page  # a GET makes no token
    status, made = await api("POST", "astro/api/bookmarklet/token")  # the page's button does this POST
    assert status == 201
    href = made["bookmarklet"]
    assert href.startswith("javascript:")
    token = _token(href)
    assert len(token) >= 40 and token == made["token"]

    status, queued = await api(
        "POST", INTAKE, body={"identifier": "https://arxiv.org/abs/2301.01234v2", "page_title": "arXiv"},
        headers=_bearer(token),
    )
    assert status == 202, queued
    assert queued["identifier"] == "arxiv:2301.01234" and queued["kind"] == "arxiv" and queued["queued"] is True

    item = await _wait_done(astro_service, queued["id"])
    assert item.status == "done", item.error
    assert item.paper_id == "arxiv:2301.01234" and item.owner == ""
    status, paper = await api("GET", "astro/api/papers/arxiv:2301.01234")
    assert status == 200 and paper["pdf_path"]
    # downloaded, then parsed by the parse service (when that service is installed)
    assert paper["state"] == ("parsed" if hasattr(ServiceContainer, "parser") else "downloaded")
    status, listed = await api("GET", "astro/api/papers")
    assert [p["id"] for p in listed["papers"]] == ["arxiv:2301.01234"]

    # the token also works as a JSON body field (no Authorization header)
    status, queued = await api("POST", INTAKE, body={"identifier": "10.3847/1538-4357/ac1234", "token": token},
                               headers={"Authorization": ""})
    assert status == 202 and queued["kind"] == "doi"

    # a second visit cannot show the stored (hashed) token, and offers a new one instead
    again = await _page(jp_fetch)
    assert token not in again and "cannot be shown again" in again
    recent = again[again.index('id="astro-recent"'):]
    assert "arxiv:2301.01234" in recent and "doi:10.3847/1538-4357/ac1234" in recent


async def test_wrong_rotated_and_revoked_tokens_are_refused(api: Api, jp_fetch: Any) -> None:
    status, err = await api("POST", INTAKE, body={"identifier": "2301.01234"}, headers={"Authorization": ""})
    assert status == 403 and err["reason"] == "permission_denied"
    status, err = await api("POST", INTAKE, body={"identifier": "2301.01234"}, headers=_bearer("not-a-token"))
    assert status == 403 and "bookmarklet token" in err["message"]
    # the Jupyter token is not a bookmarklet token
    status, _ = await api("POST", INTAKE, body={"identifier": "2301.01234"})
    assert status == 403

    status, first = await api("POST", "astro/api/bookmarklet/token")
    assert status == 201 and first["bookmarklet"].startswith("javascript:") and first["intake_url"].endswith(INTAKE)
    assert _token(first["bookmarklet"]) == first["token"]
    status, _ = await api("POST", INTAKE, body={"identifier": "2301.01234"}, headers=_bearer(first["token"]))
    assert status == 202

    status, second = await api("POST", "astro/api/bookmarklet/token", body={})
    assert status == 201 and second["token"] != first["token"]
    status, err = await api("POST", INTAKE, body={"identifier": "2301.01234"}, headers=_bearer(first["token"]))
    assert status == 403  # rotated away
    status, _ = await api("POST", INTAKE, body={"identifier": "2301.01234"}, headers=_bearer(second["token"]))
    assert status == 202

    status, revoked = await api("POST", "astro/api/bookmarklet/token", body={"revoke": True})
    assert status == 200 and revoked == {"revoked": True}
    status, _ = await api("POST", INTAKE, body={"identifier": "2301.01234"}, headers=_bearer(second["token"]))
    assert status == 403


async def test_intake_queues_only_paper_identifiers_and_is_rate_limited(api: Api, jp_fetch: Any) -> None:
    status, made = await api("POST", "astro/api/bookmarklet/token")
    headers = _bearer(made["token"])
    for bad in ("rm -rf /", "local:my-notes", "https://example.com/paper", "", 42):
        status, err = await api("POST", INTAKE, body={"identifier": bad}, headers=headers)
        assert status == 400 and err["reason"] == "invalid_identifier", (bad, err)
    response = await jp_fetch(INTAKE, method="POST", body="{oops", headers=dict(headers), raise_error=False)
    assert response.code == 400 and response.headers["Access-Control-Allow-Origin"] == "*"
    assert json.loads(response.body)["reason"] == "invalid_json"
    assert "Set-Cookie" not in response.headers

    status, fresh = await api("POST", "astro/api/bookmarklet/token")  # a new token: a fresh window
    headers = _bearer(fresh["token"])
    accepted = 0
    for n in range(INTAKE_RATE_PER_MINUTE + 2):
        status, body = await api("POST", INTAKE, body={"identifier": f"2301.{10000 + n}"}, headers=headers)
        if status == 202:
            accepted += 1
        else:
            assert status == 429 and body["reason"] == "rate_limited"
    assert accepted == INTAKE_RATE_PER_MINUTE
    response = await jp_fetch(INTAKE, method="POST", body=json.dumps({"identifier": "2301.01234"}),
                              headers=dict(headers), raise_error=False)
    assert response.code == 429 and int(response.headers["Retry-After"]) >= 1


NODE_HARNESS = r"""
const [src, href, metas] = [process.argv[1], process.argv[2], JSON.parse(process.argv[3])];
globalThis.location = {href};
globalThis.document = {title: 'A page', querySelector(sel) {
  for (const [name, content] of Object.entries(metas)) {
    if (sel.toLowerCase().includes('"' + name.toLowerCase() + '"')) return {getAttribute: () => content};
  }
  return null;
}};
globalThis.alert = (m) => console.log('ALERT ' + m);
(0, eval)(src);
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
async def test_script_reads_identifiers_from_arxiv_and_ads_pages(api: Api, jp_fetch: Any, astro_service: Any) -> None:
    status, made = await api("POST", "astro/api/bookmarklet/token")
    assert status == 201
    source = unquote(made["bookmarklet"][len("javascript:"):])
    cases = [
        ("https://arxiv.org/abs/2301.01234v2", {}, "arxiv:2301.01234"),
        ("https://arxiv.org/pdf/astro-ph/0601001v1.pdf", {}, "arxiv:astro-ph/0601001"),
        ("https://ui.adsabs.harvard.edu/abs/2023ApJ...945L..12S/abstract", {}, "bib:2023ApJ...945L..12S"),
        ("https://journals.example/article/77", {"citation_arxiv_id": "1111.0962"}, "arxiv:1111.0962"),
        ("https://journals.example/article/78", {"citation_doi": "10.3847/1538-4357/AC1234"}, "doi:10.3847/1538-4357/ac1234"),
        ("https://journals.example/article/79", {"dc.identifier": "doi:10.1093/mnras/stab001"}, "doi:10.1093/mnras/stab001"),
    ]
    for url, metas, expected in cases:
        proc = await asyncio.create_subprocess_exec(
            "node", "-e", NODE_HARNESS, source, url, json.dumps(metas),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), 20)
        text = out.decode() + err.decode()
        assert f"ALERT astro-jupyter: queued {expected} for download" in text, (url, text)
    proc = await asyncio.create_subprocess_exec(
        "node", "-e", NODE_HARNESS, source, "https://example.com/blog", "{}", stdout=asyncio.subprocess.PIPE
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 20)
    assert "no arXiv id, ADS bibcode or DOI" in out.decode()
    queued = [i.identifier for i in await astro_service.intake.repo.list()]
    assert sorted(queued) == sorted(c[2] for c in cases)
