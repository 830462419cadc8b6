"""Hooks: registry folding, entry points, command hooks (block/mutate/fail/hang), executor integration."""

from __future__ import annotations

import asyncio
import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from executor_support import BoomTool, EchoTool, Recorder, call, make_ctx, make_executor  # noqa: E402

from astro_jupyter.agent.hooks import (  # noqa: E402
    Hook,
    HookDecision,
    HookEventName,
    HookRegistry,
)
from astro_jupyter.agent.hooks.command import CommandHook  # noqa: E402
from astro_jupyter.config import AstroConfig  # noqa: E402
from tests.waiting import alive, until  # noqa: E402

HOOK_SCRIPT = Path(__file__).resolve().parents[1] / "data" / "hooks" / "hook.py"


def command(mode: str, record: Path | None = None) -> str:
    parts = [sys.executable, str(HOOK_SCRIPT), mode] + ([str(record)] if record else [])
    return " ".join(shlex.quote(p) for p in parts)


def recorded(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_thirteen_events() -> None:
    assert [e.value for e in HookEventName] == [
        "SessionStart", "SessionEnd", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PostToolUseFailure",
        "PermissionRequest", "Notification", "PreCompact", "PostCompact", "SubagentStart", "SubagentStop", "Stop",
    ]
    with pytest.raises(ValueError, match="unknown hook event 'PreToolCall'"):
        HookEventName.parse("PreToolCall")


# -- the registry ----------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_decisions_fold_in_order_and_block_stops() -> None:
    hooks = HookRegistry()
    order: list[str] = []

    async def add_flag(event: Any, payload: dict[str, Any]) -> list[HookDecision]:
        order.append("first")
        return [HookDecision.mutate_input({**payload["arguments"], "flag": 1}), HookDecision.append_context("ctx1")]

    async def sees_mutation(event: Any, payload: dict[str, Any]) -> HookDecision:
        order.append("second")
        assert payload["arguments"] == {"q": "M31", "flag": 1}
        return HookDecision.block("enough")

    async def never(event: Any, payload: dict[str, Any]) -> None:
        order.append("third")

    for fn in (add_flag, sees_mutation, never):
        hooks.register("PreToolUse", fn)
    outcome = await hooks.run("PreToolUse", {"arguments": {"q": "M31"}}, tool_name="search_papers")
    assert order == ["first", "second"]
    assert outcome.blocked and outcome.reason == "enough"
    assert outcome.mutated_input == {"q": "M31", "flag": 1} and outcome.contexts == ["ctx1"]


@pytest.mark.asyncio
async def test_matcher_and_event_filtering() -> None:
    hooks = HookRegistry()
    hits: list[str] = []

    async def mark(event: Any, payload: dict[str, Any]) -> None:
        hits.append(payload["who"])

    hooks.register("PreToolUse", mark, matcher="run_bash")
    hooks.register("PreToolUse", mark, matcher="file_*")
    hooks.register("PostToolUse", mark)
    await hooks.run("PreToolUse", {"who": "bash"}, tool_name="run_bash")
    await hooks.run("PreToolUse", {"who": "write"}, tool_name="file_write")
    await hooks.run("PreToolUse", {"who": "read"}, tool_name="read_file")
    assert hits == ["bash", "write"]


@pytest.mark.asyncio
async def test_raising_hook_is_a_warning_not_a_crash(caplog: pytest.LogCaptureFixture) -> None:
    hooks = HookRegistry()
    notes: list[dict[str, Any]] = []

    async def broken(event: Any, payload: dict[str, Any]) -> None:
        raise RuntimeError("db gone")

    async def after(event: Any, payload: dict[str, Any]) -> HookDecision:
        return HookDecision.append_context("still ran")

    async def notify(event: Any, payload: dict[str, Any]) -> None:
        notes.append(payload)

    hooks.register("Stop", broken, name="broken")
    hooks.register("Stop", after)
    hooks.register("Notification", notify)
    outcome = await hooks.run("Stop", {})
    assert not outcome.blocked and outcome.contexts == ["still ran"]
    assert outcome.warnings == ["Stop hook broken failed: RuntimeError: db gone"]
    await hooks.drain(2)
    assert notes and notes[0]["level"] == "warning" and "db gone" in notes[0]["message"]


@pytest.mark.asyncio
async def test_hook_subclass_with_event_set() -> None:
    class Counter(Hook):
        events = frozenset({"SessionStart", "SessionEnd"})

        def __init__(self) -> None:
            self.seen: list[str] = []

        async def __call__(self, event: HookEventName, payload: dict[str, Any]) -> None:
            self.seen.append(event.value)

    counter = Counter()
    hooks = HookRegistry([counter])
    for ev in ("SessionStart", "Stop", "SessionEnd"):
        await hooks.run(ev, {})
    assert counter.seen == ["SessionStart", "SessionEnd"]


@pytest.mark.asyncio
async def test_fire_and_forget_keeps_task_and_swallows_errors() -> None:
    hooks = HookRegistry()
    got: list[str] = []

    async def audit(event: Any, payload: dict[str, Any]) -> None:
        await asyncio.sleep(0.05)
        got.append(payload["prompt"])
        raise ValueError("audit sink down")

    hooks.register("UserPromptSubmit", audit)
    task = hooks.fire_and_forget("UserPromptSubmit", {"prompt": "find papers on M87"})
    assert task is not None and got == []  # returned at once
    await hooks.drain(2)
    assert got == ["find papers on M87"]
    assert hooks.fire_and_forget("SessionEnd", {}) is None  # nothing registered: no task


ENTRY_MODULE = '''
from astro_jupyter.agent.hooks import Hook, HookDecision

class Tagger(Hook):
    events = frozenset({"PreToolUse"})
    async def __call__(self, event, payload):
        return HookDecision.append_context("from entry point")

def factory(config):
    t = Tagger()
    t.name = "factory:" + type(config).__name__
    return [t]

def broken(config):
    raise RuntimeError("plugin bug")
'''


@pytest.mark.asyncio
async def test_entry_point_hooks_load_and_broken_ones_are_skipped(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "astro_test_hooks.py").write_text(ENTRY_MODULE)
    dist = tmp_path / "astro_test_hooks-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: astro-test-hooks\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[astro_jupyter.hooks]\n"
        "klass = astro_test_hooks:Tagger\n"
        "fact = astro_test_hooks:factory\n"
        "bad = astro_test_hooks:broken\n"
        "missing = astro_test_hooks:nothing_here\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    config = AstroConfig(home=str(tmp_path / "home"))
    hooks = HookRegistry.from_config(config)
    names = sorted(h.describe() for h in hooks.hooks_for("PreToolUse"))
    assert names == ["factory:AstroConfig", "klass"]
    assert len(hooks.load_warnings) == 2 and any("plugin bug" in w for w in hooks.load_warnings)
    outcome = await hooks.run("PreToolUse", {"arguments": {}}, tool_name="x")
    assert outcome.contexts == ["from entry point", "from entry point"]


def test_command_hook_specs_from_config(tmp_path: Path) -> None:
    config = AstroConfig(
        home=str(tmp_path),
        command_hooks=[
            {"event": "PreToolUse", "command": "true", "matcher": "run_bash"},
            {"event": "NoSuchEvent", "command": "true"},
            {"event": "Stop", "command": ""},
        ],
    )
    hooks = HookRegistry.from_config(config, entry_points=False)
    [hook] = hooks.hooks_for("PreToolUse", "run_bash")
    assert isinstance(hook, CommandHook) and hook.timeout == 10 and hook.matcher == "run_bash"
    assert hooks.hooks_for("PreToolUse", "read_file") == []
    assert len(hooks.load_warnings) == 2


# -- command hooks ------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_command_hook_receives_payload_and_blocks(tmp_path: Path) -> None:
    rec = tmp_path / "rec.jsonl"
    hooks = HookRegistry([CommandHook(HookEventName.PRE_TOOL_USE, command("block", rec))])
    outcome = await hooks.run("PreToolUse", {"tool_name": "run_bash", "arguments": {"cmd": "ls"}}, tool_name="run_bash")
    assert outcome.blocked and outcome.reason == "no run_bash on the telescope"
    [entry] = recorded(rec)
    assert entry["payload"] == {"tool_name": "run_bash", "arguments": {"cmd": "ls"}, "event": "PreToolUse"}


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "mode, expected",
    [("fail", "exited with status 3: hook script broke"), ("garbage", "printed invalid JSON: 'this is not json'")],
)
async def test_failing_command_hook_is_warning_and_continue(mode: str, expected: str) -> None:
    hooks = HookRegistry([CommandHook(HookEventName.PRE_TOOL_USE, command(mode))])
    outcome = await hooks.run("PreToolUse", {"arguments": {}}, tool_name="x")
    assert not outcome.blocked and outcome.mutated_input is None
    [warning] = outcome.warnings
    assert expected in warning and warning.startswith("PreToolUse hook command ")


