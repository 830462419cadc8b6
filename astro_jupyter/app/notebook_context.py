"""The sidebar's active notebook on a run request: checked, and turned into what the run needs.

``POST astro/api/runs`` may carry ``"notebook": {"path", "cell_ids", "bridge"}`` — the
notebook open in the active JupyterLab tab (its path relative to the server root), the
selected cells and whether the sidebar applies notebook operations to the open document
(docs/notebook-bridge.md). The model gets a short note naming them (so "fix the error in
this cell" works); the notebook tools get a ``ClientNotebook``. It is the user's own
input, but still bounded and stripped of control characters before it reaches a prompt.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from ..agent.tools.notebook.bridge import ClientNotebook
from ..errors import InvalidRequest

if TYPE_CHECKING:
    from ..services.container import ServiceContainer

MAX_PATH = 1024
MAX_CELLS = 200
_CELL_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def parse_notebook_context(raw: Any, services: "ServiceContainer") -> tuple[ClientNotebook | None, str]:
    """(what the tools see, the note appended to the prompt); ``InvalidRequest`` for a bad shape."""
    if raw is None:
        return None, ""
    if not isinstance(raw, dict):
        raise InvalidRequest("'notebook' must be an object {path, cell_ids?, bridge?}", reason="invalid_notebook")
    path = raw.get("path")
    if path is None and set(raw) <= {"bridge"} and isinstance(raw.get("bridge"), bool):
        # no active notebook (or the user dropped the chip), but the sidebar can still act on open ones
        return ClientNotebook(bridge=raw["bridge"]), ""
    if not isinstance(path, str) or not path.strip() or len(path) > MAX_PATH:
        raise InvalidRequest("'notebook.path' must be the notebook's path relative to the server root", reason="invalid_notebook")
    if any(unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") for ch in path):
        raise InvalidRequest("'notebook.path' contains control characters", reason="invalid_notebook")
    path = PurePosixPath(path.strip().lstrip("/")).as_posix()
    if not path.endswith(".ipynb") or ".." in PurePosixPath(path).parts:
        raise InvalidRequest("'notebook.path' must name a .ipynb file under the server root", reason="invalid_notebook")
    cell_ids = raw.get("cell_ids", [])
    if cell_ids is None:
        cell_ids = []
    if not isinstance(cell_ids, list) or len(cell_ids) > MAX_CELLS or not all(
            isinstance(c, str) and _CELL_ID.match(c) for c in cell_ids):
        raise InvalidRequest(f"'notebook.cell_ids' must be a list of at most {MAX_CELLS} cell ids", reason="invalid_notebook")
    bridge = raw.get("bridge", False)
    if not isinstance(bridge, bool):
        raise InvalidRequest("'notebook.bridge' must be true or false", reason="invalid_notebook")
    client = ClientNotebook(path=path, cell_ids=tuple(cell_ids), bridge=bridge)
    shown = tool_path(path, services)
    cells = f" The selected cells: {', '.join(cell_ids)}." if cell_ids else " No cells are selected."
    note = (f"\n\n[The user has the notebook {shown} open in JupyterLab (path for the notebook tools).{cells} "
            "'This notebook' / 'this cell' mean these; read them with notebook_read before changing them.]")
    return client, note


def tool_path(api_path: str, services: "ServiceContainer") -> str:
    """The server path as the notebook tools take it (relative to the project root when under it)."""
    import os
    from pathlib import Path

    from ..agent.tools.filesystem.security import display_path

    backend = getattr(services.notebooks, "backend", None)
    real = getattr(backend, "real_path", None)
    if real is None:
        return api_path
    return display_path(Path(os.path.realpath(real(api_path))), services.config)
