"""Atomic file writes (temp file in the same folder + rename): a crash or a full disk never leaves
half a file, and an existing file keeps its permission bits. Shared by the file tools and the
notebook service, so it lives outside both."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def atomic_write_text(path: Path, content: str) -> int:
    """Write ``content`` (UTF-8) to ``path`` via temp file + rename; return bytes written."""
    data = content.encode("utf-8")
    mode = None
    try:
        mode = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        pass
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:40]}.", suffix=".tmp", dir=str(path.parent))
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return len(data)
