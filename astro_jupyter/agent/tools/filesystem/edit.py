"""``file_edit``: replace an exact string in a file; refuse when it is missing or ambiguous.

Exact matching (no regex, no whitespace folding) keeps edits predictable: the model
must quote the text it wants changed. A non-unique match is an error that says how
many matches there are, unless ``replace_all`` is set.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...run import client_files
from ..base import AgentTool, InterruptBehavior, PermissionRule, ToolContext, ToolOutput
from .read import format_lines, looks_binary
from .regular import NotRegularFile, read_regular, run_fs
from .security import PathNotAllowed, display_path, resolve_path, run_owner, write_permission_rules

if TYPE_CHECKING:
    from ....config import AstroConfig
from .write import atomic_write_text

SNIPPET_CONTEXT = 3


def _snippet(text: str, index: int, length: int) -> str:
    """The edited region with a few lines of context, numbered like read_file."""
    start_line = text.count("\n", 0, index)
    end_line = start_line + text.count("\n", index, index + length)
    lines = text.splitlines()
    lo = max(0, start_line - SNIPPET_CONTEXT)
    hi = min(len(lines), end_line + SNIPPET_CONTEXT + 1)
    return format_lines(lines[lo:hi], lo + 1)


class FileEditTool(AgentTool):
    name = "file_edit"
    defer_loading = True
    description = (
        "Replace an exact old_string with new_string in a file. old_string must occur exactly once "
        "(include surrounding lines to make it unique) unless replace_all is true."
    )
    parameters = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File to edit."},
            "old_string": {"type": "string", "description": "Exact text to replace (whitespace matters)."},
            "new_string": {"type": "string", "description": "Replacement text."},
            "replace_all": {"type": "boolean", "default": False, "description": "Replace every occurrence."},
        },
        "required": ["path", "old_string", "new_string"],
        "additionalProperties": False,
    }
    interrupt_behavior = InterruptBehavior.BLOCK

    def __init__(self, config: "AstroConfig | None" = None) -> None:
        self.config = config

    def check_permissions(self, args: dict[str, Any]) -> list[PermissionRule]:
        old, new = args.get("old_string"), args.get("new_string")
        what, text = "edit it", None
        if isinstance(old, str) and isinstance(new, str):
            every = "every occurrence of " if args.get("replace_all") else ""
            what = f"replace {every}{len(old)} characters with {len(new)} characters"
            text = f"In it, replace{' every occurrence of' if every else ''}:\n{old}\nwith:\n{new}"
        return write_permission_rules(self.name, args.get("path"), self.config, what, text)

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        old, new = args.get("old_string"), args.get("new_string")
        if not isinstance(old, str) or not isinstance(new, str):
            return ToolOutput.error("file_edit: old_string and new_string must be strings")
        if old == "":
            return ToolOutput.error("file_edit: old_string is empty; use file_write to create or replace a whole file")
        if old == new:
            return ToolOutput.error("file_edit: old_string and new_string are identical; nothing to change")
        try:
            path = resolve_path(args.get("path", ""), ctx.config, access="write", owner=run_owner(ctx))
        except PathNotAllowed as exc:
            return ToolOutput.error(f"file_edit: {exc}")
        replace_all = bool(args.get("replace_all", False))
        files = client_files(ctx)
        if files is not None and files.can_read and files.can_write:
            return await self._edit_client(files, path, old, new, replace_all, ctx)
        return await run_fs(self._edit, path, old, new, replace_all, ctx)

    async def _edit_client(self, files: Any, path: Path, old: str, new: str, replace_all: bool,
                           ctx: ToolContext) -> ToolOutput:
        """Through an ACP client: the editor's buffer (unsaved text included) is read, edited and written back."""
        shown = display_path(path, ctx.config)
        if not await run_fs(path.is_file):
            return ToolOutput.error(f"file_edit: {shown} is not an existing regular file; use file_write to create it",
                                    path=str(path))
        try:
            text = await files.read_text(str(path))
        except Exception as exc:  # noqa: BLE001 - the client's failure, told to the model
            return ToolOutput.error(f"file_edit: the editor could not read {shown}: {exc}", path=str(path))
        edited = self._replace(text, old, new, replace_all, shown, path)
        if isinstance(edited, ToolOutput):
            return edited
        try:
            await files.write_text(str(path), edited[0])
        except Exception as exc:  # noqa: BLE001
            return ToolOutput.error(f"file_edit: the editor could not write {shown}: {exc}", path=str(path))
        ctx.file_state.forget(str(path))
        return self._edited(shown, path, new, *edited)

    def _edit(self, path: Path, old: str, new: str, replace_all: bool, ctx: ToolContext) -> ToolOutput:
        shown = display_path(path, ctx.config)
        try:
            data = read_regular(path)  # a FIFO or device is refused, not opened
        except NotRegularFile as exc:
            return ToolOutput.error(f"file_edit: {shown} {exc}", path=str(path))
        except FileNotFoundError:
            return ToolOutput.error(f"file_edit: {shown} does not exist; use file_write to create it", path=str(path))
        except IsADirectoryError:
            return ToolOutput.error(f"file_edit: {shown} is a directory", path=str(path))
        except OSError as exc:
            return ToolOutput.error(f"file_edit: cannot read {shown}: {exc.strerror or exc}", path=str(path))
        if looks_binary(data[:8192]):
            return ToolOutput.error(f"file_edit: {shown} is a binary file", path=str(path))
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return ToolOutput.error(f"file_edit: {shown} is not valid UTF-8; edit it another way", path=str(path))
        edited = self._replace(text, old, new, replace_all, shown, path)
        if isinstance(edited, ToolOutput):
            return edited
        try:
            atomic_write_text(path, edited[0])
        except OSError as exc:
            return ToolOutput.error(f"file_edit: cannot write {shown}: {exc.strerror or exc}", path=str(path))
        ctx.file_state.forget(str(path))
        return self._edited(shown, path, new, *edited)

    def _replace(self, text: str, old: str, new: str, replace_all: bool, shown: str,
                 path: Path) -> "tuple[str, int, int] | ToolOutput":
        """(the new text, replacements, index of the first) or the error: missing or ambiguous."""
        count = text.count(old)
        if count == 0:
            hint = ""
            if old.strip() and old.strip() in text:
                hint = " (it does occur with different leading/trailing whitespace)"
            return ToolOutput.error(f"file_edit: old_string not found in {shown}{hint}", path=str(path), matches=0)
        if count > 1 and not replace_all:
            return ToolOutput.error(
                f"file_edit: old_string occurs {count} times in {shown}; include more surrounding text to make "
                "it unique, or set replace_all=true",
                path=str(path),
                matches=count,
            )
        first = text.index(old)
        updated = text.replace(old, new) if replace_all else text.replace(old, new, 1)
        return updated, (count if replace_all else 1), first

    def _edited(self, shown: str, path: Path, new: str, updated: str, replaced: int, first: int) -> ToolOutput:
        return ToolOutput(
            f"Edited {shown}: {replaced} replacement(s).\n{_snippet(updated, first, len(new))}",
            metadata={"path": str(path), "replacements": replaced},
        )
