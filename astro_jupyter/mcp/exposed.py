"""Which of our tools an outside MCP client may call, and the hints it is told: the one place to change.

Read-only tools are offered by default; tools that add to the library only with ``--allow-writes``.
Nothing else ever is (files, notebooks, kernels, bash, the agent's own steps): a name missing
here is not exposed, whatever flag is given.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..agent.tools.base import AgentTool
    from ..agent.tools.registry import ToolRegistry


@dataclass(frozen=True)
class Exposure:
    writes: bool  # changes the library (only with --allow-writes)
    open_world: bool  # reaches an outside service (ADS, arXiv, Sesame, a publisher, a TAP archive)
    # a query that is not flagged read-only only because it keeps its result (a VOTable in the caller's
    # own tool-results) and asks before an unlisted service; over MCP that question is refused
    keeps_result: bool = False

    @property
    def read_only(self) -> bool:
        """What the ``readOnlyHint`` says: neither the library nor the caller's tool-results change."""
        return not (self.writes or self.keeps_result)


EXPOSED: dict[str, Exposure] = {
    "search_papers": Exposure(writes=False, open_world=True),
    "query_target": Exposure(writes=False, open_world=True),
    "get_paper_metadata": Exposure(writes=False, open_world=True),
    "rag_search": Exposure(writes=False, open_world=False),
    "get_paper_content": Exposure(writes=False, open_world=False),
    "download_paper": Exposure(writes=True, open_world=True),
    "parse_paper": Exposure(writes=True, open_world=False),
    "save_note": Exposure(writes=True, open_world=False),
    "query_catalog": Exposure(writes=False, open_world=True, keeps_result=True),
    "describe_catalog": Exposure(writes=False, open_world=True, keeps_result=True),
    "cone_search": Exposure(writes=False, open_world=True, keeps_result=True),
    "object_papers": Exposure(writes=False, open_world=True),
    "export_bibtex": Exposure(writes=False, open_world=True),
}


def exposed_tools(registry: "ToolRegistry", *, allow_writes: bool = False) -> dict[str, "AgentTool"]:
    """The registry's tools an MCP client may call, by name (sorted). A tool listed as not writing
    but not read-only in the registry is left out: the list must not outrun the tool's own flag."""
    out: dict[str, "AgentTool"] = {}
    for name in sorted(EXPOSED):
        tool, exposure = registry.get(name), EXPOSED[name]
        if tool is None or (exposure.writes and not allow_writes):
            continue
        if not exposure.writes and not tool.is_readonly and not exposure.keeps_result:
            continue
        out[name] = tool
    return out
