"""An ``AstroApp`` as a CLI or kernel builds it (local user, no server), against the fake LLM."""

from __future__ import annotations

from pathlib import Path
from typing import Any, AsyncIterator

import pytest_asyncio

from astro_jupyter.app import AstroApp
from astro_jupyter.config import AstroConfig
from tests.agent.runtime_helpers import FAST


def app_config(tmp_path: Path, llm_url: str = "", **kw: Any) -> AstroConfig:
    settings: dict[str, Any] = dict(home=str(tmp_path / "home"), project_root=str(tmp_path / "project"))
    if llm_url:
        settings.update(openai_base_url=llm_url, openai_api_key="k")
    settings.update(kw)
    (tmp_path / "project").mkdir(exist_ok=True)
    return AstroConfig(**settings)


@pytest_asyncio.fixture
async def local_app(tmp_path: Path, openai_server: Any) -> AsyncIterator[AstroApp]:
    app = AstroApp(app_config(tmp_path, openai_server.url), source="cli", tuning=FAST)
    await app.start()
    try:
        yield app
    finally:
        await app.close()
