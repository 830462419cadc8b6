"""``astro-jupyter doctor``: what this installation can do, checked for real.

Reports the SQLite driver and version, whether FTS5 and sqlite-vec (vec0) work (as probed
by the store when it picked the driver), ASTRO_HOME, the project root the file tools work
in (with a warning when it is the home directory), the LLM endpoint and whether the
configured model is listed there, and the embedding backend. Exit 2 when no LLM endpoint
is configured or reachable (the agent cannot run), 1 when the store cannot open, else 0.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from .cli import EXIT_ERROR, EXIT_OK, EXIT_UNAVAILABLE, _json_flag, command, make_config


async def diagnose() -> tuple[dict[str, Any], int]:
    from .errors import AstroError, LlmUnavailableError
    from .llm.client import NOT_CONFIGURED

    from .agent.tools.filesystem.protected import root_warning

    config = make_config()
    report: dict[str, Any] = {"astro_home": str(config.home_path), "db_path": str(config.db_path),
                              "project_root": config.project_root, "project_root_warning": root_warning(config)}
    code = EXIT_OK
    services = None
    try:
        from .services.container import ServiceContainer

        services = ServiceContainer(config)
        await services.start()
        info = services.db.info
        report["sqlite"] = {
            "driver": info.module,
            "version": info.sqlite_version,
            "fts5": info.fts5,
            "vec0": info.vec_available,
            "vec_version": info.vec_version,
            "vec_error": info.vec_error,
        }
    except AstroError as exc:
        report["sqlite"] = {"error": str(exc)}
        code = EXIT_ERROR
    llm: dict[str, Any] = {"base_url": config.openai_base_url or "(OpenAI default)", "model": config.llm_model}
    if not config.llm_configured:
        llm.update(reachable=False, error=NOT_CONFIGURED)
        code = max(code, EXIT_UNAVAILABLE)
    else:
        from .llm.client import LlmClient

        client = services.llm if services is not None else LlmClient(config)
        start = time.perf_counter()
        try:
            models = await client.list_models()
            llm.update(reachable=True, latency_ms=round((time.perf_counter() - start) * 1000, 1), models=len(models))
            llm["model_listed"] = config.llm_model in models
            if config.llm_fallback_model:
                llm["fallback_model_listed"] = config.llm_fallback_model in models
        except LlmUnavailableError as exc:
            llm.update(reachable=False, error=str(exc))
            code = max(code, EXIT_UNAVAILABLE)
        except AstroError as exc:
            llm.update(reachable=False, error=str(exc))
            code = max(code, EXIT_UNAVAILABLE)
    report["llm"] = llm
    try:
        from .services.embed import active_embedding_backend

        report["embeddings"] = active_embedding_backend(config)
    except Exception as exc:  # noqa: BLE001 - doctor reports, never crashes
        report["embeddings"] = f"unavailable ({type(exc).__name__}: {exc})"
    if services is not None:
        await services.close()
    return report, code


def _yes(flag: Any) -> str:
    return "yes" if flag else "NO"


@command("doctor", "check the SQLite driver, FTS5, vec0, ASTRO_HOME, the LLM endpoint and embeddings", _json_flag)
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
    print(f"LLM endpoint   {llm['base_url']}")
    if llm.get("reachable"):
        listed = "listed" if llm.get("model_listed") else "NOT listed by the endpoint"
        print(f"LLM reachable  yes ({llm['latency_ms']} ms, {llm['models']} models)")
        print(f"LLM model      {llm['model']} ({listed})")
    else:
        print(f"LLM reachable  NO: {llm.get('error', '')}")
    print(f"Embeddings     {report['embeddings']}")
    return code
