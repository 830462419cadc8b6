"""A run: the handle surfaces hold, the state the loop keeps, the scope tools see, its lock.

``RunHandle`` is what surfaces hold: the server's SSE writer, the kernel widget and the CLI
subscribe to its events, cancel it, answer its questions and await its end. ``RunState`` is
the loop's mutable memory, typed field by field.

``RunScope`` is what a run offers its tools as ``ctx.scope``. Tools that change the loop or
reach beyond one call (``load_tool``, ``compress_context``, the subagent / coordinator / team
tools, the notebook bridge) go through this one object instead of duck-typing the runtime:
the run's owner and state, the registry of the loop the call belongs to, the loaded deferred
tools, compaction requests, subagents, the run's worker pool, and the attached sidebar (its
notebook and the answer slots its replies land in). A subagent gets a child scope: its own
state and registry (``load_tool`` inside it loads for it), the parent's subagent runner,
sidebar and answer slots (it shares the parent's run id). ``ctx.scope`` is None where no agent
loop exists (a tool called directly from the CLI); tools that need one say so plainly.

``RunLocks`` tells which 'running' runs still have a living process. The server extension
and every kernel open the same SQLite file, each with its own runtime. At startup a runtime
must close the runs a *dead* process left 'running' (so the sidebar does not wait forever)
without touching the runs another *living* process is executing. Each active run holds
``flock(LOCK_EX)`` on ``ASTRO_HOME/.run-locks/<run_id>.lock``; the kernel drops the lock when
the process dies, even on ``kill -9``. A run whose lock can be taken is orphaned. Where
``fcntl`` does not exist every 'running' run counts as orphaned (the behaviour without locks).
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, AsyncIterator, Protocol

from ..errors import QuestionCancelled, QuestionUnanswered
from ..events import Done, Event, QuestionAnswered
from .context import ContextMeter

try:  # POSIX only
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from .bus import EventBus
    from .compaction import CompactionStats
    from .coordinator import WorkerPool
    from .permissions import Unattended
    from .tools.base import ToolContext
    from .tools.registry import ToolRegistry

log = logging.getLogger(__name__)


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
    client: ClientNotebook | None = None  # the sidebar's open notebook (notebook tools act through it)
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
        self._cancelled = False

    def create(self, request_id: str) -> "asyncio.Future[str]":
        """The slot for one answer; already failed once the run is cancelled (a question a tool starts
        to ask just after the cancel must not wait out its timeout for an answer no one will give)."""
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        if self._cancelled:
            future.set_exception(QuestionCancelled("the run was cancelled before the question was asked"))
            return future
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
        (ask_user is a Block tool, so otherwise a cancel would wait out its whole timeout), and no
        question is asked after it."""
        self._cancelled = True
        for future in self._futures.values():
            if not future.done():
                future.set_exception(QuestionCancelled("the run was cancelled before the question was answered"))
        self._futures.clear()

    def pending(self) -> list[str]:
        return [rid for rid, fut in self._futures.items() if not fut.done()]


class _OfRun:
    """The ids every view of a run reads from its state (the handle, the scope)."""

    state: RunState

    @property
    def run_id(self) -> str:
        return self.state.run_id

    @property
    def session_id(self) -> str:
        return self.state.session_id


class RunHandle(_OfRun):
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


@dataclass(frozen=True)
class SubagentResult:
    """What a subagent hands back to the tool that started it: only its summary reaches the parent."""

    summary: str
    is_error: bool = False
    steps: int = 0
    subagent_id: str = ""


@dataclass(frozen=True)
class ClientNotebook:
    """What the sidebar said about itself when it started the run (``agent/tools/notebook/bridge.py``)."""

    path: str = ""
    cell_ids: tuple[str, ...] = ()
    bridge: bool = False
    # an ACP client's file system (``astro_jupyter/acp/agent.py``): read_file / file_write go through
    # it, so the agent sees and edits the editor's buffers; None: the disk
    files: Any = field(default=None, compare=False, repr=False)


class ClientFiles(Protocol):
    """A front end's file system (the editor's open buffers), used after the sandbox checks passed."""

    can_read: bool
    can_write: bool

    async def read_text(self, path: str) -> str: ...

    async def write_text(self, path: str, content: str) -> None: ...


def client_files(ctx: "ToolContext") -> ClientFiles | None:
    """The run's client file system, if its front end offered one."""
    client = ctx.scope.client if ctx.scope is not None else None
    return getattr(client, "files", None)


