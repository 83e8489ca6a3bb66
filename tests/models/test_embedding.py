"""The MiniLM sentence embedder, checked against sentence-transformers' own vectors.

`tests/fixtures/minilm_reference.json` holds vectors made by sentence-transformers'
`encode` (its `made_with` field says which versions); our numpy forward pass must agree
to cosine > 0.999 on each text (an empty one, a Chinese one, and one past the 256-piece
truncation among them). Skips, saying so, when the model or its runtime is not installed.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from dialogbench.models.embedding import (
    INSTALL_MINILM,
    EmbedderUnavailable,
    MiniLMEmbedder,
    load_embedder,
    minilm_dir,
)

REFERENCE = Path(__file__).resolve().parents[1] / "fixtures" / "minilm_reference.json"


def _why_not_runnable() -> str | None:
    for package in ("tokenizers", "safetensors"):
        if importlib.util.find_spec(package) is None:
            return f"{package} is not installed (pip install 'dialogbench[dense]')"
    try:
        minilm_dir()
    except EmbedderUnavailable:
        return f"the MiniLM model is not installed ({INSTALL_MINILM})"
    return None


needs_minilm = pytest.mark.skipif(_why_not_runnable() is not None, reason=str(_why_not_runnable()))


@needs_minilm
def test_matches_sentence_transformers_reference() -> None:
    reference = json.loads(REFERENCE.read_text(encoding="utf-8"))
    expected = np.asarray(reference["vectors"], dtype=np.float64)
    embedder = load_embedder("minilm")
    got = embedder.encode(reference["texts"], batch_size=3)
    assert got.dtype == np.float32
    assert got.shape == (len(reference["texts"]), embedder.dim) == expected.shape
    cosine = (got * expected).sum(axis=1) / np.linalg.norm(expected, axis=1)
    assert (cosine > 0.999).all(), dict(zip(reference["texts"], cosine.round(5), strict=True))


@needs_minilm
def test_rows_are_unit_length_and_independent_of_batching() -> None:
    embedder = load_embedder()
    texts = ["short", "a somewhat longer sentence about a trip to the lake", "", "short", "hi"]
    whole = embedder.encode(texts, batch_size=32)
    one_by_one = np.vstack([embedder.encode([t]) for t in texts])
    np.testing.assert_allclose(np.linalg.norm(whole, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(whole, one_by_one, atol=1e-5)
    np.testing.assert_allclose(whole[0], whole[3], atol=1e-6)
    assert embedder.name == "minilm" and embedder.dim == 384
    assert embedder.encode([]).shape == (0, 384)
    assert load_embedder(" MiniLM ") is embedder  # loaded once per process


@needs_minilm
def test_bad_calls_say_what_is_wrong() -> None:
    embedder = load_embedder()
    with pytest.raises(TypeError, match="sequence of texts"):
        embedder.encode("one string")
    with pytest.raises(ValueError, match="batch_size"):
        embedder.encode(["x"], batch_size=0)


def test_unknown_name_and_missing_files_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown embedder 'bert'; known: minilm"):
        load_embedder("bert")
    if importlib.util.find_spec("tokenizers") and importlib.util.find_spec("safetensors"):
        with pytest.raises(EmbedderUnavailable, match=r"no config\.json here"):
            MiniLMEmbedder(model_dir=tmp_path)
