"""The agent works in the notebook (issue 12, sidebar side): a real ``jupyter lab`` with the
scripted LLM, headless Chromium.

With the notebook open, the agent's ``notebook_edit`` / ``notebook_run`` go through the open
document (the sidebar's notebook bridge): the cell appears and runs live, the document is
dirty, Ctrl+Z removes the insert, the file on disk is untouched. The permission prompt comes
first and Deny leaves the notebook alone. With the notebook closed, the sidebar answers
``not_open`` and the server changes the file through the ContentsManager (valid nbformat, a
checkpoint of the version before).
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import nbformat
import nbformat.v4 as nbf

from tests.fakes.openai_server import Turn

from .conftest import PANEL, document_panel, document_tab, new_session, open_panel, send, shot, wait_done

CELL_SOURCE = "y = 6 * 7\nprint('the answer is', y)"


def make_notebook(root: Path, name: str) -> nbformat.NotebookNode:
    nb = nbf.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbf.new_markdown_cell("# Light curve"), nbf.new_code_cell("x = 20")]
    (root / name).write_text(nbformat.writes(nb))
    return nb


def open_notebook(page: Any, lab: Any, name: str) -> Any:
    """Open ``name`` in the lab (a fresh page on its tree URL) and the Astro panel; the notebook's locator."""
    page.goto(f"{lab.url}/lab/tree/{name}?token={lab.token}")
    open_panel(page)
    notebook = document_panel(page, name)
    notebook.locator(".jp-Cell").nth(1).wait_for()
    return notebook


def is_dirty(page: Any, name: str) -> bool:
    return "jp-mod-dirty" in (document_tab(page, name).get_attribute("class") or "")


def save_clean(page: Any, notebook: Any, name: str) -> None:
    """Once the kernel is up, save until the document stays clean for 2 s.

    The kernel's info reply (language_info) can land after the indicator first reads idle and dirty the notebook
    again (seen once in CI), so one clean moment is not enough for a test that asserts nothing dirtied it later.
    """
    notebook.locator('.jp-Notebook-ExecutionIndicator[data-status="idle"]').wait_for(timeout=60_000)
    for _ in range(10):
        cells(notebook).nth(0).locator(".jp-InputPrompt").click()
        page.keyboard.press("Control+s")
        page.wait_for_timeout(500)
        if is_dirty(page, name):
            continue
        page.wait_for_timeout(2_000)
        if not is_dirty(page, name):
            return
    raise AssertionError(f"{name} stays dirty after saving")


def inserted_then_run(path: str) -> Any:
    """After the scripted insert, run the cell the tool result names; then finish."""

    def respond(body: dict[str, Any]) -> Turn:
        tools = [m for m in body["messages"] if m.get("role") == "tool"]
        last = tools[-1]["content"] if tools else ""
        found = re.search(r"Inserted code cell ([A-Za-z0-9_-]+) at index", last)
        if found and len(tools) == 1:
            return Turn.call("notebook_run", {"path": path, "cell_id": found.group(1)}, id="call_nb_run")
        return Turn.say("Done: the cell prints the answer.")

    return respond


def chip(page: Any) -> Any:
    return page.locator(f"{PANEL} .jp-Astro-notebook-chip")


def cells(notebook: Any) -> Any:
    return notebook.locator(".jp-Cell")


def panel_id(notebook: Any) -> str:
    return notebook.get_attribute("id")


