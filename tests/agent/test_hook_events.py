"""The package fires hooks by ``HookEventName`` members, never by raw strings: a typo in a
string would silently run no hook, a typo in a member name fails at import."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import astro_jupyter
from astro_jupyter.agent.hooks import HookEventName, HookRegistry
from astro_jupyter.agent.hooks.builtin import AuditHook

PACKAGE_DIR = Path(astro_jupyter.__file__).resolve().parent
NAMES = {e.value for e in HookEventName}
HOOK_CALLS = {"run", "fire_and_forget", "register", "hooks_for"}


def _raw_string_hook_calls() -> list[str]:
    found = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if not any(f'"{n}"' in text or f"'{n}'" in text for n in NAMES):
            continue  # no hook name as a string literal: nothing to find (and no parse)
        for node in ast.walk(ast.parse(text)):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in HOOK_CALLS
                    and node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value in NAMES):
                found.append(f"{path.relative_to(PACKAGE_DIR)}:{node.lineno} {node.func.attr}({node.args[0].value!r})")
            # a loop over raw names feeding a hook call is the same thing
            elif isinstance(node, ast.For) and isinstance(node.iter, (ast.Tuple, ast.List)):
                if any(isinstance(e, ast.Constant) and e.value in NAMES for e in node.iter.elts):
                    found.append(f"{path.relative_to(PACKAGE_DIR)}:{node.lineno} loop over raw hook names")
    return found


def test_the_package_fires_hooks_by_enum_member() -> None:
    assert _raw_string_hook_calls() == []


@pytest.mark.asyncio
async def test_enum_and_string_reach_the_same_hooks() -> None:
    """Programmatic users may still register by string; the audit hook still sees its events."""
    seen: list[str] = []
    hooks = HookRegistry()
    hooks.register("Stop", lambda ev, payload: seen.append(ev.value))
    await hooks.run(HookEventName.STOP, {})
    assert seen == ["Stop"]
    audit = AuditHook(audit=None)
    assert audit.handles(HookEventName.STOP) and audit.handles(HookEventName.USER_PROMPT_SUBMIT)
    assert not audit.handles(HookEventName.PRE_TOOL_USE)
