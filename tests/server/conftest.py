"""Server-extension fixtures: a real in-process Jupyter server with ``astro_jupyter`` enabled.

``jp_server_config`` points ``AstroConfig`` at the test's private ASTRO_HOME; a test module
adds settings (the fake LLM's URL, permission rules ...) by overriding ``astro_overrides``.
``api`` wraps ``jp_fetch`` to return ``(status, json)`` without raising on 4xx/5xx.

The async tests here are deliberately NOT marked ``@pytest.mark.asyncio``: pytest-jupyter
runs unmarked coroutine tests on its own loop, the one the test server listens on; under
pytest-asyncio's loop every request to the server would hang (two event loops).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Awaitable, Callable

import httpx2
import pytest
from traitlets.config import Config

from astro_jupyter.server.base import SERVICE_KEY, SSE_PACING_KEY, TUNING_KEY
from astro_jupyter.server.sse import SsePacing
from astro_jupyter.services.container import Tuning
from astro_jupyter.app import AstroApp

Api = Callable[..., Awaitable[tuple[int, Any]]]


@pytest.fixture
def astro_overrides() -> dict[str, Any]:
    return {}


@pytest.fixture
def extra_server_config() -> dict[str, Any]:
    return {}


@pytest.fixture
def jp_server_config(astro_home: Path, tmp_path: Path, astro_overrides: dict[str, Any], extra_server_config: dict[str, Any],
                     astro_tuning: Tuning, sse_pacing: SsePacing) -> Config:
    astro = {"home": str(astro_home), "project_root": str(tmp_path), **astro_overrides}
    tornado = {TUNING_KEY: astro_tuning, SSE_PACING_KEY: sse_pacing}  # internal tuning objects, no settings
    config = {"ServerApp": {"jpserver_extensions": {"astro_jupyter": True}, "tornado_settings": tornado},
              "AstroConfig": astro}
    for section, values in extra_server_config.items():
        config.setdefault(section, {}).update(values)
    return Config(config)


@pytest.fixture
def astro_service(jp_serverapp: Any) -> AstroApp:
    return jp_serverapp.web_app.settings[SERVICE_KEY]


@pytest.fixture
def api(jp_fetch: Any) -> Api:
    async def call(method: str, *parts: str, body: Any = None, headers: dict[str, str] | None = None,
                   params: dict[str, Any] | None = None, raw: bytes | None = None) -> tuple[int, Any]:
        kwargs: dict[str, Any] = {"method": method, "raise_error": False, "headers": dict(headers or {}), "follow_redirects": False}
        if raw is not None:
            kwargs["body"] = raw
        elif body is not None:
            kwargs["body"] = json.dumps(body)
        elif method in ("POST", "PUT", "PATCH"):
            kwargs["body"] = b""
            kwargs["allow_nonstandard_methods"] = True
        response = await jp_fetch(*parts, params=params, **kwargs)
        text = response.body.decode("utf-8") if response.body else ""
        try:
            data = json.loads(text) if text else None
        except ValueError:
            data = text
        return response.code, data

    return call


@pytest.fixture
def live_url(jp_http_port: int, jp_base_url: str) -> Callable[[str], str]:
    """Absolute URL of a path on the live test server (for httpx2 clients)."""

    def url(path: str) -> str:
        return f"http://127.0.0.1:{jp_http_port}{jp_base_url}{path.lstrip('/')}"

    return url


Event = tuple[int, dict[str, Any]]


@pytest.fixture
def sse(live_url: Callable[[str], str], jp_auth_header: dict[str, str]) -> Callable[..., Any]:
    """Read a run's SSE stream with httpx2's EventSource until ``done`` (or ``until`` says stop): what the sidebar
    reads, so a test waits for a run the way a user does (the run itself lives in the agent host)."""

    async def read(run_id: str, *, last_event_id: int | None = None, query: int | None = None,
                   until: Callable[[list[Event]], bool] | None = None, raw: list[str] | None = None) -> list[Event]:
        headers = dict(jp_auth_header)
        if last_event_id is not None:
            headers["Last-Event-ID"] = str(last_event_id)
        url = live_url(f"astro/api/runs/{run_id}/events")
        if query is not None:
            url += f"?last_event_id={query}"
        events: list[Event] = []
        async with httpx2.AsyncClient(timeout=30) as client:
            async with client.sse(url, headers=headers) as source:
                assert source.response.status_code == 200
                assert source.response.headers["content-type"].startswith("text/event-stream")
                async for message in source:
                    if raw is not None:
                        raw.append(message.data)
                    if not message.data:
                        continue
                    events.append((int(message.id), json.loads(message.data)))
                    if until is not None and until(events):
                        break
        return events

    return read
