"""mem0 (PyPI `mem0ai`), in its open-source local mode, as a memory system (`--memory mem0`).

    pip install 'dialogbench[mem0]'
    export DIALOGBENCH_MEM0_BASE_URL=http://127.0.0.1:8000/v1   # an OpenAI-compatible server
    export DIALOGBENCH_MEM0_MODEL=my-model
    dialogbench run retrieval --memory mem0 ...

Each subject is a mem0 user (`user_id`: the subject id, percent-encoded where it holds
whitespace, which mem0 refuses). `ingest` hands the messages to `Memory.add` as role/content
messages (`"[date] speaker: text"`), `messages_per_add` at a time, with their message ids in
the metadata (`message_ids`); mem0's LLM extracts facts from them and stores those. `recall`
is `Memory.search` over the user's facts: text memories, each citing the message ids of the
`add` it came from (with one message per add, the default, exactly the message it was drawn
from; more per add saves LLM calls but cites them all). `reset` is `delete_all(user_id)`,
`dump` is `get_all`. A recall with `Budget(k=None)` asks for up to `max_k` memories.

Configuration (arguments, else environment variables):

    base_url        DIALOGBENCH_MEM0_BASE_URL       mem0's LLM: an OpenAI-compatible endpoint
    model           DIALOGBENCH_MEM0_MODEL          its model name (both required)
    api_key_env     the variable holding the LLM's and the embedder's key
                    (default DIALOGBENCH_MEM0_API_KEY; unset: any key, as local servers take)
    embed_base_url  DIALOGBENCH_MEM0_EMBED_BASE_URL an OpenAI-compatible /v1/embeddings
                                                    (default: base_url)
    embed_model     DIALOGBENCH_MEM0_EMBED_MODEL    default all-MiniLM-L6-v2
    embed_dims      DIALOGBENCH_MEM0_EMBED_DIMS     default 384
    vector_store    DIALOGBENCH_MEM0_VECTOR_STORE   qdrant (in-process, on disk; default) or faiss
    path            DIALOGBENCH_MEM0_DIR            the store's folder (default: a fresh
                                                    temporary folder, removed by close())
    infer           DIALOGBENCH_MEM0_INFER          1 (default): facts extracted by the LLM;
                                                    0: messages stored as they are, no LLM call

Costs: the LLM calls and tokens mem0 makes are counted from the LLM's replies (mem0's
`response_callback`): an ingest returns what its `add` calls cost, a recall what its search
cost (no LLM call in mem0's search: zero). Embedding calls are not model tokens and are not
counted. A reply the LLM gives that is not the JSON mem0 asks for (mem0 then silently stores
nothing) is counted in `unparsable_replies` and logged.

mem0's telemetry is switched off (MEM0_TELEMETRY=False) unless the environment sets it: a
benchmark run sends nothing anywhere but to the endpoints configured here. mem0 is imported
only when a `Mem0Memory` is built, so this module imports without it.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import tempfile
import threading
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dialogbench.data.model import Message
from dialogbench.memory.base import Budget, Memory, Query, Recall, SystemCost
from dialogbench.memory.http import public_url

logger = logging.getLogger(__name__)

ENV = "DIALOGBENCH_MEM0_"
INSTALL = "pip install 'dialogbench[mem0]'"
VECTOR_STORES = ("qdrant", "faiss")


class Mem0Error(RuntimeError):
    """mem0 is missing, misconfigured or failed; the message says which and what to do."""


def _env(name: str, given: str | None) -> str | None:
    return given if given is not None else (os.environ.get(ENV + name) or None)


def user_id(subject: str) -> str:
    """The mem0 user id of a subject: the id itself, percent-encoded where needed (mem0
    refuses whitespace), so that two subjects never share one."""
    return urllib.parse.quote(subject, safe="") if subject.strip() else "%20"


def message_content(m: Message, dates: bool = True) -> str:
    """What mem0 is told of a message: `[YYYY-MM-DD HH:MM] speaker: text`."""
    when = f"[{m.timestamp:%Y-%m-%d %H:%M}] " if dates and m.timestamp is not None else ""
    return f"{when}{m.speaker}: {m.text}"


class _Usage:
    """LLM calls and tokens seen in mem0's LLM replies (thread-safe running totals)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.total = SystemCost()
        self.unparsable = 0

    def __call__(self, llm: object, response: Any, params: object) -> None:
        usage = getattr(response, "usage", None)
        spent = SystemCost(
            1,
            int(getattr(usage, "prompt_tokens", 0) or 0),
            int(getattr(usage, "completion_tokens", 0) or 0),
        )
        bad = False
        if isinstance(params, dict) and params.get("response_format"):
            try:
                content = response.choices[0].message.content or ""
                bad = not isinstance(json.loads(_strip_fence(content)), dict)
            except (ValueError, AttributeError, IndexError, TypeError):
                bad = True
        with self._lock:
            self.total = self.total + spent
            self.unparsable += bad
        if bad:
            logger.warning("mem0's LLM gave a reply that is not a JSON object; mem0 drops it")


