"""The application layer: what the server, the kernel and the CLI do, without their I/O.

``AstroApp`` (``core.py``) holds one process's services and agent runtime; its methods, split by
resource (sessions, runs, tools, papers, notes, search, models, bookmarklet), do the ownership
checks and validation. ``follow`` (``follow.py``) streams a run and hands its questions to an
``Answerer``. Front ends parse → call this layer → render; this package imports none of them.
"""

from __future__ import annotations

from .common import Owner, encode_wire
from .core import AstroApp
from .follow import PERMISSION_ANSWERS, Answerer, Refuser, follow, permission_answer
from .tools import ToolRun

__all__ = ["PERMISSION_ANSWERS", "Answerer", "AstroApp", "Owner", "Refuser", "ToolRun", "encode_wire", "follow",
           "permission_answer"]
