"""What hooks are made of: the event names, a hook's tagged decision, the folded outcome, the base class.

The registry that loads and runs hooks is ``registry.py``; built-in hooks (``builtin.py``,
``command.py``) build on these values without importing the registry.
"""

from __future__ import annotations

import enum
import inspect
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, ClassVar, Iterable, Literal, Union


class HookEventName(str, enum.Enum):
    SESSION_START = "SessionStart"
    SESSION_END = "SessionEnd"
    USER_PROMPT_SUBMIT = "UserPromptSubmit"
    PRE_TOOL_USE = "PreToolUse"
    POST_TOOL_USE = "PostToolUse"
    POST_TOOL_USE_FAILURE = "PostToolUseFailure"
    PERMISSION_REQUEST = "PermissionRequest"
    NOTIFICATION = "Notification"
    PRE_COMPACT = "PreCompact"
    POST_COMPACT = "PostCompact"
    SUBAGENT_START = "SubagentStart"
    SUBAGENT_STOP = "SubagentStop"
    STOP = "Stop"

    @classmethod
    def parse(cls, value: "str | HookEventName") -> "HookEventName":
        if isinstance(value, HookEventName):
            return value
        try:
            return cls(value)
        except ValueError:
            names = ", ".join(e.value for e in cls)
            raise ValueError(f"unknown hook event {value!r}; expected one of: {names}") from None


DecisionKind = Literal["continue", "block", "mutate_input", "append_context", "mutate_output", "warning"]


@dataclass(frozen=True)
class HookDecision:
    """One hook's answer. Build with the classmethods; ``kind`` says which field matters."""

    kind: DecisionKind = "continue"
    reason: str = ""
    args: dict[str, Any] | None = None
    text: str = ""
    content: str | None = None

    @classmethod
    def block(cls, reason: str) -> "HookDecision":
        return cls("block", reason=reason)

    @classmethod
    def mutate_input(cls, args: dict[str, Any]) -> "HookDecision":
        return cls("mutate_input", args=dict(args))

    @classmethod
    def append_context(cls, text: str) -> "HookDecision":
        return cls("append_context", text=text)

    @classmethod
    def mutate_output(cls, content: str) -> "HookDecision":
        return cls("mutate_output", content=content)

    @classmethod
    def warning(cls, message: str) -> "HookDecision":
        """The hook itself failed (bad exit, bad JSON, timeout): noted, treated as continue."""
        return cls("warning", reason=message)


HookResult = Union[HookDecision, Iterable[HookDecision], None]
HookFn = Callable[["HookEventName", dict[str, Any]], Awaitable[HookResult]]


@dataclass
class HookOutcome:
    """All hooks' decisions folded: the first block wins, later mutations build on earlier ones."""

    blocked: bool = False
    reason: str = ""
    mutated_input: dict[str, Any] | None = None
    contexts: list[str] = field(default_factory=list)
    mutated_output: str | None = None
    warnings: list[str] = field(default_factory=list)
    ran: int = 0

    def apply(self, decision: HookDecision, payload: dict[str, Any]) -> None:
        if decision.kind == "block":
            self.blocked = True
            self.reason = decision.reason or "blocked by a hook"
        elif decision.kind == "mutate_input" and decision.args is not None:
            self.mutated_input = dict(decision.args)
            payload["arguments"] = self.mutated_input  # the next hook sees the new arguments
        elif decision.kind == "append_context" and decision.text:
            self.contexts.append(decision.text)
        elif decision.kind == "mutate_output" and decision.content is not None:
            self.mutated_output = decision.content
            payload["output"] = decision.content
        elif decision.kind == "warning":
            self.warnings.append(decision.reason)


class Hook:
    """Base class: set ``events`` (None = all) and ``matcher`` (tool-name pattern), override ``__call__``."""

    events: ClassVar[frozenset[str] | None] = None
    matcher: str = "*"
    name: str = ""

    def handles(self, event: HookEventName) -> bool:
        return self.events is None or event.value in self.events

    async def __call__(self, event: HookEventName, payload: dict[str, Any]) -> HookResult:
        return None

    def describe(self) -> str:
        return self.name or type(self).__name__


class CallableHook(Hook):
    """Wraps a plain async function registered for one event."""

    def __init__(self, event: HookEventName, fn: HookFn, matcher: str = "*", name: str = "") -> None:
        self.event = event
        self.fn = fn
        self.matcher = matcher or "*"
        self.name = name or getattr(fn, "__qualname__", "hook")

    def handles(self, event: HookEventName) -> bool:
        return event is self.event

    async def __call__(self, event: HookEventName, payload: dict[str, Any]) -> HookResult:
        result = self.fn(event, payload)
        return await result if inspect.isawaitable(result) else result  # plain functions work too
