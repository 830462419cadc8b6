"""The wire contract of the events, derived from ``events.py`` (the one source of truth).

Two renderings of the same field introspection, so neither can drift from the dataclasses:

- ``typescript_source()``: the sidebar's event types, committed as
  ``labextension/src/events.generated.ts`` by ``scripts/gen_event_types.py`` (a test fails
  when the committed file differs from this output);
- ``openapi_event_schemas()``: the OpenAPI 3.0 component schemas of every event and their
  ``AgentEvent`` union, built when the openapi route serves its document.

A field with a default may be absent from a wire dict (``from_wire`` fills it in), so it is
optional in both renderings; fields without a default are required. Supported annotations:
``str``/``int``/``float``/``bool``, ``Any``, ``Literal[...]``, ``X | None``, ``list[X]``,
``dict[str, X]``, and nested dataclasses or ``TypedDict``s (rendered as named types).
"""

from __future__ import annotations

import dataclasses
import types
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints, is_typeddict

from . import events
from .errors import AstroError
from .events import EVENT_TYPES, Event, wire_field_name

GENERATOR = "scripts/gen_event_types.py"
TS_PATH = "labextension/src/events.generated.ts"


@dataclasses.dataclass(frozen=True)
class WireField:
    """One field as it appears on the wire: its JSON key, its Python type, whether it must be present."""

    name: str
    type: Any
    required: bool


class UnsupportedAnnotation(AstroError, TypeError):
    """An event field uses a type the wire contract cannot express (fix the annotation, not the generator)."""


def _is_named(tp: Any) -> bool:
    return isinstance(tp, type) and (dataclasses.is_dataclass(tp) or is_typeddict(tp))


def wire_fields(cls: type) -> list[WireField]:
    """The wire fields of an event (or nested) class, in declaration order."""
    hints = get_type_hints(cls)
    if dataclasses.is_dataclass(cls):
        out = []
        for f in dataclasses.fields(cls):
            required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            out.append(WireField(wire_field_name(f.name), hints[f.name], required))
        return out
    if is_typeddict(cls):
        return [WireField(name, tp, name in cls.__required_keys__) for name, tp in hints.items()]
    raise UnsupportedAnnotation(f"{cls!r} is neither a dataclass nor a TypedDict")


def literal_aliases() -> dict[Any, str]:
    """Module-level ``Name = Literal[...]`` aliases of events.py (rendered by name, not inline)."""
    return {value: name for name, value in vars(events).items() if get_origin(value) is Literal and not name.startswith("_")}


