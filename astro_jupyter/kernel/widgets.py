"""Live timelines for ``%%astro``: ipywidgets in notebook kernels, plain text in terminals.

Both renderers take the run's events one at a time on the kernel thread (``show``) and
answer questions (``ask``). The widget renderer streams the answer text, a card per tool
call (arguments, progress bar, result), subagent sections, a Stop button, and question
cards with buttons / a text box; the text renderer prints the same timeline line by line
and asks with ``input()``.

A cell that waits for its run keeps the kernel's main shell busy, so widget clicks would
queue until the cell ends. ipykernel ≥ 7 has *subshells*: we create one (once per kernel)
and route our widgets' comm messages to it (``comm._reply_subshell_for``), so Stop and
answer buttons reach the kernel while the cell runs. Without subshell support there is no
Stop button (interrupt the kernel instead) and questions use ``input()``, which the
frontend shows as a text box even while the cell runs.
"""

from __future__ import annotations

import html
import sys
import threading
import time
from typing import Any, Callable, TextIO

from IPython.core.error import StdinNotImplementedError

from ..app.follow import permission_answer
from ..errors import QuestionUnanswered
from ..prompt_text import permission_lines, visible
from ..timeline_text import LinePrinter, short

InputFn = Callable[[str], str]
Router = Callable[[Any], None]
_TEXT_REFRESH_SECS = 0.1
_subshells: dict[int, str] = {}


def comm_router(shell: Any) -> Router | None:
    """A function routing a widget's frontend messages to our subshell, or None if unsupported."""
    kernel = getattr(shell, "kernel", None)
    thread = getattr(kernel, "shell_channel_thread", None)
    if kernel is None or thread is None or not getattr(kernel, "_supports_kernel_subshells", False):
        return None
    sid = _subshells.get(id(kernel))
    if sid is None:
        made: list[str] = []
        ready = threading.Event()

        def create() -> None:
            try:
                made.append(thread.manager._create_subshell())
            except Exception:  # noqa: BLE001 - see above
                pass
            finally:
                ready.set()

        try:
            thread.io_loop.add_callback(create)
        except Exception:  # noqa: BLE001 - private ipykernel API: fall back to input() and kernel interrupt
            return None
        if not ready.wait(5) or not made:
            return None
        sid = _subshells[id(kernel)] = made[0]

    def route(widget: Any) -> None:
        comm = getattr(widget, "comm", None)
        if comm is not None:
            comm._reply_subshell_for = lambda data, default: sid

    return route


def _input(prompt: str) -> str:
    return input(prompt)  # looked up at call time: IPython/ipykernel replace builtins.input


def always_covers(event: Any) -> str:
    """What "always" covers for a scoped question: one notebook, or the one value kernel_inspect would show."""
    if event.name.startswith("notebook_"):
        return "this notebook"
    return f"{visible(short(str(event.scope), 60))} only"


def ask_text(event: Any, input_fn: InputFn = _input) -> str:
    """One question on stdin; permission prompts map y/always, anything else denies.

    The request itself (every argument in full) is on screen already: the timeline printed
    it, or the caller did (``print_permission``); the input line only names the tool.
    """
    if event.type == "permission_request":
        always = f"always ({always_covers(event)})" if getattr(event, "scope", "") else "always"
        try:
            reply = input_fn(f"Allow {visible(event.name)}? [y/N/{always}] ")
        except (EOFError, StdinNotImplementedError):  # no one can answer here: no consent, and no "deny" either
            raise QuestionUnanswered("this kernel has no input to answer with") from None
        return permission_answer(reply)
    options = f" ({' / '.join(visible(str(o)) for o in event.options)})" if getattr(event, "options", None) else ""
    return input_fn(f"{visible(event.question, keep=chr(10))}{options}: ")


def print_permission(event: Any, width: int | None = None, out: TextIO | None = None) -> None:
    """Print a permission request in full (for callers without a timeline, e.g. ``%astro TOOL``)."""
    print("\n".join(permission_lines(event, width)), file=out or sys.stdout, flush=True)


