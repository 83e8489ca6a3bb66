"""A small reference memory service speaking the REST contract of docs/memory-adapters.md,
for loopback tests and benchmarks of `dialogbench.memory.http.HttpMemory`.

It needs aiohttp (a dependency of the package); nothing in the library proper imports it.

    with MemoryServer(index_delay=0.2, faults={"recall": [MemoryFault.status(429, 1)]}) as srv:
        memory = HttpMemory(srv.base_url)
        ...  # 1st recall: HTTP 429 + Retry-After: 1; the next ones answer
        assert srv.count("recall") == 2

Inside is a real, small memory: per subject, the ingested messages (one per id, so a
retried ingest stores nothing twice), ranked for a query by BM25 over lower-cased word
tokens. A recall answers message-id memories (`memories="ids"`), text memories that cite
the message they were drawn from (`"text"`; `cite=False` leaves the citations out), or
both, alternating (`"mixed"`).

Faults are scripted per endpoint (`ingest`, `recall`, `reset`, `indexed`, `dump`): each
request takes the next `MemoryFault` of its endpoint's queue (`faults=`, or `enqueue`),
else answers normally. `index_delay` makes ingested messages searchable (and `indexed`
true) only that many seconds after their ingest, as services that index in the background
do. `absent` names optional endpoints (`reset`, `indexed`, `dump`) the server does not
have: they answer 404 (and are logged). `require_auth` is the exact Authorization header
every request must carry (else 401). Every request is logged (`requests`), with its
Authorization header.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import threading
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from aiohttp import web

from dialogbench.testing.loopback import LoopbackServer

__all__ = ["ENDPOINTS", "LoggedRequest", "MemoryFault", "MemoryServer"]

Body = dict[str, Any]
Endpoint = Literal["ingest", "recall", "reset", "indexed", "dump"]
ENDPOINTS: tuple[Endpoint, ...] = ("ingest", "recall", "reset", "indexed", "dump")
OPTIONAL: frozenset[str] = frozenset({"reset", "indexed", "dump"})
FaultKind = Literal["ok", "status", "drop", "not_json", "not_object", "no_memories", "bad_memory"]
MemoryMode = Literal["ids", "text", "mixed"]
_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class MemoryFault:
    """What the server does with one request; build one with the class methods."""

    kind: FaultKind = "ok"
    delay: float = 0.0
    """Seconds slept (asyncio.sleep) before acting."""
    status_code: int = 500
    retry_after: float | str | None = None
    """Sent as the Retry-After header with a status (seconds, or any text, e.g. an HTTP date)."""
    message: str = ""
    """The error text of a status; `{authorization}` in it is replaced by the request's
    Authorization header (a careless service that echoes credentials)."""

    @classmethod
    def ok(cls, *, delay: float = 0.0) -> MemoryFault:
        """A normal answer (after `delay` seconds)."""
        return cls("ok", delay=delay)

    @classmethod
    def status(
        cls,
        code: int,
        retry_after: float | str | None = None,
        message: str = "",
        *,
        delay: float = 0.0,
    ) -> MemoryFault:
        """An HTTP error (429, 500, 503, ...), with Retry-After when given."""
        return cls(
            "status", delay=delay, status_code=code, retry_after=retry_after, message=message
        )

    @classmethod
    def drop(cls, *, delay: float = 0.0) -> MemoryFault:
        """Close the connection without answering (after doing the request's work)."""
        return cls("drop", delay=delay)

    @classmethod
    def broken(
        cls, how: Literal["not_json", "not_object", "no_memories", "bad_memory"]
    ) -> MemoryFault:
        """HTTP 200 with a reply outside the contract: a truncated JSON body, a JSON list, an
        object without `memories`, or a `memories` list holding a memory with neither
        `message_id` nor `text`."""
        return cls(how)


@dataclass(frozen=True)
class LoggedRequest:
    """One request as the server received it."""

    number: int
    """1-based, in order of arrival over all endpoints."""
    method: str
    endpoint: str
    body: Body
    """The JSON body (POST), the query parameters (GET), or {"_raw": text} when unparseable."""
    authorization: str | None


@dataclass
class _Store:
    """One subject's memory: messages by id, when each becomes searchable, the index."""

    messages: dict[str, Body] = field(default_factory=dict)
    visible_at: dict[str, float] = field(default_factory=dict)
    tokens: dict[str, list[str]] = field(default_factory=dict)


def _tokens(text: str) -> list[str]:
    return [t.lower() for t in _WORD.findall(text)]


def _bm25(
    query: list[str], docs: Mapping[str, list[str]], k1: float = 1.5, b: float = 0.75
) -> list[tuple[str, float]]:
    """(doc id, score) for every doc sharing a term with `query`, best first (ties: older first)."""
    if not docs or not query:
        return []
    n = len(docs)
    avg = sum(len(d) for d in docs.values()) / n or 1.0
    df: Counter[str] = Counter()
    for d in docs.values():
        df.update(set(d))
    scored: list[tuple[str, float, int]] = []
    for order, (doc_id, d) in enumerate(docs.items()):
        tf = Counter(d)
        s = 0.0
        for t in set(query):
            if tf[t]:
                idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
                s += idf * tf[t] * (k1 + 1) / (tf[t] + k1 * (1 - b + b * len(d) / avg))
        if s > 0:
            scored.append((doc_id, s, order))
    scored.sort(key=lambda x: (-x[1], x[2]))
    return [(i, s) for i, s, _ in scored]


class MemoryServer(LoopbackServer):
    """The reference memory service on 127.0.0.1 (a free port) in a background thread.

    memories: "ids" | "text" | "mixed"; what a recall answers (see the module docstring).
    cite: whether text memories carry `cites`.
    report_cost: whether replies carry a `cost` (one call; query and memory words as tokens).
    index_delay: seconds before an ingested message is searchable and `indexed` is true.
    absent: optional endpoints that answer 404.
    require_auth: the Authorization header every request must carry (None: any).
    prefix: the path the endpoints sit under; `base_url` ends with it.
    """

    def __init__(
        self,
        *,
        memories: MemoryMode = "ids",
        cite: bool = True,
        report_cost: bool = False,
        index_delay: float = 0.0,
        absent: Iterable[str] = (),
        faults: Mapping[str, Iterable[MemoryFault]] | None = None,
        require_auth: str | None = None,
        prefix: str = "/memory",
        host: str = "127.0.0.1",
        port: int = 0,
        shutdown_timeout: float = 0.5,
    ) -> None:
        absent = frozenset(absent)
        if absent - OPTIONAL:
            raise ValueError(f"only optional endpoints can be absent: {sorted(OPTIONAL)}")
        unknown = set(faults or {}) - set(ENDPOINTS)
        if unknown:
            raise ValueError(f"no endpoint {sorted(unknown)}; endpoints: {list(ENDPOINTS)}")
        self.memories: MemoryMode = memories
        self.cite = cite
        self.report_cost = report_cost
        self.index_delay = index_delay
        self.absent = absent
        self.require_auth = require_auth
        self.prefix = "/" + prefix.strip("/") if prefix.strip("/") else ""
        self._path = self.prefix
        super().__init__(host, port, shutdown_timeout)
        self._faults: dict[str, deque[MemoryFault]] = {e: deque() for e in ENDPOINTS}
        for endpoint, queue in (faults or {}).items():
            self._faults[endpoint].extend(queue)
        self._stores: dict[str, _Store] = {}
        self._log: list[LoggedRequest] = []
        self._lock = threading.Lock()

    # -- what tests look at ------------------------------------------------------------------

    @property
    def requests(self) -> list[LoggedRequest]:
        """A copy of every request received, in order of arrival."""
        with self._lock:
            return list(self._log)

    def count(self, endpoint: str) -> int:
        """How many requests `endpoint` received."""
        with self._lock:
            return sum(1 for r in self._log if r.endpoint == endpoint)

    def stored(self, subject: str) -> list[str]:
        """The ids of the messages held for `subject`, in order of first ingest."""
        with self._lock:
            store = self._stores.get(subject)
            return list(store.messages) if store else []

    def enqueue(self, endpoint: str, *faults: MemoryFault) -> None:
        """Append to `endpoint`'s fault queue: its next requests get these."""
        if endpoint not in self._faults:
            raise ValueError(f"no endpoint {endpoint!r}; endpoints: {list(ENDPOINTS)}")
        with self._lock:
            self._faults[endpoint].extend(faults)

    def clear(self, endpoint: str) -> None:
        """Empty `endpoint`'s fault queue: its next requests answer normally."""
        with self._lock:
            self._faults[endpoint].clear()

    # -- lifecycle (LoopbackServer) -----------------------------------------------------------

    def _app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 2**20)
        routes: dict[str, tuple[str, Callable[[Body], Body]]] = {
            "ingest": ("POST", self._ingest),
            "recall": ("POST", self._recall),
            "reset": ("POST", self._reset),
            "indexed": ("GET", self._indexed),
            "dump": ("GET", self._dump),
        }
        for endpoint, (method, handler) in routes.items():
            app.router.add_route(
                method, f"{self.prefix}/{endpoint}", self._handler(endpoint, handler)
            )
        return app

    # -- handlers ----------------------------------------------------------------------------

    def _handler(
        self, endpoint: str, work: Callable[[Body], Body]
    ) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def handle(request: web.Request) -> web.StreamResponse:
            if request.method == "GET":
                body: Body = dict(request.query)
            else:
                raw = await request.read()
                try:
                    parsed = json.loads(raw)
                except ValueError:
                    parsed = None
                body = parsed if isinstance(parsed, dict) else {"_raw": raw.decode("replace")}
            auth = request.headers.get("Authorization")
            with self._lock:
                number = len(self._log) + 1
                self._log.append(LoggedRequest(number, request.method, endpoint, body, auth))
                queue = self._faults[endpoint]
                fault = queue.popleft() if queue else MemoryFault.ok()
            if fault.delay > 0:
                await asyncio.sleep(fault.delay)
            if endpoint in self.absent:  # logged, so tests can see it was asked
                return _error(404, f"this service has no {endpoint} endpoint")
            if self.require_auth is not None and auth != self.require_auth:
                return _error(401, "missing or wrong Authorization header")
            if fault.kind == "status":
                headers = {}
                if fault.retry_after is not None:
                    headers["Retry-After"] = _num(fault.retry_after)
                text = fault.message or f"scripted HTTP {fault.status_code}"
                text = text.replace("{authorization}", auth or "")
                return _error(fault.status_code, text, headers)
            if "_raw" in body:
                return _error(400, "the body must be a JSON object")
            try:
                with self._lock:
                    reply = work(body)
            except _BadRequest as e:
                return _error(400, str(e))
            if fault.kind == "drop":  # the work is done, the answer lost (a retry must be safe)
                if request.transport is not None:
                    request.transport.abort()
                raise asyncio.CancelledError
            if fault.kind == "not_json":
                return web.Response(text='{"memories": [{"mess', content_type="application/json")
            if fault.kind == "not_object":
                return web.json_response([reply])
            if fault.kind == "no_memories":
                return web.json_response({"results": reply.get("memories", [])})
            if fault.kind == "bad_memory":
                return web.json_response({"memories": [{"score": 1.0}]})
            return web.json_response(reply)

        return handle

    def _subject(self, body: Body) -> str:
        subject = body.get("subject")
        if not isinstance(subject, str) or not subject:
            raise _BadRequest("'subject' must be a non-empty string")
        return subject

    def _ingest(self, body: Body) -> Body:
        subject = self._subject(body)
        messages = body.get("messages")
        if not isinstance(messages, list):
            raise _BadRequest("'messages' must be a list of messages")
        for i, m in enumerate(messages):
            if not isinstance(m, dict) or not isinstance(m.get("id"), str):
                raise _BadRequest(f"messages[{i}] must be an object with a string 'id'")
            if not isinstance(m.get("text"), str):
                raise _BadRequest(f"messages[{i}] ({m['id']}) must have a string 'text'")
        store = self._stores.setdefault(subject, _Store())
        visible = time.monotonic() + self.index_delay
        added = 0
        for m in messages:
            if m["id"] in store.messages:  # idempotent: a retried ingest adds nothing
                continue
            store.messages[m["id"]] = m
            store.visible_at[m["id"]] = visible
            store.tokens[m["id"]] = _tokens(f"{m.get('speaker', '')} {m['text']}")
            added += 1
        reply: Body = {"ingested": added}
        if self.report_cost:
            words = sum(len(store.tokens[m["id"]]) for m in messages)
            reply["cost"] = {"calls": 1, "prompt_tokens": words, "completion_tokens": 0}
        return reply

    def _recall(self, body: Body) -> Body:
        subject = self._subject(body)
        query = body.get("query")
        if not isinstance(query, dict) or not isinstance(query.get("text"), str):
            raise _BadRequest("'query' must be an object with a string 'text'")
        budget = body.get("budget") or {}
        k = budget.get("k") if isinstance(budget, dict) else None
        if k is not None and (not isinstance(k, int) or k < 0):
            raise _BadRequest("'budget.k' must be a non-negative integer or null")
        store = self._stores.get(subject, _Store())
        now = time.monotonic()
        docs = {i: t for i, t in store.tokens.items() if store.visible_at[i] <= now}
        ranked = _bm25(_tokens(query["text"]), docs)[:k]
        memories = [self._memory(store.messages[i], s, n) for n, (i, s) in enumerate(ranked)]
        reply: Body = {"memories": memories}
        if self.report_cost:
            words = sum(len(_tokens(m.get("text") or "")) for m in memories)
            reply["cost"] = {
                "calls": 1,
                "prompt_tokens": len(_tokens(query["text"])),
                "completion_tokens": words,
            }
        return reply

    def _memory(self, message: Body, score: float, n: int) -> Body:
        as_text = self.memories == "text" or (self.memories == "mixed" and n % 2 == 1)
        if not as_text:
            return {"message_id": message["id"], "score": round(score, 6)}
        memory: Body = {
            "text": f"{message.get('speaker') or 'someone'} said: {message['text']}",
            "score": round(score, 6),
        }
        if self.cite:
            memory["cites"] = [message["id"]]
        return memory

    def _reset(self, body: Body) -> Body:
        self._stores.pop(self._subject(body), None)
        return {}

    def _indexed(self, body: Body) -> Body:
        store = self._stores.get(self._subject(body), _Store())
        now = time.monotonic()
        return {"indexed": all(t <= now for t in store.visible_at.values())}

    def _dump(self, body: Body) -> Body:
        store = self._stores.get(self._subject(body), _Store())
        return {
            "memories": [self._memory(m, 0.0, n) for n, m in enumerate(store.messages.values())]
        }


class _BadRequest(ValueError):
    """A request outside the contract (answered 400 with the message)."""


def _error(code: int, message: str, headers: Mapping[str, str] | None = None) -> web.Response:
    return web.json_response({"error": message}, status=code, headers=headers)


def _num(x: float | str) -> str:
    if isinstance(x, str):
        return x
    return str(int(x)) if float(x).is_integer() else str(x)
