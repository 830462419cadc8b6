"""Background tool runs: slow downloads and parses that finish while the agent keeps working.

``bg_task_run`` hands a call to the process-wide :class:`BackgroundQueue` of its service
container. The queue writes a ``bg_tasks`` row *before* starting (a task is never lost),
runs the tool as its own asyncio task (not cancelled with the turn that started it),
and records the result or failure. Before each LLM call the runtime drains finished,
undelivered results of the session (:func:`drain_background_messages`) and injects them
as one user-role notice, so the model learns of them at the start of its next step.

Only ``download_paper`` and ``parse_paper`` may run here: they are slow, self-contained and
write their results to the library; anything else is refused with the list of allowed tools.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import TYPE_CHECKING, Any

from ..errors import InvalidInput
from ..events import Event

if TYPE_CHECKING:
    from ..services.container import ServiceContainer
    from .tools.base import AgentTool, ToolContext

log = logging.getLogger(__name__)

ALLOWED_BACKGROUND_TOOLS = ("download_paper", "parse_paper")
RESULT_PREVIEW_CHARS = 1500


class BackgroundError(InvalidInput):
    """A background request that cannot be accepted; the message is for the model."""


async def _drop(event: Event) -> None:
    """Background work has no live turn to stream into; results arrive through the queue."""
    return None


class BackgroundQueue:
    def __init__(self, services: "ServiceContainer") -> None:
        self.services = services
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._recovered = False

    @property
    def live_ids(self) -> set[str]:
        return {tid for tid, task in self._tasks.items() if not task.done()}

    async def recover(self) -> None:
        """Once per process: rows left queued/running by a dead process become failures."""
        if self._recovered:
            return
        self._recovered = True
        await self.services.bg_tasks.fail_orphans(self.live_ids, "interrupted: the process running it exited")

    async def submit(self, tool: "AgentTool", args: dict[str, Any], ctx: "ToolContext") -> str:
        if tool.name not in ALLOWED_BACKGROUND_TOOLS:
            raise BackgroundError(
                f"{tool.name!r} cannot run in the background; only {', '.join(ALLOWED_BACKGROUND_TOOLS)} can"
            )
        await self.recover()
        task_id = await self.services.bg_tasks.create(tool.name, args, session_id=ctx.session_id, run_id=ctx.run_id)
        bg_ctx = dataclasses.replace(
            ctx,
            cancelled=asyncio.Event(),
            emit=_drop,
            silent=True,
            ask_user=None,
            ask_permission=None,
            tool_call_id=task_id,
            scope=None,  # no loop to change: the run that started it may end first
        )
        task = asyncio.get_running_loop().create_task(self._run(task_id, tool, args, bg_ctx), name=f"bg:{task_id}")
        self._tasks[task_id] = task
        return task_id

    async def _run(self, task_id: str, tool: "AgentTool", args: dict[str, Any], ctx: "ToolContext") -> None:
        repo = self.services.bg_tasks
        try:
            await repo.set_running(task_id)
            output = await asyncio.wait_for(tool.execute(args, ctx), timeout=float(ctx.config.tool_timeout_secs))
        except asyncio.TimeoutError:
            await repo.finish(task_id, ok=False, error=f"timed out after {ctx.config.tool_timeout_secs:g} s")
        except asyncio.CancelledError:
            await asyncio.shield(repo.finish(task_id, ok=False, error="cancelled before it finished"))
            raise
        except Exception as exc:  # noqa: BLE001 - every failure is recorded and reported
            log.warning("background task %s failed", task_id, exc_info=True)
            await repo.finish(task_id, ok=False, error=f"{type(exc).__name__}: {exc}")
        else:
            if output.is_error:
                await repo.finish(task_id, ok=False, error=output.content)
            else:
                await repo.finish(task_id, ok=True, result=output.content)
        finally:
            self._tasks.pop(task_id, None)

    async def wait(self, task_id: str, timeout: float | None = None) -> None:
        task = self._tasks.get(task_id)
        if task is not None:
            await asyncio.wait({task}, timeout=timeout)

    async def close(self) -> None:
        """Cancel what still runs; each cancelled task records itself as failed."""
        tasks = [t for t in self._tasks.values() if not t.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    async def drain(self, session_id: str) -> list[dict[str, Any]]:
        """Finished results not yet shown to the model, as messages to append (marked delivered)."""
        records = await self.services.bg_tasks.take_undelivered(session_id)
        if not records:
            return []
        parts = ["Background task results (started earlier with bg_task_run):"]
        for r in records:
            if r.status == "completed":
                body = r.result if len(r.result) <= RESULT_PREVIEW_CHARS else r.result[:RESULT_PREVIEW_CHARS] + " …"
                parts.append(f"- {r.id} {r.tool_name} completed: {body}")
            else:
                parts.append(f"- {r.id} {r.tool_name} FAILED: {r.error}")
        return [{"role": "user", "content": "\n".join(parts)}]


def queue_for(services: "ServiceContainer") -> BackgroundQueue:
    """The one queue of a service container (server and kernel each have their own).

    It is the container's attachment, so the container's ``close()`` closes it before the
    database: still-running tasks are cancelled and recorded as failed while the store is open.
    """
    return services.attachment(BackgroundQueue, BackgroundQueue)


async def drain_background_messages(services: "ServiceContainer", session_id: str) -> list[dict[str, Any]]:
    """What the runtime calls before each LLM request; [] when nothing finished."""
    try:
        return await queue_for(services).drain(session_id)
    except Exception:  # noqa: BLE001 - a store hiccup must not stop the turn; rows stay undelivered
        log.warning("could not drain background results", exc_info=True)
        return []
