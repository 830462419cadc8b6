"""One HTTP stack: ``httpx2`` (what openai itself uses) for every external service."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._version import __version__

if TYPE_CHECKING:
    import httpx2

USER_AGENT = f"astro-jupyter/{__version__} (+https://github.com/astro-jupyter/astro-jupyter)"


HTTP_TIMEOUT_SECS = 30.0  # one ADS/arXiv/Sesame/download request (connect: at most 10 s)


def make_http_client(timeout: float = HTTP_TIMEOUT_SECS) -> "httpx2.AsyncClient":
    """The shared client; ``timeout`` is internal tuning (tests pass a short one through the container)."""
    import httpx2

    return httpx2.AsyncClient(
        timeout=httpx2.Timeout(timeout, connect=min(10.0, timeout)),
        headers={"User-Agent": USER_AGENT},
        follow_redirects=True,
        trust_env=False,
    )
