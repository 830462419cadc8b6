"""``NotebookService``: read, edit and run notebook cells, wherever the notebook lives.

The rules (which cell, what an insert means, what the model reads) are the same
everywhere; a *backend* says where notebooks are stored and where their cells run:

* ``FileNotebookBackend`` (``files.py``): nbformat files and kernels this process starts
  with jupyter_client/nbclient — ``%%astro`` and the CLI;
* ``server/notebooks.py``: jupyter_server's ContentsManager (checkpoints, no raw file
  writes) and the notebook's kernel session — the sidebar, when the notebook is not open.

A per-notebook lock makes read-modify-write atomic inside this process.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ...errors import CellChanged, NotebookError
from . import cells as nbcells
from .cells import RenderLimits

if TYPE_CHECKING:
    from nbformat import NotebookNode

    from ...config import AstroConfig

__all__ = ["EditResult", "NotebookBackend", "NotebookService", "RenderLimits"]

ACTIONS = ("insert", "replace", "delete")


class NotebookBackend(Protocol):
    where: str

    async def load(self, path: Path, *, for_edit: bool = False) -> "NotebookNode | None": ...
    async def save(self, path: Path, nb: "NotebookNode", *, run_id: str) -> None: ...
    async def execute(self, path: Path, nb: "NotebookNode", index: int, *, run_id: str) -> "NotebookNode": ...
    async def release_run(self, run_id: str) -> None: ...
    async def aclose(self) -> None: ...


@dataclass
class EditResult:
    action: str
    cell_id: str
    index: int
    cell_type: str
    source: str
    created: bool = False
    old_source: str | None = None
    total: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = {"action": self.action, "cell_id": self.cell_id, "index": self.index, "cell_type": self.cell_type,
               "source": self.source, "created": self.created, "cells": self.total}
        if self.old_source is not None:
            out["old_source"] = self.old_source
        return {**out, **self.extra}


class NotebookService:
    def __init__(self, config: "AstroConfig", backend: NotebookBackend | None = None) -> None:
        from .files import FileNotebookBackend

        self.config = config
        self.backend: NotebookBackend = backend or FileNotebookBackend(config)
        self._locks: dict[Path, asyncio.Lock] = {}
        self.protected: dict[Path, str] = {}  # real path → why this process must not write it
        self.limits = RenderLimits()

    def protect(self, path: Path, reason: str) -> None:
        """Refuse edits and runs (which save outputs) of ``path``: e.g. the notebook a kernel runs in,
        open in a browser, whose file must not change under its unsaved work."""
        self.protected[Path(os.path.realpath(path))] = reason

    def _check_writable(self, path: Path) -> None:
        reason = self.protected.get(Path(os.path.realpath(path)))
        if reason:
            raise NotebookError(reason)

    def _lock(self, path: Path) -> asyncio.Lock:
        return self._locks.setdefault(path, asyncio.Lock())

    def client_path(self, path: Path) -> str | None:
        """The path a Jupyter frontend knows this notebook by (server backends), else None."""
        fn = getattr(self.backend, "client_path", None)
        return fn(path) if fn is not None else None

    @staticmethod
    def check_path(path: Path) -> None:
        if path.suffix != ".ipynb":
            raise NotebookError(f"{path.name} is not a notebook (expected a .ipynb file)")

    async def load(self, path: Path) -> "NotebookNode":
        self.check_path(path)
        nb = await self.backend.load(path)
        if nb is None:
            raise NotebookError(f"{path.name} does not exist (notebook_edit with action 'insert' creates it)")
        nbcells.ensure_ids(nb)
        return nb

    # -- read ------------------------------------------------------------------------------------
    async def read(self, path: Path, *, cell_ids: list[str] | None = None, include_outputs: bool = True,
                   shown: str = "") -> tuple[str, dict[str, Any]]:
        nb = await self.load(path)
        return self.render(nb, shown or path.name, cell_ids=cell_ids, include_outputs=include_outputs)

    def render(self, nb: "NotebookNode", shown: str, *, cell_ids: list[str] | None = None,
               include_outputs: bool = True) -> tuple[str, dict[str, Any]]:
        """(text for the model, metadata with the same as records) of a loaded notebook."""
        nbcells.ensure_ids(nb)
        limits = self.limits
        indices = list(range(len(nb.cells)))
        if cell_ids:
            indices = [nbcells.find_cell(nb, cid) for cid in cell_ids]
        records = [nbcells.cell_record(i, nb.cells[i], limits, include_outputs) for i in indices]
        kernel = (nb.metadata.get("kernelspec") or {}).get("name", "")
        text = nbcells.render_records(shown, records, len(nb.cells))
        return text, {"path": shown, "cells": records, "cell_count": len(nb.cells), "kernel": kernel}

    # -- edit ------------------------------------------------------------------------------------
    async def edit(self, path: Path, action: str, *, cell_id: str | None = None, index: int | None = None,
                   cell_type: str | None = None, source: str | None = None, run_id: str = "",
                   expected_source: str | None = None) -> EditResult:
        """``expected_source`` (replace): the cell's text the user was shown the change against; a cell that
        holds anything else now is left as it is (``CellChanged``), so an approval never overwrites newer work."""
        self.check_path(path)
        if action not in ACTIONS:
            raise NotebookError(f"action must be one of {', '.join(ACTIONS)}, not {action!r}")
        if action in ("replace", "delete") and not cell_id:
            raise NotebookError(f"{action} needs the cell_id of the cell (see notebook_read)")
        if action in ("insert", "replace") and source is None:
            raise NotebookError(f"{action} needs the cell's source")
        self._check_writable(path)
        async with self._lock(path):
            nb = await self.backend.load(path, for_edit=True)
            created = nb is None
            if nb is None:
                if action != "insert":
                    raise NotebookError(f"{path.name} does not exist; only 'insert' creates a notebook")
                nb = nbcells.new_notebook()
            nbcells.ensure_ids(nb)
            if action == "replace" and expected_source is not None and cell_id is not None:
                if nbcells._source(nb.cells[nbcells.find_cell(nb, cell_id)]) != expected_source:
                    raise CellChanged(f"cell {cell_id} of {path.name} is not the text the user was shown", path.name)
            result = self.apply(nb, action, cell_id=cell_id, index=index, cell_type=cell_type, source=source)
            result.created = created
            nbcells.validate_cells(nb, [] if action == "delete" else [nb.cells[result.index]])
            await self.backend.save(path, nb, run_id=run_id)
            return result

    @staticmethod
    def apply(nb: "NotebookNode", action: str, *, cell_id: str | None = None, index: int | None = None,
              cell_type: str | None = None, source: str | None = None) -> EditResult:
        """The edit on an in-memory notebook (shared by every backend)."""
        if action == "insert":
            cell = nbcells.make_cell(cell_type or "code", source or "")
            position = nbcells.insert_cell(nb, cell, index=index, after=cell_id)
            return EditResult("insert", cell.id, position, cell.cell_type, source or "", total=len(nb.cells))
        if action == "replace":
            assert cell_id is not None and source is not None
            position, previous = nbcells.replace_cell(nb, cell_id, source, cell_type)
            cell = nb.cells[position]
            return EditResult("replace", cell_id, position, cell.cell_type, source, old_source=previous, total=len(nb.cells))
        assert cell_id is not None
        position, removed = nbcells.delete_cell(nb, cell_id)
        return EditResult("delete", cell_id, position, removed.cell_type, "", old_source=nbcells._source(removed),
                          total=len(nb.cells))

    # -- run -------------------------------------------------------------------------------------
    async def run(self, path: Path, cell_id: str, *, run_id: str = "", shown: str = "",
                  expected_source: str | None = None) -> tuple[str, dict[str, Any]]:
        """Execute one code cell, store its outputs in the notebook, return them as notebook_read shows them.

        ``expected_source``: the code the user was shown and allowed; a cell that holds anything else is not
        run (``CellChanged``). The cell that runs is the one loaded here, so the check covers what executes."""
        self._check_writable(path)
        nb = await self.load(path)
        index = nbcells.find_cell(nb, cell_id)
        cell = nb.cells[index]
        if expected_source is not None and nbcells._source(cell) != expected_source:
            raise CellChanged(f"cell {cell_id} of {shown or path.name} is not the code the user allowed", shown)
        if cell.cell_type != "code":
            raise NotebookError(f"cell {cell_id} is a {cell.cell_type} cell; only code cells run")
        if not nbcells._source(cell).strip():
            raise NotebookError(f"cell {cell_id} is empty; nothing to run")
        executed = await self.backend.execute(path, nb, index, run_id=run_id)
        note = ""
        async with self._lock(path):  # the notebook may have changed while the cell ran
            current = await self.backend.load(path, for_edit=True)
            if current is not None:
                nbcells.ensure_ids(current)
                try:
                    position = nbcells.find_cell(current, cell_id)
                except NotebookError:
                    note = "\n(the cell was deleted while it ran; its outputs were not saved)"
                else:
                    target = current.cells[position]
                    target["outputs"] = executed.get("outputs", [])
                    target["execution_count"] = executed.get("execution_count")
                    nbcells.validate_cells(current, [target])
                    await self.backend.save(path, current, run_id=run_id)
                    index = position
        record = nbcells.cell_record(index, executed, self.limits)
        text = nbcells.render_records(shown or path.name, [record], len(nb.cells)) + note
        return text, {"path": shown or path.name, "cells": [record], "cell_id": cell_id}

    async def release_run(self, run_id: str) -> None:
        await self.backend.release_run(run_id)

    async def aclose(self) -> None:
        await self.backend.aclose()
