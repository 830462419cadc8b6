"""The sky view in JupyterLab (issue 25): ``%astro sky`` renders an Aladin Lite view with 10,000
overlaid rows, a selection drawn in it comes back to Python, and the sidebar's "Show on sky"
inserts and runs the cell: under a resolved target, and under a catalog result (a cone_search on the
lab's TAP service ``local``, a real GAVO DaCHS: ``tap`` in conftest.py), whose rows the view overlays.

ipyaladin's front end imports Aladin Lite from ``https://esm.sh`` (no network here): the page
routes that URL to the npm package ``aladin-lite`` (``.ci/run`` fetches it), wrapped so the test
can see the Aladin instance and its catalogs. Survey images cannot load offline; the catalog
layer draws without them. The time from running the cell to all 10,000 rows in the view is
written to ``test-artifacts/ui/sky_render.json`` and printed (a figure, not an assertion).
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

import nbformat
import nbformat.v4 as nbf
import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tests.fakes.openai_server import Turn

from .conftest import ARTIFACTS, PANEL, document_panel, new_session, open_panel, send, shot, wait_done

ALADIN_JS = Path(os.environ.get("ASTRO_UI_ALADIN_JS", Path.home() / ".cache/astro-jupyter-ui/aladin-lite/package/dist/aladin.js"))
ROWS = 10_000
WRAPPER = """
import A from "https://esm.sh/astro-ui-test/aladin-lite-real.js";
window.__astroAladins = window.__astroAladins || [];
const make = A.aladin;
A.aladin = function (...args) { const al = make.apply(this, args); window.__astroAladins.push(al); return al; };
export default A;
"""
SETUP = f"""%load_ext astro_jupyter
import numpy as np
from astropy.table import Table
rng = np.random.default_rng(3)
t = Table({{"RAJ2000": 187.70593 + rng.uniform(-0.1, 0.1, {ROWS}), "DEJ2000": 12.39112 + rng.uniform(-0.1, 0.1, {ROWS}),
           "id": np.arange({ROWS})}})
_ = %astro tools"""


def _grey_png(size: int = 512) -> bytes:
    """One grey HiPS tile (PNG written by hand: zlib + CRCs)."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    rows = b"".join(b"\x00" + b"\x40\x40\x48" * size for _ in range(size))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


HIPS_PROPERTIES = "\n".join([
    "creator_did = ivo://CDS/P/DSS2/color", "obs_title = DSS2 colour (grey offline test tiles)", "dataproduct_type = image",
    "hips_version = 1.4", "hips_order = 3", "hips_order_min = 0", "hips_tile_width = 512", "hips_tile_format = png",
    "hips_frame = equatorial", "hips_initial_fov = 60", "",
])


def route_hips(page: Any) -> None:
    """CDS's HiPS services answered in the browser (no network here): the MocServer record of the
    default survey, its properties, grey tiles. Without them Aladin Lite's start fails offline."""
    tile = _grey_png()
    record = [{"ID": "CDS/P/DSS2/color", "obs_title": "DSS2 colour (offline)", "dataproduct_type": "image",
               "hips_service_url": "https://alasky.unistra.fr/DSS/DSSColor", "hips_order": "3", "hips_tile_width": "512",
               "hips_tile_format": "png", "hips_frame": "equatorial", "hips_version": "1.4"}]

    def serve(route: Any) -> None:
        url = route.request.url
        cors = {"Access-Control-Allow-Origin": "*"}
        if "/MocServer/" in url:
            route.fulfill(status=200, content_type="application/json", body=json.dumps(record), headers=cors)
        elif url.rstrip("/").endswith("/properties") or "/properties?" in url:
            route.fulfill(status=200, content_type="text/plain", body=HIPS_PROPERTIES, headers=cors)
        elif "/Allsky." in url:
            # No all-sky mosaic offline: a single tile served as Norder3/Allsky.png made Aladin Lite's
            # WebAssembly panic (index out of bounds in handle_allsky_file: the "unreachable" trap, with
            # anywidget's "Failed to initialize model"); without one it loads the tiles themselves.
            route.fulfill(status=404, body="", headers=cors)
        elif url.split("?")[0].endswith(".png"):
            route.fulfill(status=200, content_type="image/png", body=tile, headers=cors)
        else:
            route.fulfill(status=404, body="", headers=cors)

    page.route(re.compile(r"^https://alasky[^/]*\.unistra\.fr/"), serve)


