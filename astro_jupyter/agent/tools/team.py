"""Team tools: teammates are subagents in the background that talk through file inboxes.

A team belongs to the identity of the run that made it (``ServiceContainer.team_for(owner)``):
another identity's tools neither list, read, consume nor reach its members.
``spawn_teammate`` registers a member under ``ASTRO_HOME/team/<name>/`` and starts a
subagent working on its task with its own copies of the message tools (signed with its
name); when it finishes, its summary lands in the lead's inbox. ``send_teammate_message``,
``team_broadcast`` and ``check_team_inbox`` go through ``services/team.py`` (atomic
one-file-per-message inboxes), so the kernel and the server can share a team.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import TYPE_CHECKING, Any

from ...services.team import LEAD, TeamError, check_name
from ..subagents import SubagentLimitError, resolve_max_steps, spawn, worker_registry
from .base import AgentTool, InterruptBehavior, ToolContext, ToolOutput

if TYPE_CHECKING:
    from ...config import AstroConfig
    from ...events import Event
    from ...services.container import ServiceContainer
    from .registry import ToolRegistry

log = logging.getLogger(__name__)

TEAMMATE_PROMPT = """You are {name}, a teammate in an astro-jupyter research team. Your role: {role}
Work on your task with your tools. Use check_team_inbox to read messages and send_teammate_message
(to "lead" or another teammate) to share findings. You cannot ask the user questions.
Finish with a short, self-contained summary: it is delivered to the lead's inbox."""

