"""The tool model: what every tool declares, what it receives, what it returns.

A tool is a small class: class attributes for its flags and schema, ``execute`` for the
work. Recoverable failures are returned as ``ToolOutput.error(...)`` (the model reads
them and can try again); only programming errors escape as exceptions, and the
executor turns those into error results too.
"""

from __future__ import annotations

import enum
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Awaitable, Callable, ClassVar, Literal, Protocol

if TYPE_CHECKING:
    import asyncio

    from ...config import AstroConfig
    from ...events import Event, PermissionRequest
    from ...services.container import ServiceContainer
    from ..permissions import PermissionDecision, Unattended
    from ..run import RunScope
    from .file_state import FileStateCache


class InterruptBehavior(enum.Enum):
    """What a running tool does when the user cancels."""

    CANCEL = "cancel"  # stop at once; the call ends as an error result
    BLOCK = "block"  # finish first (writes with side effects must not be torn)


@dataclass(frozen=True)
class PermissionRule:
    """A tool's own say about a call: deny beats allow beats ask."""

    action: Literal["deny", "allow", "ask"]
    tool: str = "*"
    reason: str = ""


@dataclass(frozen=True)
class PermissionPreview:
    """What a question shows when the arguments alone do not say what will happen (``permission_preview``):
    ``message`` replaces the rule's reason, ``code`` is the exact code that will run, read from where it
    will run; ``old_source`` is what an edit replaces, read from where it will apply (the question shows a diff
    of it against the new text); ``pin`` reaches ``execute`` as ``ctx.question_pin`` so the tool can refuse to act on
    anything other than what was shown (None: nothing could be shown, so nothing may run)."""

    message: str
    code: str = ""
    old_source: str | None = None
    pin: Any = None


@dataclass
class ToolOutput:
    """``content`` goes to the model (text); ``metadata`` is structured data for people and code."""

    content: str
    is_error: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def error(cls, message: str, **metadata: Any) -> "ToolOutput":
        return cls(content=message, is_error=True, metadata=metadata)

    def to_dict(self) -> dict[str, Any]:
        return {"content": self.content, "is_error": self.is_error, "metadata": self.metadata}


class ProgressReporter(Protocol):
    async def __call__(self, done: int | None = None, total: int | None = None, message: str = "") -> None: ...


async def _no_progress(done: int | None = None, total: int | None = None, message: str = "") -> None:
    return None


Emit = Callable[["Event"], Awaitable[None]]
AskUserFn = Callable[[str, list[str]], Awaitable[str]]
AskPermissionFn = Callable[["PermissionRequest"], Awaitable[str]]  # answers "allow" | "deny" | "always"
ConfirmFn = Callable[[str], Awaitable["PermissionDecision"]]


@dataclass
class ToolContext:
    """Everything a tool may use. The executor gives each call its own copy (``for_call``)."""

    config: "AstroConfig"
    services: "ServiceContainer"
    session_id: str
    cancelled: "asyncio.Event"
    emit: Emit
    file_state: "FileStateCache"
    run_id: str = ""
    tool_call_id: str = ""
    step: int = 0
    silent: bool = False  # subagents: no ask_user, no permission questions
    subagent_id: str | None = None
    depth: int = 0
    ask_user: AskUserFn | None = None
    scope: "RunScope | None" = None  # the run's scope (loop registry, subagents, ...); None: no agent loop
    ask_permission: AskPermissionFn | None = None  # answers a permission_request; None = Ask is denied
    question_pin: object = None  # this call's ``PermissionPreview.pin`` when a question was asked (set per call)
    unattended: "Unattended | None" = None  # no one can answer: questions are decided at once (permissions.py)
    # a question a running call asks once it knows more (kernel_inspect on a value that may hold secrets),
    # through the executor's own pipeline; None outside the executor: such a call is refused
    confirm: ConfirmFn | None = None

    @property
    def owner(self) -> str:
        """The Jupyter identity the run belongs to ("" for the kernel, the CLI, a single-user server):
        what a tool reads from the store or tool-results/ is scoped to it."""
        return self.scope.owner if self.scope is not None else ""

    def for_call(self, tool_call_id: str, step: int) -> "ToolContext":
        return replace(self, tool_call_id=tool_call_id, step=step)


class AgentTool(ABC):
    """Base class of every tool; subclasses set the class attributes and implement ``execute``."""

    name: ClassVar[str]
    description: ClassVar[str]
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}
    interrupt_behavior: ClassVar[InterruptBehavior] = InterruptBehavior.CANCEL
    is_readonly: ClassVar[bool] = False
    defer_loading: ClassVar[bool] = False
    causes_sibling_abort: ClassVar[bool] = False
    # Where a tool may appear, declared on the tool instead of name lists kept elsewhere:
    agent_step: ClassVar[bool] = False  # its effect belongs to a live run: exported as Markdown, never as a cell
    lead_only: ClassVar[bool] = False  # never given to a subagent or worker (asks the user, nests, leads the team)
    top_level_only: ClassVar[bool] = False  # never in any nested loop, even one handed its own registry

    def is_concurrency_safe(self, args: dict[str, Any]) -> bool:
        """Input-aware: the same tool may be safe for some arguments only. By default a tool
        that changes nothing may run beside others and one that changes something runs alone."""
        return self.is_readonly

    def check_permissions(self, args: dict[str, Any]) -> list[PermissionRule]:
        return []

    def permission_scope(self, args: dict[str, Any]) -> str:
        """What an "always" answer to this call covers: "" = the tool, else e.g. one notebook's path."""
        return ""

    async def permission_preview(self, args: dict[str, Any], ctx: ToolContext, reason: str) -> PermissionPreview | None:
        """Called only when the user is about to be asked: look up what will really happen (e.g. the code of a
        notebook cell, from the open document) so the question shows that. None: ``reason`` says enough."""
        return None

    def classifier_summary(self) -> str:
        """About fifteen words telling the model whether to load this tool: the first sentence."""
        first = re.split(r"(?<=[.!?])\s", self.description.strip(), maxsplit=1)[0]
        return first if len(first) <= 100 else first[:97].rstrip() + "..."

    @abstractmethod
    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput: ...

    async def execute_with_progress(
        self, args: dict[str, Any], ctx: ToolContext, progress: ProgressReporter
    ) -> ToolOutput:
        """Long tools override this to report progress; the default ignores the reporter."""
        return await self.execute(args, ctx)

    def definition(self) -> dict[str, Any]:
        """The OpenAI function-tool definition sent to the model."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }
