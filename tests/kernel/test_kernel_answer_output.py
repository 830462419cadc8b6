"""A %%astro answer is part of the saved notebook: a text/markdown output that GitHub, nbconvert
and an agent reading the file all see (a widget's state is not in the file)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

from tests.fakes.openai_server import Turn

pytestmark = pytest.mark.slow

ANSWER = "**M 87** is the giant elliptical at the heart of the Virgo cluster, 16.4 Mpc away."


def test_the_answer_is_a_markdown_output_in_the_saved_notebook(llm_env: Any, project: Path) -> None:
    llm_env.script(Turn.say(ANSWER))
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("%load_ext astro_jupyter"),
                nbformat.v4.new_code_cell("%%astro\nWhere is M 87?")]
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(project)}}).execute()
    path = project / "log.ipynb"
    nbformat.write(nb, path)
    outputs = nbformat.read(path, as_version=4).cells[1].outputs
    markdown = [o for o in outputs if "text/markdown" in o.get("data", {})]
    assert [o["data"]["text/markdown"] for o in markdown] == [ANSWER]
    # nbclient runs it unattended: the steps are text lines, the answer the rendered output
    assert any(o.get("output_type") == "stream" and "finished" in o.get("text", "") for o in outputs)
    converted = subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "markdown", "--stdout", str(path)],
                               capture_output=True, text=True, timeout=120)
    assert converted.returncode == 0, converted.stderr
    assert ANSWER in converted.stdout and "VBox(children" not in converted.stdout.split(ANSWER)[1]
