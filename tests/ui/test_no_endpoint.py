"""A newcomer with no LLM endpoint (issue 24 item 10): the empty sidebar says what to set, and
"Open the demo session" shows the demo's recorded run, replayed through the reopen path, with no key."""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from astro_jupyter.demo import DEMO_SESSION_TITLE

from .conftest import PANEL, open_panel, settle, shot


@pytest.fixture
def bare_page(browser: Any, lab_no_llm: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.set_default_timeout(20_000)
    pg.goto(f"{lab_no_llm.url}/lab?reset&token={lab_no_llm.token}")
    open_panel(pg)
    pg.astro_errors = errors  # type: ignore[attr-defined]
    try:
        yield pg
    finally:
        context.close()


def test_empty_state_says_what_to_set_and_opens_the_demo(bare_page: Any, lab_no_llm: Any) -> None:
    page = bare_page
    panel = page.locator(PANEL)
    setup = panel.locator(".jp-Astro-setup")
    setup.wait_for(state="visible")
    text = " ".join(setup.inner_text().split())
    for needed in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "LLM_MODEL", "astro-jupyter doctor"):
        assert needed in text
    shot(page, "no-endpoint-empty-state")

    setup.get_by_role("button", name="Open the demo session").click()
    page.wait_for_function(
        """() => {
            const p = document.querySelector('#astro-jupyter-panel');
            return !!p.dataset.sessionId && !p.dataset.loading;
        }"""
    )
    settle(page)
    sid = panel.get_attribute("data-session-id")
    sessions = lab_no_llm.api("GET", "astro/api/sessions")["sessions"]
    assert [s["title"] for s in sessions if s["id"] == sid] == [DEMO_SESSION_TITLE]
    # the recorded run, as the live path shows it: the prompt, a tool line, the answer
    assert "What constrains the mass of the Milky Way" in panel.locator(".jp-Astro-user").first.inner_text()
    tool = panel.locator('.jp-Astro-tool[data-tool-call-id="call_demo_rag"]')
    tool.wait_for()
    assert "rag_search" in tool.inner_text() and tool.get_attribute("data-status") == "done"
    answer = panel.locator(".jp-Astro-assistant").last
    answer.locator("strong", has_text="kinematics of the few distant tracers").wait_for()  # rendered Markdown
    assert "Leo I" in answer.inner_text()
    assert not setup.is_visible()  # a session is shown: the empty state is gone
    shot(page, "no-endpoint-demo-session")
    assert page.astro_errors == []
