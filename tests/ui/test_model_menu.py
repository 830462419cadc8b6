"""The model menu opens above its chip at the bottom of the sidebar, so the chip stays visible
(issue 24 item 10; the placement rule itself is in labextension/test/modelMenu.test.ts)."""

from __future__ import annotations

from typing import Any

from .conftest import PANEL


def test_model_menu_leaves_its_chip_visible(page: Any, lab: Any) -> None:
    chip = page.locator(f"{PANEL} .jp-Astro-model-chip")
    chip.click()
    menu = page.locator(".lm-Menu.jp-Astro-menu").last
    menu.locator(".lm-Menu-item", has_text="gpt-4o-mini").first.wait_for()
    c, m = chip.bounding_box(), menu.bounding_box()
    assert m["y"] + m["height"] <= c["y"] + 0.5  # wholly above the chip
    assert m["y"] >= 0
    page.keyboard.press("Escape")