@pytest.mark.asyncio
async def test_hanging_command_hook_is_killed_at_timeout(tmp_path: Path) -> None:
    rec = tmp_path / "rec.jsonl"
    # 2 s: long enough for the interpreter to start and record its pid on a loaded machine.
    hooks = HookRegistry([CommandHook(HookEventName.PRE_TOOL_USE, command("hang", rec), timeout=2)])
    outcome = await asyncio.wait_for(hooks.run("PreToolUse", {"arguments": {}}, tool_name="x"), 30)  # it sleeps 60 s
    assert not outcome.blocked and "timed out after 2s and was killed" in outcome.warnings[0]
    pid = recorded(rec)[0]["pid"]
    await until(lambda: not alive(pid), "the hook's child to die (SIGKILL is delivered asynchronously)")


# -- hooks inside the executor ------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_pre_tool_use_block_mutate_append_through_executor(services: Any, tmp_path: Path) -> None:
    rec = tmp_path / "rec.jsonl"
    hooks = HookRegistry([
        CommandHook(HookEventName.PRE_TOOL_USE, command("mutate", rec), matcher="echo"),
        CommandHook(HookEventName.PRE_TOOL_USE, command("append"), matcher="echo"),
        CommandHook(HookEventName.PRE_TOOL_USE, command("block"), matcher="boom"),
    ])
    ex = make_executor(services, [EchoTool(), BoomTool()], hooks=hooks)
    recorder = Recorder()
    echo, boom = await ex.execute([call("echo", '{"text": "ngc 1275"}'), call("boom", "{}")],
                                  make_ctx(services, recorder))
    assert echo.arguments == {"text": "NGC 1275"}  # MutateInput reached the tool
    assert echo.output.content.startswith("NGC 1275")
    assert "<hook-context>\nremember: magnitudes are AB\n</hook-context>" in echo.output.content
    assert echo.message["content"] == echo.output.content
    assert boom.output.is_error and boom.output.content == "Blocked by a PreToolUse hook: no boom on the telescope"
    assert boom.output.metadata.get("exception") is None  # it never ran
    assert recorded(rec)[0]["payload"]["tool_call_id"] == echo.id


