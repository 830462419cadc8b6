"""``ask_user``: pause the loop and ask the person a question (sidebar or notebook cell).

The runtime supplies ``ctx.ask_user``: it emits an ``ask_user`` event and waits for the
answer (``ASK_USER_TIMEOUT_SECS``, 5 minutes). Subagents run silent,
so there is nobody to ask: the tool refuses there instead of hanging.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from ...errors import QuestionCancelled
from .base import AgentTool, InterruptBehavior, ToolContext, ToolOutput

ASK_USER_TIMEOUT_SECS = 300.0  # how long ask_user waits for an answer

if TYPE_CHECKING:
    from ...config import AstroConfig


class AskUserTool(AgentTool):
    name = "ask_user"
    description = (
        "Ask the user a question and wait for the answer. Use only when a decision or missing information "
        "cannot be resolved with the other tools. Optional answer choices may be offered."
    )
    parameters = {
        "type": "object",
        "properties": {
            "question": {"type": "string"},
            "options": {"type": "array", "items": {"type": "string"}, "description": "Suggested answers (optional)."},
        },
        "required": ["question"],
    }
    interrupt_behavior = InterruptBehavior.BLOCK
    agent_step = True
    lead_only = True
    top_level_only = True

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        question = str(args.get("question") or "").strip()
        if not question:
            return ToolOutput.error("ask_user needs a non-empty question")
        if ctx.silent or ctx.subagent_id or ctx.ask_user is None:
            return ToolOutput.error(
                "ask_user is unavailable here (subagents and headless runs are silent): decide with the "
                "information you have and state your assumption in the result"
            )
        options = [str(o) for o in (args.get("options") or []) if str(o).strip()]
        timeout = ctx.services.tuning.ask_user_secs or ASK_USER_TIMEOUT_SECS
        try:
            answer = await asyncio.wait_for(ctx.ask_user(question, options), timeout=timeout + 5.0)
        except asyncio.TimeoutError:
            return ToolOutput.error(f"the user did not answer within {timeout:g} s; continue without the answer")
        except QuestionCancelled as exc:
            return ToolOutput.error(str(exc))
        if answer is None or not str(answer).strip():
            return ToolOutput.error(f"the user did not answer within {timeout:g} s; continue without the answer")
        return ToolOutput(f"User answered: {answer}", metadata={"answer": answer})


def tools(config: "AstroConfig") -> list[AgentTool]:
    return [AskUserTool()]
