"""Installation checks (``doctor``) and the offline demo library (``demo``)."""

from __future__ import annotations

import time
from typing import Any

from ..errors import AstroError
from .common import AppBase

TO_CONFIGURE = (
    "set OPENAI_API_KEY for OpenAI, or OPENAI_BASE_URL (and OPENAI_API_KEY if it needs one) for any "
    "OpenAI-compatible endpoint; or c.AstroConfig.openai_base_url / openai_api_key in jupyter_server_config.py "
    "or ipython_config.py"
)


MODELS_SHOWN = 50  # doctor lists at most this many of the endpoint's models


class AdminMixin(AppBase):
    async def seed_demo(self) -> Any:
        """Sample papers, a Sesame cache and a recorded session (``demo.seed_demo``)."""
        from ..demo import seed_demo

        await self.start()  # type: ignore[attr-defined]
        return await seed_demo(self.services)

    async def demo_session(self, owner: str) -> dict[str, Any]:
        """The recorded demo session for ``owner`` (imported on first ask, the same one after), so a
        newcomer without an LLM endpoint can watch the agent work: it replays like any reopened session."""
        from ..demo import DEMO_SESSION_TITLE, import_demo_session

        for record in await self.services.sessions.list(owner=owner, limit=1000):
            if (record.owner == owner and record.source == "demo" and record.title == DEMO_SESSION_TITLE
                    and await self.services.runs.list_for_session(record.id)):
                break
        else:
            record = await self.services.sessions.find(await import_demo_session(self.services, owner))
        return self._session_dict(record)  # type: ignore[attr-defined]

    async def diagnose(self, model_progress: Any = None) -> dict[str, Any]:
        """What this installation can do, checked for real: SQLite driver, FTS5, vec0, paths, the LLM
        endpoint and the embedding backend. Never raises: a failing part is reported in its section
        (``sqlite.error``, ``llm.reachable`` false). ``model_progress``: download the local embedding
        model now when it is due on first use (``model_download.Progress``), so the report is what
        the first search will get."""
        from ..agent.tools.filesystem.protected import root_warning

        config = self.config
        report: dict[str, Any] = {"astro_home": str(config.home_path), "db_path": str(config.db_path),
                                  "project_root": config.project_root, "project_root_warning": root_warning(config)}
        opened = False
        try:
            await self.services.start()
            opened = True
            info = self.services.db.info
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
        llm: dict[str, Any] = {"configured": config.llm_configured, "model": config.llm_model,
                               "base_url": config.openai_base_url or ("(OpenAI default)" if config.llm_configured else "")}
        if not config.llm_configured:
            llm.update(reachable=False, error=TO_CONFIGURE)
        else:
            from ..llm.client import LlmClient

            client = self.services.llm if opened else LlmClient(config)
            start = time.perf_counter()
            try:
                models = await client.list_models()
                llm.update(reachable=True, latency_ms=round((time.perf_counter() - start) * 1000, 1), models=len(models))
                llm["model_listed"] = config.llm_model in models
                llm["model_names"] = models[:MODELS_SHOWN]
                if config.llm_fallback_model:
                    llm["fallback_model_listed"] = config.llm_fallback_model in models
            except AstroError as exc:  # LlmUnavailableError included
                llm.update(reachable=False, error=str(exc))
            else:
                from ..llm.probe import capabilities
                from ..services.embed import _is_openai_api, endpoint_embedding_model

                named = (config.embed_model or "").strip()
                embed_model = named if named not in ("", "auto", "local", "lexical") else (
                    endpoint_embedding_model(models, openai_api=_is_openai_api(config)))
                llm["capabilities"] = await capabilities(client, config.llm_model, embed_model)
        report["llm"] = llm
        if self.services.shared_library is not None:
            report["shared_library"] = await self._shared_library()
        report["embeddings"] = await self._embeddings(opened, model_progress)
        report["mcp"] = await self._mcp_servers()
        return report

    async def _mcp_servers(self) -> dict[str, Any]:
        """Each configured outside MCP server, started to list its tools (doctor checks for real)."""
        from ..mcp.client import McpManager

        try:
            manager = McpManager.of(self.services)
            await manager.listings()
            return manager.report()
        except Exception as exc:  # noqa: BLE001 - doctor reports, never crashes
            return {"problems": [f"{type(exc).__name__}: {exc}"], "servers": []}

    async def _shared_library(self) -> dict[str, Any]:
        """The shared PostgreSQL library: reachable, its versions, and how vectors are stored and searched
        (pgvector, or float32 bytes when ``CREATE EXTENSION vector`` failed)."""
        shared = self.services.shared_library
        try:
            return {"reachable": True, **await shared.describe()}
        except AstroError as exc:
            from ..store.pg import redact

            return {"reachable": False, "url": redact(shared.url), "error": str(exc)}

    async def _embeddings(self, opened: bool, model_progress: Any = None) -> dict[str, Any]:
        """The backend ``auto`` picks (asking the endpoint), why, how to get a better one, and how much
        of the library has vectors in its space."""
        from ..services.embed import choose_backend, static_choice

        config, services = self.config, self.services
        try:
            llm = services.llm if opened else None
            choice = await choose_backend(config, llm) if llm is not None else static_choice(config)
            if model_progress is not None:
                from ..services.embed import prepare_local

                choice = await prepare_local(choice, config, model_progress)
        except Exception as exc:  # noqa: BLE001 - doctor reports, never crashes
            return {"active": "unavailable", "reason": f"{type(exc).__name__}: {exc}", "hint": ""}
        out: dict[str, Any] = {"active": choice.name, "reason": choice.reason, "hint": choice.hint}
        if opened:
            try:
                spaces = {s.backend: s for s in await services.chunks.spaces()}
                space = spaces.get(choice.name)
                embedded = await services.chunks.vector_count(space) if space is not None else 0
                missing = len(await services.chunks.missing_vectors(space)) if space is not None else None
                if missing is None:  # no space yet for this backend: every searchable chunk is missing
                    missing = await services.chunks.searchable_count()
                out["chunks"] = embedded + int(missing)
                out["embedded"] = embedded
            except Exception as exc:  # noqa: BLE001
                out["coverage_error"] = str(exc)
        return out
