"""The ``papers`` table: one row per paper in the library (schema in sql/0010_papers.sql).

``PaperRecord`` is also the shape the ADS and arXiv clients return, so a search hit and
a library entry merge field by field. A record with ``state == ""`` is not stored.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from ..errors import NotFoundError
from .db import Database, Row
from .repository import LocalParseClaims

STATES = ("metadata", "downloaded", "parsed")

_JSON_LIST = {"authors", "keywords"}
_JSON_DICT = {"metadata"}
# Fields a later metadata fetch may fill or refresh; paths, state and id never come from a fetch.
METADATA_FIELDS = (
    "arxiv_id",
    "arxiv_version",
    "doi",
    "bibcode",
    "title",
    "authors",
    "year",
    "journal",
    "abstract",
    "keywords",
    "citation_count",
    "url",
)
_SHARED_ONLY = {"added_by", "parsing"}
_COLUMNS = ("id", *METADATA_FIELDS, "pdf_path", "markdown_path", "state", "source", "metadata")


@dataclass
class PaperRecord:
    id: str = ""
    arxiv_id: str | None = None
    arxiv_version: str | None = None
    doi: str | None = None
    bibcode: str | None = None
    title: str = ""
    authors: list[str] = field(default_factory=list)
    year: int | None = None
    journal: str = ""
    abstract: str = ""
    keywords: list[str] = field(default_factory=list)
    citation_count: int | None = None
    url: str = ""
    pdf_path: str | None = None
    markdown_path: str | None = None
    state: str = ""
    source: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: str = ""
    updated_at: str = ""
    # the shared library's (store/pg_library.py): who added it, who is parsing it now ("" = no one)
    added_by: str = ""
    parsing: str = ""

    @classmethod
    def from_row(cls, row: Row) -> "PaperRecord":
        values: dict[str, Any] = {}
        for f in fields(cls):
            if f.name in _SHARED_ONLY:
                values[f.name] = row.get(f.name) or ""
                continue
            raw = row[f.name]
            if f.name in _JSON_LIST:
                raw = json.loads(raw or "[]")
            elif f.name in _JSON_DICT:
                raw = json.loads(raw or "{}")
            values[f.name] = raw
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def merge_from(self, other: "PaperRecord", *, prefer_other: bool = False) -> None:
        """Fill empty metadata fields from ``other`` (or overwrite them when ``prefer_other``)."""
        for name in METADATA_FIELDS:
            theirs = getattr(other, name)
            if theirs in (None, "", []):
                continue
            mine = getattr(self, name)
            if prefer_other or mine in (None, "", []):
                setattr(self, name, theirs)
        if other.citation_count is not None:
            self.citation_count = max(self.citation_count or 0, other.citation_count)
        for key, value in other.metadata.items():
            self.metadata.setdefault(key, value)


def _db_value(name: str, value: Any) -> Any:
    if name in _JSON_LIST or name in _JSON_DICT:
        return json.dumps(value, ensure_ascii=False)
    return value


class PaperRepository:
    """CRUD over ``papers``; lookups by any identifier column (DOIs compared case-insensitively)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._claims = LocalParseClaims()

    def parse_claim(self, paper_id: str) -> Any:
        return self._claims.claim(paper_id)

    async def removal_refused(self, record: PaperRecord) -> str:
        return ""  # the user's own library: theirs to change

    async def find(self, paper_id: str) -> PaperRecord | None:
        row = await self.db.fetchone("SELECT * FROM papers WHERE id = ?", (paper_id,))
        return None if row is None else PaperRecord.from_row(row)

    async def get(self, paper_id: str) -> PaperRecord:
        record = await self.find(paper_id)
        if record is None:
            raise NotFoundError(f"no paper {paper_id!r} in the library")
        return record

    async def find_by(
        self, *, arxiv_id: str | None = None, doi: str | None = None, bibcode: str | None = None
    ) -> PaperRecord | None:
        """The first stored paper sharing any of these identifiers (arXiv, then DOI, then bibcode)."""
        checks = (
            ("arxiv_id = ?", arxiv_id),
            ("lower(doi) = lower(?)", doi),
            ("bibcode = ?", bibcode),
        )
        for clause, value in checks:
            if not value:
                continue
            row = await self.db.fetchone(f"SELECT * FROM papers WHERE {clause}", (value,))
            if row is not None:
                return PaperRecord.from_row(row)
        return None

    async def find_by_sha256(self, digest: str) -> PaperRecord | None:
        """A paper whose PDF (added from disk) has this content hash: adding a file twice is a no-op."""
        row = await self.db.fetchone(
            "SELECT * FROM papers WHERE json_extract(metadata, '$.sha256') = ? LIMIT 1", (digest,)
        )
        return None if row is None else PaperRecord.from_row(row)

    async def find_many(
        self, *, arxiv_ids: list[str], dois: list[str], bibcodes: list[str]
    ) -> list[PaperRecord]:
        """Every stored paper matching any of the given identifiers, in one query (search annotation)."""
        clauses: list[str] = []
        params: list[Any] = []
        for clause, values in (
            ("arxiv_id IN ({})", arxiv_ids),
            ("lower(doi) IN ({})", [d.lower() for d in dois]),
            ("bibcode IN ({})", bibcodes),
        ):
            if values:
                clauses.append(clause.format(",".join("?" * len(values))))
                params.extend(values)
        if not clauses:
            return []
        rows = await self.db.fetchall(f"SELECT * FROM papers WHERE {' OR '.join(clauses)}", params)
        return [PaperRecord.from_row(r) for r in rows]

    async def insert(self, record: PaperRecord) -> PaperRecord:
        if not record.id:
            raise ValueError("a paper needs an id before it is stored")
        record.state = record.state or "metadata"
        cols = [c for c in _COLUMNS]
        await self.db.execute(
            f"INSERT INTO papers ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
            [_db_value(c, getattr(record, c)) for c in cols],
        )
        return await self.get(record.id)

    async def update(self, paper_id: str, **changes: Any) -> PaperRecord:
        unknown = set(changes) - set(_COLUMNS) - {"id"}
        if unknown:
            raise ValueError(f"unknown paper fields: {sorted(unknown)}")
        changes.pop("id", None)
        if changes:
            sets = ", ".join(f"{name} = ?" for name in changes)
            count = await self.db.execute_rowcount(
                f"UPDATE papers SET {sets}, updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE id = ?",
                [*(_db_value(k, v) for k, v in changes.items()), paper_id],
            )
            if count == 0:
                raise NotFoundError(f"no paper {paper_id!r} in the library")
        return await self.get(paper_id)

    async def list(self, *, state: str | None = None, limit: int = 1000, offset: int = 0) -> list[PaperRecord]:
        if state:
            rows = await self.db.fetchall(
                "SELECT * FROM papers WHERE state = ? ORDER BY created_at DESC, id LIMIT ? OFFSET ?",
                (state, limit, offset),
            )
        else:
            rows = await self.db.fetchall(
                "SELECT * FROM papers ORDER BY created_at DESC, id LIMIT ? OFFSET ?", (limit, offset)
            )
        return [PaperRecord.from_row(r) for r in rows]

    async def count(self) -> int:
        return int(await self.db.fetchval("SELECT count(*) FROM papers") or 0)

    async def count_by_state(self) -> dict[str, int]:
        rows = await self.db.fetchall("SELECT state, count(*) AS n FROM papers GROUP BY state")
        return {str(r["state"]): int(r["n"]) for r in rows}

    async def delete(self, paper_id: str) -> bool:
        return await self.db.execute_rowcount("DELETE FROM papers WHERE id = ?", (paper_id,)) > 0
