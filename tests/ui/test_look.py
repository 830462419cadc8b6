"""How the sidebar looks and reads, in both themes at 280 px and 480 px: an empty chat, a run
with tool calls, a permission prompt, a looping run that ends at the step limit, search
results. Screenshots of each go to test-artifacts/ui/look/; the DOM is checked as a user
would feel it: no horizontal overflow at 280 px, search highlights with contrast ≥ 4.5:1
(computed from the styles), no console errors, and axe-core (from npm) finds no serious or
critical accessibility violation in the panel."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.fakes.openai_server import ScriptedCall, Turn

from .conftest import ARTIFACTS, PANEL, REPO, expand_tool, new_session, open_sessions, send, settle, wait_done

AXE = REPO / "labextension" / "node_modules" / "axe-core" / "axe.min.js"
LOOK = ARTIFACTS / "look"
WIDTHS = (280, 480)

ANSWER = """**M31** lies at about 765 kpc; M87 is the giant elliptical at the heart of Virgo.

| target | RA (deg) | Dec (deg) |
|---|---|---|
| M31 | 10.685 | +41.269 |
| M87 | 187.706 | +12.391 |

The flux falls as $F \\propto d^{-2}$. To plot both:

```python
import matplotlib.pyplot as plt
plt.scatter([10.685, 187.706], [41.269, 12.391])
```
"""

OVERFLOW_JS = """() => {
    const panel = document.querySelector('#astro-jupyter-panel');
    const pr = panel.getBoundingClientRect();
    const bad = [];
    for (const el of panel.querySelectorAll('*')) {
        const rects = el.getClientRects();
        if (!rects.length) continue;
        const r = el.getBoundingClientRect();
        if (r.width === 0 && r.height === 0) continue;
        // inside a box that scrolls or clips sideways (a code block) it is that box's business;
        // the box itself is checked against the panel
        let inScroller = false;
        for (let a = el.parentElement; a && a !== panel; a = a.parentElement) {
            if (getComputedStyle(a).overflowX !== 'visible') { inScroller = true; break; }
        }
        const right = pr.right;
        if (!inScroller && r.right > right + 1) {
            bad.push(`${el.tagName.toLowerCase()}.${String(el.className).slice(0, 60)} right=${r.right.toFixed(0)} > ${right.toFixed(0)}`);
        }
    }
    const scrollers = [...panel.querySelectorAll('.jp-Astro-timeline, .jp-Astro-sessions, .jp-Astro-composer, .jp-Astro-header')]
        .filter(el => el.getClientRects().length && el.scrollWidth > el.clientWidth + 1)
        .map(el => `${el.className}: scrollWidth ${el.scrollWidth} > ${el.clientWidth}`);
    return { width: pr.width, bad: bad.slice(0, 20), scrollers };
}"""

CONTRAST_JS = """() => {
    const parse = c => { const m = c.match(/[\\d.]+/g).map(Number); return { r: m[0], g: m[1], b: m[2], a: m.length > 3 ? m[3] : 1 }; };
    const lin = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    const lum = c => 0.2126 * lin(c.r) + 0.7152 * lin(c.g) + 0.0722 * lin(c.b);
    // the background actually behind an element: its own, else its ancestors' (alpha-blended)
    const background = el => {
        const layers = [];
        for (let e = el; e; e = e.parentElement) {
            const c = parse(getComputedStyle(e).backgroundColor);
            if (c.a > 0) { layers.push(c); if (c.a >= 1) break; }
        }
        let out = { r: 255, g: 255, b: 255 };
        for (const c of layers.reverse()) {
            out = { r: c.r * c.a + out.r * (1 - c.a), g: c.g * c.a + out.g * (1 - c.a), b: c.b * c.a + out.b * (1 - c.a) };
        }
        return out;
    };
    return [...document.querySelectorAll('#astro-jupyter-panel .jp-Astro-search-snippet mark')].map(m => {
        const fg = parse(getComputedStyle(m).color), bg = background(m);
        const [l1, l2] = [lum(fg), lum(bg)].sort((a, b) => b - a);
        return { text: m.textContent, ratio: (l1 + 0.05) / (l2 + 0.05) };
    });
}"""


def _set_theme(page: Any, name: str) -> None:
    light = "true" if name == "JupyterLab Light" else "false"
    if page.evaluate("() => document.body.dataset.jpThemeLight") == light:
        return
    page.locator(".lm-MenuBar-item", has_text="Settings").click()
    page.locator(".lm-Menu-item", has_text="Theme").first.hover()
    page.get_by_role("menuitem", name=name, exact=True).click()
    page.wait_for_function(f"() => document.body.dataset.jpThemeLight === '{light}'")
    page.wait_for_timeout(400)


def _set_width(page: Any, width: int) -> None:
    """Drag the sidebar's split handle until the panel is `width` px wide."""
    panel = page.locator(PANEL)
    for _ in range(4):
        box = panel.bounding_box()
        if abs(box["width"] - width) <= 1:
            return
        handle = page.locator("#jp-main-split-panel > .lm-SplitPanel-handle").first
        hb = handle.bounding_box()
        x, y = hb["x"] + hb["width"] / 2, hb["y"] + hb["height"] / 2
        page.mouse.move(x, y)
        page.mouse.down()
        page.mouse.move(x + (width - box["width"]), y, steps=4)
        page.mouse.up()
        page.wait_for_timeout(200)
    assert abs(panel.bounding_box()["width"] - width) <= 1, panel.bounding_box()


