"""The renderers on their own: widget timeline state, text timeline lines, result objects."""

from __future__ import annotations

import io

import pytest

from astro_jupyter.events import Subagent, TextDelta, ToolCall, ToolCallPreparing, ToolProgress, ToolResult, Truncated
from astro_jupyter.cells.display import AgentAnswer, AstroResult
from astro_jupyter.kernel.widgets import TextTimeline, WidgetTimeline

EVENTS = [
    TextDelta(delta="Looking up ", step=1),
    TextDelta(delta="<M 31>.", step=1),
    ToolCall(id="c1", name="download_paper", arguments={"paper_id": "2301.01234"}, step=1),
    ToolProgress(id="c1", progress={"done": 3, "total": 10, "message": "bytes"}),
    ToolResult(tool_call_id="c1", name="download_paper", output="saved papers/2301.01234.pdf", step=1, duration_ms=42),
    Subagent(id="sub_1", phase="start", task="check the frames"),
    ToolCall(id="c2", name="glob_files", arguments={"pattern": "*.fits"}, step=1, subagent_id="sub_1"),
    ToolResult(tool_call_id="c2", name="glob_files", output="no files", is_error=True, step=1, subagent_id="sub_1"),
    Subagent(id="sub_1", phase="stop", summary="nothing found"),
]


def test_widget_timeline_builds_cards_progress_and_subagents() -> None:
    shown: list[object] = []
    tl = WidgetTimeline(shown.append)
    assert shown == [tl.box] and tl.stop_button is None  # no subshell routing outside a kernel
    for event in EVENTS[:4]:
        tl.show(event)
    card, bar, _, _ = tl._tools["c1"]
    assert "⏳" in card.value and "download_paper" in card.value
    assert (bar.value, bar.max, bar.layout.display) == (3, 10, "")
    for event in EVENTS[4:]:
        tl.show(event)
    assert "✓" in card.value and "42 ms" in card.value and bar.layout.display == "none"
    section = tl._subagents["sub_1"]
    sub_card = tl._tools["c2"][0]
    assert "✗" in sub_card.value
    assert any("nothing found" in getattr(w, "value", "") for w in section.children)
    tl.finish("finished", "sess_1")
    assert "&lt;M 31&gt;." in tl.text.value  # streamed text, escaped
    assert "finished" in tl.status.value and "sess_1" in tl.status.value



def test_widget_timeline_finish_leaves_the_answer_as_a_markdown_output() -> None:
    """The widget's state is not in a saved notebook: the final answer leaves it for a text/markdown output."""
    answer = "**M 31** is at 778 kpc; see [the paper](https://arxiv.org/abs/2301.01234)."
    shown: list[tuple[object, dict[str, object]]] = []
    tl = WidgetTimeline(lambda obj, **kw: shown.append((obj, kw)))
    tl.show(TextDelta(delta=answer[:20], step=1))
    tl.show(TextDelta(delta=answer[20:], step=1))
    tl.finish("finished", "sess_1", answer)
    assert shown[0] == (tl.box, {})
    assert shown[1:] == [({"text/markdown": answer, "text/plain": answer}, {"raw": True})]
    assert tl.text.layout.display == "none"  # shown once, rendered, not also as the streamed text
    assert "finished" in tl.status.value and "sess_1" in tl.status.value

    quiet: list[object] = []
    nothing = WidgetTimeline(lambda obj, **kw: quiet.append(obj))
    nothing.finish("cancelled", "sess_2", "  ")
    assert quiet == [nothing.box]  # no answer: no empty Markdown output

def test_text_timeline_lines() -> None:
    out = io.StringIO()
    tl = TextTimeline(out)
    for event in EVENTS:
        tl.show(event)
    tl.finish("finished", "sess_1")
    lines = out.getvalue().splitlines()
    assert lines[0] == "Looking up <M 31>."
    assert lines[1].startswith("→ download_paper(")
    assert lines[2] == "  … 3/10 bytes"
    assert lines[3] == "← download_paper (42 ms): saved papers/2301.01234.pdf"
    assert "    → glob_files" in out.getvalue() and "    ✗ glob_files" in out.getvalue()
    assert lines[-1] == "[finished · session sess_1]"


