"""One exception tree: every exception the package defines sits under ``AstroError``.

Callers (the server's status mapping, the CLI's exit, the kernel's UsageError) catch one root
and map it once; an exception outside the tree escapes them as an internal error.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

import astro_jupyter
from astro_jupyter import errors

PACKAGE_DIR = Path(astro_jupyter.__file__).resolve().parent


def _module_names() -> list[str]:
    names = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        rel = path.relative_to(PACKAGE_DIR.parent).with_suffix("")
        names.append(".".join(p for p in rel.parts if p != "__init__"))
    return names


def _exception_classes() -> list[tuple[str, str]]:
    """(module, class) for every exception class a package module defines (not re-exports)."""
    found = []
    for module in _module_names():
        mod = importlib.import_module(module)
        for name, value in vars(mod).items():
            if isinstance(value, type) and issubclass(value, BaseException) and value.__module__ == module:
                found.append((module, name))
    return found


def test_the_scan_finds_the_known_exceptions() -> None:
    found = set(_exception_classes())
    assert ("astro_jupyter.services.identifiers", "IdentifierError") in found
    assert ("astro_jupyter.agent.tools.filesystem.regular", "FileTooLarge") in found


@pytest.mark.parametrize(("module", "name"), _exception_classes())
def test_every_exception_is_under_astro_error(module: str, name: str) -> None:
    cls = getattr(importlib.import_module(module), name)
    assert issubclass(cls, errors.AstroError), f"{module}.{name} is outside the AstroError tree"


def test_old_names_stay_importable_and_keep_their_builtin_bases() -> None:
    """Code that caught ValueError / OSError still catches these."""
    from astro_jupyter.agent.tools.filesystem.regular import FileTooLarge, NotRegularFile
    from astro_jupyter.agent.tools.filesystem.security import PathNotAllowed, PathProtected
    from astro_jupyter.agent.tools.notebook.bridge import NotOpen
    from astro_jupyter.agent.tools.todo import TodoError
    from astro_jupyter.kernel.loop_thread import RunInterrupted
    from astro_jupyter.services.identifiers import IdentifierError

    for cls in (IdentifierError, PathNotAllowed, PathProtected, TodoError):
        assert issubclass(cls, ValueError) and issubclass(cls, errors.InvalidInput)
    for cls in (FileTooLarge, NotRegularFile):
        assert issubclass(cls, OSError) and issubclass(cls, errors.FileRefused)
    assert RunInterrupted is errors.RunInterrupted
    assert NotOpen is errors.NotOpen
    assert str(FileTooLarge(10, 5)) == "is 10 bytes, over the 5-byte limit"
    assert errors.RateLimited("slow down", 2.5).retry_after == 2.5


def test_the_server_maps_the_tree_once() -> None:
    from astro_jupyter.server.base import status_for
    from astro_jupyter.services.identifiers import IdentifierError, parse_identifier

    with pytest.raises(IdentifierError) as caught:
        parse_identifier("not a paper at all ###")
    assert status_for(caught.value) == 400
    assert status_for(errors.InvalidRequest("gone", status=410)) == 410
    assert status_for(errors.RateLimited("slow down", 1.0)) == 429
    assert status_for(errors.NotAvailable("later")) == 501
    assert status_for(errors.RunInterrupted("stop")) == 500