def _shoot(page: Any, name: str) -> Path:
    LOOK.mkdir(parents=True, exist_ok=True)
    path = LOOK / f"{name}.png"
    page.locator(PANEL).screenshot(path=str(path))
    return path


def _axe(page: Any) -> list[str]:
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.add_script_tag(path=str(AXE))
    result = page.evaluate(
        """async () => {
            const r = await axe.run(document.querySelector('#astro-jupyter-panel'), { resultTypes: ['violations'] });
            return r.violations.filter(v => v.impact === 'serious' || v.impact === 'critical')
                .map(v => `${v.id} (${v.impact}): ${v.nodes.length} node(s), e.g. ${v.nodes[0].target.join(' ')} — ${v.nodes[0].failureSummary}`);
        }"""
    )
    return result


def _check(page: Any, width: int, scene: str, problems: list[str], *, axe: bool) -> None:
    overflow = page.evaluate(OVERFLOW_JS)
    if width == 280 and (overflow["bad"] or overflow["scrollers"]):
        problems.append(f"{scene} @280: horizontal overflow {overflow}")
    if axe:
        problems.extend(f"{scene} @{width}: axe {v}" for v in _axe(page))


@pytest.mark.parametrize("theme", ["JupyterLab Light", "JupyterLab Dark"])
def test_the_walk_in_both_themes_and_widths(page, script, lab, theme):
    if not AXE.exists():
        pytest.skip(f"axe-core is not installed at {AXE} (cd labextension && npm ci)")
    tag = "light" if theme.endswith("Light") else "dark"
    console_errors: list[str] = []
    page.on("console", lambda m: console_errors.append(m.text) if m.type == "error" else None)
    (lab.root / "notes.txt").write_text("M31 and M87: check the distances.\n")
    problems: list[str] = []
    _set_theme(page, theme)
    try:
        # 1. an empty chat
        new_session(page)
        assert page.locator(f"{PANEL} .jp-Astro-example").count() >= 3
        for w in WIDTHS:
            _set_width(page, w)
            _shoot(page, f"{w}-{tag}-empty")
            _check(page, w, "empty", problems, axe=w == 480)
        # an example prompt fills the composer
        page.locator(f"{PANEL} .jp-Astro-example").first.click()
        assert page.locator(f"{PANEL} .jp-Astro-prompt").input_value().startswith("Resolve M31")

        # 2. a run with tool calls, a plan, Markdown with a table, math and code
        todos = [
            {"id": "1", "content": "Resolve M31 and M87", "status": "completed"},
            {"id": "2", "content": "Read my notes", "status": "in_progress"},
            {"id": "3", "content": "Summarise with a plot", "status": "pending"},
        ]
        script.script(
            Turn.call("todo_write", {"todos": todos}, id="look_todo"),
            Turn(
                text="Resolving both targets.",
                calls=[
                    ScriptedCall("query_target", {"name": "M31"}, id="look_m31"),
                    ScriptedCall("query_target", {"name": "M87"}, id="look_m87"),
                ],
            ),
            Turn.call("read_file", {"path": "notes.txt"}, id="look_read"),
            Turn.say(ANSWER),
        )
        send(page, "Where are M31 and M87, and what do my notes say?")
        wait_done(page)
        settle(page)
        expand_tool(page, "look_read")
        page.locator(f"{PANEL} .jp-Astro-code-actions").first.wait_for()
        for w in WIDTHS:
            _set_width(page, w)
            page.locator(f"{PANEL} .jp-Astro-timeline").evaluate("el => el.scrollTop = 0")
            _shoot(page, f"{w}-{tag}-run")
            page.locator(f"{PANEL} .jp-Astro-timeline").evaluate("el => el.scrollTop = el.scrollHeight")
            _shoot(page, f"{w}-{tag}-run-end")
            _check(page, w, "run", problems, axe=w == 480)

        # 3. a permission prompt (the command carries an escape sequence)
        script.script(
            Turn.call("run_bash", {"command": "python reduce.py --field M31 \x1b[2J", "timeout": 60}, id="look_bash"),
            Turn.say("I did not run it."),
        )
        send(page, "Reduce the M31 field")
        question = page.locator(f"{PANEL} .jp-Astro-permission")
        question.wait_for()
        page.locator(f'{PANEL} .jp-Astro-tool[data-tool-call-id="look_bash"][data-status="waiting"]').wait_for()
        for w in WIDTHS:
            _set_width(page, w)
            question.scroll_into_view_if_needed()
            _shoot(page, f"{w}-{tag}-permission")
            _check(page, w, "permission", problems, axe=w == 480)
        question.get_by_role("button", name="Deny").click()
        wait_done(page)

        # 4. a looping run: the same failing call again and again until the step limit
        new_session(page)
        script.script(*[Turn.call("read_file", {"path": "missing.fits"}, id=f"look_loop_{i}") for i in range(30)])
        send(page, "Read missing.fits")
        wait_done(page, timeout=60_000)
        banner = page.locator(f'{PANEL} .jp-Astro-end[data-reason="max_steps"]')
        banner.wait_for()
        head = page.locator(f'{PANEL} .jp-Astro-tool[data-tool-call-id="look_loop_0"]')
        count = head.locator(".jp-Astro-tool-count").inner_text()
        assert count.startswith("\u00d7") and int(count[1:]) >= 10, count
        assert page.locator(f"{PANEL} .jp-Astro-tool:visible").count() == 1  # one line, not a wall
        assert head.get_attribute("data-status") == "error"
        for w in WIDTHS:
            _set_width(page, w)
            _shoot(page, f"{w}-{tag}-loop-max-steps")
            _check(page, w, "loop", problems, axe=w == 480)

        # 5. search results, grouped per session
        view = open_sessions(page)
        view.locator(".jp-Astro-search-input").fill("M31")
        view.locator(".jp-Astro-search-hit mark").first.wait_for()
        contrast = page.evaluate(CONTRAST_JS)
        assert contrast, "no highlighted match"
        low = [c for c in contrast if c["ratio"] < 4.5]
        assert not low, f"search highlight contrast under 4.5:1 in {tag}: {low[:3]}"
        for w in WIDTHS:
            _set_width(page, w)
            _shoot(page, f"{w}-{tag}-search")
            _check(page, w, "search", problems, axe=w == 480)
        view.locator(".jp-Astro-search-input").fill("")
        for w in WIDTHS:
            _set_width(page, w)
            _shoot(page, f"{w}-{tag}-sessions")
            _check(page, w, "sessions", problems, axe=w == 480)
        page.keyboard.press("Escape")

        assert problems == [], "\n".join(problems)
        assert console_errors == [], console_errors
        assert page.astro_errors == []
    finally:
        _set_theme(page, "JupyterLab Light")


