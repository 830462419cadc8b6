"""The bookmarklet clicked in Chromium on pages of another origin: real CORS preflight, real fetch.

A loopback "abstract page" server (another origin than Jupyter) serves an arXiv-like page;
Chromium maps ``arxiv.org`` to it, so the script also reads the id from the URL path.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.base import FakeHandler, FakeServer

CHROMIUM = Path("/usr/bin/chromium")

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="chromium is not installed"),
]


class _AbstractPages(FakeHandler):
    def do_GET(self) -> None:  # noqa: N802
        req = self.record()
        if req.path.startswith("/abs/"):
            meta = '<meta name="citation_arxiv_id" content="1111.0962">' if req.path.endswith("meta-only") else ""
            body = f"<!doctype html><html><head><title>Abstract</title>{meta}</head><body><h1>A paper</h1></body></html>"
            self.send_body(200, body.encode(), "text/html")
        else:
            self.send_body(404, b"not here", "text/plain")


async def test_bookmarklet_in_chromium_on_foreign_pages(jp_fetch: Any, astro_service: Any) -> None:
    async_api = pytest.importorskip("playwright.async_api")
    made = await jp_fetch("astro", "api", "bookmarklet", "token", method="POST", body=b"{}")
    href = json.loads(made.body)["bookmarklet"]
    with FakeServer(_AbstractPages) as pages:
        async with async_api.async_playwright() as p:
            browser = await p.chromium.launch(
                executable_path=str(CHROMIUM),
                args=["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                      "--disable-component-update", "--disable-sync",
                      f"--host-resolver-rules=MAP arxiv.org 127.0.0.1:{pages.port}"],
            )
            try:
                page = await browser.new_page()
                alerts: list[str] = []

                async def on_dialog(dialog: Any) -> None:
                    alerts.append(dialog.message)
                    await dialog.dismiss()

                page.on("dialog", on_dialog)
                for url in (f"{pages.url}/abs/paper-meta-only", "http://arxiv.org:80/abs/2301.01234v2"):
                    await page.goto(url)
                    await page.evaluate("(href) => { location.href = href; }", href)  # a click on the bookmark
                    for _ in range(100):
                        if len(alerts) == (1 if "meta-only" in url else 2):
                            break
                        await asyncio.sleep(0.1)
            finally:
                await browser.close()
    assert alerts == [
        "astro-jupyter: queued arxiv:1111.0962 for download",
        "astro-jupyter: queued arxiv:2301.01234 for download",
    ], alerts
    items = await astro_service.intake.repo.list()
    assert sorted(i.identifier for i in items) == ["arxiv:1111.0962", "arxiv:2301.01234"]
    assert {i.page_url for i in items} == {f"{pages.url}/abs/paper-meta-only", "http://arxiv.org/abs/2301.01234v2"}


async def test_bookmarklet_page_buttons_in_chromium(jp_serverapp: Any, jp_http_port: int, jp_base_url: str,
                                                    api: Any) -> None:
    async_api = pytest.importorskip("playwright.async_api")
    token = jp_serverapp.identity_provider.token
    url = f"http://127.0.0.1:{jp_http_port}{jp_base_url}astro/bookmarklet?token={token}"
    async with async_api.async_playwright() as p:
        browser = await p.chromium.launch(executable_path=str(CHROMIUM), args=["--headless", "--no-sandbox", "--disable-gpu"])
        try:
            page = await browser.new_page()
            await page.goto(url)
            assert await page.get_attribute("#astro-bookmarklet", "href") == "#"  # the GET made no token
            assert await page.inner_text("#astro-rotate") == "Make a bookmarklet"
            await page.click("#astro-rotate")  # a cookie-authenticated POST with the page's XSRF token
            await page.wait_for_function("() => document.querySelector('#astro-bookmarklet').href.startsWith('javascript:')",
                                         timeout=10_000)
            first = await page.get_attribute("#astro-bookmarklet", "href")
            assert first and first.startswith("javascript:")
            await page.click("#astro-rotate")  # a cookie-authenticated POST with the page's XSRF token
            await page.wait_for_function(
                "(old) => document.querySelector('#astro-bookmarklet').getAttribute('href') !== old", arg=first, timeout=10_000
            )
            second = await page.get_attribute("#astro-bookmarklet", "href")
            assert "New bookmarklet made" in await page.inner_text("#astro-state")
            await page.click("#astro-revoke")
            await page.wait_for_function("() => document.querySelector('#astro-state').textContent.startsWith('Revoked')")
        finally:
            await browser.close()
    from urllib.parse import unquote

    tokens = [re.search(r'T="([^"]+)"', unquote(h)).group(1) for h in (first, second)]
    assert tokens[0] != tokens[1]
    for t in tokens:  # rotated, then revoked: neither works
        status, _ = await api("POST", "astro/api/bookmarklet/intake", body={"identifier": "2301.01234"},
                              headers={"Authorization": f"Bearer {t}"})
        assert status == 403
