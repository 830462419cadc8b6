"""Shared setup for the paper-tool tests: a library with generated (and real) PDFs, run through the executor."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from astro_jupyter.agent.tools.astro import note, paper, rag
from astro_jupyter.services.container import ServiceContainer
from tests.agent.executor_support import Recorder, call, make_ctx, make_executor

PDFS = Path(__file__).resolve().parents[2] / "data" / "pdfs"


def paper_tools(config: Any) -> list:
    return paper.tools(config) + rag.tools(config) + note.tools(config)


async def run_tool(services: ServiceContainer, name: str, args: dict[str, Any], recorder: Recorder | None = None):
    """One call through the real executor (validation, permissions in auto mode, progress, results)."""
    recorder = recorder or Recorder()
    executor = make_executor(services, paper_tools(services.config), mode="auto")
    [result] = await executor.execute([call(name, json.dumps(args))], make_ctx(services, recorder))
    return result.output


async def add_pdf(services: ServiceContainer, path: Path) -> str:
    return (await services.library.add_pdf(path, fetch=False)).id


async def add_and_parse(services: ServiceContainer, path: Path) -> str:
    paper_id = await add_pdf(services, path)
    out = await run_tool(services, "parse_paper", {"paper_id": paper_id})
    assert not out.is_error, out.content
    return paper_id
