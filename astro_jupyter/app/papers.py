"""The paper library: list, show, add (by identifier or local PDF), optional download."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .common import AppBase

if TYPE_CHECKING:
    from ..services.bibtex import BibResult
    from ..store.papers import PaperRecord


@dataclass
class AddedPaper:
    """What ``add_local`` did: the record, whether it was there already, and what the download did."""

    record: "PaperRecord"
    already: bool
    notes: list[str]


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

    async def add_local(self, source: str, *, fetch: bool = True, download: bool = False) -> AddedPaper:
        """A local PDF or an identifier into the library now (CLI, kernel); ``download`` fetches the PDF
        in this call. Raises the service's error on a bad identifier, an unreadable file or a failed download."""
        outcome = await self.services.library.add_checked(source, fetch=fetch)
        paper = outcome.record
        notes: list[str] = []
        if download and paper.state == "metadata":
            result = await self.services.downloads.download(paper.id)
            paper = result.paper
            notes.append(f"downloaded via {result.channel} from {result.url}")
        return AddedPaper(paper, bool(outcome.already), notes)

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
