"""``astro-jupyter doctor``: what this installation can do, checked for real.

Reports the SQLite driver and version, whether FTS5 and sqlite-vec (vec0) work (as probed
by the store when it picked the driver), ASTRO_HOME, the project root the file tools work
in (with a warning when it is the home directory), the LLM endpoint and whether the
configured model is listed there (and what it did when asked: stream, call a tool with
``tool_choice: required``, its context window and where that came from, serve embeddings),
and the embedding backend. Exit 2 when no LLM endpoint
is configured or reachable (the agent cannot run), 1 when the store cannot open, else 0.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .registry import EXIT_ERROR, EXIT_OK, EXIT_UNAVAILABLE, command, json_flag, make_app


def print_model_progress(done: int, total: int, name: str) -> None:
    """A first download of the local embedding model, on stderr (stdout stays the report)."""
    end = "\n" if done >= total else ""
    print(f"\rDownloading the embedding model: {done / 1e6:5.1f} / {total / 1e6:.1f} MB ({name})", end=end,
          file=sys.stderr, flush=True)


async def diagnose() -> tuple[dict[str, Any], int]:
    """The app's report and the exit code it means: 1 when the store cannot open, 2 when the agent cannot run."""
    app = make_app()
    try:
        report = await app.diagnose(model_progress=print_model_progress)
    finally:
        await app.close()
    code = EXIT_ERROR if "error" in report["sqlite"] else EXIT_OK
    report["agent_host"] = await check_agent_host(app.config)  # where the sidebar's runs live
    if "error" in report["agent_host"]:
        code = max(code, EXIT_ERROR)
    if not report["llm"].get("reachable"):
        code = max(code, EXIT_UNAVAILABLE)
    return report, code


async def check_agent_host(config: Any) -> dict[str, Any]:
    """Start an agent host the way the server does, then stop it: its pid and start time, or why it
    could not start (with the end of its stderr)."""
    import time

    from ..host.manager import AgentHost, AgentHostError

    host = AgentHost(config, root_dir=config.project_root or "", source="doctor")
    started = time.perf_counter()
    try:
        await host.ensure()
        return {"pid": host.proc.pid if host.proc else None, "start_secs": round(time.perf_counter() - started, 2)}
    except AgentHostError as exc:
        return {"error": str(exc)}
    finally:
        await host.stop()


def _yes(flag: Any) -> str:
    return "yes" if flag else "NO"


def capability_lines(cap: dict[str, Any]) -> list[str]:
    """What the chosen model did when asked: stream, call a tool, its context, embeddings."""
    if not cap:
        return []
    lines = [f"Streams        {'yes' if cap.get('streams') else 'NO: ' + str(cap.get('stream_error', ''))}"]
    if cap.get("calls_tools"):
        lines.append("Calls tools    yes (asked with tool_choice: required)")
    else:
        lines.append(f"Calls tools    NO: {cap.get('tools_error', '')} — the agent needs tool calls "
                     "(llama.cpp: llama-server --jinja; Ollama: a model with tool support)")
    lines.append(f"Context        {cap.get('context_window', 0):,} tokens ({cap.get('context_source', '')}); "
                 f"answers bounded at {cap.get('max_tokens', 0):,} tokens")
    if cap.get("embeddings"):
        lines.append(f"Serves embeddings yes ({cap.get('embeddings_model')}, {cap.get('embedding_dim')} dimensions)")
    else:
        lines.append(f"Serves embeddings NO ({cap.get('embeddings_model') or 'no model'}: "
                     f"{cap.get('embeddings_error', '')}); rag_search ranks by full text and a local/lexical embedding")
    return lines


@command("doctor", "check the SQLite driver, FTS5, vec0, ASTRO_HOME, the LLM endpoint, embeddings and MCP servers", json_flag)
async def cmd_doctor(args: argparse.Namespace) -> int:
    report, code = await diagnose()
    if args.json:
        print(json.dumps(report, ensure_ascii=False, indent=1))
        return code
    print(f"ASTRO_HOME     {report['astro_home']}")
    print(f"Project root   {report['project_root']}")
    if report["project_root_warning"]:
        print(f"WARNING        {report['project_root_warning']}")
    sq = report["sqlite"]
    if "error" in sq:
        print(f"SQLite         ERROR: {sq['error']}")
    else:
        print(f"SQLite         {sq['driver']} (SQLite {sq['version']})")
        print(f"FTS5           {_yes(sq['fts5'])}")
        vec = f"yes (sqlite-vec {sq['vec_version']})" if sq["vec0"] else f"NO ({sq['vec_error'] or 'extension not loadable'})"
        print(f"vec0           {vec}")
    llm = report["llm"]
    print(f"LLM endpoint   {llm['base_url']}" if llm.get("configured", True) else
          "LLM endpoint   not configured: the agent (ask, %%astro, the sidebar) needs one; tools, library and demo do not")
    if llm.get("reachable"):
        listed = "listed" if llm.get("model_listed") else "NOT listed by the endpoint"
        print(f"LLM reachable  yes ({llm['latency_ms']} ms, {llm['models']} models)")
        print(f"LLM model      {llm['model']} ({listed})")
        if llm.get("model_names"):
            print(f"               models: {', '.join(llm['model_names'])}")
        for line in capability_lines(llm.get("capabilities") or {}):
            print(line)
    else:
        print(f"LLM reachable  NO: {llm.get('error', '')}")
    shared = report.get("shared_library")
    if shared is not None:
        if shared["reachable"]:
            print(f"Shared library {shared['url']} (PostgreSQL {shared['server']}, schema {shared['schema_version']})")
            print(f"               vectors: {shared['vectors']}")
        else:
            print(f"Shared library UNREACHABLE: {shared['error']}")
    emb = report["embeddings"]
    print(f"Embeddings     {emb['active']} ({emb['reason']})")
    if "chunks" in emb and emb["chunks"]:
        print(f"               {emb['embedded']} of the library's chunks have vectors in this space"
              + ("" if emb["embedded"] >= emb["chunks"] else " (the rest are embedded by the next rag_search, in the background)"))
    if emb.get("hint"):
        print(f"               better: {emb['hint']}")
    _print_mcp(report.get("mcp") or {})
    if "agent_host" in report:
        host = report["agent_host"]
        print(f"Agent host     ERROR: {host['error']}" if "error" in host else
              f"Agent host     yes (started in {host['start_secs']} s, then stopped)")
    return code


def _print_mcp(mcp: dict[str, Any]) -> None:
    """Outside MCP servers: where each is configured, its state, its tools (and those left out, why)."""
    from ..prompt_text import visible

    servers, problems = mcp.get("servers") or [], mcp.get("problems") or []
    if not servers and not problems:
        print("MCP servers    none configured (c.AstroConfig.mcp_servers or .jupyter/mcp_settings.json)")
        return
    for problem in problems:
        print(f"MCP config     ERROR: {visible(problem)}")
    for server in servers:
        print(f"MCP server     {server['name']} ({server['transport']}: {visible(server['target'])}): {visible(server['state'])}")
        if server["tools"]:
            print(f"               tools: {', '.join(server['tools'])}")
        for name, why in (server.get("skipped") or {}).items():
            print(f"               left out {visible(name)}: {visible(why)}")
