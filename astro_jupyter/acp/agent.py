"""``AstroAcpAgent``: the ACP ``Agent`` interface over the application layer.

An ACP session is one of our sessions (same id, same store: it is listed in the sidebar and
``astro-jupyter sessions``, and a sidebar session can be loaded here). ``session/prompt`` starts
a run with ``AstroApp.start_run_handle`` and follows it with ``app.follow``; each event becomes a
``session/update`` (``updates.py``) and each question a ``session/request_permission`` asked
*beside* the stream, so the run's own timeouts still apply while the client thinks: a question
the client never answers is denied when the run stops waiting, one it cancels is denied at once,
and either way the tool call says so. A cancelled or failed client request, a closed
connection or ``session/cancel`` cancels the run; events already stored stay stored.

When the client offers ``fs/read_text_file`` / ``fs/write_text_file``, ``read_file``,
``file_edit`` and ``file_write`` use them (``AcpFiles``): the agent reads the editor's unsaved
buffers and its edits and writes land in them; the sandbox, the deny list and the permission question come first, as on disk.

Modes: ``default`` and ``coordinator`` (the session's stored flag). The chat model is a
``select`` config option (category ``model``) per ACP session, from the endpoint's list.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from acp import PROTOCOL_VERSION, RequestError, text_block, tool_content, update_tool_call, update_user_message_text
from acp.schema import (
    AgentCapabilities,
    AllowedOutcome,
    ClientCapabilities,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PermissionOption,
    PromptCapabilities,
    PromptResponse,
    SessionCapabilities,
    SessionConfigOptionSelect,
    SessionConfigSelectOption,
    SessionInfo,
    SessionListCapabilities,
    SessionMode,
    SessionModeState,
    SetSessionConfigOptionResponse,
    SetSessionModeResponse,
    ToolCallUpdate,
)

from ..app.follow import PERMISSION_ANSWERS, follow, is_question
from ..errors import AstroError, InvalidRequest, RunConflict, SessionNotFound
from ..events import from_wire
from .updates import answer_cut_off, call_content, stop_reason, to_update, tool_call_id, tool_title

if TYPE_CHECKING:
    from ..agent.run import RunHandle
    from ..app import AstroApp

log = logging.getLogger(__name__)

OWNER = None  # the local user, as in the CLI: every session of this ASTRO_HOME
MODES = (
    SessionMode(id="default", name="Default", description="The agent works on the task itself."),
    SessionMode(id="coordinator", name="Coordinator",
                description="The agent plans and delegates to parallel workers, then synthesizes."),
)
MODEL_OPTION = "model"
MODEL_LIST_SECS = 2.0  # how long session/new waits for the endpoint's model list
NO_FREE_TEXT = ("(no answer: the question was asked in an ACP client, which can only pick one of offered options; "
                "continue without the answer)")
CANCELLED_ANSWER = "(no answer: the ACP client dismissed the question)"


def permission_options(event: Any) -> list[PermissionOption]:
    """The choices the sidebar and the kernel offer: allow once, always (or for this notebook), deny."""
    always = ("Allow for this notebook" if getattr(event, "scope", "") and event.name.startswith("notebook_")
              else "Always allow")
    return [
        PermissionOption(option_id="allow", name="Allow", kind="allow_once"),
        PermissionOption(option_id="always", name=always, kind="allow_always"),
        PermissionOption(option_id="deny", name="Deny", kind="reject_once"),
    ]


def prompt_text(blocks: list[Any]) -> str:
    """The prompt as one text: text blocks joined, embedded text resources and links named.
    Images and audio are refused (the initialize answer says the agent takes none)."""
    parts: list[str] = []
    for block in blocks:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource_link":
            parts.append(f"[file: {block.uri}]")
        elif kind == "resource" and isinstance(getattr(block.resource, "text", None), str):
            parts.append(f"[the content of {block.resource.uri}:]\n{block.resource.text}\n[end of {block.resource.uri}]")
        else:
            raise RequestError(-32602, f"astro-jupyter takes text prompts; a {kind or 'non-text'} block cannot be used",
                               {"reason": "unsupported_content"})
    return "\n\n".join(parts)


def _request_error(exc: AstroError) -> RequestError:
    """One of our errors as the JSON-RPC error the client shows (message and reason, no traceback)."""
    if isinstance(exc, SessionNotFound):
        return RequestError(-32002, str(exc), {"reason": exc.reason})
    if isinstance(exc, (InvalidRequest, RunConflict)):
        return RequestError(-32602, str(exc), {"reason": exc.reason})
    return RequestError(-32603, str(exc), {"reason": exc.reason})


class AcpFiles:
    """The client's file system for one session (``ClientFiles`` in ``agent/run.py``): the file tools
    go through the editor, after our sandbox and permission checks, when it offers them."""

    def __init__(self, conn: Any, session_id: str, capabilities: ClientCapabilities) -> None:
        self.conn, self.session_id = conn, session_id
        fs = capabilities.fs
        self.can_read = bool(fs and fs.read_text_file)
        self.can_write = bool(fs and fs.write_text_file)

    async def read_text(self, path: str) -> str:
        return (await self.conn.read_text_file(session_id=self.session_id, path=path)).content

    async def write_text(self, path: str, content: str) -> None:
        await self.conn.write_text_file(session_id=self.session_id, path=path, content=content)


@dataclass
class AcpSession:
    session_id: str
    cwd: str
    model: str | None = None  # None: the configured model
    run: "RunHandle | None" = None


class AstroAcpAgent:
    """One per ``astro-jupyter acp`` process (one client connection)."""

    def __init__(self, app: "AstroApp") -> None:
        self.app = app
        self.conn: Any = None
        self.client_capabilities = ClientCapabilities()
        self.sessions: dict[str, AcpSession] = {}
        self._models: list[str] | None = None
        self._listing: "asyncio.Future[dict[str, Any]] | None" = None

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    # -- lifecycle ----------------------------------------------------------------------------
    async def initialize(self, protocol_version: int, client_capabilities: ClientCapabilities | None = None,
                         client_info: Implementation | None = None, **kwargs: Any) -> InitializeResponse:
        from .._version import __version__

        if client_capabilities is not None:
            self.client_capabilities = client_capabilities
        return InitializeResponse(
            protocol_version=min(protocol_version, PROTOCOL_VERSION),
            agent_capabilities=AgentCapabilities(
                load_session=True,
                prompt_capabilities=PromptCapabilities(image=False, audio=False, embedded_context=True),
                session_capabilities=SessionCapabilities(list=SessionListCapabilities()),
            ),
            agent_info=Implementation(name="astro-jupyter", title="astro-jupyter", version=__version__),
        )

    async def authenticate(self, method_id: str, **kwargs: Any) -> None:
        return None

    async def close(self) -> None:
        """The client went away: cancel every live run and wait for it to store its end."""
        runs = [s.run for s in self.sessions.values() if s.run is not None and not s.run.finished]
        for run in runs:
            run.cancel()
        for run in runs:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(run.wait()), timeout=30)

    # -- sessions -----------------------------------------------------------------------------
    async def new_session(self, cwd: str, additional_directories: list[str] | None = None,
                          mcp_servers: list[Any] | None = None, **kwargs: Any) -> NewSessionResponse:
        try:
            record = await self.app.create_session("")
        except AstroError as exc:
            raise _request_error(exc) from None
        session = self.sessions[record["id"]] = AcpSession(record["id"], cwd)
        return NewSessionResponse(session_id=session.session_id, modes=self._modes(False),
                                  config_options=await self._config_options(session))

    async def load_session(self, cwd: str, session_id: str, mcp_servers: list[Any] | None = None,
                           additional_directories: list[str] | None = None, **kwargs: Any) -> LoadSessionResponse:
        """Replay the stored session as updates (each run's prompt, then what it did), then answer."""
        try:
            record = await self.app.session(OWNER, session_id)
            detail = await self.app.get_session(OWNER, session_id)
        except AstroError as exc:
            raise _request_error(exc) from None
        session = self.sessions.get(session_id) or AcpSession(session_id, cwd)
        session.cwd = cwd
        self.sessions[session_id] = session
        prompts = {run["id"]: run.get("prompt", "") for run in detail.get("runs", [])}
        shown: set[str] = set()
        cursor: str | None = None
        while True:
            page = await self.app.session_events(OWNER, session_id, cursor=cursor)
            for item in page["events"]:
                run_id = item["run_id"]
                if run_id not in shown:
                    shown.add(run_id)
                    if prompts.get(run_id):
                        await self.conn.session_update(session_id, update_user_message_text(prompts[run_id]))
                try:
                    event = from_wire(item["event"])
                except (ValueError, TypeError):
                    continue  # a row of a type this version does not know
                update = to_update(event, self.app.config.project_root)
                if update is not None:
                    await self.conn.session_update(session_id, update)
            cursor = page["next_cursor"]
            if cursor is None:
                break
        return LoadSessionResponse(modes=self._modes(record.coordinator), config_options=await self._config_options(session))

    async def list_sessions(self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any) -> ListSessionsResponse:
        page = 100
        offset = int(cursor) if cursor and cursor.isdigit() else 0
        rows = await self.app.list_sessions(OWNER, limit=page, offset=offset, detail=False)
        root = cwd or self.app.config.project_root
        return ListSessionsResponse(
            sessions=[SessionInfo(session_id=r["id"], cwd=root, title=r.get("title") or None,
                                  updated_at=r.get("updated_at") or None) for r in rows],
            next_cursor=str(offset + page) if len(rows) == page else None,
        )

    async def set_session_mode(self, mode_id: str, session_id: str, **kwargs: Any) -> SetSessionModeResponse:
        if mode_id not in {m.id for m in MODES}:
            raise RequestError(-32602, f"unknown mode {mode_id!r}; the modes are default and coordinator",
                               {"reason": "invalid_mode"})
        try:
            await self.app.update_session(OWNER, session_id, coordinator=mode_id == "coordinator")
        except AstroError as exc:
            raise _request_error(exc) from None
        return SetSessionModeResponse()

    async def set_config_option(self, config_id: str, session_id: str, value: str | bool,
                                **kwargs: Any) -> SetSessionConfigOptionResponse:
        session = await self._session(session_id)
        if config_id != MODEL_OPTION:
            raise RequestError(-32602, f"unknown config option {config_id!r}; the only one is 'model'",
                               {"reason": "invalid_option"})
        if not isinstance(value, str) or value not in await self._model_names(session):
            raise RequestError(-32602, f"unknown model {value!r}; pick one the option lists",
                               {"reason": "invalid_model"})
        session.model = value
        return SetSessionConfigOptionResponse(config_options=await self._config_options(session))

    # -- prompts ------------------------------------------------------------------------------
    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        from ..llm.client import NOT_CONFIGURED

        session = await self._session(session_id)
        text = prompt_text(prompt)
        if not self.app.config.llm_configured:
            raise RequestError(-32603, NOT_CONFIGURED, {"reason": "llm_unavailable"})
        try:
            files = AcpFiles(self.conn, session_id, self.client_capabilities)
            handle = await self.app.start_run_handle(OWNER, text, session_id=session_id, model=session.model,
                                                     client_files=files if files.can_read or files.can_write else None)
        except AstroError as exc:
            raise _request_error(exc) from None
        session.run = handle
        try:
            reason = await self._follow(session_id, handle)
        except BaseException:  # the request was cancelled, the client went away, or sending failed
            handle.cancel()
            raise
        return PromptResponse(stop_reason=reason)  # type: ignore[arg-type]

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        session = self.sessions.get(session_id)
        if session is not None and session.run is not None and not session.run.finished:
            session.run.cancel()

    async def _follow(self, session_id: str, handle: "RunHandle") -> str:
        """Send the run's updates; ask its questions beside the stream; the ACP stop reason of the
        run's end (``max_tokens`` when its answer was cut off, though the run finished)."""
        root = self.app.config.project_root
        asks: dict[str, asyncio.Task[None]] = {}  # request_id → the open client request
        by_call: dict[str, str] = {}  # tool_call_id → request_id of its permission question
        last_ask_call = ""
        reason, cut_off = "error", False
        try:
            async for event in follow(handle):
                update = to_update(event, root)
                if update is not None:
                    await self.conn.session_update(session_id, update)
                cut_off = answer_cut_off(event, cut_off)
                kind = event.type
                if kind == "tool_call" and event.name == "ask_user" and not event.subagent_id:  # type: ignore[attr-defined]
                    last_ask_call = event.id  # type: ignore[attr-defined]
                if is_question(event):
                    rid = event.request_id  # type: ignore[attr-defined]
                    call = event.tool_call_id if kind == "permission_request" else last_ask_call  # type: ignore[attr-defined]
                    by_call[call] = rid
                    asks[rid] = asyncio.create_task(self._ask(session_id, handle, event, call or rid))
                elif kind == "question_answered":
                    _stop(asks.pop(event.request_id, None))  # type: ignore[attr-defined]
                elif kind == "tool_result" and not event.subagent_id:
                    _stop(asks.pop(by_call.pop(event.tool_call_id, ""), None))  # type: ignore[attr-defined]
                elif kind == "done":
                    reason = event.reason  # type: ignore[attr-defined]
        finally:
            for task in asks.values():
                _stop(task)
        return stop_reason(reason, cut_off=cut_off)

    async def _ask(self, session_id: str, handle: "RunHandle", question: Any, call_id: str) -> None:
        """Ask the client; a dismissal, an error or a broken connection is a denial (no answer)."""
        if question.type == "permission_request":
            options = permission_options(question)
            # the call as the client shows it (its title, its diff), with why it asks
            shown = call_content(question.name, question.arguments, self.app.config.project_root) or []
            reason = [tool_content(text_block(question.message))] if question.message else []
            tool_call = ToolCallUpdate(tool_call_id=tool_call_id(question, call_id), status="pending",
                                       title=tool_title(question.name, question.arguments), raw_input=question.arguments,
                                       content=[*shown, *reason] or None)
            refusal, dismissed = "deny", "the client dismissed the permission request: denied"
        else:
            if not question.options:
                handle.answer(question.request_id, NO_FREE_TEXT)
                return
            options = [PermissionOption(option_id=str(i), name=str(o), kind="allow_once")
                       for i, o in enumerate(question.options)]
            tool_call = ToolCallUpdate(tool_call_id=call_id, status="pending", title=question.question)
            refusal, dismissed = CANCELLED_ANSWER, "the client dismissed the question: no answer"
        try:
            response = await self.conn.request_permission(session_id=session_id, tool_call=tool_call, options=options)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - whatever went wrong, nobody consented
            log.warning("the ACP client failed to answer a question: %s", exc)
            handle.answer(question.request_id, refusal)
            return
        outcome = response.outcome
        if not isinstance(outcome, AllowedOutcome):
            handle.answer(question.request_id, refusal)
            with contextlib.suppress(Exception):
                await self.conn.session_update(session_id, update_tool_call(
                    tool_call.tool_call_id, content=[tool_content(text_block(dismissed))]))
            return
        chosen = outcome.option_id
        if question.type == "permission_request":
            reply = chosen if chosen in PERMISSION_ANSWERS else "deny"
        else:
            reply = str(question.options[int(chosen)]) if chosen.isdigit() and int(chosen) < len(question.options) else refusal
        handle.answer(question.request_id, reply)

    # -- helpers ------------------------------------------------------------------------------
    async def _session(self, session_id: str) -> AcpSession:
        """A session of this connection, or a stored one the client names directly."""
        session = self.sessions.get(session_id)
        if session is None:
            try:
                await self.app.session(OWNER, session_id)
            except AstroError as exc:
                raise _request_error(exc) from None
            session = self.sessions[session_id] = AcpSession(session_id, self.app.config.project_root)
        return session

    def _modes(self, coordinator: bool) -> SessionModeState:
        return SessionModeState(current_mode_id="coordinator" if coordinator else "default", available_modes=list(MODES))

    async def _model_names(self, session: AcpSession) -> list[str]:
        """The endpoint's models (listed once), else the configured ones: an endpoint that is down
        must not hold up ``session/new`` for its retries (the listing goes on in the background)."""
        if self._models is None:
            if self._listing is None or (self._listing.done() and self._listing.exception() is not None):
                self._listing = asyncio.ensure_future(self.app.models(""))
            done, _ = await asyncio.wait({self._listing}, timeout=MODEL_LIST_SECS)
            listing = self._listing.result() if done and self._listing.exception() is None else None
            if listing is not None and listing["source"] == "endpoint":
                self._models = list(listing["models"])
            models = list(listing["models"]) if listing is not None else []
        else:
            models = self._models
        current = session.model or self.app.current_model("")
        return models if current in models else [current, *models]

    async def _config_options(self, session: AcpSession) -> list[Any]:
        names = await self._model_names(session)
        return [SessionConfigOptionSelect(
            type="select", id=MODEL_OPTION, name="Model", category="model",
            description="The chat model of this session's next runs",
            current_value=session.model or self.app.current_model(""),
            options=[SessionConfigSelectOption(value=n, name=n) for n in names],
        )]


def _stop(task: "asyncio.Task[None] | None") -> None:
    if task is not None and not task.done():
        task.cancel()


__all__ = ["AstroAcpAgent", "permission_options", "prompt_text"]
