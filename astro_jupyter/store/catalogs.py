"""The ``catalog_results`` table: provenance of TAP queries and where their VOTables are."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .db import Database


@dataclass
class CatalogRecord:
    id: str
    owner: str
    session_id: str | None
    service: str
    service_url: str
    adql: str
    maxrec: int | None
    mode: str
    status: str
    row_count: int | None
    truncated: bool
    error: str
    path: str | None
    bytes: int | None
    duration_ms: int | None
    created_at: str

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> "CatalogRecord":
        data = {k: row[k] for k in cls.__dataclass_fields__}
        data["truncated"] = bool(data["truncated"])
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_COLUMNS = ("id, owner, session_id, service, service_url, adql, maxrec, mode, status, row_count, truncated, error, "
            "path, bytes, duration_ms, created_at")


class CatalogRepository:
    def __init__(self, db: "Database") -> None:
        self.db = db

    async def add(self, record: CatalogRecord) -> CatalogRecord:
        """Insert one result; committed before the tool reports it (the route can serve it at once)."""
        values = asdict(record)
        values.pop("created_at")
        names = ", ".join(values)
        async with self.db.transaction():
            await self.db.execute(
                f"INSERT INTO catalog_results ({names}) VALUES ({', '.join('?' for _ in values)})",
                tuple(int(v) if isinstance(v, bool) else v for v in values.values()),
            )
        return await self.get(record.id)

    async def get(self, result_id: str) -> CatalogRecord:
        row = await self.db.fetchone(f"SELECT {_COLUMNS} FROM catalog_results WHERE id = ?", (result_id,))
        if row is None:
            raise KeyError(result_id)
        return CatalogRecord.from_row(row)

    async def list(self, *, owner: str | None = None, limit: int = 100) -> list[CatalogRecord]:
        sql = f"SELECT {_COLUMNS} FROM catalog_results"
        params: list[Any] = []
        if owner is not None:
            sql += " WHERE owner IN ('', ?)"
            params.append(owner)
        sql += " ORDER BY created_at DESC LIMIT ?"
        params.append(int(limit))
        return [CatalogRecord.from_row(r) for r in await self.db.fetchall(sql, params)]
