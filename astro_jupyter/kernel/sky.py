"""The sky view: an ``ipyaladin`` Aladin Lite widget centred on a target with a table's rows overlaid.

``show_sky(table, target)`` is what ``%astro sky TARGET`` and a catalog result's ``r.show_sky()``
call. A name is resolved through the ``query_target`` tool (CDS Sesame, its cache, the
permission pipeline), so the sky view and the agent agree on where an object is.

The rows go to the browser in the widget's own state, as binary columns (RA, Dec, row number:
~200 KB for 10,000 rows, in the comm_open), and the view draws them as ipyaladin markers the moment
it is created (``ROWS_ESM`` wraps ipyaladin's front end; everything else is ipyaladin's). Not
``add_table`` (astropy writes a VOTable that Aladin Lite parses in WebAssembly: seconds) nor
``add_markers`` (JSON sent only after the view has told the kernel it loaded: a round trip and
~950 KB). Only what the view draws travels; the full table stays in Python.

The user's selection comes back as rows of the *original* table (units and UCDs kept):
``SkyView.selection`` maps the positions Aladin reports back to the rows sent at exactly those
positions (float64 to the view, JSON back: exact both ways); anything else is ignored, never trusted.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from ..errors import InvalidInput
from ..services.tap import DEC_NAMES, RA_NAMES

if TYPE_CHECKING:
    from astropy.coordinates import SkyCoord
    from astropy.table import Table

OVERLAY_NAME = "astro-jupyter rows"
OVERLAY_OPTIONS = {"name": OVERLAY_NAME, "shape": "circle", "color": "#ff9f1c"}
DEFAULT_FOV_DEG = 0.5  # a target alone: about a galaxy group's field
MIN_FOV_DEG, MAX_FOV_DEG = 1 / 60, 180.0


class SkyError(InvalidInput):
    """A table without positions or a target that does not resolve: the message says which."""


def position_columns(table: "Table") -> tuple[str, str]:
    """The (ra, dec) column names: UCD ``pos.eq.ra``/``pos.eq.dec`` first (``meta.main`` preferred),
    then the common names (ra/dec, RAJ2000/DEJ2000, RA_ICRS/DE_ICRS, ...)."""
    found: dict[str, str] = {}
    for axis in ("ra", "dec"):
        with_ucd = [(("meta.main" in _ucd(table[name])), name) for name in table.colnames
                    if f"pos.eq.{axis}" in _ucd(table[name]).split(";")]
        if with_ucd:
            found[axis] = sorted(with_ucd, reverse=True)[0][1]
            continue
        names = RA_NAMES if axis == "ra" else DEC_NAMES
        lower = {name.lower(): name for name in table.colnames}
        match = next((lower[n] for n in names if n in lower), None)
        if match is None:
            raise SkyError(
                f"the table has no {axis.upper()} column (looked for UCD pos.eq.{axis} and the names "
                f"{', '.join(names)}); its columns: {', '.join(table.colnames[:20])}"
            )
        found[axis] = match
    return found["ra"], found["dec"]


def _ucd(column: Any) -> str:
    return str((getattr(column, "meta", None) or {}).get("ucd") or "").lower()


def _degrees(column: Any) -> Any:
    """A position column as plain degrees (a Quantity or a column with an angle unit is converted)."""
    import numpy as np

    unit = getattr(column, "unit", None)
    values = getattr(column, "value", column)
    if unit is not None and str(unit) not in ("", "deg"):
        import astropy.units as u

        values = (np.asarray(values, dtype=float) * u.Unit(unit)).to_value(u.deg)
    return np.asarray(values, dtype=float)


@dataclass(frozen=True)
class Field:
    """Where the view looks: centre (degrees) and field of view (degrees)."""

    ra: float
    dec: float
    fov: float


def field_for(ra: Any, dec: Any, centre: "SkyCoord | None") -> Field:
    """The centre (the target, else the rows' mean direction) and a field that holds every row."""
    import numpy as np
    from astropy.coordinates import SkyCoord

    if len(ra) == 0:
        if centre is None:
            raise SkyError("nothing to show: no target and an empty table")
        return Field(float(centre.icrs.ra.deg), float(centre.icrs.dec.deg), DEFAULT_FOV_DEG)
    rows = SkyCoord(ra, dec, unit="deg")
    if centre is None:
        xyz = rows.cartesian.xyz.mean(axis=1)
        centre = SkyCoord(x=xyz[0], y=xyz[1], z=xyz[2], representation_type="cartesian").spherical
        centre = SkyCoord(centre.lon, centre.lat)
    spread = float(np.nanmax(centre.separation(rows).deg)) if len(ra) else 0.0
    fov = min(MAX_FOV_DEG, max(MIN_FOV_DEG, spread * 2.4 if spread > 0 else DEFAULT_FOV_DEG))
    return Field(float(centre.icrs.ra.deg), float(centre.icrs.dec.deg), fov)


def _markers(ra: Any, dec: Any) -> list[Any]:
    """One ipyaladin ``Marker`` per row with a position, titled with its row number. Built from plain floats:
    ipyaladin's constructor makes two astropy angles per marker (10,000 rows: ~0.5 s idle), and
    ``add_markers`` sends only these four fields."""
    from ipyaladin import Marker

    class _Row(Marker):
        __slots__ = ("row",)  # the row number stays in Python: add_markers sends the __dict__ only

        def __init__(self, lon: float, lat: float, row: int) -> None:  # noqa: D107 - no angle objects
            self.lon, self.lat, self.title, self.description = lon, lat, f"row {row}", ""
            self.row = row

    # a row without a finite position cannot be drawn (and NaN is not JSON)
    return [_Row(lon, lat, i) for i, (lon, lat) in enumerate(zip(ra.tolist(), dec.tolist()))
            if math.isfinite(lon) and math.isfinite(lat)]


# The view's front end: ipyaladin's own module, loaded as it is, plus one step in ``render``: the rows
# that came with the widget's state (``_astro_rows``: columns of little-endian float64 RA/Dec and
# int32 row numbers, binary buffers of the comm_open) become the same markers ipyaladin's
# ``add_marker`` handler makes, drawn as the view is created. ipyaladin's ``render`` makes the
# view's Aladin Lite instance synchronously through ``A.aladin``; the wrapper only notes it.
ROWS_DRAW_JS = """// a buffer arrives as a DataView at any offset (unaligned for a typed array): copy it out
const column = (view, Kind) => new Kind(view.buffer.slice(view.byteOffset, view.byteOffset + view.byteLength));

function draw(aladin, rows) {
  const ra = column(rows.ra, Float64Array), dec = column(rows.dec, Float64Array), row = column(rows.row, Int32Array);
  const catalog = A.catalog(Object.assign({}, rows.options));
  aladin.addCatalog(catalog);
  const sources = new Array(ra.length);
  for (let i = 0; i < ra.length; i++) {
    sources[i] = A.marker(ra[i], dec[i], {useMarkerDefaultIcon: false, popupTitle: `row ${row[i]}`, popupDesc: ""});
  }
  catalog.addSources(sources);
}
"""
ROWS_ESM = """import A from %(aladin_url)s;
const url = URL.createObjectURL(new Blob([%(ipyaladin_esm)s], {type: "text/javascript"}));
const base = (await import(url)).default;
URL.revokeObjectURL(url);

%(draw)sfunction render(context) {
  const make = A.aladin;
  let aladin = null;
  A.aladin = function (...args) { aladin = make.apply(this, args); return aladin; };
  let cleanup;
  try { cleanup = base.render(context); } finally { A.aladin = make; }
  const rows = context.model.get("_astro_rows");
  if (aladin && rows && rows.ra) draw(aladin, rows);
  return cleanup;
}

export default {initialize: base.initialize, render};
"""


def _rows_esm() -> str:
    """``ROWS_ESM`` around the installed ipyaladin's front-end module (importing the same Aladin Lite)."""
    import json
    import re
    from pathlib import Path

    import ipyaladin

    source = (Path(ipyaladin.__file__).parent / "static" / "widget.js").read_text(encoding="utf-8")
    found = re.search(r"""import\s*\w+\s*from\s*["'](https://[^"']*aladin-lite[^"']*)["']""", source)
    if found is None:
        raise SkyError(f"ipyaladin {getattr(ipyaladin, '__version__', '?')}: its front end does not import Aladin Lite "
                       "the way the sky view expects (an 'import X from \"https://...aladin-lite...\"')")
    return ROWS_ESM % {"aladin_url": json.dumps(found.group(1)), "ipyaladin_esm": json.dumps(source), "draw": ROWS_DRAW_JS}


@functools.lru_cache(maxsize=1)
def _aladin_class() -> type:
    """ipyaladin's ``Aladin`` whose rows travel in the widget's own state, drawn when its view is made.

    ipyaladin's ``add_markers`` waits until the view has loaded (a round trip to the kernel) and
    then sends the markers as JSON (10,000 rows: ~950 KB to build, send and parse). Here they are
    three binary columns in the comm_open (~200 KB), drawn by ``render`` as the view is created.

    ipyaladin also keeps the queue of calls made before a view loads (``_call_store``) on the
    class, shared by every view, and never empties it: each view that loads re-ran every earlier
    view's queued calls (the n-th ``%astro sky`` of a kernel re-sent n-1 earlier views' rows first).
    Here each view queues its own calls and runs them once."""
    import traitlets
    from ipyaladin import Aladin
    from ipyaladin.utils.call_store import CallStore

    class _RunOnce(CallStore):
        def run_all(self) -> None:
            calls, self.calls = self.calls, []
            for func, args, kwargs in calls:
                func(*args, **kwargs)

    class SkyAladin(Aladin):
        """An ``Aladin`` widget with the overlaid rows in its state; calls queued before its view
        loaded go to this view only, once."""

        _esm = _rows_esm()
        _astro_rows = traitlets.Dict().tag(sync=True)

        def __init__(self, markers: "list[Any] | None" = None, **options: Any) -> None:
            self._call_store = _RunOnce()  # shadows ipyaladin's class-wide queue before anything is queued
            if markers is not None:  # set before the comm opens: part of its first state
                self._astro_rows = _rows_state(markers)
            super().__init__(**options)
            if markers is not None:  # known to ipyaladin's overlay list like add_markers' (update, remove)
                self._overlay_manager.add_overlay({"type": "marker", "markers": [m.__dict__ for m in markers],
                                                   "update_info": markers, "options": dict(OVERLAY_OPTIONS)})

    return SkyAladin


def _rows_state(markers: list[Any]) -> dict[str, Any]:
    """The ``_astro_rows`` state: the overlay's options and its rows as binary columns."""
    import numpy as np

    return {"options": dict(OVERLAY_OPTIONS),
            "ra": np.array([m.lon for m in markers], dtype="<f8").tobytes(),
            "dec": np.array([m.lat for m in markers], dtype="<f8").tobytes(),
            "row": np.array([m.row for m in markers], dtype="<i4").tobytes()}


class SkyView:
    """An Aladin Lite view (``.widget``) with the rows of ``.table`` overlaid; ``.selection`` is what
    the user selected in it, as rows of ``.table``. Displaying the object shows the widget."""

    def __init__(self, widget: Any, table: "Table | None", target: str, field: Field,
                 markers: "list[Any] | None" = None) -> None:
        self.widget = widget
        self.table = table
        self.target = target
        self.field = field
        self._markers = markers or []  # what was sent: each row's position (degrees) and number
        self._rows_at: dict[tuple[float, float], list[int]] | None = None

    def _rows_at_position(self) -> dict[tuple[float, float], list[int]]:
        if self._rows_at is None:
            self._rows_at = {}
            for m in self._markers:
                self._rows_at.setdefault((m.lon, m.lat), []).append(m.row)
        return self._rows_at

    @property
    def selection(self) -> "Table":
        """The selected rows of ``.table`` (in table order; empty when nothing is selected).

        Objects of other layers (a SIMBAD pointer, a catalog the user added) and indices that are
        not rows of the table are ignored."""
        if self.table is None:
            raise SkyError("this sky view has no table overlaid, so nothing can be selected from it")
        picked: set[int] = set()
        rows_at = self._rows_at_position()
        for layer in self.widget._selected_objects or []:
            for obj in layer if isinstance(layer, list) else []:
                if not isinstance(obj, dict):
                    continue
                ra, dec = obj.get("ra"), obj.get("dec")
                if isinstance(ra, (int, float)) and isinstance(dec, (int, float)) and not isinstance(ra, bool):
                    picked.update(rows_at.get((float(ra), float(dec)), ()))
        return self.table[sorted(picked)]

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)

    def __repr__(self) -> str:
        rows = f", {len(self.table)} rows" if self.table is not None else ""
        return (f"<SkyView {self.target} at RA {self.field.ra:.5f} Dec {self.field.dec:+.5f} deg, "
                f"field {self.field.fov:.3g} deg{rows}>")


