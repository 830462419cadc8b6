"""file_write, file_edit and run_bash as the agent calls them."""

from __future__ import annotations

import asyncio
import stat

import pytest

from tests.waiting import alive, until


@pytest.mark.asyncio
async def test_file_write_creates_and_overwrites(sandbox) -> None:
    out = await sandbox.call("file_write", path="out/result.txt", content="a\nb\n")
    assert not out.is_error and out.content.startswith("Created out/result.txt")
    assert (sandbox.project / "out" / "result.txt").read_text() == "a\nb\n"
    target = sandbox.project / "out" / "result.txt"
    target.chmod(0o640)
    again = await sandbox.call("file_write", path="out/result.txt", content="c")
    assert again.content.startswith("Overwrote") and target.read_text() == "c"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert [p.name for p in target.parent.iterdir()] == ["result.txt"]  # no temp files left


@pytest.mark.asyncio
async def test_file_write_refuses_outside_roots(sandbox) -> None:
    out = await sandbox.call("file_write", path=str(sandbox.outside / "x.txt"), content="no")
    assert out.is_error and "outside the allowed roots" in out.content
    assert not (sandbox.outside / "x.txt").exists()


@pytest.mark.asyncio
async def test_file_edit_exact_unique_and_replace_all(sandbox) -> None:
    f = sandbox.project / "cfg.py"
    f.write_text("x = 1\ny = 1\nz = 2\n")
    missing = await sandbox.call("file_edit", path="cfg.py", old_string="w = 1", new_string="w = 2")
    assert missing.is_error and "not found" in missing.content
    ambiguous = await sandbox.call("file_edit", path="cfg.py", old_string="= 1", new_string="= 3")
    assert ambiguous.is_error and "occurs 2 times" in ambiguous.content and ambiguous.metadata["matches"] == 2
    assert f.read_text() == "x = 1\ny = 1\nz = 2\n"  # nothing lost
    one = await sandbox.call("file_edit", path="cfg.py", old_string="y = 1", new_string="y = 10")
    assert not one.is_error and f.read_text() == "x = 1\ny = 10\nz = 2\n"
    assert "     2\ty = 10" in one.content
    every = await sandbox.call("file_edit", path="cfg.py", old_string=" = ", new_string="=", replace_all=True)
    assert every.metadata["replacements"] == 3 and f.read_text() == "x=1\ny=10\nz=2\n"


@pytest.mark.asyncio
async def test_file_edit_bad_input(sandbox) -> None:
    same = await sandbox.call("file_edit", path="cfg.py", old_string="a", new_string="a")
    assert same.is_error and "identical" in same.content
    empty = await sandbox.call("file_edit", path="cfg.py", old_string="", new_string="a")
    assert empty.is_error and "file_write" in empty.content
    nofile = await sandbox.call("file_edit", path="nofile.py", old_string="a", new_string="b")
    assert nofile.is_error and "does not exist" in nofile.content
    (sandbox.project / "ws.txt").write_text("  indented\n")
    ws = await sandbox.call("file_edit", path="ws.txt", old_string="indented \n", new_string="x")
    assert ws.is_error and "whitespace" in ws.content


@pytest.mark.asyncio
async def test_run_bash_output_exit_code_and_cwd(sandbox) -> None:
    out = await sandbox.call("run_bash", command="pwd; echo err >&2; exit 3")
    assert out.is_error and out.metadata["exit_code"] == 3
    assert out.content.startswith("Exit code 3")
    assert str(sandbox.project.resolve()) in out.content and "stderr:\nerr" in out.content
    ok = await sandbox.call("run_bash", command="echo hello")
    assert not ok.is_error and "stdout:\nhello" in ok.content


@pytest.mark.asyncio
@pytest.mark.asyncio
async def test_run_bash_timeout_kills_the_group(sandbox) -> None:
    pidfile = sandbox.project / "child.pid"
    # a background child that would outlive its shell by an hour, and a shell that would wait an hour
    command = f"(sh -c 'echo $$ > {pidfile}; exec sleep 3600') & sleep 3600"
    out = await asyncio.wait_for(sandbox.call("run_bash", command=command, timeout=0.5), 30)
    assert out.is_error and "timed out after 0.5 s" in out.content and out.metadata["outcome"] == "timeout"
    await until(lambda: pidfile.exists() and pidfile.read_text().strip(), "the child's pid")
    child = int(pidfile.read_text())
    await until(lambda: not alive(child), "the background child to die with its group")


@pytest.mark.asyncio
async def test_run_bash_truncates_long_output(sandbox) -> None:
    sandbox.registry.get("run_bash").max_output_chars = 1000  # 30,000 by default (bash.MAX_OUTPUT_CHARS)
    out = await sandbox.call("run_bash", command="seq 1 5000")
    assert out.metadata["truncated"]
    assert "characters truncated" in out.content
    assert "\n1\n2\n" in out.content and out.content.rstrip().endswith("5000")


@pytest.mark.asyncio
async def test_run_bash_cancel(sandbox) -> None:
    started = sandbox.project / "started"

    async def cancel_once_started() -> None:
        await until(started.exists, "the command to start")
        sandbox.ctx.cancelled.set()

    asyncio.ensure_future(cancel_once_started())
    command = f"touch {started}; sleep 3600"  # only the cancel ends it
    out = await asyncio.wait_for(sandbox.ctx_tool("run_bash").execute({"command": command}, sandbox.ctx), 30)
    assert out.is_error and out.metadata["outcome"] == "cancelled"


@pytest.mark.asyncio
async def test_run_bash_bad_arguments(sandbox) -> None:
    empty = await sandbox.call("run_bash", command="  ")
    assert empty.is_error and "non-empty" in empty.content


@pytest.mark.asyncio
async def test_run_bash_asks_permission_and_respects_a_no(sandbox) -> None:
    marker = sandbox.project / "ran.txt"
    sandbox.permission_answer = "deny"
    out = await sandbox.call("run_bash", command=f"touch {marker}")
    assert out.is_error and "Permission denied for run_bash" in out.content
    assert not marker.exists()
    asked = [e for e in sandbox.events if e.type == "permission_request"]
    assert asked and asked[0].arguments["command"] == f"touch {marker}"
    sandbox.permission_answer = "allow"
    ok = await sandbox.call("run_bash", command=f"touch {marker}")
    assert not ok.is_error and marker.exists()
