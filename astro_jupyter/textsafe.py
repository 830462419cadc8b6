"""Text that can always be encoded: unpaired surrogates out, JSON that never fails to encode.

Why: Python strings may hold lone UTF-16 surrogates (``"\\ud800"``): a model's JSON escape,
a file name decoded with ``surrogateescape``. They are legal ``str`` but cannot be encoded as
UTF-8, so one of them makes SQLite refuse a whole batch of events, an SSE write fail after the
headers, or ``print`` raise. Untrusted text is cleaned where it enters (the LLM client, argument
parsing) and every edge that encodes (event store, SSE, JSON lines) uses ``safe_json`` so one
bad value is replaced, never a batch lost. A leaf module: it imports nothing from the package.
"""

from __future__ import annotations

import json
import re
from typing import Any

REPLACEMENT = "\ufffd"
_SURROGATE = re.compile("[\ud800-\udfff]")
_MAX_DEPTH = 200  # deeper values are cut, so encoding never hits the recursion limit


def has_surrogates(text: str) -> bool:
    return _SURROGATE.search(text) is not None


def clean_text(text: str) -> str:
    """``text`` with every surrogate code point (paired ones are never in a decoded ``str``) as U+FFFD."""
    if text.isascii():
        return text
    return _SURROGATE.sub(REPLACEMENT, text)


def clean_value(value: Any, _depth: int = 0) -> Any:
    """A JSON-like value with every string (keys too) cleaned; containers deeper than the limit become a note."""
    if isinstance(value, str):
        return clean_text(value)
    if _depth >= _MAX_DEPTH and isinstance(value, (dict, list, tuple)):
        return f"[nested deeper than {_MAX_DEPTH} levels: dropped]"
    if isinstance(value, dict):
        return {clean_text(str(k)) if not isinstance(k, (int, float, bool)) else k: clean_value(v, _depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean_value(v, _depth + 1) for v in value]
    return value


def safe_json(data: Any, *, compact: bool = True) -> str:
    """JSON text of ``data`` that always encodes as UTF-8 (the fast path is a plain ``json.dumps``).

    A value with lone surrogates is cleaned and encoded again; a value that cannot be encoded at all
    (too deep, circular) becomes ``{"type": ..., "unencodable": "<why>"}`` so the record keeps its place.
    """
    seps = (",", ":") if compact else None
    try:
        text = json.dumps(data, ensure_ascii=False, separators=seps, default=str)
    except (ValueError, TypeError, RecursionError) as exc:
        text = None
        problem = f"{type(exc).__name__}: {exc}"
    else:
        if text.isascii() or not has_surrogates(text):
            return text
        problem = ""
    try:
        return json.dumps(clean_value(data), ensure_ascii=False, separators=seps, default=lambda o: clean_text(str(o)))
    except (ValueError, TypeError, RecursionError) as exc:
        problem = problem or f"{type(exc).__name__}: {exc}"
    kind = data.get("type") if isinstance(data, dict) else None
    placeholder = {"type": clean_text(str(kind)) if kind is not None else "unencodable", "unencodable": clean_text(problem)}
    return json.dumps(placeholder, ensure_ascii=False, separators=seps)
