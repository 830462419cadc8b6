"""A small local model's context: a 40-step research chain in 4,096 tokens, and a plain question's prompt.

Run: ``python benchmarks/bench_local_model.py`` from the checkout. Against the scripted
OpenAI-compatible server (``tests/fakes/openai_server.py``) posing as ``llama-server -c 4096``:
it says ``n_ctx: 4096`` on ``GET /props`` and refuses any prompt over it with llama.cpp's
``exceed_context_size_error``; its "tokenizer" counts 3.5 characters of request JSON a token (more
than astro's chars/4, so the calibration by ``usage.prompt_tokens`` has to matter). The agent runs
with the default registry (the resident tools' schemas are in every request) and a responder that
calls ``query_target`` (fake Sesame) or ``read_file`` (a 1.5 kB note) at each step, 40 steps, then
answers. Printed: steps done, overflow errors, compactions, the largest prompt the server counted
against its budget, and how the run ended. Then the prompt of a plain question: tool schemas sent
with the resident tools vs every tool resident (the 14.7 kB of before).
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from astro_jupyter.agent.runtime import AgentRuntime  # noqa: E402
from astro_jupyter.agent.tools import build_default_registry  # noqa: E402
from astro_jupyter.config import AstroConfig  # noqa: E402
from astro_jupyter.events import Compaction, Error  # noqa: E402
from astro_jupyter.llm.client import LlmLimits  # noqa: E402
from astro_jupyter.services.container import ServiceContainer, Tuning  # noqa: E402
from tests.fakes.openai_server import FakeOpenAIServer, Turn  # noqa: E402
from tests.fakes.sesame_server import FakeSesameServer  # noqa: E402

STEPS = 40
N_CTX = 4096
NAMES = ["M 31", "M 87", "Sgr A*", "NGC 1275"]
NOTE = "Observing log, night 3. " + "Seeing 0.8 arcsec, transparency good, M 31 nucleus exposures 4 x 300 s. " * 20


def chain(steps: int):
    seen: set[str] = set()

    def respond(body: dict[str, Any]) -> Turn:
        if str(body["messages"][0].get("content", "")).startswith(("You compress", "You review")):
            return Turn.say("- resolved targets and read the observing log; continue with the next target")
        seen.update(m["tool_call_id"] for m in body["messages"] if m["role"] == "tool")
        done = len(seen)
        if done >= steps:
            return Turn.say("All targets resolved; the log confirms the M 31 exposures.")
        if done % 3 == 2:
            return Turn.call("read_file", {"path": "night3.log"}, text=f"Step {done + 1}: checking the log. ")
        return Turn.call("query_target", {"name": NAMES[done % 4]}, text=f"Step {done + 1}: resolving. ")

    return respond


async def research_chain() -> dict[str, Any]:
    llm = FakeOpenAIServer(props={"default_generation_settings": {"n_ctx": N_CTX}, "total_slots": 1},
                           n_ctx=N_CTX, chars_per_token=3.5).start()
    sesame = FakeSesameServer().start()
    llm.respond_with(chain(STEPS))
    try:
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "night3.log").write_text(NOTE)
            config = AstroConfig(home=str(Path(tmp) / "home"), project_root=tmp, openai_base_url=llm.url,
                                 openai_api_key="k", service_urls={"sesame": sesame.url}, max_steps=STEPS + 5,
                                 llm_model="local-gemma")
            services = ServiceContainer(config, tuning=Tuning(llm=LlmLimits(retry_base_delay=0.01)))
            await services.start()
            runtime = AgentRuntime(services)
            try:
                handle = await runtime.start_run("Resolve these targets one by one and check the observing log.")
                events = [e async for _, e in handle.events()]
                profile = await services.llm.profile("local-gemma")
            finally:
                await runtime.close()
                await services.close()
        sizes = [llm.count_tokens(b) for b in llm.chat_requests if "max_tokens" in b]
        tool_steps = sum(1 for e in events if e.type == "tool_call")
        return {
            "steps": tool_steps,
            "requests": len(llm.chat_requests),
            "overflows": llm.overflows,
            "compactions": sum(1 for e in events if isinstance(e, Compaction) and e.layer != "micro" and "summarised" in e.message),
            "micro": sum(1 for e in events if isinstance(e, Compaction) and e.layer == "micro"),
            "max_prompt": max(sizes),
            "budget": N_CTX - profile.max_output_tokens,
            "max_tokens": profile.max_output_tokens,
            "source": profile.source,
            "end": events[-1].reason,
            "errors": [e.message for e in events if isinstance(e, Error)],
        }
    finally:
        llm.stop()
        sesame.stop()


def plain_question() -> dict[str, int]:
    with tempfile.TemporaryDirectory() as home:
        registry = build_default_registry(AstroConfig(home=home, project_root=home))
        resident = json.dumps(registry.resident_definitions())
        every = json.dumps(registry.definitions())
    return {"resident_bytes": len(resident), "resident": len(registry.resident_definitions()),
            "all_bytes": len(every), "all": len(registry)}


def main() -> None:
    chain_result = asyncio.run(research_chain())
    print(f"research chain, {N_CTX}-token model (context from {chain_result['source']}; answers bounded at "
          f"{chain_result['max_tokens']} tokens)")
    print(f"  tool steps done          {chain_result['steps']} of {STEPS}  ({chain_result['requests']} requests)")
    print(f"  overflow errors          {chain_result['overflows']}")
    print(f"  compactions (summaries)  {chain_result['compactions']}  (+{chain_result['micro']} micro)")
    print(f"  largest prompt / budget  {chain_result['max_prompt']} / {chain_result['budget']} tokens "
          f"= {chain_result['max_prompt'] / chain_result['budget']:.2f}")
    print(f"  run ended                {chain_result['end']}" + (f"  errors: {chain_result['errors']}" if chain_result['errors'] else ""))
    plain = plain_question()
    print("plain question, tool schemas in the prompt")
    print(f"  resident tools           {plain['resident']} schemas, {plain['resident_bytes']:,} bytes (target <= 6,000)")
    print(f"  every tool resident      {plain['all']} schemas, {plain['all_bytes']:,} bytes")
    print(f"  ratio                    {plain['resident_bytes'] / plain['all_bytes']:.2f}")


if __name__ == "__main__":
    main()
