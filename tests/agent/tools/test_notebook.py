"""notebook_read / notebook_edit / notebook_run as the agent calls them (files + a real kernel).

Calls go through the real executor and permission pipeline; notebook_run starts a real
ipykernel through jupyter_client/nbclient, kept for the run and stopped by ``release_run``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import struct
import zlib
from pathlib import Path
from typing import Any

import nbformat
import nbformat.v4 as nbf
import pytest

from astro_jupyter.agent.executor import ToolCallRequest, ToolExecutor
from astro_jupyter.agent.permissions import PermissionChecker
from astro_jupyter.agent.tools import build_default_registry
from astro_jupyter.services.notebooks.cells import RenderLimits
from astro_jupyter.agent.tools.base import ToolContext
from astro_jupyter.agent.tools.file_state import FileStateCache
from astro_jupyter.services.notebooks.files import checkpoint_path


def png(width: int, height: int) -> str:
    """A real (tiny) PNG of the given size, base64 as in a notebook output."""
    raw = b"".join(b"\x00" + b"\x00\x00\x00" * width for _ in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    data = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
    data += chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
    return base64.b64encode(data).decode()


def sample_notebook(path: Path) -> nbformat.NotebookNode:
    nb = nbf.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    intro = nbf.new_markdown_cell("# Photometry of M 31")
    code = nbf.new_code_cell("flux = [1, 2, 3]\nprint(sum(flux))", execution_count=1)
    code.outputs = [nbf.new_output("stream", name="stdout", text="6\n")]
    plot = nbf.new_code_cell("plt.plot(flux)", execution_count=2)
    plot.outputs = [nbf.new_output("display_data", data={"image/png": png(640, 480), "text/plain": "<Figure size 640x480>"})]
    bad = nbf.new_code_cell("1 / 0", execution_count=3)
    bad.outputs = [nbf.new_output("error", ename="ZeroDivisionError", evalue="division by zero", traceback=[
        "\x1b[31m---------------------------------------------------------------------------\x1b[39m",
        "Cell In[3], line 1\n----> 1 1 / 0",
        "\x1b[31mZeroDivisionError\x1b[39m: division by zero",
    ])]
    nb.cells = [intro, code, plot, bad]
    path.write_text(nbformat.writes(nb))
    return nb


class Harness:
    def __init__(self, services: Any, rules: list[dict[str, Any]] | None = None, answers: list[str] | None = None) -> None:
        self.services = services
        self.registry = build_default_registry(services.config)
        self.checker = PermissionChecker(rules or [], "auto")
        self.executor = ToolExecutor(self.registry, self.checker, config=services.config)
        self.answers = answers
        self.asked: list[Any] = []
        self.events: list[Any] = []
        self.n = 0

    async def call(self, name: str, run_id: str = "run_test", **args: Any) -> Any:
        async def emit(event: Any) -> None:
            self.events.append(event)

        asker = None
        if self.answers is not None:
            def asker(request: Any) -> "asyncio.Future[str]":
                self.asked.append(request)
                future = asyncio.get_running_loop().create_future()
                future.set_result(self.answers.pop(0) if self.answers else "deny")
                return future

        ctx = ToolContext(config=self.services.config, services=self.services, session_id="ses_nb",
                          cancelled=asyncio.Event(), emit=emit, file_state=FileStateCache(), run_id=run_id,
                          ask_permission=asker)
        self.n += 1
        [done] = await self.executor.execute([ToolCallRequest(f"call_{self.n}", name, json.dumps(args))], ctx)
        return done.output


ALLOW_NOTEBOOKS = [{"action": "allow", "tool": "notebook_edit|notebook_run"}]


@pytest.mark.asyncio
async def test_notebook_read_shows_ids_outputs_images_and_errors(services: Any, tmp_path: Path) -> None:
    nb = sample_notebook(tmp_path / "m31.ipynb")
    out = await Harness(services).call("notebook_read", path="m31.ipynb")
    assert not out.is_error, out.content
    text = out.content
    assert text.startswith("m31.ipynb: 4 cells")
    for cell in nb.cells:
        assert f"id {cell.id}" in text
    assert "# Photometry of M 31" in text and "print(sum(flux))" in text and "\n6\n" in text
    assert "[image/png 640×480]" in text and "<Figure size 640x480>" in text
    assert "ZeroDivisionError: division by zero" in text and "----> 1 1 / 0" in text and "\x1b[" not in text
    records = out.metadata["cells"]
    assert [r["id"] for r in records] == [c.id for c in nb.cells]
    assert records[1]["execution_count"] == 1 and records[1]["outputs"] == ["6\n"]
    assert records[0]["cell_type"] == "markdown" and "outputs" not in records[0]
    only = await Harness(services).call("notebook_read", path="m31.ipynb", cell_ids=[nb.cells[3].id], include_outputs=False)
    assert [r["id"] for r in only.metadata["cells"]] == [nb.cells[3].id] and "outputs" not in only.metadata["cells"][0]
    assert "(showing 1)" in only.content and "division by zero" not in only.content


@pytest.mark.asyncio
async def test_notebook_read_cuts_long_cells_and_names_bad_input(services: Any, tmp_path: Path) -> None:
    services.notebooks.limits = RenderLimits(cell_chars=100)
    nb = nbf.new_notebook()
    nb.cells = [nbf.new_code_cell("x = 1\n" * 200)]
    (tmp_path / "long.ipynb").write_text(nbformat.writes(nb))
    out = await Harness(services).call("notebook_read", path="long.ipynb")
    assert "more characters cut" in out.content and len(out.content) < 400
    (tmp_path / "broken.ipynb").write_text("{not json")
    bad = await Harness(services).call("notebook_read", path="broken.ipynb")
    assert bad.is_error and "not a readable notebook" in bad.content
    missing = await Harness(services).call("notebook_read", path="nope.ipynb")
    assert missing.is_error and "does not exist" in missing.content
    (tmp_path / "notes.txt").write_text("hi")
    wrong = await Harness(services).call("notebook_read", path="notes.txt")
    assert wrong.is_error and "not a notebook" in wrong.content
    outside = await Harness(services).call("notebook_read", path="/etc/passwd.ipynb")
    assert outside.is_error and "outside the allowed roots" in outside.content
    unknown = await Harness(services).call("notebook_read", path="long.ipynb", cell_ids=["zzz"])
    assert unknown.is_error and "no cell with id 'zzz'" in unknown.content


@pytest.mark.asyncio
async def test_old_notebooks_without_ids_get_stable_ids(services: Any, tmp_path: Path) -> None:
    raw = {"nbformat": 4, "nbformat_minor": 4, "metadata": {}, "cells": [
        {"cell_type": "code", "metadata": {}, "source": "a = 1", "outputs": [], "execution_count": None},
        {"cell_type": "markdown", "metadata": {}, "source": "text"}]}
    (tmp_path / "old.ipynb").write_text(json.dumps(raw))
    h = Harness(services, ALLOW_NOTEBOOKS)
    first = await h.call("notebook_read", path="old.ipynb")
    second = await h.call("notebook_read", path="old.ipynb")
    ids = [r["id"] for r in first.metadata["cells"]]
    assert ids == [r["id"] for r in second.metadata["cells"]] and len(set(ids)) == 2
    edited = await h.call("notebook_edit", path="old.ipynb", action="replace", cell_id=ids[0], source="a = 2")
    assert not edited.is_error, edited.content
    stored = nbformat.read(tmp_path / "old.ipynb", as_version=4)
    nbformat.validate(stored)
    assert [c.id for c in stored.cells] == ids and stored.cells[0].source == "a = 2"


@pytest.mark.asyncio
async def test_notebook_edit_insert_replace_delete(services: Any, tmp_path: Path) -> None:
    h = Harness(services, ALLOW_NOTEBOOKS)
    made = await h.call("notebook_edit", path="new/analysis.ipynb", action="insert", source="x = 1")
    assert made.is_error and "folder" in made.content  # no silent directory creation
    (tmp_path / "new").mkdir()
    made = await h.call("notebook_edit", path="new/analysis.ipynb", action="insert", source="x = 1")
    assert not made.is_error, made.content
    first_id = made.metadata["cell_id"]
    assert made.metadata["created"] and f"cell {first_id} at index 0 of created new/analysis.ipynb" in made.content
    md = await h.call("notebook_edit", path="new/analysis.ipynb", action="insert", index=0, cell_type="markdown",
                      source="# Fit")
    after = await h.call("notebook_edit", path="new/analysis.ipynb", action="insert", cell_id=md.metadata["cell_id"],
                         source="y = 2")
    assert after.metadata["index"] == 1
    nb = nbformat.read(tmp_path / "new/analysis.ipynb", as_version=4)
    nbformat.validate(nb)
    assert [c.source for c in nb.cells] == ["# Fit", "y = 2", "x = 1"]
    nb.cells[2].outputs = [nbf.new_output("stream", name="stdout", text="old output\n")]
    nb.cells[2].execution_count = 7
    (tmp_path / "new/analysis.ipynb").write_text(nbformat.writes(nb))
    replaced = await h.call("notebook_edit", path="new/analysis.ipynb", action="replace", cell_id=first_id, source="x = 10")
    assert replaced.metadata["old_source"] == "x = 1" and replaced.metadata["source"] == "x = 10"
    nb = nbformat.read(tmp_path / "new/analysis.ipynb", as_version=4)
    assert nb.cells[2].source == "x = 10" and nb.cells[2].outputs == [] and nb.cells[2].execution_count is None
    gone = await h.call("notebook_edit", path="new/analysis.ipynb", action="delete", cell_id=md.metadata["cell_id"])
    assert gone.metadata["old_source"] == "# Fit"
    nb = nbformat.read(tmp_path / "new/analysis.ipynb", as_version=4)
    assert [c.source for c in nb.cells] == ["y = 2", "x = 10"]
    for bad, message in (({"action": "replace", "cell_id": "nope", "source": "z"}, "no cell with id 'nope'"),
                         ({"action": "delete"}, "needs the cell_id"),
                         ({"action": "replace", "cell_id": first_id}, "needs the cell's source"),
                         ({"action": "insert", "source": "s", "cell_type": "raw"}, "cell_type"),
                         ({"action": "delete", "cell_id": "../../etc"}, "is not a cell id")):
        out = await h.call("notebook_edit", path="new/analysis.ipynb", **bad)
        assert out.is_error and message in out.content, (bad, out.content)
    assert [c.source for c in nbformat.read(tmp_path / "new/analysis.ipynb", as_version=4).cells] == ["y = 2", "x = 10"]


@pytest.mark.asyncio
async def test_first_edit_of_a_run_leaves_a_checkpoint(services: Any, tmp_path: Path) -> None:
    nb = sample_notebook(tmp_path / "m31.ipynb")
    original = (tmp_path / "m31.ipynb").read_text()
    h = Harness(services, ALLOW_NOTEBOOKS)
    await h.call("notebook_edit", path="m31.ipynb", action="insert", source="a = 1", run_id="run_a")
    await h.call("notebook_edit", path="m31.ipynb", action="delete", cell_id=nb.cells[0].id, run_id="run_a")
    checkpoint = checkpoint_path(tmp_path / "m31.ipynb")
    assert checkpoint == tmp_path / ".ipynb_checkpoints" / "m31-checkpoint.ipynb"
    assert checkpoint.read_text() == original  # the state before the run's first change, not before its last


@pytest.mark.asyncio
async def test_edit_and_run_ask_and_are_denied_without_an_answer(services: Any, tmp_path: Path) -> None:
    nb = sample_notebook(tmp_path / "m31.ipynb")
    before = (tmp_path / "m31.ipynb").read_text()
    h = Harness(services)  # nobody to answer
    out = await h.call("notebook_edit", path="m31.ipynb", action="delete", cell_id=nb.cells[0].id)
    assert out.is_error and "Permission denied" in out.content and "no one is there to answer" in out.content
    ran = await h.call("notebook_run", path="m31.ipynb", cell_id=nb.cells[1].id)
    assert ran.is_error and "Permission denied" in ran.content
    read = await h.call("notebook_read", path="m31.ipynb")
    assert not read.is_error  # read-only: no question
    assert (tmp_path / "m31.ipynb").read_text() == before


@pytest.mark.asyncio
async def test_allow_for_this_notebook_is_remembered_per_notebook(services: Any, tmp_path: Path) -> None:
    sample_notebook(tmp_path / "a.ipynb")
    sample_notebook(tmp_path / "b.ipynb")
    h = Harness(services, answers=["always", "deny"])
    first = await h.call("notebook_edit", path="a.ipynb", action="insert", source="1")
    assert not first.is_error and len(h.asked) == 1
    assert h.asked[0].scope == str((tmp_path / "a.ipynb").resolve())
    again = await h.call("notebook_edit", path="./a.ipynb", action="insert", source="2")
    assert not again.is_error and len(h.asked) == 1  # not asked again for this notebook
    other = await h.call("notebook_edit", path="b.ipynb", action="insert", source="3")
    assert other.is_error and len(h.asked) == 2  # another notebook asks again (and was denied)
    cell = nbformat.read(tmp_path / "a.ipynb", as_version=4).cells[1]
    run = await h.call("notebook_run", path="a.ipynb", cell_id=cell.id)
    assert len(h.asked) == 3 and run.is_error  # running is a separate permission
    assert h.asked[2].code == cell.source  # the user sees what would run, read where it runs (here: the file)
    assert "outputs are saved into the file" in h.asked[2].message


@pytest.mark.asyncio
async def test_kernel_tools_are_not_offered_outside_a_kernel(services: Any) -> None:
    h = Harness(services)
    assert "kernel_run" not in h.registry.names() and "kernel_inspect" not in h.registry.names()
    flags = {t.name: (t.is_readonly, t.defer_loading) for t in h.registry.sorted_tools() if t.name.startswith("notebook")}
    assert flags == {"notebook_read": (True, True), "notebook_edit": (False, True), "notebook_run": (False, True)}
    out = await h.call("kernel_run", code="print(1)")
    assert out.is_error and "kernel_run is not available here" in out.content and "%%astro" in out.content


@pytest.mark.slow
@pytest.mark.asyncio
async def test_notebook_run_uses_one_kernel_per_run_and_saves_outputs(services: Any, tmp_path: Path) -> None:
    nb = nbf.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbf.new_code_cell("import os\nx = 41\nprint(os.getcwd())"), nbf.new_code_cell("x + 1"),
                nbf.new_code_cell("raise ValueError('bad flux')"), nbf.new_markdown_cell("text")]
    (tmp_path / "work").mkdir()
    path = tmp_path / "work" / "run.ipynb"
    path.write_text(nbformat.writes(nb))
    h = Harness(services, ALLOW_NOTEBOOKS)
    first = await h.call("notebook_run", path="work/run.ipynb", cell_id=nb.cells[0].id, run_id="run_k")
    assert not first.is_error, first.content
    assert str(tmp_path / "work") in first.content  # the kernel runs in the notebook's folder
    second = await h.call("notebook_run", path="work/run.ipynb", cell_id=nb.cells[1].id, run_id="run_k")
    assert "42" in second.content and second.metadata["cells"][0]["outputs"] == ["42"]
    error = await h.call("notebook_run", path="work/run.ipynb", cell_id=nb.cells[2].id, run_id="run_k")
    assert not error.is_error and "ValueError: bad flux" in error.content
    md = await h.call("notebook_run", path="work/run.ipynb", cell_id=nb.cells[3].id, run_id="run_k")
    assert md.is_error and "only code cells run" in md.content
    stored = nbformat.read(path, as_version=4)
    nbformat.validate(stored)
    assert stored.cells[1].outputs[0]["data"]["text/plain"] == "42" and stored.cells[1].execution_count == 2
    kernels = services.notebooks.backend.kernels
    assert len(kernels._clients) == 1
    km = next(iter(kernels._clients.values())).km
    other_run = await h.call("notebook_run", path="work/run.ipynb", cell_id=nb.cells[1].id, run_id="run_other")
    assert "NameError" in other_run.content  # a different run gets its own fresh kernel
    await services.release_run("run_k")
    await services.release_run("run_other")
    assert kernels._clients == {} and not await km.is_alive()


@pytest.mark.asyncio
async def test_the_hard_deny_list_holds_for_notebooks(services: Any, tmp_path: Path) -> None:
    """Notebook paths go through the sandbox's resolution: a dot-directory is shut even with an allow rule."""
    hidden = tmp_path / ".secret"
    hidden.mkdir()
    sample_notebook(hidden / "keys.ipynb")
    before = (hidden / "keys.ipynb").read_text()
    h = Harness(services, ALLOW_NOTEBOOKS, answers=["always"])
    out = await h.call("notebook_edit", path=".secret/keys.ipynb", action="insert", source="x")
    assert out.is_error and "hard limit" in out.content and not h.asked
    assert (hidden / "keys.ipynb").read_text() == before