def test_result_objects_render_tables_and_text() -> None:
    hits = AstroResult("search_papers", {"query": "hot Jupiter"}, "2 papers", False,
                       {"query": "hot Jupiter", "results": [{"title": "A <b>", "year": 2021}, {"title": "B", "year": 2020}]}, 12)
    html = hits._repr_html_()
    assert html.count("<tr>") == 3 and "A &lt;b&gt;" in html and "<th style='text-align:left'>year</th>" in html
    assert repr(hits).startswith("[search_papers · ok · 12 ms]\n2 papers")
    assert hits.rows == hits.data["results"]
    failed = AstroResult("read_file", {}, "read_file: x does not exist", True, {"path": "x"})
    assert "error" in failed._repr_html_() and "<table>" not in failed._repr_html_()
    answer = AgentAnswer("M 31 is at 10.68°", "sess_1", "run_1", "finished", [{"name": "query_target"}])
    assert str(answer) == "M 31 is at 10.68°" and "1 tool call(s)" in repr(answer)


def test_text_first_results_show_the_text_and_fold_the_metadata() -> None:
    content = AstroResult("get_paper_content", {"paper_id": "arxiv:1", "section": "Results"},
                          "Halo (arxiv:1) — section 'Results'\n\nExcluding Leo I lowers the virial mass.", False,
                          {"paper_id": "arxiv:1", "scope": "section 'Results'", "sections": ["1 Intro", "4 Results"]}, 5)
    html = content._repr_html_()
    assert html.index("Excluding Leo I") < html.index("<details>") < html.index("paper_id")
    assert "<details><summary>metadata</summary>" in html
    rag = AstroResult("rag_search", {"query": "Leo I"}, "Answer: Leo I is bound [1].\n\n[1] Halo §4", False,
                      {"query": "Leo I", "answer": "Leo I is bound [1].",
                       "hits": [{"chunk_id": 7, "paper_id": "arxiv:1", "score": 0.03}]}, 9)
    html = rag._repr_html_()
    assert html.index("Leo I is bound") < html.index("<details>") < html.index("chunk_id")
    # tables stay first for record lists
    hits = AstroResult("search_papers", {}, "2 papers", False, {"results": [{"title": "A"}, {"title": "B"}]})
    assert hits._repr_html_().index("<table>") < hits._repr_html_().index("<details>")


def test_a_shown_answer_is_not_echoed_again() -> None:
    from IPython.core.formatters import DisplayFormatter

    answer = AgentAnswer("M 31 is at 10.68°. " * 20, "sess_1", "run_1", "finished", [{"name": "query_target"}], shown=True)
    data, _ = DisplayFormatter().format(answer)
    assert set(data) == {"text/plain"}  # no Markdown copy of the answer under the cell
    assert data["text/plain"] == ("<AgentAnswer finished · session sess_1 · 1 tool call · 380 chars; "
                                  ".text has the answer>")
    assert str(answer) == answer.text
    unshown = AgentAnswer("summary of a subagent", "sess_1")
    assert "summary of a subagent" in DisplayFormatter().format(unshown)[0]["text/markdown"]


def test_stop_button_goes_when_the_run_ends_and_hints_match_the_controls() -> None:
    from astro_jupyter.events import AskUser, PermissionRequest

    routed = WidgetTimeline(lambda w: None, route=lambda w: None, on_stop=lambda: None)
    assert routed.stop_button is not None and routed.stop_button.layout.display != "none"
    routed.show(PermissionRequest(request_id="p1", tool_call_id="c9", name="run_bash", arguments={"command": "ls"}, message="run ls"))
    routed.show(AskUser(request_id="q1", question="Which band?", options=["optical", "radio"]))
    cards = " ".join(c.value for c in routed.cards.children)
    assert "input box" not in cards and "answer with the buttons below" in cards
    routed.finish("finished", "sess_1")
    assert routed.stop_button.layout.display == "none"
    plain = WidgetTimeline(lambda w: None)  # no subshell: questions go to input()
    plain.show(AskUser(request_id="q2", question="Which band?", options=[]))
    assert "answer in the input box below" in plain.cards.children[-1].value


