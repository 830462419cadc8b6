"""``notebook_read``, ``notebook_edit``, ``notebook_run``: the agent works in notebooks.

Paths go through the filesystem sandbox (``resolve_path``: roots, traversal, links, and
whatever deny list it enforces). Where the work happens: through the sidebar's open
document when the run came from a sidebar that has the notebook open (``bridge.py``),
else through ``ctx.services.notebooks`` — files and own kernels in the kernel and the
CLI, the ContentsManager and the notebook's kernel session in the server.

Edits and runs change the user's work, so they ask first (default Ask); an "always"
answer covers that one notebook for the rest of the session. A run's question shows the
cell's code read from where it will run (the open document, else the file), and the run
happens only if the cell still holds exactly that code (``CellChanged`` otherwise).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ....errors import NotebookError
from ..base import AgentTool, InterruptBehavior, PermissionPreview, PermissionRule, ToolContext, ToolOutput
from ..filesystem.protected import protection
from ..filesystem.security import PathNotAllowed, display_path, protected_message, resolve_path, run_owner
from .bridge import BridgeTimeout, CellChanged, NotOpen, ask_client, cell_from_answer, notebook_from_answer

_CELL_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_PATH = {"type": "string", "description": "The .ipynb file (relative to the project root, or absolute inside a root)."}
_CELL = {"type": "string", "description": "A cell id as notebook_read shows it."}


def _resolve(ctx: ToolContext, raw: Any, access: str = "read") -> tuple[Path, str, str]:
    """(real path, path shown to the model, path the sidebar knows) or PathNotAllowed/NotebookError.

    The sandbox's own resolution: roots, traversal, links and the hard deny list for ``access``."""
    path = resolve_path(raw if isinstance(raw, str) else "", ctx.config, access=access, owner=run_owner(ctx))  # type: ignore[arg-type]
    if path.suffix != ".ipynb":
        raise NotebookError(f"{path.name} is not a notebook (expected a .ipynb file)")
    shown = display_path(path, ctx.config)
    client = ctx.services.notebooks.client_path(path)
    return path, shown, client or shown


def notebook_rules(name: str, raw: Any, config: Any, reason: str) -> list[PermissionRule]:
    """Ask (default) for a change to a notebook; Deny where the hard deny list forbids writing; no rule
    for a path the sandbox refuses (the tool reports that error, nothing to ask about)."""
    if config is not None and isinstance(raw, str):
        try:
            path = resolve_path(raw, config, access=None)
        except PathNotAllowed:
            return []
        why = protection(config).reason(path, write=True)
        if why:
            return [PermissionRule("deny", name, protected_message(raw, path, why, "write"))]
    return [PermissionRule("ask", name, reason)]


def _scope(args: dict[str, Any], config: Any) -> str:
    try:
        return str(resolve_path(str(args.get("path") or ""), config))
    except PathNotAllowed:
        return str(args.get("path") or "")


async def _current_cell(ctx: ToolContext, args: dict[str, Any]) -> tuple[Any, str, str, str]:
    """(cell, path shown, where it was read, note) for a question about ``args["cell_id"]``: the cell as it is
    in the open document (through the sidebar), else in the file as the server or this process reads it."""
    cell_id = args.get("cell_id")
    if not isinstance(cell_id, str) or not _CELL_ID.match(cell_id):
        raise NotebookError(f"{cell_id!r} is not a cell id")
    path, shown, client = _resolve(ctx, args.get("path"), "write")
    notebooks = ctx.services.notebooks
    note = ""
    try:
        nb = notebook_from_answer(await ask_client(ctx, "read", client, {}), client)
        where = "sidebar"
    except (NotOpen, BridgeTimeout) as exc:
        nb = await notebooks.load(path)
        where = notebooks.backend.where
        if isinstance(exc, BridgeTimeout):  # it may still run there; then only if the cell is the same
            note = (" The sidebar did not send the open notebook in time, so this is the cell as saved; "
                    "if the notebook is open, the cell runs there only if it holds exactly this code.")
    from ....services.notebooks.cells import ensure_ids, find_cell

    ensure_ids(nb)
    return nb.cells[find_cell(nb, cell_id)], shown, where, note


def _why(exc: Exception) -> str:
    return str(exc) if isinstance(exc, (PathNotAllowed, NotebookError)) else f"{type(exc).__name__}: {exc}"


