"""bg_task_run / bg_task_check: only download/parse, rows in bg_tasks, results injected before the
next LLM call (and stored), failures reported, rows of a dead process closed as failures."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from astro_jupyter.agent.background import BackgroundQueue, queue_for
from astro_jupyter.agent.tools.background import BgTaskCheckTool, BgTaskRunTool
from astro_jupyter.agent.tools.base import AgentTool, ToolContext, ToolOutput
from astro_jupyter.agent.tools.load_tool import LoadToolTool
from astro_jupyter.agent.tools.registry import ToolRegistry
from astro_jupyter.events import ToolResult
from tests.agent.runtime_helpers import collect, make_config, make_runtime
from tests.agent.tools.orch_ctx import make_ctx
from tests.fakes.openai_server import Turn


class SlowDownload(AgentTool):
    """Stands in for download_paper: the queue's behaviour, not the download, is under test."""

    name = "download_paper"
    description = "Download a paper."
    parameters = {"type": "object", "properties": {"identifier": {"type": "string"}}, "required": ["identifier"]}

    def __init__(self, delay: float = 0.05, fail: str = "", crash: bool = False) -> None:
        self.delay, self.fail, self.crash = delay, fail, crash

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        await asyncio.sleep(self.delay)
        if self.crash:
            raise RuntimeError("disk full")
        if self.fail:
            return ToolOutput.error(self.fail)
        return ToolOutput(f"downloaded {args['identifier']} to papers/{args['identifier']}.pdf")


class Wait(AgentTool):
    name = "wait_a_bit"
    description = "Wait."

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        await asyncio.sleep(0.4)
        return ToolOutput("waited")


@pytest.mark.asyncio
async def test_result_is_injected_before_the_next_turn_and_stored(tmp_path, openai_server) -> None:
    services, runtime = await make_runtime(
        make_config(tmp_path, openai_server.url), LoadToolTool(), BgTaskRunTool(), BgTaskCheckTool(), SlowDownload(), Wait()
    )
    try:
        openai_server.script(
            Turn.call("load_tool", {"names": ["bg_task_run", "bg_task_check"]}),
            Turn.call("bg_task_run", {"tool": "download_paper", "arguments": {"identifier": "2401.00001"}}, id="bg"),
            Turn.call("wait_a_bit", {}),  # the download finishes meanwhile
            Turn.call("bg_task_check", {}, id="chk"),
            Turn.say("The paper is downloaded."),
        )
        handle = await runtime.start_run("get 2401.00001")
        events = [e for _, e in await collect(handle)]
        assert (await handle.wait()).reason == "finished"
        results = {e.tool_call_id: e for e in events if isinstance(e, ToolResult)}
        task_id = results["bg"].metadata["task_id"]
        assert f"Started download_paper in the background as {task_id}" in results["bg"].output
        # request 4 (after wait_a_bit) carries the finished result; request 3 did not
        notice = f"- {task_id} download_paper completed: downloaded 2401.00001"
        assert not any(notice in (m.get("content") or "") for m in openai_server.chat_requests[2]["messages"])
        assert any(notice in (m.get("content") or "") for m in openai_server.chat_requests[3]["messages"])
        assert sum(notice in (m.get("content") or "") for m in openai_server.chat_requests[4]["messages"]) == 1
        assert "completed" in results["chk"].output
        record = await services.bg_tasks.get(task_id)
        assert record.status == "completed" and record.delivered and record.session_id == handle.session_id
        stored = [m for m in await services.messages.list(handle.session_id) if notice in m.content]
        assert len(stored) == 1 and stored[0].role == "user" and stored[0].metadata == {"kind": "background_results"}
    finally:
        await runtime.close()
        await services.close()


@pytest.mark.asyncio
async def test_tools_that_may_not_run_in_the_background_are_refused(services) -> None:
    ctx, _ = make_ctx(services, registry=ToolRegistry([SlowDownload()]))
    out = await BgTaskRunTool().execute({"tool": "run_bash", "arguments": {"command": "sleep 100"}}, ctx)
    assert out.is_error and "'run_bash' cannot run in the background; only download_paper, parse_paper can" in out.content
    bad_args = await BgTaskRunTool().execute({"tool": "download_paper", "arguments": {}}, ctx)
    assert bad_args.is_error and "missing required argument 'identifier'" in bad_args.content
    missing = await BgTaskRunTool().execute({"tool": "parse_paper", "arguments": {}}, ctx)
    assert missing.is_error and "parse_paper is not available" in missing.content
    assert await services.bg_tasks.list() == []


