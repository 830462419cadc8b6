"""Killing a subprocess together with everything it started.

Shell commands (``run_bash``) and command hooks both run in their own process group
(``start_new_session=True``) so a timeout or a cancel can kill a whole pipeline, not
just the shell that launched it. One helper keeps the fallback rules in one place.
"""

from __future__ import annotations

import asyncio
import os
import signal


def kill_process_group(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL ``proc``'s process group; fall back to the process alone if the group is gone."""
    if proc.returncode is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            proc.kill()
        except ProcessLookupError:
            pass
