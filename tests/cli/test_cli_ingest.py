"""``astro-jupyter library ingest``: PDFs parsed and embedded by worker processes (or a Dask cluster),
stored by the command itself; the same chunks and vectors as ``library add``; reruns skip what is in;
failures listed at the end."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from astro_jupyter.cli import main
from tests.fakes.pdf_corpus import library_snapshot, make_corpus


@pytest.fixture
def corpus(shared_pdfs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ASTRO_EMBED_MODEL", "lexical")  # no LLM endpoint in these tests: the same everywhere
    folder = tmp_path / "corpus"
    make_corpus(shared_pdfs, folder, 4, pages=2)
    return folder


def _ingest(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict, str]:
    code = main(["library", "ingest", *argv, "--json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


def _reference_library(corpus: Path, home: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    """The same PDFs through the one-at-a-time path (``library add`` of each), in another library."""
    monkeypatch.setenv("ASTRO_HOME", str(home))
    for pdf in sorted(corpus.glob("*.pdf")):
        assert main(["library", "add", str(pdf)]) == 0
    return asyncio.run(library_snapshot(home))


def test_workers_store_what_library_add_stores_and_a_rerun_skips_it(
    corpus: Path, astro_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = corpus / "zz-broken.pdf"
    broken.write_text("this is not a PDF")
    code, out, _ = _ingest(capsys, str(corpus), "--workers", "2")
    assert code == 1  # a failure: listed, and the exit status says so
    assert out["workers"] == "2 processes" and out["total"] == 5
    assert len(out["ingested"]) == 4 and out["skipped"] == []
    assert list(out["failed"]) == [str(broken.resolve())]
    assert "not a readable PDF" in out["failed"][str(broken.resolve())]
    ingested = asyncio.run(library_snapshot(astro_home))

    broken.unlink()
    code, again, err = _ingest(capsys, str(corpus), "--workers", "2")
    assert code == 0 and again["ingested"] == [] and len(again["skipped"]) == 4 and again["failed"] == {}

    reference = _reference_library(corpus, tmp_path / "reference-home", monkeypatch)
    assert sorted(ingested) == sorted(reference) and len(ingested) == 4
    for title, chunks in reference.items():
        assert ingested[title] == chunks, title  # same passages, same vectors
        assert chunks and all(vector is not None for _s, part, _t, vector in chunks if part != "references")


def test_progress_lines_and_the_failures_listed_at_the_end(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pdfs = sorted(corpus.glob("*.pdf"))
    reading_list = tmp_path / "reading-list.txt"  # relative paths, a comment, a missing file
    reading_list.write_text(f"# our group's list\n{Path('corpus') / pdfs[0].name}\n\n{pdfs[1]}\nmissing.pdf\n")
    assert main(["library", "ingest", str(reading_list)]) == 1
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    # one line per paper as it is done (the missing file fails at once, perhaps before a paper still
    # being parsed), counted in the order they end
    assert [line.split(" ", 1)[0] for line in lines[:3]] == ["[1/3]", "[2/3]", "[3/3]"]
    said = dict(line.split(" ", 1)[1].split(": ", 1) for line in lines[:3])
    assert said[pdfs[0].name].startswith("local:ingest-corpus-paper-0000")
    assert said[pdfs[1].name].startswith("local:")
    assert said["missing.pdf"] == "FAILED: no such PDF file: " + str(tmp_path / "missing.pdf")
    assert lines[-1] == f"astro-jupyter: {tmp_path / 'missing.pdf'}: no such PDF file: {tmp_path / 'missing.pdf'}"
    assert captured.out.startswith("2 papers ingested, 0 already in the library, 1 failed, of 3 (1 process;")


def test_bad_arguments_are_refused_with_a_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["library", "ingest", str(tmp_path / "nothing-here")]) == 1
    assert "not a folder, a reading list" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["library", "ingest", str(tmp_path / "empty")]) == 1
    assert "holds no PDF files" in capsys.readouterr().err
    assert main(["library", "ingest", str(tmp_path), "--workers", "0"]) == 1
    assert "--workers must be at least 1" in capsys.readouterr().err


@pytest.mark.slow
def test_a_dask_cluster_gives_the_same_library_as_one_process(
    corpus: Path, astro_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    distributed = pytest.importorskip("distributed", reason="dask.distributed is not installed (the test extra has it)")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        code, out, _ = _ingest(capsys, str(corpus), "--dask-scheduler", cluster.scheduler_address)
    assert code == 0 and len(out["ingested"]) == 4, out
    assert out["workers"] == f"Dask at {cluster.scheduler_address} (2 worker threads)"
    on_dask = asyncio.run(library_snapshot(astro_home))

    monkeypatch.setenv("ASTRO_HOME", str(tmp_path / "one-process"))
    code, out, _ = _ingest(capsys, str(corpus), "--workers", "1")
    assert code == 0 and out["workers"] == "1 process"
    assert on_dask == asyncio.run(library_snapshot(tmp_path / "one-process")) and len(on_dask) == 4


@pytest.mark.slow
def test_a_cluster_gets_a_few_papers_a_task_and_a_broken_one_fails_alone(
    shared_pdfs: Path, tmp_path: Path, astro_home: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each Dask task costs the client and the scheduler a few milliseconds: many papers go a few to a task
    (fewer tasks than papers), yet each paper is stored, reported and fails on its own."""
    distributed = pytest.importorskip("distributed", reason="dask.distributed is not installed (the test extra has it)")
    monkeypatch.setenv("ASTRO_EMBED_MODEL", "lexical")
    folder = tmp_path / "corpus"
    make_corpus(shared_pdfs, folder, 24, pages=1)
    broken = folder / "paper-0005-broken.pdf"  # sorted among the first papers: inside a batch of several
    broken.write_text("this is not a PDF")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as watcher, distributed.get_task_stream(watcher) as stream:
        code, out, _ = _ingest(capsys, str(folder), "--dask-scheduler", cluster.scheduler_address)
    assert code == 1 and out["total"] == 25 and len(out["ingested"]) == 24, out
    assert list(out["failed"]) == [str(broken.resolve())] and "not a readable PDF" in out["failed"][str(broken.resolve())]
    tasks = {task["key"] for task in stream.data}
    assert 2 <= len(tasks) < 25, tasks  # batched: fewer tasks than papers
    on_dask = asyncio.run(library_snapshot(astro_home))

    broken.unlink()
    monkeypatch.setenv("ASTRO_HOME", str(tmp_path / "one-process"))
    code, out, _ = _ingest(capsys, str(folder), "--workers", "1")
    assert code == 0 and len(out["ingested"]) == 24
    assert on_dask == asyncio.run(library_snapshot(tmp_path / "one-process")) and len(on_dask) == 24


