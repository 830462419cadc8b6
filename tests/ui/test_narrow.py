"""At 280 px, an answer's tables and code keep numbers and tokens whole and scroll sideways,
with a visible cue on the edge that hides more (issue: "187.705" over "9", "Galax" over "y")."""

from __future__ import annotations

from tests.fakes.openai_server import Turn

from .conftest import PANEL, new_session, send, shot, wait_done
from .test_look import _set_width

ANSWER = """Positions and redshifts:

| target | host galaxy | RA (deg) | Dec (deg) | z |
|---|---|---|---|---|
| FRB 20121102A | SDSS J053158.70+330852.5 dwarf galaxy | 82.99458333 | +33.14791667 | 0.19273 |
| FRB 20180916B | SDSS J015800.28+654253.0 spiral galaxy | 29.50312500 | +65.71675000 | 0.0337 |

```python
hosts = {"FRB 20121102A": "SDSS J053158.70+330852.5 dwarf galaxy", "FRB 20180916B": "SDSS J015800.28+654253.0 spiral"}
```
"""

LINES_JS = """(el) => {
    // how many lines each cell's text takes (1 = nothing wrapped inside it)
    return [...el.querySelectorAll('td')].map(td => {
        const range = document.createRange();
        range.selectNodeContents(td);
        const tops = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
        return [td.textContent, tops.size];
    });
}"""


def test_tables_and_code_scroll_sideways_at_280px(page, script):
    script.script(Turn.say(ANSWER))
    new_session(page)
    _set_width(page, 280)
    send(page, "Where are the repeating FRBs?")
    wait_done(page)
    answer = page.locator(f"{PANEL} .jp-Astro-assistant").last
    table = answer.locator(".jp-Astro-scroll").filter(has=page.locator("table"))
    table.wait_for()
    cells = table.evaluate(LINES_JS)
    numbers = [(text, n) for text, n in cells if text[:1].isdigit() or text[:1] == "+"]
    assert numbers and all(n == 1 for _, n in numbers), numbers  # no number broken over lines
    assert all(n == 1 for text, n in cells if " " not in text), cells
    body = table.locator(".jp-Astro-scroll-body")
    assert body.evaluate("el => el.scrollWidth > el.clientWidth")  # it scrolls instead
    assert table.get_attribute("data-overflow") == "right"  # the cue: more to the right
    assert body.get_attribute("tabindex") == "0" and body.get_attribute("aria-label") == "Table, scrolls sideways"
    shot(page, "narrow-table-cue")
    body.evaluate("el => { el.scrollLeft = el.scrollWidth; }")
    page.wait_for_function("el => el.dataset.overflow === 'left'", arg=table.element_handle())
    code = answer.locator(".jp-Astro-code .jp-Astro-scroll")
    pre = code.locator("pre")
    assert pre.evaluate("el => getComputedStyle(el).whiteSpace") == "pre"
    lines = pre.evaluate("""el => { const r = document.createRange(); r.selectNodeContents(el);
        return new Set([...r.getClientRects()].map(x => Math.round(x.top))).size; }""")
    assert lines == 1  # one line of code stays one line (it was wrapped inside the string literal)
    assert code.get_attribute("data-overflow") == "right"
    # the panel itself never scrolls sideways
    assert page.locator(f"{PANEL} .jp-Astro-timeline").evaluate("el => el.scrollWidth <= el.clientWidth + 1")
