"""Notebook tools in sidebar runs: through the ContentsManager + the notebook's kernel session when the
notebook is not open, through the sidebar bridge (a Python client playing the sidebar) when it is.

Real in-process Jupyter server (jp_fetch / httpx2 against its port), the scripted LLM, and a
real ipykernel for the session kernel.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import httpx2
import nbformat
import nbformat.v4 as nbf
import pytest

from astro_jupyter.agent.executor import ToolLimits
from astro_jupyter.server.sse import SsePacing
from astro_jupyter.services.container import Tuning
from tests.agent.runtime_helpers import fast
from tests.fakes.openai_server import Turn
from tests.server.conftest import Api

Answer = Callable[[dict[str, Any]], Any]


@pytest.fixture
def astro_overrides(openai_server: Any) -> dict[str, Any]:
    return {
        "openai_base_url": openai_server.url,
        "openai_api_key": "test-key",
    }


@pytest.fixture
def astro_tuning() -> Tuning:
    return fast(notebook_bridge_secs=5.0, tools=ToolLimits(permission_timeout_secs=10.0))


@pytest.fixture
def sse_pacing() -> SsePacing:
    return SsePacing(keepalive_secs=0.2)


@pytest.fixture
def sidebar(live_url: Callable[[str], str], jp_auth_header: dict[str, str]) -> Callable[..., Any]:
    """A Python client acting as the sidebar: follows a run's SSE stream and answers its requests."""

    async def follow(run_id: str, answer: Answer) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        async with httpx2.AsyncClient(timeout=60, headers=jp_auth_header) as client:
            async with client.sse(live_url(f"astro/api/runs/{run_id}/events")) as source:
                async for message in source:
                    if not message.data:
                        continue
                    event = json.loads(message.data)
                    events.append(event)
                    if event["type"] in ("permission_request", "notebook_request", "ask_user"):
                        reply = answer(event)
                        if reply is not None:
                            response = await client.post(live_url(f"astro/api/runs/{run_id}/answers"),
                                                         json={"request_id": event["request_id"], "answer": reply})
                            event["_answer_status"] = response.status_code
                    if event["type"] == "done":
                        break
        return events

    return follow


def notebook(root: Path, name: str = "analysis.ipynb") -> nbformat.NotebookNode:
    nb = nbf.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbf.new_markdown_cell("# Fit"), nbf.new_code_cell("x = 20\nx + 1")]
    (root / name).write_text(nbformat.writes(nb))
    return nb


def tool_results(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == "tool_result"]


