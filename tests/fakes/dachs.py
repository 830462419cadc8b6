"""A real TAP server for the tests: GAVO DaCHS (Debian's ``gavodachs2-server``) on a free loopback port.

Not a fake: DaCHS answers TAP sync and async (UWS) queries, ADQL errors, ``TAP_SCHEMA`` and
VOTables exactly as the archives that run it do. ``.ci/run`` installs it; this module

1. makes sure the PostgreSQL cluster DaCHS uses is up (``pg_ctlcluster``),
2. copies the resource descriptors of ``tests/data/tap/`` to ``/var/gavo/inputs/astrojup/`` and
   runs ``dachs imp`` when one changed (a stamp file keeps the 200,000-row import to once per RD),
3. starts ``dachs serve start -f`` with its own settings file (``GAVOSETTINGS``: serverURL, bind
   address and port) and waits until ``/tap/availability`` answers; ``stop()`` ends that process.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

RDS = Path(__file__).resolve().parents[1] / "data" / "tap"
INPUTS = Path("/var/gavo/inputs/astrojup")
RD_IDS = ("astrojup/q", "astrojup/simbad")


class DachsUnavailable(RuntimeError):
    """DaCHS is not installed (or cannot run here): the tests that need it skip with this reason."""


def installed() -> bool:
    return shutil.which("dachs") is not None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(cmd: list[str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def ensure_postgres() -> None:
    """Start every PostgreSQL cluster that is down (DaCHS's database; no systemd here)."""
    if shutil.which("pg_lsclusters") is None:
        return
    for line in _run(["pg_lsclusters", "--no-header"]).stdout.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[3] == "down":
            _run(["pg_ctlcluster", parts[0], parts[1], "start"])


def ensure_imported() -> None:
    """Copy the test RDs in place and import each one whose text changed since its last import."""
    INPUTS.mkdir(parents=True, exist_ok=True)
    for rd_id in RD_IDS:
        name = rd_id.split("/")[1] + ".rd"
        text = (RDS / name).read_bytes()
        stamp = INPUTS / f".{name}.{hashlib.sha256(text).hexdigest()[:16]}.imported"
        if stamp.exists():
            continue
        (INPUTS / name).write_bytes(text)
        done = _run(["dachs", "imp", rd_id])
        if done.returncode != 0:
            raise DachsUnavailable(f"dachs imp {rd_id} failed: {done.stderr[-2000:] or done.stdout[-2000:]}")
        for old in INPUTS.glob(f".{name}.*.imported"):
            old.unlink()
        stamp.touch()


def abort_queries() -> None:
    """End every TAP query DaCHS is still running, and its PostgreSQL backend.

    DaCHS runs an async job in a ``dachs taprun`` process of its own (not in the server's process
    group). Deleting the job (what a cancel or a deadline does) removes it from the job list, but the
    query goes on: the slow cross join of the cancel tests kept a backend on a core for the rest of
    the suite (it was still running 26 minutes after the test). The tests that start one call this
    when they are done; ``stop`` calls it too."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"taprun" in argv and any(Path(a.decode(errors="replace")).name in ("dachs", "gavo") for a in argv[:3]):
            try:
                os.kill(int(proc.name), signal.SIGKILL)
            except ProcessLookupError:
                pass
    if shutil.which("psql") is None or shutil.which("runuser") is None:
        return  # no local PostgreSQL tools: nothing of ours to end there
    _run(["runuser", "-u", "postgres", "--", "psql", "-qAtd", "gavo", "-c",
          "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'gavo' AND usename = 'untrusted'"
          " AND state <> 'idle' AND pid <> pg_backend_pid()"], timeout=30)


class DachsServer:
    """One ``dachs serve`` process on a free port (or ``port``: a server configured before DaCHS starts);
    ``tap_url`` is its TAP endpoint."""

    def __init__(self, port: int = 0) -> None:
        self.port = port
        self.proc: subprocess.Popen[bytes] | None = None
        self._dir = tempfile.mkdtemp(prefix="astro-dachs-")

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def tap_url(self) -> str:
        return f"{self.base_url}/tap"

    def start(self, deadline: float = 90.0) -> "DachsServer":
        if not installed():
            raise DachsUnavailable("GAVO DaCHS is not installed (apt-get install gavodachs2-server; .ci/run does it)")
        if os.geteuid() != 0:
            raise DachsUnavailable("DaCHS's import and server need root here (as in .ci/run)")
        ensure_postgres()
        ensure_imported()
        self.port = self.port or _free_port()
        settings = Path(self._dir) / "gavo.rc"
        settings.write_text(
            f"[web]\nserverURL: {self.base_url}\nbindAddress: 127.0.0.1\nserverPort: {self.port}\n", encoding="utf-8")
        log = open(Path(self._dir) / "serve.log", "wb")
        self.proc = subprocess.Popen(["dachs", "serve", "start", "-f"], stdout=log, stderr=subprocess.STDOUT,
                                     env={**os.environ, "GAVOSETTINGS": str(settings)}, start_new_session=True)
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise DachsUnavailable(f"dachs serve exited: {(Path(self._dir) / 'serve.log').read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.tap_url}/availability", timeout=2) as response:
                    if response.status == 200:
                        return self
            except OSError:
                pass
            time.sleep(0.2)  # polling a starting server, not a test's wait
        self.stop()
        raise DachsUnavailable(f"dachs serve did not answer within {deadline:g} s")

    def stop(self) -> None:
        abort_queries()
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        self.proc = None
        shutil.rmtree(self._dir, ignore_errors=True)

