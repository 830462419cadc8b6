"""Hooks the package ships: the lifecycle audit trail.

Tool calls and permission decisions are written to the audit log by the executor
itself (they must be recorded even when no hook is configured). This hook covers the
rest of a run's life: the prompt (fired-and-forgotten from UserPromptSubmit so a slow
disk never delays the answer), session start/end, compaction, subagents, notifications
and Stop. Registered by ``HookRegistry.from_config(config, services=...)``.
"""

from __future__ import annotations

from typing import Any

from .base import Hook, HookEventName, HookResult

_TEXT_LIMIT = 500  # the full prompt is in agent_messages; the audit row keeps a recognisable head


class AuditHook(Hook):
    events = frozenset(
        e.value  # Hook.handles compares values
        for e in (
            HookEventName.SESSION_START,
            HookEventName.SESSION_END,
            HookEventName.USER_PROMPT_SUBMIT,
            HookEventName.NOTIFICATION,
            HookEventName.PRE_COMPACT,
            HookEventName.POST_COMPACT,
            HookEventName.SUBAGENT_START,
            HookEventName.SUBAGENT_STOP,
            HookEventName.STOP,
        )
    )

    def __init__(self, audit: Any) -> None:
        self.audit = audit  # an AuditRepository (services.audit)
        self.name = "audit"

    async def __call__(self, event: HookEventName, payload: dict[str, Any]) -> HookResult:
        detail: dict[str, Any] = {}
        for key, value in payload.items():
            if key in ("session_id", "run_id", "event"):
                continue
            if isinstance(value, str) and len(value) > _TEXT_LIMIT:
                detail[key] = value[:_TEXT_LIMIT] + "..."
                detail[f"{key}_chars"] = len(value)
            else:
                detail[key] = value
        await self.audit.record(
            event.value,
            session_id=str(payload.get("session_id") or ""),
            run_id=str(payload.get("run_id") or ""),
            detail=detail,
        )
        return None
