"""Team tools: file inboxes (atomic, exactly-once under concurrency, corrupted files reported),
and a teammate subagent spawned through the runtime reporting to the lead's inbox."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from astro_jupyter.agent.tools.load_tool import LoadToolTool
from astro_jupyter.agent.tools.team import (
    CheckTeamInboxTool,
    SendTeammateMessageTool,
    SpawnTeammateTool,
    TeamBroadcastTool,
    live_teammates,
)
from astro_jupyter.events import ToolResult
from astro_jupyter.services.team import TeamError, TeamInbox
from tests.agent.runtime_helpers import collect, make_config, make_runtime
from tests.agent.tools.orch_ctx import make_ctx
from tests.fakes.openai_server import Turn


def test_concurrent_writers_and_readers_lose_and_duplicate_nothing(tmp_path) -> None:
    team = TeamInbox(tmp_path / "team")
    team.register("alice", "photometry")
    received: list[dict[str, Any]] = []
    lock = threading.Lock()
    stop = threading.Event()

    def writer(n: int) -> None:
        for i in range(40):
            team.send("alice", "lead", f"w{n}-m{i}")

    def reader() -> None:
        while True:
            finished = stop.is_set()
            got = team.read("alice").messages
            with lock:
                received.extend(got)
            if finished and not got:
                return

    readers = [threading.Thread(target=reader) for _ in range(3)]
    writers = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for t in readers + writers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    for t in readers:
        t.join()
    contents = [m["content"] for m in received]
    assert len(contents) == 320 and len(set(contents)) == 320
    assert not list((tmp_path / "team" / "alice" / "inbox").iterdir())
    # per writer, messages arrive in the order sent
    for n in range(8):
        mine = [int(c.split("-m")[1]) for c in contents if c.startswith(f"w{n}-")]
        assert sorted(mine) == list(range(40))


def test_corrupted_inbox_file_is_reported_and_kept_others_still_read(tmp_path) -> None:
    team = TeamInbox(tmp_path / "team")
    team.register("bob", "spectra")
    team.send("bob", "lead", "first")
    inbox = tmp_path / "team" / "bob" / "inbox"
    (inbox / "00000000000000000002-broken.json").write_text('{"content": "trunc')
    team.send("bob", "lead", "second")
    result = team.read("bob")
    assert [m["content"] for m in result.messages] == ["first", "second"]
    assert len(result.errors) == 1 and "00000000000000000002-broken.json" in result.errors[0]
    assert "corrupted" in result.errors[0]
    kept = tmp_path / "team" / "bob" / "corrupt" / "00000000000000000002-broken.json"
    assert kept.read_text() == '{"content": "trunc'  # kept for a human, not deleted
    assert team.read("bob").errors == []  # reported once


def test_names_are_checked(tmp_path) -> None:
    team = TeamInbox(tmp_path / "team")
    for bad in ("../etc", "A B", "", "x" * 40):
        with pytest.raises(TeamError, match="invalid teammate name"):
            team.send(bad, "lead", "hi")


@pytest.mark.asyncio
async def test_message_tools_and_inbox_errors(services) -> None:
    ctx, _ = make_ctx(services)
    services.team.register("carol", "catalogues")
    out = await SendTeammateMessageTool().execute({"to": "carol", "content": "cross-match 2MASS"}, ctx)
    assert not out.is_error
    unknown = await SendTeammateMessageTool().execute({"to": "dave", "content": "hi"}, ctx)
    assert unknown.is_error and "no teammate named 'dave'" in unknown.content
    sent = await TeamBroadcastTool(sender="carol").execute({"content": "done with 2MASS"}, ctx)
    assert sent.metadata["recipients"] == ["lead"]
    inbox = services.config.team_dir / "lead" / "inbox"
    (inbox / "00000000000000000001-bad.json").write_bytes(b"\xff\xfe not json")
    read = await CheckTeamInboxTool().execute({}, ctx)
    assert "[broadcast from carol] done with 2MASS" in read.content and "corrupted" in read.content
    assert not read.is_error  # the good message was delivered
    (inbox / "00000000000000000003-bad.json").write_text("[]")
    only_bad = await CheckTeamInboxTool().execute({}, ctx)
    assert only_bad.is_error and "corrupted" in only_bad.content
    carol = await CheckTeamInboxTool(member="carol").execute({}, ctx)
    assert "[message from lead] cross-match 2MASS" in carol.content


def test_owners_is_not_a_teammate_name(tmp_path) -> None:
    """``team/owners/`` holds the named identities' teams: an ownerless lead may not name a teammate so."""
    with pytest.raises(TeamError, match="reserved"):
        TeamInbox(tmp_path / "team").register("owners", "x")