def route_aladin(page: Any) -> None:
    route_hips(page)
    if not ALADIN_JS.exists():
        pytest.skip(f"Aladin Lite is not at {ALADIN_JS} (.ci/run: npm pack aladin-lite; or set ASTRO_UI_ALADIN_JS)")
    real = ALADIN_JS.read_bytes()

    def serve(route: Any) -> None:
        body = real if "aladin-lite-real" in route.request.url else WRAPPER.encode()
        route.fulfill(status=200, content_type="application/javascript", body=body,
                      headers={"Access-Control-Allow-Origin": "*"})

    page.route("https://esm.sh/**", serve)


def open_notebook(page: Any, lab: Any, name: str, cells: list[str]) -> Any:
    nb = nbf.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbf.new_code_cell(src) for src in cells]
    (lab.root / name).write_text(nbformat.writes(nb))
    page.goto(f"{lab.url}/lab/tree/{name}?token={lab.token}")
    open_panel(page)
    notebook = document_panel(page, name)
    notebook.locator(".jp-Cell").nth(len(cells) - 1).wait_for()
    notebook.locator('.jp-Notebook-ExecutionIndicator[data-status="idle"]').wait_for(timeout=60_000)
    return notebook


def run_cell(page: Any, notebook: Any, index: int, attempts: int = 3) -> None:
    """Run cell ``index`` as a user does (select it, Shift+Enter) and see that it started.

    The keypress goes wherever focus is: in CI the Astro panel, opening, focused its prompt after the
    cell was clicked, so Shift+Enter landed in the chat box and the cell never ran (a 120 s timeout).
    So the press waits until the notebook holds focus with this cell active, and is repeated when the
    cell's prompt does not change (``[ ]`` or ``[n]`` to ``[*]`` or ``[n+1]``) within 5 s.
    """
    cell = notebook.locator(".jp-Cell").nth(index)
    prompt = cell.locator(".jp-InputPrompt")
    for _ in range(attempts):
        before = prompt.text_content()
        prompt.click()
        page.wait_for_function(
            "cell => cell.classList.contains('jp-mod-active') && cell.closest('.jp-Notebook').contains(document.activeElement)",
            arg=cell.element_handle(), timeout=10_000)
        page.keyboard.press("Shift+Enter")
        try:
            page.wait_for_function("([el, before]) => el.textContent !== before",
                                   arg=[prompt.element_handle(), before], timeout=5_000)
            return
        except PlaywrightTimeout:
            continue
    raise AssertionError(f"cell {index} did not start after {attempts} presses of Shift+Enter (prompt {prompt.text_content()!r})")


# Two page errors that are not ours, seen in CI:
# - anywidget gives a model's front-end module 2 s to load (``AbortSignal.timeout(2000)`` in its
#   runtime), then rejects with INIT_TIMEOUT and the view never draws. The first view imports Aladin
#   Lite (2.6 MB of JS and WebAssembly); on a loaded 2-core machine that can take longer. The module
#   is in the page's cache afterwards, so the cell is run once more (recorded in the figure).
# - Aladin Lite's WebAssembly panics ("unreachable") when a HiPS answer has the wrong shape: it was our
#   offline Allsky.png (see route_hips), so it now fails the test at once, named.
INIT_TIMEOUT = "[anywidget] Failed to initialize model."
WASM_TRAP = "unreachable"


class WidgetInitTimeout(Exception):
    """anywidget gave up loading the view's module after 2 s (INIT_TIMEOUT alone)."""