@pytest.mark.asyncio
async def test_mutated_input_is_revalidated(services: Any) -> None:
    hooks = HookRegistry()

    async def breaks_args(event: Any, payload: dict[str, Any]) -> HookDecision:
        return HookDecision.mutate_input({"text": 42})

    hooks.register("PreToolUse", breaks_args)
    ex = make_executor(services, [EchoTool()], hooks=hooks)
    (res,) = await ex.execute([call("echo", '{"text": "a"}')], make_ctx(services, Recorder()))
    assert res.output.is_error and "rewrote the arguments of echo badly" in res.output.content


@pytest.mark.asyncio
async def test_post_tool_use_mutates_output_and_sees_metrics(services: Any, tmp_path: Path) -> None:
    rec = tmp_path / "rec.jsonl"
    hooks = HookRegistry([CommandHook(HookEventName.POST_TOOL_USE, command("output", rec))])
    ex = make_executor(services, [EchoTool()], hooks=hooks)
    recorder = Recorder()
    (res,) = await ex.execute([call("echo", '{"text": "secret-token-123"}', id="e1")], make_ctx(services, recorder))
    assert res.output.content == "[redacted] secret-token-123"
    assert recorder.of("tool_result")[0].output == "[redacted] secret-token-123"
    payload = recorded(rec)[0]["payload"]
    assert payload["output"] == "secret-token-123" and payload["is_error"] is False
    assert isinstance(payload["duration_ms"], int) and payload["tool_call_id"] == "e1"


