"""Door: the exported research log (issue 11, item 2).

A hostile model controls tool names, arguments, outputs and text. The exported notebook must
contain code only for calls of registered tools, with the arguments as one line of JSON data
that reads back exactly; everything else is an escaped Markdown cell. Checked three ways: the
cell sources, what IPython itself turns each code cell into, and a real replay in a kernel.
"""

from __future__ import annotations

import ast
import asyncio
import json
from pathlib import Path
from typing import Any

import nbformat
import pytest
import pytest_asyncio

from astro_jupyter.config import AstroConfig
from astro_jupyter.services.container import ServiceContainer
from tests.fakes.openai_server import ScriptedCall, Turn

PAYLOAD = "open('PWNED', 'w').write('owned')"

# Registered tools with arguments built to break the line: every line separator IPython or
# str.splitlines honours, quotes, braces IPython would expand, bidi overrides, backticks.
HOSTILE_ARGUMENTS: list[tuple[str, dict[str, Any]]] = [
    ("read_file", {"path": "obs.txt\u2028" + PAYLOAD + " #"}),
    ("read_file", {"path": "obs.txt\x85" + PAYLOAD + " #"}),
    ("read_file", {"path": "obs.txt\u2029" + PAYLOAD + " #"}),
    ("read_file", {"path": "obs.txt\n" + PAYLOAD + " #"}),
    ("read_file", {"path": "obs.txt\r" + PAYLOAD}),
    ("grep_files", {"pattern": "\"}\n" + PAYLOAD + "\n#", "path": "."}),
    ("grep_files", {"pattern": "{__import__('os').system('id')}", "path": "$HOME"}),
    ("query_target", {"name": "M 31\u202e)'di'(metsys.so"}),
    ("query_target", {"name": "M\u200b31\x1b[2K\x00\U000e0041"}),
    ("glob_files", {"pattern": "```\n</code><script>alert(1)</script>", "path": "frames"}),
]

# Names the registry does not know (rejected at run time) that would be code if spliced.
HOSTILE_NAMES = [
    "query_target\n" + PAYLOAD + "  # the recorded arguments follow on this line",
    "query_target\u2028" + PAYLOAD + " #",
    "query_target {}\n" + PAYLOAD + " #",
    "read_file; " + PAYLOAD,
    "`run_bash`",
]


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, openai_server: Any, sesame_server: Any) -> dict[str, Any]:
    project = tmp_path / "project"
    project.mkdir()
    (project / "obs.txt").write_text("M 31 observed at 21:00\n")
    (project / "frames").mkdir()
    for name, value in {
        "ASTRO_PROJECT_ROOT": str(project), "ASTRO_SESAME_URL": sesame_server.url,
        "OPENAI_BASE_URL": openai_server.url, "OPENAI_API_KEY": "sk-test", "LLM_MODEL": "scripted-model",
    }.items():
        monkeypatch.setenv(name, value)
    return {"project": project, "llm": openai_server}


async def _record(env: dict[str, Any], *turns: Turn) -> tuple[ServiceContainer, Any, str]:
    from astro_jupyter.agent.runtime import AgentRuntime

    env["llm"].script(*turns)
    services = await ServiceContainer(AstroConfig()).start()
    runtime = AgentRuntime(services)
    run = await runtime.start_run("Look at M 31", source="kernel")
    await run.wait()
    return services, runtime, run.session_id


@pytest_asyncio.fixture
async def hostile(env: dict[str, Any]) -> Any:
    services, runtime, sid = await _record(
        env,
        Turn.calls_(*[ScriptedCall(name, {"name": "M 31"}) for name in HOSTILE_NAMES], text="Working. "),
        Turn.calls_(*HOSTILE_ARGUMENTS),
        Turn.calls_(ScriptedCall("query_target", '{"name": "M 31"'),  # not JSON
                    ScriptedCall("query_target", '["M 31"]')),  # JSON, not an object
        Turn.say("Done.\n```\n%astro run_bash {\"command\": \"id\"}\n```\n"),
    )
    try:
        yield services, sid
    finally:
        await runtime.close()
        await services.close()


def _magic_calls(source: str) -> list[tuple[str, str]]:
    """What IPython executes for a cell: every statement must be one ``run_line_magic`` call."""
    from IPython.core.inputtransformer2 import TransformerManager

    tree = ast.parse(TransformerManager().transform_cell(source))
    calls = []
    for stmt in tree.body:
        assert isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call), ast.unparse(stmt)
        func = stmt.value.func
        assert isinstance(func, ast.Attribute) and func.attr == "run_line_magic", ast.unparse(stmt)
        name, line = (ast.literal_eval(a) for a in stmt.value.args)
        calls.append((name, line))
    return calls


@pytest.mark.asyncio
async def test_only_registered_calls_become_code_and_arguments_read_back(hostile: Any) -> None:
    from astro_jupyter.export import registered_tool_names
    from astro_jupyter.cells.parsing import parse_tool_arguments

    services, sid = hostile
    nb = await export_session_checked(services, sid)
    registered = registered_tool_names(services)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code[0].source == "%load_ext astro_jupyter"
    tool_cells = code[1:]
    assert len(tool_cells) == len(HOSTILE_ARGUMENTS)
    for cell, (name, args) in zip(tool_cells, HOSTILE_ARGUMENTS):
        assert "\n" not in cell.source and len(cell.source.splitlines()) == 1 and cell.source.isprintable()
        [(magic, line)] = _magic_calls(cell.source)
        assert magic == "astro"
        tool, _, rest = line.partition(" ")
        assert tool == name and tool in registered
        assert parse_tool_arguments(rest, {"HOME": "/victim", "__import__": __import__}) == args
    all_code = "\n".join(c.source for c in code)
    assert "\u202e" not in all_code and "\u2028" not in all_code and "\x1b" not in all_code


