"""The runtime↔tools boundary stays typed: tools get a ``RunScope`` (``ctx.scope``), not the runtime.

Structure checks (they fail if the untyped path comes back): ToolContext, RunState and RunScope
have no ``Any`` / string-keyed catch-all fields; no tool duck-types its context with
getattr/hasattr; no module keeps WeakKeyDictionary side tables or writes into another object's
``__dict__``. Behaviour checks: a tool called directly through the kernel's scope reaches the
runtime's tools, one called without a loop gets a clear error, and the scope a subagent gets is
its own (state, registry) while sharing the run's sidebar and answer slots.
"""

from __future__ import annotations

import ast
import asyncio
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

import astro_jupyter
from astro_jupyter.agent.executor import ToolCallRequest, ToolExecutor
from astro_jupyter.agent.run import PendingAnswers, RunState
from astro_jupyter.agent.run import ClientNotebook, RunScope
from astro_jupyter.agent.tools.base import ToolContext
from astro_jupyter.agent.tools.file_state import FileStateCache
from astro_jupyter.agent.tools.load_tool import LoadToolTool
from astro_jupyter.agent.tools.registry import ToolRegistry
from tests.agent.runtime_helpers import make_config, running

PACKAGE_DIR = Path(astro_jupyter.__file__).resolve().parent


def _annotations(cls: type) -> dict[str, str]:
    return {f.name: str(f.type) for f in dataclasses.fields(cls)}


def _has_any(annotation: str) -> bool:
    return "Any" in annotation.replace("[", " ").replace("]", " ").replace(",", " ").replace("|", " ").split()


def test_tool_context_has_no_untyped_field() -> None:
    fields = _annotations(ToolContext)
    assert "scope" in fields and "RunScope" in fields["scope"]
    assert not {"runtime", "run_state", "extra"} & set(fields), "ToolContext regained an untyped back door"
    untyped = {name: t for name, t in fields.items() if _has_any(t)}
    assert untyped == {}, f"ToolContext fields typed Any: {untyped}"


def test_run_scope_has_no_untyped_field() -> None:
    untyped = {name: t for name, t in _annotations(RunScope).items() if _has_any(t)}
    assert untyped == {}, f"RunScope fields typed Any: {untyped}"


def test_run_state_has_typed_fields_not_a_string_keyed_bag() -> None:
    fields = _annotations(RunState)
    assert "extra" not in fields
    bags = {name: t for name, t in fields.items() if t.replace(" ", "") in {"Any", "Any|None", "dict[str,Any]"}}
    assert bags == {}, f"RunState fields that hold anything under any key: {bags}"


def _rooted_at_ctx(node: ast.AST) -> bool:
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name) and node.id == "ctx"


def test_no_tool_duck_types_its_context() -> None:
    offenders = []
    for path in sorted((PACKAGE_DIR / "agent" / "tools").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in {"getattr", "hasattr", "setattr"}
                    and node.args and _rooted_at_ctx(node.args[0])):
                offenders.append(f"{path.relative_to(PACKAGE_DIR)}:{node.lineno} {ast.unparse(node)}")
    assert offenders == [], "\n".join(offenders)


CORE = ("agent", "services", "store", "llm")


def test_no_side_tables_and_no_writes_into_other_objects_dicts() -> None:
    """In the core (where runs and tools live): state lives on typed owners, not in tables keyed by them."""
    offenders = []
    for path in sorted(p for part in CORE for p in (PACKAGE_DIR / part).rglob("*.py")):
        rel = path.relative_to(PACKAGE_DIR)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Attribute, ast.Name)) and (getattr(node, "attr", None) or getattr(node, "id", None)) in {
                "WeakKeyDictionary", "WeakValueDictionary"
            }:
                offenders.append(f"{rel}:{node.lineno} {ast.unparse(node)}")
            target = None
            if isinstance(node, (ast.Assign, ast.AugAssign)):
                for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    if isinstance(t, ast.Subscript):
                        target = t.value
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in {
                "setdefault", "update", "__setitem__"
            }:
                target = node.func.value
            if (isinstance(target, ast.Attribute) and target.attr == "__dict__"
                    and not (isinstance(target.value, ast.Name) and target.value.id == "self")):
                offenders.append(f"{rel}:{node.lineno} {ast.unparse(node)}")
    assert offenders == [], "\n".join(offenders)


async def _direct_call(services: Any, scope: RunScope | None, registry: ToolRegistry, name: str, args: dict[str, Any]) -> Any:
    async def emit(event: Any) -> None:
        return None

    ctx = ToolContext(config=services.config, services=services, session_id="ses_k", cancelled=asyncio.Event(),
                      emit=emit, file_state=FileStateCache(), run_id="kernel", scope=scope)
    [done] = await ToolExecutor(registry, config=services.config).execute([ToolCallRequest("k1", name, json.dumps(args))], ctx)
    return done.output


@pytest.mark.asyncio
async def test_a_direct_call_through_the_runtimes_scope_reaches_its_tools(tmp_path: Path, openai_server: Any) -> None:
    from astro_jupyter.agent.tools.background import BgTaskRunTool

    async with running(make_config(tmp_path, openai_server.url), LoadToolTool(), BgTaskRunTool()) as (services, runtime):
        scope = runtime.tool_scope("ses_k", "kernel")
        assert scope.registry is runtime.registry and scope.runner is not None and scope.client is None
        out = await _direct_call(services, scope, runtime.registry, "load_tool", {"names": ["bg_task_run"]})
        assert not out.is_error and "Loaded bg_task_run" in out.content
        assert scope.loaded_tools == {"bg_task_run"}
        none = await _direct_call(services, None, runtime.registry, "load_tool", {"names": ["bg_task_run"]})
        assert none.is_error and "load_tool needs a running agent loop" in none.content


def test_a_subagents_scope_is_its_own_but_shares_the_sidebar() -> None:
    answers = PendingAnswers()
    client = ClientNotebook(path="m31.ipynb", cell_ids=("a",), bridge=True)
    parent = RunScope(RunState(run_id="r1", session_id="s1", owner="alice"), ToolRegistry([LoadToolTool()]),
                      answers=answers, client=client)
    parent.loaded_tools.add("bg_task_run")
    child = parent.child(RunState(run_id="r1", session_id="s1", owner="alice"), ToolRegistry([]))
    assert child.loaded_tools == set() and child.registry.names() == []
    assert child.answers is answers and child.client is client and child.owner == "alice"
    assert parent.request_compaction("the H0 values") is False and parent.request_compaction() is True
    assert parent.state.compact_requested and parent.state.compact_focus == "the H0 values"
