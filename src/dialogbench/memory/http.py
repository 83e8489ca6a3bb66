"""A memory system behind HTTP: any service speaking the REST contract of
docs/memory-adapters.md.

    POST {base}/ingest   {"subject", "messages": [message]}              -> {"cost"?}
    POST {base}/recall   {"subject", "query": query, "budget": {k, tokens}}
                         -> {"memories": [{"message_id"} | {"text", "cites"?}], "cost"?}
    POST {base}/reset    {"subject"}                                     (optional)
    GET  {base}/indexed?subject=S  -> {"indexed": bool}                  (optional)
    GET  {base}/dump?subject=S     -> {"memories": [...]}                (optional)

An optional endpoint answering 404, 405 or 501 is taken as absent. Rate limits (429), server
errors (5xx), dropped connections and timeouts are retried `retries` times with exponential
back-off (`backoff` s, doubling), honouring a Retry-After of seconds up to `retry_after_max`
(a longer one is cut, and logged). Redirects are not followed (the Authorization header stays
with the host it was meant for). The URL is reported without credentials; a key is read from
the environment variable named by `api_key_env` and sent as a bearer token (credentials in the
URL are sent as HTTP basic auth instead, when no key is set); neither is ever logged or put in
an error message.
"""

from __future__ import annotations

import base64
import http.client
import json
import logging
import math
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from typing import Any

from dialogbench.data.model import Message
from dialogbench.memory.base import Budget, Memory, Query, Recall, SystemCost
from dialogbench.models.spec import public_url as shown_url

logger = logging.getLogger(__name__)

RETRIED_STATUS = frozenset({429, 500, 502, 503, 504})
ABSENT_STATUS = frozenset({404, 405, 501})


class HttpMemoryError(RuntimeError):
    """The service failed or answered outside the contract; the message names the endpoint."""


def public_url(url: str) -> str:
    """`url` as it may be shown or recorded (`models.spec.public_url`), without a trailing
    slash: the base the endpoints' paths are appended to."""
    return shown_url(url).rstrip("/")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Answer a redirect as the error it is here, so no header travels to another host."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


def _message(m: Message) -> dict[str, Any]:
    """A message as the service gets it (`person` only where the data gives one)."""
    return m.model_dump(mode="json", exclude={"person"} if m.person is None else None)


def _score(raw: object, where: str) -> float | None:
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not math.isfinite(raw):
        raise HttpMemoryError(
            f"{where}: a memory's 'score' must be a finite number, got {raw!r:.40}"
        )
    return float(raw)


def _memory(raw: object, where: str) -> Memory:
    """One memory of a reply, checked against the contract."""
    if not isinstance(raw, dict):
        raise HttpMemoryError(f"{where}: a memory must be an object, got {raw!r:.80}")
    message_id, text, cites = raw.get("message_id"), raw.get("text"), raw.get("cites")
    if message_id is not None:
        if not isinstance(message_id, (str, int)) or isinstance(message_id, bool):
            raise HttpMemoryError(f"{where}: 'message_id' must be a string, got {message_id!r:.40}")
        return Memory(message_id=str(message_id), score=_score(raw.get("score"), where))
    if not isinstance(text, str):
        keys = ", ".join(sorted(map(str, raw))) or "none"
        raise HttpMemoryError(
            f"{where}: a memory needs 'message_id' (a string) or 'text' (a string, with "
            f"optional 'cites': a list of message ids); this one has keys: {keys}"
        )
    if cites is not None and (
        not isinstance(cites, list) or not all(isinstance(i, (str, int)) for i in cites)
    ):
        raise HttpMemoryError(f"{where}: 'cites' must be a list of message ids, got {cites!r:.80}")
    return Memory(
        text=text, cites=tuple(str(i) for i in cites or ()), score=_score(raw.get("score"), where)
    )


