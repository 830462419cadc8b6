"""``glob_files`` and the sandboxed directory walk that ``grep_files`` shares.

The walk never follows directory symlinks and drops any entry whose real path leaves
the roots, so a link planted in the project cannot expose files outside it. Patterns
use ``*`` (within one name), ``**`` (any depth), ``?`` and ``[...]``, matched against the
path relative to the search directory; a pattern without ``/`` matches names at any depth.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator

from ..base import AgentTool, InterruptBehavior, ToolContext, ToolOutput
from .protected import Protection, protection
from .regular import run_fs
from .security import (
    MAX_DEPTH, PathNotAllowed, display_path, is_allowed_file, project_base, real_path, resolve_path, run_owner, sandbox_roots,
)

SKIPPED_DIRS = frozenset({".git", ".hg", ".svn", "__pycache__", "node_modules", ".ipynb_checkpoints"})
DEFAULT_MAX_RESULTS = 200


@lru_cache(maxsize=256)
def glob_to_regex(pattern: str) -> re.Pattern[str]:
    """Translate a glob with ``**`` into an anchored regex over ``/``-separated relative paths."""
    if "/" not in pattern:
        pattern = "**/" + pattern
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            j = pattern.find("]", i + 2 if pattern[i + 1 : i + 2] in ("!", "]") else i + 1)
            if j == -1:
                out.append(re.escape(c))
                i += 1
            else:
                body = pattern[i + 1 : j]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = j + 1
        else:
            out.append(re.escape(c))
            i += 1
    return re.compile("".join(out) + r"\Z", re.DOTALL)


def walk_files(
    base: Path, roots: list[Path], cancelled: Any = None, protect: Protection | None = None,
    special: list[Path] | None = None,
) -> Iterator[Path]:
    """Regular files under ``base`` (inside the roots) in sorted depth-first order.

    Iterative (no recursion limit on deep trees), never descends into directory
    symlinks, skips VCS/cache directories, trees deeper than ``MAX_DEPTH`` and whatever
    the deny list ``protect`` shuts for reading (a file is judged by its real path).
    FIFOs, devices and sockets are never yielded (opening one can block forever); they are
    added to ``special`` when given, so a caller can say what it skipped.
    """
    stack: list[tuple[Path, int]] = [(base, 0)]
    while stack:
        if cancelled is not None and cancelled.is_set():
            return
        directory, depth = stack.pop()
        try:
            with os.scandir(directory) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        subdirs: list[Path] = []
        for entry in entries:
            path = Path(entry.path)
            try:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name not in SKIPPED_DIRS and depth + 1 < MAX_DEPTH and (
                        protect is None or protect.reason(entry.path, write=False) is None
                    ):
                        subdirs.append(path)
                    continue
                link = entry.is_symlink()
                if link and (not is_allowed_file(path, roots) or path.is_dir()):
                    continue
                if protect is not None and protect.reason(real_path(path) if link else entry.path, write=False):
                    continue
                if not entry.is_file():  # stat only (follows a link to its target): nothing is opened
                    if special is not None:
                        special.append(path)
                    continue
            except (OSError, RuntimeError, ValueError):
                continue
            yield path
        stack.extend((d, depth + 1) for d in reversed(subdirs))


def check_pattern(pattern: Any, what: str = "pattern") -> str:
    if not isinstance(pattern, str) or not pattern.strip():
        raise ValueError(f"{what} must be a non-empty string")
    if "\x00" in pattern:
        raise ValueError(f"{what} contains a NUL byte")
    if ".." in pattern or pattern.startswith("/") or "~" in pattern:
        raise ValueError(f"{what} {pattern!r} must be relative to the search path, without '..' or '~'")
    return pattern


def resolve_search_dir(raw: Any, ctx: ToolContext, roots: list[Path], protect: Protection) -> Path:
    """The directory (or file) to search: the given path, or the project root (judged with the
    search's own ``roots`` and ``protect``, built once for the path and the walk)."""
    if raw in (None, ""):
        raw = "."
    if raw == ".":
        raw = str(Path(ctx.config.project_root or os.getcwd()))
    return resolve_path(str(raw), ctx.config, owner=run_owner(ctx), roots=roots, protect=protect)


class GlobFilesTool(AgentTool):
    name = "glob_files"
    defer_loading = True
    description = (
        "Find files by name pattern (glob: *, **, ?, [..]) under a directory, newest first. "
        "A pattern without '/' matches file names at any depth, e.g. '*.py' or 'papers/**/*.md'."
    )
    parameters = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Glob pattern relative to path."},
            "path": {"type": "string", "description": "Directory to search (default: the project root)."},
            "max_results": {"type": "integer", "minimum": 1, "default": DEFAULT_MAX_RESULTS},
        },
        "required": ["pattern"],
        "additionalProperties": False,
    }
    interrupt_behavior = InterruptBehavior.CANCEL
    is_readonly = True

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        try:
            pattern = check_pattern(args.get("pattern"))
            max_results = int(args.get("max_results") or DEFAULT_MAX_RESULTS)
        except (ValueError, TypeError) as exc:
            return ToolOutput.error(f"glob_files: {exc}")
        # path resolution stats every component: on the pool, not the server's event loop
        return await run_fs(self._glob, args.get("path"), pattern, max(1, max_results), ctx)

    def _glob(self, raw_path: Any, pattern: str, max_results: int, ctx: ToolContext) -> ToolOutput:
        roots, protect = sandbox_roots(ctx.config), protection(ctx.config, run_owner(ctx))
        try:
            base = resolve_search_dir(raw_path, ctx, roots, protect)
        except (PathNotAllowed, ValueError, TypeError) as exc:
            return ToolOutput.error(f"glob_files: {exc}")
        shown_base = project_base(ctx.config)
        if not base.is_dir():
            return ToolOutput.error(f"glob_files: {display_path(base, ctx.config, shown_base)} is not a directory")
        regex = glob_to_regex(pattern)
        found: list[tuple[float, Path]] = []
        for path in walk_files(base, roots, ctx.cancelled, protect):
            rel = path.relative_to(base).as_posix()
            if regex.match(rel):
                try:
                    found.append((path.stat().st_mtime, path))
                except OSError:
                    continue
        found.sort(key=lambda item: (-item[0], str(item[1])))
        total = len(found)
        paths = [display_path(p, ctx.config, shown_base) for _, p in found[:max_results]]
        if not paths:
            return ToolOutput(
                f"No files match {pattern!r} under {display_path(base, ctx.config, shown_base)}",
                metadata={"pattern": pattern, "base": str(base), "paths": [], "total": 0},
            )
        body = "\n".join(paths)
        if total > max_results:
            body += f"\n... {total - max_results} more matches (raise max_results or narrow the pattern)"
        return ToolOutput(body, metadata={"pattern": pattern, "base": str(base), "paths": paths, "total": total})
