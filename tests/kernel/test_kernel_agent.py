"""``%%astro``: the agent in a cell against the scripted LLM — timeline, answer object, interrupt."""

from __future__ import annotations

import os
import stat
import threading
import _thread
import time
from pathlib import Path

import nbformat
import pytest

from tests.fakes.openai_server import Turn
from tests.waiting import until_sync


def test_cell_runs_tools_and_returns_the_answer(load, llm_env, project: Path, capsys) -> None:
    (project / "obs.txt").write_text("M 31 observed at 21:00\n")
    llm_env.script(
        Turn.call("read_file", {"path": "obs.txt"}, text="Let me look. "),
        Turn.say("The log says M 31 was observed at 21:00."),
    )
    ip = load()
    answer = ip.run_cell_magic("astro", "", "When was M 31 observed?")
    out = capsys.readouterr().out
    assert "Let me look." in out
    assert "→ read_file" in out and "← read_file" in out
    assert answer.text == "The log says M 31 was observed at 21:00."
    assert answer.reason == "finished" and answer.tool_calls == [{"name": "read_file", "is_error": False, "subagent": None}]
    # the timeline streamed the answer; Out[n] is a one-line handle, not the answer a second time
    assert "The log says M 31 was observed at 21:00." in out
    assert answer._repr_markdown_() is None and "\n" not in repr(answer) and answer.session_id in repr(answer)
    # the tool result went back to the model
    second = llm_env.chat_requests[1]["messages"]
    assert any(m.get("role") == "tool" and "observed at 21:00" in m.get("content", "") for m in second)
    # the session is in the shared store, searchable, continued by the next cell
    sessions = ip.run_line_magic("astro", "sessions")
    assert [row["id"] for row in sessions.rows] == [answer.session_id]
    hits = ip.run_line_magic("astro", 'history "observed"')
    assert any(h["session_id"] == answer.session_id for h in hits.rows)
    llm_env.script(Turn.say("Yes, same session."))
    follow = ip.run_cell_magic("astro", "", "Same session?")
    assert follow.session_id == answer.session_id
    assert any("observed at 21:00" in str(m.get("content")) for m in llm_env.chat_requests[-1]["messages"])
    fresh_turn = Turn.say("New one.")
    llm_env.script(fresh_turn)
    fresh = ip.run_cell_magic("astro", "--new", "Start over")
    assert fresh.session_id != answer.session_id
    # export from the magic
    old_umask = os.umask(0o022)
    try:
        path = ip.run_line_magic("astro", f"export {answer.session_id} -o log.ipynb")
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE(Path(path).stat().st_mode) == 0o644  # like any file the user saves (was 0600)
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata["astro_jupyter"]["session_id"] == answer.session_id


def test_model_switch_and_flags_reach_the_llm(load, llm_env) -> None:
    from IPython.core.error import UsageError

    llm_env.models.extend(["tiny-model", "big-model"])
    llm_env.script(Turn.say("ok"))
    ip = load()
    with pytest.raises(UsageError, match="no model named 'tiny-modle'; it lists: big-model, chain-a, .*tiny-model"):
        ip.run_line_magic("astro", "model tiny-modle")  # a typo is refused with the endpoint's names
    ip.run_line_magic("astro", "model tiny-model")
    ip.run_cell_magic("astro", "--max-steps 1", "hello")
    assert llm_env.chat_requests[-1]["model"] == "tiny-model"
    llm_env.script(Turn.say("ok"))
    ip.run_cell_magic("astro", "--new --model big-model", "hello again")
    assert llm_env.chat_requests[-1]["model"] == "big-model"


def test_bad_cell_arguments(load, llm_env) -> None:
    from IPython.core.error import UsageError

    ip = load()
    with pytest.raises(UsageError, match="unrecognized arguments"):
        ip.run_cell_magic("astro", "--bogus", "hi")
    with pytest.raises(UsageError, match="empty"):
        ip.run_cell_magic("astro", "", "   ")
    with pytest.raises(UsageError, match="no session"):
        ip.run_cell_magic("astro", "--session sess_does_not_exist", "hi")
    with pytest.raises(UsageError, match="the limit is 100000"):  # the app's prompt rule, as in the sidebar
        ip.run_cell_magic("astro", "", "x" * 100_001)


def test_ask_user_is_answered_with_input(load, llm_env, monkeypatch, capsys) -> None:
    llm_env.script(
        Turn.call("ask_user", {"question": "Which band?", "options": ["optical", "radio"]}),
        Turn.say("Radio it is."),
    )
    asked: list[str] = []
    monkeypatch.setattr("builtins.input", lambda prompt="": asked.append(prompt) or "radio")
    ip = load()
    answer = ip.run_cell_magic("astro", "", "Plan an observation")
    assert asked and "Which band?" in asked[0] and "optical / radio" in asked[0]
    assert answer.text == "Radio it is."
    tool_msgs = [m for m in llm_env.chat_requests[1]["messages"] if m.get("role") == "tool"]
    assert "radio" in tool_msgs[0]["content"]


def test_interrupt_cancels_the_run_cleanly(load, llm_env, project: Path, capsys) -> None:
    hold = threading.Event()  # the answer never ends by itself
    llm_env.script(Turn.say("This answer streams very slowly " * 20, hold=hold))
    ip = load()

    def interrupt_once_streaming() -> None:
        until_sync(lambda: llm_env.chat_requests, "the run to reach the model")
        _thread.interrupt_main()

    threading.Thread(target=interrupt_once_streaming, daemon=True).start()
    try:
        answer = ip.run_cell_magic("astro", "", "Tell me a long story")
    finally:
        hold.set()
    assert llm_env.remaining == 0  # interrupted while the answer streamed
    assert answer.reason == "cancelled"
    out = capsys.readouterr().out
    assert "Interrupted: the run was cancelled" in out and answer.session_id in out
    # the kernel is usable and the session consistent: the next cell continues it
    (project / "f.txt").write_text("fine\n")
    assert "fine" in ip.run_line_magic("astro", "read_file path=f.txt").content
    llm_env.script(Turn.say("Back again."))
    again = ip.run_cell_magic("astro", "", "Are you there?")
    assert again.reason == "finished" and again.text == "Back again." and again.session_id == answer.session_id
    roles = [m["role"] for m in llm_env.chat_requests[-1]["messages"]]
    assert roles[0] == "system" and roles.count("user") == 2 and roles[-1] == "user"


