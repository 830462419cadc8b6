"""Sessions (new, switch from the Sessions view, rename and delete from its context menu and
keys), history search grouped per session with highlighted snippets opening the hit, the
coordinator toggle per session in the "…" menu, the model chip, export, the bookmarklet."""

from __future__ import annotations

import json

import pytest

from tests.fakes.openai_server import Turn

from .conftest import (
    PANEL,
    current_session as _current,
    more_menu,
    new_session,
    open_panel,
    open_sessions,
    select_session,
    send,
    shot,
    wait_done,
)


def _rename(page, title: str) -> None:
    more_menu(page, "Rename chat")
    dialog = page.locator(".jp-Dialog")
    dialog.locator("input").fill(title)
    dialog.locator(".jp-mod-accept").click()
    dialog.wait_for(state="detached")


def test_sessions_search_and_open_hit(page, script):
    script.script(
        Turn.say("Filler answer one."),
        Turn.say("The quokkanebula <img src=x onerror=\"window.__astroPwned=6\"> glows in Halpha."),
        Turn.say("Nothing to see in this one."),
    )
    panel = page.locator(PANEL)
    new_session(page)
    a = _current(page)
    send(page, "First question, filler")
    wait_done(page)
    send(page, "Tell me about the nebula")
    wait_done(page)
    _rename(page, 'Quokka study <b>bold</b>')
    page.wait_for_function(f"() => document.querySelector('{PANEL} .jp-Astro-title').textContent === 'Quokka study <b>bold</b>'")
    new_session(page)
    b = _current(page)
    assert b != a
    send(page, "Something else entirely")
    wait_done(page)
    assert "quokkanebula" not in panel.locator(".jp-Astro-timeline").inner_text()

    # The Sessions view lists both: title (full on hover), date, model, turns.
    view = open_sessions(page)
    item_a = view.locator(f'.jp-Astro-session-item[data-session-id="{a}"]')
    assert item_a.locator(".jp-Astro-session-title").inner_text() == "Quokka study <b>bold</b>"
    assert item_a.locator(".jp-Astro-session-open").get_attribute("title") == "Quokka study <b>bold</b>"
    assert item_a.locator("b").count() == 0
    meta = item_a.locator(".jp-Astro-session-meta").inner_text()
    assert "2 turns" in meta and "gpt-4o-mini" in meta
    assert view.locator(f'.jp-Astro-session-open[data-session-id="{b}"][aria-current="true"]').count() == 1
    # Switch back from the list: A's history is shown, B's is not.
    select_session(page, a)
    page.wait_for_function(f"() => document.querySelector('{PANEL} .jp-Astro-timeline').textContent.includes('quokkanebula')")
    assert "Something else entirely" not in panel.locator(".jp-Astro-timeline").inner_text()
    select_session(page, b)
    page.wait_for_function(f"() => document.querySelector('{PANEL} .jp-Astro-timeline').textContent.includes('Something else')")

    # Search everywhere: the hits grouped under session A's title, the match in <mark>, markup inert.
    view = open_sessions(page)
    search = view.locator(".jp-Astro-search-input")
    search.fill("quokkanebula")
    group = view.locator(f'.jp-Astro-search-group[data-session-id="{a}"]')
    hit = group.locator(".jp-Astro-search-hit").first
    hit.wait_for()
    assert view.locator(".jp-Astro-search-group").count() == 1
    assert group.locator(".jp-Astro-search-title").inner_text() == "Quokka study <b>bold</b>"
    assert hit.locator("mark").first.inner_text().lower() == "quokkanebula"
    assert hit.locator("img").count() == 0
    # The title filter keeps only the matching sessions in the list below (none here).
    assert view.locator(".jp-Astro-session-item").count() == 0
    shot(page, "search-results")
    # "This chat" only (B is open): no match there.
    view.locator(".jp-Astro-search-only").click()
    page.wait_for_function(f"() => document.querySelector('{PANEL} .jp-Astro-search-status').textContent === 'No matches.'")
    view.locator(".jp-Astro-search-only").click()
    hit.wait_for()
    message_id = hit.get_attribute("data-message-id")
    assert message_id
    hit.click()
    page.wait_for_function(f"() => document.querySelector('{PANEL}').dataset.sessionId === '{a}'")
    assert not view.is_visible()  # back to the chat
    target = panel.locator(f'.jp-Astro-timeline [data-message-id="{message_id}"]')
    target.wait_for()
    assert "quokkanebula" in target.inner_text()
    assert "jp-Astro-highlight" in (target.get_attribute("class") or "")
    box, view = target.bounding_box(), panel.locator(".jp-Astro-timeline").bounding_box()
    assert box and view and view["y"] <= box["y"] + box["height"] and box["y"] <= view["y"] + view["height"]
    assert page.evaluate("() => window.__astroPwned") is None
    shot(page, "search-opened-hit")

    # Delete B from its context menu: it disappears from the list and from the server.
    select_session(page, b)
    view = open_sessions(page)
    view.locator(".jp-Astro-search-input").fill("")
    view.locator(f'.jp-Astro-session-item[data-session-id="{b}"]').click(button="right")
    page.locator(".lm-Menu.jp-Astro-menu .lm-Menu-item", has_text="Delete").click()
    page.locator(".jp-Dialog .jp-mod-warn").click()
    page.wait_for_function(f"() => !document.querySelector('{PANEL} .jp-Astro-session-item[data-session-id=\"{b}\"]')")
    assert _current(page) == ""

    # Keyboard: arrows move through the list, F2 renames, Enter opens.
    view.locator(".jp-Astro-search-input").focus()
    first = page.evaluate(f"() => document.querySelector('{PANEL} .jp-Astro-session-open').dataset.sessionId")
    seen = []
    for _ in range(60):  # other tests' sessions may be listed above A
        page.keyboard.press("ArrowDown")
        seen.append(page.evaluate("() => document.activeElement.dataset.sessionId"))
        if seen[-1] == a:
            break
    assert seen[0] == first  # the first ArrowDown from the search box lands on the first session, not the second
    assert seen[-1] == a and len(set(seen)) == len(seen), (a, seen)  # each key moved to the next session
    page.keyboard.press("F2")
    dialog = page.locator(".jp-Dialog")
    dialog.locator("input").fill("Renamed by keyboard")
    dialog.locator(".jp-mod-accept").click()
    dialog.wait_for(state="detached")
    page.wait_for_function(
        f"() => document.querySelector('{PANEL} .jp-Astro-session-item[data-session-id=\"{a}\"] .jp-Astro-session-title').textContent === 'Renamed by keyboard'"
    )
    view.locator(f'.jp-Astro-session-open[data-session-id="{a}"]').focus()
    page.keyboard.press("Enter")
    page.wait_for_function(f"() => document.querySelector('{PANEL}').dataset.sessionId === '{a}'")
    assert page.astro_errors == []


