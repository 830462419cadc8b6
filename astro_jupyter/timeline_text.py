"""Plain-text lines for a run's timeline, shared by the CLI and the kernel's text timeline.

Both surfaces print the same one-line summaries for tool calls, progress, results,
subagents, model switches, compactions and todo lists; only streamed text, questions,
errors and the end of a run differ per surface, so those stay with each caller.
"""

from __future__ import annotations

import json
from typing import Any, TextIO


def short(value: Any, limit: int = 160) -> str:
    """One line of at most ``limit`` characters (JSON for non-strings, whitespace folded)."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def event_lines(event: Any) -> list[str] | None:
    """The printed lines for the event kinds every text surface shows alike; None for the rest."""
    indent = "    " if getattr(event, "subagent_id", None) else ""
    kind = event.type
    if kind == "tool_call":
        return [f"{indent}→ {event.name}({short(event.arguments, 120)})"]
    if kind == "tool_progress":
        p = event.progress
        done, total = p.get("done"), p.get("total")
        count = f" {done}/{total}" if done is not None and total else ""
        return [f"{indent}  …{count} {p.get('message', '')}".rstrip()]
    if kind == "tool_result":
        mark = "✗" if event.is_error else "←"
        return [f"{indent}{mark} {event.name} ({event.duration_ms} ms): {short(event.output)}"]
    if kind == "subagent":
        what = event.task if event.phase == "start" else event.summary
        return [f"{indent}[subagent {event.id} {event.phase}] {short(what)}"]
    if kind == "model_switch":
        return [f"[model switched {event.from_model} → {event.to_model}: {event.reason}]"]
    if kind == "compaction":
        return [f"[context compacted: {event.message or event.layer}]"]
    if kind == "todo_update":
        return [f"  [{todo.get('status', ' ')}] {todo.get('content', todo)}" for todo in event.todos]
    if kind == "permission_request":
        return [f"? permission for {event.name}: {event.message}"]
    return None


class LinePrinter:
    """Writes whole lines to ``out``, first ending a line that streamed text left open."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.mid_line = False

    def _line(self, text: str) -> None:
        if self.mid_line:
            self.out.write("\n")
            self.mid_line = False
        self.out.write(text + "\n")
        self.out.flush()

    def _stream(self, delta: str) -> None:
        self.out.write(delta)
        self.out.flush()
        self.mid_line = not delta.endswith("\n")

    def _show_common(self, event: Any) -> bool:
        """Print the shared lines for ``event``; False if the caller must render it itself."""
        lines = event_lines(event)
        if lines is None:
            return False
        for line in lines:
            self._line(line)
        return True
