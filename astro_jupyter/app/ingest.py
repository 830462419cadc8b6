"""Bulk ingest (``astro-jupyter library ingest``): many PDFs parsed and embedded in parallel, stored here.

Workers (a local process pool, or a Dask cluster given its scheduler's address) run
``services.ingest.prepare_pdf``: parse + embed, no writes. This process stores each result through the
library service as it arrives, one paper at a time (``ParseService.store_parsed``: the paper is
'parsed' only after its Markdown, chunks and vectors are written), so an interrupted ingest leaves no
paper half-written, and the next run skips every paper already in (same file content, 'parsed').
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import multiprocessing
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable, Sequence

from ..errors import AstroError, InvalidRequest, NotAvailable
from .common import AppBase

DASK_CONNECT_SECS = 10  # a scheduler that does not answer by then is reported, not waited for
IN_FLIGHT_PER_WORKER = 2  # tasks per worker thread: one running, one waiting (workers never wait for work)
BATCH_MAX = 8  # papers per task on worker processes or a cluster: per-task costs spread, results stay small

IngestProgress = Callable[["IngestStep"], Awaitable[None]]


@dataclass(frozen=True)
class IngestStep:
    """One paper's outcome, reported as it happens: ``kind`` is ingested | skipped | failed."""

    kind: str
    path: str
    done: int
    total: int
    paper_id: str = ""
    chunks: int = 0
    detail: str = ""


@dataclass
class IngestReport:
    total: int = 0
    ingested: list[IngestStep] = field(default_factory=list)
    skipped: list[IngestStep] = field(default_factory=list)
    failed: list[IngestStep] = field(default_factory=list)
    workers: str = ""
    seconds: float = 0.0
    interrupted: bool = False