def _toggle_coordinator(page, on: bool) -> None:
    """Flip "Coordinator mode" in the "…" menu and wait for the server's answer to the PATCH."""
    assert page.locator(PANEL).get_attribute("data-coordinator") == ("false" if on else "true")
    with page.expect_response(
        lambda r: r.request.method == "PATCH" and "/astro/api/sessions/" in r.url
    ) as reply:
        more_menu(page, "Coordinator mode")
    assert reply.value.status == 200 and reply.value.json()["coordinator"] is on


def _coordinator_shown(page, on: bool) -> None:
    page.wait_for_function(
        f"() => !document.querySelector('{PANEL}').dataset.loading"
        f" && document.querySelector('{PANEL}').dataset.coordinator === '{'true' if on else 'false'}'"
    )


def _reload_without_local_storage(page) -> None:
    page.evaluate("() => window.localStorage.clear()")
    page.reload()
    open_panel(page)


def test_coordinator_toggle_is_stored_on_the_session(page, script, lab):
    script.script(Turn.say("Coordinated."), Turn.say("Plain."))
    panel = page.locator(PANEL)
    bodies: list[dict] = []
    page.on(
        "request",
        lambda r: bodies.append(json.loads(r.post_data or "{}"))
        if r.method == "POST" and r.url.split("?")[0].endswith("/astro/api/runs")
        else None,
    )
    new_session(page)
    a = _current(page)
    _toggle_coordinator(page, True)
    assert lab.api("GET", f"astro/api/sessions/{a}")["coordinator"] is True
    send(page, "Use workers")
    wait_done(page)
    new_session(page)
    b = _current(page)
    assert panel.get_attribute("data-coordinator") == "false"
    send(page, "No workers")
    wait_done(page)
    assert [body.get("coordinator") for body in bodies] == [True, False]
    tools = [{t["function"]["name"] for t in r.get("tools") or []} for r in script.chat_requests]
    assert len(tools) == 2 and "delegate_task" in tools[0] and "delegate_task" not in tools[1]
    assert not page.evaluate("() => Object.keys(window.localStorage).filter(k => k.includes('coordinator'))")

    # the flag survives a reload with nothing in the browser's storage: it comes from the server
    _reload_without_local_storage(page)
    select_session(page, a)
    _coordinator_shown(page, True)
    select_session(page, b)
    _coordinator_shown(page, False)
    select_session(page, a)
    _coordinator_shown(page, True)
    _toggle_coordinator(page, False)
    assert lab.api("GET", f"astro/api/sessions/{a}")["coordinator"] is False

    _reload_without_local_storage(page)
    select_session(page, a)
    _coordinator_shown(page, False)
    assert page.astro_errors == []


