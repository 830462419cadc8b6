"""Plain-text lines for a run's timeline, shared by the CLI and the kernel's text timeline.

Both surfaces print the same one-line summaries for tool calls, progress, results,
subagents, model switches, compactions and todo lists; only streamed text, questions,
errors and the end of a run differ per surface, so those stay with each caller.
"""

from __future__ import annotations

import json
from typing import Any, TextIO

from .prompt_text import permission_lines, visible

PREPARING_LINE_CHARS = 2_000  # a long tool call being written gets a new text line per this many characters


def short(value: Any, limit: int = 160) -> str:
    """One line of at most ``limit`` characters (JSON for non-strings, whitespace folded,
    control and bidi characters shown as escapes so a summary cannot act on the terminal)."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = visible(" ".join(text.split()))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def event_lines(event: Any, width: int | None = None) -> list[str] | None:
    """The printed lines for the event kinds every text surface shows alike; None for the rest."""
    indent = "    " if getattr(event, "subagent_id", None) else ""
    kind = event.type
    if kind == "tool_call":
        return [f"{indent}→ {short(event.name, 80)}({short(event.arguments, 120)})"]
    if kind == "tool_progress":
        p = event.progress
        done, total = p.get("done"), p.get("total")
        count = f" {done}/{total}" if done is not None and total else ""
        return [f"{indent}  …{count} {short(p.get('message', ''), 400)}".rstrip()]
    if kind == "tool_result":
        mark = "✗" if event.is_error else "←"
        return [f"{indent}{mark} {short(event.name, 80)} ({event.duration_ms} ms): {short(event.output)}"]
    if kind == "subagent":
        what = event.task if event.phase == "start" else event.summary
        return [f"{indent}[subagent {short(event.id, 60)} {event.phase}] {short(what)}"]
    if kind == "model_switch":
        return [f"[model switched {short(event.from_model)} → {short(event.to_model)}: {short(event.reason)}]"]
    if kind == "compaction":
        return [f"[context compacted: {short(event.message or event.layer, 400)}]"]
    if kind == "truncated":
        return [f"{indent}[cut off: {short(event.message, 400)}]"]
    if kind == "tool_call_preparing":
        return [f"{indent}… preparing {short(event.name, 80)} ({event.chars:,} characters of arguments so far)"]
    if kind == "todo_update":
        return [f"  [{short(todo.get('status', ' '))}] {short(todo.get('content', todo), 400)}" for todo in event.todos]
    if kind == "permission_request":
        return permission_lines(event, width)  # in full: what the person allows is what runs
    return None


class LinePrinter:
    """Writes whole lines to ``out``, first ending a line that streamed text left open.

    Streamed model text keeps its line breaks and tabs; every other control or bidi
    character is written as an escape, so the text cannot erase or disguise a prompt.
    """

    def __init__(self, out: TextIO, width: int | None = None) -> None:
        self.out = out
        self.width = width  # permission prompts wrap at this many columns (None: no wrapping)
        self.mid_line = False
        self._preparing: dict[tuple[Any, ...], int | None] = {}  # call being written → characters last printed

    def _preparing_news(self, event: Any) -> bool:
        """A call being written is printed once it is slow to arrive (its second report, a second or more
        after its name), then every PREPARING_LINE_CHARS more: the sidebar updates one line in place, a
        terminal would keep a line for every quick call and scroll one a second for a slow one."""
        key = (event.subagent_id, event.step, event.index)
        if key not in self._preparing:
            self._preparing[key] = None  # its name arrived: most calls follow at once, nothing to say
            return False
        last = self._preparing[key]
        if last is not None and event.chars < last + PREPARING_LINE_CHARS:
            return False
        self._preparing[key] = event.chars
        return True

    def _line(self, text: str) -> None:
        if self.mid_line:
            self.out.write("\n")
            self.mid_line = False
        self.out.write(text + "\n")
        self.out.flush()

    def _stream(self, delta: str) -> None:
        self.out.write(visible(delta, keep="\n\t"))
        self.out.flush()
        self.mid_line = not delta.endswith("\n")

    def _show_common(self, event: Any) -> bool:
        """Print the shared lines for ``event``; False if the caller must render it itself."""
        if event.type == "tool_call_preparing" and not self._preparing_news(event):
            return True
        lines = event_lines(event, self.width)
        if lines is None:
            return False
        for line in lines:
            self._line(line)
        return True
