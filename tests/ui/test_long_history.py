"""A long stored session reopened in the sidebar (one ``GET sessions/{id}/history`` read a line at a
time; the view mounts the newest items first and earlier ones as the reader scrolls up): the newest
answer is shown at the bottom at once, a history-search hit on an early answer is scrolled to, and
scrolling up reaches the very first prompt with every prompt, tool line and answer on the way."""

from __future__ import annotations

import asyncio
import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from astro_jupyter.config import AstroConfig
from astro_jupyter.services.container import ServiceContainer

from .conftest import PANEL, current_session, expand_tool, open_sessions, select_session

RUNS = 250  # 1,500 stored messages, 750 tool calls: many times what the view mounts at once
CALLS = 3
EARLY = 7  # the run whose answer the search finds
MARK = "lynxcluster"  # in that answer only


def _answer(i: int) -> str:
    extra = f" The {MARK} field is the one to revisit." if i == EARLY else ""
    return f"Run {i}: **M{i % 110}** resolved; the distance is about {700 + i} kpc.{extra}\n\n- RA and Dec from Sesame\n"


def _seed(home: Path) -> str:
    """One session of RUNS runs stored as a sidebar run stores them (messages, then the run's
    events: 5-character text deltas, tool calls and results, done); returns its id. Written by
    this process into the lab's database, as the CLI or a kernel would (WAL: the lab reads it)."""

    async def fill() -> str:
        services = await ServiceContainer(AstroConfig(home=str(home))).start()
        try:
            session = await services.sessions.create(title="A long reopened survey", source="sidebar")
            for i in range(RUNS):
                run_id = f"run_long_{i:04d}"
                await services.runs.create(run_id, session.id, prompt=f"Resolve M{i % 110}", model="gpt-4o-mini")
                ids = [f"call_{i}_{k}" for k in range(CALLS)]
                answer = _answer(i)
                calls = [{"id": c, "type": "function",
                          "function": {"name": "query_target", "arguments": json.dumps({"name": f"M {i % 110 + k}"})}}
                         for k, c in enumerate(ids)]
                results = [f"M {i % 110 + k}: RA = {10 + k:.4f} deg (run {i})" for k in range(CALLS)]
                await services.messages.append_many(session.id, [
                    {"role": "user", "content": f"Resolve M{i % 110} and give its distance ({i})"},
                    {"role": "assistant", "content": "", "tool_calls": calls},
                    *[{"role": "tool", "tool_call_id": c, "name": "query_target", "content": r} for c, r in zip(ids, results)],
                    {"role": "assistant", "content": answer},
                ], run_id=run_id)
                events: list[dict[str, Any]] = [{"type": "session", "session_id": session.id, "run_id": run_id}]
                events += [{"type": "tool_call", "id": c, "name": "query_target", "arguments": {"name": f"M {i % 110 + k}"}, "step": 1}
                           for k, c in enumerate(ids)]
                events += [{"type": "tool_result", "tool_call_id": c, "name": "query_target", "output": r, "is_error": False,
                            "metadata": {}, "step": 1, "duration_ms": 80} for c, r in zip(ids, results)]
                events += [{"type": "text_delta", "delta": answer[k:k + 5], "step": 2} for k in range(0, len(answer), 5)]
                events.append({"type": "done", "session_id": session.id, "run_id": run_id, "reason": "finished"})
                await services.runs.append_events(run_id, list(enumerate(events, 1)))
                await services.runs.finish(run_id, "finished")
            return session.id
        finally:
            await services.close()

    with ThreadPoolExecutor(1) as pool:  # its own event loop, apart from Playwright's
        return pool.submit(asyncio.run, fill()).result()


SCROLL_TO_TOP_JS = """async () => {
    // up to the very first message, a wheel-sized step per frame, as a reader would
    const timeline = document.querySelector('#astro-jupyter-panel .jp-Astro-timeline');
    const older = document.querySelector('#astro-jupyter-panel .jp-Astro-older');
    const frame = () => new Promise(r => requestAnimationFrame(() => r()));
    const t0 = performance.now();
    while ((!older.hidden || timeline.scrollTop > 0) && performance.now() - t0 < 90000) {
        timeline.dispatchEvent(new WheelEvent('wheel', { deltaY: -1500 }));
        timeline.scrollTop = Math.max(0, timeline.scrollTop - 1500);
        await frame();
    }
    return { left: older.hidden ? 0 : older.textContent, top: timeline.scrollTop };
}"""


