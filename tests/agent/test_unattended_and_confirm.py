"""Questions with no one to answer, and questions a running call asks (``ctx.confirm``), in the executor.

An unattended run (``Unattended``) decides each question at once: a tool on its allow-list runs, any
other is refused with the reason and how to allow it; a deny rule still wins over the allow-list.
``ctx.confirm`` puts a further question through the same pipeline — asked even for a read-only tool
in auto mode, refused in permission mode 'deny', by a subagent, or unattended unless allowed.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from executor_support import Recorder, SleepTool, Timeline, call, make_ctx, make_executor  # noqa: E402

from astro_jupyter.agent.permissions import Unattended  # noqa: E402
from astro_jupyter.agent.tools.base import AgentTool, ToolContext, ToolOutput  # noqa: E402
from astro_jupyter.events import PermissionRequest  # noqa: E402

ASK_BASH = [{"action": "ask", "tool": "run_bash", "reason": "shell commands need your OK"}]
WHY = "no one can answer questions in this kernel"


class Peek(AgentTool):
    """A read-only tool that asks once it has looked (as kernel_inspect does for a secret)."""

    name = "peek"
    description = "Peek."
    parameters = {"type": "object", "properties": {"what": {"type": "string"}}}
    is_readonly = True

    def permission_scope(self, args: dict[str, Any]) -> str:
        return str(args.get("what", ""))

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        assert ctx.confirm is not None
        decision = await ctx.confirm(f"peek wants to show {args.get('what')}, which may hold secrets")
        return ToolOutput("shown" if decision.allowed else f"hidden: {decision.reason}", is_error=not decision.allowed)


def answering(answer: str, seen: list[PermissionRequest]) -> Any:
    async def ask(request: PermissionRequest) -> str:
        seen.append(request)
        return answer

    return ask


@pytest.mark.asyncio
async def test_unattended_denies_at_once_and_allows_only_the_listed_tools(services: Any) -> None:
    bash = SleepTool("run_bash", Timeline())
    ex = make_executor(services, [bash], rules=ASK_BASH)
    recorder = Recorder()
    ctx = make_ctx(services, recorder, unattended=Unattended(WHY))
    (res,) = await asyncio.wait_for(ex.execute([call("run_bash", '{"tag": "a", "secs": 0}')], ctx), 5)
    assert res.output.is_error and bash.finished == [] and recorder.of("permission_request") == []
    assert "shell commands need your OK; not asked: " + WHY in res.output.content
    assert "%%astro --allow run_bash" in res.output.content and res.output.metadata["ran"] is False

    allowed = make_ctx(services, recorder, unattended=Unattended(WHY, frozenset({"run_bash"}), "%%astro --allow"))
    (res,) = await ex.execute([call("run_bash", '{"tag": "b", "secs": 0}')], allowed)
    assert not res.output.is_error and bash.finished == ["b"] and res.output.metadata["ran"] is True

    denied_by_rule = make_executor(services, [bash], rules=[*ASK_BASH, {"action": "deny", "tool": "run_bash"}])
    (res,) = await denied_by_rule.execute([call("run_bash", '{"tag": "c", "secs": 0}')], allowed)
    assert res.output.is_error and bash.finished == ["b"]  # the allow-list never opens a deny rule


@pytest.mark.asyncio
async def test_confirm_asks_even_for_a_read_only_tool_in_auto_mode(services: Any) -> None:
    recorder, seen = Recorder(), []
    ex = make_executor(services, [Peek()], mode="auto")
    ctx = make_ctx(services, recorder, ask_permission=answering("deny", seen))
    (res,) = await ex.execute([call("peek", '{"what": "os.environ"}')], ctx)
    [request] = recorder.of("permission_request")
    assert seen == [request] and request.message == "peek wants to show os.environ, which may hold secrets"
    assert res.output.is_error and "the user answered 'deny'" in res.output.content

    ctx = make_ctx(services, recorder, session_id="s2", ask_permission=answering("always", seen))
    (first,) = await ex.execute([call("peek", '{"what": "TOKEN"}')], ctx)
    (again,) = await ex.execute([call("peek", '{"what": "TOKEN"}')], ctx)
    (other,) = await ex.execute([call("peek", '{"what": "PASSWORD"}')], ctx)
    assert [first.output.content, again.output.content, other.output.content] == ["shown"] * 3
    assert len(seen) == 3  # os.environ, TOKEN once ("always" covers that name), PASSWORD anew


@pytest.mark.asyncio
@pytest.mark.parametrize("how, expected", [
    ("mode deny", "permission mode 'deny' refuses"),
    ("subagent", "a subagent cannot ask"),
    ("unattended", "not asked: " + WHY),
    ("unattended, listed", None),
])
async def test_confirm_without_anyone_to_ask(services: Any, how: str, expected: str | None) -> None:
    seen: list[PermissionRequest] = []
    ex = make_executor(services, [Peek()], mode="deny" if how == "mode deny" else "auto")
    extra: dict[str, Any] = {"ask_permission": answering("allow", seen)}
    if how == "subagent":
        extra["silent"] = True
    elif how.startswith("unattended"):
        extra = {"unattended": Unattended(WHY, frozenset({"peek"}) if "listed" in how else frozenset(), "test")}
    (res,) = await ex.execute([call("peek", '{"what": "KEY"}')], make_ctx(services, Recorder(), **extra))
    assert seen == []
    if expected is None:
        assert res.output.content == "shown"
    else:
        assert res.output.is_error and expected in res.output.content
