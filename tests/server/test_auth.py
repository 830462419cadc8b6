"""Authentication, authorization, XSRF and CORS on every astro route."""

from __future__ import annotations

import re
from typing import Any

import pytest

from astro_jupyter.server.openapi import build_document
from tests.server.conftest import Api

NO_AUTH = {"Authorization": ""}


def _routes() -> list[tuple[str, str]]:
    out = []
    for path, ops in build_document()["paths"].items():
        concrete = re.sub(r"\{[^}]+\}", "x_1", path).lstrip("/")
        for method in ops:
            if method != "options":
                out.append((method.upper(), concrete))
    return out


async def test_every_route_refuses_requests_without_auth(api: Api) -> None:
    routes = _routes()
    assert len(routes) >= 20
    for method, path in routes:
        body = {} if method in ("POST", "PUT", "PATCH") else None
        status, data = await api(method, path, body=body, headers=NO_AUTH)
        if path == "astro/bookmarklet":
            assert status == 302, (method, path, status)  # an HTML page: Jupyter sends you to log in
            continue
        assert status == 403, (method, path, status, data)
        assert set(data) >= {"message", "reason"}, (method, path, data)


async def test_bookmarklet_page_redirects_to_login(jp_fetch: Any) -> None:
    response = await jp_fetch("astro", "bookmarklet", headers=NO_AUTH, follow_redirects=False, raise_error=False)
    assert response.code == 302 and "/login" in response.headers["Location"]
    assert b"javascript:" not in (response.body or b"")


async def test_auth_me_returns_the_identity(api: Api) -> None:
    status, me = await api("GET", "astro/api/auth/me")
    assert status == 200
    assert me["username"] and me["name"].startswith("Anonymous ") and me["display_name"]
    assert me["owner"] == ""  # the shared-token identity owns the ownerless rows


async def _login_cookie(jp_fetch: Any) -> str:
    response = await jp_fetch("astro", "api", "auth", "me")  # token-authenticated: sets the login cookie
    cookies = [c.split(";", 1)[0] for c in response.headers.get_list("Set-Cookie")]
    login = [c for c in cookies if c.startswith("username-")]
    assert login, cookies
    return login[0]


async def test_cookie_session_needs_xsrf_on_mutations(api: Api, jp_fetch: Any) -> None:
    cookie = await _login_cookie(jp_fetch)
    as_browser = {"Authorization": "", "Cookie": cookie}
    status, me = await api("GET", "astro/api/auth/me", headers=as_browser)
    assert status == 200 and me["username"]  # the cookie alone authenticates reads

    status, err = await api("POST", "astro/api/sessions", body={"title": "x"}, headers=as_browser)
    assert status == 403 and "xsrf" in err["message"].lower()

    wrong = {**as_browser, "Cookie": cookie + "; _xsrf=" + "ab" * 16, "X-XSRFToken": "cd" * 16}
    status, err = await api("POST", "astro/api/sessions", body={"title": "x"}, headers=wrong)
    assert status == 403 and "xsrf" in err["message"].lower()
    status, _ = await api("DELETE", "astro/api/sessions/ses_x", headers=wrong)
    assert status == 403

    right = {**as_browser, "Cookie": cookie + "; _xsrf=" + "ab" * 16, "X-XSRFToken": "ab" * 16}
    status, created = await api("POST", "astro/api/sessions", body={"title": "x"}, headers=right)
    assert status == 201 and created["title"] == "x"

    # scripts with the token header need no XSRF (Jupyter's rule for token-authenticated requests)
    status, _ = await api("POST", "astro/api/sessions", body={"title": "y"})
    assert status == 201