def _cost(raw: object, where: str) -> SystemCost | None:
    """The optional `cost` of a reply (None when absent)."""
    if raw is None:
        return None
    fields = ("calls", "prompt_tokens", "completion_tokens")
    if not isinstance(raw, dict) or not all(
        isinstance(raw.get(f, 0), int)
        and not isinstance(raw.get(f, 0), bool)
        and raw.get(f, 0) >= 0
        for f in fields
    ):
        raise HttpMemoryError(
            f"{where}: 'cost' must be an object of non-negative integers "
            f"({', '.join(fields)}), got {raw!r:.80}"
        )
    return SystemCost(*(int(raw.get(f, 0)) for f in fields))


class HttpMemory:
    """The REST contract's client (see the module docstring)."""

    def __init__(
        self,
        url: str,
        *,
        api_key_env: str | None = "DIALOGBENCH_MEMORY_API_KEY",
        basic_auth_env: str | None = "DIALOGBENCH_MEMORY_BASIC_AUTH",
        timeout: float = 60.0,
        retries: int = 5,
        backoff: float = 0.5,
        retry_after_max: float = 60.0,
        poll_s: float = 0.2,
        index_deadline: float = 300.0,
    ) -> None:
        parts = urllib.parse.urlsplit(url)
        self.url = public_url(url)
        self.name = self.url
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise HttpMemoryError(f"memory URL {self.url!r} must be http(s)://HOST[:PORT][/PATH]")
        if parts.query or parts.fragment:
            raise HttpMemoryError(
                f"memory URL {self.url}: drop the query string or fragment; pass a key through "
                f"the environment variable {api_key_env or 'DIALOGBENCH_MEMORY_API_KEY'}"
            )
        self._auth: str | None = None
        self._secrets: list[str] = []
        if parts.username or parts.password:  # credentials in the URL: a basic header
            user = urllib.parse.unquote(parts.username or "")
            password = urllib.parse.unquote(parts.password or "")
            token = base64.b64encode(f"{user}:{password}".encode()).decode()
            self._auth = f"Basic {token}"
            self._secrets += [password, token, parts.password or ""]
        basic = os.environ.get(basic_auth_env) if basic_auth_env else None
        if basic and self._auth is None:  # USER:PASSWORD from the environment
            token = base64.b64encode(basic.encode()).decode()
            self._auth = f"Basic {token}"
            self._secrets += [basic, basic.partition(":")[2], token]
        key = os.environ.get(api_key_env) if api_key_env else None
        if key:
            self._auth = f"Bearer {key}"
            self._secrets.append(key)
        self._secrets = sorted({s for s in self._secrets if len(s) >= 3}, key=len, reverse=True)
        self.api_key_env = api_key_env
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.retry_after_max = retry_after_max
        self.poll_s = poll_s
        self.index_deadline = index_deadline
        self._absent: set[str] = set()

    def __repr__(self) -> str:
        return f"HttpMemory({self.url!r})"

    # -- transport ------------------------------------------------------------------------

    def _redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def _wait(self, attempt: int, retry_after: str | None, where: str) -> float:
        wait = self.backoff * 2.0**attempt
        if retry_after is not None:
            try:
                asked = float(retry_after)
            except ValueError:  # an HTTP date, or junk: keep the back-off
                asked = math.nan
            if math.isfinite(asked) and asked >= 0:
                wait = asked
        if wait > self.retry_after_max:
            logger.warning(
                "%s: waiting %.1f s, not the %.1f s asked (retry_after_max)",
                where,
                self.retry_after_max,
                wait,
            )
            wait = self.retry_after_max
        return wait

    def _request(
        self, method: str, path: str, body: object = None, *, optional: bool = False
    ) -> dict[str, Any] | None:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._auth:
            headers["Authorization"] = self._auth
        where = f"{method} {self.url}{path.split('?')[0]}"
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            req = urllib.request.Request(self.url + path, data, headers, method=method)
            try:
                with _OPENER.open(req, timeout=self.timeout) as resp:
                    raw = resp.read()
            except urllib.error.HTTPError as e:
                with e:
                    detail = self._redact(e.read(300).decode("utf-8", "replace").strip())
                if optional and e.code in ABSENT_STATUS:
                    return None
                if e.code in RETRIED_STATUS and not last:
                    after = e.headers.get("Retry-After") if e.headers else None
                    wait = self._wait(attempt, after, where)
                    logger.warning(
                        "%s answered HTTP %d; retry %d of %d in %.1f s",
                        where,
                        e.code,
                        attempt + 1,
                        self.retries,
                        wait,
                    )
                    time.sleep(wait)
                    continue
                hint = ""
                if e.code in (401, 403):
                    hint = f" (check the key in ${self.api_key_env} or the URL's credentials)"
                elif 300 <= e.code < 400:
                    hint = " (a redirect: give the URL it points to; redirects are not followed)"
                tries = f" after {attempt + 1} tries" if attempt else ""
                detail = f": {detail[:200]}" if detail else ""
                raise HttpMemoryError(
                    f"{where} answered HTTP {e.code}{tries}{hint}{detail}"
                ) from None
            except (OSError, http.client.HTTPException) as e:  # refused, dropped, timed out
                reason = self._redact(str(getattr(e, "reason", None) or e) or type(e).__name__)
                if not last:
                    wait = self._wait(attempt, None, where)
                    logger.warning(
                        "%s failed (%s); retry %d of %d in %.1f s",
                        where,
                        reason,
                        attempt + 1,
                        self.retries,
                        wait,
                    )
                    time.sleep(wait)
                    continue
                raise HttpMemoryError(
                    f"{where} could not be reached after {attempt + 1} tries: {reason}"
                ) from None
            try:
                parsed = json.loads(raw) if raw.strip() else {}
            except (json.JSONDecodeError, UnicodeDecodeError):
                shown = self._redact(raw[:80].decode("utf-8", "replace"))
                raise HttpMemoryError(f"{where} answered with no JSON: {shown!r}") from None
            if not isinstance(parsed, dict):
                raise HttpMemoryError(
                    f"{where} answered a JSON {type(parsed).__name__}, not an object"
                )
            return parsed
        raise AssertionError("unreachable")

    # -- the protocol ---------------------------------------------------------------------

    def ingest(self, subject: str, messages: Sequence[Message]) -> SystemCost | None:
        body = {"subject": subject, "messages": [_message(m) for m in messages]}
        got = self._request("POST", "/ingest", body) or {}
        return _cost(got.get("cost"), f"POST {self.url}/ingest")

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
        where = f"POST {self.url}/recall (query {query.id!r})"
        raw = got.get("memories")
        if not isinstance(raw, list):
            keys = ", ".join(sorted(got)) or "none"
            raise HttpMemoryError(f"{where}: the reply has no 'memories' list (its keys: {keys})")
        return Recall(tuple(_memory(m, where) for m in raw), _cost(got.get("cost"), where))

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
            indexed = got.get("indexed")
            if not isinstance(indexed, bool):
                raise HttpMemoryError(
                    f"GET {self.url}/indexed: the reply needs 'indexed': true or false, "
                    f"got {indexed!r:.40}"
                )
            if indexed:
                return
            if time.monotonic() > deadline:
                raise HttpMemoryError(
                    f"GET {self.url}/indexed: subject {subject!r} not indexed after "
                    f"{self.index_deadline:g} s"
                )
            time.sleep(self.poll_s)

    def dump(self, subject: str) -> list[Memory]:
        q = urllib.parse.urlencode({"subject": subject})
        got = self._request("GET", f"/dump?{q}", optional=True)
        if got is None:
            return []
        where = f"GET {self.url}/dump"
        raw = got.get("memories")
        if not isinstance(raw, list):
            raise HttpMemoryError(f"{where}: the reply has no 'memories' list")
        return [_memory(m, where) for m in raw]