async def _call_while_the_user_edits(h: "Harness", path: Path, source: str, tool: str, args: dict[str, Any]) -> Any:
    """Call ``tool``; while its question is shown, the notebook's first cell becomes ``source``; then Allow."""

    def change_then_allow(request: Any) -> "asyncio.Future[str]":
        h.asked.append(request)
        changed = nbformat.read(path, as_version=4)
        changed.cells[0].source = source
        nbformat.write(changed, path)
        future = asyncio.get_running_loop().create_future()
        future.set_result("allow")
        return future

    async def emit(event: Any) -> None:
        h.events.append(event)

    services = h.services
    ctx = ToolContext(config=services.config, services=services, session_id="ses_nb", cancelled=asyncio.Event(),
                      emit=emit, file_state=FileStateCache(), run_id="run_swap", ask_permission=change_then_allow)
    [done] = await h.executor.execute([ToolCallRequest("x1", tool, json.dumps(args))], ctx)
    return done


@pytest.mark.asyncio
async def test_a_cell_changed_between_the_question_and_the_run_does_not_run(services: Any, tmp_path: Path) -> None:
    """File store (the kernel, the CLI): the question shows the cell as it is; if the file's cell changes before
    the run, nothing runs and the model is told to ask again; a cell that cannot be read is refused, not run."""
    path = tmp_path / "c.ipynb"
    nb = nbf.new_notebook()
    nb.cells = [nbf.new_code_cell("a = 1\nprint(a)")]
    nbformat.write(nb, path)
    cell_id = nb.cells[0].id
    h = Harness(services, answers=["allow", "allow"])
    done = await _call_while_the_user_edits(h, path, "open('pwned', 'w').write('x')", "notebook_run",
                                            {"path": "c.ipynb", "cell_id": cell_id})
    assert h.asked[0].code == "a = 1\nprint(a)"
    assert done.output.is_error and "was not run: it changed after the user was asked" in done.output.content
    assert not (tmp_path / "pwned").exists() and not nbformat.read(path, as_version=4).cells[0].outputs
    missing = await h.call("notebook_run", path="c.ipynb", cell_id="nosuchcell")
    assert "cannot be shown" in h.asked[-1].message and h.asked[-1].code == ""
    assert missing.is_error and "was not run: the question could not show its code" in missing.content


