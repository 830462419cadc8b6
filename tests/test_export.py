"""Research-log export: structure, validity, the CLI, and a top-to-bottom re-run with nbclient."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path
from typing import Any

import nbformat
import pytest
import pytest_asyncio

from astro_jupyter.config import AstroConfig
from astro_jupyter.services.container import ServiceContainer
from tests.fakes.openai_server import Turn


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, openai_server: Any, sesame_server: Any) -> dict[str, Any]:
    project = tmp_path / "project"
    project.mkdir()
    (project / "obs.txt").write_text("M 31 observed at 21:00\nseeing 0.8 arcsec\n")
    (project / "frames").mkdir()
    (project / "frames" / "m31_r.fits.txt").write_text("header\n")
    for name, value in {
        "ASTRO_PROJECT_ROOT": str(project), "ASTRO_SESAME_URL": sesame_server.url,
        "OPENAI_BASE_URL": openai_server.url, "OPENAI_API_KEY": "sk-test", "LLM_MODEL": "scripted-model",
    }.items():
        monkeypatch.setenv(name, value)
    return {"project": project, "llm": openai_server, "sesame": sesame_server}


@pytest_asyncio.fixture
async def recorded(env: dict[str, Any]) -> Any:
    """A two-turn session: direct tool calls in turn 1, a subagent in turn 2."""
    from astro_jupyter.agent.runtime import AgentRuntime

    llm = env["llm"]
    llm.script(
        Turn.calls_(("read_file", {"path": "obs.txt"}), ("query_target", {"name": "M 31"}), text="Checking. "),
        Turn.say("M 31 (RA 10.68°) was observed at 21:00 with 0.8\" seeing."),
        Turn.call("subagent", {"task": "List the frames of M 31", "max_steps": 3}),
        Turn.call("glob_files", {"pattern": "*.txt", "path": "frames"}),
        Turn.say("One frame: frames/m31_r.fits.txt"),
        Turn.say("The subagent found one frame, m31_r."),
    )
    services = await ServiceContainer(AstroConfig()).start()
    runtime = AgentRuntime(services)
    try:
        first = await runtime.start_run("When and where was M 31 observed?", source="kernel")
        await first.wait()
        second = await runtime.start_run("Which frames do we have?", session_id=first.session_id, source="kernel")
        await second.wait()
        yield services, first.session_id
    finally:
        await runtime.close()
        await services.close()


def _code(nb: Any) -> list[Any]:
    """The tool-call cells (every code cell after the %load_ext one)."""
    return [c for c in nb.cells if c.cell_type == "code" and c.source.startswith("%astro ")]


def _result_text(cell: Any) -> str:
    [out] = [o for o in cell.outputs if o.output_type == "execute_result"]
    return out.data["text/plain"].split("\n", 1)[1]  # drop the "[tool · ok · N ms]" header


@pytest.mark.asyncio
async def test_export_structure(recorded: Any) -> None:
    from astro_jupyter.export import export_session

    services, sid = recorded
    nb = await export_session(services, sid)
    nbformat.validate(nb)
    assert nb.nbformat == 4
    title = nb.cells[0]
    assert title.cell_type == "markdown" and sid in title.source and "scripted-model" in title.source
    assert title.source.startswith("# When and where was M 31 observed?")
    assert nb.cells[1].source == "%load_ext astro_jupyter"
    sources = [c.source for c in nb.cells]
    turn1 = next(i for i, s in enumerate(sources) if s.startswith("## Turn 1"))
    assert "> When and where was M 31 observed?" in sources[turn1]
    codes = _code(nb)
    assert [c.source for c in codes] == [
        '%astro read_file {"path": "obs.txt"}',
        '%astro query_target {"name": "M 31"}',
        '%astro glob_files {"pattern": "*.txt", "path": "frames"}',
    ]
    assert "seeing 0.8 arcsec" in _result_text(codes[0])
    assert "<table>" in codes[1].outputs[0].data["text/html"]
    assert codes[2].metadata["astro_jupyter"]["subagent_id"]
    answers = [s for s in sources if s.startswith("**Answer**")]
    assert answers == ["**Answer**\n\nM 31 (RA 10.68°) was observed at 21:00 with 0.8\" seeing.",
                       "**Answer**\n\nThe subagent found one frame, m31_r."]
    sub = next(i for i, s in enumerate(sources) if s.startswith("### Subagent"))
    assert "List the frames of M 31" in sources[sub]
    assert sources.index(codes[2].source) > sub  # the subagent's call sits under its heading
    assert any(s.startswith("**Subagent") and "One frame" in s for s in sources)
    meta = nb.metadata["astro_jupyter"]
    assert meta["session_id"] == sid and meta["model"] == "scripted-model" and meta["tool_calls"] == 4
    assert [r["status"] for r in meta["runs"]] == ["finished", "finished"] and meta["version"]


@pytest.mark.asyncio
async def test_cli_export_and_unknown_session(recorded: Any, tmp_path: Path, capsys) -> None:
    from astro_jupyter.cli import main

    services, sid = recorded
    target = tmp_path / "out" / "log.ipynb"
    assert await asyncio.to_thread(main, ["export", sid, "-o", str(target)]) == 0
    nb = nbformat.read(target, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata["astro_jupyter"]["session_id"] == sid
    assert await asyncio.to_thread(main, ["export", "sess_nope", "-o", str(tmp_path / "x.ipynb")]) == 1
    assert "sess_nope" in capsys.readouterr().err
    assert not (tmp_path / "x.ipynb").exists()


@pytest.mark.slow
@pytest.mark.asyncio
async def test_exported_log_reruns_with_the_same_results(recorded: Any, env: dict[str, Any], tmp_path: Path) -> None:
    from nbclient import NotebookClient

    from astro_jupyter.export import export_session

    services, sid = recorded
    nb = await export_session(services, sid)
    recorded_texts = [_result_text(c) for c in _code(nb)]
    async def kernel_calls() -> list[str]:
        rows = await services.audit.list(limit=500)
        return sorted(r["tool_name"] for r in rows if r.get("run_id") == "kernel" and r.get("event") == "tool_use")

    assert await kernel_calls() == []
    client = NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(env["project"])}})
    await asyncio.to_thread(client.execute)
    rerun_texts = [_result_text(c) for c in _code(nb)]
    assert rerun_texts == recorded_texts
    # the calls really ran again, in the notebook's kernel, through the executor (audit log rows)
    assert await kernel_calls() == ["glob_files", "query_target", "read_file"]


@pytest.mark.asyncio
async def test_export_falls_back_to_messages_without_stored_events(recorded: Any) -> None:
    from astro_jupyter.export import export_session

    services, sid = recorded
    with_events = await export_session(services, sid)
    await services.db.execute("DELETE FROM agent_events")
    without = await export_session(services, sid)
    nbformat.validate(without)
    top_level = [c for c in _code(with_events) if not c.metadata["astro_jupyter"]["subagent_id"]]
    # the messages hold the parent's calls and results; a subagent's inner calls live only in events
    assert [c.source for c in _code(without)] == [c.source for c in top_level]
    assert [_result_text(c) for c in _code(without)] == [_result_text(c) for c in top_level]
    assert any(c.cell_type == "markdown" and "`subagent`" in c.source and "One frame" in c.source for c in without.cells)


@pytest.mark.asyncio
async def test_messages_stored_without_runs_become_turns(services: ServiceContainer) -> None:
    from astro_jupyter.export import export_session

    session = await services.sessions.create(title="Imported chat")
    await services.messages.append_many(session.id, [
        {"role": "user", "content": "What is M 87?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "t1", "type": "function", "function": {"name": "query_target", "arguments": "{\"name\": \"M 87\"}"}}]},
        {"role": "tool", "tool_call_id": "t1", "name": "query_target", "content": "M 87 RA 187.7"},
        {"role": "assistant", "content": "A giant elliptical in Virgo."},
        {"role": "user", "content": "And its black hole?"},
        {"role": "assistant", "content": "6.5 billion solar masses."},
    ])
    nb = await export_session(services, session.id)
    nbformat.validate(nb)
    sources = [c.source for c in nb.cells]
    assert [s.split("\n")[0] for s in sources if s.startswith("## Turn")] == ["## Turn 1", "## Turn 2"]
    assert "> And its black hole?" in next(s for s in sources if s.startswith("## Turn 2"))
    assert [c.source for c in _code(nb)] == ['%astro query_target {"name": "M 87"}']
    assert _result_text(_code(nb)[0]) == "M 87 RA 187.7"
    assert [s for s in sources if s.startswith("**Answer**")] == [
        "**Answer**\n\nA giant elliptical in Virgo.", "**Answer**\n\n6.5 billion solar masses."]


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o027, 0o640), (0o002, 0o664)])
@pytest.mark.asyncio
async def test_exported_notebook_respects_the_umask(recorded: Any, tmp_path: Path, umask: int, mode: int) -> None:
    """Like any file the user saves (it was 0600: mkstemp's mode survived the rename)."""
    from astro_jupyter.cli import main

    _, sid = recorded
    old = os.umask(umask)
    try:
        target = tmp_path / f"log-{umask:o}.ipynb"
        assert await asyncio.to_thread(main, ["export", sid, "-o", str(target)]) == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE(target.stat().st_mode) == mode
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
