"""The filesystem sandbox: every path a filesystem tool touches must lie inside a root.

Roots are the library (``config.home_path``), the skills directory and the project root.
A path is judged twice: first as a string (``..``, ``~``, NUL and control characters,
Unicode look-alikes that normalise to ``..``, absurd lengths are refused outright), then
as the real path it names — symlinks resolved from the deepest existing ancestor, a
dangling symlink followed to its target — which must be ``is_relative_to`` a resolved
root. Tools then operate on the *resolved* path, so a link cannot redirect the I/O
after the check. Errors say what was wrong and which roots are allowed, because the
model reads them and should be able to correct its call.
"""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:
    from ....config import AstroConfig

MAX_PATH_CHARS = 4096
MAX_NAME_BYTES = 255
MAX_DEPTH = 64  # components; deeper trees are almost surely a runaway loop, not research


class PathNotAllowed(ValueError):
    """A path the sandbox refuses; ``str(exc)`` is the message the model sees."""


def sandbox_roots(config: "AstroConfig") -> list[Path]:
    """The resolved roots, library first; duplicates (skills inside home) are kept harmlessly."""
    roots: list[Path] = []
    for raw in (config.home_path, config.skills_dir, Path(config.project_root or os.getcwd())):
        resolved = Path(os.path.realpath(raw))
        if resolved not in roots:
            roots.append(resolved)
    return roots


def _check_string(raw: str) -> None:
    if not isinstance(raw, str) or not raw.strip():
        raise PathNotAllowed("path is empty; give a file path relative to the project root or an absolute path")
    if "\x00" in raw:
        raise PathNotAllowed("path contains a NUL byte")
    if any(unicodedata.category(ch) == "Cc" for ch in raw):
        raise PathNotAllowed("path contains control characters")
    if len(raw) > MAX_PATH_CHARS:
        raise PathNotAllowed(f"path is {len(raw)} characters long (limit {MAX_PATH_CHARS})")
    folded = unicodedata.normalize("NFKC", raw)
    if ".." in raw or ".." in folded:
        raise PathNotAllowed(f"path {_short(raw)} contains '..'; parent-directory traversal is not allowed")
    if "~" in raw or "~" in folded:
        raise PathNotAllowed(f"path {_short(raw)} contains '~'; home-directory expansion is not allowed")
    parts = Path(raw).parts
    if len(parts) > MAX_DEPTH:
        raise PathNotAllowed(f"path has {len(parts)} components (limit {MAX_DEPTH})")
    for part in parts:
        if len(part.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
            raise PathNotAllowed(f"a path component is longer than {MAX_NAME_BYTES} bytes")


def _short(raw: str, limit: int = 120) -> str:
    return repr(raw if len(raw) <= limit else raw[: limit - 3] + "...")


def real_path(candidate: Path) -> Path:
    """Resolve symlinks of the deepest existing ancestor and keep the missing tail as is.

    ``os.path.realpath`` (non-strict) does exactly this and also follows a dangling
    final symlink to its target, so writing "through" a dangling link is judged by where
    the data would really land.
    """
    return Path(os.path.realpath(candidate))


def inside_roots(path: Path, roots: Iterable[Path]) -> bool:
    return any(path == root or path.is_relative_to(root) for root in roots)


def resolve_path(raw: str, config: "AstroConfig") -> Path:
    """Check ``raw`` and return the resolved path inside a root, or raise ``PathNotAllowed``.

    Relative paths are taken from the project root. The same check serves reads and writes.
    """
    _check_string(raw)
    roots = sandbox_roots(config)
    base = Path(config.project_root or os.getcwd())
    candidate = Path(raw) if os.path.isabs(raw) else base / raw
    try:
        resolved = real_path(candidate)
    except (OSError, RuntimeError, ValueError) as exc:  # symlink loops, invalid names
        raise PathNotAllowed(f"cannot resolve path {_short(raw)}: {exc}") from exc
    if not inside_roots(resolved, roots):
        shown = ", ".join(str(r) for r in roots)
        via = f" (it resolves to {resolved})" if resolved != candidate else ""
        raise PathNotAllowed(f"path {_short(raw)} is outside the allowed roots{via}; allowed: {shown}")
    return resolved


def is_allowed_file(path: Path, roots: Iterable[Path]) -> bool:
    """For directory walks: the entry's real path must stay inside a root (links out are skipped)."""
    try:
        return inside_roots(real_path(path), roots)
    except (OSError, RuntimeError, ValueError):
        return False


def display_path(path: Path, config: "AstroConfig") -> str:
    """Show paths under the project root relative to it (shorter for the model), others absolute."""
    base = real_path(Path(config.project_root or os.getcwd()))
    try:
        rel = path.relative_to(base)
    except ValueError:
        return str(path)
    return str(rel) if str(rel) != "." else "."