def test_search_results_become_an_astropy_table_and_a_dataframe() -> None:
    from astropy.table import Table

    hits = AstroResult("search_papers", {"query": "halo"}, "2 papers", False, {"results": [
        {"paper_id": "arxiv:1", "title": "Halo A", "year": 2021, "authors": ["X, A.", "Y, B."], "citation_count": 12},
        {"paper_id": "arxiv:2", "title": "Halo B", "year": 2019, "authors": [], "citation_count": None},
    ]})
    table = hits.to_table()
    assert isinstance(table, Table) and table.colnames[:3] == ["paper_id", "title", "year"]
    assert list(table["year"]) == [2021, 2019] and table["year"].dtype.kind == "i"
    assert table["citation_count"].mask.tolist() == [False, True]  # a missing count is masked, not 0
    assert list(table["authors"]) == ["X, A.; Y, B.", ""]
    frame = hits.to_pandas()
    assert frame["title"].tolist() == ["Halo A", "Halo B"] and frame.loc[0, "authors"] == ["X, A.", "Y, B."]
    text_only = AstroResult("read_file", {}, "a file", False, {"path": "x"})
    with pytest.raises(ValueError, match="no list of records"):
        text_only.to_table()


def test_a_permission_card_names_the_tool_once_and_a_withdrawn_question_says_so() -> None:
    """The card read "Permission for kernel_run? permission for kernel_run"; a question nobody answered
    said "answered: no answer in time (deny)" and handed the run a "deny" nobody gave."""
    import html
    import re

    from astro_jupyter.errors import QuestionUnanswered
    from astro_jupyter.events import PermissionRequest

    tl = WidgetTimeline(lambda w: None, route=lambda w: None, on_stop=lambda: None)
    request = PermissionRequest(request_id="p1", tool_call_id="c9", name="kernel_run", arguments={"code": "x = 1"},
                                message="kernel_run wants to run the code below in your kernel's namespace")
    tl.show(request)
    card = tl.cards.children[-1].value
    text = html.unescape(re.sub(r"<[^>]+>", " ", card))
    assert len(re.findall(r"(?i)permission for\s+kernel_run", text)) == 1, text
    assert "x = 1" in text and "kernel's namespace" in text
    with pytest.raises(QuestionUnanswered, match="no answer within 0.05 s"):
        tl.ask(request, timeout=0.05)
    said = tl.cards.children[-1].value
    assert "withdrawn" in said and "deny" not in said and "answered:" not in said


LOCAL_MODEL_TURN = [
    ToolCallPreparing(index=0, name="save_note", chars=0, step=1),
    ToolCallPreparing(index=0, name="save_note", chars=900, step=1),
    ToolCallPreparing(index=0, name="save_note", chars=2400, step=1),
    ToolCallPreparing(index=0, name="save_note", chars=3000, step=1),
    ToolCall(id="c1", name="save_note", arguments={"title": "M 31"}, step=1),
    ToolResult(tool_call_id="c1", name="save_note", output="saved", step=1, duration_ms=3),
    TextDelta(delta="M 31 is", step=2),
    Truncated(step=2, max_tokens=1024, message="The answer was cut off: the model reached its output limit of 1024 tokens."),
]


def test_text_timeline_says_preparing_and_cut_off() -> None:
    out = io.StringIO()
    tl = TextTimeline(out)
    for event in LOCAL_MODEL_TURN:
        tl.show(event)
    lines = out.getvalue().splitlines()
    # nothing for a call that arrives at once; a slow one gets a line, then one per 2,000 more characters
    assert [l for l in lines if "preparing" in l] == [
        "… preparing save_note (900 characters of arguments so far)",
        "… preparing save_note (3,000 characters of arguments so far)",
    ]
    assert lines[-1] == "[cut off: The answer was cut off: the model reached its output limit of 1024 tokens.]"


def test_widget_timeline_preparing_line_is_replaced_by_the_call_and_the_cut_is_shown() -> None:
    tl = WidgetTimeline(lambda w: None)
    for event in LOCAL_MODEL_TURN[:4]:
        tl.show(event)
    line = tl._preparing
    assert line is not None and "preparing <code>save_note</code> (3,000 characters)" in line.value
    assert sum("preparing" in getattr(w, "value", "") for w in tl.cards.children) == 1  # updated in place
    for event in LOCAL_MODEL_TURN[4:]:
        tl.show(event)
    assert line.layout.display == "none" and tl._preparing is None
    assert any("cut off:" in getattr(w, "value", "") and "1024 tokens" in w.value for w in tl.cards.children)
