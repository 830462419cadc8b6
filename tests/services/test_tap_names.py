"""Service names, the tap_services setting, and the cone template (no server needed)."""

from __future__ import annotations

import pytest
from traitlets import TraitError

from astro_jupyter.agent.tools.data.tap import cone_adql, parse_radius
from astro_jupyter.config import AstroConfig
from astro_jupyter.errors import InvalidInput
from astro_jupyter.services.tap import BUILTIN_SERVICES, UnknownService, check_table_name, resolve_service


def test_names_urls_and_trust(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = AstroConfig(tap_services={"Mine": "http://127.0.0.1:8080/tap", "simbad": "http://127.0.0.1:9/tap"})
    assert resolve_service(cfg, "GAIA").url == BUILTIN_SERVICES["gaia"] and resolve_service(cfg, "gaia").trusted
    assert resolve_service(cfg, "mine").url == "http://127.0.0.1:8080/tap"  # configured names are lower-cased
    assert resolve_service(cfg, "simbad").url == "http://127.0.0.1:9/tap"  # a configured name overrides a built-in
    same = resolve_service(cfg, "http://127.0.0.1:8080/tap/")
    assert same.trusted and same.name == "mine"
    other = resolve_service(cfg, "https://tap.example.org/tap")
    assert not other.trusted and other.url == "https://tap.example.org/tap"
    with pytest.raises(UnknownService, match="unknown TAP service 'nosuch'.*gaia"):
        resolve_service(cfg, "nosuch")


def test_the_setting_rejects_what_is_not_a_name_and_a_url(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(TraitError, match="http"):
        AstroConfig(tap_services={"x": "file:///etc/passwd"})
    with pytest.raises(TraitError, match="service name"):
        AstroConfig(tap_services={"a b": "http://x.org/tap"})
    monkeypatch.setenv("ASTRO_TAP_SERVICES", '{"local": "http://127.0.0.1:1/tap"}')
    assert AstroConfig().tap_services == {"local": "http://127.0.0.1:1/tap"}
    monkeypatch.setenv("ASTRO_TAP_SERVICES", "{not json")
    with pytest.raises(TraitError, match="ASTRO_TAP_SERVICES"):
        AstroConfig().tap_services


def test_radius_units_and_bounds() -> None:
    assert parse_radius(36) == pytest.approx(0.01)
    assert parse_radius("2 arcmin") == pytest.approx(2 / 60)
    assert parse_radius("0.5deg") == pytest.approx(0.5)
    for bad in ("", "near", "-1 deg", 0, "11 deg", True):
        with pytest.raises(InvalidInput):
            parse_radius(bad)


def test_cone_template_quotes_odd_column_names_and_table_names_are_checked() -> None:
    adql = cone_adql('"I/355/gaiadr3"', "RA_ICRS", 'de"c', 10.0, -5.5, 0.1)
    assert adql.startswith("SELECT t.*, DISTANCE(POINT('ICRS', t.RA_ICRS, t.\"de\"\"c\")")
    assert "FROM \"I/355/gaiadr3\" AS t" in adql and "CIRCLE('ICRS', 10.0, -5.5, 0.1)" in adql
    assert check_table_name("gaiadr3.gaia_source") == "gaiadr3.gaia_source"
    for bad in ("x; DROP TABLE y", "a'b", "", "t)--"):
        with pytest.raises(InvalidInput):
            check_table_name(bad)
