"""``GET astro/api/openapi.json``: the OpenAPI 3 document of every astro route.

The routes are written by hand as data (the contract the sidebar and scripts code against);
a test checks them against the handlers the server actually registered, path by path and
verb by verb. The event schemas are not written here: ``wire_contract`` derives them from
the dataclasses of ``events.py`` each time the document is built, so they cannot drift.
"""

from __future__ import annotations

from typing import Any

from jupyter_server.auth.decorator import authorized
from tornado import web

from .._version import __version__
from ..wire_contract import openapi_event_schemas
from .base import AUTH_RESOURCE, AstroHandler


def _obj(props: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        out["required"] = required
    return out


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any], description: str = "OK") -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _body(schema: dict[str, Any], required: bool = True) -> dict[str, Any]:
    return {"required": required, "content": {"application/json": {"schema": schema}}}


_STR = {"type": "string"}
_ERRORS = {
    "400": {"$ref": "#/components/responses/Error"},
    "403": {"$ref": "#/components/responses/Error"},
    "404": {"$ref": "#/components/responses/Error"},
}


def _op(summary: str, responses: dict[str, Any], *, body: dict[str, Any] | None = None,
        params: list[dict[str, Any]] | None = None, security: bool = True) -> dict[str, Any]:
    op: dict[str, Any] = {"summary": summary, "responses": {**responses, **_ERRORS}}
    if body is not None:
        op["requestBody"] = body
    if params:
        op["parameters"] = params
    if not security:
        op["security"] = [{"bookmarkletToken": []}]
    return op


