"""Context compaction, run before every LLM call: micro, automatic and manual layers.

* **micro**: once the estimate passes ``CompactionPolicy.micro_ratio`` of the soft limit, old tool
  results (all but the ``micro_keep_recent`` newest) become one-line placeholders in
  the in-memory prompt. The stored messages keep their full text.
* **auto**: above ``CompactionPolicy.soft_limit_tokens``: snapshot the recently read files, summarise
  the older messages with the LLM, keep the newest ``keep_recent_messages`` verbatim
  and re-insert the snapshot files. Repeated failures open a circuit breaker
  (``breaker_threshold``) so a broken summariser cannot make every step fail.
* **manual**: ``compress_context`` sets ``RunState.compact_requested``; applied here, and not
  subject to the breaker.

Nothing is deleted: dropped messages are marked ``compacted`` in the store and the summary is
kept as the session's summary (so a later run starts from it, see :func:`load_history`).
The **memory bridge** hands the dropped messages to a restricted subagent (read-only tools
plus ``save_memory``) that keeps what is durable. PreCompact/PostCompact hooks fire around
each compaction and a ``compaction`` event reports every attempt, failed ones included.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Protocol

from ..events import Compaction, Event
from ..llm.profile import COMPACT_SHARE
from .context import CHARS_PER_TOKEN, raw_tokens
from .hooks.base import HookEventName
from .subagents import SUBAGENT_MAX_STEPS, readonly_registry

if TYPE_CHECKING:
    from ..config import AstroConfig
    from ..services.container import ServiceContainer
    from .hooks import HookRegistry
    from .run import RunHandle, RunState, SubagentResult
    from .tools.base import ToolContext
    from .tools.registry import ToolRegistry

log = logging.getLogger(__name__)

PLACEHOLDER_PREFIX = "[old tool result cleared to save context"
SUMMARY_PREFIX = "[Summary of the earlier conversation; older messages were compacted]\n"
RESTORE_PREFIX = "[Files read before the compaction, restored]\n"
TRANSCRIPT_MESSAGE_CHARS = 3000
TRANSCRIPT_TOTAL_CHARS = 60_000
@dataclass(frozen=True)
class CompactionPolicy:
    """When and how much to compact (internal tuning, not settings; tests pass their own to ``AgentRuntime``)."""

    soft_limit_tokens: int = 80_000  # estimated prompt tokens above which older messages are summarised
    micro_ratio: float = 0.6  # old tool results become placeholders past this share of the soft limit
    micro_keep_recent: int = 4  # most recent tool results micro-compaction leaves intact
    keep_recent_messages: int = 6  # most recent messages kept verbatim when older ones are summarised
    breaker_threshold: int = 3  # consecutive automatic-compaction failures that open the circuit breaker
    restore_files: int = 3  # recently read files re-inserted after a compaction
    restore_chars: int = 4000  # characters of each restored file
    memory_bridge: bool = True  # a restricted subagent may save durable memories from the dropped messages


RESTORE_MIN_CHARS = 200  # less room than this for a restored file: it is not restored (read_file reads it again)

SUMMARY_SYSTEM = """You compress an astronomy research assistant's conversation so the work can continue.
Write a faithful summary that keeps: the user's goals and constraints, decisions made, key results
(numbers with units, coordinates, object names, paper ids/bibcodes, file paths), what was tried and
failed, and what remains to do. Be concise; use short bullet points; invent nothing."""

BRIDGE_PROMPT = """You review messages that were removed from an astro-jupyter agent's context.
Save, with save_memory, each durable fact worth knowing in future sessions: user preferences,
project facts, key results with their sources. Save nothing transient, vague or code-like, and
nothing already obvious. If nothing qualifies, answer "nothing to save". Finish with one line
listing what you saved."""


class CircuitBreaker:
    """Opens after ``threshold`` consecutive failures; a success closes it again."""

    def __init__(self, threshold: int) -> None:
        self.threshold = max(1, int(threshold))
        self.failures = 0

    @property
    def is_open(self) -> bool:
        return self.failures >= self.threshold

    def record_failure(self) -> None:
        self.failures += 1

    def record_success(self) -> None:
        self.failures = 0


@dataclass
class CompactionStats:
    breaker: CircuitBreaker
    breaker_reported: bool = False
    nothing_reported: bool = False
    messages_after_last: int = -1  # prompt length right after the last compaction


def micro_compact(messages: list[dict[str, Any]], keep_recent: int) -> int:
    """Replace all but the newest ``keep_recent`` tool results by placeholders; returns how many."""
    tool_indexes = [i for i, m in enumerate(messages) if m.get("role") == "tool"]
    old = tool_indexes[: max(0, len(tool_indexes) - max(0, keep_recent))]
    cleared = 0
    for i in old:
        content = messages[i].get("content") or ""
        if content.startswith(PLACEHOLDER_PREFIX) or len(content) < 200:
            continue
        name = messages[i].get("name") or "tool"
        messages[i] = {
            **messages[i],
            "content": f"{PLACEHOLDER_PREFIX}: {name}, {len(content)} characters. Call the tool again if you need it.]",
        }
        cleared += 1
    return cleared


def choose_cut(messages: list[dict[str, Any]], keep_recent: int) -> int | None:
    """Index of the first kept message (never a tool result, so calls stay with their results)."""
    cut = len(messages) - max(1, keep_recent)
    while cut > 1 and messages[cut].get("role") == "tool":
        cut -= 1
    return cut if cut > 1 else None


def recent_results_within(messages: list[dict[str, Any]], most: int, tokens: int, scale: float) -> int:
    """How many of the newest tool results fit in ``tokens`` together (at least one, at most ``most``)."""
    results = [m for m in messages if m.get("role") == "tool"]
    keep, used = 0, 0
    for message in reversed(results[-max(1, most):]):
        used += int(raw_tokens([message]) * scale)
        if keep and used > tokens:
            break
        keep += 1
    return max(1, keep)


def fitting_tail(messages: list[dict[str, Any]], most: int, tokens: int, estimate: Callable[[list[dict[str, Any]]], int]) -> int:
    """How many of the newest messages to keep: at most ``most``, at least one, within ``tokens``."""
    keep = 1
    while keep < min(most, len(messages) - 1) and estimate(messages[-(keep + 1):]) <= tokens:
        keep += 1
    return keep


def transcript(messages: list[dict[str, Any]], total: int = TRANSCRIPT_TOTAL_CHARS) -> str:
    lines: list[str] = []
    each = min(TRANSCRIPT_MESSAGE_CHARS, max(300, total // 4))
    for m in messages:
        content = m.get("content") or ""
        if len(content) > each:
            content = content[:each] + " …[truncated]"
        head = m.get("role", "?")
        if m.get("role") == "tool":
            head = f"tool result ({m.get('name') or m.get('tool_call_id') or ''})"
        calls = [
            f"{(c.get('function') or {}).get('name')}({(c.get('function') or {}).get('arguments')})"
            for c in m.get("tool_calls") or []
        ]
        if calls:
            content = (content + "\n" if content else "") + "calls: " + "; ".join(calls)
        lines.append(f"### {head}\n{content}")
    text = "\n\n".join(lines)
    return text if len(text) <= total else "…[earliest part truncated]\n" + text[-total:]


async def load_history(services: "ServiceContainer", session_id: str) -> list[dict[str, Any]]:
    """A session's uncompacted messages, preceded by the compaction summary when there is one."""
    history = await services.messages.chat_history(session_id)
    if await services.messages.has_compacted(session_id):
        session = await services.sessions.find(session_id)
        if session is not None and session.summary.strip():
            return [{"role": "user", "content": SUMMARY_PREFIX + session.summary}, *history]
    return history


