"""Door: ownership inside tools and routes on a multi-user server (issue 11, item 4).

Two named identities (as JupyterHub or a custom IdentityProvider gives) on one real server,
runs driven by the scripted LLM through the real ``openai`` client. What Bob's runs and
requests see of Alice's work: her sessions through ``search_history`` (tool and route), her
persisted tool outputs through the file tools, her background tasks, her notes, her model.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jupyter_server.auth.identity import IdentityProvider, User

from astro_jupyter.app import AstroApp
from tests.fakes.openai_server import ScriptedCall, Turn
from astro_jupyter.agent.executor import ToolLimits
from astro_jupyter.services.container import Tuning
from tests.agent.runtime_helpers import fast
from tests.server.conftest import Api, api, astro_service, jp_server_config  # noqa: F401 - the server fixtures

TOKENS = {"alice-secret": "alice", "bob-secret": "bob"}
ALICE = {"Authorization": "token alice-secret"}
BOB = {"Authorization": "token bob-secret"}
SECRET = "zeldovich-7731"  # a word only Alice's work contains


class TwoUserIdentityProvider(IdentityProvider):
    async def get_user(self, handler: Any) -> User | None:  # type: ignore[override]
        match = self.auth_header_pat.match(handler.request.headers.get("Authorization", ""))
        if match and match.group(2) in TOKENS:
            handler._token_authenticated = True
            return User(TOKENS[match.group(2)])
        return await super().get_user(handler)


@pytest.fixture
def extra_server_config() -> dict[str, Any]:
    return {"ServerApp": {"identity_provider_class": TwoUserIdentityProvider}}


@pytest.fixture
def astro_overrides(openai_server: Any) -> dict[str, Any]:
    return {"openai_base_url": openai_server.url, "openai_api_key": "k", "llm_model": "shared-default",
            }


@pytest.fixture
def astro_tuning() -> Tuning:
    return fast(tools=ToolLimits(max_output_chars=1500, preview_chars=100))


async def _run(api: Api, who: dict[str, str], prompt: str, service: AstroApp) -> list[dict[str, Any]]:
    """Start a run as ``who``, read its stream to ``done``, return its stored events."""
    status, started = await api("POST", "astro/api/runs", body={"prompt": prompt}, headers=who)
    assert status == 201, started
    status, _ = await api("GET", "astro/api/runs", started["run_id"], "events", headers=who)
    assert status == 200
    await service.settle_session(started["session_id"])
    return [data for _, data in await service.services.runs.events_after(started["run_id"], 0)]


def _results(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {e["tool_call_id"]: e for e in events if e["type"] == "tool_result"}


async def test_search_history_tool_sees_only_the_runs_owner(api: Api, openai_server: Any, astro_service: AstroApp) -> None:
    openai_server.script(Turn.say(f"Noted: the {SECRET} cluster is Alice's."))
    await _run(api, ALICE, f"remember the {SECRET} cluster", astro_service)
    shared = await astro_service.services.sessions.create(title=f"kernel notes on {SECRET}")  # ownerless

    search = [Turn.call("load_tool", {"names": ["search_history"]}),
              Turn.call("search_history", {"query": SECRET, "limit": 50}, id="hist"), Turn.say("ok")]
    openai_server.script(*search)
    bob = _results(await _run(api, BOB, "what do we know?", astro_service))["hist"]
    assert not bob["is_error"]
    assert {h["session_id"] for h in bob["metadata"]["hits"]} == {shared.id}  # ownerless rows only
    assert "Alice" not in bob["output"] and "remember the" not in bob["output"]

    openai_server.script(*search)
    alice = _results(await _run(api, ALICE, "what do we know?", astro_service))["hist"]
    assert "Alice's" in alice["output"] and len({h["session_id"] for h in alice["metadata"]["hits"]}) == 2


async def test_search_history_route_is_filtered_before_the_limit(api: Api, astro_service: AstroApp) -> None:
    """250 of Alice's hits used to fill the 200-row window filtered after the query: Bob saw nothing."""
    services = (await astro_service.start()).services
    for i in range(250):
        s = await services.sessions.create(title=f"alice {i}", owner="alice")
        await services.messages.append(s.id, {"role": "user", "content": f"{SECRET} {SECRET} {SECRET} run {i}"})
    mine = await services.sessions.create(title="bob's one", owner="bob")
    await services.messages.append(mine.id, {"role": "user", "content": f"a long note that mentions {SECRET} once " + "x " * 40})
    status, found = await api("GET", "astro/api/search/history", params={"q": SECRET}, headers=BOB)
    assert status == 200 and {r["session_id"] for r in found["results"]} == {mine.id}
    status, found = await api("GET", "astro/api/search/history", params={"q": SECRET, "limit": 20}, headers=ALICE)
    assert status == 200 and len(found["results"]) == 20 and mine.id not in {r["session_id"] for r in found["results"]}


