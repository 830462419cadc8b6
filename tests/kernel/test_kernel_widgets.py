"""``%%astro`` in a real ipykernel: the widget timeline, the Stop button and answer buttons.

A real kernel is started with jupyter_client (env pointing at the scripted LLM), the cell
is executed, and the test plays the frontend: it reads the widgets' ``comm_open``
messages from IOPub and sends button clicks as ``comm_msg`` on the shell channel while the
cell is still running — the case that needs the subshell routing.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.openai_server import Turn
from tests.waiting import until_sync

pytestmark = pytest.mark.slow


@pytest.fixture
def kernel(llm_env: Any, project: Path) -> Any:
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="python3", startup_timeout=60, cwd=str(project))
    kc.km = km  # for interrupt_kernel()
    try:
        reply = kc.execute_interactive("%load_ext astro_jupyter", timeout=60)
        assert reply["content"]["status"] == "ok"
        yield kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def _run_until(kc: Any, msg_id: str, on_message: Any, timeout: float = 60.0) -> dict[str, Any]:
    """Feed IOPub messages of ``msg_id`` to ``on_message`` until the execute_reply arrives."""
    deadline = time.monotonic() + timeout
    outputs: dict[str, Any] = {"text": "", "buttons": {}, "html": []}
    while time.monotonic() < deadline:
        try:
            msg = kc.get_iopub_msg(timeout=0.2)
        except Exception:  # noqa: BLE001 - queue.Empty
            msg = None
        if msg is not None:
            kind, content = msg["msg_type"], msg["content"]
            if kind == "stream":
                outputs["text"] += content["text"]
            elif kind == "comm_open":
                state = content.get("data", {}).get("state", {})
                if state.get("_model_name") == "ButtonModel":
                    outputs["buttons"][state.get("description")] = content["comm_id"]
                    on_message(kc, outputs)
            elif kind == "execute_result":
                outputs["result"] = content["data"]
        try:
            reply = kc.get_shell_msg(timeout=0.01)
        except Exception:  # noqa: BLE001
            continue
        if reply["parent_header"].get("msg_id") == msg_id:
            outputs["reply"] = reply["content"]
            # drain what IOPub still holds for this cell
            end = time.monotonic() + 1.0
            while time.monotonic() < end:
                try:
                    late = kc.get_iopub_msg(timeout=0.1)
                except Exception:  # noqa: BLE001
                    break
                if late["msg_type"] == "stream":
                    outputs["text"] += late["content"]["text"]
                elif late["msg_type"] == "execute_result":
                    outputs["result"] = late["content"]["data"]
            return outputs
    raise AssertionError(f"cell did not finish in {timeout}s: {outputs}")


def wait_for_llm_request(llm: Any, count: int, timeout: float = 30.0) -> None:
    """Act only once the run is really streaming (the first run imports openai in the kernel)."""
    until_sync(lambda: len(llm.chat_requests) >= count, "the run to reach the LLM", timeout)


def click(kc: Any, comm_id: str) -> None:
    msg = kc.session.msg("comm_msg", {"comm_id": comm_id, "data": {"method": "custom", "content": {"event": "click"}}})
    kc.shell_channel.send(msg)


def test_stop_button_cancels_a_running_cell(kernel: Any, llm_env: Any) -> None:
    hold = threading.Event()  # the story never ends by itself: only Stop ends the cell
    llm_env.script(Turn.say("A very slow story. " * 40, hold=hold))
    clicked: list[bool] = []

    def on_message(kc: Any, outputs: dict[str, Any]) -> None:
        if "Stop" in outputs["buttons"] and not clicked:
            wait_for_llm_request(llm_env, 1)
            click(kc, outputs["buttons"]["Stop"])
            clicked.append(True)

    try:
        out = _run_until(kernel, kernel.execute("%%astro\nTell me a story"), on_message)
    finally:
        hold.set()
    assert clicked, "no Stop button was displayed"
    assert out["reply"]["status"] == "ok"
    assert llm_env.remaining == 0  # the slow answer was being streamed when Stop was clicked
    assert "Interrupted" not in out["text"]
    assert "cancelled" in out["result"]["text/plain"]
    # the kernel is still usable
    reply = kernel.execute_interactive("x = %astro tools\nprint(len(x))", timeout=60)
    assert reply["content"]["status"] == "ok"


def test_ask_user_buttons_answer_while_the_cell_runs(kernel: Any, llm_env: Any) -> None:
    llm_env.script(
        Turn.call("ask_user", {"question": "Which band?", "options": ["optical", "radio"]}),
        Turn.say("Radio it is."),
    )

    def on_message(kc: Any, outputs: dict[str, Any]) -> None:
        if "radio" in outputs["buttons"] and not outputs.get("answered"):
            outputs["answered"] = True
            click(kc, outputs["buttons"]["radio"])

    msg_id = kernel.execute("%%astro\nPlan an observation")
    out = _run_until(kernel, msg_id, on_message)
    assert out.get("answered"), f"no answer buttons appeared: {out['buttons']}"
    assert out["reply"]["status"] == "ok"
    # the widget showed the answer; Out[n] is only a one-line handle to it
    assert out["result"]["text/plain"].startswith("<AgentAnswer finished · session ses_")
    assert "text/markdown" not in out["result"] and "Radio it is." not in out["result"]["text/plain"]
    tool_msgs = [m for m in llm_env.chat_requests[-1]["messages"] if m.get("role") == "tool"]
    assert "radio" in tool_msgs[0]["content"]


def test_permission_buttons(kernel: Any, llm_env: Any, project: Path) -> None:
    llm_env.script(Turn.call("run_bash", {"command": "echo ok > allowed.txt"}), Turn.say("Wrote it."))

    def on_message(kc: Any, outputs: dict[str, Any]) -> None:
        if "Allow" in outputs["buttons"] and not outputs.get("answered"):
            outputs["answered"] = True
            click(kc, outputs["buttons"]["Allow"])

    out = _run_until(kernel, kernel.execute("%%astro\nmake a file"), on_message)
    assert out.get("answered") and set(out["buttons"]) >= {"Allow", "Always allow", "Deny"}
    assert (project / "allowed.txt").read_text() == "ok\n"
    assert out["result"]["text/plain"].startswith("<AgentAnswer finished")  # "Wrote it." is in the widget


def test_kernel_interrupt_cancels_cleanly(kernel: Any, llm_env: Any) -> None:
    hold = threading.Event()  # the story never ends by itself: only the interrupt ends the cell
    llm_env.script(Turn.say("A very slow story. " * 40, hold=hold))
    sent: list[bool] = []

    def on_message(kc: Any, outputs: dict[str, Any]) -> None:
        if "Stop" in outputs["buttons"] and not sent:
            wait_for_llm_request(llm_env, 1)
            kc.km.interrupt_kernel()
            sent.append(True)

    try:
        out = _run_until(kernel, kernel.execute("%%astro\nTell me a story"), on_message)
    finally:
        hold.set()
    assert sent
    assert llm_env.remaining == 0
    assert out["reply"]["status"] == "ok"  # no traceback: the magic handled the interrupt
    assert "Interrupted: the run was cancelled" in out["text"]
    llm_env.script(Turn.say("Back."))
    out = _run_until(kernel, kernel.execute("%%astro\nstill there?"), lambda kc, o: None)
    assert out["result"]["text/plain"].startswith("<AgentAnswer finished")
    history = llm_env.chat_requests[-1]["messages"]
    assert [m["role"] for m in history if m["role"] == "user"] == ["user", "user"]  # same session, both prompts


def test_the_widget_timeline_leaves_the_answer_as_a_markdown_output_in_the_saved_notebook(
        kernel: Any, llm_env: Any, project: Path) -> None:
    """Interactive JupyterLab (allow_stdin on): the timeline is a widget, and the answer is still a
    ``text/markdown`` output of the cell, so the saved file shows it (GitHub, nbconvert, an agent reading it)."""
    import nbformat
    from nbconvert import MarkdownExporter

    answer = "**M 87** is the giant elliptical at the heart of the Virgo cluster, 16.4 Mpc away."
    llm_env.script(Turn.say(answer))
    outputs: list[Any] = []

    def keep(msg: dict[str, Any]) -> None:  # what the frontend stores as the cell's outputs
        if msg["msg_type"] in ("stream", "display_data", "execute_result", "error"):
            outputs.append(nbformat.v4.output_from_msg(msg))

    reply = kernel.execute_interactive("%%astro\nWhere is M 87?", output_hook=keep, timeout=120)
    assert reply["content"]["status"] == "ok"
    widgets = [i for i, o in enumerate(outputs) if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    assert widgets, f"no widget timeline was displayed (the interactive path): {outputs}"
    markdown = [i for i, o in enumerate(outputs) if "text/markdown" in o.get("data", {})]
    assert [outputs[i]["data"]["text/markdown"] for i in markdown] == [answer]
    assert outputs[markdown[0]]["output_type"] == "display_data" and markdown[0] > widgets[0]
    assert not any(o["output_type"] == "error" for o in outputs)

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("%%astro\nWhere is M 87?")]
    nb.cells[0].outputs = outputs
    path = project / "saved.ipynb"
    nbformat.write(nb, path)
    converted, _ = MarkdownExporter().from_notebook_node(nbformat.read(path, as_version=4))
    assert answer in converted  # the answer itself, not only VBox(children=…) and <AgentAnswer …>
