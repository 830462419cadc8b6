"""The one base class of every astro API handler: identity, JSON bodies, JSON errors.

Errors leave every handler here, as ``{"message", "reason"}`` JSON: tornado ``HTTPError``s
(403 from authentication, XSRF) and the project's own ``AstroError``s, which services raise
and which are mapped to a status in ``status_for`` (services never know about HTTP).

CORS: jupyter_server answers token-authenticated cross-origin requests with an
``Access-Control-Allow-Origin`` echo and every ``OPTIONS`` with allow-headers. The astro
API is not meant to be called from other origins (only the bookmarklet intake is), so the
base handler sends no CORS headers at all and refuses preflights.
"""

from __future__ import annotations

import json
import re
from http.client import responses
from typing import Any

from jupyter_server.auth.decorator import allow_unauthenticated
from jupyter_server.base.handlers import APIHandler
from jupyter_server.extension.handler import ExtensionHandlerMixin
from tornado import web

from ..errors import (
    AstroError,
    ConfigError,
    FileRefused,
    InvalidInput,
    InvalidRequest,
    LlmError,
    LlmUnavailableError,
    NotAvailable,
    NotFoundError,
    PermissionDenied,
    RateLimited,
    RunConflict,
    RunNotFound,
    ServiceError,
    ServiceTimeoutError,
    SessionNotFound,
    StoreError,
    StoreLockedError,
    StoreReadOnlyError,
    ToolInputError,
)
from ..app import AstroApp
from ..host.manager import AgentHostError

AUTH_RESOURCE = "astro"
SERVICE_KEY = "astro_service"
# ServerApp.tornado_settings keys an embedding application (the test suite) may set: internal tuning
# objects, no user settings (services.container.Tuning; server.sse.SsePacing)
TUNING_KEY = "astro_tuning"
SSE_PACING_KEY = "astro_sse_pacing"

# Most specific first: the first class an error is an instance of decides its status.
_STATUS: tuple[tuple[type[AstroError], int], ...] = (
    (SessionNotFound, 404),
    (RunNotFound, 404),
    (NotFoundError, 404),
    (RunConflict, 409),
    (PermissionDenied, 403),
    (ToolInputError, 400),
    (InvalidInput, 400),
    (FileRefused, 400),
    (RateLimited, 429),
    (NotAvailable, 501),
    (LlmUnavailableError, 503),
    (AgentHostError, 503),
    (ConfigError, 503),
    (ServiceTimeoutError, 504),
    (LlmError, 502),
    (ServiceError, 502),
    (StoreLockedError, 503),
    (StoreReadOnlyError, 503),
    (StoreError, 500),
)

_ANON_USERNAME = re.compile(r"^[0-9a-f]{32}$")


def status_for(exc: AstroError) -> int:
    if isinstance(exc, InvalidRequest):
        return exc.status
    for cls, status in _STATUS:
        if isinstance(exc, cls):
            return status
    return 500


def owner_of(user: Any) -> str:
    """The owner key of rows a user creates.

    With Jupyter's default shared-token login every browser (and every cookie-less script
    request) gets a fresh random "Anonymous <moon>" identity; they are all the one person
    holding the token, so they share one owner key (""), and a second browser sees the same
    sessions. Named identities (JupyterHub, a custom IdentityProvider) own their rows.
    """
    username = str(getattr(user, "username", "") or "")
    name = str(getattr(user, "name", "") or "")
    if _ANON_USERNAME.match(username) and name.startswith("Anonymous "):
        return ""
    return username


class AstroHandler(ExtensionHandlerMixin, APIHandler):
    """Base of every astro API handler (subclasses decorate each verb with
    ``@web.authenticated`` and ``@authorized``)."""

    auth_resource = AUTH_RESOURCE

    @property
    def service(self) -> AstroApp:
        return self.settings[SERVICE_KEY]

    @property
    def owner(self) -> str:
        return owner_of(self.current_user)

    async def prepare(self) -> None:  # type: ignore[override]
        await super().prepare()
        if self._finished:
            return
        await self.service.start()

    # -- no CORS on the authenticated API --------------------------------------------------
    def set_cors_headers(self) -> None:
        return None

    @allow_unauthenticated
    def options(self, *args: Any, **kwargs: Any) -> None:
        raise web.HTTPError(405, "cross-origin requests are not accepted on this route", reason="Method Not Allowed")

    # -- request bodies ----------------------------------------------------------------------
    def json_body(self, *, required: bool = True) -> dict[str, Any]:
        """The body as a JSON object, or a 400 ``invalid_json`` saying what is wrong."""
        raw = self.request.body or b""
        if not raw.strip():
            if required:
                raise InvalidRequest("the request needs a JSON object body", reason="invalid_json")
            return {}
        try:
            data = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise InvalidRequest(f"the body is not valid JSON: {exc}", reason="invalid_json") from exc
        if not isinstance(data, dict):
            raise InvalidRequest("the JSON body must be an object", reason="invalid_json")
        return data

    def int_arg(self, name: str, default: int, low: int, high: int) -> int:
        raw = self.get_argument(name, None)
        if raw is None or raw == "":
            return default
        try:
            value = int(raw)
        except ValueError as exc:
            raise InvalidRequest(f"'{name}' must be an integer", reason="invalid_argument") from exc
        if not low <= value <= high:
            raise InvalidRequest(f"'{name}' must be between {low} and {high}", reason="invalid_argument")
        return value

    def write_json(self, payload: Any, status: int = 200) -> None:
        self.set_status(status)
        self.finish(json.dumps(payload, ensure_ascii=False, default=str))

    # -- errors ------------------------------------------------------------------------------
    def write_error(self, status_code: int, **kwargs: Any) -> None:
        exc = (kwargs.get("exc_info") or (None, None, None))[1]
        reply = error_reply(self, status_code, exc)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(reply, ensure_ascii=False))

    def log_exception(self, typ: Any, value: Any, tb: Any) -> None:
        if isinstance(value, AstroError) and status_for(value) < 500:
            self.log.info("%s %s -> %s: %s", self.request.method, self.request.path, status_for(value), value)
            return
        super().log_exception(typ, value, tb)


def error_reply(handler: web.RequestHandler, status_code: int, exc: BaseException | None) -> dict[str, Any]:
    """Set the status an exception maps to and return its ``{message, reason}``."""
    if isinstance(exc, AstroError):
        status = status_for(exc)
        handler.set_status(status)
        if isinstance(exc, RateLimited):
            handler.set_header("Retry-After", str(max(1, round(exc.retry_after))))
        return {"message": str(exc) or type(exc).__name__, "reason": exc.reason}
    if isinstance(exc, web.HTTPError):
        text = responses.get(status_code, "error")
        reason = exc.reason if exc.reason and exc.reason != text else text
        return {"message": exc.log_message or text, "reason": reason.lower().replace(" ", "_")}
    if exc is not None:
        return {"message": "internal error; see the server log", "reason": "internal"}
    text = responses.get(status_code, "error")
    return {"message": text, "reason": text.lower().replace(" ", "_")}