async def test_closed_notebook_edit_and_run_through_contents_and_session(
        api: Api, sidebar: Any, openai_server: Any, jp_root_dir: Path, jp_serverapp: Any) -> None:
    nb = notebook(jp_root_dir)
    original = (jp_root_dir / "analysis.ipynb").read_text()
    openai_server.script(
        Turn.call("notebook_edit", {"path": "root_dir/analysis.ipynb", "action": "insert", "cell_id": nb.cells[1].id,
                                    "source": "y = x * 2\nprint('y is', y)"}),
        Turn.call("notebook_run", {"path": "root_dir/analysis.ipynb", "cell_id": nb.cells[1].id}),
        Turn.say("Inserted and ran."),
    )
    asked: list[dict[str, Any]] = []

    def answer(event: dict[str, Any]) -> Any:
        asked.append(event)
        assert event["type"] == "permission_request"  # no bridge: nothing is sent to the client
        return "allow"

    status, started = await api("POST", "astro/api/runs", body={"prompt": "add a cell"})
    assert status == 201
    events = await sidebar(started["run_id"], answer)
    assert [e["name"] for e in asked] == ["notebook_edit", "notebook_run"]
    assert asked[0]["scope"].endswith("analysis.ipynb")
    edit, run = tool_results(events)
    assert not edit["is_error"], edit["output"]
    assert edit["metadata"]["via"] == "contents" and edit["metadata"]["index"] == 2
    new_id = edit["metadata"]["cell_id"]
    assert new_id in edit["output"]
    # changed through the ContentsManager: valid nbformat, the checkpoint holds the version before the run
    stored = nbformat.read(jp_root_dir / "analysis.ipynb", as_version=4)
    nbformat.validate(stored)
    assert [c.source for c in stored.cells][-1] == "y = x * 2\nprint('y is', y)"
    status, checkpoints = await api("GET", "api/contents/analysis.ipynb/checkpoints")
    assert status == 200 and len(checkpoints) == 1
    checkpoint_file = jp_root_dir / ".ipynb_checkpoints" / "analysis-checkpoint.ipynb"
    assert checkpoint_file.read_text() == original
    # the run happened on the notebook's kernel session
    assert not run["is_error"] and run["metadata"]["via"] == "contents" and "21" in run["output"]
    status, sessions = await api("GET", "api/sessions")
    assert [s["path"] for s in sessions] == ["analysis.ipynb"]
    kernel_id = sessions[0]["kernel"]["id"]
    stored = nbformat.read(jp_root_dir / "analysis.ipynb", as_version=4)
    assert stored.cells[1].outputs[0]["data"]["text/plain"] == "21" and stored.cells[1].execution_count
    # the kernel stays the notebook's: x is defined there for the user
    km = jp_serverapp.kernel_manager.get_kernel(kernel_id)
    kc = km.client()
    kc.start_channels()
    try:
        await kc.wait_for_ready(timeout=30)
        reply = await kc.execute_interactive("assert x == 20", timeout=30)
        assert reply["content"]["status"] == "ok"
    finally:
        kc.stop_channels()
    await jp_serverapp.session_manager.delete_session(sessions[0]["id"])


async def test_denied_edit_leaves_the_notebook_untouched(api: Api, sidebar: Any, openai_server: Any, jp_root_dir: Path) -> None:
    nb = notebook(jp_root_dir)
    before = (jp_root_dir / "analysis.ipynb").read_text()
    openai_server.script(
        Turn.call("notebook_edit", {"path": "root_dir/analysis.ipynb", "action": "delete", "cell_id": nb.cells[0].id}),
        Turn.say("Left it alone."),
    )
    status, started = await api("POST", "astro/api/runs", body={
        "prompt": "delete the title", "notebook": {"path": "analysis.ipynb", "bridge": True}})
    events = await sidebar(started["run_id"], lambda e: "deny")
    [result] = tool_results(events)
    assert result["is_error"] and "Permission denied" in result["output"]
    assert not [e for e in events if e["type"] == "notebook_request"]  # denied before anything was asked of the sidebar
    assert (jp_root_dir / "analysis.ipynb").read_text() == before
    assert not (jp_root_dir / ".ipynb_checkpoints").exists()


