"""Summaries of live objects for ``kernel_inspect``: astronomy-aware, running none of the user's code.

The kernel is the user's. ``kernel_inspect`` never asks, so it must not run their code: no
property, ``__getattr__``, ``__getattribute__``, descriptor ``__get__``, ``__repr__``, ``__len__``,
``__iter__``, ``__eq__``/``__hash__`` or ``__class__`` of a user class. So:

* types are read with ``type()`` and the ``type`` slots themselves (``__mro__``, ``__dict__``,
  ``__qualname__``), never ``isinstance`` (which consults ``__class__``) or ``obj.__class__``;
* attributes of user objects are looked up statically (``inspect.getattr_static``); a property
  or other descriptor of a user class is named, not evaluated;
* ``repr`` is used only for builtin scalars and for containers of exact builtin types, written
  here (anything else inside shows as ``<Type object>``), and for a few library value types;
* NumPy arrays (user subclasses too, through a plain ``ndarray`` view), pandas and astropy
  objects and matplotlib figures are summarised from their data — shape, dtype, columns,
  units — and only when every class of the object is the library's own; formatted values
  are shown only for numeric/boolean/time columns, never for object columns whose elements
  are user objects.

A type is recognised only through modules the user already imported (``sys.modules``), so
inspecting never drags in NumPy, pandas, astropy or matplotlib.

Values that may carry credentials are flagged (``secret_reasons``): the process environment
and anything else from ``os``/``sys``/``subprocess``, names that look like secrets
(``*token*``, ``*key*``, ``*secret*``, ``*password*``, ``*passwd*``, ``*credential*``), and
mappings with such keys. The listing never shows them; by name they are shown only after a
permission question (``agent/tools/notebook/kernel.py``).
"""

from __future__ import annotations

import inspect as _inspect
import re
import sys
import types
from typing import Any, Callable

from ..errors import AstroError

HEAD_ROWS = 5
COORD_ENTRIES = 3
_SCAN_ITEMS = 2000  # how many container items the secret scan and the safe repr look at, at most
_SAFE_DEPTH = 4

SECRET_NAME = re.compile(r"token|key|secret|passw(?:or)?d|credential", re.IGNORECASE)
CREDENTIAL_MODULES = frozenset({"os", "posix", "nt", "sys", "subprocess"})
TRUSTED_PACKAGES = ("numpy", "pandas", "astropy", "matplotlib")
_FORMAT_KINDS = "biufcmM"  # dtypes whose values are numbers, booleans or times: safe to format

_MRO = type.__dict__["__mro__"]
_TYPE_DICT = type.__dict__["__dict__"]
_QUALNAME = type.__dict__["__qualname__"]
_TYPE_MODULE = type.__dict__["__module__"]
_SCALARS = (type(None), bool, int, float, complex, str, bytes)
_CONTAINERS = (list, tuple, set, frozenset, dict)


# -- types, read without running user code ----------------------------------------------------------
def mro(cls: type) -> tuple[type, ...]:
    return _MRO.__get__(cls)


def qualname(cls: type) -> str:
    try:
        return str(_QUALNAME.__get__(cls))
    except Exception:  # noqa: BLE001
        return "?"


def module_of(cls: type) -> str:
    try:
        value = _TYPE_MODULE.__get__(cls)
    except Exception:  # noqa: BLE001
        return ""
    return value if type(value) is str else ""


def type_name(obj: Any) -> str:
    return qualname(type(obj))


def full_type_name(cls: type) -> str:
    module = module_of(cls)
    return qualname(cls) if module in ("", "builtins") else f"{module}.{qualname(cls)}"


def _trusted_class(cls: type) -> bool:
    module = module_of(cls)
    return module == "builtins" or module.split(".")[0] in TRUSTED_PACKAGES


def trusted(cls: type) -> bool:
    """Every class of ``cls`` is Python's or a trusted library's: its methods are not user code."""
    return all(_trusted_class(c) for c in mro(cls))