@pytest.mark.asyncio
async def test_each_identity_has_its_own_team(services) -> None:
    """Issue 22, item 1: Bob's tools neither read, consume nor reach Alice's team (nor the ownerless one)."""
    from astro_jupyter.agent.run import RunState

    ctx = {who: make_ctx(services, state=RunState(run_id="r", session_id="s", owner=who))[0] for who in ("alice", "bob", "")}
    for who in ctx:
        services.team_for(who).register("mate", "helper")
        services.team_for(who).send("lead", "mate", f"result for {who or 'shared'}")
    assert services.team_for("alice").team_dir != services.team_for("bob").team_dir != services.config.team_dir
    for who in ctx:
        read = await CheckTeamInboxTool().execute({}, ctx[who])
        assert read.content == f"[message from mate] result for {who or 'shared'}"
        sent = await SendTeammateMessageTool().execute({"to": "mate", "content": f"from {who or 'shared'}"}, ctx[who])
        assert not sent.is_error
    for who in ctx:
        got = [m["content"] for m in services.team_for(who).read("mate").messages]
        assert got == [f"from {who or 'shared'}"]
    assert services.team.members() == ["lead", "mate"]  # team/owners/ is no member of the ownerless team


@pytest.mark.asyncio
async def test_spawned_teammate_works_in_the_background_and_reports_to_the_lead(tmp_path, openai_server) -> None:
    lead_turns = [
        Turn.call("load_tool", {"names": ["spawn_teammate"]}),
        Turn.call("spawn_teammate", {"name": "photometry", "role": "measures magnitudes", "task": "Get the V mag of Vega."}, id="sp"),
        Turn.say("Teammate started."),
    ]
    mate_turns = [
        Turn.call("send_teammate_message", {"to": "lead", "content": "working on Vega"}),
        Turn.say("Vega has V = 0.03 mag."),
    ]

    def respond(body: dict[str, Any]) -> Turn:
        system = body["messages"][0]["content"]
        queue = mate_turns if "You are photometry, a teammate" in system else lead_turns
        return queue.pop(0)

    openai_server.respond_with(respond)
    services, runtime = await make_runtime(
        make_config(tmp_path, openai_server.url), LoadToolTool(), SpawnTeammateTool(), SendTeammateMessageTool(),
        TeamBroadcastTool(), CheckTeamInboxTool(),
    )
    try:
        handle = await runtime.start_run("Ask a teammate for Vega's V magnitude.")
        events = [e for _, e in await collect(handle)]
        spawn = next(e for e in events if isinstance(e, ToolResult) and e.tool_call_id == "sp")
        assert not spawn.is_error and "Teammate photometry started" in spawn.output
        task = live_teammates(services).get(("", "photometry"))
        if task is not None:
            await asyncio.wait_for(task, 10)
        assert lead_turns == [] and mate_turns == []
        mate_req = next(r for r in openai_server.chat_requests if "You are photometry" in r["messages"][0]["content"])
        offered = sorted(t["function"]["name"] for t in mate_req["tools"])
        assert "send_teammate_message" in offered and "check_team_inbox" in offered
        assert "spawn_teammate" not in offered and "load_tool" in offered
        inbox = services.team.read("lead").messages
        assert [(m["from"], m["kind"], m["content"]) for m in inbox] == [
            ("photometry", "message", "working on Vega"),
            ("photometry", "result", "Vega has V = 0.03 mag."),
        ]
        assert services.team.profile("photometry")["status"] == "done"
        assert ("", "photometry") not in live_teammates(services)
    finally:
        await runtime.close()
        await services.close()


def test_writers_in_other_processes_while_this_one_reads(tmp_path) -> None:
    """The kernel and the server share a team directory: one-file messages need no cross-process lock."""
    import subprocess
    import sys

    team = TeamInbox(tmp_path / "team")
    team.register("eve", "x-ray")
    code = (
        "import sys; from pathlib import Path; from astro_jupyter.services.team import TeamInbox;"
        "t = TeamInbox(Path(sys.argv[1]));"
        "[t.send('eve', 'lead', f'p{sys.argv[2]}-{i}') for i in range(60)]"
    )
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "team"), str(n)]) for n in range(3)]
    got: list[str] = []
    while any(p.poll() is None for p in procs):
        got += [m["content"] for m in team.read("eve").messages]
    assert all(p.returncode == 0 for p in procs)
    got += [m["content"] for m in team.read("eve").messages]
    assert sorted(got) == sorted(f"p{n}-{i}" for n in range(3) for i in range(60))
