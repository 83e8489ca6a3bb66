"""Any OpenAI-compatible chat-completions server (vLLM, Ollama, llama.cpp, SGLang, hosted APIs).

Structured output is asked for in the strongest form the server accepts: JSON-schema mode,
then JSON-object mode, then the prompt alone. The first refusal (HTTP 400 naming
`response_format`) steps down once and is remembered for the endpoint.
"""

from __future__ import annotations

import email.utils
import importlib
import json
import re
import time
import urllib.parse
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal

from dialogbench.models.transport import (
    DEFAULT_WIRE,
    Reply,
    WireError,
    WireName,
    make_wire,
)
from dialogbench.models.types import (
    ChatMessage,
    ErrorKind,
    GenerateConfig,
    ModelError,
    ModelOutput,
    Usage,
)

JsonMode = Literal["json_schema", "json_object", "none"]
JsonCodec = Literal["json", "orjson"]
_RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
CONNECT_TIMEOUT_S = 10.0
"""At most this long to open a connection (the request timeout, when shorter): a host that
never answers the handshake is reported unreachable in seconds, not after a read timeout."""


class OpenAICompatible:
    """A chat-completions endpoint, reached over `wire` (`models/transport.py`; aiohttp by
    default, or the `openai` SDK with its own retries off).

    Errors name the URL tried (without credentials) and say why; the API key (and any
    password in the base URL) is masked in every reply and error, raw, JSON-escaped and
    URL-encoded. Bodies are written and read with orjson where it is installed (`codec`),
    else the standard library's json; what either cannot take goes to the standard one.
    """

    hedgeable = True
    """A request may be sent twice (a hedge, `models/hedge.py`): a server answers both."""

    def __init__(
        self,
        name: str,
        model: str,
        base_url: str,
        api_key: str | None,
        timeout_s: float = 30.0,
        *,
        wire: WireName = DEFAULT_WIRE,
        codec: JsonCodec | None = None,
        reuse: bool = True,
    ) -> None:
        self.name = name
        self.model = model
        base_url = base_url.strip().rstrip("/")
        self.endpoint = safe_url(base_url)
        """The base URL without user name or password (cache keys and results show it)."""
        self.json_mode: JsonMode = "json_schema"
        self.timeout_s = timeout_s
        self._url_problem = url_problem(base_url)
        self._mask = Masker([api_key or ""])
        self.wire = wire
        self._wire = make_wire(
            wire,
            base_url if self._url_problem is None else "http://invalid.invalid",
            api_key,
            timeout_s,
            min(timeout_s, CONNECT_TIMEOUT_S),
            reuse=reuse,
        )
        self.codec: JsonCodec = codec or ("orjson" if _orjson is not None else "json")
        self._dumps, self._loads = _codec(self.codec)

    def __repr__(self) -> str:  # never shows the key
        return f"OpenAICompatible({self.name!r}, endpoint={self.endpoint!r})"

    @property
    def url(self) -> str:
        """Where a chat-completions request goes (no credentials)."""
        return f"{self.endpoint}/chat/completions"

    async def generate(self, messages: list[ChatMessage], config: GenerateConfig) -> ModelOutput:
        try:
            out = await self._generate(messages, config)
        except ModelError as e:
            masked = self._mask(str(e))
            if masked != str(e):  # a server that echoes the key
                raise e.with_message(masked) from None
            raise
        return out

    async def _generate(self, messages: list[ChatMessage], config: GenerateConfig) -> ModelOutput:
        if self._url_problem is not None:
            raise ModelError(
                f"{self.name}: {self._url_problem}", retryable=False, kind="unreachable"
            )
        while True:
            request = self._request(messages, config)
            started = time.perf_counter()
            try:
                reply = await self._wire.post("/chat/completions", self._dumps(request))
            except WireError as e:
                raise self._wire_error(e) from None
            if reply.status == 400 and "response_format" in request and self._step_down(reply):
                continue
            if reply.status == 400:
                raise ModelError(
                    f"{self.name}: request rejected: {self._detail(reply)}",
                    retryable=False,
                    status=400,
                )
            if reply.status >= 300:  # a redirect not followed counts as an error, as before
                raise self._status_error(reply)
            return self._output(reply.body, time.perf_counter() - started)

    def _wire_error(self, e: WireError) -> ModelError:
        """A request without a reply, as a `ModelError` naming the URL (masked)."""
        where = self.url
        why = self._mask(e.why)
        if e.kind == "unreachable":
            return ModelError(
                f"{self.name}: cannot reach {where}: {why or 'no connection'}",
                retryable=True,
                kind="unreachable",
            )
        if e.kind == "bad_url":
            return ModelError(
                f"{self.name}: cannot reach {where}: {why}", retryable=False, kind="unreachable"
            )
        if e.kind == "timeout":
            return ModelError(
                f"{self.name}: no reply from {where} within {self.timeout_s:g} s",
                retryable=True,
                kind="timeout",
            )
        if e.kind == "unreadable":
            return ModelError(
                f"{self.name}: unreadable response from {where}: {why}",
                retryable=True,
                kind="unreadable",
            )
        return ModelError(
            f"{self.name}: {why or 'connection dropped'} ({where})", retryable=True, kind="server"
        )

    def _detail(self, reply: Reply) -> str:
        """The error body (masked before it is cut, so no piece of a key survives)."""
        body = reply.body.decode("utf-8", "replace")
        return self._mask(body or f"Error code: {reply.status}")[:500]

    def _status_error(self, reply: Reply) -> ModelError:
        status = reply.status
        detail = self._detail(reply)
        kind: ErrorKind | None = None
        hint: str | None = None
        if status == 404:
            kind = "rejected" if _names_a_model(detail) else "unreachable"
            path = urllib.parse.urlsplit(self.endpoint).path
            if not re.search(r"/v\d+\w*$", path):
                hint = f"the base URL probably lacks /v1 (try {self.endpoint}/v1)"
            else:
                hint = "is this an OpenAI-compatible server, and is the model name right?"
            detail = f"{detail} [{self.url}: {hint}]"
        return ModelError(
            f"{self.name}: HTTP {status}: {detail}",
            retryable=status in _RETRYABLE_STATUS,
            status=status,
            retry_after=retry_after_s(reply.headers),
            kind=kind,
            hint=hint,
        )

    def _output(self, body: bytes | str, latency: float) -> ModelOutput:
        """The reply in `body`; an empty one (no choices, content "" or null) is an error."""
        try:
            resp = self._loads(body)
        except ValueError:
            text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
            start = self._mask(text.strip()[:80])
            raise ModelError(
                f"{self.name}: unreadable response from {self.url} (not JSON: {start!r}); "
                "is the base URL an OpenAI-compatible API?",
                retryable=True,
                kind="unreadable",
            ) from None
        if not isinstance(resp, dict):
            raise ModelError(
                f"{self.name}: unreadable response from {self.url} (not a JSON object)",
                retryable=True,
                kind="unreadable",
            )
        choices = resp.get("choices")
        if not choices:
            raise ModelError(f"{self.name}: response has no choices", retryable=True, kind="empty")
        choice = choices[0] if isinstance(choices, list) else None
        if not isinstance(choice, dict) or not isinstance(choice.get("message"), dict):
            raise ModelError(
                f"{self.name}: unreadable response (a choice without a message)",
                retryable=True,
                kind="unreadable",
            )
        message = choice["message"]
        content = message.get("content")
        finish = choice.get("finish_reason")
        if not isinstance(content, str) or not content.strip():
            got = "null" if content is None else repr(content)[:40]
            raise ModelError(
                f"{self.name}: empty reply (content {got}, finish_reason {finish})",
                retryable=True,
                kind="empty",
            )
        usage = resp.get("usage")
        usage = usage if isinstance(usage, dict) else {}
        return ModelOutput(
            text=self._mask(content),
            usage=Usage(
                prompt_tokens=usage.get("prompt_tokens") or 0,
                completion_tokens=usage.get("completion_tokens") or 0,
            ),
            model=self._mask(str(resp.get("model") or "")),
            finish_reason=finish if isinstance(finish, str) else None,
            latency_s=latency,
        )

    def _request(self, messages: list[ChatMessage], config: GenerateConfig) -> dict[str, Any]:
        req: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": config.temperature,
            "max_tokens": config.max_tokens,
        }
        if config.top_p is not None:
            req["top_p"] = config.top_p
        if config.seed is not None:
            req["seed"] = config.seed
        if config.stop:
            req["stop"] = list(config.stop)
        if config.json_schema is not None and self.json_mode == "json_schema":
            req["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": config.schema_name, "schema": config.json_schema},
            }
        elif config.json_schema is not None and self.json_mode == "json_object":
            req["response_format"] = {"type": "json_object"}
        req.update(config.extra)
        return req

    def _step_down(self, reply: Reply) -> bool:
        text = self._detail(reply).lower()
        if "response_format" not in text and "json_schema" not in text:
            return False
        self.json_mode = "json_object" if self.json_mode == "json_schema" else "none"
        return True

    async def aclose(self) -> None:
        await self._wire.aclose()