def _path_param(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": _STR}


def _query(name: str, schema: dict[str, Any] | None = None, required: bool = False) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": required, "schema": schema or _STR}


def build_document(base_url: str = "/") -> dict[str, Any]:
    sid, rid = [_path_param("session_id")], [_path_param("run_id")]
    paths: dict[str, Any] = {
        "/astro/api/runs": {
            "post": _op("Start a run (a new session unless session_id is given)", {"201": _json(_obj({"run_id": _STR, "session_id": _STR}))},
                        body=_body(_ref("RunRequest"))),
        },
        "/astro/api/runs/{run_id}/events": {
            "get": _op(
                "The run's events as Server-Sent Events (id: seq, data: one AgentEvent as JSON); Last-Event-ID resumes",
                {"200": {"description": "text/event-stream; each `data:` line is one AgentEvent (components/schemas/AgentEvent)",
                         "content": {"text/event-stream": {"schema": _STR}}},
                 "204": {"description": "the run is over and Last-Event-ID is its last event: nothing to send"}},
                params=[*rid, {"name": "Last-Event-ID", "in": "header", "schema": {"type": "integer"}},
                        _query("last_event_id", {"type": "integer"})],
            ),
        },
        "/astro/api/runs/{run_id}/cancel": {
            "post": _op("Stop the run (Block tools finish first)", {"202": _json(_obj({"run_id": _STR, "status": _STR}))}, params=rid),
        },
        "/astro/api/runs/{run_id}/answers": {
            "post": _op("Answer an ask_user question, a permission request (text) or a notebook_request (object; "
                        "docs/notebook-bridge.md)",
                        {"200": _json(_obj({"run_id": _STR, "request_id": _STR, "accepted": {"type": "boolean"}}))},
                        body=_body(_obj({"request_id": _STR, "answer": {}}, ["request_id", "answer"])), params=rid),
        },
        "/astro/api/sessions": {
            "get": _op("The caller's sessions, newest first", {"200": _json(_obj({"sessions": {"type": "array", "items": _ref("Session")}}))},
                       params=[_query("limit", {"type": "integer"}), _query("offset", {"type": "integer"})]),
            "post": _op("Create a session", {"201": _json(_ref("Session"))}, body=_body(_obj({"title": _STR}), required=False)),
        },
        "/astro/api/sessions/demo": {
            "post": _op("The demo's recorded session for the caller, imported on first ask (works with no LLM endpoint); "
                        "reopen it to replay", {"200": _json(_ref("Session"))}),
        },
        "/astro/api/sessions/{session_id}": {
            "get": _op("A session with its runs", {"200": _json(_ref("Session"))}, params=sid),
            "patch": _op("Rename a session and/or set its coordinator mode (at least one field)", {"200": _json(_ref("Session"))},
                         body=_body(_ref("SessionPatch")), params=sid),
            "delete": _op("Delete a session and its messages (409 while a run is active)", {"204": {"description": "deleted"}}, params=sid),
        },
        "/astro/api/sessions/{session_id}/messages": {
            "get": _op("The session's messages in order", {"200": _json(_obj({"session_id": _STR, "messages": {"type": "array", "items": {"type": "object"}}}))}, params=sid),
        },
        "/astro/api/sessions/{session_id}/events": {
            "get": _op("The stored events of the session's runs (runs in start order, each run's in seq order) for a "
                       "client to replay; consecutive text/thinking deltas of one step are folded into one event "
                       "carrying the last seq. Pass `next_cursor` back as `cursor` for the next page (null: no more)",
                       {"200": _json(_obj({"session_id": _STR, "events": {"type": "array", "items": _ref("StoredEvent")},
                                           "next_cursor": {"type": "string", "nullable": True}},
                                          ["session_id", "events", "next_cursor"]))},
                       params=[*sid, _query("cursor"), _query("limit", {"type": "integer", "minimum": 1, "maximum": 100000})]),
        },
        "/astro/api/sessions/{session_id}/history": {
            "get": _op("What a reopened sidebar rebuilds a session from, in one reply of JSON lines: "
                       "`{\"session\": Session}` first, then `{\"messages\": [...]}` parts (each message's id, run_id, role, "
                       "created_at, tool_call_id, the ids of its tool_calls and, but for tool results, its content), then "
                       "`{\"events\": [StoredEvent, ...]}` parts (every page of the events route, in order)",
                       {"200": {"description": "JSON lines", "content": {"application/x-ndjson": {"schema": {"type": "object"}}}}},
                       params=sid),
        },
        "/astro/api/sessions/{session_id}/export": {
            "get": _op("The session as a .ipynb research log (501 until the export module is installed)",
                       {"200": {"description": "notebook", "content": {"application/x-ipynb+json": {"schema": {"type": "object"}}}},
                        "501": {"$ref": "#/components/responses/Error"}}, params=sid),
        },
        "/astro/api/search/history": {
            "get": _op("Full-text search over the caller's sessions and messages; snippets mark matches with «». "
                       "The newest `window` matches are ranked first; pass `next_cursor` back as `cursor` for more results",
                       {"200": _json(_obj({"query": _STR, "session_id": {"type": "string", "nullable": True}, "results": {"type": "array", "items": _ref("SearchHit")},
                                           "next_cursor": {"type": "string", "nullable": True}, "window": {"type": "integer"}}))},
                       params=[_query("q", required=True), _query("session_id"), _query("limit", {"type": "integer"}), _query("cursor")]),
        },
        "/astro/api/papers": {
            "get": _op("The paper library with each paper's state", {"200": _json(_obj({"papers": {"type": "array", "items": _ref("Paper")}}))},
                       params=[_query("state", {"type": "string", "enum": ["metadata", "downloaded", "parsed"]}), _query("limit", {"type": "integer"})]),
            "post": _op("Add a paper by arXiv id, DOI, bibcode or URL; download + parse are queued",
                        {"201": _json(_ref("Paper"))}, body=_body(_obj({"identifier": _STR, "download": {"type": "boolean"}}, ["identifier"]))),
        },
        "/astro/api/papers/{paper_id}": {
            "get": _op("One paper by library id or identifier", {"200": _json(_ref("Paper"))}, params=[_path_param("paper_id")]),
            "delete": _op("Remove a paper from the library: its passages, PDF copy and Markdown (notes stay)",
                          {"200": _json(_obj({"removed": _STR, "chunks": {"type": "integer"}}))}, params=[_path_param("paper_id")]),
        },
        "/astro/api/notes": {
            "get": _op("Notes, optionally of one paper or session, or matching q", {"200": _json(_obj({"notes": {"type": "array", "items": {"type": "object"}}})),
                                                                   "501": {"$ref": "#/components/responses/Error"}},
                       params=[_query("paper_id"), _query("session_id"), _query("q")]),
            "post": _op("Save a note on a library paper (a quote, a comment or both)", {"201": _json({"type": "object"}), "501": {"$ref": "#/components/responses/Error"}},
                        body=_body(_obj({"paper_id": _STR, "comment": _STR, "quote": _STR, "page": {"type": "integer"},
                                         "section": _STR, "session_id": _STR}, ["paper_id"]))),
        },
        "/astro/api/catalog-results/{result_id}": {
            "get": _op("Download a stored query_catalog / cone_search result of the caller (VOTable or CSV)",
                       {"200": {"description": "the table", "content": {
                           "application/x-votable+xml": {"schema": {"type": "string", "format": "binary"}},
                           "text/csv": {"schema": _STR}}}},
                       params=[_path_param("result_id"),
                               _query("format", {"type": "string", "enum": ["votable", "csv"], "default": "votable"})]),
        },
        "/astro/api/models": {
            "get": _op("The caller's current model and the endpoint's models (configured ones + warning when unreachable)", {"200": _json(_ref("Models"))}),
        },
        "/astro/api/models/current": {
            "put": _op("Switch the caller's model for its next runs (other users keep theirs)", {"200": _json(_obj({"current": _STR, "previous": _STR}))},
                       body=_body(_obj({"model": _STR}, ["model"]))),
        },
        "/astro/api/auth/me": {
            "get": _op("The Jupyter identity of the request", {"200": _json(_obj({"username": _STR, "name": _STR, "display_name": _STR, "owner": _STR}))}),
        },
        "/astro/api/openapi.json": {
            "get": _op("This document", {"200": _json({"type": "object"})}),
        },
        "/astro/bookmarklet": {
            "get": _op("HTML page of the bookmarklet (a GET changes nothing; its button POSTs to the token route)",
                       {"200": {"description": "HTML", "content": {"text/html": {"schema": _STR}}}}),
        },
        "/astro/api/bookmarklet/token": {
            "post": _op("Make or replace the bookmarklet token (the old one stops working), or {revoke: true}; XSRF-checked for cookie sessions",
                        {"201": _json(_obj({"token": _STR, "intake_url": _STR, "bookmarklet": _STR})),
                         "200": _json(_obj({"revoked": {"type": "boolean"}}))},
                        body=_body(_obj({"revoke": {"type": "boolean"}}), required=False)),
        },
        "/astro/api/bookmarklet/intake": {
            "post": _op("Queue one arXiv id / bibcode / DOI / URL (bookmarklet token only; CORS for any origin; 429 past the rate)",
                        {"202": _json(_obj({"queued": {"type": "boolean"}, "id": {"type": "integer"}, "identifier": _STR, "kind": _STR})),
                         "429": {"$ref": "#/components/responses/Error"}},
                        body=_body(_obj({"identifier": _STR, "token": _STR, "page_url": _STR, "page_title": _STR}, ["identifier"])),
                        security=False),
            "options": {"summary": "CORS preflight", "security": [], "responses": {"204": {"description": "preflight"}}},
        },
    }
    return {
        "openapi": "3.0.3",
        "info": {"title": "astro-jupyter server extension", "version": __version__},
        "servers": [{"url": base_url.rstrip("/") or "/"}],
        "security": [{"jupyterToken": []}, {"jupyterCookie": []}],
        "paths": paths,
        "components": {
            "securitySchemes": {
                "jupyterToken": {"type": "apiKey", "in": "header", "name": "Authorization",
                                 "description": "`token <jupyter token>` (scripts); no XSRF needed"},
                "jupyterCookie": {"type": "apiKey", "in": "cookie", "name": "username-<host>",
                                  "description": "login cookie; mutating requests also need X-XSRFToken"},
                "bookmarkletToken": {"type": "http", "scheme": "bearer", "description": "the per-user bookmarklet token"},
            },
            "responses": {"Error": _json(_ref("Error"), "error as {message, reason}")},
            "schemas": {
                "Error": _obj({"message": _STR, "reason": _STR}, ["message", "reason"]),
                "RunRequest": _obj({"prompt": _STR, "session_id": _STR, "model": _STR, "coordinator": {"type": "boolean"},
                                    "max_steps": {"type": "integer", "minimum": 1, "maximum": 200},
                                    "notebook": _ref("NotebookContext")}, ["prompt"]),
                "NotebookContext": _obj({"path": _STR, "cell_ids": {"type": "array", "items": _STR},
                                         "bridge": {"type": "boolean"}}, ["path"]),
                "SessionPatch": {**_obj({"title": _STR, "coordinator": {"type": "boolean"}}),
                                 "minProperties": 1},
                "Session": _obj({"id": _STR, "title": _STR, "summary": _STR, "owner": _STR, "model": _STR, "source": _STR,
                                 "coordinator": {"type": "boolean"},
                                 "created_at": _STR, "updated_at": _STR, "active_run_id": {"type": "string", "nullable": True},
                                 "runs": {"type": "array", "items": {"type": "object"}},
                                 "usage": _obj({"runs": {"type": "integer"}, "prompt_tokens": {"type": "integer"},
                                                "completion_tokens": {"type": "integer"},
                                                "cost_usd": {"type": "number", "nullable": True},
                                                "unpriced_runs": {"type": "integer"}})}),
                "SearchHit": _obj({"session_id": _STR, "session_title": _STR, "message_id": {"type": "integer", "nullable": True},
                                   "role": _STR, "snippet": _STR, "snippet_html": _STR, "rank": {"type": "number"}, "created_at": _STR}),
                "Paper": _obj({"id": _STR, "arxiv_id": _STR, "doi": _STR, "bibcode": _STR, "title": _STR, "state": _STR,
                               "intake_id": {"type": "integer", "nullable": True}}),
                **openapi_event_schemas(),
                "StoredEvent": _obj({"run_id": _STR, "seq": {"type": "integer"}, "time": _STR, "event": _ref("AgentEvent")},
                                    ["run_id", "seq", "time", "event"]),
                "Models": _obj({"current": _STR, "models": {"type": "array", "items": _STR}, "configured": {"type": "array", "items": _STR},
                                "source": {"type": "string", "enum": ["endpoint", "config", "none"]}, "warning": {"type": "string", "nullable": True}}),
            },
        },
    }


class OpenApiHandler(AstroHandler):
    auth_resource = AUTH_RESOURCE

    @web.authenticated
    @authorized
    async def get(self) -> None:
        self.write_json(build_document(self.settings.get("base_url", "/")))


handlers = [
    (r"astro/api/openapi.json", OpenApiHandler),
]
