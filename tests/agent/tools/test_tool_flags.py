"""Where a tool may appear is declared on the tool (``agent_step``, ``lead_only``,
``top_level_only``), and ``is_concurrency_safe`` follows ``is_readonly`` unless a tool says otherwise."""

from __future__ import annotations

from typing import Any

from astro_jupyter.agent.subagents import readonly_registry, worker_registry
from astro_jupyter.agent.tools import build_default_registry
from astro_jupyter.agent.tools.base import AgentTool, ToolContext, ToolOutput
from astro_jupyter.agent.tools.registry import ToolRegistry
from astro_jupyter.config import AstroConfig

LEAD_ONLY = {
    "ask_user", "subagent", "compress_context",
    "spawn_teammate", "send_teammate_message", "team_broadcast", "check_team_inbox",
    "delegate_task", "check_task", "task_stop", "synthesize",
}
AGENT_STEPS = LEAD_ONLY | {"load_tool", "load_skill", "todo_write", "bg_task_run", "bg_task_check"}


def _registry() -> ToolRegistry:
    return build_default_registry(AstroConfig(), coordinator=True)


def test_the_flags_cover_exactly_the_tools_the_old_name_lists_named() -> None:
    tools = _registry().sorted_tools()
    names = {t.name for t in tools}
    assert {t.name for t in tools if t.agent_step} == AGENT_STEPS & names
    assert {t.name for t in tools if t.lead_only} == LEAD_ONLY & names
    assert {t.name for t in tools if t.top_level_only} == {"ask_user", "subagent"}
    assert AGENT_STEPS <= names  # every one of them is in the standard registry


def test_a_subagent_gets_no_lead_only_tool_and_compaction_only_readonly_ones() -> None:
    registry = _registry()
    worker = set(worker_registry(registry, exclude=["run_bash"]).names())
    assert not worker & LEAD_ONLY and "run_bash" not in worker
    assert {"read_file", "file_write", "search_papers"} <= worker
    bridge = set(readonly_registry(registry).names())
    assert "save_memory" in bridge and "file_write" not in bridge and not bridge & LEAD_ONLY
    assert all(registry.get(n).is_readonly for n in bridge - {"save_memory"})  # type: ignore[union-attr]


class _Reader(AgentTool):
    name = "reader"
    description = "Reads."
    is_readonly = True

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        return ToolOutput("ok")


class _Writer(_Reader):
    name = "writer"
    is_readonly = False


def test_concurrency_follows_readonly_by_default() -> None:
    assert _Reader().is_concurrency_safe({}) is True
    assert _Writer().is_concurrency_safe({}) is False
    registry = _registry()
    for name in ("read_file", "glob_files", "grep_files", "search_papers", "get_paper_metadata"):
        assert registry.get(name).is_concurrency_safe({}) is True  # type: ignore[union-attr]
    for name in ("file_write", "file_edit", "run_bash", "download_paper"):
        assert registry.get(name).is_concurrency_safe({}) is False  # type: ignore[union-attr]
    # read-only, but reading marks the inbox read: it still runs alone
    assert registry.get("check_team_inbox").is_concurrency_safe({}) is False  # type: ignore[union-attr]
