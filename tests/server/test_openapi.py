"""The OpenAPI document against the handlers the server really registered."""

from __future__ import annotations

import re
from typing import Any

import pytest
from tornado.routing import PathMatches, Rule
from tornado.web import RequestHandler

from tests.server.conftest import Api

VERBS = ("get", "post", "put", "patch", "delete", "options")


def _astro_rules(router: Any) -> list[Rule]:
    found: list[Rule] = []
    for rule in getattr(router, "rules", []):
        target = rule.target
        if isinstance(target, type) and issubclass(target, RequestHandler):
            if target.__module__.startswith("astro_jupyter.server"):
                found.append(rule)
        else:
            found.extend(_astro_rules(target))
    return found


def _template(pattern: str, base_url: str) -> str:
    path = pattern.rstrip("$")
    path = re.sub(r"\(\?P<(\w+)>[^)]*\)", r"{\1}", path)
    path = path.replace("\\.", ".")
    assert path.startswith(base_url), (path, base_url)
    return "/" + path[len(base_url):]


def _verbs(handler: type[RequestHandler]) -> set[str]:
    """Verbs the handler class itself (or an astro base) implements; the base's refusing OPTIONS is not one."""
    from astro_jupyter.server.base import AstroHandler

    verbs = set()
    for verb in VERBS:
        impl = getattr(handler, verb)
        if impl is getattr(RequestHandler, verb):
            continue
        owner = next(k for k in handler.__mro__ if verb in vars(k))
        if verb == "options" and owner is AstroHandler:
            continue
        if owner.__module__.startswith("astro_jupyter.server"):
            verbs.add(verb)
    return verbs


async def test_document_matches_registered_handlers(api: Api, jp_serverapp: Any, jp_base_url: str) -> None:
    status, doc = await api("GET", "astro/api/openapi.json")
    assert status == 200 and doc["openapi"].startswith("3.")
    registered: dict[str, set[str]] = {}
    for rule in _astro_rules(jp_serverapp.web_app.default_router):
        assert isinstance(rule.matcher, PathMatches)
        registered[_template(rule.matcher.regex.pattern, jp_base_url)] = _verbs(rule.target)
    documented = {path: set(ops) for path, ops in doc["paths"].items()}
    assert set(registered) == set(documented)
    for path in registered:
        assert registered[path] == documented[path], path
    # every operation says what it answers, and errors share one schema
    for path, ops in doc["paths"].items():
        for verb, op in ops.items():
            assert op["summary"] and op["responses"], (path, verb)
    assert doc["components"]["schemas"]["Error"]["required"] == ["message", "reason"]
    assert doc["servers"] == [{"url": jp_base_url.rstrip("/")}]


async def test_document_is_valid_openapi(api: Api) -> None:
    validator = pytest.importorskip("openapi_spec_validator")
    status, doc = await api("GET", "astro/api/openapi.json")
    validator.validate(doc)  # raises with the offending path if the document is not OpenAPI 3


async def test_document_carries_every_event_type_and_field(api: Api) -> None:
    """The served document's event schemas come from events.py: every type, every wire field."""
    from astro_jupyter.events import EVENT_TYPES
    from astro_jupyter.wire_contract import openapi_schema_name, wire_fields

    status, doc = await api("GET", "astro/api/openapi.json")
    assert status == 200
    schemas = doc["components"]["schemas"]
    mapping = schemas["AgentEvent"]["discriminator"]["mapping"]
    assert set(mapping) == set(EVENT_TYPES)
    for event_type, cls in EVENT_TYPES.items():
        name = openapi_schema_name(cls)
        assert mapping[event_type] == f"#/components/schemas/{name}"
        props = schemas[name]["properties"]
        assert props["type"]["enum"] == [event_type]
        for f in wire_fields(cls):
            assert f.name in props, (event_type, f.name)
    assert schemas["ModelSwitchEvent"]["properties"]["from"] == {"type": "string"}
    assert schemas["NotebookRequestEvent"]["properties"]["action"]["enum"] == ["read", "edit", "run"]
    assert schemas["SearchHit"]["properties"]["snippet_html"] == {"type": "string"}
