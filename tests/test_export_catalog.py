"""The exported log re-runs a catalog query as plain pyvo code (no astro-jupyter needed)."""

from __future__ import annotations

import ast
import json
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


@pytest.mark.skipif(not dachs.installed(), reason="GAVO DaCHS is not installed (.ci/run installs gavodachs2-server)")
@pytest.mark.asyncio
async def test_an_exported_session_holds_the_plain_pyvo_cell_of_its_catalog_query(
        dachs_server: Any, openai_server: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """A real run (scripted model) calls query_catalog on DaCHS; ``astro-jupyter export`` writes the log,
    whose cell for that call is the pyvo code, with the recorded result, and re-runs without astro-jupyter."""
    import asyncio

    import nbformat

    from astro_jupyter.agent.runtime import AgentRuntime
    from astro_jupyter.cli import main
    from astro_jupyter.config import AstroConfig
    from astro_jupyter.services.container import ServiceContainer
    from tests.fakes.openai_server import Turn

    adql = "SELECT TOP 3 source_id, ra, dec FROM astrojup.stars ORDER BY source_id"
    for name, value in {"ASTRO_TAP_SERVICES": json.dumps({"local": dachs_server.tap_url}),
                        "OPENAI_BASE_URL": openai_server.url, "OPENAI_API_KEY": "sk-test",
                        "LLM_MODEL": "scripted-model", "ASTRO_PROJECT_ROOT": str(tmp_path)}.items():
        monkeypatch.setenv(name, value)
    openai_server.script(
        Turn.call("load_tool", {"names": ["query_catalog"]}),
        Turn.call("query_catalog", {"service": "local", "adql": adql}),
        Turn.say("The first three stars are source_id 0, 1 and 2."),
    )
    services = await ServiceContainer(AstroConfig()).start()
    runtime = AgentRuntime(services)
    try:
        handle = await runtime.start_run("List the first three stars of the local catalog", source="cli")
        await handle.wait()
        sid = handle.session_id
    finally:
        await runtime.close()
        await services.close()
    assert openai_server.remaining == 0

    target = tmp_path / "log.ipynb"
    assert await asyncio.to_thread(main, ["export", sid, "-o", str(target)]) == 0
    nb = nbformat.read(target, as_version=4)
    nbformat.validate(nb)
    # load_tool is an agent step (Markdown); the query is the one code cell after %load_ext
    [cell] = [c for c in nb.cells if c.cell_type == "code" and c.source != "%load_ext astro_jupyter"]
    assert not cell.source.startswith("%astro") and "query_catalog" not in cell.source  # plain pyvo, not the magic
    lines = cell.source.splitlines()
    assert "import pyvo" in lines
    assert f"service = pyvo.dal.TAPService({dachs_server.tap_url!r})" in lines
    assert f"adql = {adql!r}" in lines and "result = service.run_sync(adql, maxrec=10000)" in lines
    # the recorded result stays with the cell, as the live call showed it
    assert any("3 rows from local" in o.get("data", {}).get("text/plain", "") for o in cell.outputs)
    assert "The first three stars are source_id 0, 1 and 2." in nb.cells[-1].source
    namespace: dict[str, Any] = {}
    exec(compile(cell.source, "<exported cell>", "exec"), namespace)  # noqa: S102 - the cell as the reader runs it
    assert list(namespace["table"]["source_id"]) == [0, 1, 2]