async def test_no_cors_headers_except_on_the_intake(api: Api, jp_fetch: Any) -> None:
    origin = {"Origin": "https://evil.example"}
    for method, path in _routes():
        if path == "astro/bookmarklet":
            continue
        body = {} if method in ("POST", "PUT", "PATCH") else None
        response = await jp_fetch(
            path, method=method, headers=dict(origin), raise_error=False, follow_redirects=False,
            **({"body": "{}"} if body is not None else {}),
        )
        cors = [h for h in response.headers if h.lower().startswith("access-control-")]
        if path == "astro/api/bookmarklet/intake":
            assert response.headers["Access-Control-Allow-Origin"] == "*", response.code
            assert "Access-Control-Allow-Credentials" not in response.headers
        else:
            assert cors == [], (method, path, cors)
    # preflight: refused on the API, answered on the intake
    pre = {**origin, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization"}
    refused = await jp_fetch("astro/api/sessions", method="OPTIONS", headers=dict(pre), raise_error=False)
    assert refused.code == 405 and not [h for h in refused.headers if h.lower().startswith("access-control-")]
    ok = await jp_fetch("astro/api/bookmarklet/intake", method="OPTIONS", headers=dict(pre), raise_error=False)
    assert ok.code == 204
    assert ok.headers["Access-Control-Allow-Origin"] == "*"
    assert "POST" in ok.headers["Access-Control-Allow-Methods"]
    assert "authorization" in ok.headers["Access-Control-Allow-Headers"].lower()
    assert "Access-Control-Allow-Private-Network" not in ok.headers
    # Chrome asks before a public page may reach a private address (Private Network Access)
    pna = await jp_fetch("astro/api/bookmarklet/intake", method="OPTIONS", raise_error=False,
                         headers={**pre, "Access-Control-Request-Private-Network": "true"})
    assert pna.code == 204 and pna.headers["Access-Control-Allow-Private-Network"] == "true"


async def test_login_cookie_is_httponly_and_samesite_strict(jp_fetch: Any) -> None:
    response = await jp_fetch("astro", "api", "auth", "me")
    login = [c for c in response.headers.get_list("Set-Cookie") if c.startswith("username-")]
    assert login and "httponly" in login[0].lower() and "samesite=strict" in login[0].lower()


class TestUserCookieOptionsWin:
    @pytest.fixture
    def extra_server_config(self) -> dict[str, Any]:
        return {"IdentityProvider": {"cookie_options": {"samesite": "Lax"}}}

    async def test_configured_samesite_is_kept(self, jp_fetch: Any) -> None:
        response = await jp_fetch("astro", "api", "auth", "me")
        login = [c for c in response.headers.get_list("Set-Cookie") if c.startswith("username-")]
        assert login and "samesite=lax" in login[0].lower() and "httponly" in login[0].lower()


class TestLockedDownServer:
    """``allow_unauthenticated_access = False``: every astro verb is declared (authenticated, or
    allow_unauthenticated on the token-only intake), so none is reported and the intake still works."""

    @pytest.fixture
    def extra_server_config(self) -> dict[str, Any]:
        return {"ServerApp": {"allow_unauthenticated_access": False}}

    async def test_routes_are_declared_and_intake_still_answers(self, jp_serverapp: Any, api: Api) -> None:
        from jupyter_server.serverapp import ServerWebApplication
        from tornado.routing import PathMatches

        app = jp_serverapp.web_app
        assert isinstance(app, ServerWebApplication)
        undeclared = []
        for rule in _all_rules(app.default_router):
            if rule.target.__module__.startswith("astro_jupyter.server"):
                assert isinstance(rule.matcher, PathMatches)
                undeclared += app._check_handler_auth(rule.matcher, rule.target)
        assert undeclared == []
        status, made = await api("POST", "astro/api/bookmarklet/token")
        assert status == 201
        status, queued = await api("POST", "astro/api/bookmarklet/intake", body={"identifier": "2301.01234"},
                                   headers={"Authorization": f"Bearer {made['token']}"})
        assert status == 202
        status, _ = await api("GET", "astro/api/sessions", headers=NO_AUTH)
        assert status == 403


def _all_rules(router: Any) -> list[Any]:
    from tornado.web import RequestHandler

    found = []
    for rule in getattr(router, "rules", []):
        if isinstance(rule.target, type) and issubclass(rule.target, RequestHandler):
            found.append(rule)
        else:
            found.extend(_all_rules(rule.target))
    return found