def render_ms(page: Any, notebook: Any, index: int, deadline_s: float = 60.0) -> float:
    """Run the sky cell; milliseconds until a new Aladin view holds all rows and has drawn a frame."""
    views = int(page.evaluate("() => (window.__astroAladins || []).length"))
    seen = len(page.astro_errors)
    started = page.evaluate("() => performance.now()")
    run_cell(page, notebook, index)
    end = time.monotonic() + deadline_s
    while True:
        try:  # short waits, so a page error is noticed at once rather than after the deadline
            page.wait_for_function(
                f"""() => (window.__astroAladins || []).slice({views}).some(al =>
                      (al.view.catalogs || []).some(c => c.name === 'astro-jupyter rows' && c.getSources().length === {ROWS}))""",
                timeout=1_000,
            )
            break
        except PlaywrightTimeout:
            errors = page.astro_errors[seen:]
            if WASM_TRAP in errors:
                raise AssertionError(f"Aladin Lite's WebAssembly trapped: {errors}") from None
            if errors and set(errors) == {INIT_TIMEOUT}:
                raise WidgetInitTimeout(float(page.evaluate("() => performance.now()")) - started) from None
            if errors:
                raise AssertionError(f"the sky view failed in the page: {errors}") from None
            if time.monotonic() > end:
                raise
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")  # drawn
    return float(page.evaluate("() => performance.now()")) - started


def test_sky_view_renders_10k_rows_and_the_selection_returns(page: Any, lab: Any) -> None:
    route_aladin(page)
    name = "sky.ipynb"
    cells = [SETUP, "v = %astro sky M 87 --table t\nv", "v.widget.selection('rectangle')",
             "print('selected', len(v.selection), sorted(set(v.selection.colnames)))"]
    notebook = open_notebook(page, lab, name, cells)
    run_cell(page, notebook, 0)
    page.wait_for_function("() => /\\[\\d+\\]/.test(document.querySelector('.jp-Cell:nth-child(1) .jp-InputPrompt')?.textContent || '')",
                           timeout=120_000)
    init_timeouts: list[float] = []
    try:
        first = render_ms(page, notebook, 1)  # the first view loads Aladin Lite
    except WidgetInitTimeout as exc:  # once: see INIT_TIMEOUT
        init_timeouts.append(exc.args[0])
        page.astro_errors.remove(INIT_TIMEOUT)  # type: ignore[attr-defined]
        first = render_ms(page, notebook, 1)
    timings = [first, render_ms(page, notebook, 1)]  # then the same cell again
    assert page.astro_errors == []  # type: ignore[attr-defined]
    view = notebook.locator(".jp-Cell").nth(1).locator(".aladin-widget")
    assert view.is_visible() and view.locator("canvas").count() >= 1
    figure = {"rows": ROWS, "first_view_ms": round(timings[0]), "next_view_ms": round(timings[1]), "target_ms": 2000,
              "anywidget_init_timeouts_ms": [round(t) for t in init_timeouts], "load_avg": [round(x, 2) for x in os.getloadavg()]}
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "sky_render.json").write_text(json.dumps(figure))
    print(f"\n%astro sky with {ROWS} rows, cell run to rendered view: first view in the page {timings[0]:.0f} ms "
          f"(loads Aladin Lite), next {timings[1]:.0f} ms (target 2000 ms); load {figure['load_avg']}"
          + (f"; anywidget's 2 s module-load limit hit first, after {init_timeouts[0]:.0f} ms: the cell ran again" if init_timeouts else ""))
    shot(page, "sky-10k")

    # the user draws a rectangle over the middle of the field: those rows come back as a Table
    run_cell(page, notebook, 2)
    page.wait_for_timeout(300)
    box = view.bounding_box()
    cx, cy = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(cx - 40, cy - 40)
    page.mouse.down()
    page.mouse.move(cx, cy, steps=5)
    page.mouse.move(cx + 40, cy + 40, steps=5)
    page.mouse.up()
    deadline = time.monotonic() + 30
    text = ""
    while time.monotonic() < deadline:
        run_cell(page, notebook, 3)
        page.wait_for_timeout(700)
        text = notebook.locator(".jp-Cell").nth(3).locator(".jp-OutputArea-output").inner_text()
        if text.startswith("selected ") and not text.startswith("selected 0 "):
            break
    count = int(text.split()[1])
    assert 0 < count < ROWS, text
    assert "['DEJ2000', 'RAJ2000', 'id']" in text  # rows of the original table, not Aladin's copies


