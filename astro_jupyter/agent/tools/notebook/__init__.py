"""The notebook tool family: the agent reads, edits and runs notebooks, and (in a kernel) the live namespace.

``notebook_read`` (read-only), ``notebook_edit`` and ``notebook_run`` (Ask) work on every
surface; ``kernel_inspect`` (read-only) and ``kernel_run`` (Ask) exist only in a kernel,
which adds them with ``kernel_tools(access)``; elsewhere they are marked unavailable with
a reason. All five are resident (not deferred).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .cells import NotebookEditTool, NotebookReadTool, NotebookRunTool, notebook_tools
from .kernel import UNAVAILABLE, KernelInspectTool, KernelRunTool, kernel_tools

if TYPE_CHECKING:
    from ....config import AstroConfig
    from ..base import AgentTool

__all__ = ["KernelInspectTool", "KernelRunTool", "NotebookEditTool", "NotebookReadTool", "NotebookRunTool",
           "kernel_tools", "tools", "unavailable"]


def tools(config: "AstroConfig") -> list["AgentTool"]:
    return notebook_tools(config)


def unavailable(config: "AstroConfig") -> dict[str, str]:
    """Known tools of this family a plain registry cannot offer, with the reason a caller gets."""
    return dict(UNAVAILABLE)