class IngestMixin(AppBase):
    async def ingest(
        self,
        sources: Sequence[str],
        *,
        workers: int = 1,
        scheduler: str = "",
        fetch: bool = False,
        progress: IngestProgress | None = None,
    ) -> IngestReport:
        """Ingest the PDFs ``sources`` name (folders, reading lists, PDFs: ``services.ingest.pdf_sources``)
        with ``workers`` local processes, or on the Dask cluster at ``scheduler``. ``fetch``: ask
        arXiv/ADS for the metadata of PDFs that print an arXiv id or DOI, as ``library add`` does."""
        from ..services.ingest import pdf_sources

        if not isinstance(workers, int) or workers < 1:
            raise InvalidRequest("--workers must be at least 1", reason="invalid_workers")
        started = time.perf_counter()
        paths = await asyncio.to_thread(pdf_sources, list(sources))
        report = IngestReport(total=len(paths))

        async def tell(step: IngestStep) -> None:
            getattr(report, step.kind).append(step)
            if progress is not None:
                await progress(step)

        todo: list[Path] = []
        for path in paths:
            if await self._already_ingested(path):
                await tell(IngestStep("skipped", str(path), len(report.ingested) + len(report.skipped)
                                      + len(report.failed) + 1, len(paths), detail="already in the library"))
            else:
                todo.append(path)
        if not todo:
            report.seconds = time.perf_counter() - started
            return report
        spec = await self._embed_spec()
        executor, slots, batch_max, report.workers, close = await _executor(workers, scheduler)
        try:
            await self._run_ingest(todo, spec, executor, slots, batch_max, fetch, report, tell)
        except asyncio.CancelledError:
            report.interrupted = True
            raise
        finally:
            await close()
            report.seconds = time.perf_counter() - started
        return report

    async def _already_ingested(self, path: Path) -> bool:
        """True when a PDF with this content is in the library and parsed (a rerun after an interrupt)."""
        from ..services.library import _sha256

        if not path.is_file():
            return False
        digest = await asyncio.to_thread(_sha256, path)
        record = await self.services.library.papers.find_by_sha256(digest)
        return record is not None and record.state == "parsed" and bool(record.pdf_path) and Path(record.pdf_path).is_file()

    async def _embed_spec(self) -> Any:
        """The library's embedding backend, decided now (``auto`` asks the endpoint once), for the workers."""
        from ..services.embed import WINDOW_TOKENS, LocalEmbedder
        from ..services.ingest import EmbedSpec

        embedder = self.services.rag.embedder
        resolve = getattr(embedder, "resolve", None)
        backend = await resolve() if resolve is not None else embedder
        directory = getattr(backend, "directory", None) if backend.name == LocalEmbedder.name else None
        cfg = self.config
        return EmbedSpec(backend=backend.name, threads=1, window=WINDOW_TOKENS,
                         model_dir=str(directory or ""), base_url=cfg.openai_base_url, api_key=cfg.openai_api_key)

    async def _run_ingest(self, todo: list[Path], spec: Any, executor: concurrent.futures.Executor, slots: int,
                          batch_max: int, fetch: bool, report: IngestReport, tell: IngestProgress) -> None:
        from ..services.ingest import prepare_pdfs

        queue = list(reversed(todo))
        running: dict[asyncio.Future[Any], list[Path]] = {}

        def submit() -> None:
            while queue and len(running) < slots:
                # a few papers a task while many are left, one at a time at the end (no worker idles
                # while another finishes a long batch)
                size = max(1, min(batch_max, len(queue) // (slots * 2)))
                batch = [queue.pop() for _ in range(size)]
                future = executor.submit(prepare_pdfs, [str(path) for path in batch], spec)
                running[asyncio.wrap_future(future)] = batch

        submit()
        try:
            while running:
                finished, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                results: list[tuple[Path, Any, str]] = []
                for future in finished:
                    batch = running.pop(future)
                    try:
                        results.extend((path, prepared, "") for path, prepared in zip(batch, future.result()))
                    except Exception as exc:  # noqa: BLE001 - a worker that died, a lost connection
                        results.extend((path, None, f"the worker failed: {type(exc).__name__}: {exc}") for path in batch)
                submit()  # before storing: the workers parse the next papers while this process writes
                for path, prepared, reason in results:
                    # stored whole even when the ingest is interrupted meanwhile: never half a paper
                    store = asyncio.ensure_future(self._store_prepared(prepared, spec, fetch) if prepared else
                                                  _failed(reason))
                    interrupted = False
                    try:
                        step = await asyncio.shield(store)
                    except asyncio.CancelledError:  # the paper is finished first, and counted as stored
                        step, interrupted = await store, True
                    n = len(report.ingested) + len(report.skipped) + len(report.failed) + 1
                    await tell(IngestStep(step[0], str(path), n, report.total, step[1], step[2], step[3]))
                    if interrupted:
                        raise asyncio.CancelledError
        finally:
            for future in running:
                future.cancel()

    async def _store_prepared(self, prepared: Any, spec: Any, fetch: bool) -> tuple[str, str, int, str]:
        """(kind, paper id, chunks, detail) after storing one worker's result through the library."""
        if prepared.error:
            return ("failed", "", 0, prepared.error)
        if prepared.backend != spec.backend:  # a worker with another model would mix vector spaces
            return ("failed", "", 0, f"the worker embedded with {prepared.backend}, the library uses {spec.backend}")
        try:
            record = await self.services.library.add_pdf(Path(prepared.path), fetch=fetch, info=prepared.info,
                                                         digest=prepared.sha256)
            result = await self.services.parser.store_parsed(record, prepared.paper, prepared.vectors)
        except AstroError as exc:
            return ("failed", "", 0, str(exc))
        detail = f"{result.pages} pages, {result.chunks} passages"
        if result.embed_error:
            detail += f" (vectors not stored: {result.embed_error}; full-text search works)"
        return ("ingested", record.id, result.chunks, detail)


async def _failed(reason: str) -> tuple[str, str, int, str]:
    return ("failed", "", 0, reason)


async def _executor(workers: int, scheduler: str) -> tuple[concurrent.futures.Executor, int, int, str,
                                                           Callable[[], Awaitable[None]]]:
    """(executor, tasks in flight, most papers a task, a description, close) for local processes, this
    process, or a Dask cluster."""
    if scheduler:
        try:
            from distributed import Client
        except ImportError as exc:
            raise NotAvailable("--dask-scheduler needs dask.distributed: pip install 'dask[distributed]'") from exc
        try:
            client = await asyncio.to_thread(Client, scheduler, timeout=DASK_CONNECT_SECS)
        except (OSError, TimeoutError) as exc:
            raise InvalidRequest(f"cannot reach the Dask scheduler at {scheduler}: {exc}",
                                 reason="dask_unreachable") from exc
        threads = sum((await asyncio.to_thread(client.nthreads)).values()) or 1
        executor = client.get_executor(pure=False)  # no tokenising of every task's arguments: a file may change

        async def close_client() -> None:
            executor.shutdown(wait=False)
            await asyncio.to_thread(client.close)

        return executor, threads * IN_FLIGHT_PER_WORKER, BATCH_MAX, f"Dask at {scheduler} ({threads} worker threads)", close_client
    if workers == 1:  # in this process, off the event loop: the same function, no pickling
        pool: concurrent.futures.Executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="ingest")
        described = "1 process"
    else:  # spawned, not forked: the parent holds database threads a fork would copy mid-lock
        pool = concurrent.futures.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))
        described = f"{workers} processes"

    async def close_pool() -> None:  # workers still parsing are left to end (their results are dropped)
        pool.shutdown(wait=False, cancel_futures=True)

    # one paper a task on this process's thread: nothing to spread, and progress paper by paper
    return pool, workers * IN_FLIGHT_PER_WORKER, 1 if workers == 1 else BATCH_MAX, described, close_pool