def test_show_on_sky_inserts_and_runs_the_cell(page: Any, lab: Any, script: Any) -> None:
    route_aladin(page)
    name = "show-on-sky.ipynb"
    notebook = open_notebook(page, lab, name, ["x = 1"])
    new_session(page)
    script.script(Turn.call("query_target", {"name": "M 87"}), Turn.say("M 87 is at RA 187.706, Dec +12.391."))
    send(page, "Where is M 87?")
    wait_done(page)
    button = page.locator(f"{PANEL} .jp-Astro-sky")
    button.wait_for()
    assert button.inner_text() == "Show on sky"
    button.click()
    inserted = notebook.locator(".jp-Cell").nth(1)
    inserted.locator(".jp-InputArea").wait_for()
    assert inserted.locator(".jp-InputArea .cm-content").inner_text() == '%load_ext astro_jupyter\n%astro sky "M 87"'
    inserted.locator(".aladin-widget canvas").first.wait_for(timeout=60_000)
    assert notebook.locator(".jp-Cell").count() == 2
    first_prompt = notebook.locator(".jp-Cell").nth(0).locator(".jp-InputPrompt").inner_text()
    assert "[ ]" in first_prompt or first_prompt.strip() in ("[ ]:", "")  # the other cell did not run
    shot(page, "show-on-sky")


def test_show_on_sky_under_a_catalog_result_overlays_its_rows(page: Any, lab: Any, script: Any, tap: Any) -> None:
    route_aladin(page)
    notebook = open_notebook(page, lab, "show-catalog-on-sky.ipynb", ["x = 1"])
    new_session(page)
    cone = {"target": "M 87", "radius": "3 arcmin", "catalog": "astrojup.stars", "service": "local"}
    script.script(Turn.call("cone_search", cone), Turn.say("12 stars within 3 arcmin of M 87."))
    send(page, "Which stars are near M 87?")
    wait_done(page, timeout=120_000)
    tool = page.locator(f'{PANEL} [data-tool-call-id]').filter(has=page.locator(".jp-Astro-sky"))
    button = tool.locator(".jp-Astro-sky")
    button.wait_for()
    assert button.inner_text() == "Show on sky"
    button.click()
    inserted = notebook.locator(".jp-Cell").nth(1)
    inserted.locator(".jp-InputArea").wait_for()
    source = inserted.locator(".jp-InputArea .cm-content").inner_text()
    found = re.fullmatch(r"%load_ext astro_jupyter\n%astro sky --result (cat_[0-9a-f]{16})", source)
    assert found, source
    # the view of that cell holds the stored result's rows (the 12 stars the test catalog has around M 87)
    page.wait_for_function(
        """() => (window.__astroAladins || []).some(al =>
              (al.view.catalogs || []).some(c => c.name === 'astro-jupyter rows' && c.getSources().length >= 12))""",
        timeout=90_000,
    )
    inserted.locator(".aladin-widget canvas").first.wait_for(timeout=30_000)
    assert notebook.locator(".jp-Cell").count() == 2
    first_prompt = notebook.locator(".jp-Cell").nth(0).locator(".jp-InputPrompt").inner_text()
    assert "[ ]" in first_prompt or first_prompt.strip() in ("[ ]:", "")  # the other cell did not run
    assert WASM_TRAP not in page.astro_errors  # type: ignore[attr-defined]
    shot(page, "show-catalog-on-sky")
