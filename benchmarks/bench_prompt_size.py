"""Prompt size: deferred tool loading vs every tool resident, for the standard and coordinator registries.

Run: ``python benchmarks/bench_prompt_size.py`` from the checkout. What the first LLM request carries
about tools is measured exactly as the runtime builds it: the system prompt (``agent/prompt.py``,
which lists deferred tools as a one-line catalog) plus the JSON of the ``tools=`` definitions.
"All resident" sends every definition and no catalog. Tokens are counted with tiktoken
(o200k_base) when it is installed, else estimated as characters / 4 (the table says which).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from astro_jupyter.agent.prompt import build_system_prompt  # noqa: E402
from astro_jupyter.agent.tools import build_default_registry  # noqa: E402
from astro_jupyter.agent.tools.registry import ToolRegistry  # noqa: E402
from astro_jupyter.config import AstroConfig  # noqa: E402


def token_counter() -> tuple[Callable[[str], int], str]:
    try:
        import tiktoken

        enc = tiktoken.get_encoding("o200k_base")
        return (lambda text: len(enc.encode(text))), "tiktoken o200k_base"
    except Exception:  # noqa: BLE001 - not installed or no encoding files offline
        return (lambda text: (len(text) + 3) // 4), "chars/4 estimate"


def request_text(system: str, definitions: list[dict[str, Any]]) -> tuple[str, str]:
    return system, json.dumps(definitions, ensure_ascii=False, separators=(",", ":"))


def measure(registry: ToolRegistry, count: Callable[[str], int], loaded: tuple[str, ...] = ()) -> dict[str, Any]:
    deferred_sys, deferred_tools = request_text(
        build_system_prompt(registry),
        [t.definition() for t in registry.sorted_tools() if not t.defer_loading or t.name in loaded],
    )
    all_sys, all_tools = request_text(build_system_prompt(None), registry.definitions())
    return {
        "tools": len(registry),
        "deferred": sum(t.defer_loading for t in registry.sorted_tools()),
        "deferred_tokens": count(deferred_sys) + count(deferred_tools),
        "deferred_split": (count(deferred_sys), count(deferred_tools)),
        "all_tokens": count(all_sys) + count(all_tools),
        "all_split": (count(all_sys), count(all_tools)),
    }


def main() -> None:
    count, method = token_counter()
    with tempfile.TemporaryDirectory() as home:
        config = AstroConfig(home=home, project_root=home)
        standard = build_default_registry(config)
        coordinator = build_default_registry(config, coordinator=True)
    rows = [
        ("standard", measure(standard, count)),
        ("standard + search_history loaded", measure(standard, count, ("search_history",))),
        ("coordinator", measure(coordinator, count)),
    ]
    print(f"tool prompt size of the first request ({method}); system prompt + tools= JSON")
    head = f"{'registry':<34} {'tools':>5} {'deferred':>8} {'deferred loading':>17} {'all resident':>13} {'saved':>7}"
    print(head)
    for label, m in rows:
        saved = 1 - m["deferred_tokens"] / m["all_tokens"]
        print(
            f"{label:<34} {m['tools']:>5} {m['deferred']:>8} {m['deferred_tokens']:>17} {m['all_tokens']:>13} {saved:>6.1%}"
        )
    print()
    print("split (system prompt / tool definitions), standard registry:")
    m = rows[0][1]
    print(f"  deferred loading: {m['deferred_split'][0]} / {m['deferred_split'][1]}")
    print(f"  all resident:     {m['all_split'][0]} / {m['all_split'][1]}")


if __name__ == "__main__":
    main()
