"""``r = %astro query_catalog ...`` against a real DaCHS: the stored VOTable behind the result object."""

from __future__ import annotations

import json
import sys
import types
from typing import Any

import pytest

from tests.fakes import dachs

pytestmark = pytest.mark.skipif(not dachs.installed(), reason="GAVO DaCHS is not installed (.ci/run installs gavodachs2-server)")


def test_query_catalog_result_object(load, dachs_server: Any, monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("ASTRO_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ASTRO_TAP_SERVICES", json.dumps({"local": dachs_server.tap_url}))
    ip = load()
    ip.run_cell('r = %astro query_catalog service=local adql="SELECT TOP 75 source_id, ra, dec, vmag FROM astrojup.stars ORDER BY source_id"')
    r = ip.user_ns["r"]
    assert not r.is_error, r.content
    table = r.to_table()
    assert len(table) == 75  # every row, not the 50-row preview
    assert str(table["ra"].unit) == "deg" and table["ra"].meta["ucd"] == "pos.eq.ra;meta.main"
    frame = r.to_pandas()
    assert list(frame.columns) == ["source_id", "ra", "dec", "vmag"] and len(frame) == 75
    assert "75 rows" in repr(r) and "ra [deg]" in r._repr_html_() and "overflow:auto" in r._repr_html_()

    # the stored result read back by its id (the sidebar's "Show on sky"): every row on the view
    view = ip.run_line_magic("astro", f"sky --result {r.catalog['result_id']}")
    assert len(view.table) == 75 and len(view._markers) == 75
    assert list(view.table["source_id"]) == list(table["source_id"])

    seen: dict[str, Any] = {}
    sky = types.ModuleType("astro_jupyter.kernel.sky")  # the sky helper's module, stood in for this call

    def show_sky(tab: Any, target: Any = None) -> str:
        seen.update(rows=len(tab), target=target, units=str(tab["dec"].unit))
        return "view"

    sky.show_sky = show_sky  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "astro_jupyter.kernel.sky", sky)
    assert r.show_sky("M 87") == "view" and seen == {"rows": 75, "target": "M 87", "units": "deg"}


def test_a_failed_query_has_no_table(load, dachs_server: Any, monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("ASTRO_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ASTRO_TAP_SERVICES", json.dumps({"local": dachs_server.tap_url}))
    ip = load()
    ip.run_cell('r = %astro query_catalog service=local adql="SELECT TOP 1 nope FROM astrojup.stars"')
    r = ip.user_ns["r"]
    assert r.is_error and "nope" in r.content
