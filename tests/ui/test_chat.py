"""Chat: the panel opens from the palette, text streams in as Markdown, tool calls become
one-line entries that expand to their arguments and results, hostile text stays inert,
errors are shown."""

from __future__ import annotations

from tests.fakes.openai_server import ScriptedCall, Turn

from .conftest import PANEL, current_session, expand_tool, new_session, send, shot, wait_done

ANSWER = "**M31** is the Andromeda galaxy, at about 778 kpc. Its flux scales as $F \\propto d^{-2}$."


def test_palette_opens_panel_then_streamed_markdown_and_tool_card(page, script):
    # Close the sidebar, reopen it from the command palette.
    page.locator('.jp-SideBar.jp-mod-left li[data-id="astro-jupyter-panel"]').click()
    page.locator(f"{PANEL} .jp-Astro-prompt").wait_for(state="hidden")
    page.keyboard.press("Control+Shift+C")
    palette = page.locator(".lm-CommandPalette-input")
    palette.fill("Astro: Open research agent")
    page.locator(".lm-CommandPalette-item", has_text="Astro: Open research agent").first.click()
    page.locator(f"{PANEL} .jp-Astro-prompt").wait_for(state="visible")

    script.script(
        Turn.call("query_target", {"name": "M31"}, id="call_m31", text="Let me resolve it."),
        Turn.say(ANSWER, delay=0.04, chunk_size=3),
    )
    new_session(page)
    send(page, "Where is M31?")
    panel = page.locator(PANEL)
    # The user's prompt shows at once, labelled; the tool line carries name and key argument.
    assert panel.locator(".jp-Astro-user .jp-Astro-user-text").inner_text() == "Where is M31?"
    assert panel.locator(".jp-Astro-user .jp-Astro-msg-who").inner_text() == "You"
    card = panel.locator('.jp-Astro-tool[data-tool-call-id="call_m31"]')
    card.wait_for()
    assert card.locator(".jp-Astro-tool-name").inner_text() == "query_target"
    assert card.locator(".jp-Astro-tool-key").inner_text() == "M31"
    assert card.locator(".jp-Astro-tool-icon svg").count() == 1
    page.locator(f'{PANEL} .jp-Astro-tool[data-tool-call-id="call_m31"][data-status="done"]').wait_for()
    # Streaming: part of the answer is visible while the run is still going.
    page.wait_for_function(
        f"""() => {{
            const p = document.querySelector('{PANEL}');
            const t = p.querySelectorAll('.jp-Astro-assistant');
            const last = t[t.length - 1];
            return p.dataset.runStatus === 'running' && last && last.textContent.includes('Andromeda')
                && !last.textContent.includes('scales');
        }}"""
    )
    shot(page, "chat-streaming")
    wait_done(page)
    assert panel.locator(".jp-Astro-tool").count() == 1
    assert card.get_attribute("data-status") == "done"
    assert card.locator(".jp-Astro-tool-duration").inner_text().endswith(("ms", "s"))
    # One line until asked for: then arguments and result.
    assert card.locator(".jp-Astro-tool-body").count() == 0
    expand_tool(page, "call_m31")
    assert card.locator(".jp-Astro-tool-line").get_attribute("aria-expanded") == "true"
    assert "RA" in card.locator(".jp-Astro-tool-output").inner_text()
    assert "10.68" in card.locator(".jp-Astro-tool-output").inner_text()
    assert '"name": "M31"' in card.locator(".jp-Astro-tool-args pre").inner_text()
    # The assistant turn is labelled.
    assert "Astro" in panel.locator(".jp-Astro-timeline-list > .jp-Astro-msg-header .jp-Astro-msg-who").first.inner_text()
    # The answer is Markdown rendered by JupyterLab (bold) with the math typeset.
    answer = panel.locator(".jp-Astro-assistant").last
    assert answer.locator("strong").first.inner_text() == "M31"
    assert answer.locator(".jp-RenderedMarkdown").count() == 1
    # the last answer (a usage line may follow it, so not :last-of-type) has its math typeset
    page.wait_for_function(
        f"() => {{ const a = document.querySelectorAll('{PANEL} .jp-Astro-assistant'); const last = a[a.length - 1];"
        " return !!last && last.querySelector('mjx-container, .MathJax, .katex') !== null; }"
    )
    shot(page, "chat-done")
    # The LLM saw the tool's result, matched by id.
    tool_msgs = [m for m in script.chat_requests[-1]["messages"] if m.get("role") == "tool"]
    assert tool_msgs and tool_msgs[-1]["tool_call_id"] == "call_m31"
    assert page.astro_errors == []


