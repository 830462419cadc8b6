"""The current model, switchable at run time, and the overload → fallback policy.

``ModelHolder`` is shared by every run of a runtime (the sidebar's model picker switches
it); a ``threading.Lock`` keeps it correct whether the caller is the server's event loop,
a kernel thread or a test. ``FallbackPolicy`` decides which model comes next after
repeated overload answers: ``LLM_FALLBACK_MODEL`` first, then the chain in rotation.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass


@dataclass(frozen=True)
class Switch:
    from_model: str
    to_model: str
    reason: str


class ModelHolder:
    def __init__(self, model: str) -> None:
        self._lock = threading.Lock()
        self._model = model
        self._history: list[Switch] = []

    def get(self) -> str:
        with self._lock:
            return self._model

    def switch(self, name: str, reason: str = "manual") -> Switch:
        name = name.strip()
        if not name:
            raise ValueError("model name must not be empty")
        with self._lock:
            record = Switch(self._model, name, reason)
            self._model = name
            self._history.append(record)
            return record

    @property
    def history(self) -> list[Switch]:
        with self._lock:
            return list(self._history)


class FallbackPolicy:
    """Next model after overload: fallback model first, then rotate through the chain."""

    def __init__(self, fallback_model: str, chain: list[str]) -> None:
        seen: list[str] = []
        for name in [fallback_model, *chain]:
            if name and name not in seen:
                seen.append(name)
        self.candidates = seen

    def next_model(self, current: str, tried: list[str]) -> str | None:
        """The first candidate after ``current`` (in rotation) not yet tried in this call."""
        if not self.candidates:
            return None
        start = self.candidates.index(current) + 1 if current in self.candidates else 0
        n = len(self.candidates)
        for offset in range(n):
            name = self.candidates[(start + offset) % n]
            if name != current and name not in tried:
                return name
        return None


def is_overload(status: int | None, message: str) -> bool:
    return status in (429, 503, 529) or "overloaded" in message.lower()


def is_transient(status: int | None) -> bool:
    """5xx (besides overload codes), 408 and 409 are worth another try; other 4xx are not."""
    return status is None or status >= 500 or status in (408, 409)
