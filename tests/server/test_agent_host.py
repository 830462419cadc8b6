"""The agent host: sidebar runs in a process of their own, managed like a kernel.

Everything is observed the way the sidebar sees it: the REST routes and a real SSE client on a
live in-process Jupyter server; the host is a real ``python -m astro_jupyter.host`` child, the
LLM the scripted OpenAI-compatible fake (real ``openai`` client in the host), and the host is
killed for real with SIGKILL.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any, Callable

import httpx2
import nbformat
import nbformat.v4 as nbf
import pytest

from tests.fakes.openai_server import Turn
from tests.server.conftest import Api

Event = tuple[int, dict[str, Any]]


@pytest.fixture
def astro_overrides(openai_server: Any, sesame_server: Any) -> dict[str, Any]:
    return {"openai_base_url": openai_server.url, "openai_api_key": "k", "service_urls": {"sesame": sesame_server.url}}


@pytest.fixture
def sse_pacing() -> Any:
    from astro_jupyter.server.sse import SsePacing

    return SsePacing(keepalive_secs=0.2)


def host_of(jp_serverapp: Any) -> Any:
    from astro_jupyter.server.base import SERVICE_KEY

    return jp_serverapp.web_app.settings[SERVICE_KEY].host


async def test_runs_stream_from_a_host_process_started_when_the_sidebar_first_calls(
        api: Api, sse: Any, openai_server: Any, jp_serverapp: Any) -> None:
    host = host_of(jp_serverapp)
    assert not host.alive  # none before the first astro request
    status, _ = await api("GET", "astro/api/sessions")  # read from SQLite here; the host starts meanwhile
    assert status == 200

    openai_server.script(Turn.call("query_target", {"name": "M 87"}, id="c1"), Turn.say("M 87 is in Virgo.", chunk_size=3))
    status, started = await api("POST", "astro/api/runs", body={"prompt": "Where is M 87?"})
    assert status == 201, started
    assert host.alive and host.proc.pid != os.getpid()
    events = await sse(started["run_id"])
    assert [s for s, _ in events] == sorted({s for s, _ in events})
    kinds = [e["type"] for _, e in events]
    assert kinds[0] == "session" and kinds[-1] == "done" and "tool_result" in kinds
    assert events[-1][1]["reason"] == "finished"
    text = "".join(e["delta"] for _, e in events if e["type"] == "text_delta")
    assert text == "M 87 is in Virgo."

    # the stored events are the streamed ones, once the host says the run has ended
    await wait_for(lambda: started["run_id"] not in host.runs)
    replay = await sse(started["run_id"])
    assert "".join(e["delta"] for _, e in replay if e["type"] == "text_delta") == text
    assert replay[-1] == events[-1]

    # another identity's run is not found in the host either; a bad prompt never reaches it
    status, body = await api("POST", "astro/api/runs", body={"prompt": "  "})
    assert status == 400 and body["reason"] == "invalid_prompt"
    assert host.starts == 1


async def test_the_host_runs_below_the_servers_cpu_priority_in_every_thread(api: Api, jp_serverapp: Any) -> None:
    """Jupyter's own requests are interactive, the runs are background work: when both want a core, the
    server (here: this process) is picked first. On Linux niceness is per thread, so the store's
    connection thread, already running when the host lowers it, must be lowered too."""
    from astro_jupyter.host.process import HOST_NICE_INCREMENT

    host = host_of(jp_serverapp)
    status, _ = await api("GET", "astro/api/sessions")
    assert status == 200
    await host.ensure()
    threads = [int(t.name) for t in Path(f"/proc/{host.proc.pid}/task").iterdir()]
    assert len(threads) > 1  # the loop and at least the store's connection thread
    expected = min(19, os.getpriority(os.PRIO_PROCESS, 0) + HOST_NICE_INCREMENT)
    assert {tid: os.getpriority(os.PRIO_PROCESS, tid) for tid in threads} == {tid: expected for tid in threads}


async def test_a_ready_host_imports_the_tool_families_before_any_run(
        api: Api, jp_serverapp: Any, caplog: pytest.LogCaptureFixture) -> None:
    """The first run builds every tool's definition: a prompt sent a moment after the sidebar opened must
    find the families imported, not import them on the host's loop before its first token. Seen from
    outside through ``-X importtime``, which reports each import on the host's stderr as it finishes."""
    host = host_of(jp_serverapp)
    host.argv = [host.argv[0], "-X", "importtime", *host.argv[1:]]
    status, _ = await api("GET", "astro/api/sessions")
    assert status == 200
    await host.ensure()
    assert not host.runs
    # the coordinator family is the last one imported, and only it imports agent.coordinator (importtime names
    # the modules a family imports, not the family module itself); the server logs each stderr line of the host
    await wait_for(lambda: any(r.getMessage().endswith(" astro_jupyter.agent.coordinator") for r in caplog.records))