def test_html_and_script_payloads_render_inert(page, script):
    hostile_name = '<img src=x onerror="window.__astroPwned=1">'
    script.script(
        Turn.call("query_target", {"name": hostile_name}, id="call_evil"),
        Turn.say(
            'Result: <img src=x onerror="window.__astroPwned=2"> <script>window.__astroPwned=3</script>'
            ' <a href="javascript:window.__astroPwned=4">click</a> done.'
        ),
    )
    new_session(page)
    send(page, "Resolve this <b>target</b>")
    wait_done(page)
    panel = page.locator(PANEL)
    # The prompt is shown as text.
    assert panel.locator(".jp-Astro-user-text").inner_text() == "Resolve this <b>target</b>"
    assert panel.locator(".jp-Astro-user b").count() == 0
    # The tool output (Sesame's "not found" echoes the name) is text, not markup.
    card = expand_tool(page, "call_evil")
    card.locator(".jp-Astro-tool-result").wait_for()
    assert "<img" in card.locator(".jp-Astro-tool-output").inner_text()
    assert "<img" in card.locator(".jp-Astro-tool-key").inner_text()
    assert card.locator("img").count() == 0
    assert "onerror" in card.locator(".jp-Astro-tool-args pre").inner_text()
    # The Markdown went through the sanitizer: no script, no event handler, no javascript: link.
    answer = panel.locator(".jp-Astro-assistant").last
    assert answer.locator("script").count() == 0
    assert answer.locator("img[onerror]").count() == 0
    for href in answer.locator("a").evaluate_all("els => els.map(a => a.getAttribute('href') || '')"):
        assert not href.lower().startswith("javascript")
    answer.locator("a", has_text="click").click() if answer.locator("a", has_text="click").count() else None
    page.wait_for_timeout(300)
    assert page.evaluate("() => window.__astroPwned") is None
    shot(page, "inert-payloads")


def test_error_event_is_shown(page, script):
    script.script(Turn.fail(400, "the fake model refuses this request"))
    new_session(page)
    send(page, "Trigger an error")
    wait_done(page)
    panel = page.locator(PANEL)
    error = panel.locator('.jp-Astro-notice[data-variant="error"]')
    error.first.wait_for()
    assert "refuses" in error.first.inner_text() or "400" in error.first.inner_text()
    # The run ends with a banner that offers to try again.
    banner = panel.locator('.jp-Astro-end[data-reason="error"]')
    assert "error" in banner.inner_text()
    assert banner.get_by_role("button", name="Try again").is_visible()
    # The composer is usable again: its one button sends.
    assert panel.locator(".jp-Astro-send").get_attribute("data-action") == "send"
    shot(page, "error-event")


def test_subagent_nested_and_todos(page, script):
    todos = [
        {"id": "1", "content": "Resolve M87", "status": "in_progress"},
        {"id": "2", "content": "Summarise", "status": "pending"},
    ]
    script.script(
        Turn.call("todo_write", {"todos": todos}, id="call_todo"),
        Turn.call("subagent", {"task": "Resolve M87 and report its type"}, id="call_sub"),
        # The subagent's own turns (same fake LLM):
        Turn.call("query_target", {"name": "M87"}, id="call_inner"),
        Turn.say("M87 is a giant elliptical galaxy."),
        # Back in the parent:
        Turn.say("The subagent says M87 is a giant elliptical."),
    )
    new_session(page)
    send(page, "Use a subagent to resolve M87")
    wait_done(page)
    panel = page.locator(PANEL)
    todo = panel.locator(".jp-Astro-todo").first
    assert "Resolve M87" in todo.inner_text()
    assert todo.locator('li[data-status="in_progress"]').count() == 1
    assert todo.locator(".jp-Astro-todo-mark svg").count() == 2  # SVG marks, no emoji glyphs
    sub = panel.locator(".jp-Astro-subagent").first
    sub.wait_for()
    # the task is said once: on the line of the call that started the subagent, not again in its group
    call_line = panel.locator('.jp-Astro-tool[data-tool-call-id="call_sub"] > .jp-Astro-tool-line')
    assert "Resolve M87 and report its type" in call_line.inner_text()
    assert "Resolve M87 and report its type" not in sub.locator(":scope > summary").inner_text()
    assert panel.inner_text().count("M87 is a giant elliptical galaxy.") == 1  # the final text, once
    inner = sub.locator('.jp-Astro-tool[data-tool-call-id="call_inner"]')
    assert inner.count() == 1
    assert "M87" in inner.locator(".jp-Astro-tool-key").inner_text()
    # Collapsible: closing the subagent hides its children.
    sub.locator(":scope > summary").click()
    assert not inner.is_visible()
    sub.locator(":scope > summary").click()
    assert inner.is_visible()
    shot(page, "subagent-nested")


def test_first_prompt_without_a_session_creates_one(page, script, lab):
    script.script(Turn.say("A session was made for this."))
    assert current_session(page) == ""
    send(page, "Unsolicited first question")
    wait_done(page)
    sid = current_session(page)
    assert sid.startswith("ses")
    # The toolbar shows the session's title (the server names it after the first prompt).
    page.wait_for_function(
        f"() => document.querySelector('{PANEL} .jp-Astro-title').textContent.startsWith('Unsolicited first question')"
    )
    messages = lab.api("GET", f"astro/api/sessions/{sid}/messages")["messages"]
    assert [m["role"] for m in messages][:1] == ["user"]
    assert messages[0]["content"] == "Unsolicited first question"
