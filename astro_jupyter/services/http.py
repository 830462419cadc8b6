"""One HTTP stack: ``httpx2`` (what openai itself uses) for every external service."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._version import __version__

if TYPE_CHECKING:
    import httpx2

    from ..config import AstroConfig

USER_AGENT = f"astro-jupyter/{__version__} (+https://github.com/astro-jupyter/astro-jupyter)"


def make_http_client(config: "AstroConfig") -> "httpx2.AsyncClient":
    import httpx2

    return httpx2.AsyncClient(
        timeout=httpx2.Timeout(config.http_timeout_secs, connect=min(10.0, config.http_timeout_secs)),
        headers={"User-Agent": USER_AGENT},
        follow_redirects=True,
        trust_env=False,
    )
