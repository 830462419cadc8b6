"""The kernel's own agent runtime, living on a dedicated thread with its own event loop.

IPython kernels already run an event loop on the main thread (and terminal IPython runs
none), so nesting ours there is fragile. Instead one daemon thread owns a loop, the
``ServiceContainer`` and the ``AgentRuntime``; the magics (on the kernel thread) submit
coroutines with ``run_coroutine_threadsafe`` and wait in short slices, so a kernel
interrupt (KeyboardInterrupt) arrives between slices and is turned into a clean cancel.
Run events cross back through a thread-safe queue. Nothing heavy is imported until
the first magic that needs it runs.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import json
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterator, TypeVar

from ..errors import RunInterrupted

if TYPE_CHECKING:
    from pathlib import Path

    from ..agent.run import RunHandle
    from ..config import AstroConfig
    from ..events import Event

T = TypeVar("T")
_POLL_SECS = 0.05
_END = object()


class _Failed:
    """An exception from the run's event stream, carried to the kernel thread so the cell shows it."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


class _Work:
    """A function the loop thread needs run on the kernel's main thread (kernel_inspect, kernel_run)."""

    def __init__(self, fn: Callable[[Any], Any], arg: Any, future: "concurrent.futures.Future[Any]") -> None:
        self.fn, self.arg, self.future = fn, arg, future


_WAKE = object()


@dataclass
class ToolRun:
    """One direct tool call's outcome (what ``%astro TOOL`` returns, before display wrapping)."""

    tool: str
    arguments: dict[str, Any] | None
    content: str
    is_error: bool
    metadata: dict[str, Any]
    duration_ms: int
    events: list[Any] = field(default_factory=list)


OWN_NOTEBOOK = (
    "this is the notebook this kernel belongs to: it is open in JupyterLab, and changing its file from here could "
    "overwrite or lose the user's unsaved work. Use kernel_run to run code in this kernel, or put cells into another "
    "notebook (the user can copy them over)"
)


def own_notebook(shell: Any) -> "Path | None":
    """The notebook file this kernel was started for (jupyter_server sets JPY_SESSION_NAME; ipykernel
    copies it to ``__session__``), when it is an absolute .ipynb path."""
    import os
    from pathlib import Path

    ns = getattr(shell, "user_ns", None) or {}
    raw = os.environ.get("JPY_SESSION_NAME") or ns.get("__session__") or ""
    if isinstance(raw, str) and raw.endswith(".ipynb") and os.path.isabs(raw):
        return Path(raw)
    return None