class SubagentRunner(Protocol):
    """Runs an isolated subagent loop for a tool call (``AgentRuntime.run_subagent``)."""

    async def __call__(
        self,
        task: str,
        *,
        parent_ctx: "ToolContext",
        max_steps: int | None = None,
        registry: "ToolRegistry | None" = None,
        system_prompt: str | None = None,
    ) -> "SubagentResult": ...


@dataclass
class RunScope(_OfRun):
    state: RunState  # owner, ids, loaded tools, compaction request, the live message list
    registry: "ToolRegistry"  # the tools of the loop this scope belongs to (a subagent's own subset)
    runner: SubagentRunner | None = None  # None: no agent loop to start subagents with
    answers: PendingAnswers | None = None  # the run's answer slots (questions, sidebar replies)
    client: ClientNotebook | None = None  # the attached sidebar's notebook, if it sent one
    pool: "WorkerPool | None" = field(default=None, repr=False)  # coordinator workers (``coordinator.pool_for``)

    @property
    def owner(self) -> str:
        """The Jupyter identity the run belongs to ("" for the kernel, the CLI, a single-user server)."""
        return self.state.owner

    @property
    def loaded_tools(self) -> set[str]:
        """Deferred tools ``load_tool`` made resident for this loop."""
        return self.state.loaded_tools

    def request_compaction(self, focus: str = "") -> bool:
        """Compact before the next model call; True when one was already scheduled."""
        already = self.state.compact_requested
        self.state.compact_requested = True
        if focus:
            self.state.compact_focus = focus
        return already

    async def spawn_subagent(
        self,
        task: str,
        *,
        parent_ctx: "ToolContext",
        max_steps: int | None = None,
        registry: "ToolRegistry | None" = None,
        system_prompt: str | None = None,
    ) -> "SubagentResult | None":
        """Run a subagent on ``task``; None when this scope has no loop to run it with."""
        if self.runner is None:
            return None
        return await self.runner(
            task, parent_ctx=parent_ctx, max_steps=max_steps, registry=registry, system_prompt=system_prompt
        )

    def child(self, state: RunState, registry: "ToolRegistry") -> "RunScope":
        """A subagent's scope: its own state and tools; the parent's runner, sidebar and answer slots."""
        return RunScope(state=state, registry=registry, runner=self.runner, answers=self.answers, client=self.client)

    async def close(self) -> None:
        """Stop what the run started and must not outlive it (queued or running workers)."""
        if self.pool is not None:
            await self.pool.close()


def fcntl_missing() -> bool:
    return fcntl is None


class RunLocks:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._held: dict[str, Any] = {}

    def _path(self, run_id: str) -> Path:
        safe = "".join(c for c in run_id if c.isalnum() or c in "-_")
        return self.directory / f"{safe}.lock"

    def acquire(self, run_id: str) -> bool:
        """Hold the lock of ``run_id`` (a run, or ``ses-<id>`` for a session) in this process.

        False only when another holder has it; other failures are logged and count as
        success (a missing lock weakens the orphan check, it must not stop the agent).
        """
        if fcntl is None or run_id in self._held:
            return run_id not in self._held
        handle = None
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            handle = open(self._path(run_id), "a+")  # noqa: SIM115 - held open for the run's life
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if handle is not None:
                handle.close()
            return False
        except OSError as exc:
            if handle is not None:
                handle.close()
            log.warning("run lock for %s unavailable: %s", run_id, exc)
            return True
        self._held[run_id] = handle
        return True

    def release(self, run_id: str) -> None:
        handle = self._held.pop(run_id, None)
        if handle is None:
            return
        try:
            os.unlink(self._path(run_id))
        except OSError:
            pass
        handle.close()  # closing drops the flock

    def held_here(self, run_id: str) -> bool:
        """True when this process holds the run's lock (the run is one of ours)."""
        return run_id in self._held

    def is_alive(self, run_id: str) -> bool:
        """True when some process (this one included) still holds the run's lock."""
        if fcntl is None:
            return False
        if run_id in self._held:
            return True
        path = self._path(run_id)
        if not path.exists():
            return False
        try:
            with open(path, "a+") as handle:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        except BlockingIOError:
            return True
        except OSError:
            return False
        try:
            path.unlink()  # the owner is gone: tidy up
        except OSError:
            pass
        return False