def _strip_fence(text: str) -> str:
    text = text.strip()
    if text.startswith("```"):
        text = text.split("\n", 1)[-1].rsplit("```", 1)[0]
    return text


def _spent(before: SystemCost, after: SystemCost) -> SystemCost:
    return SystemCost(
        after.calls - before.calls,
        after.prompt_tokens - before.prompt_tokens,
        after.completion_tokens - before.completion_tokens,
    )


class Mem0Memory:
    """mem0's open-source `Memory` behind the memory-system protocol (module docstring)."""

    name = "mem0"

    def __init__(
        self,
        *,
        base_url: str | None = None,
        model: str | None = None,
        api_key_env: str = ENV + "API_KEY",
        embed_base_url: str | None = None,
        embed_model: str | None = None,
        embed_dims: int | None = None,
        vector_store: str | None = None,
        path: str | Path | None = None,
        infer: bool | None = None,
        messages_per_add: int = 1,
        dates: bool = True,
        threshold: float = 0.1,
        max_k: int = 100,
    ) -> None:
        Memory = _import_mem0()
        base_url = _env("BASE_URL", base_url)
        model = _env("MODEL", model)
        if not base_url or not model:
            raise Mem0Error(
                "mem0 needs an OpenAI-compatible LLM: set DIALOGBENCH_MEM0_BASE_URL (e.g. "
                "http://127.0.0.1:8000/v1) and DIALOGBENCH_MEM0_MODEL, or pass base_url= and model="
            )
        embed_base_url = _env("EMBED_BASE_URL", embed_base_url) or base_url
        embed_model = _env("EMBED_MODEL", embed_model) or "all-MiniLM-L6-v2"
        dims = embed_dims or int(_env("EMBED_DIMS", None) or 384)
        store = _env("VECTOR_STORE", vector_store) or "qdrant"
        if store not in VECTOR_STORES:
            raise Mem0Error(f"mem0 vector store {store!r}: use one of {', '.join(VECTOR_STORES)}")
        infer_env = _env("INFER", None)
        self.infer = infer if infer is not None else infer_env not in ("0", "false", "no")
        if messages_per_add < 1:
            raise Mem0Error(f"messages_per_add must be at least 1, got {messages_per_add}")
        self.messages_per_add = messages_per_add
        self.dates = dates
        self.threshold = threshold
        self.max_k = max_k
        folder = _env("DIR", None if path is None else str(path))
        self._owned = folder is None
        self.path = Path(folder) if folder else Path(tempfile.mkdtemp(prefix="dialogbench-mem0-"))
        self.path.mkdir(parents=True, exist_ok=True)
        key = os.environ.get(api_key_env) or "none"  # local servers take any key
        self._key = key
        self.settings: dict[str, Any] = {
            "llm": {"base_url": public_url(base_url), "model": model},
            "embedder": {
                "base_url": public_url(embed_base_url),
                "model": embed_model,
                "dims": dims,
            },
            "vector_store": store,
            "infer": self.infer,
            "messages_per_add": messages_per_add,
            "threshold": threshold,
        }
        """What this system is, for a run's manifest (no key)."""
        self._usage = _Usage()
        store_config: dict[str, Any] = {
            "collection_name": "dialogbench",
            "path": str(self.path / store),
            "embedding_model_dims": dims,
        }
        if store == "faiss":
            store_config["distance_strategy"] = "cosine"
        config = {
            "llm": {
                "provider": "openai",
                "config": {
                    "model": model,
                    "openai_base_url": base_url,
                    "api_key": key,
                    "response_callback": self._usage,
                },
            },
            "embedder": {
                "provider": "openai",
                "config": {
                    "model": embed_model,
                    "openai_base_url": embed_base_url,
                    "api_key": key,
                    "embedding_dims": dims,
                },
            },
            "vector_store": {"provider": store, "config": store_config},
            "history_db_path": str(self.path / "history.db"),
        }
        try:
            self._memory: Any = Memory.from_config(config)
        except Exception as e:
            self.close()
            raise Mem0Error(f"mem0 could not be set up: {self._redact(e)}") from None

    def __repr__(self) -> str:
        return (
            f"Mem0Memory({self.settings['llm']['base_url']!r}, {self.settings['llm']['model']!r})"
        )

    @property
    def unparsable_replies(self) -> int:
        """LLM replies that were not the JSON object mem0 asked for (mem0 stored nothing)."""
        return self._usage.unparsable

    def _redact(self, e: BaseException) -> str:
        text = f"{type(e).__name__}: {e}"
        return text.replace(self._key, "***") if len(self._key) >= 3 else text

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as e:  # mem0's own errors, named, the key never shown
            raise Mem0Error(f"mem0 {what} failed: {self._redact(e)}") from None

    # -- the protocol ---------------------------------------------------------------------

    def ingest(self, subject: str, messages: Sequence[Message]) -> SystemCost:
        before = self._usage.total
        step = self.messages_per_add
        for at in range(0, len(messages), step):
            chunk = [m for m in messages[at : at + step] if m.role != "system"]
            if not chunk:
                continue
            self._call(
                "add",
                self._memory.add,
                [{"role": m.role, "content": message_content(m, self.dates)} for m in chunk],
                user_id=user_id(subject),
                metadata={"message_ids": [m.id for m in chunk]},
                infer=self.infer,
            )
        return _spent(before, self._usage.total)

    def recall(self, subject: str, query: Query, budget: Budget) -> Recall:
        before = self._usage.total
        k = self.max_k if budget.k is None else budget.k
        if k <= 0 or not query.text.strip():
            return Recall((), SystemCost())
        got = self._call(
            "search",
            self._memory.search,
            query.text,
            filters={"user_id": user_id(subject)},
            top_k=k,
            threshold=self.threshold,
        )
        memories = tuple(_memory(r) for r in _results(got))
        return Recall(memories, _spent(before, self._usage.total))

    def reset(self, subject: str) -> None:
        self._call("delete_all", self._memory.delete_all, user_id=user_id(subject))

    def dump(self, subject: str) -> list[Memory]:
        got = self._call(
            "get_all", self._memory.get_all, filters={"user_id": user_id(subject)}, top_k=10**6
        )
        return [_memory(r) for r in _results(got)]

    def close(self) -> None:
        """Close the vector store and remove the store's folder when this system made it."""
        memory = getattr(self, "_memory", None)
        client = getattr(getattr(memory, "vector_store", None), "client", None)
        if client is not None and hasattr(client, "close"):
            try:
                client.close()
            except Exception as e:  # closing is best effort
                logger.debug("closing mem0's vector store: %s", e)
        if self._owned:
            shutil.rmtree(self.path, ignore_errors=True)

    def __enter__(self) -> Mem0Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _import_mem0() -> Any:
    """mem0's `Memory` class, telemetry off unless the environment says otherwise."""
    os.environ.setdefault("MEM0_TELEMETRY", "False")
    try:
        from mem0 import Memory
    except ImportError as e:
        raise Mem0Error(f"mem0 is not installed ({e}); install it with: {INSTALL}") from None
    return Memory


def _results(got: object) -> list[dict[str, Any]]:
    raw = got.get("results") if isinstance(got, dict) else got
    if not isinstance(raw, list):
        raise Mem0Error(f"mem0 answered {type(got).__name__}, not a list of results")
    return [r for r in raw if isinstance(r, dict) and isinstance(r.get("memory"), str)]


def _memory(r: dict[str, Any]) -> Memory:
    metadata = r.get("metadata") or {}
    ids = metadata.get("message_ids") if isinstance(metadata, dict) else None
    cites = tuple(str(i) for i in ids) if isinstance(ids, list) else ()
    score = r.get("score")
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
        score = None
    return Memory(text=r["memory"], cites=cites, score=None if score is None else float(score))
