"""Large-output persistence (stub, create-new idempotency) and the streaming executor."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from executor_support import EchoTool, Recorder, SleepTool, Timeline, call, make_ctx, make_executor, settle  # noqa: E402

from astro_jupyter.agent.executor import ToolLimits  # noqa: E402
from astro_jupyter.agent.tools.base import PermissionRule  # noqa: E402
from astro_jupyter.agent.tools.persist import maybe_persist_tool_result, safe_file_stem  # noqa: E402
from astro_jupyter.events import PermissionRequest  # noqa: E402

# -- persistence -------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_large_output_is_persisted_and_stubbed(services: Any) -> None:
    ex = make_executor(services, [EchoTool()])  # outputs over 4000 characters (MAX_OUTPUT_CHARS) persist
    recorder = Recorder()
    text = "".join(f"line {i:05d}\n" for i in range(1000))  # 11 000 chars
    (res,) = await ex.execute([call("echo", json.dumps({"text": text}), id="big1")],
                              make_ctx(services, recorder))
    path = services.config.tool_results_dir / "big1.txt"
    assert path.read_text() == text
    content = res.output.content
    assert content.startswith(f'<persisted-output path="{path}" chars="{len(text)}">\n')
    assert content.endswith("</persisted-output>")
    assert text[:2000] in content and text[2000:2100] not in content
    assert len(content) < 2300
    [event] = recorder.of("tool_result")
    assert event.output == content and event.metadata["persisted_path"] == str(path)
    assert res.output.metadata["persisted_path"] == str(path)
    assert res.message["content"] == content


@pytest.mark.asyncio
async def test_small_output_is_not_persisted(services: Any) -> None:
    ex = make_executor(services, [EchoTool()])
    (res,) = await ex.execute([call("echo", '{"text": "short", "count": 10}', id="small")],
                              make_ctx(services, Recorder()))
    assert res.output.content == "short" * 10
    assert not (services.config.tool_results_dir / "small.txt").exists()
    assert "persisted_path" not in res.output.metadata


def test_persist_is_create_new_and_idempotent(tmp_path: Path) -> None:
    text = "x" * 5000
    first = maybe_persist_tool_result(text, "call_1", tmp_path, 4000)
    mtime = first.path.stat().st_mtime_ns
    again = maybe_persist_tool_result(text, "call_1", tmp_path, 4000)
    assert again.path == first.path == tmp_path / "call_1.txt"
    assert first.path.stat().st_mtime_ns == mtime  # reused, not rewritten
    assert again.content == first.content
    # A recycled id with different content never overwrites the first file.
    other = maybe_persist_tool_result("y" * 5000, "call_1", tmp_path, 4000)
    assert other.path != first.path and other.path.read_text() == "y" * 5000
    assert first.path.read_text() == text
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([first.path.name, other.path.name])


def test_persist_file_names_are_safe(tmp_path: Path) -> None:
    assert safe_file_stem("../../etc/passwd") == "_.._etc_passwd"
    out = maybe_persist_tool_result("z" * 50, "../../escape", tmp_path, 10)
    assert out.path.parent == tmp_path


@pytest.mark.asyncio
async def test_persist_failure_truncates_instead_of_losing_the_result(services: Any) -> None:
    blocker = services.config.tool_results_dir
    blocker.rmdir()
    blocker.write_text("a file where the directory should be")
    ex = make_executor(services, [EchoTool()], limits=ToolLimits(max_output_chars=100))
    (res,) = await ex.execute([call("echo", '{"text": "a", "count": 500}')], make_ctx(services, Recorder()))
    assert res.output.content.startswith("a" * 100) and "truncated from 500 characters" in res.output.content
    assert "persist_error" in res.output.metadata


# -- streaming executor ------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_streaming_starts_safe_call_before_finish(services: Any) -> None:
    timeline = Timeline()
    ex = make_executor(services, [SleepTool("read", timeline)])
    stream = ex.stream(make_ctx(services, Recorder()))
    stream.add(call("read", '{"tag": "a", "gated": true}', id="s1"))
    await timeline.started("a")  # started while the model is still streaming the rest of its answer
    stream.add(call("read", '{"tag": "b", "gated": true}', id="s2"))
    await timeline.started("b")  # runs beside a
    timeline.release("a")
    await timeline.ended("a")  # finished before finish() was called
    timeline.release("b")
    results = await asyncio.wait_for(stream.finish(), 30)
    assert [r.id for r in results] == ["s1", "s2"]
    assert timeline.overlap("a", "b")


@pytest.mark.asyncio
async def test_streaming_exclusive_call_waits_and_runs_alone(services: Any) -> None:
    timeline = Timeline()
    tools = [SleepTool("read", timeline), SleepTool("bash", timeline, safe=False)]
    ex = make_executor(services, tools)
    stream = ex.stream(make_ctx(services, Recorder()))
    stream.add(call("read", '{"tag": "r1", "gated": true}'))
    await timeline.started("r1")
    stream.add(call("bash", '{"tag": "b", "gated": true}'))
    stream.add(call("read", '{"tag": "r2", "gated": true}'))
    await settle()
    assert "b" not in timeline.spans and "r2" not in timeline.spans  # still waiting for r1
    timeline.release("r1")
    await timeline.started("b")
    await settle()
    assert "r2" not in timeline.spans  # b runs alone
    timeline.release("b")
    timeline.release("r2")
    results = await asyncio.wait_for(stream.finish(), 30)
    assert [r.output.content for r in results] == ["read:r1", "bash:b", "read:r2"]
    assert timeline.before("r1", "b") and timeline.before("b", "r2")


@pytest.mark.asyncio
async def test_streaming_shares_loop_detection_with_execute(services: Any) -> None:
    ex = make_executor(services, [EchoTool()])
    ctx = make_ctx(services, Recorder())
    await ex.execute([call("echo", '{"text": "q"}'), call("echo", '{"text": "q"}')], ctx)
    stream = ex.stream(ctx)
    stream.add(call("echo", '{"text": "q"}'))
    (res,) = await stream.finish()
    assert res.output.is_error and "looping" in res.output.content
    with pytest.raises(RuntimeError, match="finish"):
        stream.add(call("echo", '{"text": "late"}'))


@pytest.mark.asyncio
async def test_streaming_asks_in_order_while_safe_call_runs(services: Any) -> None:
    """A permission question for call 2 does not hold back the already-running call 1."""
    timeline = Timeline()
    tools = [SleepTool("read", timeline), SleepTool("fetch", timeline, rules=[PermissionRule("ask", "fetch")])]
    ex = make_executor(services, tools)
    asked, answer = asyncio.Event(), asyncio.Event()

    async def ask(request: PermissionRequest) -> str:
        asked.set()
        await answer.wait()
        return "allow"

    stream = ex.stream(make_ctx(services, Recorder(), ask_permission=ask))
    stream.add(call("read", '{"tag": "r", "gated": true}'))
    stream.add(call("fetch", '{"tag": "f", "secs": 0.01}'))
    await timeline.started("r")
    await asyncio.wait_for(asked.wait(), 30)
    timeline.release("r")
    await timeline.ended("r")  # read finished while the user was being asked
    assert "f" not in timeline.spans  # fetch waits for its answer
    answer.set()
    results = await asyncio.wait_for(stream.finish(), 30)
    assert not any(r.output.is_error for r in results)
