"""The server extension shortens the process's GIL switch interval (``server_switch_interval_ms``).

Why: file-tool and database threads hold the GIL while they compute; after every socket call
the event loop waits up to the switch interval to get it back, so with Python's 5 ms default a
server with busy runs answered requests tens of milliseconds late.
"""

from __future__ import annotations

import sys
from typing import Any, Iterator

import pytest

from tests.server.conftest import Api


@pytest.fixture(autouse=True)
def restore_switch_interval() -> Iterator[None]:
    before = sys.getswitchinterval()
    sys.setswitchinterval(0.005)  # Python's default, as a fresh server process has it
    yield
    sys.setswitchinterval(before)


@pytest.fixture
def astro_overrides() -> dict[str, Any]:
    return {"server_switch_interval_ms": 0.5}


async def test_the_server_runs_with_the_configured_switch_interval(api: Api, jp_serverapp: Any) -> None:
    status, _ = await api("GET", "astro/api/sessions")
    assert status == 200
    assert sys.getswitchinterval() == pytest.approx(0.0005)
    extension = jp_serverapp.extension_manager.extension_apps["astro_jupyter"]
    for app in extension:
        await app.stop_extension()
    assert sys.getswitchinterval() == pytest.approx(0.005)  # given back when the extension stops
