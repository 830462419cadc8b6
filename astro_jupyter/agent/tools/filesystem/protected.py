"""The hard deny list of the filesystem sandbox: paths no permission rule can open.

The sandbox roots (``security.py``) say where the file tools may go at all; this module
says what inside them stays shut, whatever the permission rules, the mode, a user's
"always" or a hook decide, because writing there runs code or grants power, and reading
there leaks credentials or other people's data:

- reads and writes: the database (``astro.db*``), ``tool-results/owners/`` of other owners, the
  Jupyter runtime directory (server tokens, kernel keys), Jupyter and IPython config
  directories wherever ``jupyter --paths`` / IPython put them, and dot-entries where
  secrets live (``.ssh``, ``.aws``, ``.env`` ... ``fs_secret_names``);
- writes only: every other dotfile and dot-directory below a root (``.bashrc``, ``.git/hooks``,
  ``.config`` ...), all of ``tool-results/``, Jupyter data directories (kernelspecs,
  extensions), ``site-packages`` and the interpreter's directories, ``*.pth`` files,
  ``sitecustomize.py``, a venv's ``pyvenv.cfg`` (its ``home`` line picks the interpreter), config
  files by name (``jupyter_*_config.py``, ``ipython_*config.py``), the file ``$PYTHONSTARTUP`` names,
  the entries of every directory on ``$PATH`` (and ``~/bin``, ``~/.local/bin``, which Debian's
  ``.profile`` puts first on PATH once they exist), and the library's own folders other than
  ``notes/`` and ``skills/`` (``papers/``, ``team/``, ``models/`` ...);
- both: whatever ``fs_protected_paths`` adds; another owner's ``team/`` folder (the ownerless
  team included: a team is private) and ``skills/owners/<key>/``;
- writes of a named owner: the shared ``skills/`` outside its own ``skills/owners/<key>/``.

Dot-names are judged below the deepest root that holds the path, so the library itself
(``~/.astro_jupyter``) is not a "dot-directory" to its own ``skills/``.
"""

from __future__ import annotations

import fnmatch
import os
import site
import sys
import sysconfig
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from ....services.owners import OWNERS_DIR, owner_dir, owner_key

if TYPE_CHECKING:
    from ....config import AstroConfig

__all__ = ["OWNERS_DIR", "owner_key", "protection", "tool_results_dir_for"]

# Dot-names where credentials live: never even read. ``fs_secret_names`` adds to these, never replaces them.
SECRET_NAMES = (".ssh", ".gnupg", ".aws", ".azure", ".kube", ".docker", ".netrc", ".pgpass", ".git-credentials",
                ".npmrc", ".pypirc", ".env", ".env.*", ".envrc", ".config", ".local", ".jupyter", ".ipython",
                ".password-store", ".vault-token", ".mozilla", ".*history")
# File names that execute or configure code wherever they sit (checked on every write).
EXECUTING_NAMES = ("*.pth", "sitecustomize.py", "usercustomize.py", "jupyter_*config.py", "jupyter_*config.json",
                   "ipython_*config.py", "ipython_*config.json", "pyvenv.cfg")
# Directories a login shell puts on PATH once they exist (Debian/Ubuntu ``~/.profile``), on PATH or not yet.
USER_BIN_DIRS = ("~/bin", "~/.local/bin")
# The library's own folders, when the library is also the project (else all of it but notes/ and skills/).
LIBRARY_DIRS = ("papers", "team", "tool-results", "models")
# Directory names that hold installed code wherever they sit.
PACKAGE_DIRS = ("site-packages", "dist-packages")
_PATH_ENV = ("HOME", "JUPYTER_CONFIG_DIR", "JUPYTER_CONFIG_PATH", "JUPYTER_PATH", "JUPYTER_DATA_DIR",
             "JUPYTER_RUNTIME_DIR", "JUPYTER_PREFER_ENV_PATH", "JUPYTER_PLATFORM_DIRS", "JUPYTER_NO_CONFIG",
             "IPYTHONDIR", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_RUNTIME_DIR", "PYTHONUSERBASE", "PATH",
             "PYTHONSTARTUP")