def test_settings_are_in_the_settings_editor_and_apply(page, script):
    """The schema is registered: Settings → Settings Editor lists "Astro research agent", and
    "Expand tool lines" there opens the next tool lines."""
    page.locator(".lm-MenuBar-item", has_text="Settings").click()
    page.locator(".lm-Menu-item", has_text="Settings Editor").first.click()
    editor = page.locator(".jp-SettingsPanel, .jp-SettingsEditor").first
    editor.wait_for()
    entry = page.locator(".jp-PluginList-entry", has_text="Astro research agent")
    entry.first.click()
    form = page.locator(".jp-SettingsPanel")
    form.get_by_text("Expand tool lines").first.wait_for()
    form.get_by_text("Show thinking").first.wait_for()
    checkbox = form.locator("input[type=checkbox]").first
    checkbox.check()
    page.wait_for_timeout(1500)  # saved through the settings registry
    try:
        script.script(Turn.call("query_target", {"name": "M31"}, id="look_setting"), Turn.say("Done."))
        new_session(page)
        send(page, "Resolve M31")
        wait_done(page)
        line = page.locator(f'{PANEL} .jp-Astro-tool[data-tool-call-id="look_setting"] .jp-Astro-tool-line')
        assert line.get_attribute("aria-expanded") == "true"
        assert "10.68" in page.locator(f'{PANEL} .jp-Astro-tool[data-tool-call-id="look_setting"] .jp-Astro-tool-output').inner_text()
    finally:
        checkbox.uncheck()
        page.wait_for_timeout(1000)