@pytest.mark.asyncio
async def test_post_tool_use_failure_on_exception(services: Any) -> None:
    hooks = HookRegistry()
    seen: list[tuple[str, dict[str, Any]]] = []

    async def watch(event: HookEventName, payload: dict[str, Any]) -> None:
        seen.append((event.value, payload))

    hooks.register("PostToolUse", watch)
    hooks.register("PostToolUseFailure", watch)
    ex = make_executor(services, [BoomTool(), EchoTool()], hooks=hooks)
    await ex.execute([call("boom", "{}"), call("echo", '{"text": "ok"}')], make_ctx(services, Recorder()))
    assert [(e, p["tool_name"]) for e, p in seen] == [("PostToolUseFailure", "boom"), ("PostToolUse", "echo")]
    assert seen[0][1]["failure"] == "exception" and "KeyError" in seen[0][1]["output"]


@pytest.mark.asyncio
async def test_hanging_and_failing_hooks_do_not_break_the_run(services: Any) -> None:
    hooks = HookRegistry([
        CommandHook(HookEventName.PRE_TOOL_USE, command("hang"), timeout=0.3),
        CommandHook(HookEventName.POST_TOOL_USE, command("fail")),
    ])
    ex = make_executor(services, [EchoTool()], hooks=hooks)
    recorder = Recorder()
    (res,) = await ex.execute([call("echo", '{"text": "fine"}')], make_ctx(services, recorder))
    assert res.output.content == "fine" and not res.output.is_error
    errors = recorder.of("error")
    assert [e.reason for e in errors] == ["hook", "hook"]
    assert "timed out after 0.3s" in errors[0].message and "exited with status 3" in errors[1].message
    await hooks.drain(2)


@pytest.mark.asyncio
async def test_audit_hook_records_prompt_and_lifecycle(services: Any) -> None:
    hooks = HookRegistry.from_config(services.config, services=services, entry_points=False)
    prompt = "Find recent papers on the M87 jet. " * 40
    hooks.fire_and_forget("UserPromptSubmit", {"session_id": "s9", "run_id": "r9", "prompt": prompt})
    await hooks.run("Stop", {"session_id": "s9", "run_id": "r9", "reason": "finished"})
    await hooks.run("PreToolUse", {"session_id": "s9", "run_id": "r9", "arguments": {}}, tool_name="x")
    await hooks.drain(2)
    rows = {r["event"]: r for r in await services.audit.list("s9")}
    assert set(rows) == {"UserPromptSubmit", "Stop"}  # tool events are the executor's rows
    detail = json.loads(rows["UserPromptSubmit"]["detail"])
    assert detail["prompt"].startswith("Find recent papers on the M87 jet.")
    assert detail["prompt_chars"] == len(prompt) and len(detail["prompt"]) <= 503
    assert json.loads(rows["Stop"]["detail"]) == {"reason": "finished"}
    assert rows["Stop"]["run_id"] == "r9"


@pytest.mark.asyncio
async def test_plain_function_hook_and_warning_before_block_is_reported() -> None:
    hooks = HookRegistry()
    notes: list[str] = []

    def sync_block(event: Any, payload: dict[str, Any]) -> HookDecision:
        return HookDecision.block("sync says no")

    async def broken(event: Any, payload: dict[str, Any]) -> None:
        raise OSError("disk full")

    async def notify(event: Any, payload: dict[str, Any]) -> None:
        notes.append(payload["message"])

    hooks.register("PreToolUse", broken)
    hooks.register("PreToolUse", sync_block)
    hooks.register("Notification", notify)
    outcome = await hooks.run("PreToolUse", {"arguments": {}}, tool_name="x")
    assert outcome.blocked and outcome.reason == "sync says no"
    await hooks.drain(2)
    assert len(notes) == 1 and "OSError: disk full" in notes[0]
