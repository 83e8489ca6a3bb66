"""A response cache in SQLite (WAL), so that rerunning finished work makes no requests.

The key is a sha256 over the model name, endpoint, sampling settings, messages and the
sample index: never an API key. Errors are never stored. Each entry keeps its key's parts
(messages by digest) so that a miss can be explained: which setting differed from the
nearest entry, or that the prompt itself is new.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from dialogbench.models.spec import redacted_url
from dialogbench.models.types import ChatMessage, ModelOutput, canonical_json

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    endpoint TEXT NOT NULL,
    settings TEXT NOT NULL,
    messages_sha TEXT NOT NULL,
    sample INTEGER NOT NULL,
    output TEXT NOT NULL,
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS hits (
    model TEXT NOT NULL,
    endpoint TEXT NOT NULL,
    hits INTEGER NOT NULL,
    PRIMARY KEY (model, endpoint)
);
CREATE INDEX IF NOT EXISTS responses_messages ON responses (messages_sha);
CREATE INDEX IF NOT EXISTS responses_model ON responses (model, endpoint);
"""


def default_cache_path() -> Path:
    """`$DIALOGBENCH_CACHE`, else `~/.cache/dialogbench/responses.sqlite`."""
    env = os.environ.get("DIALOGBENCH_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "dialogbench" / "responses.sqlite"


class CallKey:
    """The parts of a call that decide its reply, and their digest."""

    __slots__ = ("_messages", "digest", "endpoint", "model", "sample", "settings")

    def __init__(
        self,
        model: str,
        endpoint: str,
        settings: dict[str, Any] | str,
        messages: list[ChatMessage],
        sample: int = 0,
    ) -> None:
        self.model = model
        self.endpoint = endpoint = redacted_url(endpoint)  # no credentials in a key
        self.settings = settings if isinstance(settings, str) else canonical_json(settings)
        self.sample = sample
        self._messages = json.dumps(
            [[m["role"], m["content"]] for m in messages], ensure_ascii=False
        )
        parts = (model, endpoint, self.settings, str(sample), self._messages)
        self.digest = hashlib.sha256("\0".join(parts).encode()).hexdigest()

    @property
    def messages_sha(self) -> str:
        """Digest of the messages alone: finds the same prompt under other settings."""
        return hashlib.sha256(self._messages.encode()).hexdigest()


class ResponseCache:
    """Thread-safe get/put of model outputs by `CallKey`."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = Path(path) if path else default_cache_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)
        self.hits = 0
        self.misses = 0
        self._pending_hits: Counter[tuple[str, str]] = Counter()
        self.miss_reasons: Counter[str] = Counter()

    def get(self, key: CallKey) -> ModelOutput | None:
        with self._lock:
            row = self._db.execute(
                "SELECT output FROM responses WHERE key = ?", (key.digest,)
            ).fetchone()
            if row is None:
                self.misses += 1
                self.miss_reasons[self._explain(key)] += 1
                return None
            self._pending_hits[key.model, key.endpoint] += 1
            self.hits += 1
        out = ModelOutput.model_validate_json(row[0])
        out.cached = True
        return out

    def _flush_hits(self) -> None:
        """Add buffered hit counts to the per-model totals (one row per model and endpoint)."""
        self._db.executemany(
            "INSERT INTO hits (model, endpoint, hits) VALUES (?, ?, ?) "
            "ON CONFLICT (model, endpoint) DO UPDATE SET hits = hits + excluded.hits",
            [(m, e, n) for (m, e), n in self._pending_hits.items()],
        )
        self._pending_hits.clear()

    def get_many(self, keys: list[CallKey]) -> dict[str, ModelOutput]:
        """Cached outputs by digest for those of `keys` that are cached (few statements)."""
        found: dict[str, str] = {}
        with self._lock:
            digests = list({k.digest for k in keys})
            for lo in range(0, len(digests), 500):
                chunk = digests[lo : lo + 500]
                marks = ",".join("?" * len(chunk))
                found.update(
                    self._db.execute(
                        f"SELECT key, output FROM responses WHERE key IN ({marks})", chunk
                    ).fetchall()
                )
            hit = [k for k in keys if k.digest in found]
            self._pending_hits.update((k.model, k.endpoint) for k in hit)
            self.hits += len(hit)
            for k in keys:
                if k.digest not in found:
                    self.misses += 1
                    self.miss_reasons[self._explain(k)] += 1
        out: dict[str, ModelOutput] = {}
        for digest, text in found.items():
            out[digest] = ModelOutput.model_validate_json(text)
            out[digest].cached = True
        return out

    def put(self, key: CallKey, output: ModelOutput) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO responses "
                "(key, model, endpoint, settings, messages_sha, sample, output, created) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    key.digest,
                    key.model,
                    key.endpoint,
                    key.settings,
                    key.messages_sha,
                    key.sample,
                    output.model_dump_json(exclude={"cached"}),
                    time.time(),
                ),
            )

    def explain(self, key: CallKey) -> str:
        """Why `key` is or is not in the cache, in words."""
        with self._lock:
            return self._explain(key)

    def _explain(self, key: CallKey) -> str:
        row = self._db.execute("SELECT 1 FROM responses WHERE key = ?", (key.digest,)).fetchone()
        if row:
            return "cached"
        same_prompt = self._db.execute(
            "SELECT model, endpoint, settings, sample FROM responses WHERE messages_sha = ? "
            "LIMIT 50",
            (key.messages_sha,),
        ).fetchall()
        if not same_prompt:
            return "new prompt"
        diffs: Counter[str] = Counter()
        for model, endpoint, settings, sample in same_prompt:
            differ = []
            if model != key.model:
                differ.append("model")
            if endpoint != key.endpoint:
                differ.append("endpoint")
            if sample != key.sample:
                differ.append("sample index")
            if settings != key.settings:
                ours, theirs = json.loads(key.settings), json.loads(settings)
                differ += [
                    k for k in sorted(set(ours) | set(theirs)) if ours.get(k) != theirs.get(k)
                ]
            diffs[", ".join(differ)] += 1
        closest = min(diffs, key=lambda d: (d.count(",") + 1, d))
        return f"same prompt cached with different {closest}"

    def stats(self) -> dict[str, Any]:
        """Entries per model and endpoint, total hits, file size."""
        with self._lock:
            self._flush_hits()
            rows = self._db.execute(
                "SELECT r.model, r.endpoint, COUNT(*), "
                "(SELECT hits FROM hits h WHERE h.model = r.model AND h.endpoint = r.endpoint) "
                "FROM responses r GROUP BY r.model, r.endpoint ORDER BY COUNT(*) DESC"
            ).fetchall()
        return {
            "path": str(self.path),
            "bytes": self.path.stat().st_size if self.path.exists() else 0,
            "entries": [
                {"model": m, "endpoint": e, "entries": n, "hits": h or 0} for m, e, n, h in rows
            ],
            "session": {
                "hits": self.hits,
                "misses": self.misses,
                "miss_reasons": dict(self.miss_reasons),
            },
        }

    def close(self) -> None:
        with self._lock:
            self._flush_hits()
            self._db.close()
