"""The wire contract: the committed TypeScript event types and the OpenAPI event schemas are
derived from events.py, and the derivation renders every kind of field the events use."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, TypedDict

import pytest

from astro_jupyter import events, wire_contract
from astro_jupyter.events import EVENT_TYPES, Event
from astro_jupyter.wire_contract import (
    UnsupportedAnnotation,
    openapi_event_schemas,
    openapi_type,
    ts_type,
    typescript_source,
    wire_fields,
)

ROOT = Path(__file__).resolve().parents[1]


def test_committed_typescript_matches_the_dataclasses() -> None:
    committed = (ROOT / wire_contract.TS_PATH).read_text(encoding="utf-8")
    assert committed == typescript_source(), (
        f"{wire_contract.TS_PATH} differs from astro_jupyter/events.py: run `python scripts/gen_event_types.py` and commit it"
    )
    assert committed.startswith("/*\n * GENERATED FILE, DO NOT EDIT.")


def test_generator_script_check_mode_agrees() -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_event_types.py"), "--check"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "up to date" in proc.stdout


def test_tokens_declares_no_event_shape_by_hand() -> None:
    tokens = (ROOT / "labextension" / "src" / "tokens.ts").read_text(encoding="utf-8")
    assert "export * from './events.generated';" in tokens
    for cls in EVENT_TYPES.values():
        assert not re.search(rf"interface {wire_contract.ts_event_name(cls.type)}\b", tokens), cls.type
    assert "type AgentEvent" not in tokens


def test_every_event_and_field_is_in_the_typescript() -> None:
    source = typescript_source()
    for event_type, cls in EVENT_TYPES.items():
        name = wire_contract.ts_event_name(event_type)
        block = source.split(f"export interface {name} {{", 1)[1].split("\n}", 1)[0]
        assert f"type: '{event_type}';" in block
        for f in wire_fields(cls):
            assert f"  {f.name}{'' if f.required else '?'}: " in block, (event_type, f.name)
        assert f"  | {name}" in source
    assert "  from: string;" in source and "from_model" not in source  # the wire key, not the Python name


# -- the mapping, on a synthetic event that uses every supported kind of annotation ----------


class _Point(TypedDict):
    x: float
    label: str | None


@dataclass(frozen=True)
class _Box:
    corners: list[_Point]
    kind: Literal["a", "b"] = "a"


@dataclass(frozen=True, kw_only=True)
class _Sample(Event):
    type: ClassVar[str] = "sample"
    name: str
    count: int
    ratio: float | None = None
    tags: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    box: _Box | None = None
    reason: events.DoneReason = "finished"
    payload: Any = None


def test_typescript_rendering_of_each_kind() -> None:
    rendered = {f.name: (ts_type(f.type), f.required) for f in wire_fields(_Sample)}
    assert rendered == {
        "subagent_id": ("string | null", False),
        "name": ("string", True),
        "count": ("number", True),
        "ratio": ("number | null", False),
        "tags": ("string[]", False),
        "extra": ("Record<string, unknown>", False),
        "box": ("I_Box | null", False),
        "reason": ("DoneReason", False),  # a named Literal alias of events.py keeps its name
        "payload": ("unknown", False),
    }
    assert ts_type(Literal["x", "it's"]) == "'x' | 'it\\'s'"
    assert ts_type(list[int | None]) == "Array<number | null>"
    assert wire_contract.nested_types([_Sample]) == [_Box, _Point]


def test_openapi_rendering_of_each_kind() -> None:
    schemas = {f.name: openapi_type(f.type) for f in wire_fields(_Sample)}
    assert schemas["count"] == {"type": "integer"}
    assert schemas["ratio"] == {"type": "number", "nullable": True}
    assert schemas["tags"] == {"type": "array", "items": {"type": "string"}}
    assert schemas["extra"] == {"type": "object", "additionalProperties": True}
    assert schemas["box"] == {"allOf": [{"$ref": "#/components/schemas/_Box"}], "nullable": True}
    assert schemas["reason"] == {"type": "string", "enum": ["finished", "cancelled", "max_steps", "error"]}
    assert schemas["payload"] == {}
    assert openapi_type(list[_Point]) == {"type": "array", "items": {"$ref": "#/components/schemas/_Point"}}


def test_unsupported_annotations_are_refused() -> None:
    with pytest.raises(UnsupportedAnnotation):
        ts_type(set[str])
    with pytest.raises(UnsupportedAnnotation):
        openapi_type(dict[int, str])
    with pytest.raises(UnsupportedAnnotation):
        openapi_type(Literal[1, 2])


def test_openapi_event_schemas_cover_every_event_and_field() -> None:
    schemas = openapi_event_schemas()
    union = schemas["AgentEvent"]
    assert union["discriminator"]["propertyName"] == "type"
    assert set(union["discriminator"]["mapping"]) == set(EVENT_TYPES)
    assert len(union["oneOf"]) == len(EVENT_TYPES)
    for event_type, cls in EVENT_TYPES.items():
        schema = schemas[wire_contract.openapi_schema_name(cls)]
        assert schema["properties"]["type"] == {"type": "string", "enum": [event_type]}
        wire_names = {f.name for f in wire_fields(cls)}
        assert set(schema["properties"]) == wire_names | {"type"}
        required = {f.name for f in wire_fields(cls) if f.required}
        assert set(schema["required"]) == required | {"type"}
    assert schemas["ToolProgressEvent"]["properties"]["progress"] == {"$ref": "#/components/schemas/ProgressInfo"}
    assert schemas["Todo"]["properties"]["status"]["enum"] == ["pending", "in_progress", "completed"]


def test_wire_dict_keys_are_the_schema_properties() -> None:
    """What to_wire really sends has exactly the documented keys (subagent_id only when set)."""
    schemas = openapi_event_schemas()
    sample = events.ModelSwitch(from_model="a", to_model="b", subagent_id="sub_1")
    wire = sample.to_wire()
    assert set(wire) == set(schemas["ModelSwitchEvent"]["properties"])
    for cls in EVENT_TYPES.values():
        names = {f.name for f in dataclasses.fields(cls)}
        assert len(names) == len(wire_fields(cls))
