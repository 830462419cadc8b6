"""``%astro sky`` in a real ipykernel: the Aladin widget's model state, the overlay, and a selection.

The test plays the JupyterLab front end: it reads the widget's ``comm_open`` from IOPub with the
overlaid rows in its state (binary columns of positions and row numbers), tells the kernel the view
has loaded (``_is_loaded``, as ipyaladin's JS does: the rows are not sent again), then sends a
selection the way Aladin Lite's ``select`` handler does for markers (``_selected_objects`` set and
saved: positions, no data) and reads it back as rows of the original table.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

M87 = (187.70593075, 12.39112331)  # tests/data/sesame/m87.xml

SETUP = """
import numpy as np
from astropy.table import Table
rng = np.random.default_rng(7)
n = 25
t = Table({"alpha": 187.70593075 + rng.normal(0, 0.02, n), "delta": 12.39112331 + rng.normal(0, 0.02, n),
           "name": [f"src{i}" for i in range(n)], "gmag": rng.uniform(15, 21, n)})
t["alpha"].meta["ucd"] = "pos.eq.ra;meta.main"; t["delta"].meta["ucd"] = "pos.eq.dec;meta.main"
t["gmag"].unit = "mag"
"""


@pytest.fixture
def kernel(project: Path, sesame_server: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    from jupyter_client.manager import start_new_kernel

    monkeypatch.setenv("ASTRO_SESAME_URL", sesame_server.url)
    km, kc = start_new_kernel(kernel_name="python3", startup_timeout=60, cwd=str(project))
    try:
        reply = kc.execute_interactive("%load_ext astro_jupyter\n" + SETUP, timeout=60)
        assert reply["content"]["status"] == "ok"
        yield kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def _collect(kc: Any, until: Any, timeout: float = 60.0) -> list[dict[str, Any]]:
    """IOPub messages until ``until(messages)`` holds."""
    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            seen.append(kc.get_iopub_msg(timeout=0.2))
        except Exception:  # noqa: BLE001 - queue.Empty
            continue
        if until(seen):
            return seen
    raise AssertionError(f"not seen in {timeout}s: {[m['msg_type'] for m in seen]}")


def _update(kc: Any, comm_id: str, state: dict[str, Any]) -> None:
    """What the front end sends on ``model.save_changes()`` (widget protocol 2)."""
    kc.shell_channel.send(kc.session.msg("comm_msg", {"comm_id": comm_id, "data": {"method": "update", "state": state, "buffer_paths": []}}))


def _rows(comm_open: dict[str, Any]) -> dict[str, Any]:
    """The ``_astro_rows`` state of a comm_open: its binary columns (little-endian) decoded."""
    import numpy as np

    data = comm_open["content"]["data"]
    rows = dict(data["state"]["_astro_rows"])
    for path, buf in zip(data["buffer_paths"], comm_open["buffers"]):
        if path[0] == "_astro_rows":
            rows[path[1]] = np.frombuffer(bytes(buf), dtype="<f8" if path[1] in ("ra", "dec") else "<i4").tolist()
    return rows


def _settle(kc: Any) -> list[dict[str, Any]]:
    """Every IOPub message until the kernel has handled what was sent before (one more execution)."""
    msg_id = kc.execute("pass")
    return _collect(kc, lambda ms: any(m["msg_type"] == "status" and m["content"]["execution_state"] == "idle"
                                       and m["parent_header"].get("msg_id") == msg_id for m in ms))


def _run(kc: Any, code: str) -> str:
    out: list[str] = []
    reply = kc.execute_interactive(code, timeout=60, output_hook=lambda m: out.append(m["content"].get("text", "")) if m["msg_type"] == "stream" else None)
    assert reply["content"]["status"] == "ok", reply["content"]
    return "".join(out)


def test_sky_view_state_overlay_and_selection(kernel: Any) -> None:
    kernel.execute("v = %astro sky M 87 --table t\nv")
    opened = _collect(kernel, lambda ms: any(m["msg_type"] == "comm_open" and m["content"]["data"]["state"].get("_model_name") == "AnyModel" for m in ms)
                      and any(m["msg_type"] == "display_data" or m["msg_type"] == "execute_result" for m in ms))
    aladin = next(m["content"] for m in opened if m["msg_type"] == "comm_open" and m["content"]["data"]["state"].get("_model_name") == "AnyModel")
    state = aladin["data"]["state"]
    ra, dec = (float(x) for x in state["_target"].split())
    assert (ra, dec) == pytest.approx(M87)
    assert 0.05 < state["_fov"] < 1.0  # holds the 25 rows (spread ~0.02 deg), not the 60 deg default
    shown = next(m["content"]["data"] for m in opened if m["msg_type"] in ("display_data", "execute_result"))
    assert json.loads(json.dumps(shown["application/vnd.jupyter.widget-view+json"]))["model_id"] == aladin["comm_id"]

    rows = _rows(next(m for m in opened if m["msg_type"] == "comm_open" and m["content"]["comm_id"] == aladin["comm_id"]))
    positions = json.loads(_run(kernel, "import json; print(json.dumps([list(map(float, t['alpha'])), list(map(float, t['delta']))]))"))
    assert rows["row"] == list(range(25))
    assert rows["ra"] == positions[0] and rows["dec"] == positions[1]  # exact floats
    assert set(rows) == {"options", "ra", "dec", "row"}  # only what the view draws travels
    assert rows["options"] == {"name": "astro-jupyter rows", "shape": "circle", "color": "#ff9f1c"}

    _update(kernel, aladin["comm_id"], {"_is_loaded": True})  # the JS view is ready: nothing more to send
    after = _settle(kernel)
    assert not [m for m in after if m["msg_type"] == "comm_msg" and m["content"]["data"].get("method") == "custom"]

    assert _run(kernel, "print(len(v.selection))").strip() == "0"
    # what Aladin Lite reports for selected markers: their positions (no data)
    picked = [{"ra": positions[0][i], "dec": positions[1][i], "x": 10, "y": 20} for i in (4, 1)]
    forged = [{"ra": 187.0, "dec": 12.0}, {"ra": "2; import os", "dec": 1}, {"data": {"main_id": "M 87"}}, "junk"]
    _update(kernel, aladin["comm_id"], {"_selected_objects": [picked + forged]})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        out = _run(kernel, "print(json.dumps({'names': list(v.selection['name']), 'unit': str(v.selection['gmag'].unit)}))")
        if json.loads(out)["names"]:
            break
    assert json.loads(out) == {"names": ["src1", "src4"], "unit": "mag"}  # table order, units kept, forged rows ignored


def test_sky_bad_input_is_a_clear_error(kernel: Any) -> None:
    reply = kernel.execute_interactive("%astro sky NoSuchObject 12345", timeout=60)
    assert reply["content"]["status"] == "error"
    assert "not found by CDS Sesame" in reply["content"]["evalue"]
    reply = kernel.execute_interactive("import numpy as np\nbad = Table({'x': [1.0], 'y': [2.0]})\n%astro sky M 87 --table bad", timeout=60)
    assert reply["content"]["status"] == "error" and "no RA column" in reply["content"]["evalue"]
    reply = kernel.execute_interactive("%astro sky --table nope", timeout=60)
    assert reply["content"]["status"] == "error" and "no variable 'nope'" in reply["content"]["evalue"]


def _open_and_load(kc: Any, queued: str) -> tuple[str, list[dict[str, Any]]]:
    """Run the sky cell with a call on the widget before its view loads (ipyaladin queues it), play
    the front end loading the view; the comm id and the messages the kernel sends then."""
    kc.execute("v = %astro sky M 87 --table t\n" + queued + "\nv")
    opened = _collect(kc, lambda ms: any(m["msg_type"] == "comm_open" and m["content"]["data"]["state"].get("_model_name") == "AnyModel" for m in ms)
                      and any(m["msg_type"] == "status" and m["content"]["execution_state"] == "idle" for m in ms))
    comm_id = next(m["content"]["comm_id"] for m in opened if m["msg_type"] == "comm_open" and m["content"]["data"]["state"].get("_model_name") == "AnyModel")
    _update(kc, comm_id, {"_is_loaded": True})
    return comm_id, _settle(kc)


def test_running_the_sky_cell_again_sends_nothing_to_earlier_views(kernel: Any) -> None:
    """ipyaladin queues calls made before a view loads in one queue for all views and never empties
    it: each view's load re-ran every earlier view's calls (the n-th view of 10,000 rows waited for
    n-1 copies of the earlier rows). Here a view's load runs its own queued calls, once."""
    call = "from ipyaladin import Marker\nv.widget.add_markers([Marker('187.7 12.39', 'mine', '')], name='mine')"
    views = [_open_and_load(kernel, call) for _ in range(3)]
    assert len({comm_id for comm_id, _ in views}) == 3
    for comm_id, sent in views:
        adds = [m["content"]["comm_id"] for m in sent if m["msg_type"] == "comm_msg"
                and m["content"]["data"].get("content", {}).get("event_name") == "add_marker"]
        assert adds == [comm_id]  # its own queued call, once; nothing for the views before it
