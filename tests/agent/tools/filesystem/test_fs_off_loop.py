"""The file tools resolve paths on their thread pool, never on the event loop.

Why: resolving a path stats every component (symlinks, the deny list's roots); on a
server with 20 busy runs each of those system calls gave the GIL away, and getting it back
while the pool threads grep cost the loop up to a switch interval per call, stalling every
request. The check records which thread calls ``os.path.realpath`` during each tool call.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import pytest


@pytest.fixture
def realpath_threads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    seen: list[int] = []
    real = os.path.realpath

    def recording(path: Any, *args: Any, **kwargs: Any) -> str:
        seen.append(threading.get_ident())
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os.path, "realpath", recording)
    return seen


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("tool", "args", "expect"),
    [
        ("read_file", {"path": "data/a.txt"}, "alpha"),
        ("grep_files", {"pattern": "alpha", "path": "data"}, "data/a.txt:1:alpha"),
        ("glob_files", {"pattern": "*.txt", "path": "data"}, "data/a.txt"),
    ],
)
async def test_path_resolution_runs_off_the_event_loop(sandbox, realpath_threads, tool, args, expect) -> None:
    (sandbox.project / "data").mkdir()
    (sandbox.project / "data" / "a.txt").write_text("alpha\nbeta\n")
    loop_thread = threading.get_ident()
    del realpath_threads[:]
    out = await sandbox.call(tool, **args)
    assert not out.is_error, out.content
    assert expect in out.content
    assert realpath_threads, "the tool resolved no path at all"
    assert loop_thread not in realpath_threads, f"{tool} resolved paths on the event loop thread"


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("tool", "args", "message"),
    [
        ("read_file", {"path": "../outside/secret.txt"}, "read_file: path '../outside/secret.txt' contains '..'"),
        ("grep_files", {"pattern": "x", "path": "/"}, "grep_files: path '/' is outside the allowed roots"),
        ("glob_files", {"pattern": "*", "path": "nowhere"}, "glob_files: nowhere is not a directory"),
        ("grep_files", {"pattern": "x", "path": "nowhere"}, "grep_files: nowhere does not exist"),
    ],
)
async def test_refused_paths_still_get_the_same_clear_error(sandbox, tool, args, message) -> None:
    out = await sandbox.call(tool, **args)
    assert out.is_error and out.content.startswith(message), out.content
