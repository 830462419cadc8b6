"""kernel_run in a real ipykernel (jupyter_client): the figure appears in the cell, no answer means Deny,
and the exported research log replays the code (nbclient) to the same outputs.

The test plays the frontend: it reads the cell's IOPub messages and clicks the permission
buttons (comm messages on the shell channel) while the %%astro cell runs.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

import nbformat
import pytest

from tests.fakes.openai_server import Turn

pytestmark = pytest.mark.slow

FIGURE_CODE = "import matplotlib.pyplot as plt\nfig = plt.figure()\nplt.plot([1, 4, 9])\nplt.title('light curve')\nprint('plotted')"


@pytest.fixture
def kernel(llm_env: Any, project: Path) -> Any:
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="python3", startup_timeout=60, cwd=str(project))
    try:
        setup = ("%load_ext astro_jupyter\n"  # a question waits 3 s (internal tuning, handed to the kernel's app)
                 "from astro_jupyter.agent.executor import ToolLimits\n"
                 "from astro_jupyter.services.container import Tuning\n"
                 "get_ipython().magics_manager.registry['AstroMagics'].rt.tuning = "
                 "Tuning(tools=ToolLimits(permission_timeout_secs=3.0))")
        reply = kc.execute_interactive(setup, timeout=60)
        assert reply["content"]["status"] == "ok"
        yield kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def run_cell(kc: Any, code: str, on_button: Callable[[Any, dict[str, str]], None] | None = None,
             timeout: float = 90.0) -> dict[str, Any]:
    """Execute ``code``; collect this cell's IOPub outputs; call ``on_button`` as buttons appear."""
    msg_id = kc.execute(code)
    out: dict[str, Any] = {"text": "", "displays": [], "buttons": {}, "result": None}
    deadline = time.monotonic() + timeout
    reply = None
    while time.monotonic() < deadline:
        try:
            msg = kc.get_iopub_msg(timeout=0.2)
        except Exception:  # noqa: BLE001 - queue.Empty
            msg = None
        if msg is not None and msg["parent_header"].get("msg_id") == msg_id:
            kind, content = msg["msg_type"], msg["content"]
            if kind == "stream":
                out["text"] += content["text"]
            elif kind == "display_data":
                out["displays"].append(content["data"])
            elif kind == "execute_result":
                out["result"] = content["data"]
            elif kind == "comm_open":
                state = content.get("data", {}).get("state", {})
                if state.get("_model_name") == "ButtonModel":
                    out["buttons"][state.get("description")] = content["comm_id"]
                    if on_button is not None:
                        on_button(kc, out["buttons"])
            elif kind == "status" and content["execution_state"] == "idle":
                out["idle"] = True
        if reply is not None and out.get("idle"):
            return out
        if reply is None:
            try:
                shell = kc.get_shell_msg(timeout=0.01)
            except Exception:  # noqa: BLE001
                continue
            if shell["parent_header"].get("msg_id") == msg_id:
                reply = shell["content"]
                out["reply"] = reply
    raise AssertionError(f"cell did not finish in {timeout}s: {out}")


def click(kc: Any, comm_id: str) -> None:
    msg = kc.session.msg("comm_msg", {"comm_id": comm_id, "data": {"method": "custom", "content": {"event": "click"}}})
    kc.shell_channel.send(msg)


def answer_text(kernel: Any) -> str:
    """The last %%astro answer: the cell's Out is a one-line handle whose ``.text`` holds it."""
    return run_cell(kernel, "print(_.text)")["text"]


