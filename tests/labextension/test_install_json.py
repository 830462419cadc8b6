"""The prebuilt extension ships ``install.json`` (as the Jupyter extension template does), so
``jupyter labextension list`` names the Python package that owns it: how to uninstall it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHARE = "share/jupyter/labextensions/astro-jupyter"


def _shared_data() -> dict[str, str]:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return pyproject["tool"]["hatch"]["build"]["targets"]["wheel"]["shared-data"]


def test_install_json_names_the_python_package_and_ships_in_the_wheel() -> None:
    info = json.loads((ROOT / "install.json").read_text(encoding="utf-8"))
    assert info["packageManager"] == "python" and info["packageName"] == "astro_jupyter"
    assert "uninstall" in info["uninstallInstructions"] and "astro_jupyter" in info["uninstallInstructions"]
    assert _shared_data()["install.json"] == f"{SHARE}/install.json"


def _built_package_json() -> Path | None:
    for candidate in (ROOT / "astro_jupyter" / "labextension" / "package.json", Path(sys.prefix) / SHARE / "package.json"):
        if candidate.is_file():
            return candidate
    return None


def test_labextension_list_shows_the_python_package(tmp_path: Path) -> None:
    jupyter = shutil.which("jupyter", path=str(Path(sys.executable).parent)) or shutil.which("jupyter")
    package_json = _built_package_json()
    if jupyter is None or package_json is None:
        pytest.skip("needs jupyter and a built extension (pip install -e . builds it)")
    # lay the files out as the wheel's shared-data mapping installs them
    for source, target in _shared_data().items():
        if target.startswith(SHARE):
            dest = tmp_path / "data" / Path(target).relative_to("share/jupyter")
            if source == "install.json":
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(ROOT / source, dest)
            else:
                dest.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(package_json, dest / "package.json")
    env = {**os.environ, "JUPYTER_PATH": str(tmp_path / "data"), "NO_COLOR": "1"}
    proc = subprocess.run([jupyter, "labextension", "list"], env=env, capture_output=True, text=True, timeout=120)
    listing = proc.stdout + proc.stderr
    line = next(ln for ln in listing.splitlines() if "astro-jupyter" in ln and str(tmp_path) not in ln)
    assert "(python, astro_jupyter)" in line, listing