class Teammates(dict[tuple[str, str], "asyncio.Task[None]"]):
    """The running teammates of one service container by (owner, name): two identities' teams
    may use the same names. Closed with the container (each reports being stopped)."""

    def __init__(self, services: "ServiceContainer | None" = None) -> None:
        super().__init__()

    async def close(self) -> None:
        tasks = [t for t in self.values() if not t.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


def live_teammates(services: "ServiceContainer") -> Teammates:
    """The container's running teammates (its attachment: ``close()`` stops them before the DB)."""
    return services.attachment(Teammates, Teammates)


class SendTeammateMessageTool(AgentTool):
    name = "send_teammate_message"
    description = "Send a message to one teammate's inbox (or to 'lead')."
    parameters = {
        "type": "object",
        "properties": {"to": {"type": "string"}, "content": {"type": "string"}},
        "required": ["to", "content"],
    }
    interrupt_behavior = InterruptBehavior.BLOCK
    agent_step = True
    lead_only = True
    defer_loading = True

    def __init__(self, sender: str = LEAD) -> None:
        self.sender = sender

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        team = ctx.services.team_for(ctx.owner)
        to = str(args.get("to") or "")
        try:
            recipient = check_name(to)
            if not team.exists(recipient):
                known = ", ".join(m for m in team.members() if m != self.sender) or "none"
                return ToolOutput.error(f"no teammate named {recipient!r} (teammates: {known}; the lead is 'lead')")
            message = team.send(recipient, self.sender, str(args.get("content") or ""))
        except TeamError as exc:
            return ToolOutput.error(str(exc))
        return ToolOutput(f"Sent {message['id']} to {recipient}.", metadata={"message": message})


class TeamBroadcastTool(AgentTool):
    name = "team_broadcast"
    description = "Send the same message to every teammate (and the lead)."
    parameters = {"type": "object", "properties": {"content": {"type": "string"}}, "required": ["content"]}
    interrupt_behavior = InterruptBehavior.BLOCK
    agent_step = True
    lead_only = True
    defer_loading = True

    def __init__(self, sender: str = LEAD) -> None:
        self.sender = sender

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        try:
            recipients = ctx.services.team_for(ctx.owner).broadcast(self.sender, str(args.get("content") or ""))
        except TeamError as exc:
            return ToolOutput.error(str(exc))
        if not recipients:
            return ToolOutput.error("nobody to broadcast to: spawn a teammate first")
        return ToolOutput(f"Broadcast to {', '.join(recipients)}.", metadata={"recipients": recipients})


class CheckTeamInboxTool(AgentTool):
    name = "check_team_inbox"
    defer_loading = True
    description = "Read (and mark as read) the unread messages in your team inbox, oldest first."
    parameters = {"type": "object", "properties": {}}
    interrupt_behavior = InterruptBehavior.BLOCK
    is_readonly = True
    agent_step = True
    lead_only = True

    def __init__(self, member: str = LEAD) -> None:
        self.member = member

    def is_concurrency_safe(self, args: dict[str, Any]) -> bool:
        return False  # reading marks the messages read: two reads in one turn would race

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        result = ctx.services.team_for(ctx.owner).read(self.member)
        lines = [f"[{m.get('kind', 'message')} from {m.get('from', '?')}] {m.get('content', '')}" for m in result.messages]
        if not lines and not result.errors:
            text = "No new messages."
        else:
            text = "\n".join(lines) if lines else "No readable messages."
        meta = {"messages": result.messages, "errors": result.errors}
        if result.errors:
            text += "\n\nProblems:\n" + "\n".join(f"- {e}" for e in result.errors)
            if not result.messages:
                return ToolOutput.error(text, **meta)
        return ToolOutput(text, metadata=meta)


class SpawnTeammateTool(AgentTool):
    name = "spawn_teammate"
    description = (
        "Start a named teammate (a background subagent with a role) on a task; it reports through your team "
        "inbox when done and can exchange messages meanwhile."
    )
    parameters = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "lower-case id, e.g. 'photometry'"},
            "role": {"type": "string"},
            "task": {"type": "string"},
            "max_steps": {"type": "integer", "description": "default 5, at most 10"},
        },
        "required": ["name", "role", "task"],
    }
    interrupt_behavior = InterruptBehavior.BLOCK
    agent_step = True
    lead_only = True
    defer_loading = True

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        team = ctx.services.team_for(ctx.owner)
        try:
            name = check_name(str(args.get("name") or ""))
            steps = resolve_max_steps(args.get("max_steps"))
        except (TeamError, SubagentLimitError) as exc:
            return ToolOutput.error(str(exc))
        if name == LEAD:
            return ToolOutput.error("'lead' is the name of the team lead; choose another name")
        if ctx.subagent_id:
            return ToolOutput.error("teammates can only be spawned by the lead agent")
        role, task = str(args.get("role") or "").strip(), str(args.get("task") or "").strip()
        if not task:
            return ToolOutput.error("spawn_teammate needs a task")
        live, key = live_teammates(ctx.services), (ctx.owner, name)
        if key in live and not live[key].done():
            return ToolOutput.error(f"teammate {name!r} is already working; message it instead")
        if ctx.scope is None or ctx.scope.runner is None:
            return ToolOutput.error("spawn_teammate needs a running agent loop")
        registry = worker_registry(ctx.scope.registry)
        for bound in (SendTeammateMessageTool(sender=name), TeamBroadcastTool(sender=name), CheckTeamInboxTool(member=name)):
            bound.defer_loading = False  # type: ignore[misc] - a teammate always needs its message tools
            registry.replace(bound)
        team.register(name, role, status="working", task=task)
        prompt = TEAMMATE_PROMPT.format(name=name, role=role or "general research assistant")
        child_ctx = dataclasses.replace(ctx, emit=_tolerant(ctx.emit))
        live[key] = asyncio.get_running_loop().create_task(
            _work(child_ctx, name, task, steps, registry, prompt), name=f"teammate:{name}"
        )
        return ToolOutput(
            f"Teammate {name} started on its task; its summary will arrive in your inbox (check_team_inbox).",
            metadata={"teammate": name, "max_steps": steps},
        )


def _tolerant(emit: Any) -> Any:
    """A teammate may outlive the turn (or run) that spawned it: late events are dropped, not fatal."""

    async def send(event: "Event") -> None:
        try:
            await emit(event)
        except Exception:  # noqa: BLE001
            log.debug("dropped a teammate event after its run ended", exc_info=True)

    return send


async def _work(ctx: ToolContext, name: str, task: str, steps: int, registry: "ToolRegistry", prompt: str) -> None:
    team = ctx.services.team_for(ctx.owner)
    try:
        outcome = await spawn(ctx, task, max_steps=steps, registry=registry, system_prompt=prompt)
        summary, failed = outcome.summary, outcome.is_error
    except asyncio.CancelledError:
        summary, failed = "stopped before finishing", True
    except Exception as exc:  # noqa: BLE001 - the lead hears about every failure
        summary, failed = f"failed: {type(exc).__name__}: {exc}", True
    try:
        team.send(LEAD, name, summary, kind="error" if failed else "result")
        team.set_status(name, "failed" if failed else "done")
    except Exception:  # noqa: BLE001
        log.warning("could not deliver teammate %s's result", name, exc_info=True)
    finally:
        live_teammates(ctx.services).pop((ctx.owner, name), None)


def tools(config: "AstroConfig") -> list[AgentTool]:
    return [SpawnTeammateTool(), SendTeammateMessageTool(), TeamBroadcastTool(), CheckTeamInboxTool()]