class _NotebookTool(AgentTool):
    defer_loading = True  # loaded when a turn needs the notebook (load_tool): small models pay for few schemas

    def __init__(self, config: Any = None) -> None:
        self.config = config

    def _fail(self, exc: Exception) -> ToolOutput:
        return ToolOutput.error(f"{self.name}: {exc}")

    def permission_scope(self, args: dict[str, Any]) -> str:
        """"Allow for this notebook": an always-answer covers the notebook it was given for."""
        return _scope(args, self.config) if self.config is not None else str(args.get("path") or "")


class NotebookReadTool(_NotebookTool):
    name = "notebook_read"
    description = (
        "Read a Jupyter notebook as cells: each cell's id, type, source, execution count and outputs as text "
        "(errors with their last traceback frames, images as [image/png W×H]). Use the ids with notebook_edit "
        "and notebook_run."
    )
    parameters = {
        "type": "object",
        "properties": {
            "path": _PATH,
            "cell_ids": {"type": "array", "items": {"type": "string"}, "description": "Only these cells (default: all)."},
            "include_outputs": {"type": "boolean", "default": True},
        },
        "required": ["path"],
        "additionalProperties": False,
    }
    is_readonly = True

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        cell_ids = [str(c) for c in args.get("cell_ids") or []]
        include = bool(args.get("include_outputs", True))
        try:
            path, shown, client = _resolve(ctx, args.get("path"))
            notebooks = ctx.services.notebooks
            try:
                answer = await ask_client(ctx, "read", client, {})
            except (NotOpen, BridgeTimeout):  # reading the saved file is harmless
                text, meta = await notebooks.read(path, cell_ids=cell_ids or None, include_outputs=include, shown=shown)
                meta["via"] = notebooks.backend.where
            else:
                text, meta = notebooks.render(notebook_from_answer(answer, client), shown, cell_ids=cell_ids or None,
                                              include_outputs=include)
                meta["via"] = "sidebar"
        except (PathNotAllowed, NotebookError) as exc:
            return self._fail(exc)
        return ToolOutput(text, metadata=meta)


