"""validate_and_prepare helpers: argument parsing, a small JSON-Schema check, loop detection.

Models produce malformed JSON, forget required keys and sometimes repeat the same call
forever. Each of these becomes an error result the model can read and correct, never
an exception. The schema check covers what tool schemas here use (type, required,
properties, additionalProperties, enum, items, min/max, lengths) and runs in
microseconds, which matters because it runs on every call of every turn.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidInput
from ..textsafe import clean_text, clean_value

# No tool schema nests beyond a few levels; deeper arguments are hostile or broken, and refusing
# them here keeps every later encode/compare/store far from the interpreter's recursion limit.
MAX_ARGUMENT_DEPTH = 32

_TYPE_NAMES = {
    bool: "boolean",
    int: "integer",
    float: "number",
    str: "string",
    list: "array",
    dict: "object",
    type(None): "null",
}


class ArgumentError(InvalidInput):
    """The arguments cannot be used; the message is written for the model."""


def parse_arguments(raw: str | dict[str, Any] | None) -> dict[str, Any]:
    """Decode the model's argument string; empty means no arguments."""
    if isinstance(raw, dict):
        return raw
    text = (raw or "").strip()
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError as exc:
        snippet = text if len(text) <= 200 else text[:200] + "..."
        raise ArgumentError(f"arguments are not valid JSON ({exc}): {clean_text(snippet)}") from None
    except RecursionError:  # e.g. 100 000 nested brackets: the decoder gives up, the run must not
        raise ArgumentError(f"arguments nest deeper than {MAX_ARGUMENT_DEPTH} levels") from None
    if not isinstance(value, dict):
        raise ArgumentError(f"arguments must be a JSON object, got {_type_name(value)}")
    if _depth(value) > MAX_ARGUMENT_DEPTH:
        raise ArgumentError(f"arguments nest deeper than {MAX_ARGUMENT_DEPTH} levels")
    return clean_value(value)  # "\ud800" escapes decode to lone surrogates: replaced before any tool sees them


def _depth(value: Any) -> int:
    """Nesting depth of a decoded JSON value, iteratively (no recursion on hostile input)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            items: Any = item.values()
        elif isinstance(item, list):
            items = item
        else:
            continue
        deepest = max(deepest, depth)
        if deepest > MAX_ARGUMENT_DEPTH:
            return deepest
        stack.extend((child, depth + 1) for child in items)
    return deepest


def canonical_arguments(args: Any) -> str:
    """A stable string for comparing calls (key order and spacing ignored)."""
    try:
        return json.dumps(args, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(args)


def _type_name(value: Any) -> str:
    return _TYPE_NAMES.get(type(value), type(value).__name__)


def _is_type(value: Any, expected: str) -> bool:
    if expected == "string":
        return isinstance(value, str)
    if expected == "boolean":
        return isinstance(value, bool)
    if expected == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    if expected == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if expected == "object":
        return isinstance(value, dict)
    if expected == "array":
        return isinstance(value, list)
    if expected == "null":
        return value is None
    return True  # unknown type keyword: do not reject what we do not understand


def schema_errors(value: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """Every problem of ``value`` against ``schema``, as readable sentences."""
    errors: list[str] = []
    where = path or "arguments"
    expected = schema.get("type")
    if expected is not None:
        types = expected if isinstance(expected, list) else [expected]
        if not any(_is_type(value, t) for t in types):
            return [f"{where}: expected {' or '.join(types)}, got {_type_name(value)}"]
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where}: {value!r} is not one of {schema['enum']!r}")
    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            errors.append(f"{where}: shorter than {schema['minLength']} characters")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errors.append(f"{where}: longer than {schema['maxLength']} characters")
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(f"{where}: {value} is below the minimum {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(f"{where}: {value} is above the maximum {schema['maximum']}")
    elif isinstance(value, dict):
        props: dict[str, Any] = schema.get("properties") or {}
        for key in schema.get("required") or ():
            if key not in value:
                errors.append(f"missing required argument {_join(path, key)!r}")
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in props:
                errors.extend(schema_errors(item, props[key], _join(path, key)))
            elif extra is False:
                allowed = ", ".join(sorted(props)) or "none"
                errors.append(f"unknown argument {_join(path, key)!r} (allowed: {allowed})")
            elif isinstance(extra, dict):
                errors.extend(schema_errors(item, extra, _join(path, key)))
    elif isinstance(value, list):
        items = schema.get("items")
        if "minItems" in schema and len(value) < schema["minItems"]:
            errors.append(f"{where}: fewer than {schema['minItems']} items")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errors.append(f"{where}: more than {schema['maxItems']} items")
        if isinstance(items, dict):
            for i, item in enumerate(value):
                errors.extend(schema_errors(item, items, f"{where}[{i}]"))
    return errors


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def validate_arguments(args: dict[str, Any], schema: dict[str, Any]) -> None:
    """Raise ``ArgumentError`` naming every problem; silent when the arguments fit."""
    errors = schema_errors(args, schema or {})
    if errors:
        raise ArgumentError("invalid arguments: " + "; ".join(errors))


@dataclass
class DuplicateDetector:
    """Counts consecutive identical (tool, arguments) calls across the turns of one run."""

    threshold: int = 3
    _last: tuple[str, str] | None = field(default=None, repr=False)
    count: int = 0

    def observe(self, name: str, args: Any) -> int:
        """Record a call; return how many identical calls in a row it completes."""
        key = (name, canonical_arguments(args))
        if key == self._last:
            self.count += 1
        else:
            self._last, self.count = key, 1
        return self.count

    def is_loop(self, name: str, args: Any) -> bool:
        return self.threshold > 0 and self.observe(name, args) >= self.threshold

    def reset(self) -> None:
        self._last, self.count = None, 0
