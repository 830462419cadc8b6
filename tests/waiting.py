"""Waiting in tests: on a condition, with a deadline, never a fixed sleep or an elapsed-time assert.

A fixed sleep is either too short on a loaded machine (the test fails) or too long on a quiet one
(the suite crawls); an elapsed-time assert fails whenever the machine is busy. ``until`` checks the
condition the test cares about as often as it can and fails only at a generous deadline.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Callable

DEADLINE = 30.0  # seconds: only reached when the awaited thing never happens


def alive(pid: int) -> bool:
    """The process exists and is not a zombie waiting for a reaper (which may not be us)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


async def until(condition: Callable[[], object], what: str = "", timeout: float = DEADLINE) -> None:
    """Wait (in a coroutine) until ``condition()`` is true; fail with ``what`` at the deadline."""
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            raise AssertionError(f"still not true after {timeout} s: {what or condition}")
        await asyncio.sleep(0.01)


def until_sync(condition: Callable[[], object], what: str = "", timeout: float = DEADLINE) -> None:
    """``until`` for synchronous tests (a subprocess, a thread)."""
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            raise AssertionError(f"still not true after {timeout} s: {what or condition}")
        time.sleep(0.01)
