"""Runs: start one, cancel it, answer its questions (``astro/api/runs``); the event stream is in ``sse.py``."""

from __future__ import annotations

from typing import Any

from jupyter_server.auth.decorator import authorized
from tornado import web

from .base import AUTH_RESOURCE, AstroHandler
from ..errors import InvalidRequest

RUN_ID = r"(?P<run_id>[A-Za-z0-9_.:-]{1,128})"


class RunsHandler(AstroHandler):
    auth_resource = AUTH_RESOURCE

    @web.authenticated
    @authorized
    async def post(self) -> None:
        body = self.json_body()
        started = await self.service.start_run(
            self.owner,
            body.get("prompt"),
            session_id=_opt_str(body, "session_id"),
            model=_opt_str(body, "model"),
            coordinator=_opt_bool(body, "coordinator"),
            max_steps=body.get("max_steps"),  # checked by the app (1..200), like every front end's
            notebook=body.get("notebook"),
        )
        self.set_header("Location", self.request.path.rstrip("/") + "/" + started["run_id"] + "/events")
        self.write_json(started, status=201)


class RunCancelHandler(AstroHandler):
    auth_resource = AUTH_RESOURCE

    @web.authenticated
    @authorized
    async def post(self, run_id: str) -> None:
        self.write_json(await self.service.cancel_run(self.owner, run_id), status=202)


class RunAnswersHandler(AstroHandler):
    auth_resource = AUTH_RESOURCE

    @web.authenticated
    @authorized
    async def post(self, run_id: str) -> None:
        body = self.json_body()
        request_id = body.get("request_id")
        if not isinstance(request_id, str) or not request_id:
            raise InvalidRequest("'request_id' must be the id of an ask_user, permission_request or notebook_request event")
        if "answer" not in body:
            raise InvalidRequest("'answer' is missing")
        self.write_json(await self.service.answer(self.owner, run_id, request_id, body["answer"]))


def _opt_str(body: dict[str, Any], key: str) -> str | None:
    value = body.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise InvalidRequest(f"'{key}' must be a string")
    return value


def _opt_bool(body: dict[str, Any], key: str) -> bool | None:
    """``None`` when absent (or null): the session's stored setting applies."""
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, bool):
        raise InvalidRequest(f"'{key}' must be true or false")
    return value


handlers = [
    (r"astro/api/runs", RunsHandler),
    (rf"astro/api/runs/{RUN_ID}/cancel", RunCancelHandler),
    (rf"astro/api/runs/{RUN_ID}/answers", RunAnswersHandler),
]
