"""The tool executor: validate → permissions → PreToolUse → partition → run → PostToolUse.

Every tool call the model makes gets exactly one result (the chat API requires it), in
the order of the calls, whatever goes wrong: bad JSON, unknown tools, schema errors,
denied permissions, hooks that block, timeouts, exceptions, user cancellation. Those
all become error results the model can read; nothing here raises for a bad call.

Three parts, top to bottom: the values a call moves through (``ToolCallRequest`` → ``CallSlot``
→ ``ExecutedCall``); the per-call stages on ``ToolExecutor`` (one per run: the loop detector's
memory spans turns); and ``StreamingToolExecutor``, the scheduling of those stages, usable
while the model's answer is still streaming. ``add(call)`` as soon as one call's arguments
are complete. Each call is a small task:

1. validation runs at once, in call order (it feeds the loop detector);
2. admission (ToolCall event, permission question, PreToolUse hooks) runs strictly in
   call order, one call after the other, so questions never interleave;
3. a concurrency-safe call then starts as soon as no exclusive call before it is
   unfinished; a non-safe call waits for every call before it and runs alone;
   consecutive safe calls form one parallel batch (the unit of sibling abort);
4. results are processed as each call ends; ``finish()`` returns them in call order.

``ToolExecutor.execute`` is this same scheduler fed all calls at once, which gives the
seed's partition ``[read, grep, bash, read, write] → [read∥grep], [bash], [read], [write]``.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..errors import QuestionCancelled, QuestionUnanswered
from ..events import Error, PermissionRequest, ToolCall, ToolProgress, ToolResult
from ..textsafe import clean_text
from .hooks import HookEventName, HookOutcome, HookRegistry
from .permissions import ANSWERS, PermissionChecker, PermissionDecision, permission_scope
from .tools.base import AgentTool, InterruptBehavior, ToolContext, ToolOutput
from .tools.filesystem.protected import tool_results_dir_for
from .tools.filesystem.security import run_owner
from .tools.persist import MAX_OUTPUT_CHARS, PREVIEW_CHARS, maybe_persist_tool_result
from .validation import ArgumentError, DuplicateDetector, parse_arguments, validate_arguments

if TYPE_CHECKING:
    from pathlib import Path

    from ..config import AstroConfig
    from ..events import Event
    from .tools.registry import ToolRegistry

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ToolCallRequest:
    """One tool call as the model sent it (arguments still the raw JSON string)."""

    id: str
    name: str
    arguments_json: str = ""
    cut_off: bool = False  # the output bound ended the answer inside these arguments: rejected, never run


@dataclass
class ExecutedCall:
    """The outcome of one call; ``message`` is the ``role: tool`` chat message to append."""

    id: str
    name: str
    arguments: dict[str, Any] | None
    output: ToolOutput
    duration_ms: int
    message: dict[str, Any]


@dataclass
class ToolMetrics:
    calls: int = 0
    errors: int = 0
    total_ms: int = 0
    max_ms: int = 0


def repair_call_id(call_id: str | None) -> str:
    """Models sometimes send an empty id; give it a unique one so its result can be matched."""
    return call_id if call_id and call_id.strip() else f"call_{uuid.uuid4().hex}"


@dataclass
class CallSlot:
    """A call moving through the pipeline; ``error`` set means it will not run."""

    index: int
    id: str
    name: str
    raw_arguments: str
    args: dict[str, Any] | None = None
    tool: AgentTool | None = None
    error: ToolOutput | None = None
    stage: str = ""  # where it stopped: validate | permission | hook | cancelled
    safe: bool = False
    contexts: list[str] = field(default_factory=list)
    permission: PermissionDecision | None = None
    question_pin: Any = None  # what the question showed, for the tool to check before it acts


def elapsed_ms(start: float) -> int:
    return int((time.perf_counter() - start) * 1000)



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
        if asking.done() and ctx.cancelled.is_set():  # cancelled just now: nothing is put to the user
            if not asking.cancelled():
                asking.exception()  # QuestionCancelled, expected: retrieved so asyncio does not report it
            self.cancel_before_start(slot)
            return PermissionDecision("deny", "cancelled", "ask")
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


class _Batch:
    """A run of consecutive concurrency-safe calls; the first failing aborter cancels the rest."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.abort: asyncio.Future[str] = loop.create_future()

    def trigger(self, slot: CallSlot, output: ToolOutput) -> None:
        if not self.abort.done():
            first_line = (output.content.strip().splitlines() or [""])[0][:200]
            self.abort.set_result(f"its sibling call {slot.name} ({slot.id}) failed: {first_line}")