Resolver = Callable[[str], "SkyCoord"]


def show_sky(table: "Table | None" = None, target: "str | SkyCoord | None" = None, *,
             fov: float | None = None, height: int = 400, resolve: Resolver | None = None) -> SkyView:
    """An Aladin Lite view centred on ``target`` (a name, resolved through Sesame, or a SkyCoord;
    default: the rows' centre) with ``table``'s rows overlaid (positions found by UCD or name)."""
    from astropy.coordinates import SkyCoord
    from astropy.table import Table

    if table is None and target is None:
        raise SkyError("show_sky needs a table, a target, or both")
    if table is not None and not isinstance(table, Table) and callable(getattr(table, "to_table", None)):
        table = table.to_table()  # a catalog result (query_catalog / cone_search)
    if table is not None and not isinstance(table, Table):
        raise SkyError(f"show_sky shows an astropy Table, not {type(table).__name__}")
    name = ""
    centre: SkyCoord | None = None
    if isinstance(target, SkyCoord):
        centre = target.icrs
        name = centre.to_string("decimal", precision=5)
    elif target is not None:
        name = str(target).strip()
        if not name:
            raise SkyError("an empty target name cannot be resolved")
        centre = (resolve or resolve_name)(name)
    markers: list[Any] | None = None
    if table is not None:
        ra_col, dec_col = position_columns(table)
        ra, dec = _degrees(table[ra_col]), _degrees(table[dec_col])
        where = field_for(ra, dec, centre)
        markers = _markers(ra, dec)
    else:
        assert centre is not None
        where = Field(float(centre.ra.deg), float(centre.dec.deg), DEFAULT_FOV_DEG)
    if fov is not None:
        if not (isinstance(fov, (int, float)) and math.isfinite(fov) and 0 < fov <= MAX_FOV_DEG):
            raise SkyError(f"fov is in degrees, between 0 and {MAX_FOV_DEG:g}")
        where = Field(where.ra, where.dec, float(fov))
    widget = _aladin_class()(markers, target=f"{where.ra} {where.dec}", fov=where.fov, height=height)
    return SkyView(widget, table, name or f"{where.ra:.5f} {where.dec:+.5f}", where, markers)


def resolve_name(name: str) -> "SkyCoord":
    """A name's ICRS position through the ``query_target`` tool of this kernel's %astro runtime."""
    from astropy.coordinates import SkyCoord
    from IPython import get_ipython

    ip = get_ipython()
    if ip is None:
        raise SkyError("a name can only be resolved inside IPython (with %load_ext astro_jupyter): give a SkyCoord")
    if "astro" not in ip.magics_manager.magics["line"]:  # not loaded, or unloaded since
        ip.run_line_magic("load_ext", "astro_jupyter")
    magics = ip.magics_manager.registry["AstroMagics"]  # the loaded %astro magics, by class name
    run = magics.rt.run_tool("query_target", {"name": name}, ask_permission=magics._ask_permission)
    if run.is_error:
        raise SkyError(run.content)
    meta = run.metadata
    try:
        return SkyCoord(float(meta["ra_deg"]), float(meta["dec_deg"]), unit="deg", frame="icrs")
    except (KeyError, TypeError, ValueError) as exc:
        raise SkyError(f"query_target gave no position for {name!r}") from exc
