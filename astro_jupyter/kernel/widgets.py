"""Live timelines for ``%%astro``: ipywidgets in notebook kernels, plain text in terminals.

Both renderers take the run's events one at a time on the kernel thread (``show``) and
answer questions (``ask``). The widget renderer streams the answer text, a card per tool
call (arguments, progress bar, result), subagent sections and question cards; the text
renderer prints the same timeline line by line. Questions are answered through
``input()``: in a notebook kernel that is the frontend's stdin box, which — unlike widget
buttons — still reaches a kernel that is busy running the cell. To stop a run, interrupt
the kernel (■ / Ctrl-C): the run is cancelled cleanly.
"""

from __future__ import annotations

import html
import json
import sys
import time
from typing import Any, Callable, TextIO

InputFn = Callable[[str], str]
_TEXT_REFRESH_SECS = 0.1


def _short(value: Any, limit: int = 160) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def permission_answer(reply: str) -> str:
    return {"y": "allow", "yes": "allow", "allow": "allow", "a": "always", "always": "always"}.get(
        reply.strip().lower(), "deny"
    )


def _input(prompt: str) -> str:
    return input(prompt)  # looked up at call time: IPython/ipykernel replace builtins.input


def ask_text(event: Any, input_fn: InputFn = _input) -> str:
    """One question on stdin; permission prompts map y/always, anything else denies."""
    if event.type == "permission_request":
        reply = input_fn(f"Allow {event.name}? {event.message} [y/N/always] ")
        return permission_answer(reply)
    options = f" ({' / '.join(event.options)})" if getattr(event, "options", None) else ""
    return input_fn(f"{event.question}{options}: ")


class TextTimeline:
    """Terminal IPython (or no ipywidgets): the timeline as printed lines."""

    def __init__(self, out: TextIO | None = None, input_fn: InputFn = _input) -> None:
        self.out = out or sys.stdout
        self.input_fn = input_fn
        self.mid_line = False

    def _line(self, text: str) -> None:
        if self.mid_line:
            self.out.write("\n")
            self.mid_line = False
        self.out.write(text + "\n")
        self.out.flush()

    def show(self, event: Any) -> None:
        indent = "    " if getattr(event, "subagent_id", None) else ""
        kind = event.type
        if kind == "text_delta":
            if not event.subagent_id:
                self.out.write(event.delta)
                self.out.flush()
                self.mid_line = not event.delta.endswith("\n")
        elif kind == "tool_call":
            self._line(f"{indent}→ {event.name}({_short(event.arguments, 120)})")
        elif kind == "tool_progress":
            p = event.progress
            count = f" {p.get('done')}/{p.get('total')}" if p.get("done") is not None and p.get("total") else ""
            self._line(f"{indent}  …{count} {p.get('message', '')}".rstrip())
        elif kind == "tool_result":
            mark = "✗" if event.is_error else "←"
            self._line(f"{indent}{mark} {event.name} ({event.duration_ms} ms): {_short(event.output)}")
        elif kind == "subagent":
            what = event.task if event.phase == "start" else event.summary
            self._line(f"{indent}[subagent {event.id} {event.phase}] {_short(what)}")
        elif kind == "model_switch":
            self._line(f"[model switched {event.from_model} → {event.to_model}: {event.reason}]")
        elif kind == "compaction":
            self._line(f"[context compacted: {event.message or event.layer}]")
        elif kind == "todo_update":
            for todo in event.todos:
                self._line(f"  [{todo.get('status', ' ')}] {todo.get('content', todo)}")
        elif kind == "ask_user":
            self._line(f"? {event.question}")
        elif kind == "permission_request":
            self._line(f"? permission for {event.name}: {event.message}")
        elif kind == "error":
            self._line(f"error: {event.message}")

    def ask(self, event: Any) -> str:
        return ask_text(event, self.input_fn)

    def finish(self, reason: str, session_id: str) -> None:
        self._line(f"[{reason} · session {session_id}]")


class WidgetTimeline:
    """Notebook kernels: an ipywidgets view updated in place as events arrive."""

    def __init__(self, display_fn: Callable[[Any], Any], input_fn: InputFn = _input) -> None:
        import ipywidgets as w

        self.w = w
        self.input_fn = input_fn
        self.status = w.HTML("<b>astro</b> · running — interrupt the kernel (■) to stop")
        self.text = w.HTML("")
        self.cards = w.VBox([])
        self.box = w.VBox([self.status, self.cards, self.text])
        self._text = ""
        self._last_flush = 0.0
        self._tools: dict[str, Any] = {}
        self._subagents: dict[str, Any] = {}
        display_fn(self.box)

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
            self.text.value = f"<div style='white-space:pre-wrap'>{html.escape(self._text)}</div>"
            self._last_flush = now

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
            args = html.escape(_short(event.arguments, 300))
            card = self._card(f"⏳ <code>{html.escape(event.name)}</code> <small>{args}</small>")
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
                bar.description = _short(p.get("message", ""), 20)
                bar.layout.display = ""
        elif kind == "tool_result" and event.tool_call_id in self._tools:
            card, bar, name, args = self._tools[event.tool_call_id]
            mark = "✗" if event.is_error else "✓"
            bar.layout.display = "none"
            card.value = self._card(
                f"{mark} <code>{html.escape(name)}</code> <small>{args} · {event.duration_ms} ms</small>",
                f"<details><summary>{html.escape(_short(event.output, 120))}</summary>"
                f"<pre style='white-space:pre-wrap'>{html.escape(event.output[:20000])}</pre></details>",
            ).value
        elif kind == "subagent":
            if event.phase == "start":
                section = self.w.VBox([self.w.HTML(f"<b>Subagent</b> <small>{html.escape(_short(event.task))}</small>")],
                                      layout=self.w.Layout(margin="0 0 0 24px"))
                self._subagents[event.id] = section
                self._append(self.cards, section)
            elif event.id in self._subagents:
                self._append(self._subagents[event.id],
                             self.w.HTML(f"<small>summary: {html.escape(_short(event.summary, 400))}</small>"))
        elif kind in ("ask_user", "permission_request"):
            what = (f"Permission for <code>{html.escape(event.name)}</code>: {html.escape(event.message)}"
                    if kind == "permission_request" else html.escape(event.question))
            self._append(self.cards, self._card(f"❓ {what}", "<br><small>answer in the input box below</small>"))
        elif kind == "model_switch":
            self._append(self.cards, self.w.HTML(f"<small>model {event.from_model} → {event.to_model}</small>"))
        elif kind == "error":
            self._append(self.cards, self.w.HTML(f"<span style='color:#b00020'>error: {html.escape(event.message)}</span>"))

    def ask(self, event: Any) -> str:
        return ask_text(event, self.input_fn)

    def finish(self, reason: str, session_id: str) -> None:
        self._flush_text(force=True)
        self.status.value = f"<b>astro</b> · {html.escape(reason)} · session <code>{html.escape(session_id)}</code>"


def make_timeline(shell: Any, *, force_text: bool = False) -> Any:
    """Widgets when the shell is a notebook kernel and ipywidgets imports; text otherwise."""
    if not force_text and getattr(shell, "kernel", None) is not None:
        try:
            from IPython.display import display

            return WidgetTimeline(display)
        except ImportError:
            pass
    return TextTimeline()
