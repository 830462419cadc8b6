"""Sessions: list, create, rename, delete, their messages and stored events (``astro/api/sessions``)."""

from __future__ import annotations

import re
from typing import Any, AsyncIterator

from jupyter_server.auth.decorator import authorized
from tornado import web

from .base import AUTH_RESOURCE, AstroHandler
from ..errors import InvalidRequest

NDJSON = "application/x-ndjson; charset=utf-8"
ID = r"(?P<session_id>[A-Za-z0-9_.:-]{1,128})"


class SessionsHandler(AstroHandler):
    auth_resource = AUTH_RESOURCE

    @web.authenticated
    @authorized
    async def get(self) -> None:
        limit = self.int_arg("limit", 200, 1, 1000)
        offset = self.int_arg("offset", 0, 0, 1_000_000)
        sessions = await self.service.list_sessions(self.owner, limit=limit, offset=offset)
        self.write_json({"sessions": sessions})

    @web.authenticated
    @authorized
    async def post(self) -> None:
        body = self.json_body(required=False)
        session = await self.service.create_session(self.owner, title=body.get("title") or "")
        self.set_header("Location", self.request.path.rstrip("/") + "/" + session["id"])
        self.write_json(session, status=201)


class DemoSessionHandler(AstroHandler):
    """The demo's recorded session for the caller (imported on first ask): needs no LLM endpoint."""

    auth_resource = AUTH_RESOURCE

    @web.authenticated
    @authorized
    async def post(self) -> None:
        self.write_json(await self.service.demo_session(self.owner))


class SessionHandler(AstroHandler):
    auth_resource = AUTH_RESOURCE

    @web.authenticated
    @authorized
    async def get(self, session_id: str) -> None:
        self.write_json(await self.service.get_session(self.owner, session_id))

    @web.authenticated
    @authorized
    async def patch(self, session_id: str) -> None:
        body = self.json_body()
        if "title" not in body and "coordinator" not in body:
            raise InvalidRequest('PATCH takes {"title": "...", "coordinator": true|false} (at least one)')
        if body.get("title", "") is None or body.get("coordinator", False) is None:
            raise InvalidRequest("'title' and 'coordinator' cannot be null")
        self.write_json(
            await self.service.update_session(
                self.owner, session_id, title=body.get("title"), coordinator=body.get("coordinator")
            )
        )

    @web.authenticated
    @authorized
    async def delete(self, session_id: str) -> None:
        await self.service.delete_session(self.owner, session_id)
        self.set_status(204)
        self.finish()


class SessionMessagesHandler(AstroHandler):
    auth_resource = AUTH_RESOURCE

    @web.authenticated
    @authorized
    async def get(self, session_id: str) -> None:
        messages = await self.service.session_messages(self.owner, session_id)
        self.write_json({"session_id": session_id, "messages": messages})


class SessionEventsHandler(AstroHandler):
    """The stored events of the session's runs, paged, for the sidebar to replay on reopen."""

    auth_resource = AUTH_RESOURCE

    @web.authenticated
    @authorized
    async def get(self, session_id: str) -> None:
        limit = self.int_arg("limit", 0, 1, 100_000) or None  # None: the app's page size
        cursor = self.get_argument("cursor", None) or None
        self.write_json(await self.service.session_events(self.owner, session_id, cursor=cursor, limit=limit))


class SessionHistoryHandler(AstroHandler):
    """A session as a reopened sidebar rebuilds it, in one reply: JSON lines (``session``, then
    ``messages`` parts, then ``events`` parts; see ``AstroApp.session_history``)."""

    auth_resource = AUTH_RESOURCE

    @web.authenticated
    @authorized
    async def get(self, session_id: str) -> None:
        lines = self.service.session_history(self.owner, session_id)
        first = await anext(lines)  # a session the caller may not see is a JSON error, not a stream
        self.set_header("Content-Type", NDJSON)
        self.write(first + "\n")
        async for n, line in _numbered(lines):
            self.write(line + "\n")
            if n % 16 == 0:
                await self.flush()  # the browser parses what came while the rest is read
        self.finish(set_content_type=NDJSON)


class SessionExportHandler(AstroHandler):
    """The session as an ``.ipynb`` research log (``astro_jupyter/export.py``, from the magics issue)."""

    auth_resource = AUTH_RESOURCE

    @web.authenticated
    @authorized
    async def get(self, session_id: str) -> None:
        import nbformat

        session, notebook = await self.service.export_session(self.owner, session_id)
        name = _filename(session.title or session_id)
        self.set_header("Content-Disposition", f'attachment; filename="{name}.ipynb"')
        self.finish(nbformat.writes(notebook), set_content_type="application/x-ipynb+json")


async def _numbered(parts: AsyncIterator[Any]) -> AsyncIterator[tuple[int, Any]]:
    n = 0
    async for part in parts:
        n += 1
        yield n, part


def _filename(title: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", title).strip("-")[:80] or "session"


handlers = [
    (r"astro/api/sessions", SessionsHandler),
    (r"astro/api/sessions/demo", DemoSessionHandler),  # before the id route, which would take "demo"
    (rf"astro/api/sessions/{ID}", SessionHandler),
    (rf"astro/api/sessions/{ID}/messages", SessionMessagesHandler),
    (rf"astro/api/sessions/{ID}/events", SessionEventsHandler),
    (rf"astro/api/sessions/{ID}/history", SessionHistoryHandler),
    (rf"astro/api/sessions/{ID}/export", SessionExportHandler),
]