class StreamingToolExecutor:
    def __init__(self, executor: "ToolExecutor", ctx: "ToolContext") -> None:
        self.executor = executor
        self.ctx = ctx
        self._loop = asyncio.get_running_loop()
        self._tasks: list[asyncio.Task[ExecutedCall]] = []
        self._done: list[asyncio.Future[None]] = []
        self._prev_admitted: asyncio.Future[None] | None = None
        self._last_exclusive: asyncio.Future[None] | None = None
        self._batch: _Batch | None = None
        self._cancel = self._loop.create_task(ctx.cancelled.wait())
        self._closed = False

    def __len__(self) -> int:
        return len(self._tasks)

    def add(self, call: ToolCallRequest) -> str:
        """Queue one complete call; it may start at once. Returns the (repaired) call id."""
        if self._closed:
            raise RuntimeError("finish() was already called on this StreamingToolExecutor")
        slot = self.executor.prepare(call, len(self._tasks))
        admitted: asyncio.Future[None] = self._loop.create_future()
        done: asyncio.Future[None] = self._loop.create_future()
        previous_done = list(self._done)
        task = self._loop.create_task(self._drive(slot, self._prev_admitted, admitted, done, previous_done))
        self._prev_admitted = admitted
        self._done.append(done)
        self._tasks.append(task)
        return slot.id

    async def finish(self) -> list[ExecutedCall]:
        """Wait for every added call; results in the order the calls were added."""
        self._closed = True
        try:
            return list(await asyncio.gather(*self._tasks))
        except asyncio.CancelledError:
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            raise
        finally:
            self._cancel.cancel()

    async def _drive(
        self,
        slot: CallSlot,
        prev_admitted: "asyncio.Future[None] | None",
        admitted: "asyncio.Future[None]",
        done: "asyncio.Future[None]",
        previous_done: list["asyncio.Future[None]"],
    ) -> ExecutedCall:
        ex, ctx = self.executor, self.ctx
        try:
            batch: _Batch | None = None
            try:
                if prev_admitted is not None:
                    await prev_admitted
                await ex.admit(slot, ctx, self._cancel)
                waits, batch = self._place(slot, previous_done)
            finally:
                if not admitted.done():
                    admitted.set_result(None)
            if slot.error is not None:
                return await ex.complete(slot, ctx, slot.error, 0, ran=False, failure=None)
            if waits:
                await asyncio.wait(waits)
            if ctx.cancelled.is_set():
                ex.cancel_before_start(slot)
                return await ex.complete(slot, ctx, slot.error or ToolOutput.error("cancelled"), 0, False, None)
            if batch is not None and batch.abort.done():
                slot.stage = "aborted"
                out = ToolOutput.error(f"Error: {slot.name} was not started because {batch.abort.result()}",
                                       sibling_abort=True)
                return await ex.complete(slot, ctx, out, 0, ran=False, failure=None)
            start = time.perf_counter()
            output, failure = await ex.run_tool(slot, ctx, self._cancel, batch.abort if batch else None)
            duration_ms = elapsed_ms(start)
            if batch is not None and output.is_error and slot.tool is not None and slot.tool.causes_sibling_abort:
                batch.trigger(slot, output)
            return await ex.complete(slot, ctx, output, duration_ms, ran=True, failure=failure)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - an executor bug must still answer the call
            log.exception("executor failed on %s (%s)", slot.name, slot.id)
            out = ToolOutput.error(f"Error: internal executor failure on {slot.name}: {type(exc).__name__}: {exc}")
            message = {"role": "tool", "tool_call_id": slot.id, "name": slot.name, "content": out.content}
            return ExecutedCall(slot.id, slot.name, slot.args, out, 0, message)
        finally:
            if not done.done():
                done.set_result(None)

    def _place(
        self, slot: CallSlot, previous_done: list["asyncio.Future[None]"]
    ) -> tuple[list["asyncio.Future[None]"], _Batch | None]:
        """Partition step (runs in call order, right after admission): what must this call wait for?"""
        if slot.error is not None:
            return [], None
        if slot.safe:
            if self._batch is None:
                self._batch = _Batch(self._loop)
            waits = [self._last_exclusive] if self._last_exclusive is not None else []
            return [w for w in waits if not w.done()], self._batch
        self._batch = None
        self._last_exclusive = self._done[slot.index]
        return [d for d in previous_done if not d.done()], None
