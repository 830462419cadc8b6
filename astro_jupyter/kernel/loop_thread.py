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
import queue
import threading
import time
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterator, TypeVar

from ..errors import QuestionUnanswered, RunInterrupted
from ..background_loop import BackgroundLoop

if TYPE_CHECKING:
    from pathlib import Path

    from ..agent.run import RunHandle
    from ..app import AstroApp
    from ..services.container import Tuning
    from ..app.follow import Question
    from ..app.tools import ToolRun
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


class _Question:
    """A run's question for the kernel thread, queued in order with the events that precede it."""

    def __init__(self, fn: Callable[[Any], str], event: Any, future: "concurrent.futures.Future[str]") -> None:
        self.fn, self.event, self.future = fn, event, future


class _KernelAnswerer:
    """The app's ``Answerer`` for the kernel: the question is answered on the kernel thread (input() and
    the widgets live there) by ``ask``, through ``put`` (the queue the waiting kernel thread serves)."""

    def __init__(self, ask: Callable[[Any], str], put: Callable[[_Question], None]) -> None:
        self.ask, self.put = ask, put

    async def answer(self, question: "Question") -> str:
        future: concurrent.futures.Future[str] = concurrent.futures.Future()
        self.put(_Question(self.ask, question, future))
        return await asyncio.wrap_future(future)


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
        self._worker = BackgroundLoop("astro-jupyter-loop")
        self._app: "AstroApp | None" = None
        self.tuning: "Tuning | None" = None  # internal tuning for the app (tests set it before the first use)
        # work for the waiting kernel thread: (fn, arg, future) questions, or (fn, event, None) to show
        self._questions: "queue.Queue[Any]" = queue.Queue()
        self._boxes: set["queue.Queue[Any]"] = set()  # main-thread waits to wake when work arrives
        self._boxes_lock = threading.Lock()

    # -- the loop thread -------------------------------------------------------------------------
    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        return self._worker.loop()

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

    # -- the application layer (built lazily on the loop) ---------------------------------------------
    async def app(self) -> "AstroApp":
        """This kernel's ``AstroApp``: the store, and a runtime whose tools include kernel_inspect / kernel_run."""
        if self._app is None:
            from ..app import AstroApp

            app = AstroApp(self.config, runtime_factory=self._make_runtime, source="kernel", tuning=self.tuning)
            await app.start()
            own = own_notebook(self.shell)
            if own is not None:
                app.services.notebooks.protect(own, OWN_NOTEBOOK)
            self._app = app
        return self._app

    async def services(self) -> Any:
        return (await self.app()).services

    async def runtime(self) -> Any:
        return (await self.app()).runtime

    def _make_runtime(self, services: Any) -> Any:
        from ..agent.runtime import AgentRuntime

        return AgentRuntime(services, registry=self._registry())

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
        return (await self.app()).tool_registry()

    def registry_sync(self) -> Any:
        return self.call(self.registry)

    # -- one tool, directly ---------------------------------------------------------------------------
    def run_tool(self, name: str, arguments: dict[str, Any] | str,
                 ask_permission: Callable[[Any], str] | None = None,
                 on_event: Callable[[Any], None] | None = None, unattended: Any = None) -> "ToolRun":
        """Run one tool through the app (validation, permissions, hooks, audit); ``ask_permission`` and
        ``on_event`` run on the kernel thread."""
        cancelled_box: list[asyncio.Event] = []

        async def start() -> "ToolRun":
            cancelled = asyncio.Event()
            cancelled_box.append(cancelled)
            app = await self.app()
            answerer = None
            if ask_permission is not None:
                answerer = _KernelAnswerer(ask_permission, self._put_question)
            def shown(event: Any) -> None:
                self._questions.put((on_event, event, None))  # shown live by the waiting kernel thread
            return await app.run_tool(name, arguments, answerer=answerer, on_event=shown if on_event is not None else None, cancelled=cancelled,
                                      session_id=self.session_id or "", run_id="kernel", unattended=unattended)

        return self.call(start, on_interrupt=lambda: cancelled_box and cancelled_box[0].set())

    def _put_question(self, question: _Question) -> None:
        self._questions.put(question)
        self._wake()

    def serve_questions(self) -> None:
        """Answer pending questions from the loop (permission prompts) on this thread."""
        while True:
            try:
                item = self._questions.get_nowait()
            except queue.Empty:
                return
            if isinstance(item, _Work):
                self._serve_work(item)
            elif isinstance(item, _Question):
                self._serve_question(item)
            else:
                fn, event, _ = item
                fn(event)  # an event to show

    @staticmethod
    def _serve_question(question: _Question, *, reraise: bool = False) -> None:
        """Ask on this thread; a prompt that fails (or is interrupted) refuses, and an interrupt goes on.
        With ``reraise`` (a run's question) the error goes on instead of an answer: the cell stops the
        run and shows it. No refusal is posted then, or the run could act on "no answer" before the
        cancel reached it."""
        from ..app.follow import NO_ANSWER

        try:
            question.future.set_result(question.fn(question.event))
        except QuestionUnanswered as exc:  # no one answered (no input, buttons withdrawn): a refusal that says so
            question.future.set_exception(exc)
        except BaseException as exc:  # noqa: BLE001 - includes KeyboardInterrupt at the prompt
            if reraise:
                question.future.cancel()  # withdrawn: the run ends cancelled, still waiting for it
                raise
            if question.event.type != "permission_request":
                question.future.set_result(NO_ANSWER)
            elif isinstance(exc, KeyboardInterrupt):
                question.future.set_exception(QuestionUnanswered("the question was interrupted before an answer"))
            else:
                question.future.set_exception(QuestionUnanswered(f"the question could not be shown ({type(exc).__name__}: {exc})"))
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
    def start_run(self, prompt: str, *, session_id: str | None = None, model: str | None = None,
                  max_steps: int | None = None, coordinator: bool = False, unattended: Any = None) -> "RunHandle":
        """Start a run through the app (prompt rules, session's coordinator mode unless ``coordinator``)."""
        async def start() -> Any:
            app = await self.app()
            return await app.start_run_handle(None, prompt, session_id=session_id, model=model, max_steps=max_steps,
                                              coordinator=True if coordinator else None, unattended=unattended)

        return self.call(start)

    def stream_events(self, handle: "RunHandle", ask: Callable[[Any], str] | None = None) -> Iterator["Event"]:
        """Yield the run's events on the calling (kernel) thread as they happen (``app.follow``); each
        question is answered by ``ask`` on this thread, after the event that shows it."""
        from ..app.follow import follow

        box: "queue.Queue[Any]" = queue.Queue()
        answerer = _KernelAnswerer(ask, box.put) if ask is not None else None

        async def pump() -> None:
            try:
                async for event in follow(handle, answerer):
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
                if isinstance(item, _Question):
                    self._serve_question(item, reraise=True)
                    continue
                yield item

    def cancel_run(self, handle: "RunHandle") -> None:
        self._ensure_loop().call_soon_threadsafe(handle.cancel)

    def wait_run(self, handle: "RunHandle") -> Any:
        async def wait() -> Any:
            return await handle.wait()

        return self.call(wait, on_interrupt=handle.cancel)

    # -- shutdown ----------------------------------------------------------------------------------
    def close(self) -> None:
        if not self._worker.started:
            return

        async def shutdown() -> None:
            if self._app is not None:
                await self._app.close()

        try:
            self.submit(shutdown()).result(timeout=30)
        except Exception:  # noqa: BLE001 - closing is best effort
            pass
        self._worker.stop()
        self._app = None
