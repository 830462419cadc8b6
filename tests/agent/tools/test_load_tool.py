"""Tool loading: resident definitions + a catalog first; load_tool brings a deferred definition in."""

from __future__ import annotations

import pytest

from astro_jupyter.agent.tools import build_default_registry
from astro_jupyter.agent.tools.background import BgTaskCheckTool, BgTaskRunTool
from astro_jupyter.agent.prompt import build_system_prompt
from astro_jupyter.agent.tools.load_tool import LoadToolTool
from astro_jupyter.agent.tools.search_history import SearchHistoryTool
from astro_jupyter.agent.tools.todo import TodoWriteTool
from astro_jupyter.events import ToolResult
from tests.agent.runtime_helpers import collect, make_config, make_runtime
from tests.fakes.openai_server import Turn

SEED_READONLY = {
    "read_file", "grep_files", "glob_files", "search_papers", "get_paper_metadata",
    "get_paper_content", "rag_search", "query_target", "check_team_inbox",
}
NOTEBOOK_READONLY = {"notebook_read", "kernel_inspect"}  # the notebook family, beyond the seed (resident)
SEED_DEFERRED = {
    "parse_paper", "download_paper", "bg_task_run", "bg_task_check", "spawn_teammate",
    "send_teammate_message", "team_broadcast", "search_history",
    # resident are only the few a research turn needs (a small model's prompt stays mostly the question)
    "file_edit", "file_write", "glob_files", "grep_files", "load_skill", "run_bash", "save_memory", "save_note",
    "subagent", "todo_write", "compress_context", "check_team_inbox", "get_paper_content",
    "notebook_read", "notebook_edit", "notebook_run",
}
LIBRARY_DEFERRED = {"remove_paper"}  # beyond the seed: asks every time, rarely needed
DATA_DEFERRED = {"query_catalog", "describe_catalog", "cone_search", "object_papers", "export_bibtex"}  # the data family
DATA_READONLY = {"object_papers", "export_bibtex"}


def _names(request: dict) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools") or []]


@pytest.mark.asyncio
async def test_deferred_tool_is_offered_only_after_load_tool(tmp_path, openai_server) -> None:
    services, runtime = await make_runtime(
        make_config(tmp_path, openai_server.url), LoadToolTool(), SearchHistoryTool(), TodoWriteTool(),
        BgTaskRunTool(), BgTaskCheckTool(),
    )
    try:
        old = await services.sessions.create(title="Quasar host galaxies")
        await services.messages.append(old.id, {"role": "assistant", "content": "The quasar host is an elliptical."})
        openai_server.script(
            Turn.call("load_tool", {"names": ["search_history", "no_such_tool"]}, id="l1"),
            Turn.call("search_history", {"query": "quasar host"}, id="s1"),
            Turn.call("load_tool", {"names": ["teleport"]}, id="l2"),
            Turn.say("Found earlier work."),
        )
        handle = await runtime.start_run("did we look at quasar hosts?")
        events = [e for _, e in await collect(handle)]
    finally:
        await runtime.close()
        await services.close()
    first, second = openai_server.chat_requests[0], openai_server.chat_requests[1]
    assert _names(first) == ["load_tool", "query_target"]  # resident only, sorted
    system = first["messages"][0]["content"]
    assert "- search_history: Full-text search of past sessions" in system and "- bg_task_run:" in system
    assert _names(second) == ["load_tool", "query_target", "search_history"]
    results = {e.tool_call_id: e for e in events if isinstance(e, ToolResult)}
    assert "Loaded search_history" in results["l1"].output and "Unknown: no_such_tool" in results["l1"].output
    assert "«quasar» «host»" in results["s1"].output
    assert results["l2"].is_error and "deferred tools you can load: bg_task_check, bg_task_run, search_history" in results["l2"].output
    assert _names(openai_server.chat_requests[3]) == _names(second)  # loaded tools stay for the run


def test_seed_flags_and_prompt_size_of_the_full_registry(astro_config) -> None:
    registry = build_default_registry(astro_config)
    readonly = {t.name for t in registry if t.is_readonly}
    deferred = {t.name for t in registry if t.defer_loading}
    assert readonly == (SEED_READONLY | NOTEBOOK_READONLY | DATA_READONLY) & set(registry.names())
    assert deferred == (SEED_DEFERRED | LIBRARY_DEFERRED | DATA_DEFERRED) & set(registry.names())
    assert len(registry.resident_definitions()) == len(registry) - len(deferred)
    prompt = build_system_prompt(registry)
    assert all(f"- {name}:" in prompt for name in deferred)


def test_orchestration_tools_follow_the_seed_tables(astro_config) -> None:
    """Concurrency and interrupt behaviour from the seed's self-management / orchestration tables."""
    from astro_jupyter.agent.tools.base import InterruptBehavior

    registry = build_default_registry(astro_config, coordinator=True)
    expected = {
        "todo_write": (True, InterruptBehavior.CANCEL),
        "compress_context": (True, InterruptBehavior.CANCEL),
        "load_skill": (True, InterruptBehavior.CANCEL),
        "save_memory": (False, InterruptBehavior.BLOCK),
        "ask_user": (False, InterruptBehavior.BLOCK),
        "search_history": (True, InterruptBehavior.CANCEL),
        "subagent": (False, InterruptBehavior.BLOCK),
        "bg_task_run": (False, InterruptBehavior.BLOCK),
        "bg_task_check": (True, InterruptBehavior.CANCEL),
        "spawn_teammate": (False, InterruptBehavior.BLOCK),
        "send_teammate_message": (False, InterruptBehavior.BLOCK),
        "team_broadcast": (False, InterruptBehavior.BLOCK),
        "check_team_inbox": (False, InterruptBehavior.BLOCK),
    }
    for name, (safe, behaviour) in expected.items():
        tool = registry.get(name)
        assert tool is not None, name
        assert (tool.is_concurrency_safe({}), tool.interrupt_behavior) == (safe, behaviour), name
    assert {"delegate_task", "check_task", "task_stop", "synthesize"} <= set(registry.names())
    assert "delegate_task" not in build_default_registry(astro_config).names()
