"""The per-table cost of a 10,000-row sky overlay: ipyaladin's ``add_table`` (a VOTable), its
``add_markers`` (positions and row numbers as JSON, what ``%astro sky`` sent before) and what
``%astro sky`` sends now (the same rows as binary columns in the widget's state).

Run: ``python benchmarks/bench_sky.py [--rows 10000] [--repeat 7]`` (needs Chromium and the npm package
``aladin-lite`` where ``tests/ui/test_sky.py`` finds it; ``.ci/run`` fetches both).

Both sides interleaved (A, B, B, A, ...), medians, the load average printed next to them:

- **kernel**: building the overlay and the message the kernel sends, packed as the kernel packs it
  (``add_table``: the overlay Table written as a VOTable; json: ``show_sky``'s markers in an
  ``add_marker`` message; state: ``show_sky``'s widget state with its binary buffers);
- **browser**: in one bare page with Aladin Lite loaded once (the first-view cost of loading it is
  printed apart), what ipyaladin's front end does with each message (for a table: decode, a blob URL,
  ``A.catalogFromURL``, which parses the VOTable in WebAssembly; json: parse, ``A.marker`` per row
  and ``addSources``; state: the view's own ``draw`` of ``astro_jupyter.kernel.sky`` on the three
  columns) until the catalog holds every row and two frames were drawn.

Not in it: that ``add_markers`` is sent only after the view has loaded (a round trip to the kernel),
and that before the fix each view's load re-sent every earlier view's rows (ipyaladin's shared queue).
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PAGE = "<html><body><div id='al' style='width:800px;height:400px'></div></body></html>"
TABLE_JS = """async (b64) => { const t0 = performance.now();
  const bytes = Uint8Array.from(atob(b64), c => c.charCodeAt(0)); const t1 = performance.now();
  const url = URL.createObjectURL(new Blob([new TextDecoder('utf-8').decode(bytes.buffer)]));
  const cat = await new Promise((ok, no) => A.catalogFromURL(url, {name: 'rows', shape: 'circle', onClick: 'showTable'}, ok, no, false));
  al.addCatalog(cat); URL.revokeObjectURL(url);
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  const n = cat.getSources().length; al.removeLayer(cat); return [performance.now() - t0 - (t1 - t0), n]; }"""
MARKERS_JS = """async (text) => { const t0 = performance.now();
  const msg = JSON.parse(text).data.content; const cat = A.catalog(Object.assign({}, msg.options)); al.addCatalog(cat);
  const sources = []; for (const m of msg.markers) sources.push(A.marker(m.lon, m.lat, {useMarkerDefaultIcon: false, popupTitle: m.title, popupDesc: m.description}));
  cat.addSources(sources);
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  const n = cat.getSources().length; al.removeLayer(cat); return [performance.now() - t0, n]; }"""
STATE_JS = """async ([options, ra, dec, row]) => {
  const buf = b64 => { const s = atob(b64); const u = new Uint8Array(s.length + 3);  // at an odd offset, as a message's buffers come
    for (let i = 0; i < s.length; i++) u[i + 3] = s.charCodeAt(i); return new DataView(u.buffer, 3, s.length); };
  const rows = {options, ra: buf(ra), dec: buf(dec), row: buf(row)};
  const t0 = performance.now();
  %s
  draw(al, rows);
  const cat = al.view.catalogs[al.view.catalogs.length - 1];
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  const n = cat.getSources().length; al.removeLayer(cat); return [performance.now() - t0, n]; }"""


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    import base64

    import numpy as np
    from astropy.coordinates import SkyCoord
    from astropy.table import Table
    from playwright.sync_api import sync_playwright

    from ipywidgets.widgets.widget import _remove_buffers
    from jupyter_client.session import Session

    from astro_jupyter.kernel.sky import ROWS_DRAW_JS, show_sky
    from tests.ui.conftest import CHROMIUM, CHROMIUM_ARGS
    from tests.ui.test_sky import ALADIN_JS, route_hips

    n = args.rows
    rng = np.random.default_rng(3)
    table = Table({"RAJ2000": 187.70593 + rng.uniform(-0.1, 0.1, n), "DEJ2000": 12.39112 + rng.uniform(-0.1, 0.1, n),
                   "id": np.arange(n)})
    centre = SkyCoord(187.70593, 12.39112, unit="deg")

    session = Session()

    def kernel_table() -> tuple[float, bytes]:
        start = time.perf_counter()
        overlay = Table({"astro_row": np.arange(n), "ra": table["RAJ2000"], "dec": table["DEJ2000"], "id": table["id"]})
        out = io.BytesIO()
        overlay.write(out, format="votable")  # what ipyaladin's add_table does with the overlay
        session.pack({"data": {"method": "custom", "content": {"event_name": "add_table"}}})
        return time.perf_counter() - start, out.getvalue()

    def kernel_json() -> tuple[float, bytes]:
        start = time.perf_counter()
        view = show_sky(table, centre)
        markers = [m.__dict__ for m in view._markers]
        packed = session.pack({"data": {"method": "custom", "content": {"event_name": "add_marker", "markers": markers,
                                                                         "options": {"name": "rows", "shape": "circle"}}}})
        return time.perf_counter() - start, packed

    def kernel_state() -> tuple[float, list]:
        start = time.perf_counter()
        view = show_sky(table, centre)
        state, paths, buffers = _remove_buffers(view.widget.get_state())
        session.pack({"data": {"state": state, "buffer_paths": paths}})
        rows = state["_astro_rows"]
        columns = {path[1]: base64.b64encode(bytes(buf)).decode() for path, buf in zip(paths, buffers)}
        return time.perf_counter() - start, [rows["options"], columns["ra"], columns["dec"], columns["row"]]

    before = _load()
    sides = ("table", "json", "state")
    times: dict[str, list[float]] = {f"{part} {side}": [] for part in ("kernel", "browser") for side in sides}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        page = browser.new_page()
        route_hips(page)
        page.route("http://bench.test/**", lambda route: route.fulfill(
            status=200, body=ALADIN_JS.read_bytes() if route.request.url.endswith(".js") else PAGE,
            content_type="application/javascript" if route.request.url.endswith(".js") else "text/html"))
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto("http://bench.test/")
        first = page.evaluate("""async () => { const t0 = performance.now(); window.A = (await import('/aladin.js')).default;
            await A.init; window.al = A.aladin('#al', {target: '187.70593 12.39112', fov: 0.3});
            await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r))); return performance.now() - t0; }""")
        for i in range(args.repeat + 1):  # the first round warms up and is not recorded
            for side in (sides if i % 2 == 0 else sides[::-1]):
                if side == "table":
                    k, body = kernel_table()
                    b, got = page.evaluate(TABLE_JS, base64.b64encode(body).decode())
                elif side == "json":
                    k, packed = kernel_json()
                    b, got = page.evaluate(MARKERS_JS, packed.decode())
                else:
                    k, args_ = kernel_state()
                    b, got = page.evaluate(STATE_JS % ROWS_DRAW_JS, args_)
                assert got == n, (side, got)
                if i:
                    times[f"kernel {side}"].append(k)
                    times[f"browser {side}"].append(b / 1000)
        browser.close()
    after = _load()
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"{n:,} rows, {args.repeat} interleaved rounds, medians ({before} before, {after} after)")
    print(f"loading Aladin Lite in the page (first view only): {first / 1000:.2f} s")
    print(f"{'':>8} {'add_table s':>12} {'json s':>8} {'state s':>8} {'state/table':>12} {'state/json':>11}")
    total = {side: med[f"kernel {side}"] + med[f"browser {side}"] for side in sides}
    for part, row in (("kernel", {side: med[f"kernel {side}"] for side in sides}),
                      ("browser", {side: med[f"browser {side}"] for side in sides}), ("total", total)):
        print(f"{part:>8} {row['table']:>12.3f} {row['json']:>8.3f} {row['state']:>8.3f} "
              f"{row['state'] / row['table']:>12.2f} {row['state'] / row['json']:>11.2f}")
    if errors:
        print(f"page errors: {errors}")


if __name__ == "__main__":
    main()
