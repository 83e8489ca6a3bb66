"""A response cache in SQLite (WAL), so that rerunning finished work makes no requests.

The key is a sha256 over the model name, endpoint, sampling settings, messages, the
sample index and the retry number (when not 0): never an API key. Errors are never stored,
nor are replies that could not be used: `mark_unusable` deletes such a call's replies and
counts, per call, how often it came back unusable (table `unusable`), so that the next
asking uses the next retry number and gets a reply of its own (`Model.generate_parsed`).
Each entry keeps its key's parts (messages by digest) so that a miss can be explained:
which setting differed from the nearest entry, or that the prompt itself is new.

A cache that cannot be opened (a directory, a file that is not SQLite, a truncated one) is
a `CacheError` naming the file and the fix. Damage found while running is not fatal: a
stored reply that does not parse, or a page SQLite reports as malformed, is a miss (the
call is made again), counted in `stats()` and reported once as a logging warning naming
the file; a reply that cannot be stored is reported the same way.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from dialogbench.models.spec import redacted_url
from dialogbench.models.types import ChatMessage, ModelOutput, canonical_json

logger = logging.getLogger(__name__)

BUSY_S = 30.0
"""How long a connection waits for another process's write to end."""
FIX = "delete it (it holds only cached replies) or set DIALOGBENCH_CACHE to another file"

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
CREATE TABLE IF NOT EXISTS unusable (
    key TEXT PRIMARY KEY,
    retries INTEGER NOT NULL,
    kind TEXT NOT NULL,
    error TEXT NOT NULL,
    updated REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS responses_messages ON responses (messages_sha);
CREATE INDEX IF NOT EXISTS responses_model ON responses (model, endpoint);
"""


def default_cache_path() -> Path:
    """`$DIALOGBENCH_CACHE`, else `~/.cache/dialogbench/responses.sqlite`."""
    env = os.environ.get("DIALOGBENCH_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "dialogbench" / "responses.sqlite"


class CacheError(ValueError):
    """A response cache file that cannot be used: which file, why, and the fix."""

    def __init__(self, path: str | Path, problem: str, *, fix: str) -> None:
        self.path, self.problem, self.fix = str(path), problem, fix
        super().__init__(f"{self.path}: {problem} (fix: {fix})")


LOOKUP_CHUNK = 500
"""Keys per `IN (...)` lookup, well below SQLite's limit on bound variables."""


def _chunks(keys: list[str]) -> Iterator[list[str]]:
    """`keys` in slices of `LOOKUP_CHUNK`."""
    for lo in range(0, len(keys), LOOKUP_CHUNK):
        yield keys[lo : lo + LOOKUP_CHUNK]


def _damaged(e: sqlite3.DatabaseError) -> bool:
    """SQLite's own damage reports (malformed page, not a database), not a busy or
    locked database or an I/O failure, which stay errors."""
    return not isinstance(e, sqlite3.OperationalError | sqlite3.IntegrityError)


class CallKey:
    """The parts of a call that decide its reply, and their digest."""

    __slots__ = ("_messages", "digest", "endpoint", "model", "retry", "sample", "settings")

    def __init__(
        self,
        model: str,
        endpoint: str,
        settings: dict[str, Any] | str,
        messages: list[ChatMessage],
        sample: int = 0,
        retry: int = 0,
    ) -> None:
        self.model = model
        self.endpoint = endpoint = redacted_url(endpoint)  # no credentials in a key
        self.settings = settings if isinstance(settings, str) else canonical_json(settings)
        self.sample = sample
        self.retry = retry
        """How many earlier askings of this call were unusable; 0 leaves the digest as it
        was before retries existed, so older caches still hit."""
        self._messages = json.dumps(
            [[m["role"], m["content"]] for m in messages], ensure_ascii=False
        )
        parts: tuple[str, ...] = (model, endpoint, self.settings, str(sample), self._messages)
        if retry:
            parts += (f"retry {retry}",)
        self.digest = hashlib.sha256("\0".join(parts).encode()).hexdigest()

    @property
    def messages_sha(self) -> str:
        """Digest of the messages alone: finds the same prompt under other settings."""
        return hashlib.sha256(self._messages.encode()).hexdigest()


class ResponseCache:
    """Thread-safe get/put of model outputs by `CallKey`."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = Path(path) if path else default_cache_path()
        self._lock = threading.Lock()
        self._db = self._open()
        self.hits = 0
        self.misses = 0
        self.unreadable = 0
        """Lookups that found a damaged entry or page (counted as misses too)."""
        self.unstored = 0
        """Replies that could not be stored (a damaged file)."""
        self.evicted = 0
        """Unusable replies deleted in this session (`mark_unusable`)."""
        self.stored = 0
        """Replies stored in this session (`put`): what an interrupted run keeps of the
        calls it made, beside its saved units."""
        self._reported: set[str] = set()
        self._pending_hits: Counter[tuple[str, str]] = Counter()
        self.miss_reasons: Counter[str] = Counter()

    def _open(self) -> sqlite3.Connection:
        """The connection, schema in place; a `CacheError` naming the file and the fix."""
        if self.path.is_dir():
            raise CacheError(
                self.path,
                "the response cache path is a directory",
                fix=f"set DIALOGBENCH_CACHE to a file, e.g. {self.path / 'responses.sqlite'}",
            )
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise CacheError(
                self.path,
                f"cannot create the response cache's folder ({e.strerror or e})",
                fix="set DIALOGBENCH_CACHE to a file in a writable folder",
            ) from None
        db: sqlite3.Connection | None = None
        try:
            db = sqlite3.connect(
                self.path, check_same_thread=False, isolation_level=None, timeout=BUSY_S
            )
            _wal(db)
            db.execute("PRAGMA synchronous=NORMAL")
            db.executescript(_SCHEMA)
            db.execute("SELECT key, model, endpoint, settings, output FROM responses LIMIT 1")
        except sqlite3.DatabaseError as e:
            if db is not None:
                db.close()
            if isinstance(e, sqlite3.OperationalError) and "locked" in str(e):
                raise  # another process held it past BUSY_S: not damage, nothing to delete
            if _damaged(e) or "malformed" in str(e) or "no such column" in str(e):
                raise CacheError(
                    self.path, f"not a usable response cache (SQLite: {e})", fix=FIX
                ) from None
            raise CacheError(
                self.path,
                f"the response cache cannot be opened (SQLite: {e})",
                fix="check the file's and its folder's permissions, or set DIALOGBENCH_CACHE "
                "to a writable file",
            ) from None
        return db

    def _report(self, kind: str, message: str) -> None:
        """Log `message` about this cache once per kind of trouble."""
        if kind not in self._reported:
            self._reported.add(kind)
            logger.warning("response cache %s: %s", self.path, message)

    def _unreadable(self, why: str) -> None:
        self.unreadable += 1
        self._report(
            "read",
            f"{why}; it counts as a miss and the call is made again (reported once; the "
            f"count is in the cache's session stats). If this recurs, {FIX}",
        )

    def _output(self, text: str) -> ModelOutput | None:
        """A stored reply, or None (counted, reported once) when it does not parse."""
        try:
            out = ModelOutput.model_validate_json(text)
        except ValidationError:
            self._unreadable("a stored reply is not valid JSON of a reply")
            return None
        out.cached = True
        return out

    def get(self, key: CallKey) -> ModelOutput | None:
        with self._lock:
            try:
                row = self._db.execute(
                    "SELECT output FROM responses WHERE key = ?", (key.digest,)
                ).fetchone()
            except sqlite3.DatabaseError as e:
                if not _damaged(e):
                    raise
                self._unreadable(f"SQLite reports damage ({e})")
                self.misses += 1
                self.miss_reasons["damaged cache"] += 1
                return None
            out = self._output(row[0]) if row is not None else None
            if out is None:
                self.misses += 1
                self.miss_reasons[self._explain(key) if row is None else "unreadable entry"] += 1
                return None
            self._pending_hits[key.model, key.endpoint] += 1
            self.hits += 1
        return out

    def _flush_hits(self) -> None:
        """Add buffered hit counts to the per-model totals (one row per model and endpoint)."""
        self._db.executemany(
            "INSERT INTO hits (model, endpoint, hits) VALUES (?, ?, ?) "
            "ON CONFLICT (model, endpoint) DO UPDATE SET hits = hits + excluded.hits",
            [(m, e, n) for (m, e), n in self._pending_hits.items()],
        )
        self._pending_hits.clear()

    def _select_in(self, select: str, keys: list[str]) -> list[Any] | sqlite3.DatabaseError:
        """The rows of `select` (a `SELECT ... FROM table`) whose key is one of `keys`, or
        the error when SQLite reports the file damaged (any other error is raised)."""
        marks = ",".join("?" * len(keys))
        try:
            return self._db.execute(f"{select} WHERE key IN ({marks})", keys).fetchall()
        except sqlite3.DatabaseError as e:
            if not _damaged(e):
                raise
            return e

    def get_many(self, keys: list[CallKey]) -> dict[str, ModelOutput]:
        """Cached outputs by digest for those of `keys` that are cached (few statements)."""
        found: dict[str, str] = {}
        damaged: set[str] = set()
        with self._lock:
            digests = list({k.digest for k in keys})
            for chunk in _chunks(digests):
                rows = self._select_in("SELECT key, output FROM responses", chunk)
                if isinstance(rows, sqlite3.DatabaseError):
                    self._salvage(chunk, found, damaged)
                else:
                    found.update(rows)
            out: dict[str, ModelOutput] = {}
            bad: set[str] = set()
            for digest, text in found.items():
                got = self._output(text)
                if got is None:
                    bad.add(digest)
                else:
                    out[digest] = got
            hit = [k for k in keys if k.digest in out]
            self._pending_hits.update((k.model, k.endpoint) for k in hit)
            self.hits += len(hit)
            for k in keys:
                if k.digest not in out:
                    self.misses += 1
                    if k.digest in damaged:
                        why = "damaged cache"
                    else:
                        why = "unreadable entry" if k.digest in bad else self._explain(k)
                    self.miss_reasons[why] += 1
        return out

    def _salvage(self, digests: list[str], found: dict[str, str], damaged: set[str]) -> None:
        """After a batch read hit a damaged page: each key on its own, so that only the
        entries on damaged pages are lost."""
        for digest in digests:
            try:
                row = self._db.execute(
                    "SELECT output FROM responses WHERE key = ?", (digest,)
                ).fetchone()
            except sqlite3.DatabaseError as e:
                if not _damaged(e):
                    raise
                self._unreadable(f"SQLite reports damage ({e})")
                damaged.add(digest)
                continue
            if row is not None:
                found[digest] = row[0]

    def _unwritten(self, what: str) -> None:
        """A write that a damaged file lost: counted in `unstored`, reported once, with the
        fix."""
        self.unstored += 1
        self._report("write", f"{what}. {FIX[0].upper()}{FIX[1:]}")

    def put(self, key: CallKey, output: ModelOutput) -> None:
        """Store a reply (over an unreadable entry too); on a damaged file, report it once
        and go on without storing."""
        with self._lock:
            try:
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
                        output.model_dump_json(exclude={"cached", "hedged"}),
                        time.time(),
                    ),
                )
                self.stored += 1
            except sqlite3.DatabaseError as e:
                if not _damaged(e):
                    raise
                self._unwritten(
                    f"a reply could not be stored: SQLite reports damage ({e}); the run goes "
                    "on without caching those replies"
                )

    def retries(self, firsts: list[CallKey]) -> dict[str, int]:
        """digest -> how often the call that starts with that request (at retry 0) came back
        unusable, for those of `firsts` that ever did (few statements); a damaged file
        reads as none (reported once)."""
        out: dict[str, int] = {}
        digests = list({k.digest for k in firsts})
        with self._lock:
            for chunk in _chunks(digests):
                got = self._select_in("SELECT key, retries FROM unusable", chunk)
                if isinstance(got, sqlite3.DatabaseError):
                    self._unreadable(f"SQLite reports damage ({got})")
                else:
                    out.update(got)
        return out

    def mark_unusable(
        self, first: CallKey, chain: list[CallKey], retry: int, kind: str, error: str
    ) -> int:
        """A call (its first request's key at retry 0) whose asking number `retry` ended
        unusable: delete the replies of that asking (`chain`, its requests) and count it, so
        the next asking is number `retry + 1`. Returns that number."""
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    self._db.executemany(
                        "DELETE FROM responses WHERE key = ?", [(k.digest,) for k in chain]
                    )
                    self._db.execute(
                        "INSERT INTO unusable (key, retries, kind, error, updated) "
                        "VALUES (?, ?, ?, ?, ?) ON CONFLICT (key) DO UPDATE SET "
                        "retries = MAX(retries, excluded.retries), kind = excluded.kind, "
                        "error = excluded.error, updated = excluded.updated",
                        (first.digest, retry + 1, kind, error[:500], time.time()),
                    )
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
                self._db.execute("COMMIT")
            except sqlite3.DatabaseError as e:
                if not _damaged(e):
                    raise
                self._unwritten(
                    f"an unusable reply could not be forgotten: SQLite reports damage ({e})"
                )
                return retry + 1
            self.evicted += len(chain)
        return retry + 1

    def explain(self, key: CallKey) -> str:
        """Why `key` is or is not in the cache, in words."""
        with self._lock:
            return self._explain(key)

    def _explain(self, key: CallKey) -> str:
        try:
            row = self._db.execute(
                "SELECT 1 FROM responses WHERE key = ?", (key.digest,)
            ).fetchone()
            if row:
                return "cached"
            unusable = self._db.execute(
                "SELECT retries, kind FROM unusable WHERE key = ?", (key.digest,)
            ).fetchone()
            if unusable is not None:
                return (
                    f"came back unusable ({unusable[1]}) {unusable[0]} time(s): its replies "
                    f"were deleted, and the next asking is retry {unusable[0]}"
                )
            same_prompt = self._db.execute(
                "SELECT model, endpoint, settings, sample FROM responses WHERE messages_sha = ? "
                "LIMIT 50",
                (key.messages_sha,),
            ).fetchall()
        except sqlite3.DatabaseError as e:
            if not _damaged(e):
                raise
            return "damaged cache"
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
                ours = json.loads(key.settings)
                try:
                    theirs = json.loads(settings)
                except ValueError:
                    theirs = {}
                differ += [
                    k for k in sorted(set(ours) | set(theirs)) if ours.get(k) != theirs.get(k)
                ]
            diffs[", ".join(differ)] += 1
        closest = min(diffs, key=lambda d: (d.count(",") + 1, d))
        return f"same prompt cached with different {closest}"

    def stats(self) -> dict[str, Any]:
        """Entries per model and endpoint, total hits, file size (a `CacheError` for a
        damaged file)."""
        with self._lock:
            try:
                self._flush_hits()
                rows = self._db.execute(
                    "SELECT r.model, r.endpoint, COUNT(*), "
                    "(SELECT hits FROM hits h WHERE h.model = r.model AND h.endpoint = r.endpoint) "
                    "FROM responses r GROUP BY r.model, r.endpoint ORDER BY COUNT(*) DESC"
                ).fetchall()
            except sqlite3.DatabaseError as e:
                if not _damaged(e):
                    raise
                raise CacheError(
                    self.path, f"the response cache is damaged ({e})", fix=FIX
                ) from None
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
                "unreadable": self.unreadable,
                "unstored": self.unstored,
                "evicted_unusable": self.evicted,
                "stored": self.stored,
            },
        }

    def close(self) -> None:
        with self._lock:
            try:
                self._flush_hits()
            except sqlite3.DatabaseError as e:
                if not _damaged(e):
                    raise
            finally:
                self._db.close()


def _wal(db: sqlite3.Connection) -> None:
    """Switch to WAL. Two processes creating one cache at once can both try; the switch takes
    an exclusive lock that SQLite's busy timeout does not wait for, so wait for it here."""
    deadline = time.monotonic() + BUSY_S
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)