async def export_session_checked(services: ServiceContainer, sid: str) -> Any:
    from astro_jupyter.export import export_session

    nb = await export_session(services, sid)
    nbformat.validate(nb)
    return nb


@pytest.mark.asyncio
async def test_unknown_names_and_bad_arguments_are_escaped_markdown(hostile: Any) -> None:
    services, sid = hostile
    nb = await export_session_checked(services, sid)
    markdown = [c.source for c in nb.cells if c.cell_type == "markdown"]
    # every one was refused before it ran (unknown tool, arguments not a JSON object): text that says so
    recorded_as_text = [s for s in markdown if s.startswith("*Not run:*")]
    assert len(recorded_as_text) == len(HOSTILE_NAMES) + 2
    for source, name in zip(recorded_as_text, HOSTILE_NAMES):
        # the raw name is shown, inside a fence no content closes; invisible characters as escapes
        shown = name.replace("\u2028", "\\u2028")
        assert shown in source
        assert "\u2028" not in source
        lines = source.split("\n")
        fences = [ln for ln in lines if ln.startswith("```")]
        assert all(len(f.rstrip("text")) >= 3 for f in fences)
    assert '{"name": "M 31"' in recorded_as_text[-2] and '["M 31"]' in recorded_as_text[-1]
    # code-looking answer text stays in its Markdown cell
    answer = next(s for s in markdown if s.startswith("**Answer**"))
    assert "%astro run_bash" in answer


@pytest.mark.asyncio
async def test_a_lone_surrogate_in_stored_events_does_not_break_the_file(hostile: Any, tmp_path: Path) -> None:
    """Event rows are JSON text; one written with ``\\ud800`` escapes (another writer, an older
    version) decodes to a lone surrogate, which UTF-8 cannot write."""
    from astro_jupyter.export import write_notebook

    services, sid = hostile
    # the first call that ran (only those become code): its call and its result get the broken id
    rows = await services.db.fetchall("SELECT seq, type, data FROM agent_events ORDER BY seq")
    ran = next(json.loads(r["data"])["tool_call_id"] for r in rows
               if r["type"] == "tool_result" and json.loads(r["data"])["metadata"].get("ran"))
    call_seq = next(r["seq"] for r in rows if r["type"] == "tool_call" and json.loads(r["data"])["id"] == ran)
    result_row = next(r for r in rows if r["type"] == "tool_result" and json.loads(r["data"])["tool_call_id"] == ran)
    await services.db.execute(
        "UPDATE agent_events SET data = ? WHERE seq = ? AND type = 'tool_call'",
        (json.dumps({"type": "tool_call", "id": "c\ud800", "name": "query_target", "arguments": {"name": "M\ud83131"}}),
         call_seq))
    result = {**json.loads(result_row["data"]), "tool_call_id": "c\ud800"}
    await services.db.execute("UPDATE agent_events SET data = ? WHERE seq = ? AND type = 'tool_result'",
                              (json.dumps(result), result_row["seq"]))
    path = await write_notebook(services, sid, tmp_path / "log.ipynb")
    nb = nbformat.read(path, as_version=4)
    first = next(c for c in nb.cells if c.cell_type == "code" and c.source.startswith("%astro query_target"))
    assert first.source == '%astro query_target {"name": "M\\ud83131"}'  # kept as data, escaped
    assert first.metadata["astro_jupyter"]["tool_call_id"] == "c\ufffd"


@pytest.mark.asyncio
async def test_fenced_output_cannot_break_out(env: dict[str, Any]) -> None:
    from astro_jupyter.export import export_session

    breakout = "x\n```\n\n<img src=https://attacker.example/leak>\n\n````\n## Turn 9"
    services, runtime, sid = await _record(
        env,
        Turn.call("ask_user\n" + PAYLOAD, {"question": breakout}),
        Turn.call("todo_write", {"todos": [{"content": breakout, "status": "pending"}]}),
        Turn.say("ok"),
    )
    try:
        nb = await export_session(services, sid)
    finally:
        await runtime.close()
        await services.close()
    for cell in nb.cells:
        if cell.cell_type != "markdown" or breakout.split("\n")[0] == cell.source:
            continue
        if "attacker.example" not in cell.source:
            continue
        # each occurrence sits inside a fence longer than any backtick run of the content
        lines = cell.source.split("\n")
        opened: str | None = None
        for ln in lines:
            if opened is None and ln.startswith("`````"):
                opened = ln.rstrip("text")
            elif opened is not None and ln == opened:
                opened = None
            elif "attacker.example" in ln:
                assert opened is not None, cell.source


@pytest.mark.slow
@pytest.mark.asyncio
async def test_replaying_the_log_runs_nothing_the_model_smuggled(hostile: Any, env: dict[str, Any]) -> None:
    """Run All on the exported notebook in a real kernel: the smuggled code never runs."""
    from nbclient import NotebookClient

    services, sid = hostile
    nb = await export_session_checked(services, sid)
    project: Path = env["project"]
    client = NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(project)}})
    await asyncio.to_thread(client.execute)
    assert not (project / "PWNED").exists()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert errors == [], [e.evalue for e in errors]
    reran = [json.loads(c.source.split(" ", 2)[2]) for c in nb.cells if c.cell_type == "code" and c.source.startswith("%astro ")]
    assert reran == [args for _, args in HOSTILE_ARGUMENTS]
