"""A small, scriptable OpenAI-compatible chat-completions server for loopback tests and benchmarks.

It needs aiohttp, which comes with the `test` extra (`pip install -e .[test]`); nothing in the
library proper imports this module.

    with ChatServer(latency=0.2, script=[status(429, retry_after=2), drop()]) as srv:
        client = openai.AsyncOpenAI(base_url=srv.base_url, api_key="x", max_retries=0)
        ...  # 1st request: HTTP 429 + Retry-After: 2; 2nd: connection dropped; then echoes
        assert srv.request_count == 3

Each POST /v1/chat/completions is numbered from 1 in order of arrival and gets one `Fault`:
`rules` first (a {number: Fault} mapping, or a callable (number, body) -> Fault | None), else the
next entry of the `script` queue (consumed one per request, extendable with `enqueue`), else
`ok()`. With `embed` (texts -> vectors) it also answers POST /v1/embeddings, OpenAI-style
(faults do not apply there; `embedding_requests` logs those bodies). The server runs in its own
thread and event loop; handlers never block. It costs about
0.35 ms of CPU a request, several times less than an `openai` SDK client spends on one, so in
benchmarks the client side is what saturates.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from aiohttp import web

from dialogbench.testing.loopback import LoopbackServer

__all__ = [
    "ChatServer",
    "Fault",
    "JsonMode",
    "default_reply",
    "delay",
    "drop",
    "empty",
    "malformed",
    "ok",
    "status",
]

Body = dict[str, Any]
FaultKind = Literal["ok", "status", "drop", "malformed", "empty"]
JsonMode = bool | Literal["json_object"]


@dataclass(frozen=True)
class Fault:
    """What the server does with one request; build one with the helpers below."""

    kind: FaultKind = "ok"
    delay: float = 0.0  # seconds slept (asyncio.sleep) before acting, on top of `latency`
    status: int = 500  # for kind "status"
    retry_after: float | None = None  # for kind "status": sent as the Retry-After header
    message: str = ""  # for kind "status": the error message
    malformed: Literal["not_json", "no_choices"] = "not_json"  # for kind "malformed"
    content: str | None = None  # for kind "ok": answer this instead of the default reply


def ok(content: str | None = None, *, delay: float = 0.0) -> Fault:
    """A normal answer (`content`, or the server's default reply)."""
    return Fault("ok", delay=delay, content=content)


def delay(seconds: float) -> Fault:
    """A normal answer after `seconds`."""
    return Fault("ok", delay=seconds)


def status(
    code: int, retry_after: float | None = None, message: str = "", *, delay: float = 0.0
) -> Fault:
    """An HTTP error (429, 500, 503, ...) with an OpenAI-style error body."""
    return Fault("status", delay=delay, status=code, retry_after=retry_after, message=message)


def drop(*, delay: float = 0.0) -> Fault:
    """Close the connection without answering."""
    return Fault("drop", delay=delay)


def malformed(how: Literal["not_json", "no_choices"] = "not_json", *, delay: float = 0.0) -> Fault:
    """HTTP 200 with a truncated JSON body, or valid JSON lacking `choices`."""
    return Fault("malformed", delay=delay, malformed=how)


def empty(*, delay: float = 0.0) -> Fault:
    """A well-formed completion whose content is ""."""
    return Fault("empty", delay=delay)


class ChatServer(LoopbackServer):
    """An OpenAI-compatible server on 127.0.0.1 (a free port) in a background thread.

    reply: request body -> content; default: the last user message echoed (as JSON when a
        response_format asks for it: `{"reply": ...}` or a minimal instance of the schema).
    json_mode: True accepts response_format json_schema and json_object; "json_object" rejects
        json_schema; False rejects both, with HTTP 400 naming `response_format`, as servers
        without structured output do.
    latency: seconds added to every request.
    embed: texts -> one vector per text; when given, POST /v1/embeddings answers with them
        (run in a worker thread, so a slow model does not block chat requests).
    """

    def __init__(
        self,
        *,
        model: str = "dialogbench-test",
        reply: Callable[[Body], str] | None = None,
        json_mode: JsonMode = True,
        latency: float = 0.0,
        script: Iterable[Fault] = (),
        rules: Mapping[int, Fault] | Callable[[int, Body], Fault | None] | None = None,
        embed: Callable[[list[str]], Sequence[Sequence[float]]] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        backlog: int = 4096,
        shutdown_timeout: float = 0.5,
    ) -> None:
        self.model = model
        self.reply = reply
        self.json_mode = json_mode
        self.latency = latency
        self.rules = rules
        self.embed = embed
        super().__init__(host, port, shutdown_timeout, backlog)
        self._script: deque[Fault] = deque(script)
        self._requests: list[Body] = []
        self._auth: list[str | None] = []
        self._embedding_requests: list[Body] = []
        self._lock = threading.Lock()

    # -- what tests look at ------------------------------------------------------------------

    @property
    def requests(self) -> list[Body]:
        """A copy of every chat-completions body received (unparseable ones as {"_raw": text})."""
        with self._lock:
            return list(self._requests)

    @property
    def authorizations(self) -> list[str | None]:
        """The Authorization header of each chat-completions request (None where absent)."""
        with self._lock:
            return list(self._auth)

    @property
    def embedding_requests(self) -> list[Body]:
        """A copy of every embeddings body received."""
        with self._lock:
            return list(self._embedding_requests)

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self._requests)

    def enqueue(self, *faults: Fault) -> None:
        """Append to the script: the next requests (without a matching rule) get these."""
        with self._lock:
            self._script.extend(faults)

    def reset(self) -> None:
        """Forget the recorded requests (numbering restarts at 1) and the remaining script."""
        with self._lock:
            self._requests.clear()
            self._auth.clear()
            self._embedding_requests.clear()
            self._script.clear()

    # -- lifecycle (LoopbackServer) -----------------------------------------------------------

    _path = "/v1"

    def _app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 2**20)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        if self.embed is not None:
            app.router.add_post("/v1/embeddings", self._embeddings)
        return app

    # -- handlers ----------------------------------------------------------------------------

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "object": "list",
                "data": [
                    {"id": self.model, "object": "model", "created": 0, "owned_by": "dialogbench"}
                ],
            }
        )

    async def _embeddings(self, request: web.Request) -> web.Response:
        try:
            body = json.loads(await request.read())
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return _error(400, "the body must be a JSON object", "invalid_request_error")
        with self._lock:
            self._embedding_requests.append(body)
        given = body.get("input")
        texts = [given] if isinstance(given, str) else given
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            return _error(
                400,
                "`input` must be a string or a list of strings",
                "invalid_request_error",
                param="input",
            )
        assert self.embed is not None
        try:
            vectors = await asyncio.to_thread(self.embed, texts)
        except Exception as e:  # a faulty `embed` callable: say so instead of a bare 500
            return _error(500, f"embed callable failed: {e!r}", "server_error")
        tokens = sum(len(t.split()) for t in texts)
        data = [
            {"object": "embedding", "index": i, "embedding": [float(x) for x in v]}
            for i, v in enumerate(vectors)
        ]
        return web.json_response(
            {
                "object": "list",
                "data": data,
                "model": body.get("model") or self.model,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            parsed = json.loads(raw)
        except ValueError:
            parsed = None
        valid = isinstance(parsed, dict)
        body: Body = parsed if valid else {"_raw": raw.decode(errors="replace")}
        with self._lock:
            self._requests.append(body)
            self._auth.append(request.headers.get("Authorization"))
            fault = self._pick(len(self._requests), body)
        wait = self.latency + fault.delay
        if wait > 0:
            await asyncio.sleep(wait)

        if fault.kind == "drop":
            if request.transport is not None:
                request.transport.abort()
            raise asyncio.CancelledError  # nothing can be written; end the handler quietly
        if fault.kind == "status":
            headers = {} if fault.retry_after is None else {"Retry-After": _num(fault.retry_after)}
            kind = "rate_limit_error" if fault.status == 429 else "server_error"
            text = fault.message or f"scripted HTTP {fault.status}"
            return _error(fault.status, text, kind, headers=headers)
        if fault.kind == "malformed":
            if fault.malformed == "no_choices":
                return web.json_response({"id": "chatcmpl-bad", "object": "chat.completion"})
            return web.Response(
                text='{"id": "chatcmpl-bad", "choices": [{"mes', content_type="application/json"
            )

        refusal = None if valid else ("messages", "the body must be a JSON object")
        fmt = body.get("response_format") or {}
        refusal = refusal or self._refusal(body, fmt)
        if refusal is not None:
            return _error(400, refusal[1], "invalid_request_error", param=refusal[0])
        try:
            content = "" if fault.kind == "empty" else fault.content
            content = self._reply(body, fmt) if content is None else content
        except Exception as e:  # a faulty `reply` callable: say so instead of a bare 500
            return _error(500, f"reply callable failed: {e!r}", "server_error")
        prompt = sum(_words(m.get("content")) for m in body["messages"] if isinstance(m, dict))
        completion = _words(content)
        message = {"role": "assistant", "content": content}
        return web.json_response(
            {
                "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model") or self.model,
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": {
                    "prompt_tokens": prompt,
                    "completion_tokens": completion,
                    "total_tokens": prompt + completion,
                },
            }
        )

    def _refusal(self, body: Body, fmt: Any) -> tuple[str, str] | None:
        """(param, message) when the request is one a 400 should answer."""
        if not isinstance(body.get("messages"), list) or not body["messages"]:
            return "messages", "`messages` must be a non-empty list"
        if body.get("stream"):
            return "stream", "stream=true is not supported by this test server"
        kind = fmt.get("type", "text") if isinstance(fmt, dict) else repr(fmt)
        accepted = {
            True: ("text", "json_object", "json_schema"),
            "json_object": ("text", "json_object"),
        }
        if kind not in accepted.get(self.json_mode, ("text",)):
            return "response_format", f"response_format type {kind!r} is not supported"
        return None

    def _pick(self, number: int, body: Body) -> Fault:
        rules = self.rules
        rule = (
            rules.get(number)
            if isinstance(rules, Mapping)
            else (rules(number, body) if rules is not None else None)
        )
        if rule is not None:
            return rule
        return self._script.popleft() if self._script else ok()

    def _reply(self, body: Body, fmt: Any) -> str:
        return default_reply(body) if self.reply is None else self.reply(body)


