"""The jupyter_server extension ``astro_jupyter``: one ``AstroApp`` (the application layer, ``astro_jupyter.app``) and the astro routes.

Lifecycle (jupyter_server's ``ExtensionApp``): ``initialize_settings`` builds the service
from ``AstroConfig(parent=self)`` (so ``c.AstroConfig.max_steps = 8`` in
``jupyter_server_config.py`` applies); the store is opened asynchronously, by
``_start_jupyter_server_extension`` once the server's loop runs, or by the first request,
whichever comes first; ``stop_extension`` cancels live runs and closes the store.
"""

from __future__ import annotations

import sys
from typing import Any

from jupyter_server.extension.application import ExtensionApp

from ..config import AstroConfig
from . import auth, bookmarklet, catalogs, llm_models, notes, openapi, papers, runs, search, sessions, sse
from .base import SERVICE_KEY, TUNING_KEY
from ..app import AstroApp

ROUTE_MODULES = (runs, sse, sessions, search, papers, notes, llm_models, auth, openapi, bookmarklet, catalogs)


def all_handlers() -> list[tuple[str, Any]]:
    return [route for module in ROUTE_MODULES for route in module.handlers]


class AstroExtensionApp(ExtensionApp):
    name = "astro_jupyter"
    description = "A research agent for astronomers: REST + SSE API for the sidebar"
    load_other_extensions = True

    def initialize_settings(self) -> None:
        self.astro_config = AstroConfig(parent=self)
        if self.astro_config.llm_io == "auto":  # the server's interpreter stays free for requests
            self.astro_config.llm_io = "process"
        # internal tuning is no setting; an embedding application (the test suite) may hand one in
        tuning = self.serverapp.tornado_settings.get(TUNING_KEY)
        self.service = AstroApp(self.astro_config, serve=True, source="sidebar", tuning=tuning)
        from ..services.notebooks import NotebookService
        from .notebooks import ServerNotebookBackend

        # notebook tools of sidebar runs: the ContentsManager and the notebook's kernel session
        self.service.services.notebooks = NotebookService(self.astro_config, ServerNotebookBackend(self.serverapp, self.astro_config))
        self.settings[SERVICE_KEY] = self.service
        self.log.info("astro_jupyter: library at %s", self.astro_config.home)
        self._ship_cookie_defaults()
        self._set_switch_interval()

    def _set_switch_interval(self) -> None:
        """A shorter GIL switch interval: the loop gets the GIL back sooner from busy worker threads."""
        ms = float(self.astro_config.server_switch_interval_ms)
        self._previous_switch_interval = sys.getswitchinterval()
        if ms > 0:
            sys.setswitchinterval(ms / 1000)

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
        previous = getattr(self, "_previous_switch_interval", None)
        if previous is not None:  # a process that goes on (tests, an embedding app) gets its own setting back
            sys.setswitchinterval(previous)


main = launch_new_instance = AstroExtensionApp.launch_instance
