"""show_sky without a kernel: which columns are positions, where the view looks, bad input."""

from __future__ import annotations

import astropy.units as u
import numpy as np
import pytest
from astropy.coordinates import SkyCoord
from astropy.table import QTable, Table

from astro_jupyter.kernel.sky import DEFAULT_FOV_DEG, SkyError, position_columns, show_sky


def test_position_columns_by_ucd_then_by_name() -> None:
    t = Table({"x": [1.0], "y": [2.0], "ra": [3.0], "dec": [4.0]})
    assert position_columns(t) == ("ra", "dec")
    t["x"].meta["ucd"], t["y"].meta["ucd"] = "pos.eq.ra", "pos.eq.dec"
    assert position_columns(t) == ("x", "y")  # a UCD beats a name
    t["ra"].meta["ucd"], t["dec"].meta["ucd"] = "pos.eq.ra;meta.main", "pos.eq.dec;meta.main"
    assert position_columns(t) == ("ra", "dec")  # the main position beats another one
    assert position_columns(Table({"RAJ2000": [1.0], "DEJ2000": [2.0]})) == ("RAJ2000", "DEJ2000")
    assert position_columns(Table({"RA_ICRS": [1.0], "DE_ICRS": [2.0]})) == ("RA_ICRS", "DE_ICRS")
    with pytest.raises(SkyError, match="no DEC column.*its columns: ra, mag"):
        position_columns(Table({"ra": [1.0], "mag": [2.0]}))


@pytest.mark.parametrize("ra, dec", [("RAJ2000", "DEJ2000"), ("RAdeg", "DEdeg"), ("RAmean", "DEmean"), ("s_ra", "s_dec")])
def test_a_table_the_kernel_can_show_has_positions_in_the_tools_metadata(ra: str, dec: str) -> None:
    """The sidebar offers "Show on sky" from the tool's metadata: every name the kernel's view accepts counts there."""
    from astro_jupyter.services.tap import position_columns as tool_positions

    assert position_columns(Table({ra: [1.0], dec: [2.0]})) == (ra, dec)
    assert tool_positions([{"name": ra}, {"name": "mag"}, {"name": dec}]) == {"ra": ra, "dec": dec}


def test_the_view_holds_the_rows_and_angles_are_converted() -> None:
    t = QTable({"ra": [10.0, 10.2] * u.deg, "dec": [36000.0, 36360.0] * u.arcsec, "name": ["a", "b"]})
    view = show_sky(t)  # no target: the rows' centre
    assert view.field.ra == pytest.approx(10.1, abs=1e-3) and view.field.dec == pytest.approx(10.05, abs=1e-3)
    assert 0.2 < view.field.fov < 0.6
    ra, dec = (float(x) for x in view.widget._target.split())
    assert (ra, dec) == pytest.approx((view.field.ra, view.field.dec))
    alone = show_sky(None, SkyCoord(83.82, -5.39, unit="deg"))
    assert alone.field.fov == DEFAULT_FOV_DEG and alone.widget._fov == pytest.approx(DEFAULT_FOV_DEG)
    with pytest.raises(SkyError, match="no table overlaid"):
        alone.selection


def test_bad_input() -> None:
    with pytest.raises(SkyError, match="needs a table, a target"):
        show_sky()
    with pytest.raises(SkyError, match="not list"):
        show_sky([1, 2], SkyCoord(0, 0, unit="deg"))
    with pytest.raises(SkyError, match="fov is in degrees"):
        show_sky(Table({"ra": [1.0], "dec": [2.0]}), fov=float("nan"))
    with pytest.raises(SkyError, match="empty target"):
        show_sky(None, "   ")
    with pytest.raises(SkyError, match="empty table"):
        show_sky(Table({"ra": np.array([], float), "dec": np.array([], float)}))


def test_markers_carry_positions_only_and_the_selection_maps_them_back_to_rows() -> None:
    t = Table({"ra": [10.0, float("nan"), 10.1, 10.1], "dec": [20.0, 20.0, 20.1, 20.1], "name": ["a", "b", "c", "d"]})
    view = show_sky(t, SkyCoord(10.05, 20.05, unit="deg"))
    assert [m.__dict__ for m in view._markers] == [  # what add_markers sends: no NaN (not JSON), no table columns
        {"lon": 10.0, "lat": 20.0, "title": "row 0", "description": ""},
        {"lon": 10.1, "lat": 20.1, "title": "row 2", "description": ""},
        {"lon": 10.1, "lat": 20.1, "title": "row 3", "description": ""},
    ]
    view.widget._selected_objects = [[{"ra": 10.1, "dec": 20.1, "x": 1, "y": 2}, {"ra": 10.0, "dec": 20.000001},
                                      {"ra": float("nan"), "dec": 20.0}, {"ra": "10.0", "dec": 20.0}, "junk"]]
    assert list(view.selection["name"]) == ["c", "d"]  # both rows at that position; near misses and junk ignored
