"""Controlling a run from the sidebar: Stop (mid-stream and before the run has an id),
permission requests (Allow / Deny / Always allow), ask_user answered inline."""

from __future__ import annotations

import time

from tests.fakes.openai_server import Turn

from .conftest import PANEL, new_session, send, shot, wait_done

LONG = " ".join(f"word{i}" for i in range(200))


def _session_runs(lab, page) -> list[dict]:
    sid = page.locator(f"{PANEL} .jp-Astro-session-select").input_value()
    return lab.api("GET", f"astro/api/sessions/{sid}")["runs"]


def test_stop_mid_stream(page, script, lab):
    script.script(Turn.say(LONG, delay=0.03, chunk_size=4))
    new_session(page)
    send(page, "Write a lot")
    panel = page.locator(PANEL)
    page.wait_for_function(
        f"() => (document.querySelector('{PANEL} .jp-Astro-assistant')?.textContent || '').includes('word5')"
    )
    assert panel.locator(".jp-Astro-stop").is_enabled()
    panel.locator(".jp-Astro-stop").click()
    wait_done(page)
    notice = panel.locator('.jp-Astro-notice[data-variant="done"]')
    assert notice.inner_text() == "Run stopped."
    shown = panel.locator(".jp-Astro-assistant").last.inner_text()
    assert "word199" not in shown
    time.sleep(1.0)
    assert panel.locator(".jp-Astro-assistant").last.inner_text() == shown  # nothing more arrives
    assert not panel.locator(".jp-Astro-stop").is_enabled()
    assert _session_runs(lab, page)[-1]["status"] == "cancelled"
    shot(page, "stop-mid-stream")


def test_stop_before_the_run_has_an_id(page, script, lab):
    script.script(Turn.say("This should never be shown.", first_delay=2.0))
    new_session(page)
    held = []
    is_start = lambda url: url.split("?")[0].endswith("/astro/api/runs")  # noqa: E731
    page.route(is_start, lambda route: held.append(route))
    send(page, "Start and stop at once")
    page.wait_for_function("() => true")
    deadline = time.monotonic() + 10
    while not held and time.monotonic() < deadline:
        page.wait_for_timeout(50)
    assert held, "the POST astro/api/runs never left the page"
    panel = page.locator(PANEL)
    # The POST has not been answered: no run id yet, but Stop is live.
    assert panel.get_attribute("data-run-status") == "starting"
    panel.locator(".jp-Astro-stop").click()
    held[0].continue_()
    wait_done(page)
    page.unroute(is_start)
    assert panel.locator('.jp-Astro-notice[data-variant="done"]').inner_text() == "Run stopped."
    assert "never be shown" not in panel.inner_text()
    assert _session_runs(lab, page)[-1]["status"] == "cancelled"


def test_permission_allow(page, script):
    script.script(
        Turn.call("run_bash", {"command": "echo hi-from-bash"}, id="call_bash"),
        Turn.say("The command printed its greeting."),
    )
    new_session(page)
    send(page, "Run echo")
    panel = page.locator(PANEL)
    question = panel.locator(".jp-Astro-permission")
    question.wait_for()
    assert "run_bash" in question.inner_text()
    assert "echo hi-from-bash" in question.inner_text()
    shot(page, "permission-request")
    question.get_by_role("button", name="Allow", exact=True).click()
    wait_done(page)
    assert "Answered: allow" in question.inner_text()
    assert question.get_by_role("button", name="Allow", exact=True).is_disabled()
    card = panel.locator('.jp-Astro-tool[data-tool-call-id="call_bash"]')
    assert "hi-from-bash" in card.locator(".jp-Astro-tool-output").inner_text()
    assert card.get_attribute("data-status") == "done"


def test_permission_deny(page, script):
    script.script(
        Turn.call("run_bash", {"command": "echo should-not-run"}, id="call_denied"),
        Turn.say("Understood, I will not run it."),
    )
    new_session(page)
    send(page, "Run something")
    panel = page.locator(PANEL)
    question = panel.locator(".jp-Astro-permission")
    question.get_by_role("button", name="Deny").click()
    wait_done(page)
    card = panel.locator('.jp-Astro-tool[data-tool-call-id="call_denied"]')
    assert card.get_attribute("data-status") == "error"
    output = card.locator(".jp-Astro-tool-output").inner_text()
    assert "should-not-run" not in output.replace("echo should-not-run", "")
    tool_msgs = [m for m in script.chat_requests[-1]["messages"] if m.get("role") == "tool"]
    assert "den" in tool_msgs[-1]["content"].lower()


def test_permission_always_allow_for_the_session(page, script):
    script.script(
        Turn.call("run_bash", {"command": "echo first"}, id="call_a"),
        Turn.call("run_bash", {"command": "echo second"}, id="call_b"),
        Turn.say("Both ran."),
    )
    new_session(page)
    send(page, "Run two commands")
    panel = page.locator(PANEL)
    panel.locator(".jp-Astro-permission").get_by_role("button", name="Always allow for this session").click()
    wait_done(page)
    assert panel.locator(".jp-Astro-permission").count() == 1  # the second call did not ask
    assert "second" in panel.locator('.jp-Astro-tool[data-tool-call-id="call_b"] .jp-Astro-tool-output').inner_text()


def test_ask_user_answered_inline(page, script):
    script.script(
        Turn.call("ask_user", {"question": "Which target should I resolve?", "options": ["M31", "M87"]}, id="call_ask"),
        Turn.say("You chose a target."),
    )
    new_session(page)
    send(page, "Ask me something")
    panel = page.locator(PANEL)
    question = panel.locator(".jp-Astro-ask_user")
    question.wait_for()
    assert "Which target should I resolve?" in question.inner_text()
    shot(page, "ask-user")
    question.get_by_role("button", name="M87").click()
    wait_done(page)
    assert "Answered: M87" in question.inner_text()
    tool_msgs = [m for m in script.chat_requests[-1]["messages"] if m.get("role") == "tool"]
    assert "M87" in tool_msgs[-1]["content"]
