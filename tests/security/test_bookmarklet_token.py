"""The bookmarklet token is made only by an XSRF-checked POST, never by a GET.

Before the fix the first GET of ``astro/bookmarklet`` minted a token and put it in the page:
any GET a browser could be led to make (a link, a prefetch, an ``<img>``) created a live
credential for the cross-origin intake route.
"""

from __future__ import annotations

from typing import Any

from tests.server.conftest import (  # noqa: F401 - the server fixtures, shared with tests/server
    Api,
    api,
    astro_overrides,
    astro_service,
    extra_server_config,
    jp_server_config,
)
from tests.server.test_auth import _login_cookie

PAGE = "astro/bookmarklet"
TOKEN = "astro/api/bookmarklet/token"
INTAKE = "astro/api/bookmarklet/intake"
XSRF = "ab" * 16


async def _page(jp_fetch: Any, headers: dict[str, str] | None = None) -> str:
    response = await jp_fetch(*PAGE.split("/"), headers=headers or {})
    assert response.code == 200
    return response.body.decode()


async def test_get_of_the_page_makes_no_token(api: Api, jp_fetch: Any, astro_service: Any) -> None:
    cookie = await _login_cookie(jp_fetch)
    for headers in (None, {"Authorization": "", "Cookie": cookie}):  # token-authenticated, then as a browser
        page = await _page(jp_fetch, headers)
        assert "javascript:" not in page
        assert "no bookmarklet yet" in page and ">Make a bookmarklet</button>" in page
    assert await astro_service.bookmarklet_status("") is None
    assert await astro_service.intake.repo.list() == []


async def test_get_of_the_token_route_is_not_allowed(api: Api, astro_service: Any) -> None:
    status, _ = await api("GET", TOKEN)
    assert status == 405
    assert await astro_service.bookmarklet_status("") is None


async def test_cookie_post_without_xsrf_makes_no_token(api: Api, jp_fetch: Any, astro_service: Any) -> None:
    cookie = await _login_cookie(jp_fetch)
    browser = {"Authorization": "", "Cookie": cookie}
    status, err = await api("POST", TOKEN, body={}, headers=browser)
    assert status == 403 and "xsrf" in err["message"].lower()
    status, _ = await api("POST", TOKEN, body={}, headers={**browser, "Cookie": f"{cookie}; _xsrf={XSRF}",
                                                           "X-XSRFToken": "cd" * 16})
    assert status == 403
    assert await astro_service.bookmarklet_status("") is None

    status, made = await api("POST", TOKEN, body={}, headers={**browser, "Cookie": f"{cookie}; _xsrf={XSRF}",
                                                              "X-XSRFToken": XSRF})
    assert status == 201 and made["bookmarklet"].startswith("javascript:")
    status, queued = await api("POST", INTAKE, body={"identifier": "2301.01234"},
                               headers={"Authorization": f"Bearer {made['token']}", "Origin": "https://arxiv.org"})
    assert status == 202 and queued["kind"] == "arxiv"


async def test_a_later_visit_shows_no_token_and_offers_a_new_one(api: Api, jp_fetch: Any, astro_service: Any) -> None:
    status, made = await api("POST", TOKEN)
    assert status == 201
    page = await _page(jp_fetch)
    assert made["token"] not in page and "javascript:" not in page
    assert "cannot be shown again" in page and ">Make a new bookmarklet</button>" in page
