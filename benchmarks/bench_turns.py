"""Per-turn cost of a 40-step tool chain: astro-jupyter's runtime vs a bare openai loop vs openai-agents.

    python benchmarks/bench_turns.py [--steps 40] [--repeats 7]

Setup (identical for the three contenders): a scripted OpenAI-compatible server and a fake
CDS Sesame run in a *separate process* (so the servers do not compete for this process's
GIL). The model asks for one ``query_target`` per turn, with a new name each turn (so no
cache can answer), and ends after ``--steps`` tool results. Sesame answers at once.

* floor: a bare loop over ``openai.AsyncOpenAI`` (streaming, like ours) that performs the
  same HTTP GET + XML parse as the tool, appends messages, and loops. No persistence.
* openai-agents: ``Runner.run`` with a ``function_tool`` doing the same GET + parse
  (its chat-completions model, non-streaming; tracing disabled).
* astro-jupyter: ``AgentRuntime.start_run`` with the real ``query_target`` tool, i.e. the
  executor pipeline (validation, permissions, Pre/PostToolUse hooks with one no-op hook
  each, audit rows), every event numbered, fanned out to a live subscriber and persisted,
  each turn committed to SQLite (WAL) before it is announced, plus the Sesame cache write.

Per-turn figures are time / LLM calls (steps + 1), wall and this process's CPU time (the
latter stays meaningful on a loaded machine). Not part of the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

NAMES_TEXT = "Resolving the next target."


# -- the servers (child process) -----------------------------------------------------------------
def _serve(conn: Any, steps: int) -> None:
    sys.path.insert(0, str(ROOT))
    from tests.fakes.base import FakeHandler, FakeServer
    from tests.fakes.openai_server import FakeOpenAIServer, Turn
    from tests.fakes.sesame_server import DATA

    m31 = (DATA / "m31.xml").read_bytes()

    class AnyName(FakeHandler):
        def do_GET(self) -> None:  # noqa: N802
            self.send_body(200, m31, "text/xml;charset=UTF-8")

    def responder(body: dict[str, Any]) -> Turn:
        done = sum(1 for m in body.get("messages", []) if m.get("role") == "tool")
        if done >= steps:
            return Turn.say(f"All {steps} targets resolved.", chunk_size=8)
        return Turn.call("query_target", {"name": f"M 31 step {done}"}, text=NAMES_TEXT, chunk_size=8)

    llm = FakeOpenAIServer(responder=responder).start()
    sesame = FakeServer(AnyName).start()
    conn.send((llm.url, sesame.url))
    conn.recv()  # wait for "stop"
    llm.stop()
    sesame.stop()


# -- contenders -------------------------------------------------------------------------------------
TOOL_DEF = {
    "type": "function",
    "function": {
        "name": "query_target",
        "description": "Resolve an astronomical object name through CDS Sesame.",
        "parameters": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
    },
}


async def _resolve_text(http: Any, sesame_url: str, name: str) -> str:
    from urllib.parse import quote

    from astro_jupyter.services.sesame import parse_sesame_xml

    resp = await http.get(f"{sesame_url}/-oxp/SNV?{quote(name, safe='')}")
    rec = parse_sesame_xml(resp.text, name)[0]
    return f"{rec.main_id}: RA {rec.ra_deg:.6f} = {rec.ra_sexa}, Dec {rec.dec_deg:+.6f} = {rec.dec_sexa}, {rec.otype}"


async def run_floor(llm_url: str, sesame_url: str, steps: int, verbatim: bool = False) -> tuple[float, int]:
    """The bare loop. ``verbatim``: the body goes through ``extra_body`` as astro-jupyter's client sends
    it (no SDK typed-dict transform), so the two compare what the runtime itself adds."""
    import httpx2
    import openai

    client = openai.AsyncOpenAI(base_url=llm_url, api_key="k", max_retries=0)
    http = httpx2.AsyncClient(trust_env=False)
    messages: list[dict[str, Any]] = [{"role": "system", "content": "bench"}, {"role": "user", "content": "resolve"}]
    calls = 0
    t0 = time.perf_counter()
    while True:
        calls += 1
        if verbatim:
            stream = await client.chat.completions.create(
                model="gpt-4o-mini", messages=[], stream=True, extra_body={"messages": messages, "tools": [TOOL_DEF]}
            )
        else:
            stream = await client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=[TOOL_DEF], stream=True)
        text, tc = [], {}
        async for chunk in stream:
            for ch in chunk.choices:
                if ch.delta.content:
                    text.append(ch.delta.content)
                for frag in ch.delta.tool_calls or []:
                    slot = tc.setdefault(frag.index, {"id": "", "name": "", "args": ""})
                    slot["id"] = frag.id or slot["id"]
                    if frag.function and frag.function.name:
                        slot["name"] = frag.function.name
                    if frag.function and frag.function.arguments:
                        slot["args"] += frag.function.arguments
        if not tc:
            break
        import json

        messages.append(
            {
                "role": "assistant",
                "content": "".join(text),
                "tool_calls": [{"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["args"]}} for c in tc.values()],
            }
        )
        for c in tc.values():
            out = await _resolve_text(http, sesame_url, json.loads(c["args"])["name"])
            messages.append({"role": "tool", "tool_call_id": c["id"], "content": out})
    elapsed = time.perf_counter() - t0
    await http.aclose()
    await client.close()
    return elapsed, calls


async def run_agents_sdk(llm_url: str, sesame_url: str, steps: int) -> tuple[float, int]:
    import httpx2
    import openai
    from agents import Agent, ModelSettings, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled

    set_tracing_disabled(True)
    client = openai.AsyncOpenAI(base_url=llm_url, api_key="k", max_retries=0)
    http = httpx2.AsyncClient(trust_env=False)

    @function_tool
    async def query_target(name: str) -> str:
        """Resolve an astronomical object name through CDS Sesame."""
        return await _resolve_text(http, sesame_url, name)

    agent = Agent(
        name="bench",
        instructions="bench",
        tools=[query_target],
        model=OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client),
        model_settings=ModelSettings(),
    )
    t0 = time.perf_counter()
    result = await Runner.run(agent, "resolve", max_turns=steps + 5)
    elapsed = time.perf_counter() - t0
    assert str(result.final_output).startswith("All"), result.final_output
    await http.aclose()
    await client.close()
    return elapsed, steps + 1


async def run_ours(llm_url: str, sesame_url: str, steps: int, home: str) -> tuple[float, int]:
    from astro_jupyter.agent.hooks import HookRegistry
    from astro_jupyter.agent.runtime import AgentRuntime
    from astro_jupyter.agent.tools.astro.target import QueryTargetTool
    from astro_jupyter.agent.tools.registry import ToolRegistry
    from astro_jupyter.config import AstroConfig
    from astro_jupyter.services.container import ServiceContainer

    config = AstroConfig(home=home, openai_base_url=llm_url, openai_api_key="k", service_urls={"sesame": sesame_url},
                         max_steps=steps + 5)
    services = ServiceContainer(config)
    await services.start()
    hooks = HookRegistry()

    async def noop(event: Any, payload: dict[str, Any]) -> None:
        return None

    hooks.register("PreToolUse", noop)
    hooks.register("PostToolUse", noop)
    runtime = AgentRuntime(services, registry=ToolRegistry([QueryTargetTool()]), hooks=hooks)
    await runtime.start()
    services.http  # clients built before timing, as the floor's and the SDK's are  # noqa: B018
    services.llm.prepare()
    t0 = time.perf_counter()
    handle = await runtime.start_run("resolve")
    seen = 0
    async for _seq, _event in handle.events():  # a live subscriber, like the SSE writer
        seen += 1
    done = await handle.wait()
    elapsed = time.perf_counter() - t0
    assert done.reason == "finished", done
    assert handle.final_text.startswith("All"), handle.final_text
    stored = await services.runs.events_after(handle.run_id, 0, 100_000)
    assert len(stored) == seen, (len(stored), seen)
    msgs = await services.messages.list(handle.session_id)
    assert len(msgs) == 2 + 2 * steps, len(msgs)
    await runtime.close()
    await services.close()
    return elapsed, steps + 1


# -- driver -----------------------------------------------------------------------------------------
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()

    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_serve, args=(child, args.steps), daemon=True)
    proc.start()
    llm_url, sesame_url = parent.recv()
    keys = ["floor (bare openai loop)", "openai-agents Runner", "astro-jupyter runtime", "floor, body sent verbatim"]
    wall: dict[str, list[float]] = {k: [] for k in keys}
    cpu: dict[str, list[float]] = {k: [] for k in keys}
    try:
        with tempfile.TemporaryDirectory() as tmp:

            async def one(which: int, i: int) -> None:
                c0 = time.process_time()
                if which == 0:
                    secs, calls = await run_floor(llm_url, sesame_url, args.steps)
                elif which == 1:
                    secs, calls = await run_agents_sdk(llm_url, sesame_url, args.steps)
                elif which == 3:
                    secs, calls = await run_floor(llm_url, sesame_url, args.steps, verbatim=True)
                else:
                    secs, calls = await run_ours(llm_url, sesame_url, args.steps, f"{tmp}/home{i}")
                used = time.process_time() - c0
                if i >= 0:
                    wall[keys[which]].append(secs * 1000 / calls)
                    cpu[keys[which]].append(used * 1000 / calls)

            async def all_rounds() -> None:
                for which in range(4):
                    await one(which, -1)  # warm-up: imports, connections, SQLite file creation
                for i in range(args.repeats):
                    for which in ([0, 1, 2, 3] if i % 2 == 0 else [3, 2, 1, 0]):
                        await one(which, i)

            asyncio.run(all_rounds())
    finally:
        parent.send("stop")
        proc.join(timeout=5)

    print(f"\n{args.steps}-step query_target chain, {args.repeats} repeats, per LLM turn ({args.steps + 1} calls/run)")
    print("wall = elapsed time; cpu = CPU time of this process (client side; the servers run in another process)")
    print(f"{'contender':<28}{'wall med':>10}{'wall min':>10}{'vs floor':>10}{'cpu med':>10}{'cpu min':>10}{'vs floor':>10}")
    wf, cf = statistics.median(wall[keys[0]]), statistics.median(cpu[keys[0]])
    for key in keys:
        wm, cm = statistics.median(wall[key]), statistics.median(cpu[key])
        print(f"{key:<28}{wm:>10.2f}{min(wall[key]):>10.2f}{wm - wf:>+10.2f}{cm:>10.2f}{min(cpu[key]):>10.2f}{cm - cf:>+10.2f}")
    ours_w, ours_c = statistics.median(wall[keys[2]]), statistics.median(cpu[keys[2]])
    print(f"\ngoal: astro-jupyter <= floor + 2 ms/turn: wall {ours_w - wf:+.2f} ms -> {'MET' if ours_w <= wf + 2 else 'NOT met'}; "
          f"cpu {ours_c - cf:+.2f} ms -> {'MET' if ours_c <= cf + 2 else 'NOT met'}")
    vw, vc = statistics.median(wall[keys[3]]), statistics.median(cpu[keys[3]])
    print(f"same transport (both skip the SDK's transform): wall {ours_w - vw:+.2f} ms, cpu {ours_c - vc:+.2f} ms "
          f"-> {'MET' if ours_c <= vc + 2 else 'NOT met'} against 'floor, body sent verbatim'")
    print(f"(machine load average now: {', '.join(f'{x:.2f}' for x in os.getloadavg())}; wall figures are noisy under load)")


if __name__ == "__main__":
    main()
