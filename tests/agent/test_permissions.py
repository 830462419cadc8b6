"""PermissionChecker rule order and modes, and the Ask flow through the executor."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from executor_support import Recorder, SleepTool, Timeline, call, make_ctx, make_executor  # noqa: E402

from astro_jupyter.agent.executor import ToolLimits  # noqa: E402
from astro_jupyter.agent.hooks import HookDecision, HookRegistry  # noqa: E402
from astro_jupyter.agent.permissions import PermissionChecker  # noqa: E402
from astro_jupyter.agent.tools.base import PermissionRule  # noqa: E402
from astro_jupyter.config import AstroConfig  # noqa: E402
from astro_jupyter.events import PermissionRequest  # noqa: E402
from tests.waiting import until  # noqa: E402


def tool(name: str = "run_bash", readonly: bool = False, rules: list[PermissionRule] | None = None) -> SleepTool:
    return SleepTool(name, Timeline(), readonly=readonly, rules=rules)


# -- the rule chain ---------------------------------------------------------------------------


def test_default_is_allow() -> None:
    d = PermissionChecker([], "ask").check(tool(), {})
    assert (d.action, d.source) == ("allow", "default")


def test_deny_beats_allow_beats_ask() -> None:
    rules = [
        {"action": "ask", "tool": "run_bash", "reason": "confirm"},
        {"action": "allow", "tool": "run_bash"},
        {"action": "deny", "tool": "run_bash", "reason": "no shell here"},
    ]
    d = PermissionChecker(rules, "ask").check(tool(), {})
    assert (d.action, d.reason) == ("deny", "no shell here")
    d = PermissionChecker(rules[:2], "ask").check(tool(), {})
    assert d.action == "allow"
    d = PermissionChecker(rules[:1], "ask").check(tool(), {})
    assert (d.action, d.reason) == ("ask", "confirm")


def test_wildcard_and_globs() -> None:
    checker = PermissionChecker([{"action": "deny", "tool": "*", "reason": "locked down"}], "ask")
    assert checker.check(tool("anything"), {}).action == "deny"
    checker = PermissionChecker([{"action": "deny", "tool": "file_*"}], "ask")
    assert checker.check(tool("file_write"), {}).action == "deny"
    assert checker.check(tool("read_file"), {}).action == "allow"
    checker = PermissionChecker([{"action": "ask", "tool": "file_write|run_bash"}], "ask")
    assert checker.check(tool("run_bash"), {}).action == "ask"
    assert checker.check(tool("grep_files"), {}).action == "allow"


def test_tool_rules_join_the_chain_and_config_deny_still_wins() -> None:
    asks = tool(rules=[PermissionRule("ask", "run_bash", "rm -rf needs a human")])
    d = PermissionChecker([], "ask").check(asks, {})
    assert (d.action, d.source, d.reason) == ("ask", "tool", "rm -rf needs a human")
    d = PermissionChecker([{"action": "allow", "tool": "*"}], "ask").check(asks, {})
    assert d.action == "allow"  # Allow > Ask across layers
    allows = tool(rules=[PermissionRule("allow", "run_bash")])
    d = PermissionChecker([{"action": "deny", "tool": "run_bash", "reason": "policy"}], "ask").check(allows, {})
    assert (d.action, d.reason) == ("deny", "policy")


def test_modes_shape_ask() -> None:
    rules = [{"action": "ask", "tool": "*"}]
    ro, rw = tool("read_file", readonly=True), tool("file_write")
    assert PermissionChecker(rules, "auto").check(ro, {}).action == "allow"  # read-only skips Ask in auto
    assert PermissionChecker(rules, "auto").check(rw, {}).action == "ask"
    assert PermissionChecker(rules, "ask").check(ro, {}).action == "ask"
    d = PermissionChecker(rules, "deny").check(rw, {})
    assert d.action == "deny" and "permission mode 'deny'" in d.reason


def test_bad_rule_and_mode_are_refused() -> None:
    with pytest.raises(ValueError, match="action must be allow, deny or ask"):
        PermissionChecker([{"action": "alow", "tool": "*"}])
    with pytest.raises(ValueError, match="permission mode"):
        PermissionChecker([], "yolo")


def test_from_config() -> None:
    cfg = AstroConfig(permission_rules=[{"action": "deny", "tool": "run_bash"}], permission_mode="deny")
    checker = PermissionChecker.from_config(cfg)
    assert checker.mode == "deny" and checker.check(tool(), {}).action == "deny"


def test_always_is_per_session() -> None:
    checker = PermissionChecker([{"action": "ask", "tool": "run_bash"}], "ask")
    checker.allow_always("run_bash", "s1")
    assert checker.check(tool(), {}, session_id="s1").action == "allow"
    assert checker.check(tool(), {}, session_id="s2").action == "ask"


# -- Ask through the executor ---------------------------------------------------------------------

ASK_BASH = [{"action": "ask", "tool": "run_bash", "reason": "shell commands need your OK"}]


def answering(answer: str, seen: list[PermissionRequest], delay: float = 0.0) -> Any:
    async def ask(request: PermissionRequest) -> str:
        seen.append(request)
        await asyncio.sleep(delay)
        return answer

    return ask


@pytest.mark.asyncio
@pytest.mark.parametrize("answer, runs", [("allow", True), ("deny", False), ("always", True)])
async def test_ask_answers(services: Any, answer: str, runs: bool) -> None:
    recorder, seen = Recorder(), []
    bash = tool()
    ex = make_executor(services, [bash], rules=ASK_BASH)
    ctx = make_ctx(services, recorder, ask_permission=answering(answer, seen))
    (res,) = await ex.execute([call("run_bash", '{"tag": "ls", "secs": 0}', id="b1")], ctx)
    [req] = recorder.of("permission_request")
    assert seen == [req]
    assert (req.tool_call_id, req.name, req.arguments, req.message) == (
        "b1", "run_bash", {"tag": "ls", "secs": 0}, "shell commands need your OK"
    )
    assert (bash.finished == ["ls"]) is runs
    assert res.output.is_error is (not runs)
    if not runs:
        assert "Permission denied for run_bash" in res.output.content and "'deny'" in res.output.content
    rows = [r for r in await services.audit.list("s1") if r["event"] == "permission"]
    assert json.loads(rows[0]["detail"])["answer"] == answer
    # A second call in the same session: "always" means no second question.
    (res2,) = await ex.execute([call("run_bash", '{"tag": "pwd", "secs": 0}')], ctx)
    assert len(seen) == (1 if answer == "always" else 2)


@pytest.mark.asyncio
async def test_always_does_not_leak_into_other_sessions(services: Any) -> None:
    seen: list[PermissionRequest] = []
    ex = make_executor(services, [tool()], rules=ASK_BASH)
    ctx1 = make_ctx(services, Recorder(), session_id="s1", ask_permission=answering("always", seen))
    ctx2 = make_ctx(services, Recorder(), session_id="s2", ask_permission=answering("deny", seen))
    await ex.execute([call("run_bash", '{"tag": "a", "secs": 0}')], ctx1)
    (res,) = await ex.execute([call("run_bash", '{"tag": "b", "secs": 0}')], ctx2)
    assert len(seen) == 2 and res.output.is_error


@pytest.mark.asyncio
async def test_ask_timeout_denies(services: Any) -> None:
    bash = tool()
    ex = make_executor(services, [bash], rules=ASK_BASH, limits=ToolLimits(permission_timeout_secs=0.2))
    ctx = make_ctx(services, Recorder(), ask_permission=answering("allow", [], delay=30))
    (res,) = await asyncio.wait_for(ex.execute([call("run_bash", '{"tag": "x", "secs": 0}')], ctx), 5)
    assert res.output.is_error and "no answer within 0.2s" in res.output.content
    assert bash.finished == []


@pytest.mark.asyncio
async def test_ask_without_asker_or_in_subagent_denies(services: Any) -> None:
    bash = tool()
    ex = make_executor(services, [bash], rules=ASK_BASH)
    recorder = Recorder()
    (res,) = await ex.execute([call("run_bash", '{"tag": "x", "secs": 0}')], make_ctx(services, recorder))
    assert res.output.is_error and "no one is there to answer" in res.output.content
    seen: list[PermissionRequest] = []
    silent = make_ctx(services, recorder, silent=True, ask_permission=answering("allow", seen))
    (res,) = await ex.execute([call("run_bash", '{"tag": "y", "secs": 0}')], silent)
    assert res.output.is_error and "a subagent cannot ask" in res.output.content
    assert seen == [] and bash.finished == [] and recorder.of("permission_request") == []


@pytest.mark.asyncio
async def test_cancel_while_asking(services: Any) -> None:
    ex = make_executor(services, [tool()], rules=ASK_BASH)
    seen: list[PermissionRequest] = []
    ctx = make_ctx(services, Recorder(), ask_permission=answering("allow", seen, delay=3600))
    task = asyncio.ensure_future(ex.execute([call("run_bash", '{"tag": "x", "secs": 0}')], ctx))
    await until(lambda: seen, "the permission question")
    ctx.cancelled.set()
    (res,) = await asyncio.wait_for(task, 30)  # the answer would take an hour
    assert res.output.is_error and "cancelled" in res.output.content


@pytest.mark.asyncio
async def test_a_cancel_while_the_question_is_prepared_puts_nothing_to_the_user(services: Any) -> None:
    """Stop lands while the tool looks up what the question will show (its preview), after the
    executor's last check: no permission question goes out for a run that is over."""
    from astro_jupyter.agent.run import PendingAnswers

    answers = PendingAnswers()
    recorder = Recorder()
    ctx = make_ctx(services, recorder, ask_permission=lambda request: answers.create(request.request_id))

    class StoppedWhilePreviewing(SleepTool):
        async def permission_preview(self, args: dict[str, Any], _ctx: Any, reason: str) -> None:
            ctx.cancelled.set()  # what RunHandle.cancel does
            answers.cancel_all()
            return None

    bash = StoppedWhilePreviewing("run_bash", Timeline())
    ex = make_executor(services, [bash], rules=ASK_BASH)
    (res,) = await asyncio.wait_for(ex.execute([call("run_bash", '{"tag": "x", "secs": 0}')], ctx), 30)
    assert res.output.is_error and "cancelled by the user before it started" in res.output.content
    assert recorder.of("permission_request") == [] and bash.finished == []


