"""ModelHolder and FallbackPolicy: the switching rules without a server."""

from __future__ import annotations

import threading

import pytest

from astro_jupyter.llm.fallback import FallbackPolicy, ModelHolder, is_overload, is_transient


def test_policy_prefers_fallback_then_rotates_chain_without_repeats():
    policy = FallbackPolicy("fb", ["a", "b", "fb"])
    assert policy.candidates == ["fb", "a", "b"]
    assert policy.next_model("main", ["main"]) == "fb"
    assert policy.next_model("fb", ["main", "fb"]) == "a"
    assert policy.next_model("a", ["main", "fb", "a"]) == "b"
    assert policy.next_model("b", ["main", "fb", "a", "b"]) is None
    # a run that started on a chain model rotates on from there, wrapping around
    assert policy.next_model("b", ["b"]) == "fb"
    assert FallbackPolicy("", []).next_model("main", ["main"]) is None
    assert FallbackPolicy("", ["x"]).next_model("main", ["main"]) == "x"


def test_overload_and_transient_classification():
    assert all(is_overload(s, "") for s in (429, 503, 529))
    assert is_overload(500, "Upstream: Overloaded, retry later") and not is_overload(500, "boom")
    assert is_transient(500) and is_transient(502) and is_transient(None) and not is_transient(400) and not is_transient(401)


def test_holder_switch_is_atomic_across_threads():
    holder = ModelHolder("m0")
    names = [f"m{i}" for i in range(1, 201)]

    def switcher(chunk: list[str]) -> None:
        for name in chunk:
            holder.switch(name, "test")

    threads = [threading.Thread(target=switcher, args=(names[i::4],)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    history = holder.history
    assert len(history) == 200
    # every switch started from the model the previous one ended on: no lost update
    assert all(history[i].from_model == history[i - 1].to_model for i in range(1, len(history)))
    assert holder.get() == history[-1].to_model
    with pytest.raises(ValueError):
        holder.switch("  ")
