"""read_file, grep_files, glob_files as the agent calls them."""

from __future__ import annotations

import os
import time

import pytest

from astro_jupyter.agent.tools.filesystem import tools


def test_flags_match_the_seed_table(sandbox) -> None:
    by_name = {t.name: t for t in tools(sandbox.config)}
    assert set(by_name) == {"read_file", "grep_files", "glob_files", "run_bash", "file_write", "file_edit"}
    for name in ("read_file", "grep_files", "glob_files"):
        assert by_name[name].is_readonly and by_name[name].is_concurrency_safe({})
        assert by_name[name].interrupt_behavior.value == "cancel"
    for name in ("run_bash", "file_write", "file_edit"):
        assert not by_name[name].is_readonly and not by_name[name].is_concurrency_safe({})
    assert by_name["run_bash"].interrupt_behavior.value == "cancel"
    assert by_name["file_write"].interrupt_behavior.value == "block"
    assert by_name["file_edit"].interrupt_behavior.value == "block"
    rules = by_name["run_bash"].check_permissions({"command": "ls"})
    assert [(r.action, r.tool) for r in rules] == [("ask", "run_bash")] and "ls" in rules[0].reason


@pytest.mark.asyncio
async def test_read_file_numbers_lines_and_pages(sandbox) -> None:
    (sandbox.project / "notes.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    out = await sandbox.call("read_file", path="notes.txt", offset=3, limit=2)
    assert not out.is_error
    assert out.content.splitlines()[:2] == ["     3\tline 3", "     4\tline 4"]
    assert "6 more lines; continue with offset=5" in out.content
    assert out.metadata["total_lines"] == 10 and out.metadata["end_line"] == 4


@pytest.mark.asyncio
async def test_read_file_unchanged_stub_until_file_changes(sandbox) -> None:
    target = sandbox.project / "a.txt"
    target.write_text("alpha\nbeta\n")
    first = await sandbox.call("read_file", path="a.txt")
    assert "alpha" in first.content
    again = await sandbox.call("read_file", path="a.txt")
    assert again.content.startswith("File unchanged since last read") and "alpha" not in again.content
    other_range = await sandbox.call("read_file", path="a.txt", offset=2)
    assert "beta" in other_range.content and "unchanged" not in other_range.content
    target.write_text("alpha\ngamma\n")
    os.utime(target, ns=(time.time_ns(), time.time_ns() + 10_000_000))
    changed = await sandbox.call("read_file", path="a.txt", offset=2)
    assert "gamma" in changed.content


@pytest.mark.asyncio
async def test_read_file_edit_invalidates_stub(sandbox) -> None:
    (sandbox.project / "b.txt").write_text("one\n")
    await sandbox.call("read_file", path="b.txt")
    await sandbox.call("file_edit", path="b.txt", old_string="one", new_string="two")
    out = await sandbox.call("read_file", path="b.txt")
    assert "two" in out.content


@pytest.mark.asyncio
async def test_read_file_errors_are_clear(sandbox) -> None:
    (sandbox.project / "blob.bin").write_bytes(b"\x00\x01\x02")
    (sandbox.project / "paper.pdf").write_bytes(b"%PDF-1.7\n\x00\x00")
    missing = await sandbox.call("read_file", path="nope.txt")
    assert missing.is_error and "does not exist" in missing.content
    binary = await sandbox.call("read_file", path="blob.bin")
    assert binary.is_error and "binary" in binary.content
    pdf = await sandbox.call("read_file", path="paper.pdf")
    assert "parse_paper" in pdf.content
    directory = await sandbox.call("read_file", path=".")
    assert directory.is_error and "directory" in directory.content
    (sandbox.project / "short.txt").write_text("x\n")
    past = await sandbox.call("read_file", path="short.txt", offset=5)
    assert past.is_error and "past the end" in past.content


@pytest.mark.asyncio
async def test_read_file_inside_library_by_absolute_path(sandbox) -> None:
    note = sandbox.home / "papers" / "note.md"
    note.write_text("# Heading\n")
    out = await sandbox.call("read_file", path=str(note))
    assert not out.is_error and "# Heading" in out.content


@pytest.mark.asyncio
async def test_grep_files_finds_lines_and_skips_binaries(sandbox) -> None:
    (sandbox.project / "src").mkdir()
    (sandbox.project / "src" / "a.py").write_text("import numpy\nredshift = 0.5\n")
    (sandbox.project / "src" / "b.md").write_text("Redshift of M31\n")
    (sandbox.project / "data.bin").write_bytes(b"redshift\x00\x00")
    out = await sandbox.call("grep_files", pattern="redshift")
    assert not out.is_error
    assert "src/a.py:2:redshift = 0.5" in out.content
    assert "b.md" not in out.content  # case-sensitive by default
    assert "1 binary file(s) skipped" in out.content
    ci = await sandbox.call("grep_files", pattern="redshift", ignore_case=True, glob="*.md")
    assert ci.content.splitlines()[0] == "src/b.md:1:Redshift of M31"
    assert [m["path"] for m in ci.metadata["matches"]] == ["src/b.md"]


@pytest.mark.asyncio
async def test_grep_files_limits_and_errors(sandbox) -> None:
    (sandbox.project / "many.txt").write_text("hit\n" * 50)
    out = await sandbox.call("grep_files", pattern="hit", max_results=5)
    assert len(out.metadata["matches"]) == 5 and out.metadata["truncated"]
    assert "stopped at max_results=5" in out.content
    bad = await sandbox.call("grep_files", pattern="(unclosed")
    assert bad.is_error and "invalid regular expression" in bad.content
    none = await sandbox.call("grep_files", pattern="zzz_not_there")
    assert not none.is_error and none.content.startswith("No matches")
    one_file = await sandbox.call("grep_files", pattern="hit", path="many.txt", max_results=1)
    assert one_file.metadata["matches"] == [{"path": "many.txt", "line": 1, "text": "hit"}]


@pytest.mark.asyncio
async def test_glob_files_patterns_newest_first(sandbox) -> None:
    (sandbox.project / "pkg" / "sub").mkdir(parents=True)
    old = sandbox.project / "pkg" / "old.py"
    new = sandbox.project / "pkg" / "sub" / "new.py"
    old.write_text("")
    new.write_text("")
    (sandbox.project / "pkg" / "readme.md").write_text("")
    os.utime(old, (1_000_000, 1_000_000))
    out = await sandbox.call("glob_files", pattern="*.py")
    assert out.content.splitlines() == ["pkg/sub/new.py", "pkg/old.py"]
    scoped = await sandbox.call("glob_files", pattern="sub/*.py", path="pkg")
    assert scoped.metadata["paths"] == ["pkg/sub/new.py"]
    none = await sandbox.call("glob_files", pattern="*.fits")
    assert none.content.startswith("No files match")
    bad = await sandbox.call("glob_files", pattern="../*")
    assert bad.is_error and ".." in bad.content


@pytest.mark.asyncio
async def test_walks_do_not_follow_links_out(sandbox) -> None:
    (sandbox.project / "link_dir").symlink_to(sandbox.outside, target_is_directory=True)
    (sandbox.project / "link_file.txt").symlink_to(sandbox.outside / "secret.txt")
    grep = await sandbox.call("grep_files", pattern="SECRET")
    assert "No matches" in grep.content
    glob = await sandbox.call("glob_files", pattern="*.txt")
    assert "secret" not in glob.content and "link_file" not in glob.content