def _cls(module: str, name: str) -> type | None:
    mod = sys.modules.get(module)
    if type(mod) is not types.ModuleType:
        return None
    cls = mod.__dict__.get(name)
    return cls if type(cls) is type or (cls is not None and type in mro(type(cls))) else None


def _has_base(obj: Any, module: str, name: str) -> bool:
    cls = _cls(module, name)
    return cls is not None and cls in mro(type(obj))


def cut(text: str, limit: int) -> str:
    return text if limit <= 0 or len(text) <= limit else text[:limit] + f"\n… [{len(text) - limit} more characters cut]"


def _one_line(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# -- a repr that runs no user code ---------------------------------------------------------------------
def safe_repr(obj: Any, limit: int = 2000) -> str:
    """``repr`` for exact builtin scalars and containers; anything else as ``<Type object>``."""
    out: list[str] = []
    budget = [_SCAN_ITEMS]

    def emit(value: Any, depth: int) -> None:
        if sum(map(len, out)) > limit:
            return
        t = type(value)
        if t in _SCALARS:
            try:
                text = repr(value)
            except ValueError:  # an int too long for str()
                text = f"<int with {value.bit_length()} bits>"
            out.append(text if len(text) <= limit else text[:limit] + "…")
            return
        if t not in _CONTAINERS:
            out.append(f"<{full_type_name(t)} object>")
            return
        if depth >= _SAFE_DEPTH:
            out.append("[…]" if t is list else "(…)" if t is tuple else "{…}")
            return
        items = dict.items(value) if t is dict else value
        if t in (set, frozenset) and not value:
            out.append(f"{t.__name__}()")
            return
        brackets = {list: "[]", tuple: "()", dict: "{}", set: "{}", frozenset: "{}"}[t]
        if t is frozenset:
            out.append("frozenset(")
        out.append(brackets[0])
        for i, item in enumerate(items):
            if i:
                out.append(", ")
            budget[0] -= 1
            if budget[0] < 0 or sum(map(len, out)) > limit:
                out.append("…")
                break
            if t is dict:
                emit(item[0], depth + 1)
                out.append(": ")
                emit(item[1], depth + 1)
            else:
                emit(item, depth + 1)
        if t is tuple and len(value) == 1:
            out.append(",")
        out.append(brackets[1])
        if t is frozenset:
            out.append(")")

    emit(obj, 0)
    text = "".join(out)
    return text if len(text) <= limit else text[:limit] + "…"


def short_repr(obj: Any, limit: int = 80) -> str:
    return _one_line(safe_repr(obj, limit * 2), limit)


# -- values that may carry credentials ---------------------------------------------------------------------
def secret_name(name: str) -> str | None:
    match = SECRET_NAME.search(name)
    return match.group(0).lower() if match else None


def _credential_module(obj: Any) -> str | None:
    if type(obj) is types.ModuleType:
        name = obj.__dict__.get("__name__")
        root = name.split(".")[0] if type(name) is str else ""
    else:
        root = module_of(type(obj)).split(".")[0]
    return root if root in CREDENTIAL_MODULES else None


def _secret_keys(obj: Any, found: list[str], depth: int = 0, budget: list[int] | None = None) -> None:
    """Keys that look like secrets in dicts (and dicts inside lists/tuples/dicts), read without user code."""
    budget = budget if budget is not None else [_SCAN_ITEMS]
    t = type(obj)
    if depth > _SAFE_DEPTH or budget[0] <= 0:
        return
    if dict in mro(t):
        for key, value in dict.items(obj):
            budget[0] -= 1
            if budget[0] <= 0:
                return
            if type(key) is str and secret_name(key) and key not in found:
                found.append(key)
            _secret_keys(value, found, depth + 1, budget)
    elif t in (list, tuple):
        for value in obj:
            budget[0] -= 1
            if budget[0] <= 0:
                return
            _secret_keys(value, found, depth + 1, budget)


def secret_reasons(path: list[str], chain: list[Any]) -> list[str]:
    """Why the value at ``path`` (reached through the objects in ``chain``) may hold secrets; [] if not."""
    reasons: list[str] = []
    for part in path:
        word = secret_name(part)
        if word:
            reasons.append(f"the name {part!r} looks like a secret (*{word}*)")
    for obj in reversed(chain):  # the value itself first: os.environ is "the environment", not just "from os"
        module = _credential_module(obj)
        if module:
            what = "the process environment" if module in ("os", "posix", "nt") and _has_base(obj, "os", "_Environ") else \
                f"a value from the {module!r} module"
            reasons.append(f"it is {what}, which holds credentials such as tokens and passwords")
            break
    keys: list[str] = []
    if chain:
        _secret_keys(chain[-1], keys)
        meta = _library_meta(chain[-1])
        if meta is not None:
            _secret_keys(meta, keys)
    if keys:
        shown = ", ".join(repr(k) for k in keys[:5]) + (" …" if len(keys) > 5 else "")
        reasons.append(f"it holds keys that look like secrets ({shown})")
    return reasons


def _library_meta(obj: Any) -> Any:
    """An astropy Table's ``meta`` dict (a place headers and credentials end up)."""
    if trusted(type(obj)) and _has_base(obj, "astropy.table", "Table"):
        return obj.meta
    return None


# -- attribute paths, statically -----------------------------------------------------------------------------
class NotEvaluated(AstroError):
    """An attribute whose value would come from the user's code (a property, a descriptor)."""


def _has_get(value: Any) -> bool:
    return any("__get__" in _TYPE_DICT.__get__(c) for c in mro(type(value)))


def static_attr(obj: Any, attr: str) -> Any:
    """``obj.attr`` without running user code; raises AttributeError or ``NotEvaluated``."""
    if type(obj) is not types.ModuleType and trusted(type(obj)):
        return getattr(obj, attr)  # a library's own attribute (Table.colnames, ndarray.shape): its code
    value = _inspect.getattr_static(obj, attr)
    t = type(value)
    if t in (staticmethod, classmethod):
        return value.__func__
    if t is types.MemberDescriptorType:
        return value.__get__(obj, type(obj))  # a __slots__ entry: read from the object, no code
    if t is types.GetSetDescriptorType and _has_base(obj, "numpy", "ndarray"):
        return getattr(_plain_array(obj), attr)  # ndarray's own getter, on the data (a subclass's hooks stay out)
    if t in (types.FunctionType, types.BuiltinFunctionType, types.MethodType, types.ModuleType, type):
        return value
    if _has_get(value):
        owner = next((c for c in mro(type(obj)) if attr in _TYPE_DICT.__get__(c)), type(obj))
        raise NotEvaluated(f"{attr} is a {type_name(value)} of {qualname(owner)}: its value comes from your code, "
                           "which kernel_inspect does not run (kernel_run can evaluate it, after asking you)")
    return value


# -- kinds --------------------------------------------------------------------------------------------------------
def _num(value: Any) -> str:
    try:
        return f"{float(value):.6g}"
    except (TypeError, ValueError):
        return str(value)


def _plain_array(obj: Any) -> Any:
    """The data of an ndarray (or a subclass, the user's too) as a plain ndarray: no subclass code runs."""
    np = sys.modules["numpy"]
    return obj if type(obj) is np.ndarray else np.ndarray.view(obj, np.ndarray)


def _array_stats(values: Any) -> list[str]:
    np = sys.modules["numpy"]
    lines: list[str] = []
    if values.size and values.dtype.kind in "biufc":
        if values.dtype.kind == "c":
            values = np.abs(values)
        nan = int(np.isnan(values).sum()) if values.dtype.kind == "f" else 0
        finite = values[np.isfinite(values)] if values.dtype.kind == "f" else values
        if finite.size:
            lines.append(f"min {_num(finite.min())}, max {_num(finite.max())}, mean {_num(finite.mean())}")
        lines.append(f"NaN count: {nan}")
    return lines


def _unit_text(obj: Any) -> str | None:
    """An astropy unit stored on the object (``_unit``), read statically."""
    try:
        unit = _inspect.getattr_static(obj, "_unit")
    except AttributeError:
        return None
    if unit is None or not trusted(type(unit)) or not _has_base(unit, "astropy.units", "UnitBase"):
        return None
    return str(unit) or "dimensionless"


def _ndarray(obj: Any) -> tuple[str, str]:
    np = sys.modules["numpy"]
    arr = _plain_array(obj)
    kind = type_name(obj)
    unit = _unit_text(obj)
    label = "numpy.ndarray" if type(obj) is np.ndarray else f"{full_type_name(type(obj))} (an ndarray subclass; its data)"
    one = f"{'ndarray' if type(obj) is np.ndarray else kind} {arr.dtype} {arr.shape}" + (f" [{unit}]" if unit else "")
    lines = [f"{label} shape={arr.shape} dtype={arr.dtype} size={arr.size}" + (f" unit={unit}" if unit else "")]
    lines += [f"{line} ({unit})" if unit and line.startswith("min") else line for line in _array_stats(arr)]
    if arr.dtype.kind in _FORMAT_KINDS + "SU" and arr.dtype.names is None:
        lines.append(np.array2string(arr, threshold=20, edgeitems=3, max_line_width=100))
    else:
        lines.append(f"(values of dtype {arr.dtype} are not shown: they may be your objects)")
    return one, "\n".join(lines)


def _label(value: Any) -> str:
    return str(value) if type(value) in (str, int, float, bool) else f"<{type_name(value)} label>"


def _safe_index(frame: Any) -> Any:
    index = frame.index
    if index.dtype.kind in _FORMAT_KINDS:
        return frame
    if all(type(v) in (str, int, float) for v in list(index[:HEAD_ROWS])):
        return frame
    return frame.reset_index(drop=True)


def _dataframe(obj: Any) -> tuple[str, str]:
    rows, cols = obj.shape
    one = f"DataFrame {rows}×{cols}"
    items = list(obj.dtypes.items())
    dtypes = ", ".join(f"{_label(c)}: {t}" for c, t in items[:50])
    numeric = [c for c, t in items if getattr(t, "kind", "O") in _FORMAT_KINDS and type(c) in (str, int, float)]
    nan = obj[numeric].isna().sum() if numeric else {}
    with_nan = ", ".join(f"{c}: {int(n)}" for c, n in dict(nan).items() if n) or "none"
    text = f"pandas.DataFrame shape=({rows}, {cols})\ncolumns (dtype): {dtypes}\nNaN per column: {with_nan}"
    if numeric:
        head = _safe_index(obj[numeric[:20]].head(HEAD_ROWS)).to_string(max_cols=20, max_colwidth=40)
        text += f"\nhead:\n{head}"
    if len(numeric) < len(items):
        text += "\n(values of other columns are not shown: they may be your objects)"
    return one, text


def _series(obj: Any) -> tuple[str, str]:
    one = f"Series {obj.dtype} len {len(obj)}"
    text = f"pandas.Series name={_label(obj.name)} len={len(obj)} dtype={obj.dtype}"
    if getattr(obj.dtype, "kind", "O") in _FORMAT_KINDS:
        text += f"\nhead:\n{_safe_index(obj.head(HEAD_ROWS)).to_string()}"
    return one, text


def _index(obj: Any) -> tuple[str, str]:
    one = f"{type_name(obj)} {obj.dtype} len {len(obj)}"
    return one, f"pandas.{type_name(obj)} dtype={obj.dtype} len={len(obj)}: {safe_repr(list(obj[:50]), 2000)}"


def _table(obj: Any) -> tuple[str, str]:
    kind = type_name(obj)
    one = f"{kind} {len(obj)} rows × {len(obj.colnames)} cols"
    cols, shown = [], []
    for name in obj.colnames[:100]:
        col = obj.columns[name]
        unit = _unit_text(col) if trusted(type(col)) else None
        dtype = getattr(col, "dtype", None) if trusted(type(col)) else None
        cols.append(f"  {name}: {dtype if dtype is not None else type_name(col)}" + (f" [{unit}]" if unit else ""))
        if dtype is not None and dtype.kind in _FORMAT_KINDS + "SU" and getattr(col, "ndim", 1) >= 1:
            shown.append(name)
    meta = obj.meta
    keys = [k for k in dict.keys(meta)][:20] if meta is not None and dict in mro(type(meta)) else []
    text = f"astropy {kind}: {len(obj)} rows\ncolumns:\n" + "\n".join(cols)
    if keys:
        text += f"\nmeta keys: {', '.join(_label(k) for k in keys)}"
    if shown:
        head = "\n".join(obj[shown][:HEAD_ROWS].pformat(max_width=120))
        text += f"\nfirst rows:\n{head}"
    if len(shown) < len(obj.colnames):
        text += "\n(values of other columns are not shown: they may be your objects)"
    return one, text


def _skycoord(obj: Any) -> tuple[str, str]:
    frame = obj.frame.name
    count = "scalar" if obj.isscalar else f"{len(obj)} coordinates"
    one = f"SkyCoord {frame} {count}"
    attrs = []
    for attr in ("equinox", "obstime"):
        value = getattr(obj, attr, None)
        if value is not None and trusted(type(value)):
            attrs.append(f"{attr}={_one_line(str(value), 60)}")
    first = [obj.to_string()] if obj.isscalar else list(obj[:COORD_ENTRIES].to_string())
    return one, (f"astropy SkyCoord frame={frame} ({count}); components: {', '.join(obj.representation_component_names)}"
                 + (f"\n{'; '.join(attrs)}" if attrs else "") + "\nfirst entries (deg):\n" + "\n".join(f"  {s}" for s in first))


def _hdulist(obj: Any) -> tuple[str, str]:
    hdus = list.__iter__(obj)  # HDUList is a list: its HDUs, without its own iteration code
    if not all(trusted(type(h)) for h in hdus):
        raise NotEvaluated("an HDU of this list is your own class")
    rows = obj.info(output=False) or []
    one = f"HDUList {len(obj)} HDUs"
    header = "No.  Name  Ver  Type  Cards  Dimensions  Format"
    lines = [header] + ["  ".join(str(v) for v in row[:7]) for row in rows]
    return one, "FITS HDUList (info):\n" + "\n".join(lines)


def _figure(obj: Any) -> tuple[str, str]:
    width, height = (obj.get_size_inches() * obj.dpi).round().astype(int)
    axes = [ax for ax in obj.get_axes() if trusted(type(ax))]
    one = f"Figure {width}×{height} px, {len(axes)} axes"
    lines = [f"matplotlib Figure {width}×{height} px, {len(axes)} axes"]
    for i, ax in enumerate(axes[:10]):
        lines.append(f"  axes {i}: title={ax.get_title()!r} x={ax.get_xlabel()!r} y={ax.get_ylabel()!r} "
                     f"lines={len(ax.get_lines())} images={len(ax.get_images())} collections={len(ax.collections)}")
    return one, "\n".join(lines)


def _value(obj: Any) -> tuple[str, str]:
    """Library value types whose own ``repr`` shows numbers, not user objects (units, times, scalars)."""
    text = repr(obj)
    return _one_line(text, 80), text


# (module, class, summariser, user subclasses too?), most specific first: Quantity and Column are ndarrays.
# Only ndarrays are summarised for user subclasses (through a plain view of their data).
KINDS: list[tuple[str, str, Callable[[Any], tuple[str, str]], bool]] = [
    ("astropy.io.fits", "HDUList", _hdulist, False),
    ("astropy.coordinates", "SkyCoord", _skycoord, False),
    ("astropy.table", "Table", _table, False),
    ("pandas", "DataFrame", _dataframe, False),
    ("pandas", "Series", _series, False),
    ("pandas", "Index", _index, False),
    ("numpy", "ndarray", _ndarray, True),
    ("matplotlib.figure", "Figure", _figure, False),
    ("numpy", "generic", _value, False),
    ("numpy", "dtype", _value, False),
    ("astropy.units", "UnitBase", _value, False),
    ("astropy.time", "Time", _value, False),
]


def _generic(obj: Any, limit: int) -> tuple[str, str]:
    """Anything else, without its code: builtins in full; a module, function or class by name; another
    object by its type and the names and plain values in its instance ``__dict__``."""
    t = type(obj)
    if t in _SCALARS or t in _CONTAINERS:
        size = f"len {len(obj)}: " if t is not type(None) and t not in (bool, int, float, complex) else ""
        return size + short_repr(obj, 60), safe_repr(obj, limit)
    if t is types.ModuleType:
        name = obj.__dict__.get("__name__")
        return f"module {name}", f"module {safe_repr(name)}"
    if t in (types.FunctionType, types.BuiltinFunctionType, types.MethodType):
        func = obj.__func__ if t is types.MethodType else obj
        plain = type(func) in (types.FunctionType, types.BuiltinFunctionType)
        name = func.__qualname__ if plain and type(func.__qualname__) is str else qualname(type(func))
        return f"function {name}", f"{qualname(t)} {name} (not called)"
    if type in mro(t):
        names = sorted(k for k in _TYPE_DICT.__get__(obj) if type(k) is str and not k.startswith("_"))
        return f"class {full_type_name(obj)}", f"class {full_type_name(obj)}; defines: {', '.join(names[:100]) or '(nothing public)'}"
    attrs: dict[str, Any] = {}
    try:
        descr = next(_TYPE_DICT.__get__(c)["__dict__"] for c in mro(t) if "__dict__" in _TYPE_DICT.__get__(c))
    except StopIteration:
        descr = None
    if type(descr) is types.GetSetDescriptorType:  # the real instance dict, not a user's __dict__ property
        raw = descr.__get__(obj, t)
        if type(raw) is dict:
            attrs = {k: v for k, v in dict.items(raw) if type(k) is str and not k.startswith("_")}
    one = f"<{full_type_name(t)} object>"
    lines = [f"{full_type_name(t)} object (your class: shown from its attributes, none of its code run)"]
    for key, value in list(attrs.items())[:50]:
        reason = secret_name(key)
        lines.append(f"  .{key} = " + (f"<not shown: the name looks like a secret (*{reason}*)>" if reason
                                       else short_repr(value, 120)))
    return one, "\n".join(lines)


def summarize(obj: Any, limit: int = 4000) -> tuple[str, str, str]:
    """(type name, one-line summary, full summary) of ``obj``, running none of the user's code."""
    t = type(obj)
    for module, name, fn, subclasses in KINDS:
        cls = _cls(module, name)
        if cls is None or cls not in mro(t) or not (subclasses or trusted(t)):
            continue
        try:
            one, full = fn(obj)
        except Exception as exc:  # noqa: BLE001 - a summary must never break the tool
            one, full = name, f"{name} (summary failed: {type(exc).__name__}: {exc})"
        return qualname(t), one, cut(full, limit)
    one, full = _generic(obj, limit)
    return qualname(t), one, cut(full, limit)


HIDDEN = frozenset({"In", "Out", "exit", "quit", "get_ipython", "open"})


def user_variables(ns: dict[str, Any], hidden: dict[str, Any] | None = None) -> list[tuple[str, Any]]:
    """The user's own names, like ``%whos``: no modules, no _private, no IPython plumbing."""
    out = []
    for name, value in dict.items(ns):
        if type(name) is not str or name.startswith("_") or name in HIDDEN or type(value) is types.ModuleType:
            continue
        if hidden is not None and name in hidden and hidden[name] is value:
            continue
        out.append((name, value))
    return sorted(out, key=lambda item: item[0])