def test_a_long_session_reopens_with_every_message_reachable(page: Any, lab: Any) -> None:
    sid = _seed(lab.home)
    panel = page.locator(PANEL)
    timeline = panel.locator(".jp-Astro-timeline")

    # Reopened: the newest answer at the bottom, and only part of the history mounted yet.
    select_session(page, sid)
    last = panel.locator(".jp-Astro-assistant").last
    last.wait_for()
    page.wait_for_function(
        f"""() => {{
            const t = document.querySelector('{PANEL} .jp-Astro-timeline');
            const a = t.querySelectorAll('.jp-Astro-assistant');
            return !t.hasAttribute('data-mounting') && a.length && a[a.length - 1].textContent.includes('Run {RUNS - 1}:')
                && t.scrollHeight - t.scrollTop - t.clientHeight < 60;
        }}"""
    )
    mounted = panel.locator(".jp-Astro-tool").count()
    assert 0 < mounted < RUNS * CALLS
    assert panel.locator(".jp-Astro-older").is_visible()

    # A search hit on an early answer: scrolled to and highlighted, with the mounted part extended.
    view = open_sessions(page)
    view.locator(".jp-Astro-search-input").fill(MARK)
    hit = view.locator(f'.jp-Astro-search-group[data-session-id="{sid}"] .jp-Astro-search-hit').first
    hit.wait_for()
    message_id = hit.get_attribute("data-message-id")
    assert message_id
    hit.click()
    target = timeline.locator(f'[data-message-id="{message_id}"]')
    target.wait_for()
    assert MARK in target.inner_text() and f"Run {EARLY}:" in target.inner_text()
    box, shown = target.bounding_box(), timeline.bounding_box()
    assert box and shown and shown["y"] <= box["y"] + box["height"] and box["y"] <= shown["y"] + shown["height"]

    # Reopened again: scrolling up reaches the first prompt, every item mounted on the way, in order.
    view = open_sessions(page)
    view.locator(".jp-Astro-search-input").fill("")
    select_session(page, sid)
    page.wait_for_function(f"() => !document.querySelector('{PANEL} .jp-Astro-timeline').hasAttribute('data-mounting')")
    result = page.evaluate(SCROLL_TO_TOP_JS)
    assert result == {"left": 0, "top": 0}, result
    users = panel.locator(".jp-Astro-user")
    assert users.count() == RUNS
    assert "Resolve M0 and give its distance (0)" in users.first.inner_text()
    assert panel.locator(".jp-Astro-tool").count() == RUNS * CALLS
    ids = panel.locator(".jp-Astro-tool").evaluate_all("els => els.map(e => e.dataset.toolCallId)")
    assert ids == [f"call_{i}_{k}" for i in range(RUNS) for k in range(CALLS)]
    # textContent: items off screen skip rendering (content-visibility: auto), so innerText is empty
    answers = [a.strip() for a in panel.locator(".jp-Astro-assistant").evaluate_all("els => els.map(e => e.textContent)")]
    assert len(answers) == RUNS
    assert [i for i, a in enumerate(answers) if not a.startswith(f"Run {i}:")] == []
    # the first tool line still opens on its stored result
    first = expand_tool(page, "call_0_0")
    first.locator(".jp-Astro-tool-output").wait_for()
    assert "M 0: RA = 10.0000 deg (run 0)" in first.locator(".jp-Astro-tool-output").inner_text()
    assert page.astro_errors == []  # type: ignore[attr-defined]


def test_a_session_opened_while_a_new_chat_is_created_stays_open(page: Any, lab: Any) -> None:
    """New chat, then (before the server has made it) a session from the history: the session the
    user picked last stays open; the new chat's late arrival does not replace it."""
    keep = lab.api("POST", "astro/api/sessions", {"title": "Keep me open"})["id"]
    open_sessions(page).locator(f'.jp-Astro-session-open[data-session-id="{keep}"]').wait_for()
    created: list[str] = []

    def slow_create(route: Any) -> None:
        if route.request.method == "POST":
            time.sleep(1.5)  # the browser goes on meanwhile: the history click below happens now
            created.append(route.request.url)
        route.continue_()

    def sessions_route(url: str) -> bool:
        return url.split("?")[0].endswith("/astro/api/sessions")

    page.route(sessions_route, slow_create)
    page.evaluate(
        """sid => {
            const panel = document.querySelector('#astro-jupyter-panel');
            panel.querySelector('.jp-Astro-new').click();
            setTimeout(() => panel.querySelector(`.jp-Astro-session-open[data-session-id="${sid}"]`).click(), 300);
        }""",
        keep,
    )
    page.wait_for_function(
        """sid => { const p = document.querySelector('#astro-jupyter-panel'); return p.dataset.sessionId === sid && !p.dataset.loading; }""",
        arg=keep,
    )
    page.wait_for_timeout(2500)  # the delayed create has answered by now
    page.unroute(sessions_route)
    assert created, "the new chat's POST was not seen"
    assert current_session(page) == keep
