"""The hook registry: where hooks come from (code, entry points, configured commands) and how
one event runs them. A hook that raises, hangs or prints garbage never breaks the run: the
failure becomes a warning on the outcome and the run continues as if it had said "continue".
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from typing import TYPE_CHECKING, Any, Iterable

from ..permissions import tool_matches
from .builtin import AuditHook
from .command import CommandHook
from .base import CallableHook, Hook, HookDecision, HookEventName, HookFn, HookOutcome, HookResult

if TYPE_CHECKING:
    from ...config import AstroConfig

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "astro_jupyter.hooks"


def _decisions(result: HookResult) -> list[HookDecision]:
    if result is None:
        return []
    if isinstance(result, HookDecision):
        return [result]
    out = list(result)
    for item in out:
        if not isinstance(item, HookDecision):
            raise TypeError(f"hook returned {type(item).__name__}, expected HookDecision")
    return out


class HookRegistry:
    """Holds hooks and runs those matching an event (and tool name) in registration order."""

    def __init__(self, hooks: Iterable[Hook] = ()) -> None:
        self._hooks: list[Hook] = list(hooks)
        self._pending: set[asyncio.Task[Any]] = set()
        self.load_warnings: list[str] = []

    # -- building ----------------------------------------------------------------------------
    def add(self, hook: Hook) -> Hook:
        if not isinstance(hook, Hook):
            raise TypeError(f"{hook!r} is not a Hook")
        self._hooks.append(hook)
        return hook

    def register(self, event: "str | HookEventName", fn: HookFn, *, matcher: str = "*", name: str = "") -> Hook:
        """Register an async ``fn(event, payload)`` for one event; returns the wrapping hook."""
        return self.add(CallableHook(HookEventName.parse(event), fn, matcher, name))

    def remove(self, hook: Hook) -> None:
        self._hooks.remove(hook)

    def __len__(self) -> int:
        return len(self._hooks)

    def hooks_for(self, event: "str | HookEventName", tool_name: str | None = None) -> list[Hook]:
        ev = HookEventName.parse(event)
        return [
            h for h in self._hooks if h.handles(ev) and (tool_name is None or tool_matches(h.matcher, tool_name))
        ]

    @classmethod
    def from_config(
        cls, config: "AstroConfig", *, services: Any = None, entry_points: bool = True
    ) -> "HookRegistry":
        """The audit hook (when ``services`` is given), entry-point hooks, then configured command hooks."""
        registry = cls()
        if services is not None:
            registry.add(AuditHook(services.audit))
        if entry_points:
            registry.load_entry_points(config)
        for spec in config.command_hooks:
            try:
                registry.add(CommandHook.from_spec(spec))
            except (ValueError, TypeError) as exc:
                registry._load_warning(f"command hook {spec!r} ignored: {exc}")
        return registry

    def load_entry_points(self, config: "AstroConfig | None" = None, group: str = ENTRY_POINT_GROUP) -> int:
        """Load every entry point of ``group``; a broken one is skipped with a warning."""
        from importlib.metadata import entry_points

        loaded = 0
        for ep in entry_points(group=group):
            try:
                for hook in _instantiate(ep.load(), config):
                    if not hook.name:
                        hook.name = ep.name
                    self.add(hook)
                    loaded += 1
            except Exception as exc:  # noqa: BLE001 - a broken plugin must not stop startup
                self._load_warning(f"hook entry point {ep.name!r} ({ep.value}) failed to load: {type(exc).__name__}: {exc}")
        return loaded

    def _load_warning(self, message: str) -> None:
        log.warning(message)
        self.load_warnings.append(message)

    # -- running -------------------------------------------------------------------------------
    async def run(
        self, event: "str | HookEventName", payload: dict[str, Any], *, tool_name: str | None = None
    ) -> HookOutcome:
        """Run matching hooks in order and fold their decisions; stops at the first block."""
        ev = HookEventName.parse(event)
        outcome = HookOutcome()
        hooks = self.hooks_for(ev, tool_name)
        if not hooks:
            return outcome
        payload = dict(payload)
        payload.setdefault("event", ev.value)
        for hook in hooks:
            outcome.ran += 1
            try:
                decisions = _decisions(await hook(ev, payload))
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - a failing hook must not break the run
                message = f"{ev.value} hook {hook.describe()} failed: {type(exc).__name__}: {exc}"
                log.warning(message)
                outcome.warnings.append(message)
                continue
            for decision in decisions:
                outcome.apply(decision, payload)
                if outcome.blocked:
                    break
            if outcome.blocked:
                break
        if outcome.warnings and ev is not HookEventName.NOTIFICATION:
            for message in outcome.warnings:
                self.fire_and_forget(HookEventName.NOTIFICATION, {"level": "warning", "message": message})
        return outcome

    def fire_and_forget(
        self, event: "str | HookEventName", payload: dict[str, Any], *, tool_name: str | None = None
    ) -> asyncio.Task[HookOutcome] | None:
        """Run hooks in the background (UserPromptSubmit audit); errors are logged, never raised."""
        ev = HookEventName.parse(event)
        if not self.hooks_for(ev, tool_name):
            return None
        task = asyncio.get_running_loop().create_task(self.run(ev, payload, tool_name=tool_name))
        self._pending.add(task)
        task.add_done_callback(self._forget)
        return task

    def _forget(self, task: "asyncio.Task[Any]") -> None:
        self._pending.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("background hook failed: %r", task.exception())

    async def drain(self, timeout: float | None = None) -> None:
        """Wait for background hooks (tests, shutdown); leftovers past ``timeout`` are cancelled."""
        while self._pending:
            done, pending = await asyncio.wait(set(self._pending), timeout=timeout)
            if pending:
                for task in pending:
                    task.cancel()
                await asyncio.gather(*pending, return_exceptions=True)
                return


def _instantiate(obj: Any, config: "AstroConfig | None") -> list[Hook]:
    if isinstance(obj, Hook):
        return [obj]
    if isinstance(obj, type) and issubclass(obj, Hook):
        return [obj()]
    if callable(obj):
        try:
            params = inspect.signature(obj).parameters
        except (TypeError, ValueError):
            params = {}
        made = obj(config) if params else obj()
        items = made if isinstance(made, (list, tuple)) else [made]
        for item in items:
            if not isinstance(item, Hook):
                raise TypeError(f"factory returned {type(item).__name__}, expected Hook")
        return list(items)
    raise TypeError(f"{obj!r} is neither a Hook nor a factory of hooks")


__all__ = [
    "CallableHook",
    "Hook",
    "HookDecision",
    "HookEventName",
    "HookOutcome",
    "HookRegistry",
    "ENTRY_POINT_GROUP",
]
