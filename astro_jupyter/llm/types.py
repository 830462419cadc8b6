"""What ``LlmClient.stream`` yields: small typed items the runtime turns into events.

A tool call is yielded as :class:`ToolCallReady` as soon as its arguments are complete
(a later call index started, or the stream ended) so the streaming executor can start a
concurrency-safe call while the model is still writing the next one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Union


@dataclass(frozen=True)
class TextChunk:
    delta: str
    kind: str = "text"


@dataclass(frozen=True)
class ThinkingChunk:
    delta: str
    kind: str = "thinking"


@dataclass(frozen=True)
class ToolCallReady:
    index: int
    id: str
    name: str
    arguments_json: str
    cut_off: bool = False  # the output bound ended the answer inside these arguments: never run them
    kind: str = "tool_call"

    def to_message(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments_json}}


@dataclass(frozen=True)
class ToolCallPreparing:
    """A tool call whose name has arrived while its arguments are still being written (``chars`` so far)."""

    index: int
    id: str
    name: str
    chars: int
    kind: str = "tool_call_preparing"


@dataclass(frozen=True)
class ModelSwitched:
    from_model: str
    to_model: str
    reason: str
    kind: str = "model_switch"


@dataclass(frozen=True)
class Completed:
    """The end of one model turn: the assistant message as it will be stored and re-sent."""

    text: str
    tool_calls: list[ToolCallReady]
    finish_reason: str
    model: str
    usage: dict[str, int] = field(default_factory=dict)
    thinking: str = ""
    max_tokens: int = 0  # the output bound sent with the request (``finish_reason == "length"``: it was reached)
    kind: str = "completed"

    @property
    def message(self) -> dict[str, Any]:
        msg: dict[str, Any] = {"role": "assistant", "content": self.text}
        if self.tool_calls:
            msg["tool_calls"] = [c.to_message() for c in self.tool_calls]
        return msg


StreamItem = Union[TextChunk, ThinkingChunk, ToolCallPreparing, ToolCallReady, ModelSwitched, Completed]
