"""The exported log re-runs a catalog query as plain pyvo code (no astro-jupyter needed)."""

from __future__ import annotations

import ast
from typing import Any

import pytest

from astro_jupyter.export import catalog_cell_source
from tests.fakes import dachs


def _result(url: str, adql: str, **extra: Any) -> dict[str, Any]:
    cat = {"service_url": url, "adql": adql, "maxrec": 10_000, "mode": "sync", "row_count": 3, **extra}
    return {"is_error": False, "metadata": {"catalog": cat}}


def test_values_are_literals_and_hostile_text_stays_data() -> None:
    adql = "SELECT 1 AS one\n')\nimport os; os.system('rm -rf ~')  # \u2028\u202e"
    source = catalog_cell_source(_result("https://tap.example.org/tap", adql))
    assert source is not None
    tree = ast.parse(source)
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    assert sorted(ast.unparse(c.func) for c in calls) == ["pyvo.dal.TAPService", "result.to_table", "service.run_sync"]
    assigned = {n.targets[0].id: n.value for n in tree.body if isinstance(n, ast.Assign)}
    assert ast.literal_eval(assigned["adql"]) == adql  # the query, exactly, as a string
    assert all(line.isprintable() for line in source.splitlines())
    assert catalog_cell_source(_result("javascript:alert(1)", "SELECT 1")) is None
    assert catalog_cell_source(_result("https://x.org/tap'); import os; ('", "SELECT 1")) is None
    assert catalog_cell_source({"is_error": True, "metadata": {}}) is None


@pytest.mark.skipif(not dachs.installed(), reason="GAVO DaCHS is not installed (.ci/run installs gavodachs2-server)")
def test_the_exported_code_runs_with_pyvo_alone(dachs_server: Any) -> None:
    source = catalog_cell_source(_result(dachs_server.tap_url, "SELECT TOP 3 source_id, ra FROM astrojup.stars ORDER BY source_id"))
    namespace: dict[str, Any] = {}
    exec(compile(source, "<exported cell>", "exec"), namespace)  # noqa: S102 - the cell as a user would run it
    assert list(namespace["table"]["source_id"]) == [0, 1, 2]