async def test_file_tools_do_not_reach_another_owners_tool_results(
    api: Api, openai_server: Any, astro_service: AstroApp, tmp_path: Path
) -> None:
    config = astro_service.config
    (tmp_path / "alice_draft.txt").write_text(f"{SECRET} " * 200)
    openai_server.script(Turn.call("read_file", {"path": "alice_draft.txt"}, id="big"), Turn.say("read"))
    alice_events = await _run(api, ALICE, "read my draft", astro_service)
    persisted = Path(_results(alice_events)["big"]["metadata"]["persisted_path"])
    before = persisted.read_text()
    (tmp_path / "alice_draft.txt").unlink()  # from now on only the persisted copy holds the text
    results_dir = Path(config.tool_results_dir).resolve()
    assert persisted.is_file() and persisted.resolve().is_relative_to(results_dir / "owners")
    ownerless = results_dir / "kernel_call.txt"  # a kernel / CLI run's output: everyone's
    ownerless.write_text("shared output from the notebook\n")
    link = tmp_path / "innocent.txt"
    link.symlink_to(persisted)

    probes = [
        ScriptedCall("read_file", {"path": str(persisted)}, "read"),
        ScriptedCall("read_file", {"path": "innocent.txt"}, "link"),
        ScriptedCall("grep_files", {"pattern": SECRET[:8], "path": str(results_dir)}, "grep"),
        ScriptedCall("grep_files", {"pattern": SECRET[:8], "path": str(Path(config.home_path).resolve())}, "grephome"),
        ScriptedCall("glob_files", {"pattern": "**/*.txt", "path": str(results_dir)}, "glob"),
        ScriptedCall("glob_files", {"pattern": "*", "path": str(results_dir / "owners")}, "list"),
        ScriptedCall("file_edit", {"path": str(persisted), "old_string": SECRET, "new_string": "x"}, "edit"),
        ScriptedCall("read_file", {"path": str(ownerless)}, "shared"),
    ]
    openai_server.script(Turn.calls_(*probes), Turn.say("done"))
    bob = _results(await _run(api, BOB, "look around", astro_service))
    for key in ("read", "link"):
        assert bob[key]["is_error"] and "another user" in bob[key]["output"], (key, bob[key]["output"])
    assert persisted.parent.name not in bob["list"]["output"]  # owners/ lists only bob's own folder
    assert bob["edit"]["is_error"]  # tool-results/ is never written by a tool
    for key in ("grep", "grephome", "glob"):
        assert SECRET not in bob[key]["output"] and persisted.name not in bob[key]["output"], (key, bob[key]["output"])
    assert "kernel_call.txt" in bob["glob"]["output"]
    assert not bob["shared"]["is_error"] and "shared output" in bob["shared"]["output"]
    assert persisted.read_text() == before  # the edit changed nothing

    openai_server.script(Turn.call("read_file", {"path": str(persisted)}, id="again"), Turn.say("ok"))
    mine = _results(await _run(api, ALICE, "read it again", astro_service))["again"]
    assert not mine["is_error"] and SECRET in mine["output"]


async def test_bg_task_check_and_notes_stay_with_their_owner(api: Api, openai_server: Any, astro_service: AstroApp) -> None:
    from astro_jupyter.store.papers import PaperRecord

    services = (await astro_service.start()).services
    alice_session = await services.sessions.create(title="alice's", owner="alice")
    task_id = await services.bg_tasks.create("download_paper", {"paper_id": "2401.00001"}, session_id=alice_session.id)
    await services.bg_tasks.finish(task_id, ok=True, result=f"downloaded {SECRET}")
    openai_server.script(Turn.call("load_tool", {"names": ["bg_task_check"]}),
                         Turn.call("bg_task_check", {"task_id": task_id}, id="peek"), Turn.say("ok"))
    peek = _results(await _run(api, BOB, "check tasks", astro_service))["peek"]
    assert peek["is_error"] and "no background task" in peek["output"] and SECRET not in peek["output"]

    await services.library.papers.insert(PaperRecord(id="local:x", title="X", state="parsed", metadata={"pages": 3}))
    openai_server.script(Turn.call("save_note", {"paper_id": "local:x", "comment": f"{SECRET} is on p. 2", "page": 2},
                                   id="note"), Turn.say("saved"))
    saved = _results(await _run(api, ALICE, "note it", astro_service))["note"]
    assert not saved["is_error"] and saved["metadata"]["owner"] == "alice"
    status, bobs = await api("GET", "astro/api/notes", params={"paper_id": "local:x"}, headers=BOB)
    assert status == 200 and SECRET not in json.dumps(bobs)
    status, alices = await api("GET", "astro/api/notes", params={"paper_id": "local:x"}, headers=ALICE)
    assert status == 200 and SECRET in json.dumps(alices)


async def test_the_current_model_is_per_owner(api: Api, openai_server: Any, astro_service: AstroApp) -> None:
    openai_server.models.extend(["shared-default", "alice-model", "bob-model"])  # switching checks the endpoint's list
    status, switched = await api("PUT", "astro/api/models/current", body={"model": "alice-model"}, headers=ALICE)
    assert status == 200 and switched == {"current": "alice-model", "previous": "shared-default"}
    status, bob_models = await api("GET", "astro/api/models", headers=BOB)
    assert status == 200 and bob_models["current"] == "shared-default"
    status, alice_models = await api("GET", "astro/api/models", headers=ALICE)
    assert alice_models["current"] == "alice-model"

    openai_server.script(Turn.say("bob here"))
    await _run(api, BOB, "hi", astro_service)
    openai_server.script(Turn.say("alice here"))
    await _run(api, ALICE, "hi", astro_service)
    assert openai_server.models_requested()[-2:] == ["shared-default", "alice-model"]

    status, switched = await api("PUT", "astro/api/models/current", body={"model": "bob-model"}, headers=BOB)
    assert switched == {"current": "bob-model", "previous": "shared-default"}
    status, alice_models = await api("GET", "astro/api/models", headers=ALICE)
    assert alice_models["current"] == "alice-model"
