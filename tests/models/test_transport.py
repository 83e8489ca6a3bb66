"""The HTTP clients (`models/transport.py`): every wire behaves the same behind
`OpenAICompatible`, and our HTTP/1.1 client reads every framing a server may send.

The first half runs each wire against the loopback `ChatServer` (the same faults give the
same error kinds, statuses, Retry-After and masking). The second half talks to a raw
asyncio server that answers with fixed bytes, so each framing (Content-Length, chunked with
trailers, gzip, deflate, read to close, an interim 100) and keep-alive are checked on the
wire itself, with the connections the server accepted counted.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import socket
import threading
import zlib
from collections.abc import Callable
from typing import Any

import pytest

from dialogbench.models import Model, ModelError
from dialogbench.models.openai_compat import OpenAICompatible
from dialogbench.models.transport import WIRES, Http11Wire, WireError, make_wire
from dialogbench.testing import ChatServer, drop, malformed, ok, status

SECRET = "sk-wire/SECRET+0123456789"
MESSAGES: list[Any] = [{"role": "user", "content": "hello there"}]
CONCRETE = [w for w in WIRES if w != "auto"]


def _ask(base_url: str, wire: Any, **kwargs: Any) -> Any:
    """One call through `Model` over `wire`: its output, or the ModelError raised."""
    provider = OpenAICompatible("openai-compatible/t", "t", base_url, SECRET, 0.5, wire=wire)
    model = Model(provider, max_retries=0, backoff_s=0.01, **kwargs)

    async def go() -> Any:
        try:
            return await model.generate(MESSAGES)
        except ModelError as e:
            return e
        finally:
            await model.aclose()

    return asyncio.run(go())


@pytest.mark.parametrize("wire", CONCRETE)
def test_every_wire_answers_and_fails_alike(wire: str) -> None:
    faults = [
        ok("the reply"),
        status(429, retry_after=7),
        status(404),
        drop(),
        malformed("not_json"),
        status(401, message=f"bad key {SECRET}"),
    ]
    with ChatServer(script=faults) as srv:
        got = [_ask(srv.base_url, wire) for _ in faults]
        auth = srv.authorizations
    assert got[0].text == "the reply" and got[0].usage.completion_tokens > 0
    limited, missing, dropped, unreadable, rejected = got[1:]
    assert (limited.kind, limited.status, limited.retry_after) == ("rate_limited", 429, 7.0)
    assert (missing.kind, missing.status) == ("unreachable", 404)
    assert dropped.kind == "server" and unreadable.kind == "unreadable"
    assert rejected.kind == "rejected" and SECRET not in str(rejected) and "***" in str(rejected)
    assert set(auth) == {f"Bearer {SECRET}"}


@pytest.mark.parametrize("wire", CONCRETE)
def test_every_wire_says_a_closed_port_is_unreachable(wire: str) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    error = _ask(f"http://127.0.0.1:{port}/v1", wire)
    assert isinstance(error, ModelError) and error.kind == "unreachable", error
    assert f"127.0.0.1:{port}" in str(error)
    if wire != "sdk-httpx":  # httpx says only "All connection attempts failed"
        assert "refused" in str(error)


def test_auto_takes_http11_for_http_and_aiohttp_for_https() -> None:
    assert type(make_wire("auto", "http://h/v1", None, 1, 1)).__name__ == "Http11Wire"
    assert type(make_wire("auto", "https://h/v1", None, 1, 1)).__name__ == "AiohttpWire"
    with pytest.raises(ValueError, match="plain http"):
        Http11Wire("https://h/v1", None, 1, 1)


BODY = json.dumps({"choices": [{"message": {"content": "framed"}}]}).encode()
Answer = Callable[[bytes], list[bytes]]
"""The bytes to write back for one request (several writes, to split a reply)."""


class RawServer:
    """A loopback HTTP server answering each request with `answer(request)`'s writes,
    closing after it when `close` is set; counts connections and requests."""

    def __init__(self, answer: Answer, *, close: bool = False) -> None:
        self.answer, self.close = answer, close
        self.connections = 0
        self.requests: list[bytes] = []

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                )
                self.requests.append(head + await reader.readexactly(length))
                for part in self.answer(self.requests[-1]):
                    writer.write(part)
                    await writer.drain()
                    await asyncio.sleep(0.005)
                if self.close:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    async def posts(self, n: int, **wire: Any) -> list[Any]:
        """`n` requests in turn over one `Http11Wire`: each reply or the WireError."""
        server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = Http11Wire(f"http://127.0.0.1:{port}/v1", "k", 2.0, 2.0, **wire)
        got: list[Any] = []
        try:
            for _ in range(n):
                try:
                    got.append(await client.post("/chat/completions", b'{"a": 1}'))
                except WireError as e:
                    got.append(e)
        finally:
            await client.aclose()
            server.close()
        return got


def _head(*headers: str, status: str = "200 OK") -> bytes:
    return (f"HTTP/1.1 {status}\r\n" + "".join(f"{h}\r\n" for h in headers) + "\r\n").encode()


def _chunked(body: bytes) -> list[bytes]:
    pieces = [body[:7], body[7:20], body[20:]]
    chunks = [b"%x;ext=1\r\n%s\r\n" % (len(p), p) for p in pieces]
    return [_head("Transfer-Encoding: chunked"), *chunks, b"0\r\nX-Trailer: t\r\n\r\n"]


FRAMINGS: dict[str, Answer] = {
    "content-length": lambda r: [_head(f"Content-Length: {len(BODY)}") + BODY[:5], BODY[5:]],
    "chunked": lambda r: _chunked(BODY),
    "gzip": lambda r: [
        _head(f"Content-Length: {len(z := gzip.compress(BODY))}", "Content-Encoding: gzip") + z
    ],
    "deflate": lambda r: [
        _head(f"Content-Length: {len(z := zlib.compress(BODY))}", "Content-Encoding: deflate") + z
    ],
    "interim-100": lambda r: [
        _head(status="100 Continue"),
        _head(f"Content-Length: {len(BODY)}") + BODY,
    ],
}


@pytest.mark.parametrize("framing", FRAMINGS)
def test_http11_reads_each_framing_and_keeps_the_connection(framing: str) -> None:
    server = RawServer(FRAMINGS[framing])
    replies = asyncio.run(server.posts(3))
    assert [(r.status, r.body) for r in replies] == [(200, BODY)] * 3
    assert server.connections == 1  # keep-alive: one connection for three requests
    head = server.requests[0].decode()
    assert head.startswith("POST /v1/chat/completions HTTP/1.1\r\n")
    assert "Authorization: Bearer k\r\n" in head and head.endswith('{"a": 1}')


def test_http11_reads_a_body_to_the_close_and_then_reconnects() -> None:
    server = RawServer(lambda r: [_head("Connection: close") + BODY], close=True)
    replies = asyncio.run(server.posts(2))
    assert [r.body for r in replies] == [BODY, BODY] and server.connections == 2


def test_http11_opens_a_connection_per_request_without_reuse() -> None:
    server = RawServer(FRAMINGS["content-length"])
    asyncio.run(server.posts(3, reuse=False))
    assert server.connections == 3
    assert b"Connection: close\r\n" in server.requests[0]


def test_http11_leaves_a_connection_the_server_closed_while_idle() -> None:
    server = RawServer(FRAMINGS["content-length"], close=True)  # closes after each reply

    async def go() -> list[Any]:
        out = await server.posts(1)
        return out + await server.posts(1)

    assert [r.body for r in asyncio.run(go())] == [BODY, BODY]


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        (lambda r: [b"SSH-2.0-OpenSSH\r\n\r\n"], "not an HTTP reply"),
        (lambda r: [_head("Content-Length: 9x")], "bad Content-Length"),
        (lambda r: [_head("Transfer-Encoding: chunked") + b"zz\r\n"], "bad chunk size"),
        (lambda r: [_head("Content-Length: 4", "Content-Encoding: br") + b"abcd"], "br"),
        (lambda r: [_head("Content-Length: 4", "Content-Encoding: gzip") + b"abcd"], "gzip"),
    ],
    ids=["not-http", "length", "chunk", "encoding", "bad-gzip"],
)
def test_http11_names_what_it_cannot_read(answer: Answer, why: str) -> None:
    (error,) = asyncio.run(RawServer(answer).posts(1))
    assert isinstance(error, WireError) and error.kind == "unreadable" and why in error.why


def test_http11_a_reply_cut_short_is_a_dropped_connection() -> None:
    cut = RawServer(lambda r: [_head(f"Content-Length: {len(BODY)}") + BODY[:9]], close=True)
    (error,) = asyncio.run(cut.posts(1))
    assert isinstance(error, WireError) and error.kind == "dropped" and "mid-reply" in error.why


def test_http11_closes_after_its_event_loop_ended() -> None:
    """A model used in one `asyncio.run` and closed in another (as the tracks do) closes
    without error, and a call on the new loop opens a fresh connection."""
    server = RawServer(FRAMINGS["content-length"])

    async def serve() -> tuple[asyncio.Server, int]:
        srv = await asyncio.start_server(server._serve, "127.0.0.1", 0)
        return srv, srv.sockets[0].getsockname()[1]

    loop = asyncio.new_event_loop()
    srv, port = loop.run_until_complete(serve())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    client = Http11Wire(f"http://127.0.0.1:{port}/v1", "k", 2.0, 2.0)
    try:
        first = asyncio.run(client.post("/chat/completions", b"{}"))
        second = asyncio.run(client.post("/chat/completions", b"{}"))
        asyncio.run(client.aclose())
    finally:
        loop.call_soon_threadsafe(srv.close)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
    assert first.body == second.body == BODY and server.connections == 2