class NotebookEditTool(_NotebookTool):
    name = "notebook_edit"
    description = (
        "Change a notebook: insert a cell (at index, or after cell_id), replace a cell's source, or delete a "
        "cell. Inserting into a path that does not exist creates the notebook. Returns the cell id."
    )
    parameters = {
        "type": "object",
        "properties": {
            "path": _PATH,
            "action": {"type": "string", "enum": ["insert", "replace", "delete"]},
            "cell_id": {**_CELL, "description": "replace/delete: the cell; insert: put the new cell after this one."},
            "index": {"type": "integer", "description": "insert: position of the new cell (0 = first; default: end)."},
            "cell_type": {"type": "string", "enum": ["code", "markdown"], "description": "default: code"},
            "source": {"type": "string", "description": "The cell's text (insert, replace)."},
        },
        "required": ["path", "action"],
        "additionalProperties": False,
    }
    interrupt_behavior = InterruptBehavior.BLOCK

    def check_permissions(self, args: dict[str, Any]) -> list[PermissionRule]:
        where = str(args.get("path") or "a notebook")
        what = {"insert": "insert a cell into", "replace": "replace a cell in", "delete": "delete a cell from"}
        reason = f"notebook_edit wants to {what.get(str(args.get('action')), 'change')} {where}"
        return notebook_rules(self.name, args.get("path"), self.config, reason)

    async def permission_preview(self, args: dict[str, Any], ctx: ToolContext, reason: str) -> PermissionPreview | None:
        """A replace is asked as a diff: the cell's source now, read where the edit will apply (the open
        document, else the file), against the new source (the ``source`` argument)."""
        if args.get("action") != "replace" or not isinstance(args.get("source"), str):
            return None
        cell_id = args.get("cell_id")
        try:
            cell, shown, where, _ = await _current_cell(ctx, args)
            from ....services.notebooks.cells import _source

            old = _source(cell)
        except Exception as exc:  # noqa: BLE001 - the question still goes out, saying what could not be shown
            return PermissionPreview(f"{reason}, but the cell's current text cannot be shown: {_why(exc)}.")
        place = "in the notebook open in JupyterLab" if where == "sidebar" else "as saved"
        return PermissionPreview(f"notebook_edit wants to replace {cell.cell_type} cell {cell_id} of {shown} "
                                 f"(the change below, against the cell {place}).", old_source=old, pin=_ShownCell(old))

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        action = str(args.get("action") or "")
        cell_id = args.get("cell_id") or None
        if cell_id is not None and (not isinstance(cell_id, str) or not _CELL_ID.match(cell_id)):
            return ToolOutput.error(f"notebook_edit: {cell_id!r} is not a cell id (see notebook_read)")
        edit = {k: args[k] for k in ("action", "cell_id", "index", "cell_type", "source") if args.get(k) is not None}
        shown_cell = ctx.question_pin if isinstance(ctx.question_pin, _ShownCell) else None
        expected = shown_cell.source if shown_cell is not None and action == "replace" else None
        if expected is not None:  # the diff the user approved was against this text
            edit["expected_source"] = expected
        try:
            path, shown, client = _resolve(ctx, args.get("path"), "write")
            notebooks = ctx.services.notebooks
            if action in ("replace", "delete") and not cell_id:
                raise NotebookError(f"{action} needs the cell_id of the cell (see notebook_read)")
            if action in ("insert", "replace") and not isinstance(args.get("source"), str):
                raise NotebookError(f"{action} needs the cell's source")
            try:
                answer = await ask_client(ctx, "edit", client, edit)
            except NotOpen:
                result = await notebooks.edit(path, action, cell_id=cell_id, index=args.get("index"),
                                              cell_type=args.get("cell_type"), source=args.get("source"), run_id=ctx.run_id,
                                              expected_source=expected)
                meta = {"path": shown, "via": notebooks.backend.where, **result.to_dict()}
            else:
                meta = _edit_from_answer(answer, edit, shown)
        except CellChanged:
            return ToolOutput.error(
                f"notebook_edit: cell {cell_id} of {args.get('path')} was not replaced: it changed after the user was shown the "
                "diff, so the change they allowed is not against what it holds now. Read the cell and ask again.",
                changed=True)
        except (PathNotAllowed, NotebookError) as exc:
            return self._fail(exc)
        verb = {"insert": "Inserted", "replace": "Replaced", "delete": "Deleted"}[meta["action"]]
        where = "created " if meta.get("created") else ""
        text = f"{verb} {meta['cell_type']} cell {meta['cell_id']} at index {meta['index']} of {where}{shown}"
        if meta.get("via") == "sidebar":
            text += " (in the open notebook; the user can undo it)"
        return ToolOutput(text + ".", metadata=meta)


def _edit_from_answer(answer: dict[str, Any], edit: dict[str, Any], shown: str) -> dict[str, Any]:
    cell_id = answer.get("cell_id")
    if not isinstance(cell_id, str) or not _CELL_ID.match(cell_id):
        raise NotebookError(f"the sidebar's edit answer for {shown} has no valid 'cell_id'")
    index = answer.get("index")
    meta: dict[str, Any] = {
        "path": shown, "via": "sidebar", "action": edit["action"], "cell_id": cell_id,
        "index": index if isinstance(index, int) and not isinstance(index, bool) else -1,
        "cell_type": str(answer.get("cell_type") or edit.get("cell_type") or "code"),
        "source": str(edit.get("source") or ""), "created": False,
    }
    if isinstance(answer.get("old_source"), str):
        meta["old_source"] = answer["old_source"]
    return meta


@dataclass(frozen=True)
class _ShownCell:
    """What the notebook_run question showed: the cell's source (None: it could not be shown) and where."""

    source: str | None
    why: str = ""


# Where a cell runs and where its outputs go, as the question says it (by where the code was read).
WHERE = {
    "sidebar": ("It runs in the notebook open in JupyterLab, in that notebook's kernel. Its outputs appear in the "
                "open document, which is not saved: the file on disk changes only when you save it."),
    "contents": ("The notebook is not open in JupyterLab: the cell runs in the notebook's kernel session and its "
                 "outputs are saved into the file (a checkpoint of the version before is kept)."),
    "file": ("The cell runs in a kernel started for this notebook and its outputs are saved into the file (a "
             "checkpoint of the version before is kept)."),
}


