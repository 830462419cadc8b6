"""Sessions (new, switch, rename, delete), history search with highlighted snippets opening
the hit, the coordinator toggle per session, the model switcher, export, bookmarklet link."""

from __future__ import annotations

import json

import pytest

from tests.fakes.openai_server import Turn

from .conftest import PANEL, new_session, open_panel, send, shot, wait_done


def _current(page) -> str:
    return page.locator(f"{PANEL} .jp-Astro-session-select").input_value()


def _option_texts(page) -> list[str]:
    return page.locator(f"{PANEL} .jp-Astro-session-select option").all_inner_texts()


def _rename(page, title: str) -> None:
    page.locator(f"{PANEL} .jp-Astro-button", has_text="Rename").click()
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
    page.wait_for_function(
        f"() => [...document.querySelectorAll('{PANEL} .jp-Astro-session-select option')].some(o => o.textContent.startsWith('Quokka study'))"
    )
    new_session(page)
    b = _current(page)
    assert b != a
    send(page, "Something else entirely")
    wait_done(page)
    assert "quokkanebula" not in panel.locator(".jp-Astro-timeline").inner_text()

    # Switch back with the session picker: A's history is shown, B's is not.
    panel.locator(".jp-Astro-session-select").select_option(a)
    page.wait_for_function(f"() => document.querySelector('{PANEL} .jp-Astro-timeline').textContent.includes('quokkanebula')")
    assert "Something else entirely" not in panel.locator(".jp-Astro-timeline").inner_text()
    panel.locator(".jp-Astro-session-select").select_option(b)
    page.wait_for_function(f"() => document.querySelector('{PANEL} .jp-Astro-timeline').textContent.includes('Something else')")

    # Search everywhere: the hit from session A, its match in <mark>, markup inert.
    search = panel.locator(".jp-Astro-search-input")
    search.fill("quokkanebula")
    hit = panel.locator(f'.jp-Astro-search-hit[data-session-id="{a}"]').first
    hit.wait_for()
    assert hit.locator("mark").first.inner_text().lower() == "quokkanebula"
    assert hit.locator("img").count() == 0
    assert "Quokka study <b>bold</b>" in hit.locator(".jp-Astro-search-title").inner_text()
    shot(page, "search-results")
    # "This session only" (B is open): no match there.
    panel.locator(".jp-Astro-search-only").check()
    page.wait_for_function(f"() => document.querySelector('{PANEL} .jp-Astro-search-status').textContent === 'No matches.'")
    panel.locator(".jp-Astro-search-only").uncheck()
    hit.wait_for()
    message_id = hit.get_attribute("data-message-id")
    assert message_id
    hit.click()
    page.wait_for_function(f"() => document.querySelector('{PANEL} .jp-Astro-session-select').value === '{a}'")
    target = panel.locator(f'.jp-Astro-timeline [data-message-id="{message_id}"]')
    target.wait_for()
    assert "quokkanebula" in target.inner_text()
    assert "jp-Astro-highlight" in (target.get_attribute("class") or "")
    box, view = target.bounding_box(), panel.locator(".jp-Astro-timeline").bounding_box()
    assert box and view and view["y"] <= box["y"] + box["height"] and box["y"] <= view["y"] + view["height"]
    assert page.evaluate("() => window.__astroPwned") is None
    shot(page, "search-opened-hit")

    # Delete B: it disappears from the picker and from the server.
    panel.locator(".jp-Astro-session-select").select_option(b)
    page.wait_for_function(f"() => document.querySelector('{PANEL} .jp-Astro-session-select').value === '{b}'")
    panel.locator(".jp-Astro-button", has_text="Delete").click()
    page.locator(".jp-Dialog .jp-mod-warn").click()
    page.wait_for_function(
        f"() => ![...document.querySelectorAll('{PANEL} .jp-Astro-session-select option')].some(o => o.value === '{b}')"
    )
    assert _current(page) == ""
    assert page.astro_errors == []


