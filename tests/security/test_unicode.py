"""Door 7: one lone UTF-16 surrogate must not crash the CLI, kill an SSE stream or lose stored events.

Surrogates arrive two ways, both exercised for real: in model text (the scripted OpenAI server
JSON-escapes ``\\ud800``, which the real ``openai`` client decodes to a lone surrogate) and in tool
output (a file whose name is not UTF-8 comes back from ``glob_files`` as ``\\udcff``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import httpx2
import pytest

from astro_jupyter.agent.bus import EventBus
from astro_jupyter.agent.tools.filesystem.glob import GlobFilesTool
from astro_jupyter.events import Done, SessionStarted, TextDelta, ToolResult, to_json
from astro_jupyter.export import export_session
from astro_jupyter.server.sse import format_event
from astro_jupyter.textsafe import REPLACEMENT, clean_text, safe_json
from tests.agent.runtime_helpers import collect, make_config, running, wires
from tests.fakes.openai_server import Turn
from astro_jupyter.server.sse import SsePacing
from tests.server.conftest import api, astro_overrides, astro_service, extra_server_config, jp_server_config, live_url  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]
BAD_NAME = b"bad\xffname.txt"


def _bad_file(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    with open(os.path.join(os.fsencode(directory), BAD_NAME), "w") as fh:
        fh.write("x")


def _utf8_ok(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def test_safe_json_replaces_surrogates_and_keeps_the_rest() -> None:
    data = {"type": "text_delta", "delta": "a\ud800b", "k\udfff": ["\udcff", 1, None]}
    text = safe_json(data)
    assert _utf8_ok(text)
    assert json.loads(text) == {"type": "text_delta", "delta": f"a{REPLACEMENT}b", f"k{REPLACEMENT}": [REPLACEMENT, 1, None]}
    assert safe_json({"type": "x", "delta": "plain ☃"}) == '{"type":"x","delta":"plain ☃"}'  # untouched fast path
    deep: Any = []
    for _ in range(5000):
        deep = [deep]
    cut = safe_json({"type": "tool_result", "metadata": deep})  # json.dumps alone raises RecursionError
    assert json.loads(cut)["type"] == "tool_result" and "nested deeper than" in cut
    assert clean_text("\ud83d\ude00") == REPLACEMENT * 2 and clean_text("😀") == "😀"


def test_sse_block_and_json_lines_always_encode() -> None:
    block = format_event(7, 'x"\ud800"')
    assert block.decode("utf-8") == f'id: 7\ndata: x"{REPLACEMENT}"\n\n'
    line = to_json(TextDelta(delta="a\ud800", step=1))
    assert _utf8_ok(line) and json.loads(line)["delta"] == f"a{REPLACEMENT}"


@pytest.mark.asyncio
async def test_persister_keeps_the_batch_around_a_bad_event(services: Any) -> None:
    session = await services.sessions.create(owner="")
    await services.runs.create("run_x", session.id)
    bus = EventBus("run_x", services.runs, flush_interval=0.01)
    bus.publish(SessionStarted(session_id=session.id, run_id="run_x"))
    bus.publish(TextDelta(delta="before", step=1))
    bus.publish(ToolResult(tool_call_id="c", name="glob_files", output="bad\udcffname", metadata={"p\ud800": ["\udfff"]}))
    bus.publish(TextDelta(delta="after", step=1))
    bus.publish(Done(session_id=session.id, run_id="run_x"))
    await bus.aclose()
    assert bus.persist_errors == []
    stored = await services.runs.events_after("run_x")
    assert [d["type"] for _, d in stored] == ["session", "text_delta", "tool_result", "text_delta", "done"]
    assert stored[2][1]["output"] == f"bad{REPLACEMENT}name" and stored[2][1]["metadata"] == {f"p{REPLACEMENT}": [REPLACEMENT]}


@pytest.mark.asyncio
async def test_model_text_and_tool_output_with_surrogates_finish_cleanly(tmp_path: Path, openai_server: Any) -> None:
    _bad_file(tmp_path)
    openai_server.script(
        Turn.call("glob_files", {"pattern": "*.txt", "path": "."}, id="c1", text="look \ud800 here "),
        Turn.say("found \udfff it", reasoning="hmm \udc00"),
    )
    async with running(make_config(tmp_path, openai_server.url), GlobFilesTool()) as (services, runtime):
        handle = await runtime.start_run("list the files")
        items = await collect(handle)
        done = await handle.wait()
        stored = await services.runs.events_after(handle.run_id)
        messages = await services.messages.list(handle.session_id)
        notebook = await export_session(services, handle.session_id)
    live = wires(items)
    assert done.reason == "finished" and not [e for e in live if e["type"] == "error"]
    text = "".join(e["delta"] for e in live if e["type"] == "text_delta")
    assert text == f"look {REPLACEMENT} here found {REPLACEMENT} it"
    result = next(e for e in live if e["type"] == "tool_result")
    assert result["output"] == f"bad{REPLACEMENT}name.txt" and not result["is_error"]
    # every event reached the store (the batch used to be dropped whole), each encodable
    assert [d["type"] for _, d in stored] == [e["type"] for e in live]
    assert all(_utf8_ok(json.dumps(d, ensure_ascii=False)) for _, d in stored)
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[2].content == f"bad{REPLACEMENT}name.txt"
    # the second request reached the model (the tool result used to make the request unencodable)
    assert len(openai_server.chat_requests) == 2
    assert len(notebook.cells) > 2


def test_cli_prints_surrogates_without_traceback(tmp_path: Path, openai_server: Any) -> None:
    project = tmp_path / "project"
    _bad_file(project)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LLM_", "ASTRO_"))}
    env.update(ASTRO_HOME=str(tmp_path / "home"), ASTRO_PROJECT_ROOT=str(project), OPENAI_BASE_URL=openai_server.url,
               OPENAI_API_KEY="k", PYTHONPATH=str(ROOT), PYTHONIOENCODING="utf-8")
    for extra in ([], ["--json"]):
        openai_server.script(Turn.call("glob_files", {"pattern": "*.txt"}, text="look \ud800 "), Turn.say("bye \udfff"))
        proc = subprocess.run([sys.executable, "-m", "astro_jupyter.cli", "ask", "files?", *extra], env=env,
                              capture_output=True, timeout=60, cwd=ROOT)
        out, err = proc.stdout.decode("utf-8"), proc.stderr.decode("utf-8")  # strict: the output is valid UTF-8
        assert proc.returncode == 0, err
        assert "Traceback" not in err and "Traceback" not in out
        if extra:
            events = [json.loads(line) for line in out.splitlines()]
            assert events[-1]["type"] == "done" and events[-1]["reason"] == "finished"
            assert next(e for e in events if e["type"] == "tool_result")["output"] == f"bad{REPLACEMENT}name.txt"
        else:
            assert f"look {REPLACEMENT}" in out and f"bye {REPLACEMENT}" in out and "[finished" in err


@pytest.fixture
def astro_overrides(openai_server: Any, tmp_path: Path) -> dict[str, Any]:  # noqa: F811 - this module's settings
    return {"openai_base_url": openai_server.url, "openai_api_key": "k"}


@pytest.fixture
def sse_pacing() -> SsePacing:
    return SsePacing(keepalive_secs=0.2)


async def test_sse_stream_survives_a_surrogate(api: Any, live_url: Callable[[str], str], jp_auth_header: dict[str, str],  # noqa: F811
                                               openai_server: Any, tmp_path: Path, astro_service: Any) -> None:  # noqa: F811
    _bad_file(tmp_path)
    openai_server.script(Turn.call("glob_files", {"pattern": "*.txt"}, text="a \ud800 b "), Turn.say("done \udfff"))
    status, started = await api("POST", "astro/api/runs", body={"prompt": "files?"})
    assert status == 201
    events: list[dict[str, Any]] = []
    async with httpx2.AsyncClient(timeout=30) as client:
        async with client.sse(live_url(f"astro/api/runs/{started['run_id']}/events"), headers=jp_auth_header) as source:
            async for message in source:
                if message.data:
                    events.append(json.loads(message.data))
    kinds = [e["type"] for e in events]
    assert kinds[0] == "session" and kinds[-1] == "done" and events[-1]["reason"] == "finished"
    assert not [e for e in events if e["type"] == "error" and e.get("reason") != "notice"]  # the home-root notice may come
    assert next(e for e in events if e["type"] == "tool_result")["output"] == f"bad{REPLACEMENT}name.txt"
    status, notebook = await api("GET", "astro/api/sessions", started["session_id"], "export")
    assert status == 200 and notebook["cells"]
    stored = await astro_service.services.runs.events_after(started["run_id"])
    assert [d["type"] for _, d in stored] == kinds
