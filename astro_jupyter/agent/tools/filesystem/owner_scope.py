"""Owner scoping for the file tools: a run reads only its own owner's persisted tool results.

The sandbox (``security.py``) decides which trees a path may be in at all; this adds the
multi-user rule for ``tool-results/`` (layout and rule in ``tools/persist.py``): on a
server with named identities, the outputs another user's runs persisted are not readable,
listable or writable by this run, whatever path or link leads there. The refusal reads the
same whether or not the file exists, so it does not reveal other users' files.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from ..persist import results_readable_by
from .security import PathNotAllowed, real_path

if TYPE_CHECKING:
    from ..base import ToolContext


def check_owner(path: Path, ctx: "ToolContext") -> None:
    """Raise ``PathNotAllowed`` when ``path`` (resolved) is in another owner's tool results."""
    if not results_readable_by(path, ctx.owner, ctx.config.tool_results_dir):
        raise PathNotAllowed(
            f"path {str(path)!r} is in the tool results of another user; a run reads only its own user's results"
        )


def owner_may_read(path: Path, ctx: "ToolContext") -> bool:
    """For directory walks (under an already resolved base): False for entries in another owner's
    results. Only links are resolved (one ``lstat`` per file otherwise, not a ``realpath``)."""
    try:
        target = real_path(path) if os.path.islink(path) else path
        return results_readable_by(target, ctx.owner, ctx.config.tool_results_dir)
    except (OSError, RuntimeError, ValueError):
        return False
