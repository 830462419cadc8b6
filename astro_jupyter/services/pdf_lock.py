"""One process-wide lock around PyMuPDF calls.

MuPDF is not thread-safe: every PyMuPDF call made off the event loop (``asyncio.to_thread``)
holds this lock, so two parses, or a parse and a ``library add``, running at once take
turns instead of corrupting MuPDF's shared state. Re-entrant, so a helper that holds it may
call another that takes it again.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, TypeVar

T = TypeVar("T")

PYMUPDF_LOCK = threading.RLock()


def locked(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` under the PyMuPDF lock (the shape ``asyncio.to_thread`` wants)."""
    with PYMUPDF_LOCK:
        return fn(*args)