@pytest.mark.asyncio
async def test_auto_mode_read_only_tool_is_not_asked(services: Any) -> None:
    seen: list[PermissionRequest] = []
    reader = tool("read_file", readonly=True)
    ex = make_executor(services, [reader, tool()], rules=[{"action": "ask", "tool": "*"}], mode="auto")
    ctx = make_ctx(services, Recorder(), ask_permission=answering("deny", seen))
    ro, rw = await ex.execute(
        [call("read_file", '{"tag": "r", "secs": 0}'), call("run_bash", '{"tag": "b", "secs": 0}')], ctx
    )
    assert not ro.output.is_error and reader.finished == ["r"]
    assert [r.name for r in seen] == ["run_bash"] and rw.output.is_error


@pytest.mark.asyncio
async def test_deny_rule_and_deny_mode_through_executor(services: Any) -> None:
    bash = tool()
    ex = make_executor(services, [bash], rules=[{"action": "deny", "tool": "*", "reason": "read-only session"}])
    (res,) = await ex.execute([call("run_bash", '{"tag": "x"}')], make_ctx(services, Recorder()))
    assert res.output.content == "Permission denied for run_bash: read-only session"
    ex = make_executor(services, [bash], rules=ASK_BASH, mode="deny")
    seen: list[PermissionRequest] = []
    (res,) = await ex.execute([call("run_bash", '{"tag": "y"}')],
                              make_ctx(services, Recorder(), ask_permission=answering("allow", seen)))
    assert res.output.is_error and seen == [] and bash.finished == []


