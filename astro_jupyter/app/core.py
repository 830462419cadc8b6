"""``AstroApp``: the one application layer the server, the kernel and the CLI call.

Front ends only parse their input, call this layer and render what it returns; the
decisions (who owns a session, where a run's events come from, what a prompt may be) live
here, split by resource (``sessions.py``, ``runs.py``, ``papers.py``, ``notes.py``,
``search.py``, ``models.py``), so they are tested once and behave the same everywhere.
Direct tool calls are in ``tools.py``, following a run and answering its questions in
``follow.py``. This package imports no front end (nor Jupyter or tornado).

Ownership: sessions and runs carry the ``owner`` that created them. An owner sees its own
rows and ownerless ones (made by the kernel magics or the CLI, which have no web identity);
anything else answers "not found", never "forbidden", so ids do not leak. Changing a row
(continuing a session, renaming, deleting, cancelling, answering) is for its owner alone: a
visible ownerless row answers "forbidden" to a named identity (``common.may_change``).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Callable

from ..config import AstroConfig
from ..errors import AstroError, ConfigError
from ..services.container import ServiceContainer, Tuning
from .admin import AdminMixin
from .bookmarklet import BookmarkletMixin
from .catalogs import CatalogsMixin
from .ingest import IngestMixin
from .models import ModelsMixin
from .notes import NotesMixin
from .papers import PapersMixin
from .runs import RunsMixin
from .search import SearchMixin
from .sessions import SessionsMixin
from .tool_sessions import ToolSessionsMixin
from .tools import ToolsMixin

if TYPE_CHECKING:
    from ..agent.runtime import AgentRuntime

log = logging.getLogger(__name__)


class AstroApp(SessionsMixin, RunsMixin, PapersMixin, NotesMixin, SearchMixin, ModelsMixin, BookmarkletMixin,
               ToolsMixin, ToolSessionsMixin, AdminMixin, CatalogsMixin, IngestMixin):
    """One per process (server, kernel, CLI command): owns the ``ServiceContainer``, the
    ``AgentRuntime`` and, on the server, the bookmarklet intake worker."""

    def __init__(
        self,
        config: AstroConfig,
        *,
        runtime_factory: Callable[[ServiceContainer], "AgentRuntime"] | None = None,
        serve: bool = False,
        source: str = "sidebar",
        services: ServiceContainer | None = None,
        tuning: Tuning | None = None,
    ) -> None:
        self.config = config
        self.services = services if services is not None else ServiceContainer(config, tuning=tuning)
        self.source = source  # what new sessions and runs record as their origin
        self._runtime_factory = runtime_factory
        self._runtime: "AgentRuntime | None" = None
        # the long-lived server: checks the agent config at start, closes runs a dead process
        # left 'running', runs the bookmarklet intake worker; a CLI command or a kernel does not
        self._serve = serve
        self._started = False
        self._start_lock = asyncio.Lock()
        self._closed = False
        self._services_closed = False
        self.intake: Any = None  # IntakeWorker, built in start() when ``serve``
        self._warm: asyncio.Task[None] | None = None
        # models/current: each owner's choice for its next runs (the endpoint's client is shared)
        self._owner_models: dict[str, str] = {}
        self._start_run_lock = asyncio.Lock()  # max_runs_per_user: check and start as one step

    # -- lifecycle -------------------------------------------------------------------------
    async def start(self) -> "AstroApp":
        """Open the store (idempotent; every handler awaits it, the first one does the work)."""
        if self._started:
            return self
        async with self._start_lock:
            if self._started:
                return self
            if self._closed:
                raise AstroError("the astro service has been stopped")
            await self.services.start()
            if self._serve:
                from .intake import IntakeWorker

                await self._start_runtime()  # runs a dead server left 'running' become 'error'
                self.intake = IntakeWorker(self.services)
                await self.intake.start()
            self._started = True
        return self

    async def _start_runtime(self) -> None:
        await self.runtime.start()
        if self.config.llm_configured:  # import openai off the loop: the first run need not stall
            self._warm = asyncio.create_task(asyncio.to_thread(import_run_modules))

    def check_agent_config(self) -> None:
        """Refuse what an agent runtime would refuse (a malformed permission rule or command hook) without
        building one: a process whose runs live elsewhere still says why at once (ConfigError)."""
        from ..agent.hooks import HookRegistry
        from ..agent.permissions import PermissionChecker

        try:
            PermissionChecker.from_config(self.config)
            HookRegistry.from_config(self.config, entry_points=False)
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"the astro configuration is invalid: {exc}") from exc

    @property
    def runtime(self) -> "AgentRuntime":
        """The agent runtime, built on first use so a server without an LLM still serves history."""
        if self._runtime is None:
            try:
                if self._runtime_factory is not None:
                    self._runtime = self._runtime_factory(self.services)
                else:
                    from ..agent.runtime import AgentRuntime

                    self._runtime = AgentRuntime(self.services)
            except (ValueError, TypeError) as exc:  # e.g. a malformed permission rule or hook
                raise ConfigError(f"the astro configuration is invalid: {exc}") from exc
        return self._runtime

    def question_timeout(self, event: Any) -> float:
        """How long the run waits on this question: a front end stops offering answers then."""
        if event.type == "permission_request":
            return float(self.runtime.tool_limits.permission_timeout_secs)
        from ..agent.tools.ask_user import ASK_USER_TIMEOUT_SECS

        return float(getattr(event, "timeout_secs", 0) or ASK_USER_TIMEOUT_SECS)

    async def close(self) -> None:
        """Cancel live runs, stop the intake worker, close the store."""
        self._closed = True
        if self.intake is not None:
            await self.intake.stop()
        if self._runtime is not None:
            try:
                # waits for every run task, also one that sent ``done`` and is still writing its last
                # events: those land before the store closes
                await self._runtime.close()
            except Exception:  # noqa: BLE001 - shutdown must reach the database
                log.exception("closing the agent runtime failed")
            self._runtime = None
        if not self._services_closed:  # also after a failed start: the store may be open
            self._services_closed = True
            await self.services.close()
        self._started = False

    async def __aenter__(self) -> "AstroApp":
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def import_run_modules() -> None:
    """Imports a first run would otherwise do on the event loop (the openai SDK, every tool family
    with its services: PDF parsing, HTML, ...: ~1 s that stalled every request of a fresh server).
    Called in a thread by a process that will run agents (the agent host, once it is ready)."""
    import importlib

    import openai  # noqa: F401  # pyflakes: warm import, unused on purpose

    from ..agent import tools

    for module in (*tools.FAMILIES, tools.COORDINATOR_FAMILY):
        importlib.import_module(module, tools.__name__)
