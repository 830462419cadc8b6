"""The sandbox: string-level refusals, symlink resolution, and a property over arbitrary paths.

The property test watches the interpreter itself (``sys.addaudithook``): every ``open``,
``mkdir``, ``rename``, ``chmod``, ``remove`` and directory listing done while a tool runs
is recorded, and each such path's real path must lie inside a root. So "the tool either
errors or touches only paths inside the roots" is checked on what the process really did,
not on what the tool says it did.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from astro_jupyter.services.container import ServiceContainer
from astro_jupyter.agent.tools.filesystem.security import PathNotAllowed, resolve_path, sandbox_roots

# ---------------------------------------------------------------------------------------
# direct checks of resolve_path


@pytest.mark.parametrize(
    "raw, message",
    [
        ("../outside/secret.txt", "'..'"),
        ("sub/../../x", "'..'"),
        ("~/x", "'~'"),
        ("a\x00b", "NUL"),
        ("a\nb", "control"),
        ("．．/outside/secret.txt", "'..'"),  # fullwidth full stops normalise to ".."
        ("\u2025/x", "'..'"),  # TWO DOT LEADER normalises to ".."
        ("", "empty"),
        ("x" * 5000, "characters long"),
        ("d/" + "y" * 300, "longer than 255 bytes"),
        ("d/" * 100 + "x", "101 components"),
    ],
)
def test_string_level_refusals(sandbox_base, raw: str, message: str) -> None:
    with pytest.raises(PathNotAllowed, match=message):
        resolve_path(raw, sandbox_base.config)


def test_absolute_paths_inside_and_outside(sandbox_base) -> None:
    sandbox = sandbox_base
    assert resolve_path(str(sandbox.home / "papers" / "a.pdf"), sandbox.config) == (
        sandbox.home / "papers" / "a.pdf"
    ).resolve()
    assert resolve_path(str(sandbox.config.skills_dir / "s.md"), sandbox.config).name == "s.md"
    with pytest.raises(PathNotAllowed, match="outside the allowed roots"):
        resolve_path("/etc/passwd", sandbox.config)
    with pytest.raises(PathNotAllowed, match="outside the allowed roots"):
        resolve_path(str(sandbox.outside / "secret.txt"), sandbox.config)


def test_symlinks_are_resolved_before_the_prefix_check(sandbox_base) -> None:
    sandbox = sandbox_base
    (sandbox.project / "out").symlink_to(sandbox.outside, target_is_directory=True)
    (sandbox.project / "dangling").symlink_to(sandbox.outside / "not-yet.txt")
    (sandbox.project / "ok").symlink_to(sandbox.home / "papers", target_is_directory=True)
    with pytest.raises(PathNotAllowed, match="resolves to"):
        resolve_path("out/secret.txt", sandbox.config)
    with pytest.raises(PathNotAllowed, match="outside"):
        resolve_path("out/new/deeper.txt", sandbox.config)  # missing tail under a link out
    with pytest.raises(PathNotAllowed, match="outside"):
        resolve_path("dangling", sandbox.config)  # a write through a dangling link
    assert resolve_path("ok/x.pdf", sandbox.config) == (sandbox.home / "papers" / "x.pdf").resolve()


@pytest.mark.asyncio
async def test_tools_report_sandbox_errors(sandbox) -> None:
    (sandbox.project / "out").symlink_to(sandbox.outside, target_is_directory=True)
    for name, args in [
        ("read_file", {"path": "out/secret.txt"}),
        ("file_write", {"path": "out/secret.txt", "content": "pwned"}),
        ("file_edit", {"path": "out/secret.txt", "old_string": "TOP", "new_string": "X"}),
        ("grep_files", {"pattern": "SECRET", "path": "out"}),
        ("glob_files", {"pattern": "*", "path": str(sandbox.outside)}),
    ]:
        out = await sandbox.call(name, **args)
        assert out.is_error, name
        assert "outside the allowed roots" in out.content and "allowed:" in out.content
        assert "TOP SECRET" not in out.content
    assert (sandbox.outside / "secret.txt").read_text() == "TOP SECRET\n"


# ---------------------------------------------------------------------------------------
# the property

_WATCHED = {"open", "os.mkdir", "os.rename", "os.chmod", "os.remove", "os.rmdir", "os.scandir", "os.listdir",
            "os.truncate", "os.symlink", "os.utime", "shutil.copyfile", "shutil.rmtree"}


class _Recorder:
    """Collects paths the process touches while ``active`` (audit hooks cannot be removed)."""

    def __init__(self) -> None:
        self.active = False
        self.paths: list[tuple[str, str]] = []
        self.lock = threading.Lock()

    def __call__(self, event: str, args: tuple[Any, ...]) -> None:
        if not self.active or event not in _WATCHED or not args:
            return
        targets = list(args[:2]) if event == "os.rename" else [args[0]]
        for target in targets:
            if isinstance(target, int) or target is None:
                continue  # file descriptors
            if isinstance(target, bytes):
                target = os.fsdecode(target)
            with self.lock:
                self.paths.append((event, os.path.join(os.getcwd(), os.fspath(target))))


_RECORDER = _Recorder()
sys.addaudithook(_RECORDER)

_PIECES = [
    "..", "．．", "\u2025", "~", "/", ".", "．", "\uff0f", "%2e%2e", "\\..\\", "\x00", "\n",
    "inside.txt", "sub", "link_out", "link_out/secret.txt", "dangling", "loop", "secret.txt",
    "ok_link", "new.txt", "a" * 300, "é", "\u0301", "\ufeff", "\u202e",
]


def _path_strategy(outside: str, project: str, home: str) -> st.SearchStrategy[str]:
    piece = st.sampled_from(_PIECES + [outside, project, home, "/etc/passwd", "/tmp"]) | st.text(max_size=8)
    joined = st.lists(piece, min_size=1, max_size=6).map(lambda parts: "/".join(parts))
    concatenated = st.lists(piece, min_size=1, max_size=4).map("".join)
    very_long = (st.integers(1, 70) | st.integers(2040, 2600)).map(lambda n: "d/" * n + "x")
    return joined | concatenated | very_long


@pytest.fixture
def hostile_sandbox(sandbox_base) -> Any:
    sandbox = sandbox_base
    p = sandbox.project
    (p / "inside.txt").write_text("inside TOP\n")
    (p / "sub").mkdir()
    (p / "sub" / "secret.txt").write_text("harmless TOP\n")
    (p / "link_out").symlink_to(sandbox.outside, target_is_directory=True)
    (p / "sub" / "link_out").symlink_to(sandbox.outside, target_is_directory=True)
    (p / "dangling").symlink_to(sandbox.outside / "created-through-link.txt")
    (p / "loop").symlink_to(p / "loop")
    (p / "ok_link").symlink_to(sandbox.home, target_is_directory=True)
    return sandbox


def _args_for(tool: str, path: str) -> dict[str, Any]:
    return {
        "read_file": {"path": path},
        "file_write": {"path": path, "content": "written by property test\n"},
        "file_edit": {"path": path, "old_string": "TOP", "new_string": "EDITED"},
        "grep_files": {"pattern": "TOP", "path": path},
        "glob_files": {"pattern": "*", "path": path},
    }[tool]


def test_no_path_outside_the_roots_is_ever_touched(hostile_sandbox) -> None:
    box = hostile_sandbox
    roots = sandbox_roots(box.config)
    outside_before = sorted(p.name for p in box.outside.iterdir())

    loop = asyncio.new_event_loop()
    box.ctx.services = loop.run_until_complete(ServiceContainer(box.config).start())

    def run(tool: str, path: str) -> Any:
        return loop.run_until_complete(box.call(tool, **_args_for(tool, path)))

    for tool in ("read_file", "file_write", "file_edit", "grep_files", "glob_files"):  # warm lazy imports
        run(tool, "inside.txt" if tool != "glob_files" else ".")
    (box.project / "inside.txt").write_text("inside TOP\n")

    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(
        tool=st.sampled_from(["read_file", "file_write", "file_edit", "grep_files", "glob_files"]),
        path=_path_strategy(str(box.outside), str(box.project), str(box.home)),
    )
    def check(tool: str, path: str) -> None:
        _RECORDER.paths.clear()
        box.ctx.file_state.clear()  # no unchanged-stub shortcuts: every example really reads
        _RECORDER.active = True
        try:
            out = run(tool, path)
        finally:
            _RECORDER.active = False
        assert "TOP SECRET" not in out.content
        for event, touched in _RECORDER.paths:
            real = Path(os.path.realpath(touched))
            assert any(real == r or real.is_relative_to(r) for r in roots), (tool, path, event, touched)

    try:
        check()
    finally:
        loop.run_until_complete(box.ctx.services.close())
        loop.close()
    assert sorted(p.name for p in box.outside.iterdir()) == outside_before
    assert (box.outside / "secret.txt").read_text() == "TOP SECRET\n"


# -- the two security lists: a user's entries add to the built-in ones ---------------------------------


@pytest.mark.asyncio
async def test_fs_secret_names_extends_the_built_in_list_never_replaces_it(sandbox) -> None:
    for name in (".myvault", ".ssh"):
        (sandbox.project / name).mkdir()
        (sandbox.project / name / "key").write_text("PRIVATE\n")
    sandbox.config.fs_secret_names = [".myvault"]
    mine = await sandbox.call("read_file", path=".myvault/key")
    builtin = await sandbox.call("read_file", path=".ssh/key")
    assert mine.is_error and ".myvault holds credentials" in mine.content
    assert builtin.is_error and ".ssh holds credentials" in builtin.content  # still shut
    assert "PRIVATE" not in mine.content + builtin.content


@pytest.mark.asyncio
async def test_fs_protected_paths_extends_the_built_in_list_never_replaces_it(sandbox) -> None:
    (sandbox.project / "raw.fits").write_text("SIMPLE = T\n")
    (sandbox.project / ".aws").mkdir()
    (sandbox.project / ".aws" / "credentials").write_text("PRIVATE\n")
    sandbox.config.fs_protected_paths = ["*.fits"]
    mine = await sandbox.call("read_file", path="raw.fits")
    builtin = await sandbox.call("read_file", path=".aws/credentials")
    assert mine.is_error and "fs_protected_paths" in mine.content
    assert builtin.is_error and ".aws holds credentials" in builtin.content
    sandbox.config.fs_protected_paths = []
    assert not (await sandbox.call("read_file", path="raw.fits")).is_error  # the entry was what shut it