def _real(raw: str | os.PathLike[str]) -> str:
    return os.path.realpath(os.path.expanduser(os.fspath(raw)))


def _fold(path: str) -> str:
    return unicodedata.normalize("NFC", path).casefold()


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix.rstrip(os.sep) + os.sep)


@lru_cache(maxsize=8)
def _run_paths(_env: tuple[str | None, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(directories whose entries a shell runs by name, files Python runs at start), as real paths.

    Only absolute ``$PATH`` entries: a relative one (``.``) moves with the shell's directory."""
    dirs = [d for d in (os.environ.get("PATH") or "").split(os.pathsep) if os.path.isabs(d)]
    dirs += list(USER_BIN_DIRS)
    files = [os.environ["PYTHONSTARTUP"]] if os.environ.get("PYTHONSTARTUP") else []
    return tuple(dict.fromkeys(_real(d) for d in dirs)), tuple(dict.fromkeys(_real(f) for f in files))


@lru_cache(maxsize=8)
def _host_paths(_env: tuple[str | None, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(secret dirs, code dirs) of this host's Jupyter, IPython and Python, as real paths.

    Cached per value of the environment variables that move them (``_env`` is the key).
    """
    secret: list[str] = []
    code: list[str] = []
    try:
        from jupyter_core import paths as jp

        secret += [jp.jupyter_config_dir(), *jp.jupyter_config_path(), jp.jupyter_runtime_dir()]
        code += [jp.jupyter_data_dir(), *jp.jupyter_path()]
    except Exception:  # noqa: BLE001 - without jupyter_core, the usual places still count
        secret += ["~/.jupyter", "~/.local/share/jupyter/runtime"]
        code += ["~/.local/share/jupyter"]
    # IPython's own rule (IPython.paths.get_ipython_dir, which also creates the directory):
    secret += [os.environ.get("IPYTHONDIR") or "~/.ipython", "~/.ipython"]
    try:
        code += [*site.getsitepackages(), site.getusersitepackages()]
    except Exception:  # noqa: BLE001 - some embedded interpreters lack these
        pass
    sys_paths = sysconfig.get_paths()
    code += [sys_paths[k] for k in ("purelib", "platlib", "stdlib", "platstdlib", "scripts", "include") if k in sys_paths]
    code += [os.path.join(prefix, "bin") for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix}]
    return (tuple(dict.fromkeys(_real(p) for p in secret if p)), tuple(dict.fromkeys(_real(p) for p in code if p)))


def host_paths() -> tuple[tuple[str, ...], tuple[str, ...]]:
    return _host_paths(tuple(os.environ.get(k) for k in _PATH_ENV))


def run_paths() -> tuple[tuple[str, ...], tuple[str, ...]]:
    return _run_paths(tuple(os.environ.get(k) for k in _PATH_ENV))


def tool_results_dir_for(config: "AstroConfig", owner: str = "") -> Path:
    """Where a run's persisted outputs live: ``tool-results/`` itself for ownerless runs (kernel,
    CLI, the shared-token user), ``tool-results/owners/<key>/`` for a named identity."""
    return owner_dir(config.tool_results_dir, owner)


@dataclass(frozen=True)
class Protection:
    """The deny list for one config and one owner, precomputed so a directory walk stays cheap."""

    roots: tuple[str, ...]  # deepest first
    home: str
    db_name: str
    results: str
    owners: str  # tool-results/owners: the named owners' folders
    own_results: str
    teams: str  # team/: the ownerless team, and owners/<key>/ per named identity
    own_team: str
    skills: str  # skills/: installed skills everyone reads, and owners/<key>/ per named identity
    own_skills: str
    secret_dirs: tuple[str, ...]
    code_dirs: tuple[str, ...]
    secret_names: tuple[str, ...]
    extra: tuple[str, ...]
    owner_known: bool = True  # False: judged before the run's owner is known, its folders are judged later
    bin_dirs: tuple[str, ...] = ()  # their entries run by name from a shell
    startup_files: tuple[str, ...] = ()  # $PYTHONSTARTUP
    library_shut: tuple[str, ...] = ()  # the library's own folders (or the library itself) ...
    library_open: tuple[str, ...] = ()  # ... but for notes/ and skills/ (these four: NFC, casefolded)

    def reason(self, path: Path | str, *, write: bool) -> str | None:
        """Why ``path`` (already resolved) is shut for this access, or None when it is not."""
        p = os.fspath(path)
        name = os.path.basename(p)
        folded = name.casefold()
        if os.path.dirname(p) == self.home and folded.startswith(self.db_name):
            return "it is the astro-jupyter database"
        if _under(p, self.results) and p != self.results:
            if write:
                return "tool-results/ is written by astro-jupyter only"
            named = self.own_results != self.results
            if _under(p, self.owners) and not (named and (p == self.owners or _under(p, self.own_results))):
                return "it belongs to another user's tool results"  # a named owner may pass owners/ to its own
        if self.owner_known:
            if self._another_team(p):
                return "it belongs to another user's team"
            if _under(p, self.skills) and _another_owners(p, self.skills, self.own_skills):
                return "it belongs to another user's skills"
            if write and _under(p, self.skills) and self.own_skills != self.skills and not _under(p, self.own_skills):
                return f"the shared skills are installed by the server's owner; your own skills go in {self.own_skills}"
        for pattern in self.extra:
            if _under(p, pattern) or fnmatch.fnmatch(p, pattern) or fnmatch.fnmatch(name, pattern):
                return "it is listed in fs_protected_paths"
        for prefix in self.secret_dirs:
            if _under(p, prefix):
                return f"it is Jupyter/IPython configuration or runtime data ({prefix})"
        below = self._below_root(p)
        for part in below:
            if part.startswith(".") and any(fnmatch.fnmatch(part.casefold(), g) for g in self.secret_names):
                return f"{part} holds credentials"
        if not write:
            return None
        for part in below:
            if part.startswith("."):
                return f"{part} is a dotfile or dot-directory (shell, editor and tool configuration)"
        if any(fnmatch.fnmatch(folded, g) for g in EXECUTING_NAMES):
            return f"{name} is a file Python or Jupyter runs or loads as configuration"
        same = _fold(p)  # as a case-insensitive, normalising file system (macOS) would see it
        if same in self.startup_files:
            return "it is the file $PYTHONSTARTUP names (Python runs it when it starts)"
        parent = os.path.dirname(same)
        for directory in self.bin_dirs:
            if same == directory or parent == directory:
                return f"{directory} is a directory on PATH (a shell runs what is in it by name)"
        if not any(_under(same, d) for d in self.library_open):
            for directory in self.library_shut:
                if _under(same, directory):
                    return "it is astro-jupyter's own data (only its notes/ and skills/ folders may be written)"
        for prefix in self.code_dirs:
            if _under(p, prefix):
                return f"it is installed code or a Jupyter data directory ({prefix})"
        if any(part.casefold() in PACKAGE_DIRS for part in Path(p).parts):
            return "it is inside a Python package directory"
        return None

    def _another_team(self, p: str) -> bool:
        """Teams are private, the ownerless one (team/ minus owners/) too: a named owner passes
        team/ and team/owners/ on the way to its own folder and sees nothing else there."""
        if not _under(p, self.teams) or p == self.teams:
            return False
        owners = os.path.join(self.teams, OWNERS_DIR)
        if self.own_team == self.teams:
            return _under(p, owners)
        return not (p == owners or _under(p, self.own_team))

    def _below_root(self, p: str) -> list[str]:
        for root in self.roots:
            if _under(p, root):
                return [part for part in p[len(root):].split(os.sep) if part]
        return [part for part in p.split(os.sep) if part]


def _another_owners(p: str, base: str, own: str) -> bool:
    """``p`` lies in ``base/owners/`` but not in the run's own folder ``own`` (``base`` itself when
    ownerless), nor is it ``owners/`` itself, which a named owner passes on the way to its own."""
    owners = os.path.join(base, OWNERS_DIR)
    return _under(p, owners) and not (own != base and (p == owners or _under(p, own)))


def protection(config: "AstroConfig", owner: str | None = "", *, owner_known: bool = True) -> Protection:
    """Build the deny list for ``config`` and the run's ``owner`` (None or "" = ownerless).
    ``owner_known=False`` (a permission rule, judged from the arguments alone) leaves out the
    per-owner team and skills folders; the tool's own ``resolve_path`` judges them with the owner."""
    secret_dirs, code_dirs = host_paths()
    bin_dirs, startup_files = run_paths()
    resolved: dict[str, str] = {}  # each path resolved once per call (a realpath is ~10 lstats): never kept across calls

    def real(raw: str | os.PathLike[str]) -> str:
        key = os.fspath(raw)
        if key not in resolved:
            resolved[key] = _real(key)
        return resolved[key]

    roots = {real(r) for r in (config.home_path, config.skills_dir, config.project_root or os.getcwd())}
    library, project = real(config.home_path), real(config.project_root or os.getcwd())
    # A library that is (or holds) the project: only its own folders are shut, not the user's files.
    shut = (tuple(os.path.join(library, d) for d in LIBRARY_DIRS) if _under(project, library) else (library,))
    extra = tuple(real(p) if os.sep in p and not any(c in p for c in "*?[") else p
                  for p in config.fs_protected_paths if p.strip())
    return Protection(
        roots=tuple(sorted(roots, key=len, reverse=True)),
        home=real(config.home_path),
        db_name=config.db_path.name.casefold(),
        results=real(config.tool_results_dir),
        owners=os.path.join(real(config.tool_results_dir), OWNERS_DIR),
        own_results=real(tool_results_dir_for(config, owner or "")),
        teams=real(config.team_dir),
        own_team=real(owner_dir(config.team_dir, owner)),
        skills=real(config.skills_dir),
        own_skills=real(owner_dir(config.skills_dir, owner)),
        secret_dirs=secret_dirs,
        code_dirs=code_dirs,
        secret_names=tuple(dict.fromkeys(n.casefold() for n in (*SECRET_NAMES, *config.fs_secret_names) if n.strip())),
        extra=extra,
        owner_known=owner_known,
        bin_dirs=tuple(_fold(d) for d in bin_dirs if any(_under(d, r) for r in roots)),
        startup_files=tuple(_fold(f) for f in startup_files),
        library_shut=tuple(_fold(d) for d in shut),
        library_open=(_fold(real(config.notes_dir)), _fold(real(config.skills_dir))),
    )


def free_write_dirs(config: "AstroConfig") -> list[Path]:
    """The library's own notes folder: writes there need no question (skills/ asks, showing the
    skill: ``security.write_permission_rules``)."""
    return [Path(_real(config.notes_dir))]


def root_warning(config: "AstroConfig") -> str | None:
    """A sentence for ``doctor`` and the first run when the project root is the home directory
    (or above it): then the file tools see every file the user has."""
    root = Path(_real(config.project_root or os.getcwd()))
    home = Path(_real(Path.home()))
    if root == home or home.is_relative_to(root):
        where = "your home directory" if root == home else f"{root}, which contains your home directory"
        return (
            f"The project root is {where} ({home}): the file tools can read and propose changes to every "
            "file you have there. Dotfiles, Jupyter/IPython configuration, site-packages and the database "
            "stay blocked, but consider setting ASTRO_PROJECT_ROOT (c.AstroConfig.project_root) to a project folder."
        )
    return None