class NotebookRunTool(_NotebookTool):
    name = "notebook_run"
    description = (
        "Execute one code cell of a notebook in that notebook's kernel and return its outputs as notebook_read "
        "shows them (in the notebook open in JupyterLab when it is open there, else saved into the file)."
    )
    parameters = {
        "type": "object",
        "properties": {"path": _PATH, "cell_id": _CELL},
        "required": ["path", "cell_id"],
        "additionalProperties": False,
    }
    interrupt_behavior = InterruptBehavior.CANCEL  # a cancel interrupts the kernel

    @property
    def timeout_secs(self) -> float | None:
        """A cell may run up to ``RUN_TIMEOUT_SECS`` after its kernel started (not the generic tool timeout)."""
        from ....services.notebooks.files import KERNEL_STARTUP_SECS, RUN_TIMEOUT_SECS

        return float(RUN_TIMEOUT_SECS + KERNEL_STARTUP_SECS + 30)

    def check_permissions(self, args: dict[str, Any]) -> list[PermissionRule]:
        # the question itself is built in permission_preview, from where the cell will run
        reason = f"notebook_run wants to run cell {args.get('cell_id')} of {args.get('path')}"
        return notebook_rules(self.name, args.get("path"), self.config, reason)

    async def permission_preview(self, args: dict[str, Any], ctx: ToolContext, reason: str) -> PermissionPreview:
        """The cell's code as it is where it will run: the open document (through the sidebar), else the file
        as the server or this process reads it. The run later checks the cell still holds exactly this."""
        cell_id = args.get("cell_id")
        try:
            cell, shown, where, note = await _current_cell(ctx, args)
            if cell.cell_type != "code":
                raise NotebookError(f"cell {cell_id} is a {cell.cell_type} cell; only code cells run")
            from ....services.notebooks.cells import _source

            source = _source(cell)
        except Exception as exc:  # noqa: BLE001 - whatever stops the lookup, the question says so and nothing runs
            why = _why(exc)
            return PermissionPreview(f"{reason}, but its code cannot be shown: {why}. It will not run.",
                                     pin=_ShownCell(None, why))
        lines = source.count("\n") + 1
        message = (f"notebook_run wants to run cell {cell_id} of {shown} ({lines} line{'s' if lines != 1 else ''}, "
                   f"shown below as it is now). {WHERE.get(where, WHERE['file'])}{note}")
        return PermissionPreview(message, code=source, pin=_ShownCell(source))

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        cell_id = args.get("cell_id")
        if not isinstance(cell_id, str) or not _CELL_ID.match(cell_id):
            return ToolOutput.error(f"notebook_run: {cell_id!r} is not a cell id (see notebook_read)")
        shown_cell = ctx.question_pin if isinstance(ctx.question_pin, _ShownCell) else None
        if shown_cell is not None and shown_cell.source is None:
            return ToolOutput.error(f"notebook_run: cell {cell_id} was not run: the question could not show its "
                                    f"code ({shown_cell.why})")
        expected = shown_cell.source if shown_cell is not None else None  # None: allowed without a question
        request = {"cell_id": cell_id} if expected is None else {"cell_id": cell_id, "expected_source": expected}
        try:
            path, shown, client = _resolve(ctx, args.get("path"), "write")
            notebooks = ctx.services.notebooks
            try:
                answer = await ask_client(ctx, "run", client, request)
            except NotOpen:
                text, meta = await notebooks.run(path, cell_id, run_id=ctx.run_id, shown=shown, expected_source=expected)
                meta["via"] = notebooks.backend.where
            else:
                from ....services.notebooks import cells as nbcells

                cell = cell_from_answer(answer, shown)
                index = answer.get("index") if isinstance(answer.get("index"), int) else -1
                record = nbcells.cell_record(index, {**cell, "id": cell_id}, notebooks.limits)
                total = answer["cells"] if isinstance(answer.get("cells"), int) else 1
                text = nbcells.render_records(shown, [record], total)
                meta = {"path": shown, "cells": [record], "cell_id": cell_id, "via": "sidebar"}
        except CellChanged as exc:
            return ToolOutput.error(
                f"notebook_run: cell {cell_id} of {exc.path or args.get('path')} was not run: it changed after the "
                "user was asked, so the code they allowed is not the code it holds now. Call notebook_run again to "
                "ask about the new code.", changed=True)
        except (PathNotAllowed, NotebookError) as exc:
            return self._fail(exc)
        return ToolOutput(text, metadata=meta)


def notebook_tools(config: Any) -> list[AgentTool]:
    return [NotebookReadTool(config), NotebookEditTool(config), NotebookRunTool(config)]