def test_agent_inserts_and_runs_a_cell_in_the_open_notebook(page, lab, script):
    name = f"open-{uuid.uuid4().hex[:6]}.ipynb"
    make_notebook(lab.root, name)
    notebook = open_notebook(page, lab, name)
    assert cells(notebook).count() == 2
    save_clean(page, notebook, name)
    on_disk = (lab.root / name).read_text()
    # the active notebook is attached to the next prompt by default
    assert name in chip(page).inner_text()
    assert chip(page).get_attribute("aria-pressed") == "true"
    script.script(Turn.call("notebook_edit", {"path": name, "action": "insert", "source": CELL_SOURCE}, id="call_nb_edit"))
    script.respond_with(inserted_then_run(name))
    new_session(page)
    starts: list[dict[str, Any]] = []
    page.on("request", lambda r: starts.append(json.loads(r.post_data or "{}"))
            if r.method == "POST" and r.url.split("?")[0].endswith("/astro/api/runs") else None)
    send(page, "add a cell that prints the answer and run it")
    panel = page.locator(PANEL)
    question = panel.locator(".jp-Astro-permission").first
    question.wait_for()
    # the permission prompt comes first: nothing changed yet
    assert "notebook_edit" in question.inner_text()
    assert question.get_by_role("button", name="Allow for this notebook").is_visible()
    assert cells(notebook).count() == 2
    question.get_by_role("button", name="Allow", exact=True).click()
    # the cell appears in the open document, without a reload
    new_cell = cells(notebook).nth(2)
    new_cell.wait_for()
    assert "print('the answer is', y)" in new_cell.locator(".jp-InputArea").inner_text()
    run_question = panel.locator(".jp-Astro-permission").nth(1)
    run_question.wait_for()
    assert "notebook_run" in run_question.inner_text()
    run_question.get_by_role("button", name="Allow", exact=True).click()
    new_cell.locator(".jp-OutputArea-output", has_text="the answer is 42").wait_for(timeout=60_000)
    wait_done(page, timeout=60_000)
    assert starts and starts[0]["notebook"]["path"] == name and starts[0]["notebook"]["bridge"] is True
    assert starts[0]["notebook"]["cell_ids"]
    # the document is dirty, the file on disk untouched (no write under an open notebook)
    assert is_dirty(page, name)
    assert (lab.root / name).read_text() == on_disk
    # the tool card shows the inserted cell; a click scrolls the notebook to it and selects it
    card = panel.locator('.jp-Astro-tool[data-tool-call-id="call_nb_edit"] .jp-Astro-nbcell')
    assert "print('the answer is', y)" in card.inner_text()
    result = [m for m in script.chat_requests[-1]["messages"] if m.get("role") == "tool"]
    assert "can undo it" in result[0]["content"] and "the answer is 42" in result[1]["content"]
    cells(notebook).nth(0).click()
    card.locator(".jp-Astro-nbcell-link").click()
    page.wait_for_function("id => document.getElementById(id).querySelectorAll('.jp-Cell')[2].classList.contains('jp-mod-active')",
                           arg=panel_id(notebook))
    shot(page, "notebook-bridge-inserted-and-ran")
    # Ctrl+Z in the notebook takes the agent's insert back
    cells(notebook).nth(0).locator(".jp-InputPrompt").click()
    page.keyboard.press("Escape")
    # (command mode: Ctrl+Z is the notebook's cell-level undo, like its own "Z")
    page.keyboard.press("Control+z")
    page.wait_for_function("id => document.getElementById(id).querySelectorAll('.jp-Cell').length === 2",
                           arg=panel_id(notebook))
    assert cells(notebook).count() == 2
    assert "the answer is" not in notebook.inner_text()
    # the card's link now points at a cell the undo removed: a click says so (no silent no-op, no wrong jump)
    gone = card.locator(".jp-Astro-nbcell-gone")
    assert not gone.is_visible()
    card.locator(".jp-Astro-nbcell-link").click()
    gone.wait_for(state="visible")
    assert gone.inner_text() == "That cell is no longer in the notebook (undone?)."
    assert "jp-mod-active" in (cells(notebook).nth(0).get_attribute("class") or "")  # the selection stayed
    assert page.astro_errors == []


def test_denied_edit_leaves_the_open_notebook_untouched(page, lab, script):
    name = f"deny-{uuid.uuid4().hex[:6]}.ipynb"
    make_notebook(lab.root, name)
    notebook = open_notebook(page, lab, name)
    save_clean(page, notebook, name)
    on_disk = (lab.root / name).read_text()
    script.script(
        Turn.call("notebook_edit", {"path": name, "action": "insert", "source": CELL_SOURCE}, id="call_nb_denied"),
        Turn.say("I left the notebook alone."),
    )
    new_session(page)
    send(page, "add a cell")
    panel = page.locator(PANEL)
    question = panel.locator(".jp-Astro-permission")
    question.wait_for()
    question.get_by_role("button", name="Deny").click()
    wait_done(page)
    assert cells(notebook).count() == 2
    assert not is_dirty(page, name)
    assert (lab.root / name).read_text() == on_disk
    tool = [m for m in script.chat_requests[-1]["messages"] if m.get("role") == "tool"][-1]
    assert "Permission denied" in tool["content"]