def test_model_switcher(page, script, lab):
    panel = page.locator(PANEL)
    chip = panel.locator(".jp-Astro-model-chip")
    page.wait_for_function(f"() => document.querySelector('{PANEL} .jp-Astro-model-chip').textContent === 'gpt-4o-mini'")
    try:
        chip.click()
        menu = page.locator(".lm-Menu.jp-Astro-menu").last
        menu.wait_for()
        assert "chain-a" in menu.locator(".lm-Menu-itemLabel").all_inner_texts()
        menu.locator(".lm-Menu-item", has_text="chain-a").click()
        page.wait_for_function(f"() => document.querySelector('{PANEL} .jp-Astro-model-chip').textContent === 'chain-a'")
        assert lab.api("GET", "astro/api/models")["current"] == "chain-a"
        script.script(Turn.say("Answered by chain-a."))
        new_session(page)
        send(page, "Which model?")
        wait_done(page)
        assert script.chat_requests[-1]["model"] == "chain-a"
    finally:
        lab.api("PUT", "astro/api/models/current", {"model": "gpt-4o-mini"})


def test_bookmarklet_from_the_menu(page, lab):
    with page.context.expect_page() as popup:
        more_menu(page, "Bookmarklet")
    bookmarklet = popup.value
    bookmarklet.wait_for_load_state()
    assert bookmarklet.url.split("?")[0].endswith("/astro/bookmarklet")
    response = page.request.get(bookmarklet.url)
    assert response.status == 200
    bookmarklet.close()


def test_export_opens_the_notebook(page, script, lab):
    export = pytest.importorskip("astro_jupyter.export")
    if not hasattr(export, "export_session"):
        pytest.skip("astro_jupyter.export.export_session has not landed")
    script.script(Turn.say("Exportable answer about M31."))
    new_session(page)
    send(page, "Something to export")
    wait_done(page)
    _rename(page, "Export me")
    (lab.root / "Export-me.ipynb").write_text("{}")  # taken: the export picks the next free name
    failures: list[str] = []
    page.on("response", lambda r: failures.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    page.on("console", lambda m: failures.append(m.text) if m.type == "error" else None)
    page.locator(f"{PANEL} .jp-Astro-export").click()
    tab = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="Export-me-1")
    tab.wait_for()
    saved = json.loads((lab.root / "Export-me-1.ipynb").read_text())
    assert saved["nbformat"] == 4
    assert any("Exportable answer" in "".join(c["source"]) for c in saved["cells"])
    page.locator(".jp-NotebookPanel:visible .jp-Cell").first.wait_for()
    page.wait_for_function(
        "() => [...document.querySelectorAll('.jp-NotebookPanel .jp-Cell')].some(c => c.textContent.includes('Exportable answer'))"
    )
    shot(page, "export-notebook")
    assert failures == []  # no 404 probe, no JSON error in the console