_orjson: Any
try:  # optional: a faster JSON codec, used where installed
    _orjson = importlib.import_module("orjson")
except ImportError:  # pragma: no cover - depends on the environment
    _orjson = None


def orjson_installed() -> bool:
    """Whether orjson can be imported (then it is the default codec)."""
    return _orjson is not None


def _codec(name: JsonCodec) -> tuple[Callable[[Any], bytes], Callable[[bytes | str], Any]]:
    """(dumps, loads) of `name`; orjson's fall back to json on what orjson refuses (integers
    past 64 bits, lone surrogates, NaN), so both read and write the same documents."""
    if name == "json":
        return (lambda obj: json.dumps(obj).encode()), json.loads
    if _orjson is None:
        raise ValueError("the orjson codec needs orjson (pip install orjson)")
    fast_dumps, fast_loads, fast_error = _orjson.dumps, _orjson.loads, _orjson.JSONDecodeError

    def dumps(obj: Any) -> bytes:
        try:
            return fast_dumps(obj)  # type: ignore[no-any-return]
        except TypeError:
            return json.dumps(obj).encode()

    def loads(body: bytes | str) -> Any:
        try:
            return fast_loads(body)
        except fast_error:
            return json.loads(body)

    return dumps, loads


def safe_url(url: str) -> str:
    """`url` with any user name and password shown as `***` (the rest as given)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    netloc, slash, path = rest.partition("/")
    if "@" in netloc:
        netloc = "***@" + netloc.rpartition("@")[2]
    return f"{scheme}{sep}{netloc}{slash}{path}"


def url_problem(url: str) -> str | None:
    """Why `url` cannot be a base URL (a sentence), or None."""
    example = "e.g. http://localhost:8000/v1"
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018  (raises on a bad port)
    except ValueError as e:
        return f"the base URL {safe_url(url)!r} is not a valid URL ({e}; {example})"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"the base URL {safe_url(url)!r} is not an http(s) URL with a host ({example})"
    if parts.username is not None or parts.password is not None:
        return (
            f"the base URL {safe_url(url)!r} carries a user name or password; give the key "
            "in an environment variable instead (--api-key-env)"
        )
    return None


def retry_after_s(headers: Any) -> float | None:
    """The wait a response asks for: `retry-after-ms`, or `Retry-After` in seconds or as an
    HTTP date; None when absent or unreadable."""
    raw_ms = headers.get("retry-after-ms")
    if raw_ms:
        try:
            return max(0.0, float(raw_ms) / 1000.0)
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _names_a_model(detail: str) -> bool:
    """Whether a 404 body is an API's "no such model" (not a missing route)."""
    try:
        error = json.loads(detail).get("error")
    except (ValueError, AttributeError):
        return False
    return isinstance(error, dict) and "model" in json.dumps(error).lower()