@pytest.mark.asyncio
async def test_permission_request_hook_fires_and_can_refuse(services: Any) -> None:
    hooks = HookRegistry()
    payloads: list[dict[str, Any]] = []

    async def refuse(event: Any, payload: dict[str, Any]) -> HookDecision:
        payloads.append(payload)
        return HookDecision.block("policy bot says no")

    hooks.register("PermissionRequest", refuse)
    seen: list[PermissionRequest] = []
    ex = make_executor(services, [tool()], rules=ASK_BASH, hooks=hooks)
    ctx = make_ctx(services, Recorder(), ask_permission=answering("allow", seen))
    (res,) = await ex.execute([call("run_bash", '{"tag": "x"}', id="h1")], ctx)
    assert payloads[0]["tool_call_id"] == "h1" and payloads[0]["message"] == "shell commands need your OK"
    assert seen == [] and "policy bot says no" in res.output.content


@pytest.mark.asyncio
async def test_denied_call_audit_row_says_why(services: Any) -> None:
    ex = make_executor(services, [tool()], rules=[{"action": "deny", "tool": "run_bash", "reason": "no shell"}])
    await ex.execute([call("run_bash", '{"tag": "x"}', id="d1")], make_ctx(services, Recorder()))
    [row] = [r for r in await services.audit.list("s1") if r["tool_call_id"] == "d1"]
    detail = json.loads(row["detail"])
    assert row["event"] == "tool_use" and row["is_error"] == 1 and detail["stage"] == "permission"
    assert detail["permission"] == {"action": "deny", "source": "config", "reason": "no shell"}
