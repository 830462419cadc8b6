"""Reloading the page rebuilds a finished session from its stored events (issue 14, item 7):
the subagent group with its own tool line, the plan with each task's status, tool details and
the answer are there again, the same timeline the user watched live (before, a reload rebuilt
it from chat messages and lost the subagents and the plan)."""

from __future__ import annotations

from tests.fakes.openai_server import Turn

from .conftest import PANEL, current_session, new_session, open_panel, send, shot, wait_done

# Every item of the timeline as the user sees it: its kind (CSS classes), status, tool call id,
# how deep it sits in subagent groups and its visible text (a plan: each task with its status).
SNAPSHOT_JS = """() => {
    const timeline = document.querySelector('#astro-jupyter-panel .jp-Astro-timeline');
    return Array.from(timeline.querySelectorAll('.jp-Astro-item')).map(el => {
        let depth = 0;
        for (let p = el.parentElement; p && p !== timeline; p = p.parentElement) {
            if (p.classList.contains('jp-Astro-subagent')) depth++;
        }
        const kind = Array.from(el.classList).filter(c => /^jp-Astro-(user|assistant|thinking|tool|subagent|todo|notice|question|end)$/.test(c)).join(' ');
        let text = '';
        if (el.classList.contains('jp-Astro-todo')) {
            text = Array.from(el.querySelectorAll('li')).map(li => li.dataset.status + ':' + li.textContent.trim()).join('|');
        } else if (el.classList.contains('jp-Astro-subagent')) {
            text = el.querySelector(':scope > summary').textContent.trim();
        } else if (el.classList.contains('jp-Astro-tool')) {
            text = (el.querySelector('.jp-Astro-tool-line') || el).textContent.trim();
        } else {
            text = el.textContent.trim();
        }
        return { kind, depth, status: el.dataset.status || '', call: el.dataset.toolCallId || '', text };
    });
}"""


def test_reload_rebuilds_subagents_and_todos_from_stored_events(page, script):
    todos = [
        {"id": "1", "content": "Resolve M87", "status": "in_progress"},
        {"id": "2", "content": "Summarise", "status": "pending", "blocked_by": ["1"]},
    ]
    done = [{**todos[0], "status": "completed"}, {**todos[1], "status": "in_progress"}]
    script.script(
        Turn.call("todo_write", {"todos": todos}, id="call_todo", text="Planning first. "),
        Turn.call("subagent", {"task": "Resolve M87 and report its type"}, id="call_sub"),
        # the subagent's own turns (same fake LLM)
        Turn.call("query_target", {"name": "M87"}, id="call_inner"),
        Turn.say("M87 is a giant elliptical galaxy."),
        # back in the parent
        Turn.call("todo_write", {"todos": done}, id="call_todo2"),
        Turn.say("The subagent says **M87** is a giant elliptical.", chunk_size=3),
    )
    new_session(page)
    session_id = current_session(page)
    send(page, "Use a subagent to resolve M87")
    wait_done(page)
    panel = page.locator(PANEL)
    panel.locator('.jp-Astro-subagent .jp-Astro-tool[data-tool-call-id="call_inner"]').wait_for()
    page.wait_for_timeout(300)  # Markdown of the last answer settles
    live = page.evaluate(SNAPSHOT_JS)
    kinds = [row["kind"] for row in live]
    assert "jp-Astro-subagent" in kinds and "jp-Astro-todo" in kinds, live

    page.reload()
    open_panel(page)
    page.wait_for_function(f"() => document.querySelector('{PANEL}').dataset.sessionId === '{session_id}'")
    page.wait_for_function(f"() => !document.querySelector('{PANEL}').dataset.loading")
    sub = panel.locator(".jp-Astro-subagent").first
    sub.wait_for()
    page.wait_for_timeout(300)
    shot(page, "reload-replayed")

    # the subagent group, with its own tool line nested inside, in the card of the call naming its task
    call = panel.locator('.jp-Astro-tool[data-tool-call-id="call_sub"]')
    assert "Resolve M87 and report its type" in call.locator(":scope > .jp-Astro-tool-line").inner_text()
    assert call.locator(".jp-Astro-subagent").count() == 1
    inner = sub.locator('.jp-Astro-tool[data-tool-call-id="call_inner"]')
    assert inner.count() == 1 and inner.get_attribute("data-status") == "done"
    # the plan, as it was last updated, in one place
    todo = panel.locator(".jp-Astro-todo")
    assert todo.count() == 1
    assert todo.locator('li[data-status="completed"]').inner_text().strip() == "Resolve M87"
    assert todo.locator('li[data-status="in_progress"]').inner_text().strip() == "Summarise"
    # the same timeline as live, item for item
    assert page.evaluate(SNAPSHOT_JS) == live
    assert page.astro_errors == []  # type: ignore[attr-defined]


def test_reload_shows_how_a_permission_question_was_answered(page, script):
    """The answer is stored with the run (question_answered): after a reload the question reads
    "Allowed: run_bash …", not "No longer waiting for an answer"."""
    script.script(
        Turn.call("run_bash", {"command": "echo replayed"}, id="call_bash"),
        Turn.say("Done."),
    )
    new_session(page)
    session_id = current_session(page)
    send(page, "Run echo")
    panel = page.locator(PANEL)
    question = panel.locator(".jp-Astro-permission")
    question.wait_for()
    question.get_by_role("button", name="Allow", exact=True).click()
    wait_done(page)
    assert question.inner_text().strip() == "Allowed: run_bash `echo replayed`"

    page.reload()
    open_panel(page)
    page.wait_for_function(f"() => document.querySelector('{PANEL}').dataset.sessionId === '{session_id}'")
    page.wait_for_function(f"() => !document.querySelector('{PANEL}').dataset.loading")
    replayed = panel.locator(".jp-Astro-permission")
    replayed.wait_for()
    assert replayed.inner_text().strip() == "Allowed: run_bash `echo replayed`"
    assert "No longer waiting" not in replayed.inner_text()
    assert replayed.locator("button.jp-mod-accept").is_disabled()