async def test_open_notebook_goes_through_the_sidebar_bridge(
        api: Api, sidebar: Any, openai_server: Any, jp_root_dir: Path, astro_service: Any) -> None:
    nb = notebook(jp_root_dir)
    before = (jp_root_dir / "analysis.ipynb").read_text()
    notebook(jp_root_dir, "other.ipynb")
    open_doc = nbformat.read(jp_root_dir / "analysis.ipynb", as_version=4)
    open_doc.cells.append(nbf.new_code_cell("unsaved = True"))  # the open document has unsaved work
    ran_cell = nbf.new_code_cell("x + 1", execution_count=5)
    ran_cell.outputs = [nbf.new_output("execute_result", data={"text/plain": "21"}, execution_count=5)]
    openai_server.script(
        Turn.call("notebook_read", {"path": "root_dir/analysis.ipynb"}),
        Turn.call("notebook_edit", {"path": "root_dir/analysis.ipynb", "action": "insert", "index": 1, "source": "z = 3"}),
        Turn.call("notebook_run", {"path": "root_dir/analysis.ipynb", "cell_id": nb.cells[1].id}),
        Turn.call("notebook_edit", {"path": "root_dir/other.ipynb", "action": "insert", "source": "w = 1"}),
        Turn.say("Done in the open notebook."),
    )
    requests: list[dict[str, Any]] = []

    def answer(event: dict[str, Any]) -> Any:
        if event["type"] == "permission_request":
            return "always"  # "Allow for this notebook"
        requests.append(event)
        if event["path"] != "analysis.ipynb":
            return {"status": "not_open"}
        if event["action"] == "read":
            return {"status": "ok", "notebook": open_doc}
        if event["action"] == "edit":
            assert event["arguments"] == {"action": "insert", "index": 1, "source": "z = 3"}
            return {"status": "ok", "cell_id": "abc-123", "index": 1, "cell_type": "code"}
        return {"status": "ok", "cell": ran_cell, "index": 1, "cells": 4}

    status, started = await api("POST", "astro/api/runs", body={
        "prompt": "fix this cell", "notebook": {"path": "analysis.ipynb", "cell_ids": [nb.cells[1].id], "bridge": True}})
    assert status == 201
    events = await sidebar(started["run_id"], answer)
    # the model was told which notebook and cells the user means
    first = openai_server.chat_requests[0]["messages"][-1]["content"]
    assert first.startswith("fix this cell") and "root_dir/analysis.ipynb open in JupyterLab" in first
    assert nb.cells[1].id in first
    # what the user typed is stored apart from that note: a reopened session's bubble shows the words only
    status, stored = await api("GET", f"astro/api/sessions/{started['session_id']}/messages")
    prompt = next(m for m in stored["messages"] if m["role"] == "user")
    assert prompt["content"] == "fix this cell" and "open in JupyterLab" in prompt["metadata"]["context"]
    # (the run's question first reads the cell from the open document: what it shows is what runs)
    assert [(r["action"], r["path"]) for r in requests] == [
        ("read", "analysis.ipynb"), ("edit", "analysis.ipynb"), ("read", "analysis.ipynb"), ("run", "analysis.ipynb"),
        ("edit", "other.ipynb")]
    assert all(r["tool_call_id"] for r in requests)
    assert [r["timeout_secs"] for r in requests] == [5.0, 5.0, 5.0, 605.0, 5.0]  # a run waits for the cell too
    read, edit, run, other = tool_results(events)
    assert read["metadata"]["via"] == "sidebar" and "unsaved = True" in read["output"]  # the open document, not the file
    assert edit["metadata"]["via"] == "sidebar" and edit["metadata"]["cell_id"] == "abc-123"
    assert "can undo it" in edit["output"]
    assert run["metadata"]["via"] == "sidebar" and "21" in run["output"]
    assert (jp_root_dir / "analysis.ipynb").read_text() == before  # the file under the open notebook is untouched
    assert other["metadata"]["via"] == "contents"  # not open in the sidebar: the server saved it
    assert [c.source for c in nbformat.read(jp_root_dir / "other.ipynb", as_version=4).cells][-1] == "w = 1"
    asked = [e["name"] for e in events if e["type"] == "permission_request"]
    assert asked == ["notebook_edit", "notebook_run", "notebook_edit"]  # "always" held for analysis.ipynb only


