"""Door 10: FIFOs, sockets and other non-regular files inside a root are refused before opening,
and file tools run on their own bounded pool, so nothing a file does can starve the server.

Every test that could hang without the fix is bounded (``asyncio.wait_for``) and, in ``finally``,
opens each FIFO for writing, which releases any reader a regression left blocked.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.waiting import until

from astro_jupyter.agent.executor import ToolCallRequest, ToolExecutor
from astro_jupyter.agent.tools.base import ToolContext
from astro_jupyter.agent.tools.file_state import FileStateCache
from astro_jupyter.agent.tools.filesystem.edit import FileEditTool
from astro_jupyter.agent.tools.filesystem.glob import GlobFilesTool
from astro_jupyter.agent.tools.filesystem.grep import GrepFilesTool
from astro_jupyter.agent.tools.filesystem.read import ReadFileTool
from astro_jupyter.agent.tools.filesystem.regular import FS_POOL_THREADS, fs_pool, run_fs
from astro_jupyter.agent.tools.filesystem.write import FileWriteTool
from astro_jupyter.agent.tools.registry import ToolRegistry
from astro_jupyter.config import AstroConfig
from tests.agent.runtime_helpers import collect, make_config, make_runtime, wires
from tests.fakes.openai_server import ScriptedCall, Turn

GUARD = 20.0


def _release(fifos: list[Path]) -> None:
    """Open each FIFO for writing (non-blocking) so any reader still blocked on it returns."""
    for fifo in fifos:
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            continue  # ENXIO: nobody is blocked reading it
        os.close(fd)


@pytest.fixture
def project(tmp_path: Path) -> Iterator[tuple[Path, list[Path]]]:
    root = tmp_path / "project"
    (root / "notes").mkdir(parents=True)
    (root / "notes" / "a.txt").write_text("alpha\nneedle here\n")
    (root / "notes" / "b.md").write_text("needle in markdown\n")
    fifos = [root / "notes" / "pipe.txt", root / "trap.fifo"] + [root / f"fifo{i}" for i in range(8)]
    for fifo in fifos:
        os.mkfifo(fifo)
    try:
        yield root, fifos
    finally:
        _release(fifos)


def _ctx(config: AstroConfig, services: Any = None) -> ToolContext:
    async def emit(_event: Any) -> None:
        return None

    return ToolContext(config=config, services=services, session_id="s", cancelled=asyncio.Event(), emit=emit,
                       file_state=FileStateCache())


def _config(tmp_path: Path, root: Path, **kw: Any) -> AstroConfig:
    return AstroConfig(home=str(tmp_path / "home"), project_root=str(root), **kw)


async def _tool(tool: Any, args: dict[str, Any], config: AstroConfig) -> Any:
    return await asyncio.wait_for(tool.execute(args, _ctx(config)), GUARD)


@pytest.mark.asyncio
async def test_each_file_tool_refuses_a_fifo_at_once(tmp_path: Path, project: Any) -> None:
    root, _fifos = project
    config = _config(tmp_path, root)
    started = time.monotonic()
    read = await _tool(ReadFileTool(), {"path": "trap.fifo"}, config)
    assert read.is_error and "trap.fifo is a FIFO (named pipe), not a regular file" in read.content
    grep_one = await _tool(GrepFilesTool(), {"pattern": "x", "path": "trap.fifo"}, config)
    assert grep_one.is_error and "is a FIFO (named pipe)" in grep_one.content
    grep_dir = await _tool(GrepFilesTool(), {"pattern": "needle", "path": "notes"}, config)
    assert not grep_dir.is_error and "a.txt:2:needle here" in grep_dir.content and "b.md:1:needle" in grep_dir.content
    assert "1 FIFO/device/socket file(s) skipped" in grep_dir.content and grep_dir.metadata["skipped_special"] == 1
    grep_all = await _tool(GrepFilesTool(), {"pattern": "needle"}, config)  # the whole root: ten FIFOs on the way
    assert grep_all.metadata["files_searched"] == 2 and grep_all.metadata["skipped_special"] == len(_fifos)
    globbed = await _tool(GlobFilesTool(), {"pattern": "*"}, config)
    assert sorted(globbed.metadata["paths"]) == ["notes/a.txt", "notes/b.md"]
    edit = await _tool(FileEditTool(), {"path": "trap.fifo", "old_string": "a", "new_string": "b"}, config)
    assert edit.is_error and "is a FIFO (named pipe)" in edit.content
    write = await _tool(FileWriteTool(), {"path": "trap.fifo", "content": "x"}, config)
    assert write.is_error and "is a FIFO (named pipe)" in write.content and (root / "trap.fifo").is_fifo()
    assert time.monotonic() - started < 5.0


@pytest.mark.asyncio
async def test_sockets_and_links_to_fifos_are_refused(tmp_path: Path, project: Any) -> None:
    root, _fifos = project
    sock_path = root / "s.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(sock_path))
    (root / "link.txt").symlink_to(root / "trap.fifo")
    config = _config(tmp_path, root)
    try:
        sock = await _tool(ReadFileTool(), {"path": "s.sock"}, config)
        assert sock.is_error and "is a socket, not a regular file" in sock.content
        link = await _tool(ReadFileTool(), {"path": "link.txt"}, config)
        assert link.is_error and "is a FIFO (named pipe)" in link.content
        globbed = await _tool(GlobFilesTool(), {"pattern": "*"}, config)
        assert "s.sock" not in globbed.content and "link.txt" not in globbed.content
    finally:
        server.close()


@pytest.mark.asyncio
async def test_fifo_reads_in_one_run_do_not_stall_another_run(tmp_path: Path, project: Any, openai_server: Any) -> None:
    """The reported failure: eight FIFO reads in one run, then another run's ordinary read."""
    root, fifos = project
    reads = [ScriptedCall("read_file", {"path": f"fifo{i}"}, f"f{i}") for i in range(8)]
    openai_server.script(Turn(calls=reads), Turn.say("those were pipes"),
                         Turn.call("read_file", {"path": "notes/a.txt"}, id="ok"), Turn.say("read it"))
    config = make_config(tmp_path, openai_server.url, project_root=str(root), tool_timeout_secs=30.0)
    services, runtime = await make_runtime(config, ReadFileTool())
    try:
        first = await runtime.start_run("read the pipes")
        first_events = wires(await asyncio.wait_for(collect(first), GUARD))
        started = time.monotonic()
        second = await runtime.start_run("read a.txt")
        second_events = wires(await asyncio.wait_for(collect(second), GUARD))
        elapsed = time.monotonic() - started
        assert await asyncio.wait_for(asyncio.to_thread(lambda: "default pool free"), 5) == "default pool free"
    finally:
        _release(fifos)
        await runtime.close()
        await services.close()
    results = [e for e in first_events if e["type"] == "tool_result"]
    assert len(results) == 8 and all(r["is_error"] and "is a FIFO (named pipe)" in r["output"] for r in results)
    assert first_events[-1]["reason"] == "finished"
    ok = next(e for e in second_events if e["type"] == "tool_result")
    assert not ok["is_error"] and "needle here" in ok["output"] and elapsed < 5.0
    assert second_events[-1]["reason"] == "finished"