def _toggle_coordinator(page, on: bool) -> None:
    """Click the toggle and wait for the server's answer to the PATCH it sends."""
    box = page.locator(f"{PANEL} .jp-Astro-coordinator")
    with page.expect_response(
        lambda r: r.request.method == "PATCH" and "/astro/api/sessions/" in r.url
    ) as reply:
        box.check() if on else box.uncheck()
    assert reply.value.status == 200 and reply.value.json()["coordinator"] is on


def _coordinator_shown(page, on: bool) -> None:
    page.wait_for_function(
        f"() => !document.querySelector('{PANEL}').dataset.loading"
        f" && document.querySelector('{PANEL} .jp-Astro-coordinator').checked === {'true' if on else 'false'}"
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
    assert not panel.locator(".jp-Astro-coordinator").is_checked()
    send(page, "No workers")
    wait_done(page)
    assert [body.get("coordinator") for body in bodies] == [True, False]
    tools = [{t["function"]["name"] for t in r.get("tools") or []} for r in script.chat_requests]
    assert len(tools) == 2 and "delegate_task" in tools[0] and "delegate_task" not in tools[1]
    assert not page.evaluate("() => Object.keys(window.localStorage).filter(k => k.includes('coordinator'))")

    # the flag survives a reload with nothing in the browser's storage: it comes from the server
    _reload_without_local_storage(page)
    panel.locator(".jp-Astro-session-select").select_option(a)
    _coordinator_shown(page, True)
    panel.locator(".jp-Astro-session-select").select_option(b)
    _coordinator_shown(page, False)
    panel.locator(".jp-Astro-session-select").select_option(a)
    _coordinator_shown(page, True)
    _toggle_coordinator(page, False)
    assert lab.api("GET", f"astro/api/sessions/{a}")["coordinator"] is False

    _reload_without_local_storage(page)
    panel.locator(".jp-Astro-session-select").select_option(a)
    _coordinator_shown(page, False)
    assert page.astro_errors == []


def test_model_switcher(page, script, lab):
    panel = page.locator(PANEL)
    select = panel.locator(".jp-Astro-model-select")
    page.wait_for_function(f"() => document.querySelector('{PANEL} .jp-Astro-model-select').options.length > 1")
    assert select.input_value() == "gpt-4o-mini"
    assert "chain-a" in select.locator("option").all_inner_texts()
    try:
        select.select_option("chain-a")
        page.wait_for_function(f"() => (document.querySelector('{PANEL} .jp-Astro-message').textContent || '').includes('chain-a')")
        assert lab.api("GET", "astro/api/models")["current"] == "chain-a"
        script.script(Turn.say("Answered by chain-a."))
        new_session(page)
        send(page, "Which model?")
        wait_done(page)
        assert script.chat_requests[-1]["model"] == "chain-a"
    finally:
        lab.api("PUT", "astro/api/models/current", {"model": "gpt-4o-mini"})


def test_bookmarklet_link(page, lab):
    link = page.locator(f"{PANEL} .jp-Astro-bookmarklet")
    href = link.get_attribute("href")
    assert href and href.endswith("/astro/bookmarklet")
    assert link.get_attribute("target") == "_blank"
    response = page.request.get(f"{lab.url}{href}" if href.startswith("/") else href)
    assert response.status == 200


def test_export_opens_the_notebook(page, script, lab):
    export = pytest.importorskip("astro_jupyter.export")
    if not hasattr(export, "export_session"):
        pytest.skip("astro_jupyter.export.export_session has not landed")
    script.script(Turn.say("Exportable answer about M31."))
    new_session(page)
    send(page, "Something to export")
    wait_done(page)
    _rename(page, "Export me")
    page.locator(f"{PANEL} .jp-Astro-button", has_text="Export").click()
    tab = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="Export-me")
    tab.wait_for()
    saved = json.loads((lab.root / "Export-me.ipynb").read_text())
    assert saved["nbformat"] == 4
    assert any("Exportable answer" in "".join(c["source"]) for c in saved["cells"])
    page.locator(".jp-NotebookPanel:visible .jp-Cell").first.wait_for()
    page.wait_for_function(
        "() => [...document.querySelectorAll('.jp-NotebookPanel .jp-Cell')].some(c => c.textContent.includes('Exportable answer'))"
    )
    shot(page, "export-notebook")
