"""Coordinator meta-tools: ``delegate_task``, ``check_task``, ``task_stop``, ``synthesize``.

Added only to coordinator-mode sessions (``build_default_registry(config, coordinator=True)``).
The pool and its limits live in ``agent/coordinator.py`` (one per run, on its scope); these tools
are its thin face.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..coordinator import WorkerPool, describe, existing_pool, pool_for
from ..subagents import SubagentLimitError, resolve_max_steps
from .base import AgentTool, InterruptBehavior, ToolContext, ToolOutput

if TYPE_CHECKING:
    from ...config import AstroConfig


def wait_budget(ctx: ToolContext, pool: WorkerPool) -> float:
    """How long a tool may wait for workers: within the executor's own tool timeout."""
    return max(1.0, min(pool.timeout + 5.0, float(ctx.config.tool_timeout_secs) * 0.9))


class DelegateTaskTool(AgentTool):
    name = "delegate_task"
    description = (
        "Delegate one independent, self-contained task to a worker subagent; returns a task id at once. "
        "Workers run in parallel up to the pool size. Describe everything the worker needs."
    )
    parameters = {
        "type": "object",
        "properties": {
            "description": {"type": "string"},
            "max_steps": {"type": "integer", "description": "default 5, at most 10"},
        },
        "required": ["description"],
    }
    interrupt_behavior = InterruptBehavior.BLOCK
    agent_step = True
    lead_only = True

    def is_concurrency_safe(self, args: dict[str, Any]) -> bool:
        return True  # only schedules work; several delegations in one turn go out together

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        description = str(args.get("description") or "").strip()
        if not description:
            return ToolOutput.error("delegate_task needs a description of the task")
        try:
            steps = resolve_max_steps(args.get("max_steps"))
        except SubagentLimitError as exc:
            return ToolOutput.error(str(exc))
        pool = pool_for(ctx) if ctx.scope is not None and ctx.scope.runner is not None else None
        if pool is None:
            return ToolOutput.error("delegate_task needs a running coordinator loop")
        task_id = await pool.delegate(description, ctx, steps)
        return ToolOutput(
            f"Delegated as {task_id} (pool of {pool.size} workers). Use check_task or synthesize for the result.",
            metadata={"task_id": task_id},
        )


class CheckTaskTool(AgentTool):
    name = "check_task"
    description = "Status and results of delegated tasks: one task by id, or all tasks of this session."
    parameters = {
        "type": "object",
        "properties": {
            "task_id": {"type": "string"},
            "wait": {"type": "boolean", "description": "Wait (up to the task timeout) until it ends."},
        },
    }
    interrupt_behavior = InterruptBehavior.CANCEL
    agent_step = True
    lead_only = True

    def is_concurrency_safe(self, args: dict[str, Any]) -> bool:
        return True

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        repo = ctx.services.coordinator_tasks
        task_id = str(args.get("task_id") or "").strip()
        if task_id:
            record = await repo.get(task_id)
            if record is None or record.session_id != ctx.session_id:
                return ToolOutput.error(f"no delegated task {task_id!r} in this session")
            pool = existing_pool(ctx)
            if args.get("wait") and pool is not None:
                await pool.wait([task_id], wait_budget(ctx, pool))
                record = await repo.get(task_id) or record
            records = [record]
        else:
            records = await repo.list(ctx.session_id)
            if not records:
                return ToolOutput("No delegated tasks in this session.", metadata={"tasks": []})
        return ToolOutput("\n".join(describe(r) for r in records), metadata={"tasks": [r.to_dict() for r in records]})


class TaskStopTool(AgentTool):
    name = "task_stop"
    description = "Stop a delegated task that is queued or running."
    parameters = {"type": "object", "properties": {"task_id": {"type": "string"}}, "required": ["task_id"]}
    interrupt_behavior = InterruptBehavior.BLOCK
    agent_step = True
    lead_only = True

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        repo = ctx.services.coordinator_tasks
        task_id = str(args.get("task_id") or "").strip()
        record = await repo.get(task_id)
        if record is None or record.session_id != ctx.session_id:
            return ToolOutput.error(f"no delegated task {task_id!r} in this session")
        if record.done:
            return ToolOutput.error(f"task {task_id} already ended ({record.status}); nothing to stop")
        pool = existing_pool(ctx)
        stopped = pool is not None and await pool.stop(task_id)
        if not stopped:
            # no live worker (e.g. the process that ran it is gone): record the stop anyway
            await repo.finish(task_id, "stopped", error="stopped (no live worker)")
        record = await repo.get(task_id)
        return ToolOutput(f"Task {task_id} is {record.status if record else 'stopped'}.", metadata={"task_id": task_id})


class SynthesizeTool(AgentTool):
    name = "synthesize"
    description = (
        "Wait for delegated tasks to end (all of this session's, or the given ids) and collect their results "
        "for the final answer."
    )
    parameters = {
        "type": "object",
        "properties": {"task_ids": {"type": "array", "items": {"type": "string"}}},
    }
    interrupt_behavior = InterruptBehavior.CANCEL
    agent_step = True
    lead_only = True

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        repo = ctx.services.coordinator_tasks
        records = await repo.list(ctx.session_id)
        wanted = [str(t) for t in (args.get("task_ids") or [])]
        if wanted:
            known = {r.id for r in records}
            unknown = [t for t in wanted if t not in known]
            if unknown:
                return ToolOutput.error(f"unknown task id(s) in this session: {', '.join(unknown)}")
            records = [r for r in records if r.id in set(wanted)]
        if not records:
            return ToolOutput.error("nothing to synthesize: delegate tasks first")
        pool = existing_pool(ctx)
        ids = [r.id for r in records]
        all_done = True
        if pool is not None:
            all_done = await pool.wait(ids, wait_budget(ctx, pool))
        records = [r for r in await repo.list(ctx.session_id) if r.id in set(ids)]
        counts: dict[str, int] = {}
        for r in records:
            counts[r.status] = counts.get(r.status, 0) + 1
        header = "Results of delegated tasks (" + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) + ")"
        if not all_done:
            header += " — some are still running; call synthesize again later for them"
        body = "\n\n".join(describe(r, preview=4000) for r in records)
        return ToolOutput(
            f"{header}:\n\n{body}\n\nWrite the combined answer from these results; mention failed tasks.",
            metadata={"tasks": [r.to_dict() for r in records], "counts": counts},
        )


def tools(config: "AstroConfig") -> list[AgentTool]:
    return [DelegateTaskTool(), CheckTaskTool(), TaskStopTool(), SynthesizeTool()]
