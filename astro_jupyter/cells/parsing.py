"""Turning ``%astro TOOL ...`` lines into tool arguments.

Two forms: a JSON object (``%astro query_target {"name": "M 31"}``) or ``key=value``
pairs. Values are JSON literals when they parse (``rows=5``, ``sort=null``,
``paper_ids=["a", "b"]``), quoted strings stay strings (``name="M 31"``), other bare
words are strings. ``{expr}`` as a whole value is the Python object from the user
namespace (so ``rows={n}`` is an int and ``name={target}`` keeps its spaces); inside a
string ``{name}`` (a name, attribute or index — not ``{3}`` or ``{2,3}``, which regexes
use) is formatted in when defined. ``$name`` as a whole value works like IPython's. The
JSON form is literal (exported research logs replay exactly what was recorded); pass a
dict variable as ``%astro TOOL {args}`` to build arguments in Python.
An unquoted ``#`` where a key would start begins a comment, as in Python and the shell.
The magic is registered ``no_var_expand`` so IPython does not flatten objects to text
first; the interpolation here is the only one.
"""

from __future__ import annotations

import json
import re
from typing import Any, Mapping

from ..errors import InvalidInput

_KEY = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)=")
_DQ = re.compile(r'"((?:[^"\\]|\\.)*)"')
_SQ = re.compile(r"'([^']*)'")
_BARE = re.compile(r"\S+")
_WHOLE_EXPR = re.compile(r"^\{([^{}]+)\}$")
_INNER_EXPR = re.compile(r"\{([A-Za-z_][A-Za-z0-9_.]*(?:\[[^\[\]{}]*\])?)\}")
_DOLLAR = re.compile(r"^\$([A-Za-z_][A-Za-z0-9_.]*)$")


_NOT_JSON = object()


class ArgumentSyntaxError(InvalidInput):
    """The line could not be read as arguments; the message shows where and how to write it."""


def _eval(expr: str, ns: Mapping[str, Any]) -> Any:
    try:
        return eval(expr, {}, dict(ns))  # noqa: S307 - the user's own namespace, like IPython's {var}
    except Exception as exc:
        raise ArgumentSyntaxError(f"cannot interpolate {{{expr}}}: {type(exc).__name__}: {exc}") from None


def interpolate(value: Any, ns: Mapping[str, Any]) -> Any:
    """``"{x}"`` → the object ``x``; ``"a {x} b"`` → formatted text; containers recursively."""
    if isinstance(value, str):
        whole = _WHOLE_EXPR.match(value)
        if whole:
            return _eval(whole.group(1), ns)
        dollar = _DOLLAR.match(value)
        if dollar:
            return _eval(dollar.group(1), ns)
        return _format_inner(value, ns)
    if isinstance(value, list):
        return [interpolate(v, ns) for v in value]
    if isinstance(value, dict):
        return {k: interpolate(v, ns) for k, v in value.items()}
    return value


def _format_inner(text: str, ns: Mapping[str, Any]) -> str:
    """Format ``{name}`` occurrences that name something; leave the rest (regex braces) alone."""

    def one(m: re.Match[str]) -> str:
        try:
            return str(_eval(m.group(1), ns))
        except ArgumentSyntaxError:
            return m.group(0)

    return _INNER_EXPR.sub(one, text)


def _bare_value(token: str, ns: Mapping[str, Any]) -> Any:
    if _WHOLE_EXPR.match(token) or _DOLLAR.match(token):
        return interpolate(token, ns)
    try:
        return json.loads(token)
    except ValueError:
        return _format_inner(token, ns)


def _json_object(text: str) -> tuple[Any, ValueError | None]:
    """The JSON value of ``text``, also when a ``# comment`` follows it; ``_NOT_JSON`` and the error otherwise."""
    try:
        return json.loads(text), None
    except ValueError as exc:
        try:
            value, end = json.JSONDecoder().raw_decode(text)
        except ValueError:
            return _NOT_JSON, exc
        return (value, None) if text[end:].lstrip().startswith("#") else (_NOT_JSON, exc)


def parse_tool_arguments(text: str, ns: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Parse the argument part of ``%astro TOOL ...``; raise ``ArgumentSyntaxError`` with a hint."""
    ns = ns or {}
    text = text.strip()
    if not text:
        return {}
    if text.startswith("{"):
        value, exc = _json_object(text)
        if value is _NOT_JSON:
            if _WHOLE_EXPR.match(text) and ":" not in text:  # %astro TOOL {args_dict}
                value = interpolate(text, ns)
                if not isinstance(value, dict):
                    raise ArgumentSyntaxError(f"{text} is a {type(value).__name__}, not a dict of arguments") from None
                return value
            raise ArgumentSyntaxError(
                f"the arguments look like JSON but do not parse ({exc}); write a JSON object like "
                '{"name": "M 31"} or key=value pairs like name="M 31" rows=5'
            ) from None
        if not isinstance(value, dict):
            raise ArgumentSyntaxError("JSON arguments must be an object, e.g. {\"name\": \"M 31\"}")
        return value
    args: dict[str, Any] = {}
    pos = 0
    decoder = json.JSONDecoder()
    while pos < len(text):
        if text[pos:].strip() == "" or text[pos:].lstrip().startswith("#"):
            break  # the rest is a comment (`%astro query_target name="M 31"  # where is it?`), as in Python
        key_match = _KEY.match(text, pos)
        if not key_match:
            rest = text[pos:].strip()
            raise ArgumentSyntaxError(
                f"expected key=value at {rest[:40]!r}; quote values with spaces (name=\"M 31\") "
                "or pass a JSON object"
            )
        key = key_match.group(1)
        pos = key_match.end()
        if pos >= len(text) or text[pos].isspace():
            raise ArgumentSyntaxError(f"{key}= has no value (use {key}=\"\" for an empty string)")
        ch = text[pos]
        if ch == '"':
            m = _DQ.match(text, pos)
            if not m:
                raise ArgumentSyntaxError(f"unterminated double quote in the value of {key}")
            try:
                value: Any = json.loads('"' + m.group(1) + '"')
            except ValueError:
                value = m.group(1)
            value = _format_inner(value, ns)  # quoted: always text
            pos = m.end()
        elif ch == "'":
            m = _SQ.match(text, pos)
            if not m:
                raise ArgumentSyntaxError(f"unterminated single quote in the value of {key}")
            value = _format_inner(m.group(1), ns)
            pos = m.end()
        elif ch in "[{" and not _WHOLE_EXPR.match(_BARE.match(text, pos).group(0)):  # type: ignore[union-attr]
            try:
                value, end = decoder.raw_decode(text, pos)
            except ValueError as exc:
                raise ArgumentSyntaxError(f"the value of {key} is not valid JSON ({exc})") from None
            pos = end
        else:
            m = _BARE.match(text, pos)
            assert m is not None
            value = _bare_value(m.group(0), ns)
            pos = m.end()
        if key in args:
            raise ArgumentSyntaxError(f"{key} is given twice")
        args[key] = value
        if pos < len(text) and not text[pos].isspace():
            raise ArgumentSyntaxError(f"unexpected text after the value of {key}: {text[pos:pos + 20]!r}")
    return args
