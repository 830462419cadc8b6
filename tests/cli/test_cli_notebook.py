"""Notebook tools from the ``astro-jupyter`` CLI (subprocesses): files through nbformat, a kernel of
their own for notebook_run, and kernel_* refused with the reason."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from tests.cli.test_cli import cli_env, run_cli


@pytest.mark.slow
def test_cli_edits_and_runs_notebooks_and_explains_kernel_tools(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    env = cli_env(tmp_path / "home")
    env["ASTRO_PROJECT_ROOT"] = str(project)
    target = str(project / "reduce.ipynb")
    denied = run_cli(env, "tool", "notebook_edit", json.dumps({"path": target, "action": "insert", "source": "1"}))
    assert denied.returncode == 1 and "Permission denied for notebook_edit" in denied.stderr
    assert not (project / "reduce.ipynb").exists()

    env["ASTRO_PERMISSION_RULES"] = json.dumps([{"action": "allow", "tool": "notebook_edit|notebook_run"}])
    made = run_cli(env, "tool", "notebook_edit", json.dumps({"path": target, "action": "insert",
                                                              "source": "import os\nprint(6 * 7, os.getcwd())"}), "--json")
    assert made.returncode == 0, made.stderr
    cell_id = json.loads(made.stdout)["metadata"]["cell_id"]
    ran = run_cli(env, "tool", "notebook_run", json.dumps({"path": target, "cell_id": cell_id}), timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert f"42 {project}" in ran.stdout
    nb = nbformat.read(project / "reduce.ipynb", as_version=4)
    nbformat.validate(nb)
    assert nb.cells[0].outputs[0]["text"] == f"42 {project}\n"
    read = run_cli(env, "tool", "notebook_read", json.dumps({"path": target}))
    assert read.returncode == 0 and f"id {cell_id}" in read.stdout and "42" in read.stdout

    refused = run_cli(env, "tool", "kernel_run", json.dumps({"code": "print(1)"}))
    assert refused.returncode == 1
    assert "kernel_run is not available here" in refused.stderr and "%%astro" in refused.stderr
    names = [d["function"]["name"] for d in json.loads(run_cli(env, "tools", "--json").stdout)]
    assert {"notebook_read", "notebook_edit", "notebook_run"} <= set(names) and "kernel_run" not in names
