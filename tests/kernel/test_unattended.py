"""A notebook run by nbclient (as nbconvert --execute and papermill run it) has no one to answer.

Each ``%%astro`` question is decided at once: denied, saying why and how to allow it, unless the
tool is on the allow-list for unattended runs (``%%astro --allow``, ``c.AstroConfig.unattended_allow``
/ ``ASTRO_UNATTENDED_ALLOW``). Here a real nbclient executes a real notebook against the scripted
OpenAI server, with a cell timeout far below the 300 s question wait: a cell that waited for an
answer would time out instead of finishing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat
import nbformat.v4 as nbf
import pytest

from tests.fakes.openai_server import Turn

pytestmark = pytest.mark.slow

CELL_TIMEOUT = 60  # seconds; the question wait (ToolLimits.permission_timeout_secs) is 300
RUN = {"code": "made_by_agent = 1\nprint('kernel_run ran')"}


def _execute(cells: list[str], project: Path) -> Any:
    from nbclient import NotebookClient

    nb = nbf.new_notebook(cells=[nbf.new_code_cell(source) for source in cells])
    NotebookClient(nb, timeout=CELL_TIMEOUT, kernel_name="python3",
                   resources={"metadata": {"path": str(project)}}).execute()
    return nb


def _text(cell: Any) -> str:
    parts = []
    for out in cell.outputs:
        if out.output_type == "stream":
            parts.append(out.text)
        elif out.output_type in ("execute_result", "display_data"):
            parts.append(str(out.data.get("text/plain", "")))
    return "".join(parts)


def test_nbclient_denies_at_once_and_allows_only_what_the_cell_lists(llm_env: Any, project: Path) -> None:
    llm_env.script(Turn.call("kernel_run", RUN), Turn.say("I could not run it."),
                   Turn.call("kernel_run", RUN), Turn.say("Ran it."))
    nb = _execute([
        "%load_ext astro_jupyter",
        "%%astro\nset a variable in my kernel",
        "print('defined' if 'made_by_agent' in globals() else 'undefined')",
        "%%astro --allow kernel_run\nset it now",
        "print('defined' if 'made_by_agent' in globals() else 'undefined')",
        "%astro export -o log.ipynb",
    ], project)
    denied, after_denied, allowed, after_allowed = (_text(c) for c in nb.cells[1:5])
    # the denial, at once and with its reason, in the cell's own output (plain text, not unrendered widgets)
    flat = " ".join(denied.split())
    assert "Unattended run: no one can answer questions in this kernel" in flat
    assert "allow_stdin off" in flat and "Every question is denied at once" in flat
    assert "✗ kernel_run" in denied and "I could not run it." in denied
    assert after_denied.strip() == "undefined"
    sent = [m for m in llm_env.chat_requests[1]["messages"] if m.get("role") == "tool"]
    assert "Permission denied for kernel_run" in sent[-1]["content"] and "not asked: no one can answer" in sent[-1]["content"]
    assert "%%astro --allow kernel_run" in sent[-1]["content"]  # how to allow it
    # listed for this cell: it runs, without a question
    assert "Allowed without asking: kernel_run (%%astro --allow)" in " ".join(allowed.split())
    assert "← kernel_run" in allowed and "stdout: kernel_run ran" in allowed and after_allowed.strip() == "defined"
    # the exported log shows what each run was allowed
    log = nbformat.read(project / "log.ipynb", as_version=4)
    notes = [c.source for c in log.cells if c.cell_type == "markdown" and c.source.startswith("**Note**")]
    assert len(notes) == 2 and "every question is denied at once" in notes[0].lower()
    assert "Allowed without asking: kernel_run (%%astro --allow)" in notes[1]
    code = [c.source for c in log.cells if c.cell_type == "code"]
    assert code.count(RUN["code"]) == 1  # only the call that ran is code


def test_the_configured_allow_list_and_a_typo(llm_env: Any, project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASTRO_UNATTENDED_ALLOW", "kernel_run, notebook_edit")
    llm_env.script(Turn.call("kernel_run", RUN), Turn.say("Ran it."))
    nb = _execute([
        "%load_ext astro_jupyter",
        "%%astro\nset a variable",
        "print('defined' if 'made_by_agent' in globals() else 'undefined')",
        "try:\n    get_ipython().run_cell_magic('astro', '--allow kernel_rnu', 'x')\nexcept Exception as exc:\n"
        "    print(type(exc).__name__, exc)",
    ], project)
    ran, defined, typo = (_text(c) for c in nb.cells[1:4])
    assert "Allowed without asking: kernel_run, notebook_edit (c.AstroConfig.unattended_allow)" in " ".join(ran.split())
    assert defined.strip() == "defined"
    assert "UsageError" in typo and "not a tool: kernel_rnu" in typo
