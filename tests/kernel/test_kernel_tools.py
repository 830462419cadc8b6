"""``%astro`` line magics: tools run directly, arguments, interpolation, return values, errors."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import _thread
import time
from pathlib import Path

import pytest
from IPython.core.error import UsageError


def test_load_ext_is_light() -> None:
    code = (
        "import sys, time; from IPython.testing.globalipapp import start_ipython; ip = start_ipython();"
        "before = set(sys.modules); ip.run_line_magic('load_ext', 'astro_jupyter'); new = set(sys.modules) - before;"
        "heavy = [m for m in ('openai', 'fitz', 'pymupdf', 'numpy', 'ipywidgets', 'aiosqlite', 'httpx2', 'nbformat') if m in new];"
        "print(heavy); print('astro' in ip.magics_manager.magics['line'], 'astro' in ip.magics_manager.magics['cell'])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    heavy, registered = out.stdout.strip().splitlines()[-2:]
    assert heavy == "[]"
    assert registered == "True True"


def test_help_and_tools_table(load, capsys) -> None:
    ip = load()
    ip.run_line_magic("astro", "")
    assert "%astro tools" in capsys.readouterr().out
    table = ip.run_line_magic("astro", "tools")
    by_name = {row["name"]: row for row in table.rows}
    assert by_name["read_file"]["read-only"] == "yes" and by_name["read_file"]["deferred"] == ""
    assert by_name["parse_paper"]["deferred"] == "yes"
    assert "<table>" in table._repr_html_() and "query_target" in table._repr_html_()
    text = repr(table)
    assert text.splitlines()[1].split() == ["name", "read-only", "deferred", "summary"]


def test_read_file_and_glob_with_interpolation(load, project: Path) -> None:
    (project / "notes.txt").write_text("first line\nsecond line\nthird\n")
    (project / "data").mkdir()
    (project / "data" / "m31.csv").write_text("ra,dec\n")
    ip = load()
    ip.run_cell("p = 'notes.txt'\nn = 2\nr = %astro read_file path={p} offset={n} limit=1")
    r = ip.user_ns["r"]
    assert not r.is_error and r.content.startswith("     2\tsecond line")
    assert r.data["start_line"] == 2 and r.metadata["total_lines"] == 3
    for _ in range(4):  # re-running a cell is not an agent loop
        again = ip.run_line_magic("astro", "read_file path=notes.txt limit=1")
        assert not again.is_error and "first line" in again.content
    g = ip.run_line_magic("astro", 'glob_files {"pattern": "*.csv"}')
    assert g.data["paths"] == ["data/m31.csv"]
    assert "data/m31.csv" in repr(g)


def test_query_target_against_fake_sesame(load, sesame_server, monkeypatch) -> None:
    monkeypatch.setenv("ASTRO_SESAME_URL", sesame_server.url)
    ip = load()
    ip.run_cell('target = "M 31"\nr = %astro query_target name={target}')
    r = ip.user_ns["r"]
    assert not r.is_error, r.content
    assert "M  31" in r.content or "M 31" in r.content
    assert abs(r.data["ra_deg"] - 10.68) < 0.01
    html = r._repr_html_()
    assert "<table>" in html and "ra_deg" in html
    assert sesame_server.names_asked[-1] == "M 31"
    missing = ip.run_line_magic("astro", 'query_target name="No Such Object 12345"')
    assert missing.is_error and "not found" in missing.content


def test_unknown_tool_and_malformed_arguments(load) -> None:
    ip = load()
    r = ip.run_line_magic("astro", "no_such_tool x=1")
    assert r.is_error and "unknown tool 'no_such_tool'" in r.content and "read_file" in r.content
    with pytest.raises(UsageError, match="key=value"):
        ip.run_line_magic("astro", "read_file notes.txt")
    with pytest.raises(UsageError, match="do not parse"):
        ip.run_line_magic("astro", 'read_file {"path": }')
    with pytest.raises(UsageError, match="cannot interpolate"):
        ip.run_line_magic("astro", "read_file path={undefined_variable_xyz}")
    bad_type = ip.run_line_magic("astro", "read_file path=notes.txt limit=\"many\"")
    assert bad_type.is_error and "limit" in bad_type.content


def test_interrupt_during_a_tool_keeps_the_kernel_usable(load, project: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("ASTRO_PERMISSION_RULES", json.dumps([{"action": "allow", "tool": "run_bash"}]))
    (project / "x.txt").write_text("still here\n")
    ip = load()
    timer = threading.Timer(0.7, _thread.interrupt_main)
    timer.start()
    started = time.monotonic()
    result = ip.run_line_magic("astro", 'run_bash command="sleep 20"')
    assert time.monotonic() - started < 8
    assert result is None
    assert "Interrupted: run_bash was cancelled" in capsys.readouterr().out
    after = ip.run_line_magic("astro", "read_file path=x.txt")
    assert "still here" in after.content


def test_run_bash_asks_in_the_terminal(load, monkeypatch) -> None:
    ip = load()
    answers = iter(["n", "y"])
    monkeypatch.setattr("builtins.input", lambda prompt="": next(answers))
    denied = ip.run_line_magic("astro", 'run_bash command="echo hi"')
    assert denied.is_error and "Permission denied" in denied.content
    allowed = ip.run_line_magic("astro", 'run_bash command="echo hi"')
    assert not allowed.is_error and "hi" in allowed.content


def test_sessions_and_model_without_llm(load, capsys) -> None:
    ip = load()
    sessions = ip.run_line_magic("astro", "sessions")
    assert len(sessions) == 0 and "no sessions yet" in repr(sessions)
    assert ip.run_line_magic("astro", "model") == "gpt-4o-mini"
    assert ip.run_line_magic("astro", "model other-model") == "other-model"
    assert "other-model" in capsys.readouterr().out


def test_missing_llm_configuration_is_explained(load) -> None:
    ip = load()
    with pytest.raises(UsageError, match="OPENAI_BASE_URL") as info:
        ip.run_cell_magic("astro", "", "What is M 31?")
    assert "c.AstroConfig.openai_base_url" in str(info.value)
    with pytest.raises(UsageError, match="OPENAI_BASE_URL"):
        ip.run_line_magic("astro", 'subagent "look up M 31"')


def test_config_from_ipython_config(load, tmp_path: Path) -> None:
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    home = tmp_path / "configured_home"
    shell.config.AstroConfig.llm_model = "model-from-ipython-config"
    shell.config.AstroConfig.home = str(home)
    try:
        ip = load()
        assert ip.run_line_magic("astro", "model") == "model-from-ipython-config"
        ip.run_line_magic("astro", "sessions")
        assert (home / "astro.db").exists()  # the store opened where the config said
    finally:
        del shell.config.AstroConfig["llm_model"]
        del shell.config.AstroConfig["home"]


def test_query_target_offers_a_skycoord_and_a_table(load, sesame_server, monkeypatch) -> None:
    from astropy.coordinates import SkyCoord

    monkeypatch.setenv("ASTRO_SESAME_URL", sesame_server.url)
    ip = load()
    ip.run_cell('r = %astro query_target name="M 31"')
    r = ip.user_ns["r"]
    c = r.skycoord
    assert isinstance(c, SkyCoord) and c.frame.name == "icrs"
    assert abs(c.ra.deg - 10.684708) < 1e-6 and abs(c.dec.deg - 41.26875) < 1e-6
    assert c.to_string("hmsdms", precision=1).startswith("00h42m44.3s +41d16m07.5s")
    row = r.to_table()
    assert len(row) == 1 and row["main_id"][0] == "M 31" and abs(row["ra_deg"][0] - 10.684708) < 1e-6
    missing = ip.run_line_magic("astro", 'query_target name="No Such Object 12345"')
    with pytest.raises(AttributeError, match="no position"):
        missing.skycoord


def test_conversions_say_how_to_install_a_missing_package(monkeypatch) -> None:
    from astro_jupyter.cells.display import AstroResult

    r = AstroResult("search_papers", {}, "1 paper", False, {"results": [{"title": "A", "year": 2020}]})
    monkeypatch.setitem(sys.modules, "pandas", None)  # as if pandas were not installed
    monkeypatch.setitem(sys.modules, "astropy.table", None)
    with pytest.raises(ImportError, match="pip install pandas"):
        r.to_pandas()
    with pytest.raises(ImportError, match="pip install astropy"):
        r.to_table()


def test_a_trailing_comment_is_not_an_argument(load, sesame_server, monkeypatch) -> None:
    """The README writes `r = %astro query_target name="M 31"   # r.content, ...`: that runs as written."""
    from astro_jupyter.cells.parsing import parse_tool_arguments

    assert parse_tool_arguments('name="M 31"   # r.content, r.data') == {"name": "M 31"}
    assert parse_tool_arguments('{"path": "notes.md", "limit": 20}  # first lines') == {"path": "notes.md", "limit": 20}
    assert parse_tool_arguments("pattern=a#b") == {"pattern": "a#b"}  # inside a value it is text
    monkeypatch.setenv("ASTRO_SESAME_URL", sesame_server.url)
    ip = load()
    outcome = ip.run_cell('r = %astro query_target name="M 31"            # r.content, r.data (structured), r.is_error')
    assert outcome.success and ip.user_ns["r"].data["main_id"] == "M 31"
    hits = ip.run_line_magic("astro", 'history "M 31"                   # also: %astro sessions')
    assert hits.title == "history: M 31"