class Summarizer(Protocol):
    async def complete(self, messages: list[dict[str, Any]]) -> str: ...


class CompactionHost(Protocol):
    """What compaction uses of the runtime (``AgentRuntime``)."""

    services: "ServiceContainer"
    config: "AstroConfig"
    hooks: "HookRegistry"
    compaction: CompactionPolicy

    @property
    def llm(self) -> Summarizer: ...

    @property
    def registry(self) -> "ToolRegistry": ...

    def get_run(self, run_id: str) -> "RunHandle | None": ...

    async def run_subagent(
        self, task: str, *, parent_ctx: "ToolContext", max_steps: int | None = None,
        registry: "ToolRegistry | None" = None, system_prompt: str | None = None,
    ) -> "SubagentResult": ...


class Compactor:
    """The turn preparer; one per runtime, state per run in ``RunState.compaction``."""

    def __init__(self, runtime: CompactionHost) -> None:
        self.runtime = runtime
        self.services: "ServiceContainer" = runtime.services
        self.config = runtime.config
        self.policy = runtime.compaction

    def stats(self, state: "RunState") -> CompactionStats:
        if state.compaction is None:
            state.compaction = CompactionStats(CircuitBreaker(self.policy.breaker_threshold))
        return state.compaction

    def _emitter(self, state: "RunState") -> Callable[[Event], Awaitable[None]]:
        handle = self.runtime.get_run(state.run_id)

        async def emit(event: Event) -> None:
            if handle is not None and not handle.bus.done:
                handle.bus.publish(event)

        return emit

    async def limits(self, state: "RunState") -> tuple[int, int, int]:
        """(compact above, hard budget, room for the conversation) in estimated prompt tokens.

        The budget is the model's window less the answer's bound (``ModelProfile``); what compaction
        cannot shrink (the system prompt and the tool schemas) is taken off first, and compaction starts
        at ``COMPACT_SHARE`` of the room left, capped by ``CompactionPolicy.soft_limit_tokens``. So a 4k model
        compacts in time, and a small room is not summarised again at every step."""
        soft = self.policy.soft_limit_tokens
        profile_of = getattr(self.runtime.llm, "profile", None)
        if profile_of is None:  # an LLM double without profiles: the setting alone
            return soft, soft * 2, soft
        profile = await profile_of(state.model)
        budget = profile.prompt_budget
        fixed = state.meter.estimate(state.messages[:1])  # the system prompt and the tool schemas
        room = max(budget // 4, budget - fixed)
        return min(soft, budget - room + int(room * COMPACT_SHARE)), budget, room

    async def __call__(self, state: "RunState") -> None:
        emit = self._emitter(state)
        stats = self.stats(state)
        if state.compact_requested:
            state.compact_requested = False
            await self.compact(state, "manual", emit)
            return
        soft, budget, room = await self.limits(state)
        estimate = state.meter.estimate
        tokens = estimate(state.messages)
        overflowed = state.overflowed
        if overflowed or tokens > soft * self.policy.micro_ratio:
            # the newest results stay whole, as many as the setting says and a third of the room holds
            keep = 1 if overflowed else recent_results_within(
                state.messages, self.policy.micro_keep_recent, room // 3, state.meter.scale)
            cleared = micro_compact(state.messages, keep)
            if cleared:
                after = estimate(state.messages)
                await emit(
                    Compaction(
                        layer="micro",
                        tokens_before=tokens,
                        tokens_after=after,
                        message=f"replaced {cleared} old tool result(s) with placeholders",
                    )
                )
                tokens = after
        if tokens <= soft and not overflowed:
            return
        if not overflowed and tokens <= budget and 0 <= stats.messages_after_last and (
            len(state.messages) - stats.messages_after_last < self.policy.keep_recent_messages
        ):
            return  # just compacted and still large but fits: wait for new messages instead of re-summarising the summary
        if stats.breaker.is_open:
            if not stats.breaker_reported:
                stats.breaker_reported = True
                await emit(
                    Compaction(
                        layer="auto",
                        tokens_before=tokens,
                        tokens_after=tokens,
                        message="automatic compaction skipped: circuit breaker open after "
                        f"{stats.breaker.failures} consecutive failures (compress_context still works)",
                    )
                )
            return
        await self.compact(state, "auto", emit)

    async def compact(self, state: "RunState", layer: str, emit: Callable[[Event], Awaitable[None]]) -> bool:
        """snapshot → summarise → restore; True when the prompt was replaced."""
        stats = self.stats(state)
        estimate = state.meter.estimate
        before = estimate(state.messages)
        _, budget, room = await self.limits(state)
        hooks = self.runtime.hooks
        base = {"session_id": state.session_id, "run_id": state.run_id, "layer": layer, "tokens": before}
        outcome = await hooks.run(HookEventName.PRE_COMPACT, {**base, "messages": len(state.messages)})
        if outcome.blocked:
            await emit(Compaction(layer=layer, tokens_before=before, tokens_after=before, message=f"blocked by a PreCompact hook: {outcome.reason}"))  # type: ignore[arg-type]
            return False
        # keep the newest messages verbatim, as many as the setting says and a third of the room holds
        scale = state.meter.scale
        keep = fitting_tail(state.messages, self.policy.keep_recent_messages, room // 3,
                            lambda tail: int(raw_tokens(tail) * scale))
        cut = choose_cut(state.messages, keep)
        if cut is None:
            if layer == "manual" or not stats.nothing_reported:  # said once per run for auto, not every step
                stats.nothing_reported = True
                await emit(Compaction(layer=layer, tokens_before=before, tokens_after=before, message="nothing old enough to compact"))  # type: ignore[arg-type]
            return False
        ctx = state.tool_ctx
        recent = ctx.file_state.recent_paths(self.policy.restore_files) if ctx is not None else []
        dropped, kept = state.messages[1:cut], state.messages[cut:]
        focus, state.compact_focus = state.compact_focus, ""
        try:
            # the summary request must fit the model too: its transcript gets about half the budget
            limit = min(TRANSCRIPT_TOTAL_CHARS, max(2000, budget * 2))
            summary = await asyncio.wait_for(self.summarize(dropped, focus, limit), float(self.config.llm_timeout_secs))
            if not summary.strip():
                raise ValueError("the model returned an empty summary")
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a failed compaction must not fail the turn
            if layer == "auto":
                stats.breaker.record_failure()
            state_note = ""
            if layer == "auto":
                state_note = f" ({stats.breaker.failures}/{stats.breaker.threshold} consecutive failures"
                state_note += "; circuit breaker open: automatic compaction disabled)" if stats.breaker.is_open else ")"
            message = f"compaction failed: {type(exc).__name__}: {exc}{state_note}; no message was dropped"
            hooks.fire_and_forget(HookEventName.NOTIFICATION, {"level": "warning", "message": message, "run_id": state.run_id})
            await emit(Compaction(layer=layer, tokens_before=before, tokens_after=before, message=message))  # type: ignore[arg-type]
            if stats.breaker.is_open:
                stats.breaker_reported = True
            return False
        if layer == "auto":
            stats.breaker.record_success()
        restored = self._restore(recent, ctx, room)
        new_messages = [state.messages[0], {"role": "user", "content": SUMMARY_PREFIX + summary.strip()}]
        if restored:
            body = "\n\n".join(f"## {path}\n{text}" for path, text in restored)
            new_messages.append({"role": "user", "content": RESTORE_PREFIX + body})
        state.messages[:] = [*new_messages, *kept]
        marked = await self._persist(state, dropped, summary.strip())
        stats.messages_after_last = len(state.messages)
        after = estimate(state.messages)
        await hooks.run(HookEventName.POST_COMPACT, {**base, "tokens_after": after, "dropped": len(dropped), "summary": summary})
        files = ", ".join(p for p, _ in restored) or "none"
        await emit(
            Compaction(
                layer=layer,  # type: ignore[arg-type]
                tokens_before=before,
                tokens_after=after,
                message=f"summarised {len(dropped)} message(s) ({marked} marked compacted); restored files: {files}",
            )
        )
        if self.policy.memory_bridge and ctx is not None:
            await self._bridge(ctx, dropped)
        return True

    async def summarize(self, dropped: list[dict[str, Any]], focus: str = "", limit: int = TRANSCRIPT_TOTAL_CHARS) -> str:
        instruction = SUMMARY_SYSTEM + (f"\nKeep especially: {focus}" if focus else "")
        messages = [
            {"role": "system", "content": instruction},
            {"role": "user", "content": "Summarise this conversation:\n\n" + transcript(dropped, limit)},
        ]
        return str(await self.runtime.llm.complete(messages))

    def _restore(self, paths: list[str], ctx: "ToolContext | None", room: int) -> list[tuple[str, str]]:
        """Re-read the snapshot files; paths not restored are forgotten so read_file reads them fully."""
        from .tools.filesystem.regular import read_regular
        from .tools.filesystem.security import PathNotAllowed, resolve_path, run_owner

        restored: list[tuple[str, str]] = []
        limit = self.policy.restore_chars
        left = room * CHARS_PER_TOKEN // 4  # restored files take at most a quarter of the conversation's room
        for path in paths:
            limit = min(limit, left)
            if limit < RESTORE_MIN_CHARS:
                break
            try:  # judged again: the file may have become a link to a protected place since it was read
                resolved = resolve_path(path, self.config, owner=run_owner(ctx))
                text = read_regular(resolved).decode("utf-8", errors="replace")  # never blocks on a FIFO
            except (OSError, PathNotAllowed):
                if ctx is not None:
                    ctx.file_state.forget(path)
                continue
            if len(text) > limit:
                text = text[:limit] + f"\n…[{len(text) - limit} more characters; read_file for the rest]"
            restored.append((path, text))
            left -= len(text)
        if ctx is not None:
            keep = {p for p, _ in restored}
            for path in list(ctx.file_state.recent_paths(10_000)):
                if path not in keep:
                    ctx.file_state.forget(path)
        return restored

    async def _persist(self, state: "RunState", dropped: list[dict[str, Any]], summary: str) -> int:
        """Mark the stored rows of the dropped messages compacted; keep the summary on the session."""
        try:
            rows = await self.services.messages.list(state.session_id, include_compacted=False)
            i, last_id = 0, None
            for message in dropped:
                if i >= len(rows):
                    break
                row = rows[i]
                same = row.role == message.get("role") and (
                    row.tool_call_id == message.get("tool_call_id")
                    if message.get("role") == "tool"
                    else (row.content or "") == (message.get("content") or "")
                )
                if same:
                    last_id, i = row.id, i + 1
            marked = await self.services.messages.mark_compacted(state.session_id, last_id) if last_id else 0
            await self.services.sessions.update(state.session_id, summary=summary)
            return marked
        except Exception:  # noqa: BLE001 - the prompt is already compacted; storage lags, nothing is lost
            log.warning("could not record the compaction of session %s", state.session_id, exc_info=True)
            return 0

    async def _bridge(self, ctx: "ToolContext", dropped: list[dict[str, Any]]) -> None:
        """Let a restricted subagent keep durable facts from the dropped messages as memories."""
        from .tools.memory import SaveMemoryTool

        registry = readonly_registry(self.runtime.registry)
        registry.remove("check_team_inbox")  # reading would consume the lead's messages
        keeper = SaveMemoryTool(source="compaction")
        keeper.defer_loading = False  # type: ignore[misc] - the bridge's one job: offered without loading
        registry.replace(keeper)
        bridge_ctx = dataclasses.replace(ctx, tool_call_id="")
        task = "Messages removed from the context:\n\n" + transcript(dropped)
        try:
            await self.runtime.run_subagent(
                task,
                parent_ctx=bridge_ctx,
                max_steps=SUBAGENT_MAX_STEPS,
                registry=registry,
                system_prompt=BRIDGE_PROMPT,
            )
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - memories are a bonus; compaction already succeeded
            log.warning("compaction memory bridge failed", exc_info=True)


async def inject_background_results(runtime: CompactionHost, state: "RunState") -> None:
    """Finished background tasks reach the model (and the stored history) before its next call."""
    from .background import drain_background_messages

    messages = await drain_background_messages(runtime.services, state.session_id)
    for message in messages:
        await runtime.services.messages.append(
            state.session_id, message, run_id=state.run_id, metadata={"kind": "background_results"}
        )
        state.messages.append(message)


def default_turn_preparers(runtime: CompactionHost) -> list[Callable[["RunState"], Awaitable[None]]]:
    """Background results first (they count towards the budget), then compaction."""

    async def background(state: "RunState") -> None:
        await inject_background_results(runtime, state)

    return [background, Compactor(runtime)]