class Masker:
    """Replaces secrets in text with `***`: each secret raw, JSON-escaped (ASCII-escaped or
    not, `/` written as `\\/`, or escaped again) and URL-encoded (`quote`, `quote_plus`, the
    hex digits in either case)."""

    def __init__(self, secrets: list[str]) -> None:
        forms: set[str] = set()
        for secret in secrets:
            if len(secret) < 4:  # "" (no key) or too short to be told from text
                continue
            forms.add(secret)
            forms.add(json.dumps(secret)[1:-1])
            forms.add(json.dumps(secret, ensure_ascii=False)[1:-1])
            forms.add(urllib.parse.quote(secret, safe=""))
            forms.add(urllib.parse.quote(secret))
            forms.add(urllib.parse.quote_plus(secret))
        self._pattern = (
            re.compile("|".join(_form_pattern(f) for f in sorted(forms, key=len, reverse=True)))
            if forms
            else None
        )

    def __call__(self, text: str) -> str:
        if self._pattern is None or not text:
            return text
        return self._pattern.sub("***", text)


def _form_pattern(form: str) -> str:
    """A regex for `form`: each %XX escape in either case, each `/` after any backslashes."""
    out = []
    for i, piece in enumerate(re.split(r"(%[0-9A-Fa-f]{2})", form)):
        if i % 2:
            out.append(f"%(?i:{re.escape(piece[1:])})")
        else:
            out.append("".join(r"\\*/" if c == "/" else re.escape(c) for c in piece))
    return "".join(out)