def default_reply(body: Body) -> str:
    """The server's own answer: the last user message echoed (as JSON when a
    response_format asks for it: `{"reply": ...}` or a minimal instance of the schema)."""
    fmt = body.get("response_format") or {}
    fmt = fmt if isinstance(fmt, dict) else {}
    users = [m for m in body["messages"] if isinstance(m, dict) and m.get("role") == "user"]
    text = _text(users[-1].get("content")) if users else ""
    if fmt.get("type") == "json_object":
        return json.dumps({"reply": text})
    if fmt.get("type") == "json_schema":
        schema = (fmt.get("json_schema") or {}).get("schema") or {}
        return json.dumps(_example(schema, schema))
    return text


def _error(
    code: int,
    message: str,
    kind: str,
    *,
    param: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> web.Response:
    return web.json_response(
        {"error": {"message": message, "type": kind, "param": param, "code": str(code)}},
        status=code,
        headers=headers,
    )


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def _text(content: Any) -> str:
    """A message's text: a string, or the text parts of a list of content parts."""
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def _words(content: Any) -> int:
    return len(_text(content).split())


def _example(schema: Any, root: Any) -> Any:
    """A minimal instance of a JSON schema (enough for pydantic-made schemas)."""
    if not isinstance(schema, dict):
        return None
    if isinstance(schema.get("$ref"), str):
        target: Any = root
        for part in schema["$ref"].lstrip("#/").split("/"):
            target = target.get(part, {}) if isinstance(target, dict) else {}
        return _example(target, root)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    if "default" in schema:
        return schema["default"]
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            return _example(schema[key][0], root)
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) and kind else kind
    if kind == "object" or "properties" in schema:
        return {k: _example(v, root) for k, v in (schema.get("properties") or {}).items()}
    if kind == "array":
        return [_example(schema.get("items"), root)] * int(schema.get("minItems", 0))
    return {"string": "", "integer": 0, "number": 0, "boolean": False}.get(str(kind))
