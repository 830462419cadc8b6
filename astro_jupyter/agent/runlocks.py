"""Which 'running' runs still have a living process: one advisory file lock per active run.

The server extension and every kernel open the same SQLite file, each with its own runtime.
At startup a runtime must close the runs a *dead* process left 'running' (so the sidebar
does not wait forever) without touching the runs another *living* process is executing.
Each active run holds ``flock(LOCK_EX)`` on ``ASTRO_HOME/.run-locks/<run_id>.lock``; the
kernel drops the lock when the process dies, even on ``kill -9``. A run whose lock can be
taken is orphaned. Where ``fcntl`` does not exist every 'running' run counts as orphaned
(the behaviour without locks).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

try:  # POSIX only
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)


def fcntl_missing() -> bool:
    return fcntl is None


class RunLocks:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._held: dict[str, Any] = {}

    def _path(self, run_id: str) -> Path:
        safe = "".join(c for c in run_id if c.isalnum() or c in "-_")
        return self.directory / f"{safe}.lock"

    def acquire(self, run_id: str) -> bool:
        """Hold the lock of ``run_id`` (a run, or ``ses-<id>`` for a session) in this process.

        False only when another holder has it; other failures are logged and count as
        success (a missing lock weakens the orphan check, it must not stop the agent).
        """
        if fcntl is None or run_id in self._held:
            return run_id not in self._held
        handle = None
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            handle = open(self._path(run_id), "a+")  # noqa: SIM115 - held open for the run's life
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if handle is not None:
                handle.close()
            return False
        except OSError as exc:
            if handle is not None:
                handle.close()
            log.warning("run lock for %s unavailable: %s", run_id, exc)
            return True
        self._held[run_id] = handle
        return True

    def release(self, run_id: str) -> None:
        handle = self._held.pop(run_id, None)
        if handle is None:
            return
        try:
            os.unlink(self._path(run_id))
        except OSError:
            pass
        handle.close()  # closing drops the flock

    def held_here(self, run_id: str) -> bool:
        """True when this process holds the run's lock (the run is one of ours)."""
        return run_id in self._held

    def is_alive(self, run_id: str) -> bool:
        """True when some process (this one included) still holds the run's lock."""
        if fcntl is None:
            return False
        if run_id in self._held:
            return True
        path = self._path(run_id)
        if not path.exists():
            return False
        try:
            with open(path, "a+") as handle:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        except BlockingIOError:
            return True
        except OSError:
            return False
        try:
            path.unlink()  # the owner is gone: tidy up
        except OSError:
            pass
        return False
