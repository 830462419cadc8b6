"""``grep_files``: a Python regex over the text files of a directory (or one file).

Binary files (a NUL byte in the first block) and files over ``MAX_FILE_BYTES`` are
skipped and counted, so the model knows the search was not exhaustive.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterator

from ..base import AgentTool, InterruptBehavior, ToolContext, ToolOutput
from .glob import check_pattern, glob_to_regex, resolve_search_dir, walk_files
from .read import MAX_FILE_BYTES, MAX_LINE_CHARS, looks_binary
from .protected import protection
from .regular import FileTooLarge, NotRegularFile, kind_of, read_regular, run_fs
from .security import PathNotAllowed, display_path, project_base, run_owner, sandbox_roots

DEFAULT_MAX_RESULTS = 100

# Line breaks other than "\n" that ``str.splitlines`` also splits on: such files take the line-by-line scan.
# (Checked with ``in``, one fast substring search each: a regex character class over the text cost
# more than the per-line scan it is meant to avoid.)
_OTHER_LINE_BREAKS = ("\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")
# What can see past the end of a line when the pattern runs over a whole text: text anchors,
# lookarounds, explicit newlines, and flags turned off inline (``(?-m:...)``). Patterns with any
# of these take the line-by-line scan.
_SEES_PAST_THE_LINE = re.compile(r"\\[AZz]|\(\?<?[=!]|\\n|\n|\(\?[a-zA-Z]*-")


def whole_text_form(regex: re.Pattern[str]) -> re.Pattern[str] | None:
    """``regex`` for one scan of a whole file, or None when that could differ from a per-line scan."""
    if _SEES_PAST_THE_LINE.search(regex.pattern):
        return None
    return re.compile(regex.pattern, regex.flags | re.MULTILINE)


def matching_lines(regex: re.Pattern[str], whole: re.Pattern[str] | None, text: str) -> Iterator[tuple[int, str]]:
    """(line number, line) of every line of ``text`` where ``regex.search(line)`` matches, in order,
    exactly as a scan of ``text.splitlines()`` finds them.

    Why not just that scan: it runs the regex once per line from Python, the largest cost of a
    grep over a tree, and it holds the server's GIL. When ``whole`` is given (``whole_text_form``)
    and the text has only "\n" line breaks, one scan of the whole text in C finds the candidate
    lines and each is checked alone; a match that runs over a line break falls back to the scan.
    """
    if whole is not None and not any(brk in text for brk in _OTHER_LINE_BREAKS):
        found = _candidate_lines(regex, whole, text)
        if found is not None:
            yield from found
            return
    for lineno, line in enumerate(text.splitlines(), start=1):
        if regex.search(line):
            yield lineno, line


def _candidate_lines(regex: re.Pattern[str], whole: re.Pattern[str], text: str) -> list[tuple[int, str]] | None:
    found: list[tuple[int, str]] = []
    lineno, counted_to, last_start = 1, 0, -1
    for match in whole.finditer(text):
        if "\n" in match.group():
            return None  # spans lines: only the line-by-line scan says which lines match on their own
        pos = match.start()
        if pos >= len(text) and (not text or text.endswith("\n")):
            break  # past the last line (splitlines has no empty line after a final break)
        start = text.rfind("\n", 0, pos) + 1
        if start == last_start:
            continue  # another match on a line already found
        lineno += text.count("\n", counted_to, start)
        counted_to, last_start = start, start
        end = text.find("\n", pos)
        line = text[start:] if end < 0 else text[start:end]
        if regex.search(line):
            found.append((lineno, line))
    return found


class GrepFilesTool(AgentTool):
    name = "grep_files"
    defer_loading = True
    description = (
        "Search file contents with a regular expression (Python syntax); prints path:line:text for each "
        "matching line. Narrow with path (a directory or file) and glob (e.g. '*.md'); binary files are skipped."
    )
    parameters = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Regular expression."},
            "path": {"type": "string", "description": "Directory or file to search (default: the project root)."},
            "glob": {"type": "string", "description": "Only files matching this glob, e.g. '*.py'."},
            "max_results": {"type": "integer", "minimum": 1, "default": DEFAULT_MAX_RESULTS},
            "ignore_case": {"type": "boolean", "default": False},
        },
        "required": ["pattern"],
        "additionalProperties": False,
    }
    interrupt_behavior = InterruptBehavior.CANCEL
    is_readonly = True

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        raw = args.get("pattern")
        if not isinstance(raw, str) or raw == "":
            return ToolOutput.error("grep_files: pattern must be a non-empty regular expression")
        try:
            regex = re.compile(raw, re.IGNORECASE if args.get("ignore_case") else 0)
        except re.error as exc:
            return ToolOutput.error(f"grep_files: invalid regular expression {raw!r}: {exc}")
        try:
            file_glob = check_pattern(args["glob"], "glob") if args.get("glob") else None
            max_results = max(1, int(args.get("max_results") or DEFAULT_MAX_RESULTS))
        except (ValueError, TypeError) as exc:
            return ToolOutput.error(f"grep_files: {exc}")
        # path resolution stats every component: on the pool, not the server's event loop
        return await run_fs(self._grep, regex, args.get("path"), file_glob, max_results, ctx)

    def _grep(self, regex: re.Pattern[str], raw_path: Any, file_glob: str | None, max_results: int, ctx: ToolContext) -> ToolOutput:
        roots, protect = sandbox_roots(ctx.config), protection(ctx.config, run_owner(ctx))
        try:
            base = resolve_search_dir(raw_path, ctx, roots, protect)
        except (PathNotAllowed, ValueError, TypeError) as exc:
            return ToolOutput.error(f"grep_files: {exc}")
        shown_base = project_base(ctx.config)
        if not base.exists():
            return ToolOutput.error(f"grep_files: {display_path(base, ctx.config, shown_base)} does not exist")
        if not base.is_dir() and not base.is_file():  # a FIFO or device: refused before anything opens it
            return ToolOutput.error(
                f"grep_files: {display_path(base, ctx.config, shown_base)} {NotRegularFile(kind_of(base.stat().st_mode))}"
            )
        special: list[Path] = []
        files = [base] if base.is_file() else walk_files(base, roots, ctx.cancelled, protect, special)
        matcher = glob_to_regex(file_glob) if file_glob else None
        whole = whole_text_form(regex)
        matches: list[dict[str, Any]] = []
        skipped_binary = skipped_large = searched = 0
        more = False
        for path in files:
            if matcher is not None and base.is_dir() and not matcher.match(path.relative_to(base).as_posix()):
                continue
            try:
                data = read_regular(path, MAX_FILE_BYTES)
            except FileTooLarge:
                skipped_large += 1
                continue
            except NotRegularFile:  # swapped in after the walk looked
                special.append(path)
                continue
            except OSError:
                continue
            if looks_binary(data[:8192]):
                skipped_binary += 1
                continue
            searched += 1
            shown = None  # computed at the first match: most files searched have none
            for lineno, line in matching_lines(regex, whole, data.decode("utf-8", errors="replace")):
                if len(matches) >= max_results:
                    more = True
                    break
                if shown is None:
                    shown = display_path(path, ctx.config, shown_base)
                matches.append({"path": shown, "line": lineno, "text": line[:MAX_LINE_CHARS]})
            if more:
                break
        notes = []
        if skipped_binary:
            notes.append(f"{skipped_binary} binary file(s) skipped")
        if special:
            notes.append(f"{len(special)} FIFO/device/socket file(s) skipped")
        if skipped_large:
            notes.append(f"{skipped_large} file(s) over {MAX_FILE_BYTES} bytes skipped")
        if more:
            notes.append(f"stopped at max_results={max_results}; narrow the pattern, path or glob")
        meta = {
            "pattern": regex.pattern,
            "base": str(base),
            "matches": matches,
            "files_searched": searched,
            "skipped_binary": skipped_binary,
            "skipped_special": len(special),
            "truncated": more,
        }
        if not matches:
            body = f"No matches for {regex.pattern!r} in {display_path(base, ctx.config, shown_base)} ({searched} file(s) searched)"
        else:
            body = "\n".join(f"{m['path']}:{m['line']}:{m['text']}" for m in matches)
        if notes:
            body += "\n(" + "; ".join(notes) + ")"
        return ToolOutput(body, metadata=meta)
