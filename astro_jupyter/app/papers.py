"""The paper library: list, show, add (by identifier or local PDF), optional download."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from ..errors import AstroError, ToolInputError
from .common import AppBase

if TYPE_CHECKING:
    from ..services.bibtex import BibResult
    from ..services.parse import ParseResult
    from ..store.papers import PaperRecord

ParseProgress = Callable[..., Awaitable[None]]


@dataclass
class AddedPaper:
    """What ``add_local`` did: the record, whether it was there already, what the download did, and
    the parse that makes it searchable (``parse_error`` when that failed: the paper stays added)."""

    record: "PaperRecord"
    already: bool
    notes: list[str]
    parsed: "ParseResult | None" = None
    parse_error: str = ""


@dataclass
class AddedFolder:
    """``add_folder``: each PDF's outcome, and the ones that could not be added (path → why)."""

    added: list[AddedPaper] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)


@dataclass
class RemovedPaper:
    record: "PaperRecord"
    chunks: int


class PapersMixin(AppBase):
    async def list_papers(self, *, state: str | None = None, limit: int = 1000) -> list[dict[str, Any]]:
        return [r.to_dict() for r in await self.list_paper_records(state=state, limit=limit)]

    async def list_paper_records(self, *, state: str | None = None, limit: int = 1000) -> list["PaperRecord"]:
        return list(await self.services.library.list(state=state, limit=limit))

    async def get_paper(self, paper_id: str) -> dict[str, Any]:
        return (await self.paper_record(paper_id)).to_dict()

    async def paper_record(self, paper_id: str) -> "PaperRecord":
        """A stored paper by library id or any identifier (NotFoundError otherwise)."""
        return await self.services.library.get(paper_id)

    async def add_paper(self, owner: str, identifier: Any, *, download: bool = True) -> dict[str, Any]:
        """Metadata now (so the answer shows the paper); download + parse queued in the background
        (the server's intake worker)."""
        from .intake import validate_identifier

        paper_id, kind = validate_identifier(identifier)
        record = await self.services.library.resolve(paper_id)
        out = record.to_dict()
        out["intake_id"] = None
        intake = getattr(self, "intake", None)
        if download and intake is not None and record.state in ("", "metadata"):
            item = await intake.enqueue(owner, record.id, kind)
            out["intake_id"] = item.id
        return out

    async def add_local(
        self, source: str, *, fetch: bool = True, download: bool = False, parse: bool = True,
        progress: ParseProgress | None = None,
    ) -> AddedPaper:
        """A local PDF or an identifier into the library now (CLI, kernel); ``download`` fetches the PDF
        in this call, and a paper with a PDF is parsed and indexed unless ``parse`` is false (an added
        paper nobody can search is a trap: rag_search would answer from the others). Raises the
        service's error on a bad identifier, an unreadable file or a failed download; a failed parse
        leaves the paper added and says why in ``parse_error``."""
        outcome = await self.services.library.add_checked(source, fetch=fetch)
        paper = outcome.record
        notes: list[str] = []
        if download and paper.state == "metadata":
            result = await self.services.downloads.download(paper.id)
            paper = result.paper
            notes.append(f"downloaded via {result.channel} from {result.url}")
        added = AddedPaper(paper, bool(outcome.already), notes)
        if parse and paper.state == "downloaded":
            try:
                added.parsed = await self.services.parser.parse(paper.id, progress)
            except AstroError as exc:
                added.parse_error = str(exc)
            added.record = await self.services.library.get(paper.id)
        return added

    async def add_folder(
        self, folder: str | Path, *, fetch: bool = True, parse: bool = True,
        progress: Callable[[Path, int, int], Awaitable[ParseProgress | None]] | None = None,
    ) -> AddedFolder:
        """Every PDF directly in ``folder`` (sorted by name), each added as ``add_local`` adds one; a file
        that fails is listed with its reason and the rest go on. ``progress(path, n, total)`` is called
        before each file and may return the per-page progress callback for its parse."""
        path = Path(folder).expanduser()
        if not path.is_dir():
            raise ToolInputError(f"no such folder: {folder}")
        pdfs = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() == ".pdf")
        if not pdfs:
            raise ToolInputError(f"{folder} holds no PDF files (*.pdf)")
        out = AddedFolder()
        for n, pdf in enumerate(pdfs, 1):
            pages = await progress(pdf, n, len(pdfs)) if progress is not None else None
            try:
                out.added.append(await self.add_local(str(pdf), fetch=fetch, parse=parse, progress=pages))
            except AstroError as exc:
                out.failed[str(pdf)] = str(exc)
        return out

    async def remove_paper(self, paper_id: str) -> RemovedPaper:
        """Take a paper out of the library: its passages and vectors (so no search returns them), its row,
        and the PDF copy and Markdown the library made. Notes on it are kept (they are the user's)."""
        record, chunks = await self.services.parser.remove(paper_id)
        return RemovedPaper(record, chunks)

    async def library_bibtex(self, paper_ids: list[str] | None = None) -> "BibResult":
        """BibTeX of the whole library (oldest first, so keys and order stay put as it grows), or of
        the given stored papers (no metadata lookups: unknown ids are noted in ``problems``)."""
        bib = self.services.bibtex
        if paper_ids is None:
            records = list(reversed(await self.services.library.list(limit=100_000)))
            return await bib.entries(records)
        problems: list[str] = []
        result = await bib.entries(await bib.papers(paper_ids, problems, fetch=False))
        result.problems[:0] = problems
        return result
