"""Show untrusted text exactly as it is: for permission prompts, arguments and timelines.

A command is shown to a person who decides whether it runs, so what they see must be
what runs. Terminals act on escape sequences (``\\x1b[2K\\r`` erases the line shown so
far), browsers and terminals reorder text around bidi controls (U+202E), zero-width and
odd space characters hide text. ``visible`` replaces every such character by a
backslash escape (``\\x1b``, ``\\u202e``, ``\\n``), and ``unvisible`` turns the result back
into the original: the mapping is exact, so nothing can hide behind the rendering.
A backslash is doubled only where it would otherwise read as an escape, so ordinary
commands (``grep 'a\\|b'``) look as typed.

``permission_lines`` renders a whole permission request: the tool, the reason, and
every argument in full with its length, wrapped at a width without ever splitting an
escape. The CLI, the kernel's text prompt and its widgets all use it.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

_SHORT = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}
_UNSHORT = {v[1]: k for k, v in _SHORT.items()}
_ESCAPE_LEADS = frozenset("\\xuUntr")
_SHOWN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
_TOKEN = re.compile(r"\\\\|\\x[0-9a-f]{2}|\\u[0-9a-f]{4}|\\U[0-9a-f]{8}|\\[ntr]|.", re.DOTALL)
_DECODE = re.compile(r"\\\\|\\x[0-9a-f]{2}|\\u[0-9a-f]{4}|\\U[0-9a-f]{8}|\\[ntr]")
_BAR = "│ "


def needs_escape(ch: str) -> bool:
    """Control, format (bidi, zero-width), surrogate, private-use, unassigned, line/paragraph
    separators and every space but U+0020: characters a reader cannot see for what they are."""
    category = unicodedata.category(ch)
    return category in _SHOWN_CATEGORIES or (category == "Zs" and ch != " ")


def _escape(ch: str) -> str:
    if ch in _SHORT:
        return _SHORT[ch]
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def visible(text: str, *, keep: str = "") -> str:
    """``text`` with every hidden or acting character as an escape (those in ``keep`` stay raw)."""
    out: list[str] = []
    last = len(text) - 1
    for i, ch in enumerate(text):
        if ch in keep:
            out.append(ch)
        elif ch == "\\":
            nxt = text[i + 1] if i < last else ""
            leads = nxt in _ESCAPE_LEADS or (nxt != "" and nxt not in keep and needs_escape(nxt))
            out.append("\\\\" if leads else "\\")
        elif needs_escape(ch):
            out.append(_escape(ch))
        else:
            out.append(ch)
    return "".join(out)


def unvisible(shown: str) -> str:
    """The inverse of ``visible``: ``unvisible(visible(s)) == s`` for every string."""

    def decode(match: re.Match[str]) -> str:
        token = match.group(0)
        if token == "\\\\":
            return "\\"
        if token[1] in _UNSHORT:
            return _UNSHORT[token[1]]
        return chr(int(token[2:], 16))

    return _DECODE.sub(decode, shown)


def hidden_count(text: str) -> int:
    return sum(1 for ch in text if needs_escape(ch))


def wrap_escaped(shown: str, width: int | None) -> list[str]:
    """Split already-escaped text into lines of at most ``width`` characters, never inside an
    escape, and after each ``\\n`` escape so multi-line commands keep their shape."""
    lines: list[str] = []
    current = ""
    for token in _TOKEN.findall(shown):
        if width and current and len(current) + len(token) > width:
            lines.append(current)
            current = ""
        current += token
        if token == "\\n":
            lines.append(current)
            current = ""
    if current or not lines:
        lines.append(current)
    return lines


def _value_lines(key: str, value: Any, width: int | None, indent: str) -> list[str]:
    if isinstance(value, str):
        hidden = hidden_count(value)
        extra = f"; {hidden} hidden or control character(s) shown as \\ escapes" if hidden else ""
        head = f"{indent}{visible(key)} ({len(value)} characters{extra}):"
        text = visible(value)
    else:
        text = visible(json.dumps(value, ensure_ascii=False, default=str))
        head = f"{indent}{visible(key)} (JSON, {len(text)} characters):"
    body_width = None if width is None else max(10, width - len(indent) - len(_BAR))  # 10: the longest escape
    return [head, *(f"{indent}{_BAR}{line}" for line in wrap_escaped(text, body_width))]


def permission_lines(event: Any, width: int | None = None, *, header: bool = True) -> list[str]:
    """The full text of a permission request: what, why, and every argument in full. Without ``header``
    for a caller whose own title already names the tool (said once, not twice)."""
    indent = "    " if getattr(event, "subagent_id", None) else ""
    name = visible(str(getattr(event, "name", "")))
    lines = [f"{indent}? permission for {name}"] if header else []
    message = str(getattr(event, "message", "") or "")
    if message:
        body_width = None if width is None else max(12, width - len(indent) - 2)
        lines += [f"{indent}  {line}" for line in wrap_escaped(visible(message), body_width)]
    code = getattr(event, "code", "")
    if isinstance(code, str) and code:  # what will run, read from where it runs (e.g. a notebook cell)
        lines += _value_lines("code that will run", code, width, indent + "  ")
    arguments = getattr(event, "arguments", None)
    if isinstance(arguments, dict):
        for key, value in arguments.items():
            lines += _value_lines(str(key), value, width, indent + "  ")
    elif arguments not in (None, ""):
        lines += _value_lines("arguments", arguments, width, indent + "  ")
    return lines
