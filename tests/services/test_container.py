"""ServiceContainer.close: every client is closed, and a failing one is reported, not hidden."""

from __future__ import annotations

import logging

import pytest

from astro_jupyter.config import AstroConfig
from astro_jupyter.services.container import ServiceContainer


class _Broken:
    async def aclose(self) -> None:
        raise OSError("socket already gone")


class _Fine:
    closed = False

    def close(self) -> None:
        self.closed = True


@pytest.mark.asyncio
async def test_close_reports_a_failing_client_and_still_closes_the_rest(tmp_path, caplog) -> None:
    container = ServiceContainer(AstroConfig(home=str(tmp_path)))
    await container.start()
    fine = _Fine()
    container.__dict__["broken_client"] = _Broken()
    container.__dict__["fine_client"] = fine
    with caplog.at_level(logging.WARNING, logger="astro_jupyter.services.container"):
        await container.close()
    assert fine.closed
    record = next(r for r in caplog.records if "broken_client" in r.getMessage())
    assert "socket already gone" in str(record.exc_info[1])
    with pytest.raises(RuntimeError, match="start"):
        container.db  # noqa: B018 - the database was closed too
