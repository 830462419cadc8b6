"""The typed events of a run: one union, frozen dataclasses, serialised once at the edge.

The sidebar (SSE), the kernel widgets, ``astro-jupyter ask --json`` and the store all
see these same objects; ``to_wire`` gives the JSON shape of ARCHITECTURE.md and
``from_wire`` turns a stored shape back into the object (for resume and export).
Events emitted inside a subagent carry ``subagent_id`` so a consumer can nest them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, Iterable, Literal, TypedDict

DoneReason = Literal["finished", "cancelled", "max_steps", "error"]
TodoStatus = Literal["pending", "in_progress", "completed"]


class ProgressInfo(TypedDict):
    """What a running tool reported (the executor's progress callback): done of total, and a line of text."""

    done: int | None
    total: int | None
    message: str


class Todo(TypedDict):
    """One task of the model's plan, as ``todo_write`` validated it."""

    id: str
    content: str
    status: TodoStatus
    blocked_by: list[str]


@dataclass(frozen=True, kw_only=True)
class Event:
    type: ClassVar[str] = "event"
    subagent_id: str | None = None

    def to_wire(self) -> dict[str, Any]:
        return to_wire(self)


@dataclass(frozen=True, kw_only=True)
class SessionStarted(Event):
    type: ClassVar[str] = "session"
    session_id: str
    run_id: str
    title: str = ""
    model: str = ""


@dataclass(frozen=True, kw_only=True)
class TextDelta(Event):
    type: ClassVar[str] = "text_delta"
    delta: str
    step: int


@dataclass(frozen=True, kw_only=True)
class ThinkingDelta(Event):
    type: ClassVar[str] = "thinking_delta"
    delta: str
    step: int


@dataclass(frozen=True, kw_only=True)
class ToolCall(Event):
    type: ClassVar[str] = "tool_call"
    id: str
    name: str
    arguments: Any
    step: int


@dataclass(frozen=True, kw_only=True)
class ToolCallPreparing(Event):
    """The model is still writing a tool call: its name arrived, ``chars`` of arguments so far.
    A long call from a slow local model otherwise shows nothing until all of it has arrived."""

    type: ClassVar[str] = "tool_call_preparing"
    index: int
    name: str
    chars: int
    step: int


@dataclass(frozen=True, kw_only=True)
class Truncated(Event):
    """The answer stopped at the output bound (``finish_reason: "length"``), not because it was done;
    ``tool_name`` is set when the cut fell inside that call's arguments (the call was not run)."""

    type: ClassVar[str] = "truncated"
    step: int
    max_tokens: int = 0
    tool_name: str = ""
    message: str = ""


@dataclass(frozen=True, kw_only=True)
class ToolProgress(Event):
    type: ClassVar[str] = "tool_progress"
    id: str
    progress: ProgressInfo


@dataclass(frozen=True, kw_only=True)
class ToolResult(Event):
    type: ClassVar[str] = "tool_result"
    tool_call_id: str
    name: str
    output: str
    is_error: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)
    step: int = 0
    duration_ms: int = 0


@dataclass(frozen=True, kw_only=True)
class AskUser(Event):
    type: ClassVar[str] = "ask_user"
    request_id: str
    question: str
    options: list[str] = field(default_factory=list)
    timeout_secs: float = 300.0


@dataclass(frozen=True, kw_only=True)
class PermissionRequest(Event):
    type: ClassVar[str] = "permission_request"
    request_id: str
    tool_call_id: str
    name: str
    arguments: Any
    message: str = ""
    scope: str = ""  # what "always" covers: "" = the tool for this session, else e.g. one notebook's path
    code: str = ""  # the exact code that will run, when it is not an argument (notebook_run: the cell, from where it runs)
    old_source: str | None = None  # what an edit replaces (notebook_edit replace: the cell now, from where it applies)


@dataclass(frozen=True, kw_only=True)
class QuestionAnswered(Event):
    """An ``ask_user`` or ``permission_request`` got its answer. Every open view of the run
    closes the question, and a reopened session shows what was answered, not "expired"."""

    type: ClassVar[str] = "question_answered"
    request_id: str
    answer: str