class TextTimeline(LinePrinter):
    """Terminal IPython (or no ipywidgets): the timeline as printed lines."""

    def __init__(self, out: TextIO | None = None, input_fn: InputFn = _input, width: int | None = None,
                 display_fn: Callable[..., Any] | None = None) -> None:
        super().__init__(out or sys.stdout, width)
        self.input_fn = input_fn
        self.display_fn = display_fn  # a notebook kernel (text lines by choice or unattended): the answer as Markdown too

    def show(self, event: Any) -> None:
        if self._show_common(event):
            return
        kind = event.type
        if kind == "text_delta":
            if not event.subagent_id:
                self._stream(event.delta)
        elif kind == "ask_user":
            self._line(f"? {visible(event.question, keep=chr(10))}")
        elif kind == "error":
            self._line(f"{'note' if event.reason == 'notice' else 'error'}: {visible(event.message, keep=chr(10))}")

    def ask(self, event: Any, timeout: float | None = None) -> str:
        return ask_text(event, self.input_fn)

    def finish(self, reason: str, session_id: str, answer: str = "") -> None:
        """The answer was printed as it streamed; the closing line says how the run ended. In a notebook
        the answer is also the cell's Markdown output, so the saved file (nbconvert --execute, papermill)
        shows it rendered."""
        self._line(f"[{reason} · session {session_id}]" if session_id else f"[{reason}]")
        if self.display_fn is not None and answer.strip():
            self.display_fn({"text/markdown": answer, "text/plain": answer}, raw=True)


