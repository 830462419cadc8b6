"""Scheduling of one turn's calls, usable while the model's answer is still streaming.

``add(call)`` as soon as one call's arguments are complete. Each call is a small task:

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
from typing import TYPE_CHECKING

from .calls import CallSlot, ExecutedCall, ToolCallRequest, elapsed_ms
from .tools.base import ToolOutput

if TYPE_CHECKING:
    from .executor import ToolExecutor
    from .tools.base import ToolContext

log = logging.getLogger(__name__)


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


__all__ = ["StreamingToolExecutor"]
