"""Stored catalog results (query_catalog, cone_search) for download and for the kernel, scoped to their owner."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from typing import TYPE_CHECKING

from ..errors import InvalidRequest, NotFoundError
from ..services.tap import RESULT_ID
from .common import AppBase, Owner, visible_to

if TYPE_CHECKING:
    from ..store.catalogs import CatalogRecord

FORMATS = {"votable": ("application/x-votable+xml", ".vot"), "csv": ("text/csv; charset=utf-8", ".csv")}


@dataclass(frozen=True)
class CatalogDownload:
    """What the route sends: a file to stream (VOTable) or bytes made from it (CSV)."""

    filename: str
    media_type: str
    path: Path | None = None
    data: bytes | None = None


class CatalogsMixin(AppBase):
    async def stored_catalog(self, owner: Owner, result_id: str) -> "CatalogRecord":
        """A successful stored result the caller may see (its own, an ownerless one; the local user of a
        kernel or the CLI, ``None``, sees every one) whose VOTable is still there; anything else is
        "not found", another owner's included."""
        if not RESULT_ID.match(str(result_id)):
            raise NotFoundError(f"no catalog result {result_id!r} (an id looks like cat_0123456789abcdef)")
        record = await self.services.tap.get(result_id)
        if not visible_to(record.owner, owner) or record.status != "ok" or not record.path:
            raise NotFoundError(f"no catalog result {result_id!r}")
        if not Path(record.path).is_file():
            raise NotFoundError(f"the VOTable of {result_id} is no longer in the library")
        return record

    async def catalog_download(self, owner: Owner, result_id: str, fmt: str = "votable") -> CatalogDownload:
        """The caller's (or an ownerless) stored result as a VOTable or CSV; another owner's is "not found"."""
        if fmt not in FORMATS:
            raise InvalidRequest(f"'format' must be one of {', '.join(FORMATS)}", reason="invalid_argument")
        tap = self.services.tap
        record = await self.stored_catalog(owner, result_id)
        path = Path(str(record.path))
        media_type, suffix = FORMATS[fmt]
        if fmt == "votable":
            return CatalogDownload(record.id + suffix, media_type, path=path)
        return CatalogDownload(record.id + suffix, media_type, data=await tap.as_csv(path))