def test_closed_notebook_changes_through_the_contents_manager(page, lab, script):
    """Another notebook is active (the chip is on, bridge: true); the agent edits one that is not open."""
    active = f"active-{uuid.uuid4().hex[:6]}.ipynb"
    closed = f"closed-{uuid.uuid4().hex[:6]}.ipynb"
    make_notebook(lab.root, active)
    make_notebook(lab.root, closed)
    original = (lab.root / closed).read_text()
    notebook = open_notebook(page, lab, active)
    script.script(Turn.call("notebook_edit", {"path": closed, "action": "insert", "source": CELL_SOURCE}, id="call_nb_edit"))
    script.respond_with(inserted_then_run(closed))
    new_session(page)
    send(page, f"add a cell to {closed} and run it")
    panel = page.locator(PANEL)
    for n in range(2):
        q = panel.locator(".jp-Astro-permission").nth(n)
        q.wait_for(timeout=60_000)
        q.get_by_role("button", name="Allow", exact=True).click()
    wait_done(page, timeout=90_000)
    tools = [m for m in script.chat_requests[-1]["messages"] if m.get("role") == "tool"]
    assert "Inserted code cell" in tools[0]["content"] and "can undo" not in tools[0]["content"]
    assert "the answer is 42" in tools[1]["content"]
    stored = nbformat.read(lab.root / closed, as_version=4)
    nbformat.validate(stored)
    assert stored.cells[-1].source == CELL_SOURCE
    assert any("the answer is 42" in (o.get("text") or "") for o in stored.cells[-1].outputs)
    checkpoint = lab.root / ".ipynb_checkpoints" / closed.replace(".ipynb", "-checkpoint.ipynb")
    assert checkpoint.read_text() == original
    # the open notebook was not touched
    assert cells(notebook).count() == 2
    # the card links to the cell: a click opens the notebook there
    panel.locator('.jp-Astro-tool[data-tool-call-id="call_nb_edit"] .jp-Astro-nbcell-link').click()
    document_tab(page, closed).wait_for()
    page.wait_for_function(
        """name => [...document.querySelectorAll('.jp-NotebookPanel')].some(p => !p.classList.contains('lm-mod-hidden')
            && p.querySelectorAll('.jp-Cell').length === 3 && p.querySelectorAll('.jp-Cell')[2].classList.contains('jp-mod-active'))""",
        arg=closed)
    assert page.astro_errors == []


def test_denied_edit_leaves_the_closed_notebook_untouched(page, lab, script):
    name = f"closed-deny-{uuid.uuid4().hex[:6]}.ipynb"
    make_notebook(lab.root, name)
    original = (lab.root / name).read_text()
    script.script(
        Turn.call("notebook_edit", {"path": name, "action": "delete", "cell_id": "nope"}, id="call_nb_denied"),
        Turn.say("Left it."),
    )
    new_session(page)
    send(page, "delete the title")
    question = page.locator(f"{PANEL} .jp-Astro-permission")
    question.wait_for()
    question.get_by_role("button", name="Deny").click()
    wait_done(page)
    assert (lab.root / name).read_text() == original
    assert not (lab.root / ".ipynb_checkpoints" / name.replace(".ipynb", "-checkpoint.ipynb")).exists()


def test_dropping_the_chip_leaves_the_notebook_out_of_the_prompt_but_edits_stay_live(page, lab, script):
    name = f"chip-{uuid.uuid4().hex[:6]}.ipynb"
    make_notebook(lab.root, name)
    notebook = open_notebook(page, lab, name)
    save_clean(page, notebook, name)
    on_disk = (lab.root / name).read_text()
    chip(page).click()  # one click drops it
    assert chip(page).get_attribute("aria-pressed") == "false"
    script.script(
        Turn.call("notebook_edit", {"path": name, "action": "insert", "index": 0, "source": "# added", "cell_type": "markdown"},
                  id="call_nb_md"),
        Turn.say("Added a heading."),
    )
    new_session(page)
    starts: list[dict[str, Any]] = []
    page.on("request", lambda r: starts.append(json.loads(r.post_data or "{}"))
            if r.method == "POST" and r.url.split("?")[0].endswith("/astro/api/runs") else None)
    send(page, "add a heading")
    page.locator(f"{PANEL} .jp-Astro-permission").get_by_role("button", name="Allow", exact=True).click()
    wait_done(page)
    assert starts[0]["notebook"] == {"bridge": True}
    assert name not in script.chat_requests[0]["messages"][-1]["content"]
    # still the open document: the cell is there, the file on disk is not written under it
    assert cells(notebook).count() == 3
    assert "added" in cells(notebook).nth(0).inner_text()
    assert is_dirty(page, name)
    assert (lab.root / name).read_text() == on_disk
    chip(page).click()  # and one click brings it back
    assert chip(page).get_attribute("aria-pressed") == "true"