class TestABridgeThatFails:
    """The sidebar's bridge answers badly or not at all (a short wait: the tuning the host is started with)."""

    @pytest.fixture
    def astro_tuning(self) -> Tuning:
        return fast(notebook_bridge_secs=0.5, tools=ToolLimits(permission_timeout_secs=10.0))

    async def test_bridge_failures_are_clear_and_touch_nothing(
            self, api: Api, sidebar: Any, openai_server: Any, jp_root_dir: Path) -> None:
        notebook(jp_root_dir)
        before = (jp_root_dir / "analysis.ipynb").read_text()
        openai_server.script(
            Turn.call("notebook_edit", {"path": "root_dir/analysis.ipynb", "action": "insert", "source": "a"}),
            Turn.call("notebook_edit", {"path": "root_dir/analysis.ipynb", "action": "insert", "source": "b"}),
            Turn.call("notebook_edit", {"path": "root_dir/analysis.ipynb", "action": "insert", "source": "c"}),
            Turn.call("notebook_read", {"path": "root_dir/analysis.ipynb"}),
            Turn.say("Gave up."),
        )
        replies = iter([{"status": "error", "message": "the document is read-only"}, "not an object", None,
                        {"status": "ok", "notebook": {"cells": "nope"}}])

        def answer(event: dict[str, Any]) -> Any:
            return "allow" if event["type"] == "permission_request" else next(replies)

        status, started = await api("POST", "astro/api/runs", body={
            "prompt": "edit", "notebook": {"path": "analysis.ipynb", "bridge": True}})
        events = await sidebar(started["run_id"], answer)
        refused, garbage, silent, bad_read = tool_results(events)
        assert refused["is_error"] and "could not edit in analysis.ipynb: the document is read-only" in refused["output"]
        assert garbage["is_error"] and "not" in garbage["output"] and "status" in garbage["output"]
        assert silent["is_error"] and "did not answer within 0.5 s" in silent["output"]
        assert bad_read["is_error"] and "the sidebar sent an invalid notebook for analysis.ipynb" in bad_read["output"]
        assert (jp_root_dir / "analysis.ipynb").read_text() == before


@pytest.mark.parametrize("context,reason", [
    ("analysis.ipynb", "invalid_notebook"),
    ({"path": "../etc/x.ipynb"}, "invalid_notebook"),
    ({"path": "a.txt"}, "invalid_notebook"),
    ({"path": "a.ipynb", "cell_ids": ["ok", "../bad"]}, "invalid_notebook"),
    ({"path": "a.ipynb", "bridge": "yes"}, "invalid_notebook"),
    ({"path": "a\u2028b.ipynb"}, "invalid_notebook"),
    ({"bridge": "yes"}, "invalid_notebook"),
    ({"cell_ids": ["a1"], "bridge": True}, "invalid_notebook"),
])
async def test_bad_notebook_context_is_refused(api: Api, context: Any, reason: str) -> None:
    status, err = await api("POST", "astro/api/runs", body={"prompt": "hi", "notebook": context})
    assert status == 400 and err["reason"] == reason


async def test_a_subagent_of_a_sidebar_run_uses_the_bridge_too(
        api: Api, sidebar: Any, openai_server: Any, jp_root_dir: Path) -> None:
    notebook(jp_root_dir)
    open_doc = nbformat.read(jp_root_dir / "analysis.ipynb", as_version=4)
    open_doc.cells.append(nbf.new_code_cell("only_in_the_browser = 1"))
    openai_server.script(
        Turn.call("subagent", {"task": "summarise the open notebook"}),
        Turn.call("notebook_read", {"path": "root_dir/analysis.ipynb"}),
        Turn.say("It sets only_in_the_browser."),
        Turn.say("Summary received."),
    )
    seen: list[dict[str, Any]] = []

    def answer(event: dict[str, Any]) -> Any:
        seen.append(event)
        return {"status": "ok", "notebook": open_doc}

    status, started = await api("POST", "astro/api/runs", body={
        "prompt": "summarise", "notebook": {"path": "analysis.ipynb", "bridge": True}})
    events = await sidebar(started["run_id"], answer)
    assert [e["type"] for e in seen] == ["notebook_request"] and seen[0]["subagent_id"]
    read = next(e for e in tool_results(events) if e["name"] == "notebook_read")
    assert read["subagent_id"] == seen[0]["subagent_id"] and "only_in_the_browser" in read["output"]
    assert events[-1]["reason"] == "finished"


