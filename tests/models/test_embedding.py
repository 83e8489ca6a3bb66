"""The MiniLM sentence embedder, checked against sentence-transformers' own vectors.

`tests/fixtures/minilm_reference.json` holds vectors made by sentence-transformers'
`encode` (its `made_with` field says which versions); our numpy forward pass must agree
to cosine > 0.999 on each text (an empty one, a Chinese one, and one past the 256-piece
truncation among them). Skips, saying so, when the model or its runtime is not installed.
"""

from __future__ import annotations

import importlib.util
import io
import json
from pathlib import Path

import numpy as np
import pytest

from dialogbench.models import embedding
from dialogbench.models.embedding import (
    INSTALL_MINILM,
    EmbedderUnavailable,
    MiniLMEmbedder,
    _bucket,
    _ConcatenatedParts,
    load_embedder,
    minilm_dir,
    mpnet_parts,
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


# -- all-mpnet-base-v2 (the optional `mpnet` extra) -------------------------------------------


def _mpnet_missing() -> str | None:
    try:
        mpnet_parts()
    except EmbedderUnavailable as e:
        return str(e)
    if not (importlib.util.find_spec("tokenizers") and importlib.util.find_spec("safetensors")):
        return "the dense extra (tokenizers, safetensors) is not installed"
    return None


def test_relative_position_buckets_follow_mpnet() -> None:
    # T5/MPNet bidirectional buckets (32, max distance 128), worked by hand: memory - context
    rel = np.array([0, 1, -1, 7, -7, 8, 15, 17, 127, 128, 500, -500], dtype=np.int64)
    want = [0, 17, 1, 23, 7, 24, 25, 26, 31, 31, 31, 15]
    assert _bucket(rel, 32, 128).tolist() == want


def test_split_parts_read_as_one_file(tmp_path: Path) -> None:
    blob = bytes(range(256)) * 40
    cuts = [0, 1000, 1001, 7000, len(blob)]
    paths = []
    for k in range(len(cuts) - 1):
        paths.append(tmp_path / f"part{k}")
        paths[-1].write_bytes(blob[cuts[k] : cuts[k + 1]])
    with _ConcatenatedParts(paths) as f:
        assert f.read() == blob
        f.seek(995)
        assert f.read(10) == blob[995:1005]
        f.seek(-3, io.SEEK_END)
        assert f.read() == blob[-3:] and f.tell() == len(blob)


def test_without_mpnet_the_default_is_minilm(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing() -> list[Path]:
        raise EmbedderUnavailable("no mpnet")

    monkeypatch.setattr(embedding, "mpnet_parts", missing)
    monkeypatch.setattr(embedding, "minilm_dir", lambda: Path("."))
    assert embedding.available_embedder() == "minilm"
    assert embedding.available_embedder(("minilm", "mpnet")) == "minilm"


@pytest.mark.skipif(_mpnet_missing() is not None, reason=str(_mpnet_missing()))
def test_mpnet_embeds_paraphrases_close_and_batches_like_single_texts() -> None:
    embedder = load_embedder("mpnet")
    texts = ["Is not in a relationship", "Is single", "Quantum chromodynamics is hard", "x"]
    whole = embedder.encode(texts)
    one_by_one = np.vstack([embedder.encode([t]) for t in texts])
    assert embedder.name == "mpnet" and embedder.dim == 768 and whole.shape == (4, 768)
    np.testing.assert_allclose(np.linalg.norm(whole, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(whole, one_by_one, atol=1e-4)  # padding changes nothing
    assert whole[0] @ whole[1] > 0.5 > whole[0] @ whole[2]
