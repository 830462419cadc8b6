"""``GET astro/api/catalog-results/{id}``: a stored catalog result as VOTable or CSV, owner-scoped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from astro_jupyter.store.catalogs import CatalogRecord
from tests.server.conftest import Api


async def _stored(service: Any, tmp_path: Path, result_id: str, owner: str) -> Path:
    from astropy import units as u
    from astropy.table import Table

    path = tmp_path / f"{result_id}.vot"
    table = Table({"source_id": [1, 2, 3], "ra": [10.5, 11.25, 12.0] * u.deg})
    table["ra"].meta["ucd"] = "pos.eq.ra;meta.main"
    table.write(path, format="votable")
    await service.services.tap.repo.add(CatalogRecord(
        id=result_id, owner=owner, session_id=None, service="local", service_url="http://127.0.0.1:1/tap",
        adql="SELECT * FROM t", maxrec=10, mode="sync", status="ok", row_count=3, truncated=False, error="",
        path=str(path), bytes=path.stat().st_size, duration_ms=5, created_at=""))
    return path


async def test_download_as_votable_and_csv(api: Api, astro_service: Any, jp_fetch: Any, tmp_path: Path) -> None:
    await astro_service.start()
    path = await _stored(astro_service, tmp_path, "cat_00112233445566aa", "")
    votable = await jp_fetch("astro", "api", "catalog-results", "cat_00112233445566aa")
    assert votable.code == 200 and votable.body == path.read_bytes()
    assert votable.headers["Content-Type"].startswith("application/x-votable+xml")
    assert 'filename="cat_00112233445566aa.vot"' in votable.headers["Content-Disposition"]
    csv = await jp_fetch("astro", "api", "catalog-results", "cat_00112233445566aa", params={"format": "csv"})
    assert csv.code == 200 and csv.headers["Content-Type"].startswith("text/csv")
    assert csv.body.decode().splitlines() == ["source_id,ra", "1,10.5", "2,11.25", "3,12.0"]
    status, err = await api("GET", "astro", "api", "catalog-results", "cat_00112233445566aa", params={"format": "xls"})
    assert status == 400 and "format" in err["message"]


async def test_another_owners_result_is_not_found(api: Api, astro_service: Any, tmp_path: Path) -> None:
    await astro_service.start()
    await _stored(astro_service, tmp_path, "cat_aaaabbbbccccdddd", "alice")
    status, err = await api("GET", "astro", "api", "catalog-results", "cat_aaaabbbbccccdddd")
    assert status == 404 and "cat_aaaabbbbccccdddd" in err["message"]
    status, _ = await api("GET", "astro", "api", "catalog-results", "cat_0000000000000000")
    assert status == 404
    status, _ = await api("GET", "astro", "api", "catalog-results", "..%2F..%2Fastro.db")
    assert status == 404