@pytest.mark.slow
def test_an_unreachable_scheduler_is_a_clear_error(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("distributed", reason="dask.distributed is not installed (the test extra has it)")
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    assert main(["library", "ingest", str(corpus), "--dask-scheduler", f"tcp://127.0.0.1:{port}"]) == 1
    assert f"cannot reach the Dask scheduler at tcp://127.0.0.1:{port}" in capsys.readouterr().err


@pytest.mark.slow
def test_an_interrupted_ingest_leaves_whole_papers_and_the_rerun_goes_on(
    shared_pdfs: Path, tmp_path: Path, astro_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import os
    import signal
    import subprocess
    import sys

    folder = tmp_path / "big"
    total = 40  # enough work that the interrupt always lands while papers are still going (8 small ones
    make_corpus(shared_pdfs, folder, total, pages=6)  # could all be stored before the signal on a quiet machine)
    env = {**os.environ, "ASTRO_HOME": str(astro_home), "ASTRO_EMBED_MODEL": "lexical"}
    proc = subprocess.Popen([sys.executable, "-m", "astro_jupyter.cli", "library", "ingest", str(folder)],
                            env=env, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            # a runner started in the background ignores SIGINT, and so would the child: Ctrl-C as in a terminal
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    first = proc.stderr.readline()  # the first paper is stored: interrupt while the others go on
    assert first.startswith(f"[1/{total}] paper-0000.pdf: local:"), first
    proc.send_signal(signal.SIGINT)
    _out, rest = proc.communicate(timeout=120)
    assert proc.returncode == 130, rest
    assert "interrupted after" in rest and "run the same command again to go on" in rest
    done = int(rest.split("interrupted after ")[1].split()[0])
    assert 1 <= done < total

    assert main(["library", "list", "--json"]) == 0
    papers = json.loads(capsys.readouterr().out)
    assert len(papers) == done and {p["state"] for p in papers} == {"parsed"}  # no paper half-written
    stored = asyncio.run(library_snapshot(astro_home))
    assert len(stored) == done
    assert all(chunks and all(v is not None for _s, part, _t, v in chunks if part != "references")
               for chunks in stored.values())
    code, out, _ = _ingest(capsys, str(folder))
    assert code == 0 and len(out["skipped"]) == done and len(out["ingested"]) == total - done


def test_endpoint_embeddings_from_the_workers_equal_library_adds(
    shared_pdfs: Path, tmp_path: Path, astro_home: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch, openai_server: object
) -> None:
    """Workers embed through the LLM endpoint themselves (the library's model, its URL and key)."""
    folder = tmp_path / "corpus"
    make_corpus(shared_pdfs, folder, 2, pages=16)  # 16 body pages: more than one embedding batch
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.url)  # type: ignore[attr-defined]
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    monkeypatch.setenv("ASTRO_EMBED_MODEL", "text-embedding-3-small")
    code, out, _ = _ingest(capsys, str(folder), "--workers", "2")
    assert code == 0 and len(out["ingested"]) == 2, out
    embed_requests = [r for r in openai_server.requests if r.path.endswith("/embeddings")]  # type: ignore[attr-defined]
    assert embed_requests and all({k.lower(): v for k, v in r.headers.items()}.get("authorization") == "Bearer k"
                                  for r in embed_requests)
    ingested = asyncio.run(library_snapshot(astro_home))
    reference = _reference_library(folder, tmp_path / "reference-home", monkeypatch)
    assert ingested == reference and len(reference) == 2
    assert any(len(chunks) > 32 for chunks in reference.values())  # a paper needed two batches