async def test_bridge_without_an_active_notebook_still_asks_the_sidebar(
        api: Api, sidebar: Any, openai_server: Any, jp_root_dir: Path) -> None:
    """The user dropped the "active notebook" chip: no notebook is named to the model, but a notebook the
    agent edits that is open in the sidebar still goes through the open document, never the file under it."""
    notebook(jp_root_dir)
    before = (jp_root_dir / "analysis.ipynb").read_text()
    openai_server.script(
        Turn.call("notebook_edit", {"path": "root_dir/analysis.ipynb", "action": "insert", "source": "z = 3"}),
        Turn.say("Inserted."),
    )
    seen: list[dict[str, Any]] = []

    def answer(event: dict[str, Any]) -> Any:
        if event["type"] == "permission_request":
            return "allow"
        seen.append(event)
        return {"status": "ok", "cell_id": "new-1", "index": 2, "cell_type": "code"}

    status, started = await api("POST", "astro/api/runs", body={"prompt": "add z", "notebook": {"bridge": True}})
    assert status == 201
    events = await sidebar(started["run_id"], answer)
    assert openai_server.chat_requests[0]["messages"][-1]["content"] == "add z"  # no notebook note
    assert [(e["action"], e["path"]) for e in seen] == [("edit", "analysis.ipynb")]
    [edit] = tool_results(events)
    assert edit["metadata"]["via"] == "sidebar" and edit["metadata"]["cell_id"] == "new-1"
    assert (jp_root_dir / "analysis.ipynb").read_text() == before


def _open_doc_sidebar(open_doc: nbformat.NotebookNode, log: list[dict[str, Any]],
                      on_permission: Callable[[dict[str, Any]], None] = lambda e: None) -> Answer:
    """A sidebar that keeps ``open_doc`` as its open document and follows the bridge protocol, including
    ``expected_source`` on a run (it answers ``changed`` and runs nothing when the cell differs)."""

    def answer(event: dict[str, Any]) -> Any:
        log.append(event)
        if event["type"] == "permission_request":
            on_permission(event)
            return "allow"
        args = event["arguments"]
        if event["action"] == "read":
            return {"status": "ok", "notebook": open_doc}
        ids = [c.id for c in open_doc.cells]
        if event["action"] == "edit" and args["action"] == "insert":
            cell = nbf.new_code_cell(args["source"])
            open_doc.cells.append(cell)
            return {"status": "ok", "cell_id": cell.id, "index": len(open_doc.cells) - 1, "cell_type": "code"}
        if event["action"] == "edit":
            cell = open_doc.cells[ids.index(args["cell_id"])]
            old, cell.source = cell.source, args["source"]
            return {"status": "ok", "cell_id": cell.id, "index": ids.index(cell.id), "cell_type": "code",
                    "old_source": old}
        cell = open_doc.cells[ids.index(args["cell_id"])]
        if "expected_source" in args and cell.source != args["expected_source"]:
            return {"status": "changed", "source": cell.source}
        ran = nbf.new_code_cell(cell.source, execution_count=1)
        ran.outputs = [nbf.new_output("stream", name="stdout", text="ran\n")]
        return {"status": "ok", "cell": ran, "index": ids.index(cell.id), "cells": len(open_doc.cells)}

    return answer


