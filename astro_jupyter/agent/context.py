"""How many tokens the next request will take: messages *and* tool schemas, calibrated by the server.

Why: the old estimate counted message text only, so a request the server counted at 4,118 tokens
was estimated at 625 (23 tool schemas, 14.7 kB, were left out) and a small model overflowed long
before compaction began. The estimate here counts what is sent (the JSON of the messages and of
the tools, a JSON character being about a quarter token) and is then scaled by what the server
reported as ``usage.prompt_tokens`` for the last request, so its own tokenizer decides.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

CHARS_PER_TOKEN = 4
SCALE_BOUNDS = (0.5, 3.0)  # a calibration outside these is a server reporting something else: ignored
MIN_CALIBRATION_TOKENS = 200  # too small a request says little about the tokenizer


def raw_tokens(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> int:
    """chars/4 of the JSON sent for ``messages`` (and ``tools``)."""
    chars = len(json.dumps(messages, ensure_ascii=False, default=str))
    if tools:
        chars += len(json.dumps(tools, ensure_ascii=False, default=str))
    return chars // CHARS_PER_TOKEN


@dataclass
class ContextMeter:
    """One loop's estimate: the size of its tool schemas and the server's calibration."""

    tool_tokens: int = 0  # raw estimate of the tool schemas the loop sends
    scale: float = 1.0  # server's prompt_tokens / our raw estimate, from the last usable usage report
    sent_raw: int = 0  # raw estimate of the request now streaming (what the next usage report is about)

    def set_tools(self, tools: list[dict[str, Any]]) -> None:
        self.tool_tokens = raw_tokens([], tools) if tools else 0

    def estimate(self, messages: list[dict[str, Any]]) -> int:
        """Tokens the next request with these messages will take, in the server's count."""
        return int((raw_tokens(messages) + self.tool_tokens) * self.scale)

    def sending(self, messages: list[dict[str, Any]]) -> None:
        self.sent_raw = raw_tokens(messages) + self.tool_tokens

    def calibrate(self, usage: dict[str, int]) -> None:
        """Adopt the server's count for the request just answered (if it reported a plausible one)."""
        reported = usage.get("prompt_tokens")
        if not isinstance(reported, int) or self.sent_raw < MIN_CALIBRATION_TOKENS or reported <= 0:
            return
        ratio = reported / self.sent_raw
        if SCALE_BOUNDS[0] <= ratio <= SCALE_BOUNDS[1]:
            self.scale = ratio