class WidgetTimeline:
    """Notebook kernels: an ipywidgets view updated in place as events arrive."""

    def __init__(self, display_fn: Callable[[Any], Any], input_fn: InputFn = _input, *,
                 route: Router | None = None, on_stop: Callable[[], None] | None = None) -> None:
        import ipywidgets as w

        self.w = w
        self.display_fn = display_fn
        self.input_fn = input_fn
        self.route = route
        self.on_stop = on_stop
        self.stopped = threading.Event()
        self._answered = threading.Event()
        self.status = w.HTML("<b>astro</b> · running — interrupt the kernel (■) to stop")
        self.text = w.HTML("")
        self.cards = w.VBox([])
        header: list[Any] = [self.status]
        self.stop_button: Any = None
        if route is not None and on_stop is not None:
            self.status.value = "<b>astro</b> · running"
            self.stop_button = w.Button(description="Stop", icon="stop", button_style="danger",
                                        layout=w.Layout(width="auto"))
            self.stop_button.on_click(lambda _b: self.stop())
            header.append(self.stop_button)
        self.box = w.VBox([w.HBox(header), self.cards, self.text])
        self._text = ""
        self._last_flush = 0.0
        self._tools: dict[str, Any] = {}
        self._subagents: dict[str, Any] = {}
        self._preparing: Any = None  # the "preparing <tool>…" line of the call being written
        display_fn(self.box)
        if self.stop_button is not None and route is not None:
            route(self.stop_button)

    def stop(self) -> None:
        """The Stop button (arrives on the subshell thread): cancel the run, release a waiting question."""
        if self.stopped.is_set():
            return
        self.stopped.set()
        self._answered.set()
        if self.on_stop is not None:
            self.on_stop()
        self.status.value = "<b>astro</b> · stopping…"

    # -- pieces -------------------------------------------------------------------------------------
    def _container(self, subagent_id: str | None) -> Any:
        if subagent_id and subagent_id in self._subagents:
            return self._subagents[subagent_id]
        return self.cards

    def _append(self, parent: Any, widget: Any) -> None:
        parent.children = (*parent.children, widget)

    def _flush_text(self, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self._last_flush >= _TEXT_REFRESH_SECS:
            self.text.value = f"<div style='white-space:pre-wrap'>{html.escape(visible(self._text, keep=chr(10) + chr(9)))}</div>"
            self._last_flush = now

    def _drop_preparing(self) -> None:
        if self._preparing is not None:
            self._preparing.layout.display = "none"
            self._preparing = None

    def _card(self, title: str, body: str = "") -> Any:
        return self.w.HTML(
            "<div style='border:1px solid #ccc;border-radius:4px;padding:4px 8px;margin:2px 0'>"
            f"{title}{body}</div>"
        )

    # -- events -------------------------------------------------------------------------------------
    def show(self, event: Any) -> None:
        kind = event.type
        sub = getattr(event, "subagent_id", None)
        if kind == "text_delta" and not sub:
            self._text += event.delta
            self._flush_text()
        elif kind == "tool_call":
            self._drop_preparing()
            args = html.escape(short(event.arguments, 300))
            card = self._card(f"⏳ <code>{html.escape(short(event.name, 80))}</code> <small>{args}</small>")
            bar = self.w.IntProgress(value=0, min=0, max=1, layout=self.w.Layout(display="none", width="60%"))
            group = self.w.VBox([card, bar])
            self._tools[event.id] = (card, bar, event.name, args)
            self._append(self._container(sub), group)
        elif kind == "tool_progress" and event.id in self._tools:
            _, bar, _, _ = self._tools[event.id]
            p = event.progress
            if p.get("total"):
                bar.max = int(p["total"])
                bar.value = int(p.get("done") or 0)
                bar.description = short(p.get("message", ""), 20)
                bar.layout.display = ""
        elif kind == "tool_result" and event.tool_call_id in self._tools:
            card, bar, name, args = self._tools[event.tool_call_id]
            mark = "✗" if event.is_error else "✓"
            bar.layout.display = "none"
            card.value = self._card(
                f"{mark} <code>{html.escape(short(name, 80))}</code> <small>{args} · {event.duration_ms} ms</small>",
                f"<details><summary>{html.escape(short(event.output, 120))}</summary>"
                f"<pre style='white-space:pre-wrap'>{html.escape(visible(event.output[:20000], keep=chr(10) + chr(9)))}</pre>"
                "</details>",
            ).value
        elif kind == "subagent":
            if event.phase == "start":
                section = self.w.VBox([self.w.HTML(f"<b>Subagent</b> <small>{html.escape(short(event.task))}</small>")],
                                      layout=self.w.Layout(margin="0 0 0 24px"))
                self._subagents[event.id] = section
                self._append(self.cards, section)
            elif event.id in self._subagents:
                self._append(self._subagents[event.id],
                             self.w.HTML(f"<small>summary: {html.escape(short(event.summary, 400))}</small>"))
        elif kind == "permission_request":  # in full, scrollable: what is allowed is what runs
            shown = html.escape("\n".join(permission_lines(event, header=False)))  # the title names the tool
            self._append(self.cards, self._card(
                f"❓ Permission for <code>{html.escape(visible(event.name))}</code>",
                "<pre class='astro-permission' style='white-space:pre-wrap;word-break:break-all;max-height:24em;"
                f"overflow:auto;margin:4px 0'>{shown}</pre><small>{self._answer_hint(kind)}</small>"))
        elif kind == "ask_user":
            self._append(self.cards, self._card(f"❓ {html.escape(visible(event.question, keep=chr(10)))}",
                                                f"<br><small>{self._answer_hint(kind)}</small>"))
        elif kind == "tool_call_preparing":  # one calm line, updated in place until the call arrives
            line = f"<small>… preparing <code>{html.escape(short(event.name, 80))}</code> ({event.chars:,} characters)</small>"
            if self._preparing is None:
                self._preparing = self.w.HTML(line)
                self._append(self._container(sub), self._preparing)
            else:
                self._preparing.value = line
        elif kind == "truncated":
            self._append(self._container(sub), self.w.HTML(
                f"<span style='color:#8a5a00'>cut off: {html.escape(visible(event.message))}</span>"))
        elif kind == "model_switch":
            self._append(self.cards, self.w.HTML(f"<small>model {html.escape(short(event.from_model))} → "
                                                 f"{html.escape(short(event.to_model))}</small>"))
        elif kind == "error" and event.reason == "notice":
            self._append(self.cards, self.w.HTML(f"<span style='color:#8a5a00'>note: {html.escape(visible(event.message))}</span>"))
        elif kind == "error":
            self._append(self.cards, self.w.HTML(f"<span style='color:#b00020'>error: {html.escape(visible(event.message))}</span>"))

    def _answer_hint(self, kind: str) -> str:
        """Where the answer goes: ``ask`` shows buttons when routed, else the frontend's input box."""
        if self.route is None:
            return "answer in the input box below"
        return "answer with the buttons below" if kind == "permission_request" else "answer with a button or the text box below"

    def ask(self, event: Any, timeout: float | None = None) -> str:
        """Buttons (and a text box for free answers) when routed; ``input()`` otherwise.

        After ``timeout`` seconds (the run's own wait) the buttons are withdrawn: a permission
        nobody answered is denied, a question gets no answer."""
        if self.route is None:
            return ask_text(event, self.input_fn)
        w = self.w
        chosen: list[str] = []
        self._answered.clear()

        def pick(value: str) -> Callable[[Any], None]:
            def handler(_b: Any) -> None:
                if not chosen:
                    chosen.append(value)
                    self._answered.set()
            return handler

        if event.type == "permission_request":
            always = f"Always allow ({always_covers(event)})" if getattr(event, "scope", "") else "Always allow"
            if getattr(event, "scope", "") and event.name.startswith("notebook_"):
                always = "Allow for this notebook"
            labels = [("Allow", "allow"), (always, "always"), ("Deny", "deny")]
            buttons = [w.Button(description=label, layout=w.Layout(width="auto")) for label, _ in labels]
            for button, (_, value) in zip(buttons, labels):
                button.on_click(pick(value))
            controls: list[Any] = buttons
            text_box = None
        else:
            buttons = [w.Button(description=visible(str(o)), layout=w.Layout(width="auto")) for o in event.options]
            for button, option in zip(buttons, event.options):
                button.on_click(pick(option))
            text_box = w.Text(placeholder="your answer", layout=w.Layout(width="50%"))
            send = w.Button(description="Send", button_style="primary", layout=w.Layout(width="auto"))
            send.on_click(lambda _b: pick(text_box.value)(_b))
            buttons.append(send)
            controls = [*buttons[:-1], text_box, send]
        row = w.HBox(controls)
        self._append(self.cards, row)
        for widget in controls:
            self.route(widget)
        deadline = None if not timeout else time.monotonic() + timeout
        while not self._answered.wait(0.05):  # a kernel interrupt lands here as KeyboardInterrupt
            if deadline is not None and time.monotonic() >= deadline:
                break
        for button in buttons:
            button.disabled = True
        if text_box is not None:
            text_box.disabled = True
        if not chosen:
            waited = f"within {timeout:g} s" if timeout else "in time"
            self._append(self.cards, w.HTML(f"<small>no answer {waited}: the question was withdrawn</small>"))
            if event.type == "permission_request":  # refused, and said so: not a "deny" nobody clicked
                raise QuestionUnanswered(f"no answer {waited}; the buttons were withdrawn")
            return ""
        self._append(self.cards, w.HTML(f"<small>answered: {html.escape(visible(chosen[0]))}</small>"))
        return chosen[0]

    def finish(self, reason: str, session_id: str, answer: str = "") -> None:
        """The run ended. The final answer leaves the widget for a ``text/markdown`` output of its own:
        a widget's state is not in a saved notebook, so GitHub, ``nbconvert --to markdown`` and an
        agent reading the file would otherwise see ``VBox(children=…)`` instead of the answer."""
        if self.stop_button is not None:  # nothing left to stop: the button goes
            self.stop_button.disabled = True
            self.stop_button.layout.display = "none"
        self._drop_preparing()
        where = f" · session <code>{html.escape(session_id)}</code>" if session_id else ""
        self.status.value = f"<b>astro</b> · {html.escape(reason)}{where}"
        if answer.strip():
            self.text.layout.display = "none"
            self.display_fn({"text/markdown": answer, "text/plain": answer}, raw=True)
        else:
            self._flush_text(force=True)


def make_timeline(shell: Any, *, force_text: bool = False, on_stop: Callable[[], None] | None = None,
                  width: int | None = None) -> Any:
    """Widgets when the shell is a notebook kernel and ipywidgets imports; text otherwise
    (permission prompts wrapped at ``width`` columns)."""
    if not force_text and getattr(shell, "kernel", None) is not None:
        try:
            from IPython.display import display

            return WidgetTimeline(display, route=comm_router(shell), on_stop=on_stop)
        except ImportError:
            pass
    if getattr(shell, "kernel", None) is not None:
        from IPython.display import display

        return TextTimeline(width=width, display_fn=display)
    return TextTimeline(width=width)
