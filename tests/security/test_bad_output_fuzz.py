"""Bad-output fuzz: seeded malformed model outputs through the real ``openai`` client and the real runtime.

Each case is one scripted answer of the fake OpenAI server (tests/fakes/openai_server.py): wrong
JSON types, broken JSON, non-object chunks, lone surrogates, hostile tool names and ids, bad
indexes, 100 000-deep arguments, mid-stream errors, keep-alive stalls. Any follow-up request gets
a plain answer, so runs whose bad call became a tool error go on to finish.

Per case, a **crash** is: an exception out of the runtime, no terminal ``done``, the run not over
within the guard, an event the store lost or changed, or an event the SSE encoder cannot encode.
An **internal error** is an ``error`` event with reason ``internal`` or anything logged with a
traceback (or at ERROR). Both counts are asserted to be 0; run with ``-s`` to see the matrix.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections import Counter
from pathlib import Path
from typing import Any, Callable

import pytest

from astro_jupyter.agent.tools.filesystem.glob import GlobFilesTool
from astro_jupyter.agent.tools.filesystem.grep import GrepFilesTool
from astro_jupyter.agent.tools.filesystem.read import ReadFileTool
from astro_jupyter.app import encode_wire
from astro_jupyter.server.sse import format_event
from tests.agent.runtime_helpers import collect, fast, make_config, make_runtime, wires
from tests.fakes.openai_server import ScriptedCall, Turn, raw_delta

SEED = 20261202
CASES = 240
GUARD = 20.0
TOOLS = ["query_target", "read_file", "grep_files", "glob_files"]
WEIRD_VALUES: list[Any] = [0, -1, 3.5, 1e308, True, False, None, [], [1, "a"], {}, {"a": {"b": [1]}}, "", " ", "\x00",
                           "\ud800", "\udfff tail", "a\u202eb", "\x1b[2J", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "x" * 5000]


def _pick(rng: random.Random, items: list[Any]) -> Any:
    return items[rng.randrange(len(items))]


def _deep(rng: random.Random) -> str:
    depth = _pick(rng, [33, 200, 990, 5_000, 100_000])
    opener, closer = _pick(rng, [("[", "]"), ('{"a":', "}")])
    return opener * depth + "1" + closer * depth


def _call_frag(index: Any = 0, id: Any = "c1", name: Any = "query_target", arguments: Any = '{"name": "M 87"}') -> dict[str, Any]:
    return {"tool_calls": [{"index": index, "id": id, "type": "function", "function": {"name": name, "arguments": arguments}}]}


# -- one builder per door: rng -> Turn -------------------------------------------------------------
def wrong_content(rng: random.Random) -> Turn:
    value = _pick(rng, [v for v in WEIRD_VALUES if not isinstance(v, str)])
    return Turn.raw(raw_delta({"content": "fine "}), raw_delta({"content": value}), raw_delta({}, "stop"))


def wrong_envelope(rng: random.Random) -> Turn:
    payload = _pick(rng, [
        [1, 2], 7, "null", "true", '"text"', {"choices": _pick(rng, WEIRD_VALUES)}, {"choices": [_pick(rng, WEIRD_VALUES)]},
        raw_delta(_pick(rng, WEIRD_VALUES)), {"id": 5, "object": [], "created": "x", "model": {}, "choices": []},
        {"choices": [{"index": "z", "delta": {"content": "x"}, "finish_reason": _pick(rng, WEIRD_VALUES)}]},
        {"choices": [], "usage": _pick(rng, WEIRD_VALUES)}, {"choices": [], "usage": {"prompt_tokens": "many", "x": [1]}},
    ])
    return Turn.raw(payload, raw_delta({"content": "after"}))


def broken_json(rng: random.Random) -> Turn:
    line = _pick(rng, ['{"id": "x", "choices": [ {"delta": ', "{]", "nan", "{'single': 'quotes'}", '{"a": 1}{"b": 2}',
                       "\u0000\u0001", '{"choices": [{"delta": {"content": "\\ud800\\udc"}}]}', "[DONE", "data: data:"])
    return Turn.raw(raw_delta({"content": "start "}), line)


def surrogates(rng: random.Random) -> Turn:
    bad = _pick(rng, ["\ud800", "\udfff", "a\udc80b", "\ud83d", "\ude00x", "\ud800\ud800"])
    where = rng.randrange(5)
    if where == 0:
        return Turn.say(f"text {bad} more", chunk_size=rng.randint(1, 6))
    if where == 1:
        return Turn.say("ok", reasoning=f"think {bad}")
    if where == 2:
        return Turn.call("query_target", {"name": f"M{bad}87"}, id=f"id{bad}")
    if where == 3:
        return Turn.call(f"query{bad}_target", {"name": "M 87"})
    return Turn.raw(raw_delta(_call_frag(name=_pick(rng, TOOLS), arguments='{"path": "a\\ud800b", "pattern": "\\udfff"}')),
                    raw_delta({}, "tool_calls"))


def wrong_call_fields(rng: random.Random) -> Turn:
    field = rng.randrange(4)
    value = _pick(rng, WEIRD_VALUES)
    frag = _call_frag(name=_pick(rng, TOOLS))
    call = frag["tool_calls"][0]
    if field == 0:
        call["id"] = value
    elif field == 1:
        call["function"]["name"] = value
    elif field == 2:
        call["function"]["arguments"] = value
    else:
        call["index"] = _pick(rng, [-1, 2.5, "first", 10**12, None, [0], {"i": 0}])
    return Turn.raw(raw_delta(frag), raw_delta({}, "tool_calls"))


def wrong_call_shape(rng: random.Random) -> Turn:
    delta = _pick(rng, [
        {"tool_calls": _pick(rng, WEIRD_VALUES)}, {"tool_calls": [_pick(rng, WEIRD_VALUES)]},
        {"tool_calls": [{"index": 0, "function": _pick(rng, WEIRD_VALUES)}]},
        {"tool_calls": [{"index": 0}]}, {"tool_calls": [{"index": 0, "id": "x", "function": {}}]},
        {"tool_calls": [{"index": 1, "function": {"arguments": "{}"}}, {"index": 0, "function": {"name": "glob_files"}}]},
    ])
    return Turn.raw(raw_delta(delta), raw_delta({}, "tool_calls"))


def deep_arguments(rng: random.Random) -> Turn:
    deep = _deep(rng)
    if rng.random() < 0.5:
        return Turn.call(_pick(rng, TOOLS), '{"name": ' + deep + "}", chunk_size=50_000)
    return Turn.raw(raw_delta(_call_frag(arguments=deep)), raw_delta({}, "tool_calls"))


def deep_chunk(rng: random.Random) -> Turn:
    deep = _deep(rng)
    field = _pick(rng, ['"content":', '"tool_calls":', '"reasoning_content":', '"x":'])
    return Turn.raw('{"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{' + field + deep + "}}]}")


def bad_arguments(rng: random.Random) -> Turn:
    args = _pick(rng, ["{", "}", "null", "[]", "42", '"str"', '{"name": }', "{'name': 'M 87'}", '{"name": "M 87"',
                       '{"name": 87}', '{"path": ["a"]}', '{"pattern": ""}', '{"pattern": "(", "path": "."}',
                       '{"path": "../../etc/passwd"}', '{"path": "/dev/zero"}', '{"name": "' + "x" * 20000 + '"}',
                       '{"unknown": 1}', "\x00", '{"name": "M 87"} trailing'])
    return Turn.call(_pick(rng, TOOLS), args, chunk_size=rng.randint(1, 9))


def hostile_names(rng: random.Random) -> Turn:
    name = _pick(rng, ["query_target\nimport os; os.system('id')", "", " ", "../../bin/sh", "run_bash", "a" * 5000,
                       "query_target\x00", "\x1b[31mred", "query_target ", "QUERY_TARGET", "ask_user", "subagent",
                       "<script>alert(1)</script>", "名前"])
    return Turn.call(name, {"name": "M 87"}, id=_pick(rng, ["", " ", "\n", "x" * 3000, "call_1"]))


def stream_breaks(rng: random.Random) -> Turn:
    kind = rng.randrange(4)
    if kind == 0:
        return Turn.say("half an answer", stream_error=_pick(rng, ["boom", "\ud800", "", "x" * 4000]))
    if kind == 1:
        return Turn.say("dropped", drop_after=rng.randint(0, 4))
    if kind == 2:
        return Turn.say("stall", keepalive_secs=30.0, keepalive_interval=0.05, keepalive_after=rng.randint(0, 3))
    return Turn.raw("[DONE]", raw_delta({"content": "after done"}))


def many_calls(rng: random.Random) -> Turn:
    n = rng.randint(2, 12)
    calls = [ScriptedCall(_pick(rng, TOOLS + ["nope"]), _pick(rng, [{"name": "M 87"}, {"pattern": "*"}, {"path": "x"}, "{"]),
                          _pick(rng, ["dup", "", f"c{i}"])) for i in range(n)]
    return Turn.calls_(*calls, text=_pick(rng, ["", "several calls "]))


DOORS: dict[str, Callable[[random.Random], Turn]] = {
    "content of the wrong type": wrong_content,
    "chunk/choices/delta of the wrong shape": wrong_envelope,
    "invalid JSON chunk": broken_json,
    "lone surrogates (text, reasoning, id, name, args)": surrogates,
    "call id / name / arguments / index of the wrong type": wrong_call_fields,
    "tool_calls of the wrong shape": wrong_call_shape,
    "deep argument JSON (33..100 000 levels)": deep_arguments,
    "deep JSON in the chunk itself": deep_chunk,
    "unusable argument JSON": bad_arguments,
    "hostile tool names and ids": hostile_names,
    "stream errors, drops, keep-alive stalls": stream_breaks,
    "many calls, duplicate/blank ids": many_calls,
}


def generate(seed: int = SEED, count: int = CASES) -> list[tuple[str, Turn]]:
    """The same ``count`` cases for the same seed, cycling through the doors."""
    rng = random.Random(seed)
    names = list(DOORS)
    return [(names[i % len(names)], DOORS[names[i % len(names)]](rng)) for i in range(count)]


class _Traces(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info or record.levelno >= logging.ERROR:
            self.records.append(record)


def test_generator_is_deterministic() -> None:
    first, second = generate(), generate()
    assert len(first) >= 200
    assert [(d, repr(t)) for d, t in first] == [(d, repr(t)) for d, t in second]
    assert Counter(d for d, _ in first) == {d: CASES // len(DOORS) for d in DOORS}


@pytest.mark.slow
@pytest.mark.asyncio
async def test_bad_output_fuzz_has_no_crash_and_no_internal_error(tmp_path: Path, openai_server: Any, sesame_server: Any) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text("M 87 notes\n")
    openai_server.respond_with(lambda body: Turn.say("recovered"))
    config = make_config(tmp_path, openai_server.url, sesame_server.url, project_root=str(project),
                         llm_timeout_secs=2.0, tool_timeout_secs=5.0, max_steps=3)
    services, runtime = await make_runtime(config, ReadFileTool(), GrepFilesTool(), GlobFilesTool(),
                                           tuning=fast({"max_retries": 1, "deadline_secs": 0.5}))
    traces = _Traces()
    logging.getLogger("astro_jupyter").addHandler(traces)
    tried: Counter[str] = Counter()
    crashes: dict[str, list[str]] = {}
    internal: dict[str, list[str]] = {}
    try:
        for number, (door, turn) in enumerate(generate()):
            tried[door] += 1
            traces.records.clear()
            openai_server.script(turn)
            label = f"#{number} {door}"
            try:
                handle = await runtime.start_run(f"case {number}")
                events = wires(await asyncio.wait_for(collect(handle), GUARD))
                await asyncio.wait_for(handle.wait(), GUARD)
                stored = [d for _, d in await services.runs.events_after(handle.run_id)]
                problem = _crash(events, stored)
            except Exception as exc:  # noqa: BLE001 - counted, that is the point
                problem = f"{type(exc).__name__}: {exc}"[:300]
            while openai_server.remaining:  # a crashed case must not leave its turn for the next one
                openai_server.turns.popleft()
            if problem:
                crashes.setdefault(door, []).append(f"{label}: {problem}")
                continue
            internal_errors = [e["message"][:200] for e in events if e["type"] == "error" and e["reason"] == "internal"]
            logged = [f"{r.name}: {r.getMessage()[:200]}" for r in traces.records]
            if internal_errors or logged:
                internal.setdefault(door, []).append(f"{label}: {internal_errors + logged}")
    finally:
        logging.getLogger("astro_jupyter").removeHandler(traces)
        await runtime.close()
        await services.close()
    rows = [f"| {door} | {tried[door]} | {len(crashes.get(door, []))} | {len(internal.get(door, []))} |" for door in DOORS]
    print("\n| door | cases | crashes | internal errors |\n|---|---|---|---|\n" + "\n".join(rows)
          + f"\n| total | {sum(tried.values())} | {sum(map(len, crashes.values()))} | {sum(map(len, internal.values()))} |")
    assert sum(tried.values()) >= 200
    assert sum(map(len, crashes.values())) == 0, crashes
    assert sum(map(len, internal.values())) == 0, internal


def _crash(events: list[dict[str, Any]], stored: list[dict[str, Any]]) -> str:
    if not events or events[0]["type"] != "session":
        return "no session event"
    if events[-1]["type"] != "done":
        return f"ended without done: {[e['type'] for e in events[-3:]]}"
    if [e for e in events if e["type"] == "done"] != [events[-1]]:
        return "more than one done"
    if stored != json.loads(json.dumps(events, ensure_ascii=False)) and stored != _cleaned(events):
        return f"store lost or changed events: {len(stored)} stored of {len(events)}"
    for seq, event in enumerate(events, start=1):
        block = format_event(seq, encode_wire(event))
        json.loads(block.decode("utf-8").split("data: ", 1)[1])
    return ""


def _cleaned(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [json.loads(encode_wire(e)) for e in events]
