"""A run as seen from outside (``RunHandle``) and from inside (``RunState``).

The handle is what surfaces hold: the server's SSE writer, the kernel widget and the CLI
subscribe to its events, cancel it, answer its questions and await its end. The state is
the loop's mutable memory, typed field by field; tools reach it through their run scope
(``ctx.scope``, ``scope.py``): loaded deferred tools, a manual-compaction request, the owner.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, AsyncIterator

from ..errors import QuestionCancelled, QuestionUnanswered
from ..events import Done, Event, QuestionAnswered
from .context import ContextMeter

if TYPE_CHECKING:
    from .bus import EventBus
    from .compaction import CompactionStats
    from .permissions import Unattended
    from .scope import ClientNotebook, RunScope
    from .tools.base import ToolContext


def new_request_id() -> str:
    return f"req_{uuid.uuid4().hex[:16]}"


@dataclass
class RunState:
    run_id: str
    session_id: str
    owner: str = ""
    model: str | None = None
    max_steps: int = 20
    coordinator: bool = False
    step: int = 0
    messages: list[dict[str, Any]] = field(default_factory=list)  # what the next LLM call sends
    loaded_tools: set[str] = field(default_factory=set)  # deferred tools made resident by load_tool
    compact_requested: bool = False
    compact_focus: str = ""  # what a requested compaction's summary must keep (compress_context)
    final_text: str = ""
    usage: dict[str, int] = field(default_factory=dict)
    client: "ClientNotebook | None" = None  # the sidebar's open notebook (notebook tools act through it)
    prompt_context: str = ""  # appended to the user's prompt (e.g. which notebook is open)
    previous_model: str | None = None  # the session's model before this run switched it
    session_model: str | None = None  # the model the session lists for this run
    compaction: "CompactionStats | None" = None  # the compactor's per-run counters and breaker
    tool_ctx: "ToolContext | None" = None  # the run's base tool context (compaction reads its file state)
    meter: ContextMeter = field(default_factory=ContextMeter)  # the next request's size: messages + tool schemas
    overflowed: bool = False  # the endpoint refused the last request as too long: compact now, whatever the estimate
    unattended: "Unattended | None" = None  # no one can answer this run's questions (permissions.py)

    def add_usage(self, usage: dict[str, int]) -> None:
        for key, value in usage.items():
            self.usage[key] = self.usage.get(key, 0) + int(value)


class PendingAnswers:
    """Futures for ask_user / permission questions, resolved by ``RunHandle.answer``."""

    def __init__(self) -> None:
        self._futures: dict[str, asyncio.Future[str]] = {}

    def create(self, request_id: str) -> "asyncio.Future[str]":
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._futures[request_id] = future
        return future

    def resolve(self, request_id: str, answer: str) -> bool:
        future = self._futures.pop(request_id, None)
        if future is None or future.done():
            return False
        future.set_result(answer)
        return True

    def discard(self, request_id: str) -> None:
        self._futures.pop(request_id, None)

    def withdraw(self, request_id: str, why: str) -> bool:
        """No one answered (``why``): the waiting call is told so, not handed a "deny" nobody said."""
        future = self._futures.pop(request_id, None)
        if future is None or future.done():
            return False
        future.set_exception(QuestionUnanswered(why))
        return True

    def cancel_all(self) -> None:
        """A cancelled run stops waiting for answers: ask_user and permission waits end at once
        (ask_user is a Block tool, so otherwise a cancel would wait out its whole timeout)."""
        for future in self._futures.values():
            if not future.done():
                future.set_exception(QuestionCancelled("the run was cancelled before the question was answered"))
        self._futures.clear()

    def pending(self) -> list[str]:
        return [rid for rid, fut in self._futures.items() if not fut.done()]


class RunHandle:
    """One active or finished run. ``events()`` replays then follows live and ends after Done."""

    def __init__(self, state: RunState, bus: "EventBus", cancelled: asyncio.Event) -> None:
        self.state = state
        self.bus = bus
        self.cancelled = cancelled
        self.answers = PendingAnswers()
        self.task: asyncio.Task[Done] | None = None
        self.done_event: Done | None = None
        self.scope: "RunScope | None" = None  # what the run's tools see (set when its loop starts)

    @property
    def run_id(self) -> str:
        return self.state.run_id

    @property
    def session_id(self) -> str:
        return self.state.session_id

    @property
    def final_text(self) -> str:
        return self.state.final_text

    @property
    def finished(self) -> bool:
        return self.done_event is not None

    @property
    def reason(self) -> str | None:
        return self.done_event.reason if self.done_event else None

    def events(self, after_seq: int = 0) -> AsyncIterator[tuple[int, Event]]:
        return self.bus.subscribe(after_seq)

    def cancel(self) -> None:
        """Ask the run to stop: the LLM stream is abandoned, Cancel tools stop, Block tools finish,
        and pending questions are withdrawn."""
        self.cancelled.set()
        self.answers.cancel_all()

    def answer(self, request_id: str, answer: str) -> bool:
        """Deliver the user's answer to an ask_user / permission_request; False if not pending."""
        # objects stay objects: a notebook_request is answered with a JSON result, questions with text
        if isinstance(answer, dict):
            return self.answers.resolve(request_id, answer)  # type: ignore[arg-type]
        accepted = self.answers.resolve(request_id, str(answer))
        if accepted:  # stored with the run: other tabs and a later reload show it answered
            self.bus.publish(QuestionAnswered(request_id=request_id, answer=str(answer)))
        return accepted

    def withdraw(self, request_id: str, why: str) -> bool:
        """The front end could not get an answer (no one there, no input, time ran out); False if not pending."""
        accepted = self.answers.withdraw(request_id, why)
        if accepted:  # other views close the question and say why
            self.bus.publish(QuestionAnswered(request_id=request_id, answer=f"(no answer: {why})"))
        return accepted

    async def wait(self) -> Done:
        if self.task is None:
            raise RuntimeError("run was not started")
        return await asyncio.shield(self.task)

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "session_id": self.session_id,
            "status": self.reason or "running",
            "last_seq": self.bus.last_seq,
            "pending_requests": self.answers.pending(),
        }


@dataclass
class SubagentResult:
    summary: str
    is_error: bool = False
    steps: int = 0
    subagent_id: str = ""