@pytest.mark.asyncio
async def test_a_replace_is_asked_as_a_diff_against_the_cell_and_applies_only_to_that_text(services: Any,
                                                                                              tmp_path: Path) -> None:
    """Issue 24 item 8: the question of a notebook_edit replace carries the cell's text read where the edit
    applies (the card shows old → new); a cell changed after the question is left alone; Deny is declined."""
    path = tmp_path / "d.ipynb"
    nb = nbf.new_notebook()
    nb.cells = [nbf.new_code_cell("flux = 1\nx = 20"), nbf.new_markdown_cell("# Notes")]
    nbformat.write(nb, path)
    code_id, md_id = nb.cells[0].id, nb.cells[1].id
    h = Harness(services, answers=["allow", "deny"])
    done = await h.call("notebook_edit", path="d.ipynb", action="replace", cell_id=code_id, source="flux = 1\nx = 21")
    assert not done.is_error, done.content
    assert h.asked[0].old_source == "flux = 1\nx = 20"
    assert "replace code cell" in h.asked[0].message
    assert nbformat.read(path, as_version=4).cells[0].source == "flux = 1\nx = 21"
    denied = await h.call("notebook_edit", path="d.ipynb", action="replace", cell_id=md_id, source="# Mine")
    assert h.asked[1].old_source == "# Notes"
    assert denied.is_error and denied.metadata.get("declined") is True  # the user's Deny: declined, not failed
    # an insert has nothing to diff against
    h.answers = ["allow"]
    await h.call("notebook_edit", path="d.ipynb", action="insert", source="y = 1")
    assert h.asked[2].old_source is None

    stale = await _call_while_the_user_edits(h, path, "flux = 2  # my newer work", "notebook_edit",
                                             {"path": "d.ipynb", "action": "replace", "cell_id": code_id, "source": "x = 22"})
    assert h.asked[-1].old_source == "flux = 1\nx = 21"
    assert stale.output.is_error and "was not replaced: it changed after the user was shown" in stale.output.content
    assert nbformat.read(path, as_version=4).cells[0].source == "flux = 2  # my newer work"


@pytest.mark.asyncio
async def test_a_stopped_run_sends_the_open_notebook_no_request(services: Any) -> None:
    """A notebook tool that reaches the sidebar bridge after Stop: the sidebar is not asked to edit or
    run anything in the open document (it would apply the change for a run that is over)."""
    from types import SimpleNamespace

    from astro_jupyter.agent.run import ClientNotebook, PendingAnswers
    from astro_jupyter.agent.tools.notebook.bridge import ask_client

    answers = PendingAnswers()
    answers.cancel_all()  # Stop was pressed
    sent: list[Any] = []

    async def emit(event: Any) -> None:
        sent.append(event)

    ctx = ToolContext(config=services.config, services=services, session_id="s1", cancelled=asyncio.Event(),
                      emit=emit, file_state=FileStateCache(), run_id="r1", tool_call_id="c1",
                      scope=SimpleNamespace(client=ClientNotebook(path="lc.ipynb", bridge=True), answers=answers))
    with pytest.raises(asyncio.CancelledError):
        await ask_client(ctx, "insert", "lc.ipynb", {"source": "print(1)"})
    assert sent == []
