"""A run's events and questions on a terminal: the timeline printer and the terminal answerer."""

from __future__ import annotations

import asyncio
import pydoc
import shutil
import sys
from typing import TextIO

from ..app.follow import Question, permission_answer
from ..errors import QuestionUnanswered
from ..events import Event
from ..prompt_text import permission_lines, visible
from ..timeline_text import LinePrinter
from .registry import err

CLI_NO_ANSWER = "(no answer: the question was asked in a non-interactive CLI)"


class TimelinePrinter(LinePrinter):
    """Human-readable rendering of a run's events for a terminal.

    Model and tool text never reaches the terminal raw (``prompt_text.visible``), and a
    permission request is printed in full, wrapped at the terminal width; one taller than
    the terminal goes through the pager first, so no part of it scrolls away unseen.
    """

    def __init__(self, out: TextIO = sys.stdout, width: int | None = None) -> None:
        super().__init__(out, width if width is not None else shutil.get_terminal_size().columns)

    def show(self, event: Event) -> None:
        if event.type == "permission_request" and self.out.isatty():
            lines = permission_lines(event, self.width)
            if len(lines) > shutil.get_terminal_size().lines - 2:
                pydoc.pager("\n".join(lines))
                self._line(f"? permission for {visible(event.name)}: {len(lines)} lines shown in the pager above")  # type: ignore[attr-defined]
                return
        if self._show_common(event):
            return
        kind = event.type
        if kind == "text_delta":
            self._stream(event.delta)  # type: ignore[attr-defined]
        elif kind == "thinking_delta":
            shown = visible(event.delta, keep="\n\t")  # type: ignore[attr-defined]
            self.out.write(f"\x1b[2m{shown}\x1b[0m" if self.out.isatty() else "")
        elif kind == "ask_user":
            self._line(f"? {visible(event.question, keep=chr(10))} (answer from the sidebar or a notebook; the CLI cannot answer)")  # type: ignore[attr-defined]
        elif kind == "error":
            if self.mid_line:
                self._line("")
            label = "note" if event.reason == "notice" else "error"  # type: ignore[attr-defined]
            err(f"{label}: {visible(event.message, keep=chr(10))}")  # type: ignore[attr-defined]
        elif kind == "done":
            if self.mid_line:
                self._line("")
            print(f"[{event.reason} · session {event.session_id}]", file=sys.stderr, flush=True)  # type: ignore[attr-defined]


class TerminalAnswerer:
    """Questions are asked on the terminal when there is one; a script gets an immediate refusal.

    ``show`` prints the question first (a direct tool call has no timeline that already did)."""

    def __init__(self, *, interactive: bool, show: TimelinePrinter | None = None) -> None:
        self.interactive = interactive
        self.show = show

    async def answer(self, question: Question) -> str:
        if self.show is not None:
            self.show.show(question)
        if not self.interactive:
            if question.type == "permission_request":
                err(f"denied {visible(question.name)}: a non-interactive CLI cannot grant permission")
                raise QuestionUnanswered("a non-interactive CLI cannot grant permission")
            return CLI_NO_ANSWER
        if question.type == "permission_request":
            prompt = f"allow {visible(question.name)}? [y/N/always] "
        else:
            options = [visible(str(o)) for o in question.options]
            prompt = f"answer{(' (' + ' / '.join(options) + ')') if options else ''}: "
        loop = asyncio.get_running_loop()
        try:
            reply = (await loop.run_in_executor(None, input, prompt)).strip()
        except EOFError:
            if question.type == "permission_request":
                raise QuestionUnanswered("the terminal's input ended before an answer") from None
            reply = ""
        return permission_answer(reply) if question.type == "permission_request" else reply