async def test_the_server_forwards_the_hosts_sse_bytes_without_building_any_event(
        api: Api, sse: Any, openai_server: Any, jp_serverapp: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The host sends each batch as finished SSE blocks; the server's handler only forwards them
    (per event it paid a line read, a split, a decode, a queue hop and a block of its own)."""
    from astro_jupyter.server import sse as sse_module

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the server built SSE blocks for a live run in the host")

    text = "".join(f"Chunk {i} of the answer. " for i in range(200))  # ~4.8 kB: ~1,200 deltas over ~3.6 s
    openai_server.script(Turn.say(text, chunk_size=4, delay=0.003))
    status, started = await api("POST", "astro/api/runs", body={"prompt": "a long answer"})
    assert status == 201, started
    monkeypatch.setattr(sse_module, "sse_blocks", refuse, raising=False)
    monkeypatch.setattr(sse_module, "format_event", refuse)
    first = await sse(started["run_id"], until=lambda got: len(got) >= 40)
    rest = await sse(started["run_id"], last_event_id=first[-1][0])  # resumed while the run is still in the host
    for events in (first, rest):
        ids = [s for s, _ in events]
        assert ids == sorted(set(ids))
    assert first[0][0] == 1 and rest[0][0] > first[-1][0]
    assert rest[-1][1]["type"] == "done" and rest[-1][1]["reason"] == "finished"
    assert "".join(e["delta"] for _, e in first + rest if e["type"] == "text_delta") == text


async def test_questions_and_notebook_tools_cross_the_channel(
        api: Api, sse: Any, openai_server: Any, jp_serverapp: Any, jp_root_dir: Path) -> None:
    nb = nbf.new_notebook(cells=[nbf.new_code_cell("x = 1")])
    nbformat.write(nb, jp_root_dir / "a.ipynb")
    openai_server.script(
        Turn.call("notebook_edit", {"path": "root_dir/a.ipynb", "action": "insert", "source": "y = 2"}, id="e1"),
        Turn.say("Added."),
    )
    status, started = await api("POST", "astro/api/runs", body={"prompt": "add a cell"})
    assert status == 201
    run_id = started["run_id"]
    head = await sse(run_id, until=lambda ev: ev[-1][1]["type"] == "permission_request")
    request = head[-1][1]
    assert request["name"] == "notebook_edit"
    status, body = await api("POST", f"astro/api/runs/{run_id}/answers",
                             body={"request_id": request["request_id"], "answer": "allow"})
    assert status == 200 and body["accepted"] is True
    rest = await sse(run_id, last_event_id=head[-1][0])
    result = next(e for _, e in rest if e["type"] == "tool_result")
    assert not result["is_error"], result["output"]
    assert result["metadata"]["via"] == "contents"  # the server's ContentsManager, called by the host
    cells = nbformat.read(jp_root_dir / "a.ipynb", as_version=4).cells
    assert [c.source for c in cells] == ["x = 1", "y = 2"]
    assert rest[-1][1]["reason"] == "finished"


class TestTheServersConfigurationHoldsInTheHost:
    """``c.AstroConfig.X`` and the internal tuning the server was given are what the host's runs obey."""

    @pytest.fixture
    def astro_overrides(self, openai_server: Any, sesame_server: Any) -> dict[str, Any]:
        return {"openai_base_url": openai_server.url, "openai_api_key": "k",
                "service_urls": {"sesame": sesame_server.url}, "max_steps": 1}

    @pytest.fixture
    def astro_tuning(self) -> Any:
        import dataclasses

        from astro_jupyter.agent.executor import ToolLimits
        from tests.agent.runtime_helpers import FAST

        return dataclasses.replace(FAST, tools=ToolLimits(permission_timeout_secs=0.3))

    async def test_max_steps_from_the_server_config_ends_the_hosts_run(
            self, api: Api, sse: Any, openai_server: Any, sesame_server: Any, jp_serverapp: Any) -> None:
        openai_server.script(Turn.call("query_target", {"name": "M 87"}, id="c1"), Turn.say("never asked for"))
        status, started = await api("POST", "astro/api/runs", body={"prompt": "Where is M 87?"})
        assert status == 201, started
        assert host_of(jp_serverapp).alive
        events = await sse(started["run_id"])
        assert events[-1][1]["type"] == "done" and events[-1][1]["reason"] == "max_steps", events[-1]
        assert len(openai_server.chat_requests) == 1  # one step: the host never asked the model again
        status, body = await api("POST", "astro/api/runs", body={"prompt": "again", "max_steps": 201})
        assert status == 400, body  # the 1..200 rule is the app's, before the host

    async def test_the_permission_wait_the_server_was_tuned_with_holds_in_the_host(
            self, api: Api, sse: Any, openai_server: Any, jp_root_dir: Path) -> None:
        nbformat.write(nbf.new_notebook(cells=[nbf.new_code_cell("x = 1")]), jp_root_dir / "b.ipynb")
        openai_server.script(
            Turn.call("notebook_edit", {"path": "root_dir/b.ipynb", "action": "insert", "source": "y = 2"}, id="e1"))
        status, started = await api("POST", "astro/api/runs", body={"prompt": "add a cell"})
        assert status == 201
        # nobody answers: the host's 0.3 s wait (not the built-in 300 s) denies it
        events = await asyncio.wait_for(sse(started["run_id"]), 60)
        assert any(e["type"] == "permission_request" for _, e in events)
        result = next(e for _, e in events if e["type"] == "tool_result")
        assert result["is_error"] and "no answer within 0.3s" in result["output"], result["output"]
        assert [c.source for c in nbformat.read(jp_root_dir / "b.ipynb", as_version=4).cells] == ["x = 1"]


async def test_a_killed_host_ends_its_run_as_interrupted_and_the_next_prompt_starts_another(
        api: Api, sse: Any, openai_server: Any, jp_serverapp: Any, tmp_path: Path) -> None:
    host = host_of(jp_serverapp)
    openai_server.script(Turn.call("file_write", {"path": "out.txt", "content": "hi"}, id="w1", text="Writing. "))
    status, started = await api("POST", "astro/api/runs", body={"prompt": "write a file"})
    assert status == 201
    run_id = started["run_id"]
    seen: list[Event] = []

    async def follow() -> list[Event]:
        return await sse(run_id, until=lambda ev: seen.extend(ev[len(seen):]) or ev[-1][1]["type"] == "done")

    reader = asyncio.create_task(follow())
    await wait_for(lambda: any(e["type"] == "permission_request" for _, e in seen))
    question = next(e for _, e in seen if e["type"] == "permission_request")
    committed: list[dict[str, Any]] = []
    while not any(e["event"]["type"] == "permission_request" for e in committed):  # the host's store has it
        status, page = await api("GET", f"astro/api/sessions/{started['session_id']}/events")
        assert status == 200
        committed = page["events"]
        await asyncio.sleep(0.02)
    pid = host.proc.pid
    os.kill(pid, signal.SIGKILL)
    loop = asyncio.get_running_loop()
    killed_at = loop.time()
    events = await asyncio.wait_for(reader, 30)
    ended_after = loop.time() - killed_at
    assert events[-1][1]["type"] == "done" and events[-1][1]["reason"] == "error"
    assert events[-2][1]["type"] == "error" and events[-2][1]["reason"] == "interrupted", events[-3:]
    seqs = [s for s, _ in events]
    assert seqs == sorted(set(seqs))  # monotonic through the kill
    print(f"run shown as interrupted {ended_after:.2f} s after kill -9 of the host")

    # the open question can no longer be answered
    status, body = await api("POST", f"astro/api/runs/{run_id}/answers",
                             body={"request_id": question["request_id"], "answer": "allow"})
    assert status == 409 and body["reason"] == "run_conflict"
    assert not (tmp_path / "out.txt").exists()
    # every event committed before the kill is still there, under the id the client saw; the record ends in done
    replay = await sse(run_id)
    assert replay[-1] == events[-1]
    kept = {s: e for s, e in replay}
    assert all(c["seq"] in kept and kept[c["seq"]]["type"] == c["event"]["type"] for c in committed)
    assert question in kept.values()
    status, session = await api("GET", f"astro/api/sessions/{started['session_id']}")
    assert status == 200 and session["active_run_id"] is None and session["runs"][0]["status"] == "error"

    # the next prompt starts a new host, no user action
    openai_server.script(Turn.say("Back again."))
    status, again = await api("POST", "astro/api/runs", body={"prompt": "hello", "session_id": started["session_id"]})
    assert status == 201, again
    assert host.alive and host.proc.pid != pid and host.starts == 2
    more = await sse(again["run_id"])
    assert more[-1][1]["reason"] == "finished"


async def test_a_host_that_cannot_start_says_why_with_its_stderr(
        api: Api, openai_server: Any, jp_serverapp: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    broken = tmp_path / "shadow" / "astro_jupyter"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise ImportError('broken install: astro_jupyter cannot be imported')\n")
    monkeypatch.setenv("PYTHONPATH", str(broken.parent))  # the host's interpreter finds this package first
    status, body = await api("POST", "astro/api/runs", body={"prompt": "hello"})
    assert status == 503 and body["reason"] == "agent_host"
    assert "could not start" in body["message"] and "broken install: astro_jupyter cannot be imported" in body["message"]

    monkeypatch.undo()  # the install is fixed: the next prompt starts a host, no restart of the server
    openai_server.script(Turn.say("ok"))
    status, started = await api("POST", "astro/api/runs", body={"prompt": "hello"})
    assert status == 201, started


async def wait_for(predicate: Callable[[], bool], timeout: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        assert loop.time() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        out += [int(p) for p in (task / "children").read_text().split()]
    return out


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in "ZX"  # a zombie has exited (its new parent reaps it when it gets to it)


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads the process tree from /proc")
def test_no_orphan_host_after_kill_9_of_the_server(tmp_path: Path, openai_server: Any) -> None:
    import time

    from tests.security.test_sse_resume_after_crash import AUTH, Server, read_sse

    home = tmp_path / "astro_home"
    openai_server.script(Turn.call("file_write", {"path": "out.txt", "content": "hi"}, id="w1"))
    server = Server(home, openai_server.url, tmp_path / "server.log")
    try:
        started = httpx2.post(f"{server.base}/astro/api/runs", headers=AUTH, json={"prompt": "write"}, timeout=120).json()
        status, seen = read_sse(server.base, started["run_id"], stop_after=3)
        assert status == 200
        hosts = [p for p in _children(server.proc.pid) if b"astro_jupyter.host" in Path(f"/proc/{p}/cmdline").read_bytes()]
        assert len(hosts) == 1
        os.kill(server.proc.pid, signal.SIGKILL)  # the server alone, not its process group
        server.proc.wait(timeout=10)
        deadline = time.monotonic() + 30
        while not _gone(hosts[0]):
            assert time.monotonic() < deadline, "the agent host outlived its server"
            time.sleep(0.05)
    finally:
        server.stop()
    # the host closed its run on the way out: a new server shows it ended, nothing left 'running'
    again = Server(home, openai_server.url, tmp_path / "server.log")
    try:
        status, events = read_sse(again.base, started["run_id"])
        assert status == 200 and events[-1][1]["type"] == "done"
    finally:
        again.stop()


def test_doctor_reports_whether_the_agent_host_starts(tmp_path: Path, openai_server: Any) -> None:
    from tests.cli.test_cli import cli_env, run_cli

    env = cli_env(tmp_path / "home", openai_server.url)
    ok = run_cli(env, "doctor", timeout=180)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "Agent host     yes (started in" in ok.stdout

    shadow = tmp_path / "shadow" / "astro_jupyter"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('broken install: astro_jupyter cannot be imported')\n")
    # the CLI itself must import, the host it starts must not: the host inherits PYTHONPATH, so the shadow is
    # put in front of it only through the host's environment (the doctor passes os.environ on)
    script = ("import os, sys, asyncio; sys.path.insert(0, os.environ['ROOT']);"
              f"os.environ['PYTHONPATH'] = {str(shadow.parent)!r};"
              "from astro_jupyter.cli import main; sys.exit(main(['doctor']))")
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", script], env=dict(env, ROOT=env["PYTHONPATH"]), capture_output=True,
                         text=True, timeout=180)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "Agent host     ERROR: the agent host could not start" in out.stdout
    assert "broken install: astro_jupyter cannot be imported" in out.stdout


async def test_a_host_stopped_while_it_starts_is_killed_and_reaped_with_its_readers(tmp_path: Path) -> None:
    """The server stops (or the sidebar's warm-up is cancelled) while the host is still importing:
    nothing of it is left, neither the process (not even a zombie) nor a task reading its pipes."""
    import sys

    from astro_jupyter.config import AstroConfig
    from astro_jupyter.host.manager import AgentHost

    slow_start = "import os, sys, time; print(os.getpid(), file=sys.stderr, flush=True); time.sleep(60)"
    host = AgentHost(AstroConfig(home=str(tmp_path / "home")), argv=[sys.executable, "-c", slow_start])
    starting = asyncio.ensure_future(host.ensure())
    await wait_for(lambda: len(host.stderr_tail) > 0)
    pid = int(host.stderr_tail[0])
    starting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await starting
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # a killed child nobody waited for would still answer, as a zombie
    readers = [t for t in asyncio.all_tasks() if "_read_stderr" in repr(t.get_coro())]
    assert readers == [] and not host.alive
    await host.stop()
