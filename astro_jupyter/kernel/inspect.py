"""Summaries of live objects for ``kernel_inspect``: astronomy-aware, never importing to check a type.

A type is recognised only through modules the user already imported (``sys.modules``),
so inspecting a namespace never drags in NumPy, pandas, astropy or matplotlib. Known
kinds get a summary that says what an astronomer needs (shape, dtype, range and NaNs;
columns with dtypes and units; the coordinate frame; the FITS ``info()`` table); anything
else a truncated ``repr``.
"""

from __future__ import annotations

import reprlib
import sys
import types
from typing import Any, Callable

HEAD_ROWS = 5
COORD_ENTRIES = 3


def _cls(module: str, name: str) -> type | None:
    mod = sys.modules.get(module)
    cls = getattr(mod, name, None) if mod is not None else None
    return cls if isinstance(cls, type) else None


def _is(obj: Any, module: str, name: str) -> bool:
    cls = _cls(module, name)
    return cls is not None and isinstance(obj, cls)


def cut(text: str, limit: int) -> str:
    return text if limit <= 0 or len(text) <= limit else text[:limit] + f"\n… [{len(text) - limit} more characters cut]"


def short_repr(obj: Any, limit: int = 80) -> str:
    shortener = reprlib.Repr()
    shortener.maxstring = shortener.maxother = limit
    try:
        text = shortener.repr(obj)
    except Exception as exc:  # noqa: BLE001 - a broken __repr__ must not break the listing
        text = f"<repr failed: {type(exc).__name__}>"
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# -- kinds ---------------------------------------------------------------------------------------
def _array_stats(arr: Any) -> list[str]:
    np = sys.modules["numpy"]
    lines: list[str] = []
    if arr.size and arr.dtype.kind in "biufc":
        values = arr.view(np.ndarray) if isinstance(arr, np.ndarray) else np.asarray(arr)
        if values.dtype.kind == "c":
            values = np.abs(values)
        nan = int(np.isnan(values).sum()) if values.dtype.kind == "f" else 0
        finite = values[np.isfinite(values)] if values.dtype.kind == "f" else values
        if finite.size:
            lines.append(f"min {_num(finite.min())}, max {_num(finite.max())}, mean {_num(finite.mean())}")
        lines.append(f"NaN count: {nan}")
    return lines


def _num(value: Any) -> str:
    try:
        return f"{float(value):.6g}"
    except (TypeError, ValueError):
        return str(value)


def _ndarray(obj: Any) -> tuple[str, str]:
    np = sys.modules["numpy"]
    one = f"ndarray {obj.dtype} {obj.shape}"
    lines = [f"numpy.ndarray shape={obj.shape} dtype={obj.dtype} size={obj.size}", *_array_stats(obj)]
    lines.append(np.array2string(obj, threshold=20, edgeitems=3, max_line_width=100))
    return one, "\n".join(lines)


def _quantity(obj: Any) -> tuple[str, str]:
    unit = str(obj.unit) or "dimensionless"
    one = f"Quantity [{unit}] {getattr(obj, 'shape', ())}"
    lines = [f"astropy Quantity unit={unit} shape={obj.shape} dtype={obj.dtype}"]
    if obj.shape:
        lines += [f"{line} ({unit})" if line.startswith("min") else line for line in _array_stats(obj)]
    lines.append(short_repr(obj, 400))
    return one, "\n".join(lines)


def _dataframe(obj: Any) -> tuple[str, str]:
    rows, cols = obj.shape
    one = f"DataFrame {rows}×{cols}"
    dtypes = ", ".join(f"{c}: {t}" for c, t in list(obj.dtypes.astype(str).items())[:50])
    nan = obj.isna().sum()
    with_nan = ", ".join(f"{c}: {int(n)}" for c, n in nan.items() if n) or "none"
    head = obj.head(HEAD_ROWS).to_string(max_cols=20, max_colwidth=40)
    return one, f"pandas.DataFrame shape=({rows}, {cols})\ncolumns (dtype): {dtypes}\nNaN per column: {with_nan}\nhead:\n{head}"


def _series(obj: Any) -> tuple[str, str]:
    one = f"Series {obj.dtype} len {len(obj)}"
    return one, f"pandas.Series name={obj.name!r} len={len(obj)} dtype={obj.dtype}\nhead:\n{obj.head(HEAD_ROWS).to_string()}"


