"""Bulk ingest: the work one PDF needs before the library can store it, done in a worker process.

``prepare_pdf(path, spec)`` reads the PDF's own metadata, parses it and embeds its passages with the
backend the library uses (``EmbedSpec``), and returns plain data (``Prepared``). It touches no
database and no library file, so it runs anywhere: a local process pool or a Dask worker on another
node. The caller (``app/ingest.py``) stores each result through the library service, one paper at a
time, in its own process.

``prepare_pdfs`` does a few in one task: on a Dask cluster each task costs the client and the scheduler
a few milliseconds (submit, bookkeeping, fetching the result), a sizeable share of a 40 ms paper.

The worker computes exactly what ``ParseService.parse`` computes (``digest_document``, the passage
text of ``RagService.passage_text``, embedding batches of ``EMBED_BATCH``), so a paper ingested in bulk
has the same chunks and vectors as one added with ``library add``.
"""

from __future__ import annotations

import asyncio
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from ..errors import AstroError, ToolInputError

EMBED_BATCH = 32  # RagService.embed_chunks' batch: the same batches give the same vectors
LIST_SUFFIXES = (".txt", ".lst", ".list")  # a reading list: one PDF path per line


@dataclass(frozen=True)
class EmbedSpec:
    """What a worker needs to build the library's embedding backend (the resolved one, never 'auto')."""

    backend: str  # "lexical-v2", "all-MiniLM-L6-v2" (local), "endpoint:MODEL"
    threads: int = 1
    window: int = 128
    model_dir: str = ""  # a downloaded local model, when not the packaged one
    base_url: str = ""  # endpoint backends
    api_key: str = ""


@dataclass
class Prepared:
    """One PDF, parsed and embedded by a worker; ``error`` instead when it could not be."""

    path: str
    sha256: str = ""
    info: dict[str, Any] | None = None  # services.library.read_pdf_info
    paper: Any = None  # parse.ParsedPaper
    vectors: np.ndarray | None = None
    backend: str = ""
    error: str = ""
    seconds: float = 0.0
    worker: str = field(default="")


def pdf_sources(sources: Iterable[str]) -> list[Path]:
    """The PDFs to ingest, in order, each once: a folder's PDFs (recursively, sorted), a reading list's
    lines (paths relative to the list; blank lines and ``#`` comments skipped), or a PDF path."""
    out: dict[Path, None] = {}
    for source in sources:
        path = Path(source).expanduser()
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() == ".pdf")
            if not found:
                raise ToolInputError(f"{source} holds no PDF files (*.pdf)")
            out.update((p.resolve(), None) for p in found)
        elif path.is_file() and path.suffix.lower() in LIST_SUFFIXES:
            for line in path.read_text("utf-8", "replace").splitlines():
                line = line.strip()
                if line and not line.startswith("#"):
                    entry = Path(line).expanduser()
                    out[(entry if entry.is_absolute() else path.parent / entry).resolve()] = None
        elif path.is_file() or path.suffix.lower() == ".pdf":
            out[path.resolve()] = None  # a missing PDF is reported as that paper's failure
        else:
            raise ToolInputError(f"{source}: not a folder, a reading list ({', '.join(LIST_SUFFIXES)}) or a PDF")
    return list(out)


_BACKENDS: dict[EmbedSpec, Any] = {}  # per worker process: the local model loads once, not per paper


def _backend(spec: EmbedSpec) -> Any:
    from ..config import AstroConfig
    from .embed import EndpointEmbedder, LexicalEmbedder, LocalEmbedder

    if spec.backend.startswith("endpoint:"):  # a fresh client per paper: each paper's asyncio.run has its own loop
        from ..llm.client import LlmClient

        config = AstroConfig(openai_base_url=spec.base_url, openai_api_key=spec.api_key)
        return EndpointEmbedder(LlmClient(config), spec.backend.split(":", 1)[1])
    if spec not in _BACKENDS:
        if spec.backend == LocalEmbedder.name:
            _BACKENDS[spec] = LocalEmbedder(threads=spec.threads, window=spec.window, directory=spec.model_dir or None)
        elif spec.backend == LexicalEmbedder.name:
            _BACKENDS[spec] = LexicalEmbedder()
        else:
            raise ToolInputError(f"unknown embedding backend {spec.backend!r}")
    return _BACKENDS[spec]


def prepare_pdf(path: str, spec: EmbedSpec) -> Prepared:
    """Parse and embed one PDF (runs in a worker process; never raises: failures come back as ``error``)."""
    import os
    import socket
    import time

    from .library import _sha256, read_pdf_info
    from .parse import digest_document, parse_file
    from .rag import RagService

    started = time.perf_counter()
    out = Prepared(path=path, worker=f"{socket.gethostname()}:{os.getpid()}")
    try:
        pdf = Path(path)
        if not pdf.is_file():
            raise ToolInputError(f"no such PDF file: {path}")
        out.info = read_pdf_info(pdf)  # and the checks library add makes (a PDF at all, not encrypted, has pages)
        out.sha256 = _sha256(pdf)
        paper = digest_document(parse_file(pdf))
        backend = _backend(spec)
        words = backend.name != "lexical-v2"
        texts = [RagService.passage_text(c, words=words) for c in paper.chunks if c.part != "references"]

        async def embed_all() -> list[np.ndarray]:  # one event loop for all batches (an endpoint client keeps its loop)
            return [await backend.embed(texts[i : i + EMBED_BATCH]) for i in range(0, len(texts), EMBED_BATCH)]

        batches = asyncio.run(embed_all())
        out.vectors = np.vstack(batches).astype(np.float32) if batches else np.zeros((0, 0), dtype=np.float32)
        out.paper, out.backend = paper, backend.name
    except AstroError as exc:
        out.error = str(exc)
    except Exception as exc:  # noqa: BLE001 - a worker must hand every failure back, named
        out.error = f"{type(exc).__name__}: {exc}" + ("" if str(exc) else "\n" + traceback.format_exc(limit=3))
    out.seconds = time.perf_counter() - started
    return out


def prepare_pdfs(paths: list[str], spec: EmbedSpec) -> list[Prepared]:
    """``prepare_pdf`` of each, in order: one task for a few papers (see the module docstring)."""
    return [prepare_pdf(path, spec) for path in paths]
