"""The model menu opens above its chip at the bottom of the sidebar, so the chip stays visible
(issue 24 item 10; the placement rule itself is in labextension/test/modelMenu.test.ts). A short
menu (an endpoint serving one model) used to open at the chip's top-left, right over it."""

from __future__ import annotations

from typing import Any

from .conftest import PANEL, open_panel


def test_model_menu_leaves_its_chip_visible(browser: Any, lab: Any, script: Any) -> None:
    saved = list(script.models)
    script.models = ["gpt-4o-mini"]
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    try:
        page = context.new_page()
        page.set_default_timeout(20_000)
        page.goto(f"{lab.url}/lab?reset&token={lab.token}")
        open_panel(page)
        chip = page.locator(f"{PANEL} .jp-Astro-model-chip")
        page.wait_for_function("() => document.querySelector('#astro-jupyter-panel').dataset.model === 'gpt-4o-mini'")
        chip.click()
        menu = page.locator(".lm-Menu.jp-Astro-menu").last
        menu.locator(".lm-Menu-item", has_text="gpt-4o-mini").first.wait_for()
        c, m = chip.bounding_box(), menu.bounding_box()
        assert m["y"] + m["height"] <= c["y"] + 0.5, (c, m)  # wholly above the chip
        assert m["y"] >= 0
        page.keyboard.press("Escape")
    finally:
        context.close()
        script.models = saved