def _table(obj: Any) -> tuple[str, str]:
    kind = type(obj).__name__
    one = f"{kind} {len(obj)} rows × {len(obj.colnames)} cols"
    cols = []
    for name in obj.colnames[:100]:
        col = obj[name]
        unit = getattr(col, "unit", None)
        cols.append(f"  {name}: {getattr(col, 'dtype', type(col).__name__)}" + (f" [{unit}]" if unit is not None else ""))
    try:
        head = "\n".join(obj[:HEAD_ROWS].pformat(max_width=120))
    except Exception:  # noqa: BLE001 - older/newer astropy spellings
        head = short_repr(obj[:HEAD_ROWS], 1000)
    meta = f"\nmeta keys: {', '.join(map(str, list(obj.meta)[:20]))}" if getattr(obj, "meta", None) else ""
    return one, f"astropy {kind}: {len(obj)} rows\ncolumns:\n" + "\n".join(cols) + meta + f"\nfirst rows:\n{head}"


def _skycoord(obj: Any) -> tuple[str, str]:
    frame = obj.frame.name
    count = "scalar" if obj.isscalar else f"{len(obj)} coordinates"
    one = f"SkyCoord {frame} {count}"
    attrs = []
    for attr in ("equinox", "obstime"):
        value = getattr(obj, attr, None)
        if value is not None:
            attrs.append(f"{attr}={short_repr(value, 60)}")
    first = [obj.to_string()] if obj.isscalar else list(obj[:COORD_ENTRIES].to_string())
    return one, (f"astropy SkyCoord frame={frame} ({count}); components: {', '.join(obj.representation_component_names)}"
                 + (f"\n{'; '.join(attrs)}" if attrs else "") + "\nfirst entries (deg):\n" + "\n".join(f"  {s}" for s in first))


def _hdulist(obj: Any) -> tuple[str, str]:
    rows = obj.info(output=False) or []
    one = f"HDUList {len(obj)} HDUs"
    header = "No.  Name  Ver  Type  Cards  Dimensions  Format"
    lines = [header] + ["  ".join(str(v) for v in row[:7]) for row in rows]
    return one, "FITS HDUList (info):\n" + "\n".join(lines)


def _figure(obj: Any) -> tuple[str, str]:
    width, height = (obj.get_size_inches() * obj.dpi).round().astype(int)
    axes = obj.get_axes()
    one = f"Figure {width}×{height} px, {len(axes)} axes"
    lines = [f"matplotlib Figure {width}×{height} px, {len(axes)} axes"]
    for i, ax in enumerate(axes[:10]):
        lines.append(f"  axes {i}: title={ax.get_title()!r} x={ax.get_xlabel()!r} y={ax.get_ylabel()!r} "
                     f"lines={len(ax.get_lines())} images={len(ax.get_images())} collections={len(ax.collections)}")
    return one, "\n".join(lines)


# (module, class, summariser), most specific first: Quantity and Column are ndarray subclasses
KINDS: list[tuple[str, str, Callable[[Any], tuple[str, str]]]] = [
    ("astropy.io.fits", "HDUList", _hdulist),
    ("astropy.coordinates", "SkyCoord", _skycoord),
    ("astropy.table", "Table", _table),
    ("astropy.units", "Quantity", _quantity),
    ("pandas", "DataFrame", _dataframe),
    ("pandas", "Series", _series),
    ("numpy", "ndarray", _ndarray),
    ("matplotlib.figure", "Figure", _figure),
]


def summarize(obj: Any, limit: int = 4000) -> tuple[str, str, str]:
    """(type name, one-line summary, full summary) of ``obj``."""
    for module, name, fn in KINDS:
        if _is(obj, module, name):
            try:
                one, full = fn(obj)
            except Exception as exc:  # noqa: BLE001 - a summary must never break the tool
                one, full = f"{name}", f"{name} (summary failed: {type(exc).__name__}: {exc})\n{short_repr(obj, 1000)}"
            return type(obj).__name__, one, cut(full, limit)
    kind = type(obj).__name__
    if isinstance(obj, (list, tuple, dict, set, frozenset, str, bytes)):
        one = f"len {len(obj)}: {short_repr(obj, 60)}"
    else:
        one = short_repr(obj, 80)
    try:
        full = repr(obj)
    except Exception as exc:  # noqa: BLE001
        full = f"<repr failed: {type(exc).__name__}: {exc}>"
    return kind, one, cut(f"{kind}: {full}", limit)


HIDDEN = frozenset({"In", "Out", "exit", "quit", "get_ipython", "open"})


def user_variables(ns: dict[str, Any], hidden: dict[str, Any] | None = None) -> list[tuple[str, Any]]:
    """The user's own names, like ``%whos``: no modules, no _private, no IPython plumbing."""
    out = []
    for name, value in ns.items():
        if name.startswith("_") or name in HIDDEN or isinstance(value, types.ModuleType):
            continue
        if hidden is not None and name in hidden and hidden[name] is value:
            continue
        out.append((name, value))
    return sorted(out, key=lambda item: item[0])
