"""Permission cards (issue 24 item 8), in a real ``jupyter lab`` with the scripted LLM, headless Chromium.

A card shows what will run once (a command with its real line breaks, every other argument listed), a calm
Deny beside the primary Allow, and collapses to one line once answered ("Allowed: run_bash …", "Declined")
that expands again. A denied call's tool line reads "declined", not a red "failed". A ``notebook_edit``
replace is asked as a diff of the cell as it is now (old → new). axe finds no serious violation in a card.
"""

from __future__ import annotations

import uuid

import nbformat
import nbformat.v4 as nbf

from tests.fakes.openai_server import Turn

from .conftest import PANEL, send, shot, wait_done
from .test_look import AXE, _axe

COMMAND = "cd data/m31\nls -la field_*.fits\necho reduced-line-three \u202e"

COLOUR_JS = """([sel, variable]) => {
    const el = document.querySelector(sel);
    const probe = document.createElement('span');
    probe.style.color = `var(${variable})`;
    el.appendChild(probe);
    const want = getComputedStyle(probe).color;
    probe.remove();
    return { background: getComputedStyle(el).backgroundColor, color: getComputedStyle(el).color, variable: want };
}"""


def _card(page):
    card = page.locator(f"{PANEL} .jp-Astro-permission").last
    card.wait_for()
    return card


def test_run_bash_card_shows_the_command_once_with_line_breaks_and_collapses_after_allow(page, script):
    script.script(
        Turn.call("run_bash", {"command": COMMAND, "timeout": 60}, id="perm_bash"),
        Turn.say("Listed."),
    )
    send(page, "List the M31 fields")
    card = _card(page)
    text = card.inner_text()
    # the command once, as code with its real line breaks (not JSON with \n escapes)
    assert text.count("reduced-line-three") == 1, text
    assert "\\n" not in text, text
    code = card.locator("pre.jp-Astro-question-code")
    assert code.count() == 1
    assert code.inner_text().rstrip("\n") == COMMAND.replace("\u202e", "\\u202e")
    # every other argument is there, in full, its hidden characters escaped
    assert "timeout" in text and "60" in text
    assert "\\u202e" in text and "\u202e" not in text
    # a calm Deny next to a primary Allow
    allow = card.get_by_role("button", name="Allow", exact=True)
    deny = card.get_by_role("button", name="Deny", exact=True)
    sel = f'{PANEL} .jp-Astro-permission button.jp-mod-reject'
    deny_look = page.evaluate(COLOUR_JS, [sel, "--jp-error-color1"])
    assert deny_look["background"] != deny_look["variable"], deny_look
    assert deny_look["color"] != deny_look["variable"], deny_look
    allow_look = page.evaluate(COLOUR_JS, [f'{PANEL} .jp-Astro-permission button.jp-mod-accept', "--jp-brand-color1"])
    assert allow_look["background"] == allow_look["variable"], allow_look
    if AXE.exists():
        assert _axe(page) == []
    shot(page, "permission-card-open")
    allow.click()
    wait_done(page)
    # one line once answered, which expands to show the command again
    assert not code.is_visible()
    summary = card.locator(".jp-Astro-question-summary")
    assert summary.is_visible()
    assert summary.inner_text().strip().startswith("Allowed: run_bash")
    assert "cd data/m31" in summary.inner_text()
    box = card.bounding_box()
    assert box is not None and box["height"] < 48, box
    assert summary.get_attribute("aria-expanded") == "false"
    summary.click()
    assert summary.get_attribute("aria-expanded") == "true"
    assert code.is_visible()
    assert not deny.is_visible() or deny.is_disabled()
    shot(page, "permission-card-allowed")
    assert page.astro_errors == []


def test_a_denied_call_reads_declined_not_failed(page, script):
    script.script(Turn.call("run_bash", {"command": "rm -rf build"}, id="perm_denied"), Turn.say("Not run."))
    send(page, "clean the build")
    card = _card(page)
    page.locator(f'{PANEL} .jp-Astro-tool[data-tool-call-id="perm_denied"][data-status="waiting"]').wait_for()
    assert card.inner_text().count("rm -rf build") == 1, card.inner_text()  # not in the message and again below
    card.get_by_role("button", name="Deny", exact=True).click()
    wait_done(page)
    summary = card.locator(".jp-Astro-question-summary")
    assert summary.inner_text().strip().startswith("Declined")
    tool = page.locator(f'{PANEL} .jp-Astro-tool[data-tool-call-id="perm_denied"]')
    assert tool.get_attribute("data-status") == "declined"
    state = tool.locator(".jp-Astro-tool-state")
    assert state.inner_text().strip() == "declined"
    look = page.evaluate(COLOUR_JS, [f'{PANEL} .jp-Astro-tool[data-tool-call-id="perm_denied"] .jp-Astro-tool-state',
                                     "--jp-error-color1"])
    assert look["color"] != look["variable"], look
    assert "failed" not in tool.locator(":scope > .jp-Astro-tool-line").inner_text()
    shot(page, "permission-card-declined")
    assert page.astro_errors == []


def test_notebook_edit_replace_is_asked_as_a_diff_of_the_cell(page, lab, script):
    name = f"perm-{uuid.uuid4().hex[:6]}.ipynb"
    nb = nbf.new_notebook()
    nb.cells = [nbf.new_code_cell("flux = load('m31.fits')\nx = 20\nprint(x)")]
    (lab.root / name).write_text(nbformat.writes(nb))
    new = "flux = load('m31.fits')\nx = 21\nprint(x)"
    script.script(
        Turn.call("notebook_edit", {"path": name, "action": "replace", "cell_id": nb.cells[0].id, "source": new},
                  id="perm_replace"),
        Turn.say("Changed x."),
    )
    send(page, "set x to 21")
    card = _card(page)
    diff = card.locator(".jp-Astro-question-diff")
    diff.wait_for()
    assert diff.locator(".jp-Astro-diff-del").inner_text().strip() == "- x = 20"
    assert diff.locator(".jp-Astro-diff-add").inner_text().strip() == "+ x = 21"
    assert diff.locator(".jp-Astro-diff-same").count() == 2
    # removed and added lines are told apart by more than colour: <del>/<ins> and a caption
    assert diff.locator("del").count() == 1 and diff.locator("ins").count() == 1
    assert "1 line removed, 1 added" in card.inner_text()
    look_del = page.evaluate(COLOUR_JS, [f"{PANEL} .jp-Astro-question-diff .jp-Astro-diff-del", "--jp-error-color1"])
    look_add = page.evaluate(COLOUR_JS, [f"{PANEL} .jp-Astro-question-diff .jp-Astro-diff-add", "--jp-success-color1"])
    assert look_del["background"] != look_add["background"]
    # the new source is shown once (in the diff), not again as JSON
    assert card.inner_text().count("x = 21") == 1, card.inner_text()
    if AXE.exists():
        assert _axe(page) == []
    shot(page, "permission-card-diff")
    card.get_by_role("button", name="Allow for this notebook").click()
    wait_done(page)
    summary = card.locator(".jp-Astro-question-summary")
    assert summary.inner_text().strip().startswith("Allowed for this notebook")
    assert "session" not in card.inner_text()
    assert "x = 21" in (lab.root / name).read_text()
    assert page.astro_errors == []
