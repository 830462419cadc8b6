"""Keyboard only: Shift+Enter adds a line, Enter sends, a permission is answered with the
keyboard, search hits are reached with the arrow keys; thinking, model-switch notices, and a
streamed block that never shrinks (no layout jumps)."""

from __future__ import annotations

from tests.fakes.openai_server import Turn

from .conftest import PANEL, expand_tool, new_session, open_sessions, shot, wait_done

GROWS_JS = """() => {
    window.__astroHeights = [];
    const timeline = document.querySelector('#astro-jupyter-panel .jp-Astro-timeline-list');
    const seen = new WeakSet();
    const watch = el => {
        if (seen.has(el)) return;
        seen.add(el);
        new ResizeObserver(entries => {
            for (const e of entries) window.__astroHeights.push(e.contentRect.height);
        }).observe(el);
    };
    new MutationObserver(() => {
        timeline.querySelectorAll('.jp-Astro-assistant').forEach(watch);
    }).observe(timeline, { childList: true, subtree: true });
}"""


def test_keyboard_send_answer_and_search(page, script):
    script.script(
        Turn.call("run_bash", {"command": "echo keyboard-ok"}, id="call_kb"),
        Turn.say("Keyboard run finished: zebrafinch."),
    )
    new_session(page)
    prompt = page.locator(f"{PANEL} .jp-Astro-prompt")
    prompt.focus()
    page.keyboard.type("first line")
    page.keyboard.press("Shift+Enter")
    page.keyboard.type("second line")
    assert prompt.input_value() == "first line\nsecond line"
    page.keyboard.press("Enter")
    panel = page.locator(PANEL)
    assert panel.locator(".jp-Astro-user-text").first.inner_text() == "first line\nsecond line"
    allow = panel.locator(".jp-Astro-permission").get_by_role("button", name="Allow", exact=True)
    allow.wait_for()
    allow.focus()
    page.keyboard.press("Enter")
    wait_done(page)
    # The tool line opens with the keyboard.
    line = panel.locator('.jp-Astro-tool[data-tool-call-id="call_kb"] .jp-Astro-tool-line')
    line.focus()
    page.keyboard.press("Enter")
    assert line.get_attribute("aria-expanded") == "true"
    assert "keyboard-ok" in panel.locator('.jp-Astro-tool[data-tool-call-id="call_kb"] .jp-Astro-tool-output').inner_text()

    open_sessions(page)  # focuses its search box
    assert page.evaluate("() => document.activeElement.classList.contains('jp-Astro-search-input')")
    page.keyboard.type("zebrafinch")
    panel.locator(".jp-Astro-search-hit").first.wait_for()
    page.keyboard.press("ArrowDown")
    assert page.evaluate("() => document.activeElement.classList.contains('jp-Astro-search-hit')")
    page.keyboard.press("Enter")
    page.wait_for_function(f"() => document.querySelector('{PANEL} .jp-Astro-highlight') !== null")
    assert "zebrafinch" in panel.locator(".jp-Astro-highlight").inner_text()
    page.keyboard.press("Escape")


def test_thinking_model_switch_and_no_layout_jumps(page, script, lab):
    text = " ".join(f"**b{i}** and *i{i}*, " for i in range(80))
    script.script(
        Turn.fail(529),
        Turn.fail(529),
        Turn.fail(529),
        Turn.say(text, reasoning="Weighing which catalogue to trust.", delay=0.01, chunk_size=5),
    )
    new_session(page)
    page.evaluate(GROWS_JS)
    try:
        prompt = page.locator(f"{PANEL} .jp-Astro-prompt")
        prompt.fill("Think, then answer")
        prompt.press("Enter")
        wait_done(page, timeout=60_000)
        panel = page.locator(PANEL)
        notice = panel.locator('.jp-Astro-notice[data-variant="model_switch"]')
        assert "gpt-4o-mini → fallback-model" in notice.inner_text()
        thinking = panel.locator(".jp-Astro-thinking")
        assert thinking.count() == 1
        thinking.locator("summary").click()
        assert "Weighing which catalogue" in thinking.inner_text()
        heights = page.evaluate("() => window.__astroHeights")
        assert len(heights) > 3
        drops = [(a, b) for a, b in zip(heights, heights[1:]) if b < a - 0.5]
        assert drops == [], f"the streamed block shrank while streaming: {drops[:5]}"
        # The indicator follows the switch.
        page.wait_for_function(f"() => document.querySelector('{PANEL} .jp-Astro-model-chip').textContent === 'fallback-model'")
        shot(page, "model-switch-thinking")
    finally:
        lab.api("PUT", "astro/api/models/current", {"model": "gpt-4o-mini"})
