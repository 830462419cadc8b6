"""The one object every surface holds: config, the open store, and lazily built service clients.

The server extension, the kernel magics and the CLI each build one ``ServiceContainer``;
tools reach services through ``ctx.services``. Clients are created on first use so that
``%load_ext`` and ``astro-jupyter tools`` stay fast (no openai import until needed).
Each service family adds its own ``cached_property`` below; ``close()`` closes whatever
was built and has ``aclose``/``close``. Helpers a higher layer keeps per container (the agent's
background queue, its live teammates) are ``attachment``s: one per type, closed first.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Protocol, TypeVar

from ..config import AstroConfig

if TYPE_CHECKING:
    import httpx2

    from ..agent.compaction import CompactionPolicy
    from ..agent.executor import ToolLimits
    from ..llm.client import LlmClient, LlmLimits
    from ..store.bg_tasks import BgTaskRepository
    from ..store.coordinator_tasks import CoordinatorTaskRepository
    from ..store.history import HistorySearch
    from ..store.tasks import TaskRepository
    from .ads import AdsClient
    from .arxiv import ArxivClient
    from .bibtex import BibtexService
    from .download import DownloadService
    from .embed import EmbeddingBackend
    from .library import LibraryService
    from .memory import MemoryService
    from .notebooks import NotebookService
    from .notes import NotesService
    from .parse import ParseService
    from .rag import RagService, RagTuning
    from .sesame import SesameClient
    from .skills import SkillLibrary
    from .tap import TapService
    from .team import TeamInbox
    from ..store.audit import AuditRepository
    from ..store.db import Database
    from ..store.messages import MessageRepository
    from ..store.runs import RunRepository
    from ..store.sessions import SessionRepository


class Closeable(Protocol):
    def close(self) -> Awaitable[None]: ...


C = TypeVar("C", bound=Closeable)

# A new memory whose word set overlaps a stored one at least this much (Jaccard) is a duplicate.
MEMORY_JACCARD_THRESHOLD = 0.7


@dataclass(frozen=True)
class Tuning:
    """Internal knobs the container hands to the services it builds: not settings, nobody configures
    them; tests pass shorter ones (``ServiceContainer(config, tuning=Tuning(...))``). None: the
    service's own default (``LlmLimits()``, ``HTTP_TIMEOUT_SECS``, arXiv's interval, ``RagTuning()`` ...)."""

    llm: "LlmLimits | None" = None
    http_timeout_secs: float | None = None
    arxiv_min_interval_secs: float | None = None
    rag: "RagTuning | None" = None
    notebook_bridge_secs: float | None = None  # a sidebar run's wait for the sidebar to apply an edit/run
    delegated_task_secs: float | None = None  # one coordinator task (agent/coordinator.py)
    tools: "ToolLimits | None" = None  # output sizes, loop detection, permission wait (agent/executor.py)
    compaction: "CompactionPolicy | None" = None  # agent/compaction.py
    event_flush_secs: float | None = None  # how long a run's events gather before a store write (agent/runtime.py)
    event_id_reserve_block: int | None = None  # event ids a run reserves per store write (agent/runtime.py)
    ask_user_secs: float | None = None  # how long ask_user waits (agent/tools/ask_user.py)
    db_busy_timeout_ms: int | None = None  # a write's wait for another process's lock (store/db.py)

    def to_wire(self) -> dict[str, Any]:
        """JSON-safe, for the agent host process (``host/``): the server's tuning holds there too."""
        return {f.name: dataclasses.asdict(v) if dataclasses.is_dataclass(v) else v
                for f in dataclasses.fields(self) if (v := getattr(self, f.name)) is not None}

    @classmethod
    def from_wire(cls, data: Any) -> "Tuning":
        """The inverse of ``to_wire``; unknown names are refused (a typo must not pass silently)."""
        from ..agent.compaction import CompactionPolicy
        from ..agent.executor import ToolLimits
        from ..llm.client import LlmLimits
        from .rag import RagTuning

        nested: dict[str, Any] = {"llm": LlmLimits, "rag": RagTuning, "tools": ToolLimits, "compaction": CompactionPolicy}
        values = dict(data or {})
        for name, kind in nested.items():
            if isinstance(values.get(name), dict):
                values[name] = kind(**values[name])
        return cls(**values)


