"""The jupyter_server extension ``astro_jupyter``: the astro routes over a ``HostedAstroApp``.

Runs live in the agent host, a process of its own (``host/``), as a notebook's code lives in
its kernel: the server keeps its one event loop for requests, authentication and the store's
reads; the host owns the runtime, the tools, the LLM streams and the store's writes.

Lifecycle (jupyter_server's ``ExtensionApp``): ``initialize_settings`` builds the service
from ``AstroConfig(parent=self)`` (so ``c.AstroConfig.max_steps = 8`` in
``jupyter_server_config.py`` applies); the store is opened asynchronously, by
``_start_jupyter_server_extension`` once the server's loop runs, or by the first request,
whichever comes first; ``stop_extension`` cancels live runs and closes the store.
"""

from __future__ import annotations

from typing import Any

from jupyter_server.extension.application import ExtensionApp

from ..config import AstroConfig
from . import auth, bookmarklet, catalogs, llm_models, notes, openapi, papers, runs, search, sessions, sse
from .base import SERVICE_KEY, TUNING_KEY

ROUTE_MODULES = (runs, sse, sessions, search, papers, notes, llm_models, auth, openapi, bookmarklet, catalogs)


def all_handlers() -> list[tuple[str, Any]]:
    return [route for module in ROUTE_MODULES for route in module.handlers]


class AstroExtensionApp(ExtensionApp):
    name = "astro_jupyter"
    description = "A research agent for astronomers: REST + SSE API for the sidebar"
    load_other_extensions = True

    def initialize_settings(self) -> None:
        self.astro_config = AstroConfig(parent=self)
        # internal tuning is no setting; an embedding application (the test suite) may hand one in
        tuning = self.serverapp.tornado_settings.get(TUNING_KEY)
        from ..services.notebooks import NotebookService
        from .host import HostedAstroApp
        from .notebooks import ServerNotebookBackend

        # notebook tools of sidebar runs: the host calls the ContentsManager and the notebook's kernel session
        # here, over its channel
        backend = ServerNotebookBackend(self.serverapp, self.astro_config)
        self.service = HostedAstroApp(self.astro_config, serve=True, source="sidebar", notebooks=backend,
                                      root_dir=str(backend.root), tuning=tuning)
        self.service.services.notebooks = NotebookService(self.astro_config, backend)
        self.settings[SERVICE_KEY] = self.service
        self.log.info("astro_jupyter: library at %s", self.astro_config.home)
        self._ship_cookie_defaults()

    def _ship_cookie_defaults(self) -> None:
        """HttpOnly + SameSite=Strict on the login cookie, unless the user configured otherwise.

        ``jupyter_server_config.d/*.json`` files only enable extensions (jupyter_server reads
        nothing else from them), so the recommended cookie options are applied here, as
        defaults under ``c.IdentityProvider.cookie_options``: keys set there win.
        """
        provider = getattr(self.serverapp, "identity_provider", None)
        if provider is None:
            return
        options = dict(getattr(provider, "cookie_options", {}) or {})
        options.setdefault("httponly", True)
        options.setdefault("samesite", "Strict")
        provider.cookie_options = options

    def initialize_handlers(self) -> None:
        self.handlers.extend(all_handlers())

    async def _start_jupyter_server_extension(self, serverapp: Any) -> None:
        try:
            await self.service.start()
        except Exception as exc:  # noqa: BLE001 - requests retry the start and report the error
            self.log.error("astro_jupyter: could not open the library at %s: %s", self.astro_config.home, exc)

    async def stop_extension(self) -> None:
        await self.service.close()


main = launch_new_instance = AstroExtensionApp.launch_instance
