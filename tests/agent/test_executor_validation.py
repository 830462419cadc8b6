"""The argument checks of validate_and_prepare, on their own (the executor tests cover the wiring)."""

from __future__ import annotations

import pytest

from astro_jupyter.agent.validation import (
    ArgumentError,
    DuplicateDetector,
    parse_arguments,
    schema_errors,
    validate_arguments,
)

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "radius": {"type": "number", "minimum": 0, "maximum": 180},
        "limit": {"type": "integer"},
        "catalogs": {"type": "array", "items": {"type": "string", "enum": ["SIMBAD", "NED", "VizieR"]}},
        "exact": {"type": "boolean"},
        "epoch": {"type": ["string", "null"]},
    },
    "required": ["name"],
}


def test_empty_argument_string_means_no_arguments() -> None:
    assert parse_arguments("") == {} and parse_arguments("  ") == {} and parse_arguments(None) == {}


def test_parse_errors_are_readable() -> None:
    with pytest.raises(ArgumentError, match="not valid JSON"):
        parse_arguments('{"name": ')
    with pytest.raises(ArgumentError, match="got string"):
        parse_arguments('"M31"')


def test_valid_arguments_pass() -> None:
    validate_arguments(
        {"name": "M31", "radius": 0.5, "limit": 10.0, "catalogs": ["SIMBAD"], "exact": True, "epoch": None}, SCHEMA
    )


@pytest.mark.parametrize(
    "args, message",
    [
        ({}, "missing required argument 'name'"),
        ({"name": ""}, "name: shorter than 1 characters"),
        ({"name": "M31", "radius": -1}, "radius: -1 is below the minimum 0"),
        ({"name": "M31", "radius": "1"}, "radius: expected number, got string"),
        ({"name": "M31", "limit": True}, "limit: expected integer, got boolean"),
        ({"name": "M31", "limit": 2.5}, "limit: expected integer, got number"),
        ({"name": "M31", "catalogs": ["SIMBAD", "2MASS"]}, "catalogs[1]: '2MASS' is not one of"),
        ({"name": "M31", "exact": "yes"}, "exact: expected boolean, got string"),
        ({"name": "M31", "epoch": 2000}, "epoch: expected string or null, got integer"),
    ],
)
def test_each_problem_is_named(args: dict, message: str) -> None:
    with pytest.raises(ArgumentError) as info:
        validate_arguments(args, SCHEMA)
    assert message in str(info.value)


def test_all_problems_are_reported_at_once() -> None:
    errors = schema_errors({"radius": 500, "exact": 1}, SCHEMA)
    assert len(errors) == 3


def test_duplicate_detector_threshold_and_disable() -> None:
    d = DuplicateDetector(threshold=2)
    assert not d.is_loop("a", {"x": 1}) and d.is_loop("a", {"x": 1})
    assert not d.is_loop("a", {"x": 2})
    off = DuplicateDetector(threshold=0)
    assert not any(off.is_loop("a", {}) for _ in range(10))
