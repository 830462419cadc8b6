"""Large tool outputs go to disk once; the model gets a stub with the path and a preview.

A 200 kB paper dump in the conversation would crowd out everything else, so outputs
longer than ``MAX_OUTPUT_CHARS`` are written to ``tool-results/{tool_call_id}.txt`` and
replaced by a ``<persisted-output>`` stub the model can follow up with ``read_file``.
Writes use create-new semantics: a file is never overwritten. Re-persisting the same
content under the same id reuses the file (idempotent); different content under a
reused id (providers recycle ids like ``call_1``) gets a content-hash suffix instead.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

MAX_OUTPUT_CHARS = 4000  # longer tool outputs go to tool-results/ with a preview in their place
PREVIEW_CHARS = 2000  # how much of such an output stays inline
_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass(frozen=True)
class PersistedOutput:
    content: str  # what the model sees (the original, or the stub)
    path: Path | None = None  # where the full text lives when persisted
    chars: int = 0


def safe_file_stem(tool_call_id: str) -> str:
    """An id usable as a file name: no separators, no leading dots, bounded length."""
    stem = _SAFE.sub("_", tool_call_id).lstrip(".")[:120]
    return stem or "call"


def _write_once(path: Path, content: str) -> bool:
    """Create ``path`` with ``content``; True if it now holds exactly that content."""
    data = content.encode("utf-8")
    try:
        with open(path, "xb") as fh:
            fh.write(data)
        return True
    except FileExistsError:
        try:
            return path.read_bytes() == data
        except OSError:
            return False


def persist_text(directory: Path, tool_call_id: str, content: str) -> Path:
    """Write ``content`` under ``directory`` once; return the file that holds it."""
    directory.mkdir(parents=True, exist_ok=True)
    stem = safe_file_stem(tool_call_id)
    path = directory / f"{stem}.txt"
    if _write_once(path, content):
        return path
    digest = hashlib.sha256(content.encode("utf-8")).hexdigest()[:12]
    path = directory / f"{stem}-{digest}.txt"
    if _write_once(path, content):
        return path
    raise OSError(f"could not persist tool output to {path}")


def render_stub(path: Path, content: str, preview_chars: int) -> str:
    preview = content[:preview_chars]
    rest = len(content) - len(preview)
    tail = f"\n... ({rest} more characters; read the whole output with read_file)" if rest > 0 else ""
    return f'<persisted-output path="{path}" chars="{len(content)}">\n{preview}{tail}\n</persisted-output>'


def maybe_persist_tool_result(
    content: str, tool_call_id: str, directory: Path, max_chars: int, preview_chars: int = 2000
) -> PersistedOutput:
    """Pass short outputs through; persist long ones and return the stub in their place."""
    if max_chars <= 0 or len(content) <= max_chars:
        return PersistedOutput(content)
    path = persist_text(directory, tool_call_id, content)
    return PersistedOutput(render_stub(path, content, min(preview_chars, max_chars)), path, len(content))
