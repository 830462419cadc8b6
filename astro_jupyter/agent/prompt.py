"""The system prompt: a short role text, the deferred-tool catalog, and the user's memories.

Resident tool definitions travel in the API's ``tools=`` (sorted by name); the prompt only
lists *deferred* tools (name + one-line summary) so the model knows what ``load_tool`` can
bring in without paying for every schema on every turn. The prompt is built once per run
and kept byte-identical across its turns, which keeps provider prompt caches warm.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .tools.registry import ToolRegistry

ROLE = """You are astro-jupyter, a research assistant for astronomers, working inside Jupyter.
You help find and read papers (NASA ADS, arXiv), resolve astronomical objects (CDS Sesame),
keep notes and analyse data with the user's files.
Use the tools when they help; several independent read-only calls may be made in one turn.
State coordinates with their frame (J2000/ICRS) and cite papers by bibcode or arXiv id.
When a tool returns an error, read it and correct the call instead of repeating it.
Answer concisely; say plainly when something is unknown or was not found."""

SUBAGENT_ROLE = """You are a focused sub-agent of astro-jupyter working on one delegated task.
Work with the tools you have, then answer with a short, self-contained summary of what you found
(the caller sees only that summary). You cannot ask the user questions."""

COORDINATOR_NOTE = """You are in coordinator mode: split the user's request into independent tasks,
delegate them with delegate_task, follow them with check_task, and combine the results with synthesize."""


def build_system_prompt(
    registry: "ToolRegistry | None" = None,
    *,
    memories: str = "",
    coordinator: bool = False,
    role: str = ROLE,
    extra: str = "",
) -> str:
    parts = [role.strip()]
    if coordinator:
        parts.append(COORDINATOR_NOTE)
    if registry is not None:
        deferred = [t for t in registry.sorted_tools() if t.defer_loading]
        if deferred:
            lines = [f"- {t.name}: {t.classifier_summary()}" for t in deferred]
            parts.append(
                "## More tools (deferred)\nThese tools exist but are not loaded; call load_tool with the name "
                "to use one:\n" + "\n".join(lines)
            )
    if memories.strip():
        parts.append("## What you remember about this user\n" + memories.strip())
    if extra.strip():
        parts.append(extra.strip())
    return "\n\n".join(parts)