class KernelLoopThread:
    """Owns the loop thread, the services and the agent runtime of one IPython shell."""

    def __init__(self, config: "AstroConfig", shell: Any = None) -> None:
        self.config = config
        self.shell = shell  # the IPython shell whose namespace kernel_inspect / kernel_run use
        self.model: str | None = None  # set by ``%astro model NAME``; None = config default
        self.session_id: str | None = None  # the session ``%%astro`` continues by default
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._services: Any = None
        self._runtime: Any = None
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        # work for the waiting kernel thread: (fn, arg, future) questions, or (fn, event, None) to show
        self._questions: "queue.Queue[Any]" = queue.Queue()
        self._boxes: set["queue.Queue[Any]"] = set()  # main-thread waits to wake when work arrives
        self._boxes_lock = threading.Lock()

    # -- the loop thread -------------------------------------------------------------------------
    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def main() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                self._thread = threading.Thread(target=main, name="astro-jupyter-loop", daemon=True)
                self._thread.start()
                ready.wait()
                self._loop = loop
            return self._loop

    def submit(self, coro: Awaitable[T]) -> "concurrent.futures.Future[T]":
        return asyncio.run_coroutine_threadsafe(coro, self._ensure_loop())  # type: ignore[arg-type]

    def call(self, factory: Callable[[], Awaitable[T]], *, on_interrupt: Callable[[], None] | None = None) -> T:
        """Run ``factory()`` on the loop and wait; Ctrl-C/kernel interrupt cancels it cleanly.

        ``on_interrupt`` (if given) asks the work to stop gracefully and we wait for it to
        finish (so Block tools finish and the store stays consistent); otherwise the task is
        cancelled. Either way ``RunInterrupted`` is raised afterwards.
        """
        future = self.submit(factory())
        try:
            return self._wait(future)
        except KeyboardInterrupt:
            if on_interrupt is not None:
                self._ensure_loop().call_soon_threadsafe(on_interrupt)
            else:
                future.cancel()
            self._drain(future)
            raise RunInterrupted("interrupted by the user") from None

    def _wait(self, future: "concurrent.futures.Future[T]") -> T:
        box: "queue.Queue[Any]" = queue.Queue()
        future.add_done_callback(lambda _f: box.put(_WAKE))
        with self._watching(box):
            while True:
                self.serve_questions()
                if future.done():
                    self.serve_questions()  # events emitted just before the end
                    return future.result()
                try:
                    box.get(timeout=_POLL_SECS)
                except queue.Empty:
                    pass

    @contextlib.contextmanager
    def _watching(self, box: "queue.Queue[Any]") -> Iterator[None]:
        """While the main thread waits on ``box``, work for it (``on_main``) wakes it at once."""
        with self._boxes_lock:
            self._boxes.add(box)
        try:
            yield
        finally:
            with self._boxes_lock:
                self._boxes.discard(box)

    def _wake(self) -> None:
        with self._boxes_lock:
            boxes = list(self._boxes)
        for box in boxes:
            box.put(_WAKE)

    def on_main(self, fn: Callable[[Any], T], arg: Any) -> "concurrent.futures.Future[T]":
        """Run ``fn(arg)`` on the kernel's main thread (served while a cell waits on this runtime)."""
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._questions.put(_Work(fn, arg, future))
        self._wake()
        return future

    @staticmethod
    def _drain(future: "concurrent.futures.Future[Any]", timeout: float = 60.0) -> None:
        """Wait (ignoring further interrupts) until cancelled work has wound down."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                future.result(timeout=_POLL_SECS)
                return
            except concurrent.futures.TimeoutError:
                continue
            except KeyboardInterrupt:
                continue
            except BaseException:  # noqa: BLE001 - cancelled or failed: it is over either way
                return

    # -- services, runtime, executor (built lazily on the loop) ------------------------------------
    async def services(self) -> Any:
        if self._services is None:
            from ..services.container import ServiceContainer

            self._services = await ServiceContainer(self.config).start()
            own = own_notebook(self.shell)
            if own is not None:
                self._services.notebooks.protect(own, OWN_NOTEBOOK)
        return self._services

    async def runtime(self) -> Any:
        if self._runtime is None:
            from ..agent.runtime import AgentRuntime

            self._runtime = AgentRuntime(await self.services(), registry=self._registry())
        return self._runtime

    def _registry(self) -> Any:
        """The standard tools, plus kernel_inspect / kernel_run on this shell's namespace."""
        from ..agent.tools import build_default_registry
        from ..agent.tools.notebook import kernel_tools

        registry = build_default_registry(self.config)
        if self.shell is not None:
            from .namespace import ShellAccess

            for tool in kernel_tools(ShellAccess(self.shell, self, self.config)):
                registry.replace(tool)
        return registry

    async def registry(self) -> Any:
        return (await self.runtime()).registry

    def registry_sync(self) -> Any:
        return self.call(self.registry)

    # -- one tool, directly ---------------------------------------------------------------------------
    async def _run_tool(self, name: str, arguments_json: str, cancelled: asyncio.Event,
                        ask_permission: Callable[[Any], Awaitable[str]] | None,
                        on_event: Callable[[Any], None] | None = None) -> ToolRun:
        from ..agent.executor import ToolCallRequest, ToolExecutor
        from ..agent.tools.base import ToolContext
        from ..agent.tools.file_state import FileStateCache

        runtime = await self.runtime()
        # a fresh executor per call: its loop detector is for an agent repeating itself, while a
        # person re-running a cell means it
        executor = ToolExecutor(runtime.registry, runtime.permissions, runtime.hooks, self.config)
        events: list[Any] = []

        async def emit(event: Any) -> None:
            events.append(event)
            if on_event is not None:
                self._questions.put((on_event, event, None))  # shown live by the waiting kernel thread

        ctx = ToolContext(
            config=self.config, services=runtime.services, session_id=self.session_id or "",
            cancelled=cancelled, emit=emit, file_state=FileStateCache(), run_id="kernel",
            scope=runtime.tool_scope(self.session_id or "", "kernel"), ask_permission=ask_permission,
        )
        call_id = f"kernel_{next(self._ids)}"
        try:
            [done] = await executor.execute([ToolCallRequest(call_id, name, arguments_json)], ctx)
        finally:
            await runtime.services.release_run("kernel")  # a kernel notebook_run started lives for this call only
        return ToolRun(name, done.arguments, done.output.content, done.output.is_error,
                       dict(done.output.metadata), done.duration_ms, events)

    def run_tool(self, name: str, arguments: dict[str, Any] | str,
                 ask_permission: Callable[[Any], str] | None = None,
                 on_event: Callable[[Any], None] | None = None) -> ToolRun:
        """Run one tool through the executor (validation, permissions, hooks, audit)."""
        arguments_json = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
        cancelled_box: list[asyncio.Event] = []

        async def start() -> ToolRun:
            cancelled = asyncio.Event()
            cancelled_box.append(cancelled)
            asker = None
            if ask_permission is not None:
                async def asker(request: Any) -> str:  # answered on the kernel thread
                    return await asyncio.wrap_future(self._ask_on_kernel(ask_permission, request))
            return await self._run_tool(name, arguments_json, cancelled, asker, on_event)

        return self.call(start, on_interrupt=lambda: cancelled_box and cancelled_box[0].set())

    def _ask_on_kernel(self, fn: Callable[[Any], Any], request: Any) -> "concurrent.futures.Future[str]":
        """Questions raised on the loop are answered by the waiting kernel thread (input() lives there)."""
        future: concurrent.futures.Future[str] = concurrent.futures.Future()
        self._questions.put((fn, request, future))
        self._wake()
        return future

    def serve_questions(self) -> None:
        """Answer pending questions from the loop (permission prompts) on this thread."""
        while True:
            try:
                item = self._questions.get_nowait()
            except queue.Empty:
                return
            if isinstance(item, _Work):
                self._serve_work(item)
                continue
            fn, request, future = item
            if future is None:  # an event to show, not a question
                fn(request)
                continue
            try:
                future.set_result(fn(request))
            except BaseException as exc:  # noqa: BLE001 - includes KeyboardInterrupt at the prompt
                future.set_result("deny")
                if isinstance(exc, KeyboardInterrupt):
                    raise

    @staticmethod
    def _serve_work(work: _Work) -> None:
        if not work.future.set_running_or_notify_cancel():
            return
        try:
            work.future.set_result(work.fn(work.arg))
        except BaseException as exc:  # noqa: BLE001 - the tool gets the error; an interrupt also stops the cell
            work.future.set_exception(exc)
            if isinstance(exc, KeyboardInterrupt):
                raise

    # -- agent runs --------------------------------------------------------------------------------
    def start_run(self, prompt: str, **kwargs: Any) -> "RunHandle":
        async def start() -> Any:
            runtime = await self.runtime()
            return await runtime.start_run(prompt, **kwargs)

        return self.call(start)

    def stream_events(self, handle: "RunHandle") -> Iterator["Event"]:
        """Yield the run's events on the calling (kernel) thread as they happen."""
        box: "queue.Queue[Any]" = queue.Queue()

        async def pump() -> None:
            try:
                async for _, event in handle.events():
                    box.put(event)
            except BaseException as exc:  # noqa: BLE001 - handed to the kernel thread, raised there
                box.put(_Failed(exc))
            finally:
                box.put(_END)

        self.submit(pump())
        with self._watching(box):
            while True:
                self.serve_questions()  # kernel_inspect / kernel_run work runs here, on the main thread
                try:
                    item = box.get(timeout=_POLL_SECS)
                except queue.Empty:
                    continue
                if item is _WAKE:
                    continue
                if item is _END:
                    return
                if isinstance(item, _Failed):
                    raise item.error
                yield item

    def cancel_run(self, handle: "RunHandle") -> None:
        self._ensure_loop().call_soon_threadsafe(handle.cancel)

    def answer(self, handle: "RunHandle", request_id: str, answer: str) -> None:
        self._ensure_loop().call_soon_threadsafe(handle.answer, request_id, answer)

    def wait_run(self, handle: "RunHandle") -> Any:
        async def wait() -> Any:
            return await handle.wait()

        return self.call(wait, on_interrupt=handle.cancel)

    # -- shutdown ----------------------------------------------------------------------------------
    def close(self) -> None:
        if self._loop is None:
            return

        async def shutdown() -> None:
            if self._runtime is not None:
                await self._runtime.close()
            if self._services is not None:
                await self._services.close()

        try:
            self.submit(shutdown()).result(timeout=30)
        except Exception:  # noqa: BLE001 - closing is best effort
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._loop = self._thread = None
        self._services = self._runtime = None
