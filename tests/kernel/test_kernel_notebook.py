"""kernel_inspect / kernel_run in an IPython shell: the agent sees and uses the user's namespace.

In-process shell (``load``) against the scripted LLM; the real-kernel cases (figures in the
cell, no answer → deny, the exported log replayed) are in ``test_kernel_notebook_live.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nbformat
import pytest

from tests.fakes.openai_server import Turn

SETUP = """
import numpy as np, pandas as pd
import astropy.units as u
from astropy.table import QTable
from astropy.coordinates import SkyCoord
from astropy.io import fits
arr = np.array([[1.0, np.nan], [3.0, 4.5]])
df = pd.DataFrame({"ra": [10.1, 10.2, 10.3], "mag": [18.0, None, 19.5]})
t = QTable({"ra": [10.1, 10.2] * u.deg, "flux": [1.0, 2.0] * u.mJy, "name": ["a", "b"]})
c = SkyCoord(ra=[10.68, 83.82, 201.37] * u.deg, dec=[41.27, -5.39, -43.02] * u.deg)
hdul = fits.HDUList([fits.PrimaryHDU(np.zeros((4, 5))), fits.BinTableHDU(t[["flux"]].as_array(), name="PHOT")])
"""


def _clean(ip: Any) -> None:
    for name in ("arr", "df", "t", "c", "hdul", "np", "pd", "u", "QTable", "SkyCoord", "fits", "z", "fit", "result"):
        ip.user_ns.pop(name, None)


def test_kernel_inspect_knows_astronomy_types(load) -> None:
    ip = load()
    ip.run_cell(SETUP)
    try:
        listing = ip.run_line_magic("astro", "kernel_inspect")
        rows = {r["name"]: r for r in listing.data["variables"]}
        assert rows["arr"]["summary"] == "ndarray float64 (2, 2)"
        assert rows["df"]["summary"] == "DataFrame 3×2" and rows["c"]["summary"] == "SkyCoord icrs 3 coordinates"
        assert rows["t"]["summary"] == "QTable 2 rows × 3 cols" and "np" not in rows  # modules are not variables

        arr = ip.run_line_magic("astro", "kernel_inspect name=arr").content
        assert "shape=(2, 2) dtype=float64" in arr and "min 1, max 4.5" in arr and "NaN count: 1" in arr
        df = ip.run_line_magic("astro", "kernel_inspect name=df").content
        assert "shape=(3, 2)" in df and "ra: float64, mag: float64" in df and "NaN per column: mag: 1" in df
        assert "10.3" in df  # the head
        table = ip.run_line_magic("astro", "kernel_inspect name=t").content
        assert "QTable: 2 rows" in table and "ra: float64 [deg]" in table and "flux: float64 [mJy]" in table
        coord = ip.run_line_magic("astro", "kernel_inspect name=c").content
        assert "frame=icrs" in coord and "3 coordinates" in coord and "10.68 41.27" in coord
        fits_info = ip.run_line_magic("astro", "kernel_inspect name=hdul").content
        assert "HDUList" in fits_info and "PRIMARY" in fits_info and "PHOT" in fits_info and "BinTableHDU" in fits_info
        attr = ip.run_line_magic("astro", "kernel_inspect name=t.colnames").content
        assert "['ra', 'flux', 'name']" in attr
        missing = ip.run_line_magic("astro", "kernel_inspect name=nope")
        assert missing.is_error and "no variable 'nope'" in missing.content
        sneaky = ip.run_line_magic("astro", 'kernel_inspect {"name": "t.__class__.__init__"}')
        assert sneaky.is_error and "not a variable name" in sneaky.content
        call = ip.run_line_magic("astro", 'kernel_inspect {"name": "print(1)"}')
        assert call.is_error
    finally:
        _clean(ip)


def test_inspect_does_not_import_what_the_user_did_not(load) -> None:
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from astro_jupyter.kernel.inspect import summarize, user_variables\n"
        "ns = {'x': [1, 2, 3], 'name': 'M 31'}\n"
        "print([summarize(v)[1] for _, v in user_variables(ns)])\n"
        "print(sorted(m for m in ('numpy', 'pandas', 'astropy', 'matplotlib') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[0] == str(["len 4: 'M 31'", "len 3: [1, 2, 3]"])
    assert out[1] == "[]"


def test_kernel_run_is_denied_without_an_answer(load, llm_env, monkeypatch) -> None:
    llm_env.script(Turn.call("kernel_run", {"code": "z = 42\nprint('ran')"}), Turn.say("It was refused."))

    def no_stdin(prompt: str = "") -> str:
        raise EOFError("no stdin")

    monkeypatch.setattr("builtins.input", no_stdin)
    ip = load()
    ip.user_ns.pop("z", None)
    answer = ip.run_cell_magic("astro", "", "set z")
    assert answer.reason == "finished" and answer.text == "It was refused."
    assert "z" not in ip.user_ns
    tool = [m for m in llm_env.chat_requests[-1]["messages"] if m.get("role") == "tool"][-1]
    assert "Permission denied for kernel_run" in tool["content"]


def test_kernel_run_allowed_by_a_rule_uses_the_namespace(load, llm_env, monkeypatch, capsys) -> None:
    monkeypatch.setenv("ASTRO_PERMISSION_RULES", json.dumps([{"action": "allow", "tool": "kernel_run"}]))
    llm_env.script(
        Turn.call("kernel_run", {"code": "fit = arr[1].sum()\nprint('fitted', fit)\nfit * 2"}),
        Turn.call("kernel_run", {"code": "def model(x):\n    return x / zero\nmodel(1)"}),
        Turn.say("fit is 7.5"),
    )
    ip = load()
    ip.run_cell("import numpy as np\narr = np.array([[1.0, 2.0], [3.0, 4.5]])")
    try:
        answer = ip.run_cell_magic("astro", "", "fit the second row")
        assert answer.text == "fit is 7.5"
        assert float(ip.user_ns["fit"]) == 7.5  # defined in the user's namespace
        tools = [m for m in llm_env.chat_requests[-1]["messages"] if m.get("role") == "tool"]
        assert "stdout:\nfitted 7.5" in tools[0]["content"] and "result: np.float64(15.0)" in tools[0]["content"]
        assert "NameError: name 'zero' is not defined" in tools[1]["content"]
        assert "line 2, in model" in tools[1]["content"] and "return x / zero" in tools[1]["content"]
        # the export makes the code real cells with the outputs it had
        path = ip.run_line_magic("astro", f"export {answer.session_id} -o log.ipynb")
        nb = nbformat.read(path, as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code" and c.metadata.get("astro_jupyter", {}).get("tool") == "kernel_run"]
        assert [c.source for c in code] == ["fit = arr[1].sum()\nprint('fitted', fit)\nfit * 2",
                                            "def model(x):\n    return x / zero\nmodel(1)"]
        assert code[0].outputs[0]["text"] == "fitted 7.5\n" and code[1].outputs[-1]["ename"] == "NameError"
    finally:
        _clean(ip)


def test_a_denied_kernel_run_is_not_exported_as_code(load, llm_env, monkeypatch) -> None:
    llm_env.script(Turn.call("kernel_run", {"code": "import os\nos.remove('important.fits')"}), Turn.say("ok"))
    monkeypatch.setattr("builtins.input", lambda prompt="": "n")
    ip = load()
    answer = ip.run_cell_magic("astro", "", "clean up")
    nb = nbformat.read(ip.run_line_magic("astro", f"export {answer.session_id} -o log.ipynb"), as_version=4)
    assert not any("os.remove" in c.source for c in nb.cells if c.cell_type == "code")
    assert any("kernel_run did not run" in c.source and "os.remove" in c.source for c in nb.cells if c.cell_type == "markdown")


def test_notebook_tools_work_in_a_cell(load, llm_env, monkeypatch, project: Path) -> None:
    monkeypatch.setenv("ASTRO_PERMISSION_RULES", json.dumps([{"action": "allow", "tool": "notebook_edit"}]))
    llm_env.script(
        Turn.call("notebook_edit", {"path": "fit.ipynb", "action": "insert", "source": "print('hi')"}),
        Turn.call("notebook_read", {"path": "fit.ipynb"}),
        Turn.say("done"),
    )
    ip = load()
    answer = ip.run_cell_magic("astro", "", "start a notebook")
    assert answer.reason == "finished"
    nb = nbformat.read(project / "fit.ipynb", as_version=4)
    assert [c.source for c in nb.cells] == ["print('hi')"]
    read = [m for m in llm_env.chat_requests[-1]["messages"] if m.get("role") == "tool"][-1]["content"]
    assert f"id {nb.cells[0].id}" in read
    # kernel_* exist in this registry (and only here)
    names = ip.run_line_magic("astro", "tools")
    assert {"kernel_inspect", "kernel_run", "notebook_read"} <= {r["name"] for r in names.rows}


@pytest.mark.parametrize("code,needle", [("x = (", "SyntaxError"), ("raise SystemExit(3)", "SystemExit")])
def test_kernel_run_survives_bad_code(load, monkeypatch, code: str, needle: str) -> None:
    monkeypatch.setenv("ASTRO_PERMISSION_RULES", json.dumps([{"action": "allow", "tool": "kernel_run"}]))
    ip = load()
    out = ip.run_line_magic("astro", "kernel_run " + json.dumps({"code": code}))
    assert out.is_error and needle in out.content
    assert ip.run_line_magic("astro", "kernel_run " + json.dumps({"code": "1 + 1"})).content == "result: 2"


def test_the_kernels_own_notebook_is_not_written_under_the_browser(load, llm_env, monkeypatch, project: Path) -> None:
    """jupyter_server tells the kernel its notebook (JPY_SESSION_NAME): edits and runs of it are refused."""
    import nbformat.v4 as nbf

    own = project / "session.ipynb"
    nb = nbf.new_notebook()
    nb.cells = [nbf.new_code_cell("%%astro\nadd a cell")]
    own.write_text(nbformat.writes(nb))
    before = own.read_text()
    monkeypatch.setenv("JPY_SESSION_NAME", str(own))
    monkeypatch.setenv("ASTRO_PERMISSION_RULES", json.dumps([{"action": "allow", "tool": "notebook_edit|notebook_run"}]))
    llm_env.script(
        Turn.call("notebook_edit", {"path": "session.ipynb", "action": "insert", "source": "x = 1"}),
        Turn.call("notebook_run", {"path": "session.ipynb", "cell_id": nb.cells[0].id}),
        Turn.call("notebook_read", {"path": "session.ipynb"}),
        Turn.say("I used kernel_run instead."),
    )
    ip = load()
    ip.run_cell_magic("astro", "", "add a cell")
    edit, run, read = [m["content"] for m in llm_env.chat_requests[-1]["messages"] if m.get("role") == "tool"]
    assert "the notebook this kernel belongs to" in edit and "kernel_run" in edit
    assert "the notebook this kernel belongs to" in run
    assert "add a cell" in read  # reading the saved file is fine
    assert own.read_text() == before


def test_kernel_run_with_a_broken_repr_keeps_its_output(load, monkeypatch) -> None:
    monkeypatch.setenv("ASTRO_PERMISSION_RULES", json.dumps([{"action": "allow", "tool": "kernel_run"}]))
    ip = load()
    code = "class Bad:\n    def __repr__(self):\n        raise RuntimeError('no repr')\nprint('before')\nBad()"
    out = ip.run_line_magic("astro", "kernel_run " + json.dumps({"code": code}))
    assert not out.is_error and "stdout:\nbefore" in out.content
    assert "<repr failed: RuntimeError: no repr>" in out.content
    ip.user_ns.pop("Bad", None)


@pytest.mark.slow
def test_notebook_run_kernel_lives_for_the_run(load, llm_env, monkeypatch, project: Path) -> None:
    import nbformat.v4 as nbf

    nb = nbf.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbf.new_code_cell("k = 5"), nbf.new_code_cell("k * 2")]
    (project / "other.ipynb").write_text(nbformat.writes(nb))
    monkeypatch.setenv("ASTRO_PERMISSION_RULES", json.dumps([{"action": "allow", "tool": "notebook_run"}]))
    llm_env.script(
        Turn.call("notebook_run", {"path": "other.ipynb", "cell_id": nb.cells[0].id}),
        Turn.call("notebook_run", {"path": "other.ipynb", "cell_id": nb.cells[1].id}),
        Turn.say("k*2 is 10"),
    )
    ip = load()
    ip.run_cell_magic("astro", "", "run the other notebook")
    second = [m["content"] for m in llm_env.chat_requests[-1]["messages"] if m.get("role") == "tool"][-1]
    assert "10" in second  # the same kernel ran both cells (state kept for the run)
    assert "k" not in ip.user_ns  # ... and it was not this kernel
    magics = __import__("astro_jupyter.kernel.magics", fromlist=["_loaded"])._loaded[id(ip)]

    async def clients() -> int:
        return len((await magics.rt.services()).notebooks.backend.kernels._clients)

    assert magics.rt.call(clients) == 0  # shut down when the run ended