@pytest.mark.asyncio
@pytest.mark.parametrize("tool, error", [(SlowDownload(fail="HTTP 404 from every channel"), "HTTP 404 from every channel"), (SlowDownload(crash=True), "RuntimeError: disk full")])
async def test_failures_are_recorded_and_reported(services, tool, error) -> None:
    ctx, _ = make_ctx(services, registry=ToolRegistry([tool]))
    out = await BgTaskRunTool().execute({"tool": "download_paper", "arguments": {"identifier": "x"}}, ctx)
    task_id = out.metadata["task_id"]
    await queue_for(services).wait(task_id, timeout=5)
    record = await services.bg_tasks.get(task_id)
    assert record.status == "failed" and record.error == error
    check = await BgTaskCheckTool().execute({"task_id": task_id}, ctx)
    assert f"{task_id} download_paper: failed — {error}" in check.content
    [notice] = await queue_for(services).drain(ctx.session_id)
    assert f"{task_id} download_paper FAILED: {error}" in notice["content"]
    assert await queue_for(services).drain(ctx.session_id) == []  # delivered once
    assert (await BgTaskCheckTool().execute({"task_id": "bg_nope"}, ctx)).is_error


@pytest.mark.asyncio
async def test_rows_left_running_by_a_dead_process_become_failures(services) -> None:
    orphan = await services.bg_tasks.create("parse_paper", {"paper_id": "p1"}, session_id="ses_test")
    await services.bg_tasks.set_running(orphan)
    queue = BackgroundQueue(services)  # a new process's queue
    ctx, _ = make_ctx(services, registry=ToolRegistry([SlowDownload()]))
    task_id = await queue.submit(SlowDownload(), {"identifier": "y"}, ctx)
    await queue.wait(task_id, 5)
    record = await services.bg_tasks.get(orphan)
    assert record.status == "failed" and "interrupted" in record.error
    assert (await services.bg_tasks.get(task_id)).status == "completed"
    texts = " ".join(m["content"] for m in await queue.drain("ses_test"))
    assert orphan in texts and task_id in texts


@pytest.mark.asyncio
async def test_closing_the_container_records_running_tasks_as_failed(astro_config) -> None:
    from astro_jupyter.services.container import ServiceContainer

    services = ServiceContainer(astro_config)
    await services.start()
    ctx, _ = make_ctx(services, registry=ToolRegistry([SlowDownload(delay=30)]))
    out = await BgTaskRunTool().execute({"tool": "download_paper", "arguments": {"identifier": "z"}}, ctx)
    await asyncio.sleep(0.05)
    await services.close()
    services = ServiceContainer(astro_config)
    await services.start()
    try:
        record = await services.bg_tasks.get(out.metadata["task_id"])
        assert record.status == "failed" and record.error == "cancelled before it finished"
    finally:
        await services.close()


@pytest.mark.asyncio
async def test_real_download_then_parse_in_the_background(paper_services, file_fake) -> None:
    """The two allowed tools, for real: download_paper against the loopback file server, then parse_paper."""
    from astro_jupyter.agent.tools.astro.download import DownloadPaperTool
    from astro_jupyter.agent.tools.astro.paper import tools as paper_tools
    from tests.fakes.file_server import Route, make_pdf

    pdf = make_pdf("Dwarf galaxies", pages=3, extra_text="satellite quenching " * 50)
    file_fake.state["routes"]["/pdf/2301.01234"] = Route(body=pdf)
    registry = ToolRegistry([DownloadPaperTool(), *paper_tools(paper_services.config)])
    ctx, _ = make_ctx(paper_services, registry=registry)
    queue = queue_for(paper_services)
    started = await BgTaskRunTool().execute({"tool": "download_paper", "arguments": {"paper_id": "arxiv:2301.01234"}}, ctx)
    assert not started.is_error, started.content
    await queue.wait(started.metadata["task_id"], 20)
    done = await paper_services.bg_tasks.get(started.metadata["task_id"])
    assert done.status == "completed" and "Downloaded arxiv:2301.01234" in done.result, done.error
    assert (paper_services.config.papers_dir / "arxiv_2301.01234.pdf").read_bytes() == pdf
    parsed = await BgTaskRunTool().execute({"tool": "parse_paper", "arguments": {"paper_id": "arxiv:2301.01234"}}, ctx)
    await queue.wait(parsed.metadata["task_id"], 60)
    record = await paper_services.bg_tasks.get(parsed.metadata["task_id"])
    assert record.status == "completed", record.error
    notices = " ".join(m["content"] for m in await queue.drain(ctx.session_id))
    assert "download_paper completed" in notices and "parse_paper completed" in notices
