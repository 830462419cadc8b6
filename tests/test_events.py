"""events.fold_deltas: the folding a reopened session's replay relies on."""

from __future__ import annotations

from typing import Any

from astro_jupyter.events import fold_deltas


def _t(delta: str, step: int = 1, sub: str | None = None, kind: str = "text_delta") -> dict[str, Any]:
    return {"type": kind, "delta": delta, "step": step, **({"subagent_id": sub} if sub else {})}


def test_consecutive_deltas_of_one_step_fold_and_keep_the_last_seq() -> None:
    folded = fold_deltas([("r", 1, _t("Hel")), ("r", 2, _t("lo")), ("r", 3, _t(" world"))])
    assert folded == [("r", 3, _t("Hello world"))]


def test_folding_stops_at_anything_that_would_start_a_new_item() -> None:
    items = [
        ("r", 1, _t("a")), ("r", 2, _t("b", sub="s1")), ("r", 3, _t("c")),  # a subagent's delta between
        ("r", 4, _t("d", step=2)),  # another step
        ("r", 5, _t("e", step=2, kind="thinking_delta")),  # thinking is its own item
        ("r", 6, {"type": "tool_call", "id": "c1", "name": "x", "arguments": {}, "step": 2}),
        ("r", 7, _t("f", step=2)), ("q", 8, _t("g", step=2)),  # another run
    ]
    assert fold_deltas(items) == items


def test_the_input_is_not_modified_and_odd_rows_pass_through() -> None:
    first = _t("x")
    rows = [("r", 1, first), ("r", 2, _t("y")), ("r", 3, {"type": "text_delta", "delta": None, "step": 1}),
            ("r", 4, {"type": "unknown_future_event"})]
    folded = fold_deltas(rows)
    assert first == _t("x")
    assert folded == [("r", 2, _t("xy")), ("r", 3, rows[2][2]), ("r", 4, rows[3][2])]