class ServiceContainer:
    def __init__(self, config: AstroConfig | None = None, *, db: "Database | None" = None,
                 tuning: Tuning | None = None) -> None:
        self.config = config or AstroConfig()
        self.tuning = tuning or Tuning()
        self._db = db
        self._owns_db = db is None
        self._attachments: dict[type, Closeable] = {}

    def attachment(self, kind: type[C], factory: Callable[["ServiceContainer"], C]) -> C:
        """The container's one ``kind`` (made by ``factory`` on first use), closed before the database.

        For per-process helpers a higher layer owns but the container's lifetime bounds (the
        agent's background queue, its running teammates): the container needs no import of them.
        """
        found = self._attachments.get(kind)
        if found is None:
            found = self._attachments[kind] = factory(self)
        assert isinstance(found, kind)
        return found

    async def start(self) -> "ServiceContainer":
        """Create the library layout and open (and migrate) the database."""
        self.config.ensure_dirs()
        if self._db is None:
            from ..store.db import Database

            busy = self.tuning.db_busy_timeout_ms
            self._db = await (Database.open(self.config.db_path, busy_timeout_ms=busy) if busy
                              else Database.open(self.config.db_path))
        return self

    @property
    def db(self) -> "Database":
        if self._db is None:
            raise RuntimeError("ServiceContainer.start() has not been awaited")
        return self._db

    async def close(self) -> None:
        for kind, attached in list(self._attachments.items()):  # they use the services below: first
            try:
                await attached.close()
            except Exception:  # noqa: BLE001
                logging.getLogger(__name__).warning("closing %s failed", kind.__name__, exc_info=True)
        self._attachments.clear()
        for name, value in list(self.__dict__.items()):
            if name.startswith("_") or name in ("config", "tuning"):
                continue
            closer = getattr(value, "aclose", None) or getattr(value, "close", None)
            if closer is None:
                continue
            try:
                result = closer()
                if inspect.isawaitable(result):
                    await result
            except Exception:  # noqa: BLE001 - closing must reach every client, but say which one failed
                logging.getLogger(__name__).warning("closing service %s failed", name, exc_info=True)
        if self._db is not None and self._owns_db:
            await self._db.close()
            self._db = None

    # -- repositories ------------------------------------------------------------------
    @cached_property
    def sessions(self) -> "SessionRepository":
        from ..store.sessions import SessionRepository

        return SessionRepository(self.db)

    @cached_property
    def messages(self) -> "MessageRepository":
        from ..store.messages import MessageRepository

        return MessageRepository(self.db)

    @cached_property
    def runs(self) -> "RunRepository":
        from ..store.runs import RunRepository

        return RunRepository(self.db)

    @cached_property
    def audit(self) -> "AuditRepository":
        from ..store.audit import AuditRepository

        return AuditRepository(self.db)

    # -- orchestration (todos, memories, background/coordinator tasks, history, skills, team) --
    @cached_property
    def tasks(self) -> "TaskRepository":
        from ..store.tasks import TaskRepository

        return TaskRepository(self.db)

    @cached_property
    def memories(self) -> "MemoryService":
        """Memory write gate + Jaccard de-dup over ``agent_memories`` (``services/memory.py``)."""
        from ..store.memories import MemoryRepository
        from .memory import MemoryService

        return MemoryService(MemoryRepository(self.db), threshold=MEMORY_JACCARD_THRESHOLD)

    @cached_property
    def bg_tasks(self) -> "BgTaskRepository":
        from ..store.bg_tasks import BgTaskRepository

        return BgTaskRepository(self.db)

    @cached_property
    def coordinator_tasks(self) -> "CoordinatorTaskRepository":
        from ..store.coordinator_tasks import CoordinatorTaskRepository

        return CoordinatorTaskRepository(self.db)

    @cached_property
    def history(self) -> "HistorySearch":
        """FTS5 search over sessions and messages (``store/history.py``)."""
        from ..store.history import HistorySearch

        return HistorySearch(self.db)

    @cached_property
    def skills(self) -> "SkillLibrary":
        """The skills an ownerless run sees (``skills_for``)."""
        return self.skills_for("")

    def skills_for(self, owner: str) -> "SkillLibrary":
        """The installed skills plus ``owner``'s own (``services/skills.py``)."""
        from .skills import SkillLibrary

        return SkillLibrary(self.config.skills_dir, owner)

    @cached_property
    def team(self) -> "TeamInbox":
        """The ownerless team's file inboxes (``team_for``)."""
        return self.team_for("")

    def team_for(self, owner: str) -> "TeamInbox":
        """``owner``'s team: file inboxes under ``ASTRO_HOME/team/`` (``services/team.py``), per owner."""
        from .owners import owner_dir
        from .team import TeamInbox

        return TeamInbox(owner_dir(self.config.team_dir, owner))

    # -- external services (each family adds its own property here) ---------------------
    @cached_property
    def http(self) -> "httpx2.AsyncClient":
        """The shared ``httpx2.AsyncClient`` for ADS, arXiv, Sesame and downloads."""
        from .http import make_http_client

        if self.tuning.http_timeout_secs is None:
            return make_http_client()
        return make_http_client(self.tuning.http_timeout_secs)

    @cached_property
    def ads(self) -> "AdsClient":
        """NASA ADS search client (``services/ads.py``)."""
        from .ads import AdsClient

        return AdsClient(self.config, self.http)

    @cached_property
    def bibtex(self) -> "BibtexService":
        """BibTeX entries through the ADS export service, local ones as fallback (``services/bibtex.py``)."""
        from .bibtex import BibtexService

        return BibtexService(self.ads, self.library)

    @cached_property
    def arxiv(self) -> "ArxivClient":
        """arXiv API client with the process-wide rate limiter (``services/arxiv.py``)."""
        from .arxiv import ArxivClient

        return ArxivClient(self.config, self.http, min_interval=self.tuning.arxiv_min_interval_secs)

    @cached_property
    def library(self) -> "LibraryService":
        """The paper library (``services/library.py``): ids, metadata, download/parse state."""
        from .library import LibraryService

        return LibraryService(self.config, self.db, ads=self.ads, arxiv=self.arxiv, papers=self.paper_store)

    @cached_property
    def shared_library(self) -> Any:
        """The shared PostgreSQL library's connection (``store/pg.py``), or None without ``shared_library_url``."""
        if not self.config.shared_library_url:
            return None
        from ..store.pg import PgDatabase

        return PgDatabase(self.config.shared_library_url)

    @cached_property
    def paper_store(self) -> Any:
        """Papers (``store/repository.py``'s ``PaperStore``): the user's SQLite, or the shared PostgreSQL library."""
        if self.shared_library is not None:
            from ..store.pg_library import PgPaperRepository

            return PgPaperRepository(self.shared_library)
        from ..store.papers import PaperRepository

        return PaperRepository(self.db)

    @cached_property
    def downloads(self) -> "DownloadService":
        """PDF downloads with fallback channels and the private-address guard (``services/download.py``)."""
        from .download import DownloadService

        return DownloadService(self.config, self.http, self.library, ads=self.ads)

    @cached_property
    def llm(self) -> "LlmClient":
        """The LLM client (``llm/client.py``); openai is imported on first use only."""
        from ..llm.client import LlmClient

        return LlmClient(self.config, limits=self.tuning.llm)

    @cached_property
    def chunks(self) -> Any:
        """Paper chunks, full text and the per-backend vector tables (``ChunkStore``: ``store/chunks.py``,
        or ``store/pg_library.py`` for the shared library)."""
        if self.shared_library is not None:
            from ..store.pg_library import PgChunkRepository

            return PgChunkRepository(self.shared_library)
        from ..store.chunks import ChunkRepository

        return ChunkRepository(self.db)

    @cached_property
    def embedder(self) -> "EmbeddingBackend":
        """The active embedding backend (``services/embed.py``): endpoint, local model or lexical."""
        from .embed import make_embedder

        return make_embedder(self.config, self.llm)

    @cached_property
    def rag(self) -> "RagService":
        """Hybrid retrieval + cited answers (``services/rag.py``) with the in-memory kNN index."""
        from .rag import RagService
        from .vector_index import VectorIndex

        return RagService(self.config, self.chunks, VectorIndex(self.chunks), self.embedder, self.llm,
                          tuning=self.tuning.rag)

    @cached_property
    def parser(self) -> "ParseService":
        """PDF/HTML → Markdown, chunks and embeddings for library papers (``services/parse/``)."""
        from .parse import ParseService

        return ParseService(self.config, self.library, self.chunks, self.rag)

    @cached_property
    def notes(self) -> "NotesService":
        """Notes on papers (``services/notes.py``)."""
        from ..store.notes import NoteRepository
        from .notes import NotesService

        return NotesService(NoteRepository(self.db), self.library)

    @cached_property
    def sesame(self) -> "SesameClient":
        """CDS Sesame name resolver with the ``sesame_cache`` table (``services/sesame.py``)."""
        from .sesame import SesameClient

        return SesameClient(self.http, self.config, db=self.db)

    @cached_property
    def tap(self) -> "TapService":
        """Catalogs over TAP through pyvo, results kept with provenance (``services/tap.py``)."""
        from ..store.catalogs import CatalogRepository
        from .tap import TapService

        return TapService(self.config, CatalogRepository(self.db))

    @cached_property
    def notebooks(self) -> "NotebookService":
        """Notebook cells: read, edit, run (``services/notebooks/``). Files + own kernels by default;
        the server extension sets a ContentsManager-backed one."""
        from .notebooks import NotebookService

        return NotebookService(self.config)

    async def release_run(self, run_id: str) -> None:
        """Free what a finished run held (the kernels notebook_run started for it)."""
        notebooks = self.__dict__.get("notebooks")
        if notebooks is not None:
            try:
                await notebooks.release_run(run_id)
            except Exception:  # noqa: BLE001 - the run's end must not fail on a kernel that will not stop
                logging.getLogger(__name__).warning("releasing run %s failed", run_id, exc_info=True)
