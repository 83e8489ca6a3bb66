"""A memory system behind HTTP: any service speaking the REST contract of docs/memory.md.

    POST {base}/ingest   {"subject", "messages": [message]}              -> {"cost"?}
    POST {base}/recall   {"subject", "query": query, "budget": {k, tokens}}
                         -> {"memories": [{"message_id"} | {"text", "cites"?}], "cost"?}
    POST {base}/reset    {"subject"}                                     (optional)
    GET  {base}/indexed?subject=S  -> {"indexed": bool}                  (optional)
    GET  {base}/dump?subject=S     -> {"memories": [...]}                (optional)

An optional endpoint answering 404 or 405 is taken as absent. Rate limits (429) and server
errors (5xx) are retried with exponential back-off, honouring Retry-After up to
`retry_after_max` seconds. The URL is reported without credentials; a key is read from the
environment variable named by `api_key_env` and sent as a bearer token, never logged.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from typing import Any

from dialogbench.data.model import Message
from dialogbench.memory.base import Budget, Memory, Query, Recall, SystemCost


class HttpMemoryError(RuntimeError):
    """The service failed or answered outside the contract; the message names the endpoint."""


def public_url(url: str) -> str:
    """`url` without user, password, query or fragment (what may be shown or recorded)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path.rstrip("/"), "", ""))


def _message(m: Message) -> dict[str, Any]:
    return m.model_dump(mode="json")


def _memory(raw: object, where: str) -> Memory:
    if not isinstance(raw, dict):
        raise HttpMemoryError(f"{where}: a memory must be an object, got {raw!r:.80}")
    try:
        if raw.get("message_id") is not None:
            return Memory(message_id=str(raw["message_id"]), score=raw.get("score"))
        return Memory(
            text=str(raw["text"]),
            cites=tuple(str(i) for i in raw.get("cites") or ()),
            score=raw.get("score"),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise HttpMemoryError(
            f"{where}: a memory needs 'message_id' or 'text' (with optional 'cites'): {e}"
        ) from None


def _cost(raw: object) -> SystemCost | None:
    if not isinstance(raw, dict):
        return None
    return SystemCost(
        int(raw.get("calls", 0)),
        int(raw.get("prompt_tokens", 0)),
        int(raw.get("completion_tokens", 0)),
    )


class HttpMemory:
    """The REST contract's client (see the module docstring)."""

    def __init__(
        self,
        url: str,
        *,
        api_key_env: str | None = "DIALOGBENCH_MEMORY_API_KEY",
        timeout: float = 60.0,
        retries: int = 5,
        retry_after_max: float = 60.0,
        poll_s: float = 0.2,
        index_deadline: float = 300.0,
    ) -> None:
        parts = urllib.parse.urlsplit(url)
        self._base = url.rstrip("/")
        self._auth: str | None = None
        if parts.username or parts.password:  # credentials in the URL: a basic header
            import base64

            pair = f"{urllib.parse.unquote(parts.username or '')}:"
            pair += urllib.parse.unquote(parts.password or "")
            self._auth = "Basic " + base64.b64encode(pair.encode()).decode()
            self._base = public_url(url)
        key = os.environ.get(api_key_env) if api_key_env else None
        if key:
            self._auth = f"Bearer {key}"
        self.url = public_url(url)
        self.name = self.url
        self.timeout = timeout
        self.retries = retries
        self.retry_after_max = retry_after_max
        self.poll_s = poll_s
        self.index_deadline = index_deadline
        self._absent: set[str] = set()

    # -- transport ------------------------------------------------------------------------

    def _request(
        self, method: str, path: str, body: object = None, *, optional: bool = False
    ) -> dict[str, Any] | None:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._auth:
            headers["Authorization"] = self._auth
        where = f"{method} {self.url}{path.split('?')[0]}"
        for attempt in range(self.retries + 1):
            req = urllib.request.Request(self._base + path, data, headers, method=method)
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    raw = resp.read()
            except urllib.error.HTTPError as e:
                if optional and e.code in (404, 405, 501):
                    return None
                if (e.code == 429 or e.code >= 500) and attempt < self.retries:
                    wait = min(2.0**attempt * 0.5, self.retry_after_max)
                    after = e.headers.get("Retry-After") if e.headers else None
                    if after and after.replace(".", "", 1).isdigit():
                        wait = min(float(after), self.retry_after_max)
                    time.sleep(wait)
                    continue
                raise HttpMemoryError(f"{where} answered HTTP {e.code}") from None
            except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
                if attempt < self.retries:
                    time.sleep(min(2.0**attempt * 0.5, self.retry_after_max))
                    continue
                reason = getattr(e, "reason", e)
                raise HttpMemoryError(f"{where} could not be reached: {reason}") from None
            try:
                parsed = json.loads(raw) if raw.strip() else {}
            except json.JSONDecodeError:
                raise HttpMemoryError(f"{where} answered with no JSON: {raw[:80]!r}") from None
            if not isinstance(parsed, dict):
                raise HttpMemoryError(f"{where} answered {type(parsed).__name__}, not an object")
            return parsed
        raise AssertionError("unreachable")

    # -- the protocol ---------------------------------------------------------------------

    def ingest(self, subject: str, messages: Sequence[Message]) -> None:
        self._request(
            "POST", "/ingest", {"subject": subject, "messages": [_message(m) for m in messages]}
        )

    def recall(self, subject: str, query: Query, budget: Budget) -> Recall:
        body = {
            "subject": subject,
            "query": {
                "id": query.id,
                "text": query.text,
                "kind": query.kind,
                "cutoff": query.cutoff,
                "speakers": list(query.speakers),
                "asked_at": query.asked_at.isoformat() if query.asked_at else None,
            },
            "budget": {"k": budget.k, "tokens": budget.tokens},
        }
        got = self._request("POST", "/recall", body) or {}
        raw = got.get("memories")
        if not isinstance(raw, list):
            raise HttpMemoryError(f"POST {self.url}/recall: the reply has no 'memories' list")
        where = f"POST {self.url}/recall (query {query.id!r})"
        return Recall(tuple(_memory(m, where) for m in raw), _cost(got.get("cost")))

    def reset(self, subject: str) -> None:
        if "reset" not in self._absent and (
            self._request("POST", "/reset", {"subject": subject}, optional=True) is None
        ):
            self._absent.add("reset")

    def wait_until_indexed(self, subject: str) -> None:
        if "indexed" in self._absent:
            return
        deadline = time.monotonic() + self.index_deadline
        q = urllib.parse.urlencode({"subject": subject})
        while True:
            got = self._request("GET", f"/indexed?{q}", optional=True)
            if got is None:
                self._absent.add("indexed")
                return
            if got.get("indexed", True):
                return
            if time.monotonic() > deadline:
                raise HttpMemoryError(
                    f"GET {self.url}/indexed: subject {subject!r} not indexed after "
                    f"{self.index_deadline:.0f} s"
                )
            time.sleep(self.poll_s)

    def dump(self, subject: str) -> list[Memory]:
        q = urllib.parse.urlencode({"subject": subject})
        got = self._request("GET", f"/dump?{q}", optional=True)
        if got is None:
            return []
        return [_memory(m, f"GET {self.url}/dump") for m in got.get("memories") or []]
