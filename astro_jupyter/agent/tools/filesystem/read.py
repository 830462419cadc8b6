"""``read_file``: line-numbered text, with an unchanged-file stub to save context.

Re-reading a file the model already has (same real path, same mtime, same offset and
limit) returns one line instead of the whole text again; the per-session
``FileStateCache`` (``ctx.file_state``) remembers what was read.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from ...run import client_files
from ..base import AgentTool, InterruptBehavior, ToolContext, ToolOutput
from .regular import FileTooLarge, NotRegularFile, kind_of, read_regular, run_fs
from .security import PathNotAllowed, display_path, resolve_path, run_owner

DEFAULT_LIMIT = 2000
MAX_LINE_CHARS = 2000
MAX_FILE_BYTES = 20_000_000  # read_file and grep_files skip larger files
UNCHANGED_STUB = "File unchanged since last read ({path}, lines {start}-{end}); the earlier read_file result is still current."


def looks_binary(head: bytes) -> bool:
    """A NUL byte in the first block is the classic (git, grep) binary test."""
    return b"\x00" in head


def format_lines(lines: list[str], first_lineno: int) -> str:
    """``cat -n`` style: right-aligned line number, a tab, the line (very long lines cut)."""
    out = []
    for i, line in enumerate(lines, start=first_lineno):
        if len(line) > MAX_LINE_CHARS:
            line = line[:MAX_LINE_CHARS] + f"... [line cut at {MAX_LINE_CHARS} characters]"
        out.append(f"{i:>6}\t{line}")
    return "\n".join(out)


def _int_arg(args: dict[str, Any], name: str, default: int | None, minimum: int) -> int | None:
    value = args.get(name, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            value = int(str(value))
        except ValueError:
            raise ValueError(f"{name} must be an integer, got {value!r}") from None
    if value < minimum:
        raise ValueError(f"{name} must be ≥ {minimum}, got {value}")
    return value


class ReadFileTool(AgentTool):
    name = "read_file"
    description = (
        "Read a text file with line numbers. Use offset (1-based first line) and limit (number of lines) "
        "for long files; re-reading an unchanged range returns a short 'unchanged' note. Paths are relative "
        "to the project root or absolute inside the library, skills directory or project."
    )
    parameters = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File to read."},
            "offset": {"type": "integer", "minimum": 1, "description": "First line to show (1-based).", "default": 1},
            "limit": {"type": "integer", "minimum": 1, "description": "How many lines to show.", "default": DEFAULT_LIMIT},
        },
        "required": ["path"],
        "additionalProperties": False,
    }
    interrupt_behavior = InterruptBehavior.CANCEL
    is_readonly = True

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        try:
            offset = _int_arg(args, "offset", 1, 1) or 1
            limit = _int_arg(args, "limit", DEFAULT_LIMIT, 1)
        except ValueError as exc:
            return ToolOutput.error(f"read_file: {exc}")
        files = client_files(ctx)
        if files is not None and files.can_read:
            return await self._read_client(files, args.get("path", ""), offset, limit, ctx)
        # path resolution stats every component: on the pool, not the server's event loop
        return await run_fs(self._read, args.get("path", ""), offset, limit, ctx)

    async def _read_client(self, files: Any, raw_path: Any, offset: int, limit: int | None, ctx: ToolContext) -> ToolOutput:
        """Through an ACP client (its buffer may hold unsaved text): the same sandbox and file checks
        on the path first; no unchanged-stub (a buffer has no mtime)."""
        found = await run_fs(self._locate, raw_path, ctx)
        if isinstance(found, ToolOutput):
            return found
        path, _st = found
        try:
            text = await files.read_text(str(path))
        except Exception as exc:  # noqa: BLE001 - the client's failure, told to the model
            return ToolOutput.error(f"read_file: the editor could not read {display_path(path, ctx.config)}: {exc}",
                                    path=str(path))
        if len(text) > MAX_FILE_BYTES:
            return ToolOutput.error(f"read_file: {display_path(path, ctx.config)} is over the "
                                    f"{MAX_FILE_BYTES}-byte limit", path=str(path))
        return self._page(text, path, offset, limit, ctx)

    def _locate(self, raw_path: Any, ctx: ToolContext) -> "tuple[Path, os.stat_result] | ToolOutput":
        """The resolved path of a regular file within the limits, or the error the model sees."""
        try:
            path = resolve_path(raw_path, ctx.config, owner=run_owner(ctx))
        except PathNotAllowed as exc:
            return ToolOutput.error(f"read_file: {exc}")
        shown = display_path(path, ctx.config)
        try:
            st = path.stat()
        except FileNotFoundError:
            return ToolOutput.error(f"read_file: {shown} does not exist", path=str(path))
        except OSError as exc:
            return ToolOutput.error(f"read_file: cannot stat {shown}: {exc.strerror or exc}", path=str(path))
        if stat.S_ISDIR(st.st_mode):
            return ToolOutput.error(f"read_file: {shown} is a directory; use glob_files to list it", path=str(path))
        if not stat.S_ISREG(st.st_mode):  # a FIFO or device would block the read: refused before opening
            return ToolOutput.error(f"read_file: {shown} {NotRegularFile(kind_of(st.st_mode))}", path=str(path))
        if st.st_size > MAX_FILE_BYTES:
            return ToolOutput.error(
                f"read_file: {shown} is {st.st_size} bytes, over the {MAX_FILE_BYTES}-byte limit",
                path=str(path),
            )
        return path, st

    def _read(self, raw_path: Any, offset: int, limit: int | None, ctx: ToolContext) -> ToolOutput:
        found = self._locate(raw_path, ctx)
        if isinstance(found, ToolOutput):
            return found
        path, st = found
        shown = display_path(path, ctx.config)
        key = str(path)
        if ctx.file_state.unchanged(key, st.st_mtime_ns, offset, limit):
            end = offset + limit - 1 if limit else "end"
            return ToolOutput(
                UNCHANGED_STUB.format(path=shown, start=offset, end=end),
                metadata={"path": str(path), "unchanged": True, "offset": offset, "limit": limit},
            )
        try:
            data = read_regular(path, MAX_FILE_BYTES)
        except (NotRegularFile, FileTooLarge) as exc:
            return ToolOutput.error(f"read_file: {shown} {exc}", path=str(path))
        except OSError as exc:
            return ToolOutput.error(f"read_file: cannot read {shown}: {exc.strerror or exc}", path=str(path))
        if looks_binary(data[:8192]):
            hint = " (a PDF: use parse_paper / get_paper_content)" if data[:5] == b"%PDF-" else ""
            return ToolOutput.error(f"read_file: {shown} is a binary file{hint}", path=str(path))
        out = self._page(data.decode("utf-8", errors="replace"), path, offset, limit, ctx)
        if not out.is_error:
            ctx.file_state.remember(key, st.st_mtime_ns, offset, limit)
        return out

    def _page(self, text: str, path: Path, offset: int, limit: int | None, ctx: ToolContext) -> ToolOutput:
        """Lines ``offset``..``offset+limit-1`` of ``text``, numbered."""
        shown = display_path(path, ctx.config)
        lines = text.splitlines()
        total = len(lines)
        if total and offset > total:
            return ToolOutput.error(
                f"read_file: offset {offset} is past the end of {shown} ({total} lines)", path=str(path), total_lines=total
            )
        chunk = lines[offset - 1 : (offset - 1 + limit) if limit else None]
        end_line = offset + len(chunk) - 1
        body = format_lines(chunk, offset) if chunk else "(empty file)"
        more = total - end_line
        if more > 0:
            body += f"\n... {more} more lines; continue with offset={end_line + 1}"
        return ToolOutput(
            body,
            metadata={
                "path": str(path),
                "start_line": offset,
                "end_line": end_line,
                "total_lines": total,
                "truncated": more > 0,
                "unchanged": False,
            },
        )
