"""Resuming: a page reload mid-run reattaches to the live run (no duplicate cards or text),
and a server that goes away mid-run shows "Reconnecting…" then resumes by Last-Event-ID."""

from __future__ import annotations

from tests.fakes.openai_server import Turn

from .conftest import PANEL, current_session, new_session, open_panel, send, shot, wait_done

LONG = " ".join(f"token{i}" for i in range(160))


def _assistant_text(page) -> str:
    return " ".join(t.strip() for t in page.locator(f"{PANEL} .jp-Astro-assistant").all_inner_texts())


def test_reload_mid_run_continues_without_duplicates(page, script):
    script.script(
        Turn.call("query_target", {"name": "M31"}, id="call_reload"),
        Turn.say(LONG, delay=0.03, chunk_size=4),
    )
    new_session(page)
    session_id = current_session(page)
    send(page, "Resolve M31 then talk a while")
    page.locator(f'{PANEL} .jp-Astro-tool[data-tool-call-id="call_reload"][data-status="done"]').wait_for()
    page.wait_for_function(
        f"() => (document.querySelector('{PANEL} .jp-Astro-assistant')?.textContent || '').includes('token10')"
    )
    page.reload()
    open_panel(page)
    panel = page.locator(PANEL)
    # Reattached to the same session and its live run.
    page.wait_for_function(f"() => document.querySelector('{PANEL}').dataset.runStatus === 'running'")
    assert current_session(page) == session_id
    shot(page, "reload-reattached")
    wait_done(page)
    assert panel.locator(".jp-Astro-user-text").all_inner_texts() == ["Resolve M31 then talk a while"]
    assert panel.locator(".jp-Astro-tool").count() == 1
    assert panel.locator('.jp-Astro-tool[data-tool-call-id="call_reload"] .jp-Astro-tool-line').count() == 1
    assert _assistant_text(page) == LONG  # every token once, in order
    assert page.locator(f"{PANEL} .jp-Astro-notice:not(.jp-Astro-usage):visible").count() == 0, page.locator(f"{PANEL} .jp-Astro-notice:not(.jp-Astro-usage):visible").all_inner_texts()


def test_server_going_away_shows_reconnecting_then_resumes(page, script, lab):
    script.script(Turn.say(LONG, delay=0.03, chunk_size=4))
    new_session(page)
    send(page, "Talk while the network fails")
    page.wait_for_function(
        f"() => (document.querySelector('{PANEL} .jp-Astro-assistant')?.textContent || '').includes('token5')"
    )
    status = page.locator(f"{PANEL} .jp-Astro-status")
    with lab.proxy.outage():
        page.wait_for_function(f"() => document.querySelector('{PANEL}').dataset.runStatus === 'reconnecting'")
        assert status.inner_text() == "Reconnecting…"
        shot(page, "reconnecting")
        page.wait_for_timeout(1500)  # the run goes on server-side meanwhile
    wait_done(page, timeout=40_000)
    assert status.inner_text() == ""
    assert _assistant_text(page) == LONG
    assert page.locator(f"{PANEL} .jp-Astro-notice:not(.jp-Astro-usage):visible").count() == 0, page.locator(f"{PANEL} .jp-Astro-notice:not(.jp-Astro-usage):visible").all_inner_texts()
