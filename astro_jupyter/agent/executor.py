"""The tool executor: validate → permissions → PreToolUse → partition → run → PostToolUse.

Every tool call the model makes gets exactly one result (the chat API requires it), in
the order of the calls, whatever goes wrong: bad JSON, unknown tools, schema errors,
denied permissions, hooks that block, timeouts, exceptions, user cancellation. Those
all become error results the model can read; nothing here raises for a bad call.

The per-call stages live on ``ToolExecutor`` (one per run: the loop detector's memory
spans turns); the values a call moves through live in ``calls.py``; the scheduling of those stages, shared by the one-shot ``execute`` and the
streaming variant, lives in ``streaming_executor.py``. Partition rule: consecutive
concurrency-safe calls run together, any other call waits for everything before it and
runs alone.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ..errors import QuestionCancelled, QuestionUnanswered
from ..events import Error, PermissionRequest, ToolCall, ToolProgress, ToolResult
from ..textsafe import clean_text
from .calls import CallSlot, ExecutedCall, ToolCallRequest, ToolMetrics, elapsed_ms, repair_call_id
from .hooks import HookEventName, HookOutcome, HookRegistry
from .permissions import ANSWERS, PermissionChecker, PermissionDecision, permission_scope
from .tools.base import InterruptBehavior, ToolContext, ToolOutput
from .tools.filesystem.protected import tool_results_dir_for
from .tools.filesystem.security import run_owner
from .tools.persist import MAX_OUTPUT_CHARS, PREVIEW_CHARS, maybe_persist_tool_result
from .streaming_executor import StreamingToolExecutor
from .validation import ArgumentError, DuplicateDetector, parse_arguments, validate_arguments

if TYPE_CHECKING:
    from pathlib import Path

    from ..config import AstroConfig
    from ..events import Event
    from .tools.registry import ToolRegistry

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class ToolLimits:
    """Internal tuning of tool calls (not settings; tests pass their own to ``AgentRuntime``)."""

    max_output_chars: int = MAX_OUTPUT_CHARS  # longer outputs go to tool-results/ (preview inline)
    preview_chars: int = PREVIEW_CHARS
    duplicate_threshold: int = 3  # consecutive identical (tool, arguments) calls that count as a loop
    cancel_poll_secs: float = 0.25  # how often a running tool checks for cancellation
    permission_timeout_secs: float = 300.0  # how long a permission question waits for an answer


ALLOW_ANSWERS = frozenset(ANSWERS) - {"deny"}  # anything else (a typo, "yes") is no consent


class ToolExecutor:
    """Runs a turn's tool calls through the full pipeline; keep one instance per run."""

    def __init__(
        self,
        registry: "ToolRegistry",
        permissions: PermissionChecker | None = None,
        hooks: HookRegistry | None = None,
        config: "AstroConfig | None" = None,
        limits: ToolLimits | None = None,
    ) -> None:
        if config is None:
            from ..config import AstroConfig

            config = AstroConfig()
        self.registry = registry
        self.config = config
        self.limits = limits or ToolLimits()
        self.permissions = permissions if permissions is not None else PermissionChecker.from_config(config)
        self.hooks = hooks if hooks is not None else HookRegistry()
        self.detector = DuplicateDetector(self.limits.duplicate_threshold)
        self.metrics: dict[str, ToolMetrics] = {}

    # -- entry points ------------------------------------------------------------------------
    def stream(self, ctx: ToolContext) -> StreamingToolExecutor:
        """A streaming executor for one turn: ``add`` calls as they complete, then ``finish``."""
        return StreamingToolExecutor(self, ctx)

    async def execute(self, calls: list[ToolCallRequest], ctx: ToolContext) -> list[ExecutedCall]:
        """Run one turn's calls; results come back in the order of ``calls``."""
        streaming = self.stream(ctx)
        for call in calls:
            streaming.add(call)
        return await streaming.finish()

    # -- stage 1: validate_and_prepare (synchronous, in call order) -----------------------------
    def prepare(self, request: ToolCallRequest, index: int) -> CallSlot:
        slot = CallSlot(index, repair_call_id(request.id), request.name or "", request.arguments_json or "")
        if request.cut_off:
            return self._reject(
                slot,
                f"Error: {slot.name or 'tool call'}: your answer reached the output token limit after "
                f"{len(slot.raw_arguments)} characters of these arguments, so they are incomplete and the call was "
                "not run. Call it again with shorter arguments (split long content over several calls).",
                cut_off=True,
            )
        try:
            slot.args = parse_arguments(request.arguments_json)
        except ArgumentError as exc:
            self.detector.observe(slot.name, slot.raw_arguments)
            return self._reject(slot, f"Error: {slot.name or 'tool call'}: {exc}. Send the arguments as a JSON object.")
        if self.detector.is_loop(slot.name, slot.args):
            return self._reject(
                slot,
                f"Error: you have called {slot.name} with identical arguments {self.detector.count} times in a row. "
                "You are looping; the result will not change. Use the results you already have or try a "
                "different approach.",
                duplicate=True,
            )
        tool = self.registry.get(slot.name)
        unavailable = self.registry.unavailable_reason(slot.name) if tool is None else None
        if unavailable:
            return self._reject(slot, f"Error: {slot.name} is not available here: {unavailable}")
        if tool is None:
            available = ", ".join(self.registry.names()) or "(none)"
            return self._reject(slot, f"Error: unknown tool {slot.name!r}. Available tools: {available}.")
        slot.tool = tool
        try:
            validate_arguments(slot.args, tool.parameters)
        except ArgumentError as exc:
            return self._reject(slot, f"Error: {slot.name}: {exc}.")
        return slot

    @staticmethod
    def _reject(slot: CallSlot, message: str, stage: str = "validate", **meta: Any) -> CallSlot:
        slot.error = ToolOutput.error(message, stage=stage, **meta)
        slot.stage = stage
        return slot

    # -- stage 2: ToolCall event, permissions, PreToolUse hooks (in call order) -------------------
    async def admit(self, slot: CallSlot, ctx: ToolContext, cancel: "asyncio.Future[Any]") -> None:
        """Announce the call, then decide whether it may run (and with which arguments)."""
        await self.emit(
            ctx,
            ToolCall(
                id=slot.id,
                name=slot.name,
                arguments=slot.args if slot.args is not None else slot.raw_arguments,
                step=ctx.step,
                subagent_id=ctx.subagent_id,
            ),
        )
        if slot.error is not None:
            return
        if ctx.cancelled.is_set():
            self.cancel_before_start(slot)
            return
        tool, args = slot.tool, slot.args
        assert tool is not None and args is not None
        decision = self.permissions.check(tool, args, session_id=ctx.session_id)
        if decision.action == "ask":
            decision = await self._ask(slot, ctx, decision, cancel)
            if slot.error is not None:  # cancelled while waiting
                return
        slot.permission = decision
        if decision.action != "allow":
            # the user's own "Deny" is a decision, not a failure: the sidebar shows the call as declined
            self._reject(slot, f"Permission denied for {slot.name}: {decision.reason}", "permission",
                         declined=decision.source == "user")
            return
        payload = self._payload(slot, ctx)
        outcome = await self.hooks.run(HookEventName.PRE_TOOL_USE, payload, tool_name=slot.name)
        await self._hook_warnings(outcome, ctx)
        if outcome.blocked:
            self._reject(slot, f"Blocked by a PreToolUse hook: {outcome.reason}", "hook")
            return
        if outcome.mutated_input is not None:
            try:
                validate_arguments(outcome.mutated_input, tool.parameters)
            except ArgumentError as exc:
                self._reject(slot, f"Error: a PreToolUse hook rewrote the arguments of {slot.name} badly: {exc}", "hook")
                return
            slot.args = outcome.mutated_input
        slot.contexts = outcome.contexts
        try:
            slot.safe = bool(tool.is_concurrency_safe(slot.args))
        except Exception:  # noqa: BLE001 - when in doubt, run alone
            log.exception("is_concurrency_safe of %s raised", slot.name)
            slot.safe = False

    def cancel_before_start(self, slot: CallSlot) -> None:
        self._reject(slot, f"Error: {slot.name} was cancelled by the user before it started.", "cancelled", cancelled=True)

    async def _ask(
        self, slot: CallSlot, ctx: ToolContext, decision: PermissionDecision, cancel: "asyncio.Future[Any]"
    ) -> PermissionDecision:
        """Put the question to the user (through ``ctx.ask_permission``) and turn the answer into a decision."""
        if ctx.unattended is not None and not ctx.silent:
            verdict = ctx.unattended.decide(slot.name, decision.reason)
            return await self._permission_answered(slot, ctx, verdict, "")
        if ctx.silent or ctx.ask_permission is None:
            why = "a subagent cannot ask" if ctx.silent else "no one is there to answer"
            return await self._permission_answered(slot, ctx, PermissionDecision("deny", f"{decision.reason} ({why})", "ask"), "")
        assert slot.tool is not None and slot.args is not None
        scope = permission_scope(slot.tool, slot.args)
        message, code, old_source = decision.reason, "", None
        try:  # what will really happen, read now, just before asking
            preview = await slot.tool.permission_preview(slot.args, ctx.for_call(slot.id, ctx.step), decision.reason)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is None or task.cancelling() or not ctx.cancelled.is_set():
                raise
            self.cancel_before_start(slot)  # the run was cancelled while the tool looked (a bridge request withdrawn)
            return PermissionDecision("deny", "cancelled", "ask")
        except Exception as exc:  # noqa: BLE001 - a broken preview: the question goes out with the rule's reason
            log.warning("permission_preview of %s failed: %s: %s", slot.name, type(exc).__name__, exc)
            preview = None
        if preview is not None:
            message, code, slot.question_pin = preview.message, preview.code, preview.pin
            old_source = preview.old_source
        request = PermissionRequest(
            request_id=f"perm_{uuid.uuid4().hex[:16]}",
            tool_call_id=slot.id,
            name=slot.name,
            arguments=slot.args,
            message=message,
            subagent_id=ctx.subagent_id,
            scope=scope,
            code=code,
            old_source=old_source,
        )
        payload = {**self._payload(slot, ctx), "request_id": request.request_id, "message": message}
        outcome = await self.hooks.run(HookEventName.PERMISSION_REQUEST, payload, tool_name=slot.name)
        await self._hook_warnings(outcome, ctx)
        if outcome.blocked:
            return await self._permission_answered(
                slot, ctx, PermissionDecision("deny", f"refused by a PermissionRequest hook: {outcome.reason}", "hook"), ""
            )
        # Start waiting before announcing, so an instant answer cannot arrive before anyone listens.
        try:
            asking = asyncio.ensure_future(ctx.ask_permission(request))
        except Exception as exc:  # noqa: BLE001 - a broken asker means no consent
            verdict = PermissionDecision("deny", f"{decision.reason} (asking failed: {type(exc).__name__}: {exc})", "ask")
            return await self._permission_answered(slot, ctx, verdict, "")
        await self.emit(ctx, request)
        timeout = self.limits.permission_timeout_secs
        try:
            done, _ = await asyncio.wait({asking, cancel}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            asking.cancel()
            raise
        if asking not in done:
            asking.cancel()
            if ctx.cancelled.is_set():
                self.cancel_before_start(slot)
                return PermissionDecision("deny", "cancelled", "ask")
            verdict = PermissionDecision("deny", f"{decision.reason} (no answer within {timeout:g}s)", "ask")
            return await self._permission_answered(slot, ctx, verdict, "timeout")
        try:
            answer = str(asking.result() or "").strip().lower()
        except QuestionCancelled:  # the run was cancelled (an interrupt) while the question waited
            self.cancel_before_start(slot)
            return PermissionDecision("deny", "cancelled", "ask")
        except QuestionUnanswered as exc:
            if ctx.cancelled.is_set():  # an interrupt at the prompt: the run is being cancelled
                self.cancel_before_start(slot)
                return PermissionDecision("deny", "cancelled", "ask")
            verdict = PermissionDecision("deny", f"{decision.reason} (no one answered: {exc})", "ask")
            return await self._permission_answered(slot, ctx, verdict, "")
        except Exception as exc:  # noqa: BLE001 - a broken asker means no consent
            log.warning("asking for permission for %s failed: %s: %s", slot.name, type(exc).__name__, exc)
            verdict = PermissionDecision("deny", f"{decision.reason} (the question could not be asked: "
                                                 f"{type(exc).__name__}: {exc})", "ask")
            return await self._permission_answered(slot, ctx, verdict, "")
        if answer == "always":
            self.permissions.allow_always(slot.name, ctx.session_id, scope)
        if answer in ALLOW_ANSWERS:
            verdict = PermissionDecision("allow", f"allowed by the user ({answer})", "user")
        else:
            verdict = PermissionDecision("deny", f"{decision.reason} (the user answered {answer or 'nothing'!r})", "user")
        return await self._permission_answered(slot, ctx, verdict, answer)

    async def confirm(
        self, slot: CallSlot, ctx: ToolContext, reason: str, cancel: "asyncio.Future[Any]"
    ) -> PermissionDecision:
        """A question a running call asks (``ctx.confirm``): never skipped for a read-only tool, refused in
        permission mode 'deny', allowed again without asking only after an "always" for the same scope."""
        assert slot.tool is not None and slot.args is not None
        scope = permission_scope(slot.tool, slot.args)
        if self.permissions.mode == "deny":
            return PermissionDecision("deny", f"{reason}; permission mode 'deny' refuses calls that need confirmation", "mode")
        if scope and self.permissions.always_allowed(slot.name, ctx.session_id, scope):
            return PermissionDecision("allow", f"always allowed in this session ({reason})", "session")
        return await self._ask(slot, ctx, PermissionDecision("ask", reason, "tool"), cancel)

    async def _permission_answered(
        self, slot: CallSlot, ctx: ToolContext, verdict: PermissionDecision, answer: str
    ) -> PermissionDecision:
        await self._audit(
            ctx, "permission", slot, is_error=not verdict.allowed,
            detail={"action": verdict.action, "reason": verdict.reason, "answer": answer},
        )
        return verdict

    # -- stage 3: run one tool (timeout, cancellation, sibling abort) ---------------------------
    async def run_tool(
        self, slot: CallSlot, ctx: ToolContext, cancel: "asyncio.Future[Any]", abort: "asyncio.Future[str] | None"
    ) -> tuple[ToolOutput, str | None]:
        """Execute the tool; returns (output, failure) with failure in exception|timeout|cancelled|aborted."""
        tool, args = slot.tool, slot.args
        assert tool is not None and args is not None
        loop = asyncio.get_running_loop()
        timeout = float(getattr(tool, "timeout_secs", None) or self.config.tool_timeout_secs)
        poll = max(0.01, float(self.limits.cancel_poll_secs))
        call_ctx = replace(ctx.for_call(slot.id, ctx.step), question_pin=slot.question_pin,
                           confirm=lambda reason: self.confirm(slot, ctx, reason, cancel))
        task = loop.create_task(tool.execute_with_progress(args, call_ctx, self._reporter(slot, ctx)))
        interruptible = tool.interrupt_behavior is InterruptBehavior.CANCEL
        watch: set[asyncio.Future[Any]] = {task}
        if interruptible:
            watch.add(cancel)
            if abort is not None:
                watch.add(abort)
        deadline = loop.time() + timeout
        try:
            while not task.done():
                remaining = deadline - loop.time()
                if remaining <= 0:
                    await self._stop(task, poll)
                    return ToolOutput.error(f"Error: {slot.name} timed out after {timeout:g}s.", timeout=True), "timeout"
                await asyncio.wait(watch, timeout=min(remaining, poll) if interruptible else remaining,
                                   return_when=asyncio.FIRST_COMPLETED)
                if task.done() or not interruptible:
                    continue
                if ctx.cancelled.is_set():
                    await self._stop(task, poll)
                    return ToolOutput.error(f"Error: {slot.name} was cancelled by the user.", cancelled=True), "cancelled"
                if abort is not None and abort.done():
                    await self._stop(task, poll)
                    return ToolOutput.error(f"Error: {slot.name} was cancelled because {abort.result()}",
                                            sibling_abort=True), "aborted"
        except asyncio.CancelledError:
            task.cancel()
            raise
        if task.cancelled():
            return ToolOutput.error(f"Error: {slot.name} was cancelled.", cancelled=True), "cancelled"
        exc = task.exception()
        if exc is not None:  # the model gets type and message; the traceback goes to the log
            log.warning("tool %s (%s) raised", slot.name, slot.id, exc_info=exc)
            return ToolOutput.error(f"Error: {slot.name} failed: {type(exc).__name__}: {exc}",
                                    exception=type(exc).__name__), "exception"
        output = task.result()
        if not isinstance(output, ToolOutput):
            return ToolOutput.error(f"Error: {slot.name} returned {type(output).__name__}, not a ToolOutput.",
                                    exception="TypeError"), "exception"
        return output, None

    @staticmethod
    async def _stop(task: "asyncio.Task[Any]", grace: float) -> None:
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=grace)
        if not done:  # the tool swallowed the cancellation: let it finish alone, but not silently
            log.warning("tool task %r ignored cancellation", task)
            task.add_done_callback(lambda t: t.cancelled() or t.exception())

    def _reporter(self, slot: CallSlot, ctx: ToolContext) -> Any:
        async def progress(done: int | None = None, total: int | None = None, message: str = "") -> None:
            await self.emit(ctx, ToolProgress(id=slot.id, progress={"done": done, "total": total, "message": message},
                                              subagent_id=ctx.subagent_id))

        return progress

    # -- stage 4: results (persist, PostToolUse, audit, ToolResult event) ------------------------
    async def complete(
        self, slot: CallSlot, ctx: ToolContext, output: ToolOutput, duration_ms: int, ran: bool, failure: str | None
    ) -> ExecutedCall:
        metadata = dict(output.metadata)
        metadata["ran"] = ran  # the export makes code only of calls that ran (a refused call stays text)
        results_dir = tool_results_dir_for(self.config, run_owner(ctx))  # other owners cannot read it
        # a lone surrogate (a file name decoded with surrogateescape) cannot be written, stored or sent
        content = await self._persist(slot.id, clean_text(output.content), metadata, results_dir)
        if ran:
            event = HookEventName.POST_TOOL_USE_FAILURE if failure else HookEventName.POST_TOOL_USE
            payload = {**self._payload(slot, ctx), "output": content, "is_error": output.is_error,
                       "metadata": metadata, "duration_ms": duration_ms, "failure": failure}
            outcome = await self.hooks.run(event, payload, tool_name=slot.name)
            await self._hook_warnings(outcome, ctx)
            if outcome.mutated_output is not None:
                metadata["output_mutated"] = True
                content = await self._persist(f"{slot.id}-mutated", outcome.mutated_output, metadata, results_dir)
            self._record_metrics(slot.name, duration_ms, output.is_error)
        if slot.contexts:
            metadata["hook_context"] = list(slot.contexts)
            content += "".join(f"\n\n<hook-context>\n{text}\n</hook-context>" for text in slot.contexts)
        final = ToolOutput(content, output.is_error, metadata)
        await self._audit(ctx, "tool_use", slot, is_error=final.is_error, duration_ms=duration_ms,
                          detail={"stage": slot.stage or ("failure" if failure else "done"), "failure": failure,
                                  "persisted_path": metadata.get("persisted_path"),
                                  "permission": None if slot.permission is None else
                                  {"action": slot.permission.action, "source": slot.permission.source,
                                   "reason": slot.permission.reason}})
        await self.emit(ctx, ToolResult(tool_call_id=slot.id, name=slot.name, output=content, is_error=final.is_error,
                                        metadata=metadata, step=ctx.step, duration_ms=duration_ms,
                                        subagent_id=ctx.subagent_id))
        message = {"role": "tool", "tool_call_id": slot.id, "name": slot.name, "content": content}
        return ExecutedCall(slot.id, slot.name, slot.args, final, duration_ms, message)

    async def _persist(self, key: str, content: str, metadata: dict[str, Any], directory: "Path") -> str:
        limit = self.limits.max_output_chars
        if limit <= 0 or len(content) <= limit:
            return content
        try:
            result = await asyncio.to_thread(
                maybe_persist_tool_result, content, key, directory, limit,
                self.limits.preview_chars,
            )
        except OSError as exc:  # disk full / read-only: truncate rather than lose the turn
            log.warning("could not persist tool output %s: %s", key, exc)
            metadata["persist_error"] = str(exc)
            return content[:limit] + f"\n... (truncated from {len(content)} characters; saving the rest failed: {exc})"
        metadata["persisted_path"] = str(result.path)
        metadata["original_chars"] = result.chars
        return result.content

    def _record_metrics(self, name: str, duration_ms: int, is_error: bool) -> None:
        m = self.metrics.setdefault(name, ToolMetrics())
        m.calls += 1
        m.errors += int(is_error)
        m.total_ms += duration_ms
        m.max_ms = max(m.max_ms, duration_ms)

    # -- helpers ---------------------------------------------------------------------------------
    @staticmethod
    def _payload(slot: CallSlot, ctx: ToolContext) -> dict[str, Any]:
        return {"session_id": ctx.session_id, "run_id": ctx.run_id, "tool_name": slot.name,
                "tool_call_id": slot.id, "arguments": slot.args, "step": ctx.step, "subagent_id": ctx.subagent_id}

    async def _hook_warnings(self, outcome: HookOutcome, ctx: ToolContext) -> None:
        for message in outcome.warnings:
            await self.emit(ctx, Error(message=message, reason="hook", step=ctx.step, subagent_id=ctx.subagent_id))

    async def _audit(self, ctx: ToolContext, event: str, slot: CallSlot, **fields: Any) -> None:
        try:
            await ctx.services.audit.record(event, session_id=ctx.session_id, run_id=ctx.run_id, tool_name=slot.name,
                                            tool_call_id=slot.id, arguments=slot.args, **fields)
        except Exception as exc:  # noqa: BLE001 - a locked audit table must not lose the tool result
            log.warning("audit record failed for %s: %s", slot.id, exc)
            await self.emit(ctx, Error(message=f"could not write the audit log for {slot.name} ({slot.id}): {exc}",
                                       reason="store", step=ctx.step, subagent_id=ctx.subagent_id))

    @staticmethod
    async def emit(ctx: ToolContext, event: "Event") -> None:
        try:
            await ctx.emit(event)
        except Exception:  # noqa: BLE001 - a broken consumer must not lose results
            log.exception("emitting %s failed", event.type)


__all__ = [
    "CallSlot",
    "ExecutedCall",
    "StreamingToolExecutor",
    "ToolCallRequest",
    "ToolExecutor",
    "ToolMetrics",
    "elapsed_ms",
    "repair_call_id",
]