async def test_run_question_shows_the_open_documents_code_with_its_line_breaks(
        api: Api, sidebar: Any, openai_server: Any, jp_root_dir: Path) -> None:
    """Issue 22 item 4: after a replace in the open notebook the question quoted the old code from disk (line
    breaks collapsed), for a just-inserted cell only its id, and said outputs "are saved into the notebook"."""
    nb = notebook(jp_root_dir)
    open_doc = nbformat.read(jp_root_dir / "analysis.ipynb", as_version=4)
    new_code = "import numpy as np\nflux = np.ones(3)\nprint(flux.sum())"
    inserted = "for band in 'ugriz':\n    print(band)"
    cell_id = nb.cells[1].id
    openai_server.script(
        Turn.call("notebook_edit", {"path": "root_dir/analysis.ipynb", "action": "replace", "cell_id": cell_id,
                                    "source": new_code}),
        Turn.call("notebook_run", {"path": "root_dir/analysis.ipynb", "cell_id": cell_id}),
        Turn.call("notebook_edit", {"path": "root_dir/analysis.ipynb", "action": "insert", "source": inserted}),
    )

    def respond(body: dict[str, Any]) -> Turn:  # then run the cell the insert answered with
        results = [m for m in body["messages"] if m.get("role") == "tool"]
        if len(results) == 3:
            new_id = results[-1]["content"].split("code cell ")[1].split(" ")[0]
            return Turn.call("notebook_run", {"path": "root_dir/analysis.ipynb", "cell_id": new_id})
        return Turn.say("Done.")

    openai_server.respond_with(respond)

    log: list[dict[str, Any]] = []
    status, started = await api("POST", "astro/api/runs", body={
        "prompt": "fix and run", "notebook": {"path": "analysis.ipynb", "bridge": True}})
    assert status == 201
    events = await sidebar(started["run_id"], _open_doc_sidebar(open_doc, log))
    questions = [e for e in events if e["type"] == "permission_request" and e["name"] == "notebook_run"]
    assert len(questions) == 2
    replaced, fresh = questions
    assert replaced["code"] == new_code and "\n" in replaced["code"]  # the new code, its real line breaks
    assert "x = 20" not in replaced["code"] + replaced["message"]  # not the file's old code
    assert fresh["code"] == inserted  # a just-inserted cell: its code, not only an id
    for q in questions:
        assert "open in JupyterLab" in q["message"] and "not saved" in q["message"]
        assert "saved into the notebook" not in q["message"] and "saved into the file" not in q["message"]
    runs = [e for e in log if e["type"] == "notebook_request" and e["action"] == "run"]
    assert [r["arguments"]["expected_source"] for r in runs] == [new_code, inserted]
    results = [e for e in tool_results(events) if e["name"] == "notebook_run"]
    assert all(not r["is_error"] and "ran" in r["output"] for r in results), results


async def test_a_cell_changed_after_the_question_does_not_run(
        api: Api, sidebar: Any, openai_server: Any, jp_root_dir: Path) -> None:
    """Between the question and the run the cell changes: in the open document (the sidebar answers
    'changed') and in a closed notebook's file (the server's runner checks): neither runs, the model is told."""
    nb = notebook(jp_root_dir)
    notebook(jp_root_dir, "closed.ipynb")
    closed = nbformat.read(jp_root_dir / "closed.ipynb", as_version=4)
    open_doc = nbformat.read(jp_root_dir / "analysis.ipynb", as_version=4)
    openai_server.script(
        Turn.call("notebook_run", {"path": "root_dir/analysis.ipynb", "cell_id": nb.cells[1].id}),
        Turn.call("notebook_run", {"path": "root_dir/closed.ipynb", "cell_id": closed.cells[1].id}),
        Turn.say("Nothing ran."),
    )
    log: list[dict[str, Any]] = []

    def swap(event: dict[str, Any]) -> None:  # after the question was put, before it is answered
        if "analysis" in event["scope"]:
            open_doc.cells[1].source = "import os; os.remove('data.fits')"
        else:
            changed = nbformat.read(jp_root_dir / "closed.ipynb", as_version=4)
            changed.cells[1].source = "open('pwned', 'w').write('x')"
            nbformat.write(changed, jp_root_dir / "closed.ipynb")

    def answer(event: dict[str, Any]) -> Any:
        if event["type"] == "notebook_request" and event["path"] == "closed.ipynb":
            return {"status": "not_open"}
        return _open_doc_sidebar(open_doc, log, swap)(event)

    status, started = await api("POST", "astro/api/runs", body={
        "prompt": "run them", "notebook": {"path": "analysis.ipynb", "bridge": True}})
    events = await sidebar(started["run_id"], answer)
    asked = [e for e in events if e["type"] == "permission_request"]
    assert [q["code"] for q in asked] == ["x = 20\nx + 1", "x = 20\nx + 1"]
    in_open, in_file = tool_results(events)
    for result in (in_open, in_file):
        assert result["is_error"] and "was not run: it changed after the user was asked" in result["output"], result
        assert "Call notebook_run again" in result["output"]
    assert not (jp_root_dir / "pwned").exists()
    stored = nbformat.read(jp_root_dir / "closed.ipynb", as_version=4)
    assert not stored.cells[1].outputs and stored.cells[1].execution_count is None
