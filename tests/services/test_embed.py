"""Embedding backends: lexical hashing, choice of backend, the endpoint through the real client."""

from __future__ import annotations

import numpy as np
import pytest

from astro_jupyter.config import AstroConfig
from astro_jupyter.llm.client import LlmClient
from astro_jupyter.services.embed import (
    LEXICAL_DIM,
    EndpointEmbedder,
    LexicalEmbedder,
    active_embedding_backend,
    local_model_available,
    make_embedder,
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


def test_backend_choice(tmp_path) -> None:
    base = dict(home=str(tmp_path))
    assert active_embedding_backend(AstroConfig(**base)) == ("local:all-MiniLM-L6-v2" if local_model_available() else "lexical-v2")
    assert active_embedding_backend(AstroConfig(embed_model="lexical", **base)) == "lexical-v2"
    # a model name without an endpoint cannot be used
    assert active_embedding_backend(AstroConfig(embed_model="text-embedding-3-small", **base)) != "endpoint:text-embedding-3-small"
    cfg = AstroConfig(embed_model="text-embedding-3-small", openai_base_url="http://127.0.0.1:9/v1", **base)
    assert active_embedding_backend(cfg) == "endpoint:text-embedding-3-small"
    assert isinstance(make_embedder(cfg, LlmClient(cfg)), EndpointEmbedder)
    assert make_embedder(AstroConfig(embed_model="lexical", **base)).name == "lexical-v2"


def test_local_model_extra_not_installed_here() -> None:
    import importlib.util

    if importlib.util.find_spec("sentence_transformers") is None:
        assert local_model_available() is False
        assert active_embedding_backend(AstroConfig(embed_model="local")) == "lexical-v2"


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