def test_kernel_run_figure_denial_and_replayed_export(kernel: Any, llm_env: Any, project: Path) -> None:
    # 1. nobody answers: after the permission wait the call is denied and the code never ran
    llm_env.script(Turn.call("kernel_run", {"code": "secret = 1\nprint('should not run')"}), Turn.say("Refused."))
    started = time.monotonic()
    out = run_cell(kernel, "%%astro\nset a variable")
    assert out["reply"]["status"] == "ok" and "Refused." in answer_text(kernel)
    assert time.monotonic() - started < 30
    assert {"Allow", "Always allow", "Deny"} <= set(out["buttons"])
    tools = [m for m in llm_env.chat_requests[-1]["messages"] if m.get("role") == "tool"]
    assert "Permission denied for kernel_run" in tools[-1]["content"] and "no answer" in tools[-1]["content"]
    check = kernel.execute_interactive("print('secret' in globals())", timeout=30)
    assert check["content"]["status"] == "ok"

    # 2. the user clicks Allow: the code runs in the namespace and its figure is displayed in the cell
    llm_env.script(Turn.call("kernel_run", {"code": FIGURE_CODE}), Turn.say("Here is the light curve."))

    def allow(kc: Any, buttons: dict[str, str]) -> None:
        if "Allow" in buttons and not buttons.get("_clicked"):
            buttons["_clicked"] = "yes"
            click(kc, buttons["Allow"])

    out = run_cell(kernel, "%%astro\nplot the light curve", allow)
    assert out["reply"]["status"] == "ok" and "Here is the light curve." in answer_text(kernel)
    images = [d for d in out["displays"] if "image/png" in d]
    assert len(images) == 1, f"the figure was not displayed exactly once in the cell: {[list(d) for d in out['displays']]}"
    tools = [m for m in llm_env.chat_requests[-1]["messages"] if m.get("role") == "tool"]
    assert "stdout:\nplotted" in tools[-1]["content"] and "displayed in the cell: [image/png " in tools[-1]["content"]
    probe = run_cell(kernel, "print(type(fig).__name__, 'secret' in globals())")
    assert probe["text"].strip() == "Figure False"

    # 3. the exported log holds the code as a real cell and replays it
    session = out["result"]["text/plain"].split("session ")[-1].split(" ")[0]
    exported = run_cell(kernel, f"%astro export {session} -o log.ipynb")
    assert "research log written" in exported["text"], exported
    nb = nbformat.read(project / "log.ipynb", as_version=4)
    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    assert [c.source for c in code_cells] == ["%load_ext astro_jupyter", FIGURE_CODE]
    assert code_cells[1].outputs[0]["text"] == "plotted\n"

    from nbclient import NotebookClient

    replay = nbformat.read(project / "log.ipynb", as_version=4)
    NotebookClient(replay, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(project)}}).execute()
    replayed = [c for c in replay.cells if c.cell_type == "code"][1]
    assert any(o.get("output_type") == "stream" and o.get("text") == "plotted\n" for o in replayed.outputs)
    assert any("image/png" in (o.get("data") or {}) for o in replayed.outputs)


def test_kernel_inspect_in_a_real_kernel(kernel: Any, llm_env: Any) -> None:
    from tests.kernel.test_kernel_notebook import SETUP

    setup = run_cell(kernel, SETUP)
    assert setup["reply"]["status"] == "ok", setup
    llm_env.script(
        Turn.calls_(("kernel_inspect", {"name": "arr"}), ("kernel_inspect", {"name": "df"}),
                    ("kernel_inspect", {"name": "t"}), ("kernel_inspect", {"name": "c"}), ("kernel_inspect", {})),
        Turn.say("Looked."),
    )
    out = run_cell(kernel, "%%astro\nwhat data do I have?")
    assert out["reply"]["status"] == "ok" and "Looked." in answer_text(kernel)
    arr, df, table, coord, listing = [m["content"] for m in llm_env.chat_requests[-1]["messages"] if m.get("role") == "tool"]
    assert "shape=(2, 2) dtype=float64" in arr and "NaN count: 1" in arr
    assert "pandas.DataFrame shape=(3, 2)" in df and "NaN per column: mag: 1" in df
    assert "ra: float64 [deg]" in table and "flux: float64 [mJy]" in table
    assert "frame=icrs" in coord and "83.82 -5.39" in coord
    assert "DataFrame 3×2" in listing and "HDUList 2 HDUs" in listing
