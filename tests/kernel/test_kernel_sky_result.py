"""``%astro sky --result ID``: a stored ``query_catalog`` / ``cone_search`` result read back by its id
through the application layer and shown on the sky with its rows overlaid (what the sidebar's
"Show on sky" under a catalog result inserts and runs)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from IPython.core.error import UsageError

from astro_jupyter.store.catalogs import CatalogRecord

pytest.importorskip("ipyaladin")

RA = [187.70593, 187.71, 187.72, 187.69]
DEC = [12.39112, 12.40, 12.38, 12.395]


def _store(ip: Any, tmp_path: Path, result_id: str, *, owner: str = "", status: str = "ok") -> Path:
    """A stored result as the catalog tools leave one: a VOTable in the library and its record."""
    from astropy import units as u
    from astropy.table import Table

    path = tmp_path / f"{result_id}.vot"
    table = Table({"source_id": np.arange(len(RA)), "RA_ICRS": RA * u.deg, "DE_ICRS": DEC * u.deg,
                   "vmag": [10.0, 11.5, 12.25, 13.0] * u.mag})
    table["RA_ICRS"].meta["ucd"] = "pos.eq.ra;meta.main"
    table["DE_ICRS"].meta["ucd"] = "pos.eq.dec;meta.main"
    table.write(path, format="votable")
    magics = ip.magics_manager.registry["AstroMagics"]

    async def add() -> None:
        app = await magics.rt.app()
        await app.services.tap.repo.add(CatalogRecord(
            id=result_id, owner=owner, session_id=None, service="local", service_url="http://127.0.0.1:1/tap",
            adql="SELECT * FROM t", maxrec=10, mode="sync", status=status, row_count=len(RA), truncated=False,
            error="", path=str(path), bytes=path.stat().st_size, duration_ms=5, created_at=""))

    magics.rt.call(add)
    return path


def test_sky_result_loads_the_stored_rows_and_overlays_them(load: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASTRO_HOME", str(tmp_path / "home"))
    ip = load()
    _store(ip, tmp_path, "cat_0123456789abcdef")
    view = ip.run_line_magic("astro", "sky --result cat_0123456789abcdef")
    from astro_jupyter.kernel.sky import SkyView

    assert isinstance(view, SkyView)
    assert list(view.table["source_id"]) == [0, 1, 2, 3] and str(view.table["vmag"].unit) == "mag"  # the whole VOTable
    rows = view.widget._astro_rows  # what the view draws: the stored rows' positions, in order
    assert np.frombuffer(rows["ra"], dtype="<f8").tolist() == RA
    assert np.frombuffer(rows["dec"], dtype="<f8").tolist() == DEC
    assert rows["options"]["name"] == "astro-jupyter rows"
    assert view.field.ra == pytest.approx(np.mean(RA), abs=1e-3) and view.field.dec == pytest.approx(np.mean(DEC), abs=1e-3)
    assert 0 < view.field.fov < 1  # the rows' field (no target given): not the 60 deg default
    json.dumps(view.widget.get_state(), default=str)  # a state the front end can receive


def test_sky_result_of_another_owner_and_fov(load: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--fov`` still applies; a result another identity made is visible to the kernel, whose
    user holds the database (the app layer's owner ``None``), as everywhere else in the kernel."""
    monkeypatch.setenv("ASTRO_HOME", str(tmp_path / "home"))
    ip = load()
    _store(ip, tmp_path, "cat_aaaabbbbccccdddd", owner="alice")
    view = ip.run_line_magic("astro", "sky --result cat_aaaabbbbccccdddd --fov 0.2")
    assert len(view.table) == 4 and view.field.fov == 0.2


def test_sky_result_bad_ids_are_clear_usage_errors(load: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASTRO_HOME", str(tmp_path / "home"))
    ip = load()
    _store(ip, tmp_path, "cat_00000000000000ff", status="error")
    with pytest.raises(UsageError, match=r"no catalog result 'cat_1111111111111111'"):
        ip.run_line_magic("astro", "sky --result cat_1111111111111111")
    with pytest.raises(UsageError, match=r"no catalog result 'cat_00000000000000ff'"):  # a failed query has no rows
        ip.run_line_magic("astro", "sky --result cat_00000000000000ff")
    with pytest.raises(UsageError, match=r"an id looks like cat_"):
        ip.run_line_magic("astro", "sky --result ../../astro.db")
    with pytest.raises(UsageError, match="not allowed with"):
        ip.run_line_magic("astro", "sky --result cat_00000000000000ff --table t")
    gone = _store(ip, tmp_path, "cat_2222222222222222")
    gone.unlink()
    with pytest.raises(UsageError, match="no longer in the library"):
        ip.run_line_magic("astro", "sky --result cat_2222222222222222")