@pytest.mark.asyncio
async def test_a_stuck_file_pool_times_out_cleanly_and_spares_the_default_pool(tmp_path: Path, project: Any,
                                                                               services: Any) -> None:
    """Whatever still hangs (a dead network mount) holds only the file tools' own threads."""
    root, _fifos = project
    config = _config(tmp_path, root, tool_timeout_secs=1.0)
    gate = threading.Event()
    pool = fs_pool(FS_POOL_THREADS)
    blockers = [asyncio.ensure_future(run_fs(gate.wait, 30)) for _ in range(FS_POOL_THREADS)]
    try:
        await until(lambda: pool.busy == FS_POOL_THREADS, "every file-tool thread hangs")
        # the default executor is untouched
        assert await asyncio.wait_for(asyncio.to_thread(lambda: 42), 5) == 42
        executor = ToolExecutor(ToolRegistry([ReadFileTool()]), config=config)
        started = time.monotonic()
        [stuck] = await asyncio.wait_for(
            executor.execute([ToolCallRequest("r1", "read_file", '{"path": "notes/a.txt"}')], _ctx(config, services)), GUARD
        )
        assert stuck.output.is_error and "read_file timed out after 1s" in stuck.output.content
        assert time.monotonic() - started < 4.0
    finally:
        gate.set()
        await asyncio.wait_for(asyncio.gather(*blockers), GUARD)
    # the queued read of the timed-out call was dropped, and the pool serves the next one at once
    [again] = await asyncio.wait_for(
        executor.execute([ToolCallRequest("r2", "read_file", '{"path": "notes/a.txt"}')], _ctx(config, services)), GUARD
    )
    assert not again.output.is_error and "needle here" in again.output.content
    assert pool.busy == 0 and all(t.daemon for t in threading.enumerate() if t.name.startswith("astro-fs-"))