def test_replace_card_shows_a_diff_and_code_blocks_insert_and_run(page, lab, script):
    name = f"diff-{uuid.uuid4().hex[:6]}.ipynb"
    nb = make_notebook(lab.root, name)
    notebook = open_notebook(page, lab, name)
    script.script(
        Turn.call("notebook_edit", {"path": name, "action": "replace", "cell_id": nb.cells[1].id, "source": "x = 21"},
                  id="call_nb_replace"),
        Turn.say("Changed x. To check it:\n\n```python\nprint('six times seven is', 6 * 7)\n```\n"),
    )
    new_session(page)
    send(page, "set x to 21")
    panel = page.locator(PANEL)
    panel.locator(".jp-Astro-permission").get_by_role("button", name="Allow", exact=True).click()
    wait_done(page)
    assert cells(notebook).nth(1).locator(".jp-InputArea").inner_text().strip().endswith("x = 21")
    card = panel.locator('.jp-Astro-tool[data-tool-call-id="call_nb_replace"] .jp-Astro-nbcell')
    assert card.locator(".jp-Astro-diff-del").inner_text().strip() == "- x = 20"
    assert card.locator(".jp-Astro-diff-add").inner_text().strip() == "+ x = 21"
    # a code block of the answer: Insert puts it below the active cell; Run inserts and executes
    cells(notebook).nth(1).locator(".jp-InputPrompt").click()
    block = panel.locator(".jp-Astro-code-run").last
    block.click()
    ran = cells(notebook).nth(2)
    ran.locator(".jp-OutputArea-output", has_text="six times seven is 42").wait_for(timeout=60_000)
    assert "print('six times seven is', 6 * 7)" in ran.locator(".jp-InputArea").inner_text()
    cells(notebook).nth(0).locator(".jp-InputPrompt").click()
    panel.locator(".jp-Astro-code-insert").last.click()
    page.wait_for_function("() => document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell').length === 4")
    assert "print('six times seven is', 6 * 7)" in cells(notebook).nth(1).locator(".jp-InputArea").inner_text()
    shot(page, "notebook-bridge-diff-and-code-block")
    assert page.astro_errors == []


def test_run_question_shows_the_replaced_code_from_the_open_notebook(page, lab, script):
    """Issue 22 item 4: after the agent replaced a cell of the open notebook, the run question quoted the old
    code from disk with its line breaks collapsed, and said the outputs "are saved into the notebook"."""
    name = f"runq-{uuid.uuid4().hex[:6]}.ipynb"
    nb = make_notebook(lab.root, name)
    notebook = open_notebook(page, lab, name)
    new_code = "flux = [1.5, 2.5]\ntotal = sum(flux)\nprint('total flux', total)"
    cell_id = nb.cells[1].id
    script.script(
        Turn.call("notebook_edit", {"path": name, "action": "replace", "cell_id": cell_id, "source": new_code},
                  id="call_nb_replace"),
        Turn.call("notebook_run", {"path": name, "cell_id": cell_id}, id="call_nb_run"),
        Turn.say("Ran the new cell."),
    )
    new_session(page)
    send(page, "sum the fluxes and run it")
    panel = page.locator(PANEL)
    panel.locator(".jp-Astro-permission").first.get_by_role("button", name="Allow", exact=True).click()
    run_question = panel.locator(".jp-Astro-permission").nth(1)
    run_question.wait_for()
    assert "notebook_run" in run_question.inner_text()
    shown = run_question.locator(".jp-Astro-question-code")
    assert shown.is_visible()
    assert shown.inner_text() == new_code  # the NEW code, line by line, read from the open document
    assert "x = 20" not in run_question.inner_text()  # not the saved file's old cell
    assert "Code that will run · 3 lines" in run_question.inner_text()
    detail = run_question.locator(".jp-Astro-question-detail").inner_text()
    assert "open document, which is not saved" in detail and "saved into the notebook" not in detail
    assert (lab.root / name).read_text().count("x = 20") == 1  # the file still holds the old code
    shot(page, "notebook-bridge-run-question-shows-new-code")
    run_question.get_by_role("button", name="Allow", exact=True).click()
    cells(notebook).nth(1).locator(".jp-OutputArea-output", has_text="total flux 4.0").wait_for(timeout=60_000)
    wait_done(page, timeout=60_000)
    assert page.astro_errors == []
