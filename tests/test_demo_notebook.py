"""The Binder demo notebook runs top to bottom with no API key and no network."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import nbformat
import pytest

DEMO = Path(__file__).resolve().parents[1] / "binder" / "demo.ipynb"


def _text(cell: nbformat.NotebookNode) -> str:
    parts = []
    for out in cell.get("outputs", []):
        parts.append(out.get("text", "") or out.get("data", {}).get("text/plain", ""))
    return "\n".join(parts)


@pytest.mark.slow
def test_demo_notebook_executes_offline(tmp_path: Path, astro_home: Path) -> None:
    from nbclient import NotebookClient

    if shutil.which("astro-jupyter") is None:
        pytest.skip("the astro-jupyter console script is not installed (pip install -e .)")
    nb = nbformat.read(DEMO, as_version=4)
    assert os.environ["ASTRO_HOME"] == str(astro_home)
    assert "OPENAI_API_KEY" not in os.environ and "OPENAI_BASE_URL" not in os.environ
    NotebookClient(nb, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()

    code = [c for c in nb.cells if c.cell_type == "code"]
    errors = [o for c in code for o in c.outputs if o.output_type == "error"]
    assert errors == []
    by_source = {c.source.splitlines()[0]: _text(c) for c in code}
    assert "+41:16:07.5" in by_source['m31 = %astro query_target name="M 31"']
    assert "(10.684708333333331, 41.268750000000004, 'AGN')" in by_source['m31.data["ra_deg"], m31.data["dec_deg"], m31.data["otype"]']
    assert "3 papers" in by_source["papers = %astro library list"]
    parse = by_source['halo = next(row["id"] for row in papers.rows if "Milky Way" in row["title"])']
    assert "Sections: Abstract; 1 Introduction; 2 Data; 3 Method; 4 Results; 5 Discussion" in parse
    assert "Excluding Leo I lowers the virial mass" in by_source['%astro get_paper_content paper_id={halo} section="Results"']
    rag = by_source['%astro rag_search query="Is Leo I bound, and how does that change the virial mass?" k=3']
    assert "[1] The Mass of the Milky Way Halo beyond 100 kpc" in rag
    assert "«halo»" in by_source['%astro search_history query="halo mass"']
    assert "No LLM configured" in by_source["import os"]
    assert "400 rows" in by_source["from astro_jupyter.demo import demo_catalog"]  # the shipped catalog, offline
    assert "(400, 'deg', 'pos.eq.ra;meta.main')" in by_source["stars = r.to_table()  # every row, with units and UCDs"]
    assert "gmag" in by_source['r.to_pandas().query("gmag < 13")[["source_id", "gmag", "plx"]].head()']
    assert (astro_home / "astro.db").is_file()
