"""Coordinator mode: a run that plans and delegates, with a bounded pool of worker subagents.

Each coordinator run gets one :class:`WorkerPool`, held by its run scope (``RunScope.pool``). ``delegate_task`` stores a row in
``coordinator_tasks`` and schedules a worker; at most ``coordinator_workers`` workers run
at once (an ``asyncio.Semaphore``), each under ``TASK_TIMEOUT_SECS`` counted
from when it starts running (not while it queues). Workers are ordinary subagents (the
runtime's standard tools, same permissions and hooks). Every state change is written to
the table before the tools report it. When the run ends (its scope is closed right after the
``Stop`` hooks), workers still queued or running are stopped and recorded as such.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from .subagents import spawn

if TYPE_CHECKING:
    from ..store.coordinator_tasks import CoordinatorTaskRecord
    from .tools.base import ToolContext

log = logging.getLogger(__name__)

WORKER_PROMPT = """You are a worker of an astro-jupyter coordinator. Carry out exactly the delegated task
with your tools, without asking questions. Finish with a concise, self-contained report of the
result (facts, numbers, identifiers, sources): the coordinator sees only that report."""


TASK_TIMEOUT_SECS = 600.0  # one delegated task


class WorkerPool:
    def __init__(self, ctx: "ToolContext") -> None:
        self.ctx = ctx
        self.config = ctx.config
        self.repo = ctx.services.coordinator_tasks
        self.size = max(1, int(self.config.coordinator_workers))
        self.timeout = ctx.services.tuning.delegated_task_secs or TASK_TIMEOUT_SECS
        self.semaphore = asyncio.Semaphore(self.size)
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.running = 0
        self.peak = 0  # most workers seen running at once (the semaphore bound, observable)

    async def delegate(self, description: str, ctx: "ToolContext", max_steps: int) -> str:
        task_id = await self.repo.create(description, session_id=ctx.session_id, run_id=ctx.run_id)
        self.tasks[task_id] = asyncio.get_running_loop().create_task(
            self._work(task_id, description, ctx, max_steps), name=f"worker:{task_id}"
        )
        return task_id

    async def _work(self, task_id: str, description: str, ctx: "ToolContext", max_steps: int) -> None:
        try:
            async with self.semaphore:
                await self.repo.set_running(task_id)
                self.running += 1
                self.peak = max(self.peak, self.running)
                try:
                    outcome = await asyncio.wait_for(
                        spawn(ctx, description, max_steps=max_steps, system_prompt=WORKER_PROMPT), self.timeout
                    )
                finally:
                    self.running -= 1
            status = "failed" if outcome.is_error else "completed"
            await self.repo.finish(
                task_id,
                status,
                result="" if outcome.is_error else outcome.summary,
                error=outcome.summary if outcome.is_error else "",
                steps=outcome.steps,
            )
        except asyncio.TimeoutError:
            await self.repo.finish(task_id, "timeout", error=f"timed out after {self.timeout:g} s")
        except asyncio.CancelledError:
            await asyncio.shield(self.repo.finish(task_id, "stopped", error="stopped before it finished"))
            raise
        except Exception as exc:  # noqa: BLE001 - every failure is recorded
            log.warning("worker %s failed", task_id, exc_info=True)
            await self.repo.finish(task_id, "failed", error=f"{type(exc).__name__}: {exc}")

    async def stop(self, task_id: str) -> bool:
        """Cancel a queued or running worker; False when it already ended (or is unknown)."""
        task = self.tasks.get(task_id)
        if task is None or task.done():
            return False
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return True

    async def wait(self, task_ids: list[str], timeout: float | None) -> bool:
        """Wait until the given workers end; True if all ended within ``timeout``."""
        tasks = [self.tasks[t] for t in task_ids if t in self.tasks and not self.tasks[t].done()]
        if not tasks:
            return True
        done, pending = await asyncio.wait(tasks, timeout=timeout)
        return not pending

    async def close(self) -> None:
        pending = [t for t in self.tasks.values() if not t.done()]
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)


def pool_for(ctx: "ToolContext") -> WorkerPool | None:
    """The worker pool of the caller's run, created on first delegation; None outside a run."""
    scope = ctx.scope
    if scope is None:
        return None
    if scope.pool is None:
        scope.pool = WorkerPool(ctx)  # closed with the run (``RunScope.close``)
    return scope.pool


def existing_pool(ctx: "ToolContext") -> WorkerPool | None:
    """The worker pool of the caller's run, if it delegated anything yet."""
    return ctx.scope.pool if ctx.scope is not None else None


def describe(record: "CoordinatorTaskRecord", preview: int = 2000) -> str:
    head = f"{record.id} [{record.status}] {record.description}"
    if record.status == "completed":
        body = record.result if len(record.result) <= preview else record.result[:preview] + " …"
        return f"{head}\n  result: {body}"
    if record.error:
        return f"{head}\n  error: {record.error}"
    return head
