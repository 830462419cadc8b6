"""The runtime and the store: the audit trail of a run, and a database locked by another process."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.agent.runtime_helpers import collect, fast, make_config, make_runtime, running, types, wires
from tests.fakes.openai_server import Turn
from tests.waiting import until


@pytest.mark.asyncio
async def test_run_leaves_prompt_and_stop_rows_in_the_audit_log(tmp_path, openai_server, sesame_server):
    openai_server.script(Turn.call("query_target", {"name": "M 87"}, id="a1"), Turn.say("Found it."))
    services, runtime = await make_runtime(make_config(tmp_path, openai_server.url, sesame_server.url))
    try:
        handle = await runtime.start_run("Where is M 87, please?", owner="alice")
        await handle.wait()
        await runtime.close()  # drains the fire-and-forget UserPromptSubmit write
        rows = await services.audit.list(handle.session_id)
    finally:
        await services.close()
    by_event: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_event.setdefault(row["event"], []).append(row)
    [prompt] = by_event["UserPromptSubmit"]
    assert prompt["run_id"] == handle.run_id
    assert json.loads(prompt["detail"])["prompt"] == "Where is M 87, please?"
    assert json.loads(prompt["detail"])["owner"] == "alice"
    [stop] = by_event["Stop"]
    assert stop["run_id"] == handle.run_id and json.loads(stop["detail"])["reason"] == "finished"
    assert "SessionStart" in by_event and "SessionEnd" in by_event
    assert [r["tool_name"] for r in by_event.get("tool_use", [])] == ["query_target"]  # the executor's row


_HOLDER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
sys.stdin.readline()  # hold the lock until the test says so
conn.execute("ROLLBACK")
print("released", flush=True)
"""


class LockHolder:
    """Another *process* holding SQLite's write lock (BEGIN EXCLUSIVE) until released."""

    def __init__(self, db_path: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _HOLDER, str(db_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "locked"

    def release(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None and self.proc.stdout is not None
            self.proc.stdin.write("go\n")
            self.proc.stdin.flush()
            assert self.proc.stdout.readline().strip() == "released"
        self.proc.wait(timeout=10)


@pytest.mark.asyncio
async def test_locked_database_ends_the_run_with_a_clear_error_and_loses_nothing(tmp_path, openai_server, sesame_server):
    """Another process takes the write lock while the model is answering; the turn's commit fails."""
    openai_server.script(
        Turn.call("query_target", {"name": "M 31"}, id="L1", first_delay=1.0),
        Turn.say("Second run fine."),
    )
    config = make_config(tmp_path, openai_server.url, sesame_server.url)
    services, runtime = await make_runtime(config, tuning=fast(db_busy_timeout_ms=200))
    holder: LockHolder | None = None
    try:
        first = await runtime.start_run("Where is M 31?")
        sid = first.session_id
        await until(lambda: openai_server.chat_requests, "the model to be asked (the user message is stored)")
        holder = LockHolder(config.db_path)
        t0 = time.monotonic()
        items = await collect(first)
        elapsed = time.monotonic() - t0
        done = await first.wait()
        w = wires(items)
        assert types(items)[0] == "session" and types(items)[-1] == "done" and done.reason == "error"
        errors = [e for e in w if e["type"] == "error"]
        # the turn's commit failed (last); the executor may first report its audit row that could not be written
        assert errors[-1]["reason"] == "store_locked" and errors[-1]["step"] == 1
        assert all("the database is locked by another process" in e["message"] for e in errors)
        # the configured 200 ms busy timeout per write: with the 10 s default, the one failing commit alone
        # would take 10 s (the whole run takes 4-7 s on this machine, loaded or not)
        assert elapsed < 10
        holder.release()
        holder = None
        # what is stored is consistent: the prompt, and no assistant tool call without its result
        msgs = await services.messages.list(sid)
        assert [(m.role, m.content) for m in msgs] == [("user", "Where is M 31?")]
        # a new run on the same session works once the lock is gone, and the failed run is closed
        second = await runtime.start_run("And now?", session_id=sid)
        done2 = await second.wait()
        assert done2.reason == "finished" and second.final_text == "Second run fine."
        assert (await services.runs.get(first.run_id)).status == "error"
        assert (await services.runs.get(second.run_id)).status == "finished"
        history = await services.messages.chat_history(sid)
        assert history == [
            {"role": "user", "content": "Where is M 31?"},
            {"role": "user", "content": "And now?"},
            {"role": "assistant", "content": "Second run fine."},
        ]
        # the model saw the consistent history: no dangling tool call from the failed turn
        assert [m["role"] for m in openai_server.chat_requests[-1]["messages"]] == ["system", "user", "user"]
    finally:
        if holder is not None:
            holder.release()
        await runtime.close()
        await services.close()


@pytest.mark.asyncio
async def test_read_only_database_refuses_a_run_clearly_and_recovers(tmp_path, openai_server, sesame_server):
    """A store that cannot be written (``query_only``: SQLite's read-only switch, effective even as root)."""
    from astro_jupyter.errors import StoreReadOnlyError

    openai_server.script(Turn.say("First."), Turn.say("After."))
    async with running(make_config(tmp_path, openai_server.url, sesame_server.url)) as (services, runtime):
        first = await runtime.start_run("hello")
        await first.wait()
        await services.db.execute("PRAGMA query_only = ON")
        with pytest.raises(StoreReadOnlyError, match="the database cannot be written"):
            await runtime.start_run("refused", session_id=first.session_id)
        with pytest.raises(StoreReadOnlyError):
            await runtime.start_run("refused too")
        assert runtime.active_runs() == [] and openai_server.chat_requests[1:] == []
        await services.db.execute("PRAGMA query_only = OFF")
        second = await runtime.start_run("again", session_id=first.session_id)  # the session lock was released
        assert (await second.wait()).reason == "finished"
        history = await services.messages.chat_history(first.session_id)
        assert [m["content"] for m in history] == ["hello", "First.", "again", "After."]
        assert len(await services.sessions.list()) == 1