def test_subagent_line_magic_streams_and_returns_the_summary(load, llm_env, project: Path, capsys) -> None:
    (project / "frames").mkdir()
    (project / "frames" / "m31_r.txt").write_text("x\n")
    llm_env.script(
        Turn.call("glob_files", {"pattern": "*.txt", "path": "frames"}),
        Turn.say("Found one frame: frames/m31_r.txt"),
    )
    ip = load()
    ip.run_cell('r = %astro subagent "List the frames of M 31" --max-steps 2')
    r = ip.user_ns["r"]
    assert r.text.endswith("Found one frame: frames/m31_r.txt") and r.reason == "finished"
    assert [c["name"] for c in r.tool_calls] == ["glob_files"]
    out = capsys.readouterr().out
    assert "[subagent" in out and "    → glob_files" in out and "    ← glob_files" in out
    first = llm_env.chat_requests[0]["messages"]
    assert first[-1] == {"role": "user", "content": "List the frames of M 31"}


def test_permission_prompt_in_a_cell(load, llm_env, project: Path, monkeypatch, capsys) -> None:
    llm_env.script(Turn.call("run_bash", {"command": "echo from-bash > made.txt"}), Turn.say("Done."))
    prompts: list[str] = []
    monkeypatch.setattr("builtins.input", lambda prompt="": prompts.append(prompt) or "y")
    ip = load()
    answer = ip.run_cell_magic("astro", "", "make a file")
    assert prompts and "Allow run_bash?" in prompts[0]
    assert "│ echo from-bash > made.txt" in capsys.readouterr().out  # the whole request is printed before the prompt
    assert (project / "made.txt").read_text() == "from-bash\n"
    assert answer.text == "Done."
    llm_env.script(Turn.call("run_bash", {"command": "echo again > again.txt"}), Turn.say("Refused."))
    monkeypatch.setattr("builtins.input", lambda prompt="": "n")
    ip.run_cell_magic("astro", "", "again")
    assert not (project / "again.txt").exists()
    tool_msgs = [m for m in llm_env.chat_requests[-1]["messages"] if m.get("role") == "tool"]
    assert "Permission denied" in tool_msgs[-1]["content"]


def test_export_magic_needs_a_session(load) -> None:
    from IPython.core.error import UsageError

    ip = load()
    with pytest.raises(UsageError, match="no session yet"):
        ip.run_line_magic("astro", "export")
    with pytest.raises(UsageError, match="sess_missing"):
        ip.run_line_magic("astro", "export sess_missing -o x.ipynb")


@pytest.mark.parametrize("cancel_delay", [0.0, 0.5])
def test_a_question_that_cannot_be_asked_does_not_strand_the_session(load, llm_env, monkeypatch, cancel_delay) -> None:
    """input() failing (no stdin) ends the cell with that error, cancels the run and frees the session.
    The question is withdrawn, not answered: even when the cancel is slow to arrive (0.5 s here), the
    run never acts on a made-up "no answer"."""
    if cancel_delay:
        from astro_jupyter.kernel import loop_thread

        real_cancel = loop_thread.KernelLoopThread.cancel_run

        def slow_cancel(self, handle):  # type: ignore[no-untyped-def]
            time.sleep(cancel_delay)
            real_cancel(self, handle)

        monkeypatch.setattr(loop_thread.KernelLoopThread, "cancel_run", slow_cancel)
    llm_env.script(Turn.call("ask_user", {"question": "Which band?"}))

    def no_stdin(prompt: str = "") -> str:
        raise EOFError("no stdin")

    monkeypatch.setattr("builtins.input", no_stdin)
    ip = load()
    started = time.monotonic()
    with pytest.raises(EOFError):
        ip.run_cell_magic("astro", "", "Plan an observation")
    assert time.monotonic() - started < 20, "the cancelled run must not wait out the ask_user timeout"
    llm_env.script(Turn.say("Still here."))
    again = ip.run_cell_magic("astro", "", "Are you there?")
    assert again.reason == "finished" and again.text == "Still here."
    tool_msgs = [m for m in llm_env.chat_requests[-1]["messages"] if m.get("role") == "tool"]
    assert len(tool_msgs) == 1 and "cancel" in tool_msgs[0]["content"].lower()


def test_a_failing_event_stream_is_shown_not_swallowed(load, llm_env, monkeypatch) -> None:
    """If following the run's events fails, the cell raises that error and the session is freed."""
    from astro_jupyter.agent.run import RunHandle

    def broken_events(self, after_seq: int = 0):
        async def fail():
            raise RuntimeError("event replay failed")
            yield  # pragma: no cover - makes this an async generator

        return fail()

    ip = load()
    with monkeypatch.context() as patch:
        patch.setattr(RunHandle, "events", broken_events)
        with pytest.raises(RuntimeError, match="event replay failed"):
            ip.run_cell_magic("astro", "", "Hello")
    llm_env.script(Turn.say("Second answer."))
    again = ip.run_cell_magic("astro", "", "Hello again")
    assert again.reason == "finished" and again.text == "Second answer."
