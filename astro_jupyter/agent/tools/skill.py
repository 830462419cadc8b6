"""``load_skill``: read a SKILL.md (inline) or let a subagent carry it out (fork).

Skills are Markdown playbooks under ``ASTRO_HOME/skills`` (front matter: name, description): the
installed ones, which every identity sees, and the run's own identity's (``skills/owners/<key>/``).
``inline`` returns the text so the model follows it here; ``fork`` starts a subagent whose
system prompt is the skill, given ``task``, and returns only its summary.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...services.skills import SkillError
from ..subagents import SubagentLimitError, resolve_max_steps, spawn
from .base import AgentTool, InterruptBehavior, ToolContext, ToolOutput

if TYPE_CHECKING:
    from ...config import AstroConfig

FORK_PROMPT = """You are a sub-agent of astro-jupyter carrying out the skill "{name}" ({description}).
Follow the skill's instructions below, using your tools. You cannot ask the user questions.
Finish with a short, self-contained summary of what you did and found.

--- SKILL ---
{body}"""


class LoadSkillTool(AgentTool):
    name = "load_skill"
    defer_loading = True
    description = (
        "Load a skill (a SKILL.md playbook). mode=inline returns its instructions; mode=fork runs a subagent "
        "that follows the skill for the given task. Call without a name to list the skills."
    )
    parameters = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "mode": {"type": "string", "enum": ["inline", "fork"]},
            "task": {"type": "string", "description": "fork mode: what the subagent should do with the skill."},
            "max_steps": {"type": "integer", "description": "fork mode: default 5, at most 10."},
        },
    }
    interrupt_behavior = InterruptBehavior.CANCEL
    agent_step = True

    def is_concurrency_safe(self, args: dict[str, Any]) -> bool:
        return (args.get("mode") or "inline") == "inline"

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        library = ctx.services.skills_for(ctx.owner)  # installed + this identity's own
        name = str(args.get("name") or "").strip()
        mode = str(args.get("mode") or "inline")
        if mode not in ("inline", "fork"):
            return ToolOutput.error(f"mode must be 'inline' or 'fork', got {mode!r}")
        if not name:
            skills, problems = library.scan()
            if not skills:
                where = library.skills_dir
                return ToolOutput(f"No skills installed (put <name>/SKILL.md files under {where}).", metadata={"skills": []})
            lines = [f"- {s.name}: {s.description}" for s in skills]
            lines += [f"(unreadable: {p})" for p in problems]
            return ToolOutput("Available skills:\n" + "\n".join(lines), metadata={"skills": [s.name for s in skills]})
        try:
            skill = library.get(name)
        except SkillError as exc:
            return ToolOutput.error(str(exc))
        meta = {"skill": skill.name, "path": str(skill.path), "mode": mode}
        if mode == "inline":
            return ToolOutput(f"# Skill: {skill.name}\n{skill.description}\n\n{skill.body}", metadata=meta)
        task = str(args.get("task") or "").strip() or f"Carry out the skill {skill.name!r}."
        try:
            steps = resolve_max_steps(args.get("max_steps"))
        except SubagentLimitError as exc:
            return ToolOutput.error(str(exc))
        if ctx.subagent_id:
            return ToolOutput.error("fork mode cannot start a subagent from inside a subagent; use mode=inline")
        prompt = FORK_PROMPT.format(name=skill.name, description=skill.description, body=skill.body)
        outcome = await spawn(ctx, task, max_steps=steps, system_prompt=prompt)
        meta.update(subagent_id=outcome.subagent_id, steps=outcome.steps)
        if outcome.is_error:
            return ToolOutput.error(outcome.summary, **meta)
        return ToolOutput(outcome.summary, metadata=meta)


def tools(config: "AstroConfig") -> list[AgentTool]:
    return [LoadSkillTool()]
