"""``bg_task_run`` / ``bg_task_check``: run a download or parse in the background, check on it later."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..background import ALLOWED_BACKGROUND_TOOLS, BackgroundError, queue_for
from .base import AgentTool, InterruptBehavior, PermissionRule, ToolContext, ToolOutput
from .load_tool import run_registry

if TYPE_CHECKING:
    from ...config import AstroConfig


class BgTaskRunTool(AgentTool):
    name = "bg_task_run"
    description = (
        "Start a slow download_paper or parse_paper call in the background and continue working; its result "
        "is reported before a later step. Only download_paper and parse_paper are allowed."
    )
    parameters = {
        "type": "object",
        "properties": {
            "tool": {"type": "string", "description": "download_paper or parse_paper"},
            "arguments": {"type": "object", "description": "The arguments of that tool."},
        },
        "required": ["tool", "arguments"],
    }
    interrupt_behavior = InterruptBehavior.BLOCK
    agent_step = True
    defer_loading = True

    _INNER_FAMILIES = (".astro.download", ".astro.paper")

    def __init__(self, config: "AstroConfig | None" = None) -> None:
        self._config = config
        self._inner: dict[str, AgentTool] | None = None

    def _inner_tool(self, name: str) -> AgentTool | None:
        if self._inner is None:
            from . import family_tools

            found: dict[str, AgentTool] = {}
            for module in self._INNER_FAMILIES:
                try:
                    found.update({t.name: t for t in family_tools(module, self._config)})
                except Exception:  # noqa: BLE001 - a family that cannot load adds no rules; execute still checks
                    continue
            self._inner = found
        return self._inner.get(name)

    def check_permissions(self, args: dict[str, Any]) -> list[PermissionRule]:
        """The inner tool's own rules apply to the background call (retargeted to this tool)."""
        inner = self._inner_tool(str(args.get("tool"))) if args.get("tool") in ALLOWED_BACKGROUND_TOOLS else None
        if inner is None:
            return []
        return [PermissionRule(r.action, "*", r.reason) for r in inner.check_permissions(args.get("arguments") or {})]

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        name = str(args.get("tool") or "")
        inner_args = args.get("arguments") or {}
        if name not in ALLOWED_BACKGROUND_TOOLS:
            return ToolOutput.error(
                f"{name or 'this tool'!r} cannot run in the background; only {', '.join(ALLOWED_BACKGROUND_TOOLS)} can"
                " (call other tools directly)"
            )
        if not isinstance(inner_args, dict):
            return ToolOutput.error("'arguments' must be an object with the arguments of the tool")
        registry = run_registry(ctx)
        tool = registry.get(name) if registry is not None else self._inner_tool(name)
        if tool is None:
            return ToolOutput.error(f"{name} is not available in this agent")
        from ..validation import schema_errors
        from ..permissions import PermissionChecker

        problems = schema_errors(inner_args, tool.parameters)
        if problems:
            return ToolOutput.error(f"invalid arguments for {name}: {'; '.join(problems)}")
        decision = PermissionChecker.from_config(ctx.config).check(tool, inner_args, session_id=ctx.session_id)
        if decision.action == "deny":
            return ToolOutput.error(f"{name} is not permitted: {decision.reason}")
        try:
            task_id = await queue_for(ctx.services).submit(tool, inner_args, ctx)
        except BackgroundError as exc:
            return ToolOutput.error(str(exc))
        return ToolOutput(
            f"Started {name} in the background as {task_id}; its result will be reported before a later step "
            "(or check with bg_task_check).",
            metadata={"task_id": task_id, "tool": name},
        )


class BgTaskCheckTool(AgentTool):
    name = "bg_task_check"
    description = "Check background tasks started with bg_task_run: one task by id, or list this session's tasks."
    parameters = {"type": "object", "properties": {"task_id": {"type": "string"}}}
    interrupt_behavior = InterruptBehavior.CANCEL
    agent_step = True
    defer_loading = True

    def is_concurrency_safe(self, args: dict[str, Any]) -> bool:
        return True

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        repo = ctx.services.bg_tasks
        task_id = str(args.get("task_id") or "").strip()
        if task_id:
            record = await repo.get(task_id)
            if record is None or record.session_id != ctx.session_id:  # another session's (or user's) task
                return ToolOutput.error(f"no background task {task_id!r} in this session")
            records = [record]
        else:
            records = await repo.list(ctx.session_id)
            if not records:
                return ToolOutput("No background tasks in this session.", metadata={"tasks": []})
        lines = []
        for r in records:
            detail = r.result[:500] if r.status == "completed" else r.error if r.status == "failed" else ""
            lines.append(f"- {r.id} {r.tool_name}: {r.status}" + (f" — {detail}" if detail else ""))
        return ToolOutput("\n".join(lines), metadata={"tasks": [r.to_dict() for r in records]})


def tools(config: "AstroConfig") -> list[AgentTool]:
    return [BgTaskRunTool(config), BgTaskCheckTool()]
