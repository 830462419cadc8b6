"""Following a run and answering its questions, the same way in every front end.

``follow(handle, answerer)`` yields a run's events; when the run asks (``ask_user``) or needs a
permission (``permission_request``), the ``Answerer`` is asked and its reply is posted back to
the run. The CLI's answerer prompts on the terminal (or refuses when there is none), the
kernel's shows buttons or an input line; the server's answers arrive over REST instead
(``AstroApp.answer``), so it follows with no answerer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, AsyncIterator, Protocol, Union

from ..agent.permissions import ANSWERS, Unattended
from ..errors import QuestionUnanswered
from ..events import AskUser, PermissionRequest

if TYPE_CHECKING:
    from ..agent.run import RunHandle
    from ..events import Event

Question = Union[AskUser, PermissionRequest]

__all__ = ["Answerer", "Refuser", "Unattended", "follow", "is_question", "permission_answer"]

NO_ANSWER = "(no answer: the question was asked where no one can answer)"
PERMISSION_ANSWERS = ANSWERS  # allow / always / deny: what every front end sends (the executor knows no other)
# typed replies (CLI, kernel text prompts) onto PERMISSION_ANSWERS; anything else is "deny"
PERMISSION_REPLIES = {"y": "allow", "yes": "allow", "allow": "allow", "a": "always", "always": "always"}


class Answerer(Protocol):
    """Answers a run's question: ``allow`` / ``always`` / ``deny`` for a permission, free text for ``ask_user``;
    raises ``QuestionUnanswered`` (saying why) when no one answered, which refuses without a "deny" nobody said."""

    async def answer(self, question: Question) -> str: ...


class Refuser:
    """The answerer of a front end with no one to ask (a script, a pipe): no permission, no answer."""

    def __init__(self, no_answer: str = NO_ANSWER) -> None:
        self.no_answer = no_answer

    async def answer(self, question: Question) -> str:
        if question.type == "permission_request":
            raise QuestionUnanswered("it was asked where no one can answer")
        return self.no_answer


def permission_answer(reply: str) -> str:
    """A typed reply to "allow TOOL? [y/N/always]": y/yes/allow allow once, a/always always, anything else denies."""
    return PERMISSION_REPLIES.get(reply.strip().lower(), "deny")


def is_question(event: "Event") -> bool:
    """A question the front end must answer: the lead's own (subagents never ask)."""
    return event.type in ("ask_user", "permission_request") and not event.subagent_id


async def follow(handle: "RunHandle", answerer: Answerer | None = None, *, after_seq: int = 0) -> AsyncIterator["Event"]:
    """The run's events in order; each question is yielded first (so it is shown), then answered."""
    async for _, event in handle.events(after_seq=after_seq):
        yield event
        if answerer is not None and is_question(event):
            try:
                reply = await answerer.answer(event)  # type: ignore[arg-type]
            except QuestionUnanswered as exc:
                handle.withdraw(event.request_id, str(exc))  # type: ignore[attr-defined]
                continue
            handle.answer(event.request_id, reply)  # type: ignore[attr-defined]

