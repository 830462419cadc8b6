"""The typed per-run scope a tool sees as ``ctx.scope``: what a run offers its tools.

Tools that change the loop or reach beyond one call (``load_tool``, ``compress_context``,
the subagent / coordinator / team tools, the notebook bridge) go through this one object
instead of duck-typing the runtime: the run's owner and state, the registry of the loop the
call belongs to, the loaded deferred tools, compaction requests, subagents, the run's worker
pool, and the attached sidebar (its notebook and the answer slots its replies land in).

A subagent gets a child scope: its own state and registry (``load_tool`` inside it loads for
it), the parent's subagent runner, sidebar and answer slots (it shares the parent's run id).
``ctx.scope`` is None where no agent loop exists (a tool called directly from the CLI); tools
that need one say so plainly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from .run import PendingAnswers, RunState

if TYPE_CHECKING:
    from .coordinator import WorkerPool
    from .run import SubagentResult
    from .tools.base import ToolContext
    from .tools.registry import ToolRegistry


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
class RunScope:
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
    def run_id(self) -> str:
        return self.state.run_id

    @property
    def session_id(self) -> str:
        return self.state.session_id

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
