"""What a run costs, in the sidebar: tokens and cost under the answer (the same after a reload,
from the stored events), the session's total in the header, the context gauge by the model chip;
and an end banner that names why a run failed and offers the action that fits (a 404 model →
Switch model, which opens the model menu)."""

from __future__ import annotations

from tests.fakes.openai_server import Turn

from .conftest import PANEL, new_session, open_panel, send, wait_done


def test_tokens_and_cost_under_the_answer_the_session_total_and_the_gauge(page, script):
    script.script(Turn.say("M 31 is the Andromeda galaxy.", usage={"prompt_tokens": 1200, "completion_tokens": 300}))
    new_session(page)
    send(page, "What is M 31?")
    wait_done(page)
    panel = page.locator(PANEL)
    line = panel.locator(".jp-Astro-usage")
    line.wait_for()
    expected = "1,500 tokens (1,200 in · 300 out) · $0.00036"
    assert line.inner_text() == expected
    gauge = panel.locator(".jp-Astro-context-gauge")
    assert gauge.is_visible() and gauge.get_attribute("aria-valuenow") == "1500"
    assert gauge.get_attribute("title").startswith("Context: 1,500 of 128,000 tokens")
    assert "compaction starts at" in gauge.get_attribute("title")
    total = panel.locator(".jp-Astro-session-usage")
    page.wait_for_function(f"() => document.querySelector('{PANEL} .jp-Astro-session-usage').textContent !== ''")
    assert total.inner_text() == "1,500 tokens · $0.00036"

    # reopened: the stored usage event replays the same line
    page.reload()
    open_panel(page)
    panel.locator(".jp-Astro-usage").wait_for()
    assert panel.locator(".jp-Astro-usage").inner_text() == expected
    page.wait_for_function(f"() => document.querySelector('{PANEL} .jp-Astro-session-usage').textContent !== ''")
    assert panel.locator(".jp-Astro-session-usage").inner_text() == "1,500 tokens · $0.00036"


def test_an_unknown_model_is_named_and_offers_switch_model(page, script):
    script.script(Turn.fail(404, "The model `gpt-4o-mini` does not exist or you do not have access to it."))
    new_session(page)
    send(page, "What is M 31?")
    wait_done(page)
    banner = page.locator(f"{PANEL} .jp-Astro-end")
    banner.wait_for()
    assert "does not serve this model" in banner.inner_text()
    assert "Something went wrong" not in banner.inner_text()
    buttons = banner.locator("button")
    assert buttons.all_inner_texts() == ["Switch model"]
    buttons.first.click()
    menu = page.locator(".lm-Menu.jp-Astro-menu").last
    menu.wait_for()
    assert "chain-a" in menu.locator(".lm-Menu-itemLabel").all_inner_texts()
    page.keyboard.press("Escape")
