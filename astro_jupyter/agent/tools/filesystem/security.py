"""The filesystem sandbox: every path a filesystem tool touches must lie inside a root.

Roots are the library (``config.home_path``), the skills directory and the project root.
A path is judged twice: first as a string (``..``, ``~``, NUL and control characters,
Unicode look-alikes that normalise to ``..``, absurd lengths are refused outright), then
as the real path it names — symlinks resolved from the deepest existing ancestor, a
dangling symlink followed to its target — which must be ``is_relative_to`` a resolved
root. Tools then operate on the *resolved* path, so a link cannot redirect the I/O
after the check. Inside the roots, the hard deny list of ``protected.py`` (the database,
other owners' tool results, dotfiles, Jupyter/IPython config, site-packages ...) is
enforced here for every access, after any permission rule or hook had its say.
Errors say what was wrong and which roots are allowed, because the model reads them
and should be able to correct its call.
"""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Literal

from ....errors import InvalidInput
from ..base import PermissionRule
from .protected import Protection, free_write_dirs, protection

if TYPE_CHECKING:
    from ....config import AstroConfig
    from ..base import ToolContext

Access = Literal["read", "write"]

MAX_PATH_CHARS = 4096
MAX_NAME_BYTES = 255
MAX_DEPTH = 64  # components; deeper trees are almost surely a runaway loop, not research
SKILL_QUESTION_MAX_CHARS = 20_000  # a skill write quotes its text in full; longer ones are refused


class PathNotAllowed(InvalidInput):
    """A path the sandbox refuses; ``str(exc)`` is the message the model sees."""


class PathProtected(PathNotAllowed):
    """A path inside the roots that the hard deny list shuts for this access."""


def run_owner(ctx: "ToolContext | None") -> str:
    """The owner of the run a tool call belongs to ("" for the kernel, the CLI, the shared-token user)."""
    return ctx.owner if ctx is not None else ""


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


def resolve_path(raw: str, config: "AstroConfig", *, access: Access | None = "read", owner: str | None = "",
                 roots: list[Path] | None = None, protect: Protection | None = None) -> Path:
    """Check ``raw`` and return the resolved path inside a root, or raise ``PathNotAllowed``.

    Relative paths are taken from the project root. ``access`` picks the deny list to
    apply (``PathProtected``); None skips it, for callers that judge the path themselves.
    ``roots`` and ``protect``: this call's ``sandbox_roots(config)`` and ``protection(config, owner)``
    when the caller has built them already (a search walks with them too); built here otherwise.
    """
    _check_string(raw)
    roots = sandbox_roots(config) if roots is None else roots
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
    if access is not None:
        why = (protection(config, owner) if protect is None else protect).reason(resolved, write=access == "write")
        if why:
            raise PathProtected(protected_message(raw, resolved, why, access))
    return resolved


def protected_message(raw: str, resolved: Path, why: str, access: Access) -> str:
    via = f" (it resolves to {resolved})" if str(resolved) != raw else ""
    verb = "written" if access == "write" else "read"
    return f"path {_short(raw)}{via} cannot be {verb}: {why}. This is a hard limit no permission can lift."


def write_permission_rules(
    tool_name: str, raw: Any, config: "AstroConfig | None", what: str, text: str | None = None
) -> list[PermissionRule]:
    """The permission rule of a write: Deny on the hard deny list, none in the library's notes
    folder, Ask everywhere else. A path the sandbox refuses gets no rule: the tool itself then
    reports the sandbox error. ``what`` describes the change for the question; ``text`` shows what
    will be written, quoted in full when the file is in the skills folder (a skill is
    instructions a later run follows, so the user must see them before they exist)."""
    if config is None:  # built without a config: nothing to judge against, so a person decides
        return [PermissionRule("ask", tool_name, f"{tool_name} wants to change {raw!r}: {what}")]
    if not isinstance(raw, str):
        return []
    try:
        path = resolve_path(raw, config, access=None)
    except PathNotAllowed:
        return []
    why = protection(config, owner_known=False).reason(path, write=True)
    if why:
        return [PermissionRule("deny", tool_name, protected_message(raw, path, why, "write"))]
    shown = display_path(path, config)
    if inside_roots(path, [real_path(config.skills_dir)]):
        if text is None or len(text) > SKILL_QUESTION_MAX_CHARS:
            size = "content that cannot be shown" if text is None else f"{len(text)} characters"
            return [PermissionRule("deny", tool_name, f"{tool_name} wants to change the skill file {shown} with {size}; "
                                   f"a skill change is shown in full in its question, at most {SKILL_QUESTION_MAX_CHARS} "
                                   "characters: write a shorter skill")]
        return [PermissionRule("ask", tool_name, f"{tool_name} wants to change the skill file {shown}: {what}. A skill "
                               "is instructions later runs follow (load_skill).\n" + text)]
    if inside_roots(path, free_write_dirs(config)):
        return []
    return [PermissionRule("ask", tool_name, f"{tool_name} wants to change {shown}: {what}")]


def is_allowed_file(path: Path, roots: Iterable[Path]) -> bool:
    """For directory walks: the entry's real path must stay inside a root (links out are skipped)."""
    try:
        return inside_roots(real_path(path), roots)
    except (OSError, RuntimeError, ValueError):
        return False


def project_base(config: "AstroConfig") -> Path:
    """The project root's real path: what ``display_path`` shows paths relative to."""
    return real_path(Path(config.project_root or os.getcwd()))


def display_path(path: Path, config: "AstroConfig", base: Path | None = None) -> str:
    """Show paths under the project root relative to it (shorter for the model), others absolute.

    ``base``: ``project_base(config)`` computed once by a caller showing many paths (a walk
    would otherwise resolve the root's symlinks again for every file)."""
    if base is None:
        base = project_base(config)
    try:
        rel = path.relative_to(base)
    except ValueError:
        return str(path)
    return str(rel) if str(rel) != "." else "."