@dataclass(frozen=True, kw_only=True)
class NotebookRequest(Event):
    """Asks the attached sidebar to read/edit/run a notebook through its open document
    (docs/notebook-bridge.md); answered on the answers route with a JSON object."""

    type: ClassVar[str] = "notebook_request"
    request_id: str
    tool_call_id: str
    action: Literal["read", "edit", "run"]
    path: str
    arguments: dict[str, Any] = field(default_factory=dict)
    timeout_secs: float = 60.0


@dataclass(frozen=True, kw_only=True)
class Compaction(Event):
    type: ClassVar[str] = "compaction"
    layer: Literal["micro", "auto", "manual"]
    tokens_before: int = 0
    tokens_after: int = 0
    message: str = ""


@dataclass(frozen=True, kw_only=True)
class ModelSwitch(Event):
    """Wire keys are ``from`` / ``to`` (Python keywords), hence the field renames."""

    type: ClassVar[str] = "model_switch"
    from_model: str
    to_model: str
    reason: str = ""


@dataclass(frozen=True, kw_only=True)
class Subagent(Event):
    type: ClassVar[str] = "subagent"
    id: str
    phase: Literal["start", "stop"]
    task: str = ""
    parent_tool_call_id: str = ""
    summary: str = ""
    is_error: bool = False


@dataclass(frozen=True, kw_only=True)
class TodoUpdate(Event):
    type: ClassVar[str] = "todo_update"
    todos: list[Todo]


@dataclass(frozen=True, kw_only=True)
class Error(Event):
    type: ClassVar[str] = "error"
    message: str
    reason: str = "error"
    step: int | None = None


@dataclass(frozen=True, kw_only=True)
class Usage(Event):
    """What a run cost and how full the model's context is, sent once before ``done`` (stored, so a
    reopened session shows the same figures). ``cost_usd`` is None when ``llm_prices`` has no price
    for the model; the context figures are 0 when unknown (no call completed)."""

    type: ClassVar[str] = "usage"
    model: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    context_tokens: int = 0  # the next request's estimated size (messages + tool schemas)
    context_window: int = 0
    compact_at: int = 0  # the estimate above which older messages are summarised


@dataclass(frozen=True, kw_only=True)
class Done(Event):
    type: ClassVar[str] = "done"
    session_id: str
    run_id: str
    reason: DoneReason = "finished"


EVENT_TYPES: dict[str, type[Event]] = {
    cls.type: cls
    for cls in (
        SessionStarted,
        TextDelta,
        ThinkingDelta,
        ToolCall,
        ToolCallPreparing,
        ToolProgress,
        ToolResult,
        AskUser,
        PermissionRequest,
        QuestionAnswered,
        NotebookRequest,
        Compaction,
        Truncated,
        ModelSwitch,
        Subagent,
        TodoUpdate,
        Error,
        Usage,
        Done,
    )
}

_RENAMES_OUT = {"from_model": "from", "to_model": "to"}
_RENAMES_IN = {v: k for k, v in _RENAMES_OUT.items()}


def wire_field_name(name: str) -> str:
    """The JSON key of a dataclass field (``from_model`` travels as ``from``)."""
    return _RENAMES_OUT.get(name, name)


def to_wire(event: Event) -> dict[str, Any]:
    """The JSON-ready dict of an event: ``type`` first, ``subagent_id`` only when set."""
    out: dict[str, Any] = {"type": event.type}
    for f in dataclasses.fields(event):
        value = getattr(event, f.name)
        if f.name == "subagent_id" and value is None:
            continue
        out[_RENAMES_OUT.get(f.name, f.name)] = value
    return out


def to_json(event: Event) -> str:
    from .textsafe import safe_json  # always UTF-8 encodable: a lone surrogate must not kill a JSON-lines reader

    return safe_json(to_wire(event))


def from_wire(data: dict[str, Any]) -> Event:
    """Rebuild an event from its wire dict; unknown keys are ignored so old rows still load."""
    cls = EVENT_TYPES.get(str(data.get("type")))
    if cls is None:
        raise ValueError(f"unknown event type: {data.get('type')!r}")
    names = {f.name for f in dataclasses.fields(cls)}
    kwargs = {}
    for key, value in data.items():
        name = _RENAMES_IN.get(key, key)
        if name in names:
            kwargs[name] = value
    return cls(**kwargs)
