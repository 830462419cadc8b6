"""``file_write``: create or overwrite a file inside the sandbox, atomically.

The text goes to a temporary file in the same directory and is renamed over the
target, so a crash or cancel never leaves half a file (the tool is ``Block``: once
started it finishes). The existing file's permission bits are kept. A write outside the
library's notes folder asks first (in skills/ the question quotes the whole text); the hard
deny list refuses outright.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ....atomic_write import atomic_write_text
from ...run import client_files
from ..base import AgentTool, InterruptBehavior, PermissionRule, ToolContext, ToolOutput
from .regular import NotRegularFile, kind_of, run_fs
from .security import PathNotAllowed, display_path, resolve_path, run_owner, write_permission_rules

if TYPE_CHECKING:
    from ....config import AstroConfig


class FileWriteTool(AgentTool):
    name = "file_write"
    defer_loading = True
    description = (
        "Create a file or replace its whole content (parent directories are created). "
        "For small changes to an existing file prefer file_edit."
    )
    parameters = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File to write (relative to the project root or absolute inside a root)."},
            "content": {"type": "string", "description": "The complete new content."},
        },
        "required": ["path", "content"],
        "additionalProperties": False,
    }
    interrupt_behavior = InterruptBehavior.BLOCK

    def __init__(self, config: "AstroConfig | None" = None) -> None:
        self.config = config

    def check_permissions(self, args: dict[str, Any]) -> list[PermissionRule]:
        content = args.get("content")
        size = f"{len(content)} characters" if isinstance(content, str) else "content"
        text = f"The whole new content:\n{content}" if isinstance(content, str) else None
        return write_permission_rules(self.name, args.get("path"), self.config, f"write {size}", text)

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        content = args.get("content")
        if not isinstance(content, str):
            return ToolOutput.error("file_write: content must be a string")
        try:
            path = resolve_path(args.get("path", ""), ctx.config, access="write", owner=run_owner(ctx))
        except PathNotAllowed as exc:
            return ToolOutput.error(f"file_write: {exc}")
        files = client_files(ctx)
        if files is not None and files.can_write:
            return await self._write_client(files, path, content, ctx)
        return await run_fs(self._write, path, content, ctx)

    async def _write_client(self, files: Any, path: Path, content: str, ctx: ToolContext) -> ToolOutput:
        """Through an ACP client: the editor writes (its open buffer follows, its undo works)."""
        shown = display_path(path, ctx.config)
        existed = await run_fs(path.exists)
        if existed and not await run_fs(path.is_file):  # a directory, FIFO or device node
            return ToolOutput.error(f"file_write: {shown} is not a regular file", path=str(path))
        try:
            await files.write_text(str(path), content)
        except Exception as exc:  # noqa: BLE001 - the client's failure, told to the model
            return ToolOutput.error(f"file_write: the editor could not write {shown}: {exc}", path=str(path))
        ctx.file_state.forget(str(path))
        return self._written(path, content, len(content.encode("utf-8")), existed, ctx)

    def _write(self, path: Path, content: str, ctx: ToolContext) -> ToolOutput:
        shown = display_path(path, ctx.config)
        if path.is_dir():
            return ToolOutput.error(f"file_write: {shown} is a directory")
        if path.exists() and not path.is_file():  # never replace a FIFO or device node
            return ToolOutput.error(f"file_write: {shown} {NotRegularFile(kind_of(path.stat().st_mode))}", path=str(path))
        existed = path.exists()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            written = atomic_write_text(path, content)
        except OSError as exc:
            return ToolOutput.error(f"file_write: cannot write {shown}: {exc.strerror or exc}", path=str(path))
        ctx.file_state.forget(str(path))
        return self._written(path, content, written, existed, ctx)

    def _written(self, path: Path, content: str, written: int, existed: bool, ctx: ToolContext) -> ToolOutput:
        shown = display_path(path, ctx.config)
        lines = content.count("\n") + (1 if content and not content.endswith("\n") else 0)
        verb = "Overwrote" if existed else "Created"
        return ToolOutput(
            f"{verb} {shown} ({written} bytes, {lines} lines)",
            metadata={"path": str(path), "bytes": written, "lines": lines, "created": not existed},
        )