def _optional_inner(tp: Any) -> Any | None:
    """``X`` for ``X | None`` (or ``Optional[X]``), else None."""
    if get_origin(tp) in (Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        if len(args) == 1 and len(get_args(tp)) == 2:
            return args[0]
    return None


def nested_types(classes: list[type]) -> list[type]:
    """Every dataclass / TypedDict reachable from ``classes``' fields, first seen first."""
    seen: list[type] = []

    def visit(tp: Any) -> None:
        if _is_named(tp):
            if tp not in seen and tp not in classes:
                seen.append(tp)
                for f in wire_fields(tp):
                    visit(f.type)
            return
        for arg in get_args(tp):
            visit(arg)

    for cls in classes:
        for f in wire_fields(cls):
            visit(f.type)
    return seen


def event_classes() -> list[type[Event]]:
    return list(EVENT_TYPES.values())


# -- TypeScript ----------------------------------------------------------------------------------


def ts_event_name(event_type: str) -> str:
    """``text_delta`` → ``ITextDeltaEvent`` (the names the sidebar already used)."""
    return "I" + "".join(part.capitalize() for part in event_type.split("_")) + "Event"


def _ts_literal(value: Any) -> str:
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


def ts_type(tp: Any, aliases: dict[Any, str] | None = None) -> str:
    aliases = literal_aliases() if aliases is None else aliases
    if tp is Any or tp is object:
        return "unknown"
    if tp is str:
        return "string"
    if tp in (int, float):
        return "number"
    if tp is bool:
        return "boolean"
    if tp is type(None):
        return "null"
    if _is_named(tp):
        return "I" + tp.__name__
    origin = get_origin(tp)
    if origin is Literal:
        if tp in aliases:
            return aliases[tp]
        return " | ".join(_ts_literal(v) for v in get_args(tp))
    if origin in (Union, types.UnionType):
        parts = [ts_type(a, aliases) for a in get_args(tp)]
        return " | ".join(parts)
    if origin is list:
        (item,) = get_args(tp)
        inner = ts_type(item, aliases)
        return f"Array<{inner}>" if " " in inner else f"{inner}[]"
    if origin is dict:
        key, value = get_args(tp)
        if key is not str:
            raise UnsupportedAnnotation(f"dict keys must be str on the wire, not {key!r}")
        return f"Record<string, {ts_type(value, aliases)}>"
    raise UnsupportedAnnotation(f"no wire type for {tp!r}")


def _ts_interface(name: str, fields: list[WireField], doc: str, aliases: dict[Any, str], type_tag: str | None = None) -> str:
    lines = [f"/** {doc} */"] if doc else []
    lines.append(f"export interface {name} {{")
    if type_tag is not None:
        lines.append(f"  type: {_ts_literal(type_tag)};")
    for f in fields:
        lines.append(f"  {f.name}{'' if f.required else '?'}: {ts_type(f.type, aliases)};")
    lines.append("}")
    return "\n".join(lines)


def _doc(cls: type) -> str:
    """The first paragraph of a class's own docstring, on one line (dataclasses invent one: skipped)."""
    raw = cls.__dict__.get("__doc__") or ""
    if not raw or raw.startswith(cls.__name__ + "("):
        return ""
    return " ".join(raw.strip().split("\n\n")[0].split()).replace("``", "`").replace("*/", "* /")


def typescript_source() -> str:
    """The whole of ``events.generated.ts``."""
    aliases = literal_aliases()
    classes = event_classes()
    parts = [
        "/*",
        " * GENERATED FILE, DO NOT EDIT.",
        f" * Derived from astro_jupyter/events.py by {GENERATOR}; regenerate with",
        f" *   python {GENERATOR}",
        " * (tests/test_wire_contract.py fails when this file and the dataclasses differ).",
        " */",
        "",
    ]
    for value, name in sorted(aliases.items(), key=lambda kv: kv[1]):
        parts.append(f"export type {name} = {' | '.join(_ts_literal(v) for v in get_args(value))};")
        parts.append("")
    for tp in nested_types(classes):
        parts.append(_ts_interface("I" + tp.__name__, wire_fields(tp), _doc(tp), aliases))
        parts.append("")
    for cls in classes:
        parts.append(_ts_interface(ts_event_name(cls.type), wire_fields(cls), _doc(cls), aliases, type_tag=cls.type))
        parts.append("")
    parts.append("/** Every event of a run, discriminated by `type`. */")
    parts.append("export type AgentEvent =")
    parts.extend(f"  | {ts_event_name(cls.type)}" for cls in classes[:-1])
    parts.append(f"  | {ts_event_name(classes[-1].type)};")
    parts.append("")
    parts.append("export type EventType = AgentEvent['type'];")
    parts.append("")
    parts.append("/** The `type` of every event, in the order events.py declares them. */")
    parts.append("export const EVENT_TYPES: readonly EventType[] = [")
    parts.extend(f"  {_ts_literal(cls.type)}," for cls in classes[:-1])
    parts.append(f"  {_ts_literal(classes[-1].type)}")
    parts.append("];")
    return "\n".join(parts) + "\n"


# -- OpenAPI 3.0 -----------------------------------------------------------------------------------


def openapi_schema_name(cls: type) -> str:
    return "".join(p.capitalize() for p in cls.type.split("_")) + "Event" if issubclass(cls, Event) else cls.__name__


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def openapi_type(tp: Any) -> dict[str, Any]:
    if tp is Any or tp is object:
        return {}
    if tp is str:
        return {"type": "string"}
    if tp is int:
        return {"type": "integer"}
    if tp is float:
        return {"type": "number"}
    if tp is bool:
        return {"type": "boolean"}
    if _is_named(tp):
        return _ref(tp.__name__)
    inner = _optional_inner(tp)
    if inner is not None:
        schema = openapi_type(inner)
        if "$ref" in schema:
            return {"allOf": [schema], "nullable": True}
        return {**schema, "nullable": True}
    origin = get_origin(tp)
    if origin is Literal:
        values = get_args(tp)
        kinds = {type(v) for v in values}
        if kinds != {str}:
            raise UnsupportedAnnotation(f"only string Literals go on the wire, not {tp!r}")
        return {"type": "string", "enum": list(values)}
    if origin in (Union, types.UnionType):
        return {"oneOf": [openapi_type(a) for a in get_args(tp)]}
    if origin is list:
        (item,) = get_args(tp)
        return {"type": "array", "items": openapi_type(item)}
    if origin is dict:
        key, value = get_args(tp)
        if key is not str:
            raise UnsupportedAnnotation(f"dict keys must be str on the wire, not {key!r}")
        return {"type": "object", "additionalProperties": openapi_type(value) or True}
    raise UnsupportedAnnotation(f"no wire type for {tp!r}")


def _openapi_object(fields: list[WireField], doc: str, type_tag: str | None = None) -> dict[str, Any]:
    props: dict[str, Any] = {}
    required: list[str] = []
    if type_tag is not None:
        props["type"] = {"type": "string", "enum": [type_tag]}
        required.append("type")
    for f in fields:
        props[f.name] = openapi_type(f.type)
        if f.required:
            required.append(f.name)
    out: dict[str, Any] = {"type": "object", "properties": props, "required": required}
    if doc:
        out["description"] = doc
    return out


def openapi_event_schemas() -> dict[str, Any]:
    """Component schemas: one per event, the nested types, and ``AgentEvent`` (oneOf + discriminator)."""
    classes = event_classes()
    schemas: dict[str, Any] = {}
    for tp in nested_types(classes):
        schemas[tp.__name__] = _openapi_object(wire_fields(tp), _doc(tp))
    for cls in classes:
        schemas[openapi_schema_name(cls)] = _openapi_object(wire_fields(cls), _doc(cls), type_tag=cls.type)
    schemas["AgentEvent"] = {
        "description": "One event of a run (SSE `data:`, `astro-jupyter ask --json` lines, stored events); see events.py",
        "oneOf": [_ref(openapi_schema_name(cls)) for cls in classes],
        "discriminator": {
            "propertyName": "type",
            "mapping": {cls.type: f"#/components/schemas/{openapi_schema_name(cls)}" for cls in classes},
        },
    }
    return schemas


__all__ = [
    "TS_PATH",
    "GENERATOR",
    "UnsupportedAnnotation",
    "WireField",
    "event_classes",
    "nested_types",
    "openapi_event_schemas",
    "openapi_type",
    "ts_type",
    "typescript_source",
    "wire_fields",
]
