"""The README's tour, run as written: the demo, the notebook magics and the command line.

Every command of the "Try it offline", "In a notebook" and "Command line" sections runs in a
temporary ASTRO_HOME against the loopback fakes (LLM, Sesame, ADS, arXiv) or, for the demo,
with Sesame unreachable so only the demo's cache can answer. ``SESSION_ID`` in the README is
the one placeholder: it stands for the id of the session the first ``ask`` made. The line
``jupyter lab binder/demo.ipynb`` starts a server; the notebook it opens is executed by
tests/test_demo_notebook.py.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.ads_server import TOKEN
from tests.fakes.base import FakeServer
from tests.fakes.file_server import make_pdf
from tests.fakes.openai_server import Turn

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
ANSWER = "M 87 is a giant elliptical galaxy in Virgo with a relativistic jet."

pytestmark = pytest.mark.slow


def _section(title: str) -> str:
    return README.split(f"## {title}", 1)[1].split("\n## ", 1)[0]


def _blocks(title: str, lang: str) -> list[str]:
    return [b.strip("\n") for b in re.findall(rf"```{lang}\n(.*?)```", _section(title), flags=re.S)]


@pytest.fixture
def tour(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, openai_server: Any, sesame_server: Any,
         ads_fake: FakeServer, arxiv_fake: FakeServer, file_fake: FakeServer) -> dict[str, Any]:
    project = tmp_path / "project"
    project.mkdir()
    (project / "paper.pdf").write_bytes(make_pdf("Variable stars in Rubin data"))
    (project / "notes.md").write_text("# Observing notes\nM 87 jet seen in the 21:00 frames.\n", encoding="utf-8")
    openai_server.respond_with(lambda body: Turn.say(ANSWER))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LLM_", "ASTRO_", "ADS_"))}
    env.update(
        ASTRO_HOME=str(tmp_path / "home"), ASTRO_PROJECT_ROOT=str(project), PYTHONPATH=str(ROOT),
        OPENAI_BASE_URL=openai_server.url, OPENAI_API_KEY="k",
        ASTRO_SESAME_URL=sesame_server.url, ASTRO_ADS_URL=ads_fake.url, ADS_API_TOKEN=TOKEN,
        ASTRO_ARXIV_URL=f"{arxiv_fake.url}/api/query",
        ASTRO_ARXIV_PDF_URL=f"{file_fake.url}/pdf", ASTRO_DOI_URL=f"{file_fake.url}/doi",
    )
    return {"env": env, "project": project, "home": tmp_path / "home", "llm": openai_server}


def _run(line: str, env: dict[str, str], cwd: Path, session_id: str = "") -> subprocess.CompletedProcess[str]:
    words = shlex.split(line, comments=True)
    assert words[0] == "astro-jupyter", line
    words = [session_id if w == "SESSION_ID" else w for w in words[1:]]
    return subprocess.run([sys.executable, "-m", "astro_jupyter.cli", *words], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_the_readme_tour_runs_as_written(tour: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    env, project = tour["env"], tour["project"]

    # -- Try it offline: the demo (Sesame unreachable: the demo's cache answers) --------------------
    offline = {**env, "ASTRO_SESAME_URL": "http://127.0.0.1:9"}
    [demo] = _blocks("Try it offline: the demo", "bash")
    for line in demo.splitlines():
        if line.startswith("jupyter lab "):
            assert line.split("#")[0].split() == ["jupyter", "lab", "binder/demo.ipynb"]  # see test_demo_notebook.py
            continue
        proc = _run(line, offline, project)
        assert proc.returncode == 0, (line, proc.stdout, proc.stderr)
        if "query_target" in line:
            assert "00:42:44.33" in proc.stdout and "+41:16:07.5" in proc.stdout

    # -- In a notebook: the magics blocks, each as a cell in IPython ---------------------------------
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.testing.globalipapp import start_ipython

    from astro_jupyter.cells.display import AgentAnswer, AstroResult

    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(project)
    ip = start_ipython() or InteractiveShell.instance()  # the global test shell, if another test started it
    ip.run_line_magic("load_ext", "astro_jupyter")
    try:
        results: list[Any] = []
        for block in _blocks("In a notebook: `%astro` and `%%astro`", "python"):
            cells = [block] if block.startswith("%%") else block.splitlines()
            for cell in cells:
                outcome = ip.run_cell(cell)
                assert outcome.success, (cell, outcome.error_before_exec or outcome.error_in_exec)
                if isinstance(outcome.result, AstroResult):
                    assert not outcome.result.is_error, (cell, outcome.result.content)
                results.append(outcome.result)
        r = ip.user_ns["r"]
        assert r.data["main_id"] == "M 31" and abs(r.skycoord.ra.deg - 10.684708) < 1e-6
        [answer] = [x for x in results if isinstance(x, AgentAnswer) and x.reason == "finished" and x.shown]
        assert answer.text == ANSWER
        log = project / "research-log.ipynb"
        assert json.loads(log.read_text(encoding="utf-8"))["metadata"]["astro_jupyter"]["session_id"] == answer.session_id
    finally:
        ip.run_line_magic("unload_ext", "astro_jupyter")
        for name in ("r", "target"):
            ip.user_ns.pop(name, None)

    # -- Command line -------------------------------------------------------------------------------
    [cli] = _blocks("Command line", "bash")
    session_id = ""
    outputs: dict[str, str] = {}
    for line in cli.splitlines():
        proc = _run(line, env, project, session_id)
        assert proc.returncode == 0, (line, proc.stdout, proc.stderr)
        outputs[line.split("#")[0].strip()] = proc.stdout
        if not session_id and shlex.split(line)[1] == "ask":
            session_id = re.search(r"session (ses_\w+)", proc.stderr).group(1)  # type: ignore[union-attr]
            assert ANSWER in proc.stdout
    from astro_jupyter import __version__

    assert outputs["astro-jupyter --version"].strip() == f"astro-jupyter {__version__}"
    assert session_id in outputs["astro-jupyter sessions --limit 5"]
    papers = {p["id"] for p in json.loads(outputs["astro-jupyter library list --json"])}
    assert {"local:variable-stars-in-rubin-data", "arxiv:2301.01234", "local:demo-mw-halo-mass"} <= papers
    exported = json.loads((project / "research-log.ipynb").read_text(encoding="utf-8"))
    assert exported["metadata"]["astro_jupyter"]["session_id"] == session_id
    assert len([m for m in tour["llm"].chat_requests[-1]["messages"] if m["role"] == "user"]) == 2  # --session continued
