"""Lifecycle hooks: Python objects and shell commands that watch, veto or reshape a run.

Hooks answer with tagged ``HookDecision`` values (continue / block / mutate_input /
append_context / mutate_output) and ``HookRegistry.run`` folds them into one
``HookOutcome``. A hook that raises, hangs or prints garbage never breaks the run: the
failure becomes a warning on the outcome (the executor shows it as an ``error`` event)
and the run continues as if the hook had said "continue".

Sources of hooks: ``HookRegistry.register`` (programmatic), the entry-point group
``astro_jupyter.hooks`` (each entry point is a ``Hook`` instance, a ``Hook`` subclass,
or a factory ``f(config) -> Hook | list[Hook]``) and ``AstroConfig.command_hooks``.
"""

from __future__ import annotations

from .registry import ENTRY_POINT_GROUP, HookRegistry
from .base import CallableHook, DecisionKind, Hook, HookDecision, HookEventName, HookFn, HookOutcome, HookResult

__all__ = [
    "ENTRY_POINT_GROUP",
    "CallableHook",
    "DecisionKind",
    "Hook",
    "HookDecision",
    "HookEventName",
    "HookFn",
    "HookOutcome",
    "HookRegistry",
    "HookResult",
]
