"""The values a tool call moves through: the model's request, a slot in the pipeline, the outcome.

Kept apart from ``executor.py`` so the one-shot executor and the streaming scheduler
(``streaming_executor.py``) both build on them without importing each other.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from .permissions import PermissionDecision
from .tools.base import AgentTool, ToolOutput


@dataclass(frozen=True)
class ToolCallRequest:
    """One tool call as the model sent it (arguments still the raw JSON string)."""

    id: str
    name: str
    arguments_json: str = ""
    cut_off: bool = False  # the output bound ended the answer inside these arguments: rejected, never run


@dataclass
class ExecutedCall:
    """The outcome of one call; ``message`` is the ``role: tool`` chat message to append."""

    id: str
    name: str
    arguments: dict[str, Any] | None
    output: ToolOutput
    duration_ms: int
    message: dict[str, Any]


@dataclass
class ToolMetrics:
    calls: int = 0
    errors: int = 0
    total_ms: int = 0
    max_ms: int = 0


def repair_call_id(call_id: str | None) -> str:
    """Models sometimes send an empty id; give it a unique one so its result can be matched."""
    return call_id if call_id and call_id.strip() else f"call_{uuid.uuid4().hex}"


@dataclass
class CallSlot:
    """A call moving through the pipeline; ``error`` set means it will not run."""

    index: int
    id: str
    name: str
    raw_arguments: str
    args: dict[str, Any] | None = None
    tool: AgentTool | None = None
    error: ToolOutput | None = None
    stage: str = ""  # where it stopped: validate | permission | hook | cancelled
    safe: bool = False
    contexts: list[str] = field(default_factory=list)
    permission: PermissionDecision | None = None
    question_pin: Any = None  # what the question showed, for the tool to check before it acts


def elapsed_ms(start: float) -> int:
    return int((time.perf_counter() - start) * 1000)
