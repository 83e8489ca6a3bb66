"""How a chat-completions request travels: the HTTP clients (wires) `OpenAICompatible` can use.

A wire POSTs bytes to a path under the base URL and returns the reply as it came (status,
headers, body), whatever the status; a request that got no reply raises `WireError` with
its cause. Everything else (the errors by status, Retry-After, masking, parsing) is
`OpenAICompatible`'s, the same for every wire. Measured side by side in
`benchmarks/bench_model_overhead.py`:

- `auto` (the default): `http11` for an `http://` base URL (a server on this machine or
  network, where the client's CPU can be the limit), `aiohttp` for `https://`.
- `http11`: our minimal HTTP/1.1 client on asyncio's transports (`Http11Wire`): keep-alive
  connections reused, Content-Length, chunked and read-to-close bodies, gzip and deflate;
  plain `http://` only, redirects not followed (a 3xx is an error). About 0.08 ms of CPU a
  call, against aiohttp's 0.19 (the whole of a client's own cost at 128 connections).
- `aiohttp`: one aiohttp session, keep-alive connections reused, redirects followed, TLS;
  no pool limit (the per-endpoint limiter in `Model` bounds the connections).
- `sdk-aiohttp`: the `openai` SDK's generic POST (its auth, timeouts, typed errors) with
  the bytes carried by aiohttp (`AiohttpTransport`): the default before; about 0.5 ms more
  CPU a call, spent building the SDK's and httpx's request and response objects.
- `sdk-httpx`: the SDK over its own httpx client; httpcore's pool walks every connection it
  holds on each request and response, so a call costs O(concurrency) of Python.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import socket
import urllib.parse
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import aiohttp
import multidict
import openai
import yarl

from dialogbench import __version__

# the httpx distribution this openai release is built on (httpx, or its successor httpx2)
httpx: Any = importlib.import_module(
    next(
        c for c in openai.DefaultAsyncHttpxClient.__mro__ if c.__name__ == "AsyncClient"
    ).__module__.split(".")[0]
)

WireName = Literal["auto", "http11", "aiohttp", "sdk-aiohttp", "sdk-httpx"]
WIRES: tuple[WireName, ...] = ("auto", "http11", "aiohttp", "sdk-aiohttp", "sdk-httpx")
DEFAULT_WIRE: WireName = "auto"

WireFailure = Literal["unreachable", "bad_url", "timeout", "dropped", "unreadable"]


@dataclass(frozen=True)
class Reply:
    """An HTTP reply as it came: `headers` is read case-insensitively (`get`)."""

    status: int
    headers: Mapping[str, str]
    body: bytes


class WireError(Exception):
    """A request that got no (readable) HTTP reply; `why` is a few words without the URL.

    kind: `unreachable` (no connection: refused, DNS, TLS, connect timeout), `bad_url` (the
    URL cannot be sent), `timeout` (no reply within the read timeout), `dropped` (the
    connection broke mid-request), `unreadable` (a reply the client could not take).
    """

    def __init__(self, kind: WireFailure, why: str) -> None:
        super().__init__(why)
        self.kind: WireFailure = kind
        self.why = why


class Wire(Protocol):
    """POST bytes to `path` under the base URL; the reply whatever its status."""

    async def post(self, path: str, body: bytes) -> Reply: ...

    async def aclose(self) -> None: ...


def make_wire(
    name: WireName,
    base_url: str,
    api_key: str | None,
    timeout_s: float,
    connect_s: float,
    *,
    reuse: bool = True,
) -> Wire:
    """The wire called `name` (one of `WIRES`); `reuse` False opens a connection per request
    (`http11` and `aiohttp`: for measuring what keep-alive saves)."""
    if name == "auto":
        name = "http11" if base_url.lower().startswith("http://") else "aiohttp"
    if name == "http11":
        return Http11Wire(base_url, api_key, timeout_s, connect_s, reuse=reuse)
    if name == "aiohttp":
        return AiohttpWire(base_url, api_key, timeout_s, connect_s, reuse=reuse)
    if name in ("sdk-aiohttp", "sdk-httpx"):
        via_aiohttp = name == "sdk-aiohttp"
        return SdkWire(base_url, api_key, timeout_s, connect_s, aiohttp_transport=via_aiohttp)
    raise ValueError(f"unknown HTTP client {name!r}; one of {', '.join(WIRES)}")


class AiohttpWire:
    """aiohttp directly: one session per event loop (made on first use), the key as a
    Bearer header, redirects followed (the key is not sent to another host)."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        timeout_s: float,
        connect_s: float,
        *,
        reuse: bool = True,
    ) -> None:
        self._base = base_url
        self._urls: dict[str, yarl.URL | str] = {}
        self._headers = {
            "Authorization": f"Bearer {api_key or 'not-needed'}",
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": f"dialogbench/{__version__}",
        }
        self._connect_s = connect_s
        self._timeout = aiohttp.ClientTimeout(
            total=None, connect=connect_s, sock_connect=connect_s, sock_read=timeout_s
        )
        self._reuse = reuse
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _get_session(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._loop is not loop:
            connector = aiohttp.TCPConnector(
                limit=0, force_close=not self._reuse, enable_cleanup_closed=True
            )
            self._session = aiohttp.ClientSession(connector=connector)
            self._loop = loop
        return self._session

    def _url(self, path: str) -> yarl.URL | str:
        url = self._urls.get(path)
        if url is None:
            text = self._base + path
            try:  # parsed once, not on every request
                url = yarl.URL(text)
            except (ValueError, TypeError):
                url = text  # aiohttp says why when it is sent
            self._urls[path] = url
        return url

    async def post(self, path: str, body: bytes) -> Reply:
        try:
            async with self._get_session().post(
                self._url(path), data=body, headers=self._headers, timeout=self._timeout
            ) as resp:
                return Reply(resp.status, resp.headers, await resp.read())
        except asyncio.CancelledError:
            raise
        except aiohttp.ConnectionTimeoutError as e:
            raise WireError("unreachable", f"no connection within {self._connect_s:g} s") from e
        except TimeoutError as e:
            raise WireError("timeout", str(e) or "timed out") from e
        except aiohttp.ClientConnectorError as e:
            raise WireError("unreachable", connect_failure(e)) from e
        except aiohttp.InvalidUrlClientError as e:
            raise WireError("bad_url", f"not a valid URL: {e}") from e
        except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError) as e:
            raise WireError("dropped", f"connection dropped: {str(e) or type(e).__name__}") from e
        except aiohttp.ClientError as e:  # too many redirects, a malformed reply
            raise WireError("unreadable", f"{type(e).__name__}: {e}") from e

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


class SdkWire:
    """The `openai` SDK's generic POST (its own retries off), over aiohttp or its httpx."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        timeout_s: float,
        connect_s: float,
        *,
        aiohttp_transport: bool,
    ) -> None:
        self._timeout_s = timeout_s
        self._client = openai.AsyncOpenAI(
            base_url=base_url,
            api_key=api_key or "not-needed",
            max_retries=0,
            timeout=openai.Timeout(timeout_s, connect=connect_s),
            http_client=openai.DefaultAsyncHttpxClient(transport=AiohttpTransport())
            if aiohttp_transport
            else openai.DefaultAsyncHttpxClient(),
        )

    async def post(self, path: str, body: bytes) -> Reply:
        try:
            resp = await self._client.post(
                path,
                cast_to=httpx.Response,
                content=body,
                options={"headers": {"Content-Type": "application/json"}},
            )
        except openai.APIStatusError as e:
            try:
                content = e.response.content
            except Exception:  # the body may already be gone
                content = b""
            return Reply(e.status_code, e.response.headers, content)
        except (openai.APIConnectionError, openai.APITimeoutError) as e:
            raise _sdk_failure(e) from None
        except (openai.APIResponseValidationError, ValueError, TypeError) as e:
            raise WireError("unreadable", str(e) or type(e).__name__) from None
        return Reply(resp.status_code, resp.headers, resp.content)

    async def aclose(self) -> None:
        await self._client.close()


def _sdk_failure(e: openai.APIConnectionError) -> WireError:
    """The SDK's connection error as a `WireError`, by its httpx cause."""
    cause = e.__cause__
    if isinstance(cause, httpx.ConnectTimeout | httpx.ConnectError):
        return WireError("unreachable", str(cause) or type(cause).__name__)
    if isinstance(cause, httpx.UnsupportedProtocol):
        return WireError("bad_url", str(cause))
    if isinstance(e, openai.APITimeoutError) or isinstance(cause, httpx.TimeoutException):
        return WireError("timeout", "timed out")
    return WireError("dropped", (str(cause) if cause is not None else str(e)) or "")


class AiohttpTransport(httpx.AsyncBaseTransport):  # type: ignore[misc]
    """Send the SDK's httpx requests with one shared aiohttp session (made on first use)."""

    def __init__(self) -> None:
        self._session: aiohttp.ClientSession | None = None

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=0, enable_cleanup_closed=True)
            self._session = aiohttp.ClientSession(connector=connector, auto_decompress=True)
        return self._session

    async def handle_async_request(self, request: Any) -> Any:
        timeout = request.extensions.get("timeout", {})
        client_timeout = aiohttp.ClientTimeout(
            total=None,
            connect=timeout.get("connect"),
            sock_connect=timeout.get("connect"),
            sock_read=timeout.get("read"),
        )
        headers = [(k.decode(), v.decode()) for k, v in request.headers.raw]
        try:
            async with self._get_session().request(
                request.method,
                str(request.url),
                headers=headers,
                data=await request.aread(),
                timeout=client_timeout,
                allow_redirects=False,
                auto_decompress=False,
            ) as resp:
                body = await resp.read()
                raw_headers: Any = [(k, v) for k, v in resp.raw_headers]
        except asyncio.CancelledError:
            raise
        except aiohttp.ConnectionTimeoutError as e:
            seconds = timeout.get("connect")
            within = f" within {seconds:g} s" if seconds else ""
            raise httpx.ConnectTimeout(f"no connection{within}", request=request) from e
        except TimeoutError as e:
            raise httpx.ReadTimeout(str(e) or "timed out", request=request) from e
        except aiohttp.ClientConnectorError as e:
            raise httpx.ConnectError(connect_failure(e), request=request) from e
        except aiohttp.InvalidUrlClientError as e:
            raise httpx.UnsupportedProtocol(f"not a valid URL: {e}", request=request) from e
        except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError) as e:
            raise httpx.RemoteProtocolError(
                f"connection dropped: {str(e) or type(e).__name__}", request=request
            ) from e
        return httpx.Response(resp.status, headers=raw_headers, content=body, request=request)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def connect_failure(e: aiohttp.ClientConnectorError) -> str:
    """Why a connection could not be made, in a few words (no URL: the caller names it)."""
    if isinstance(e, aiohttp.ClientConnectorDNSError):
        return f"host name {e.host!r} not found (DNS)"
    if isinstance(e, aiohttp.ClientConnectorCertificateError):
        return f"TLS certificate rejected: {e.certificate_error}"
    if isinstance(e, aiohttp.ClientConnectorSSLError):
        return f"TLS handshake failed: {e.os_error}"
    return os_failure(e.os_error, e.host)


def os_failure(os_error: OSError, host: str) -> str:
    """Why connecting to `host` failed with `os_error`, in a few words."""
    if isinstance(os_error, socket.gaierror):
        return f"host name {host!r} not found (DNS)"
    if isinstance(os_error, ConnectionRefusedError):
        return "connection refused; is a server listening there?"
    why = os_error.strerror if os_error.strerror else str(os_error) or type(os_error).__name__
    return f"cannot connect: {why}"


_MAX_HEAD = 64 * 1024
"""The most bytes a reply's status line and headers may take."""


class _Http11(asyncio.Protocol):
    """One HTTP/1.1 connection, one request at a time; the reply parsed as it arrives."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.reusable = True
        self._buf = bytearray()
        self._waiter: asyncio.Future[Reply] | None = None
        self._got_bytes = False
        self._status = 0
        self._headers: multidict.CIMultiDict[str] | None = None
        self._need = -1  # body bytes still to come: -1 chunked, -2 until the connection closes
        self._chunks = bytearray()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def send(self, data: bytes) -> asyncio.Future[Reply]:
        """Write one request; the future gets its reply (or the `WireError` why not)."""
        assert self.transport is not None and self._waiter is None
        loop = asyncio.get_running_loop()
        self._waiter = loop.create_future()
        self._got_bytes = False
        self._headers = None
        self.transport.write(data)
        return self._waiter

    def usable(self) -> bool:
        """Whether another request may go on this connection now."""
        transport = self.transport
        return (
            self.reusable
            and not self.closed
            and transport is not None
            and not transport.is_closing()
            and (self._waiter is None)
        )

    def close(self) -> None:
        self.closed = True
        self.reusable = False
        if self.transport is not None:
            # its event loop may have ended: the socket went with it
            with contextlib.suppress(RuntimeError):
                self.transport.abort()

    def data_received(self, data: bytes) -> None:
        if self._waiter is None or self._waiter.done():
            self.close()  # bytes nobody asked for: the connection is not in a known state
            return
        self._got_bytes = True
        self._buf += data
        try:
            self._parse()
        except WireError as e:
            self._fail(e)
            self.close()

    def eof_received(self) -> bool | None:
        return None  # close the transport: connection_lost says what it means

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.reusable = False
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        if self._headers is not None and self._need == -2:  # the body ends with the connection
            self._finish(bytes(self._buf))
            self._buf.clear()
            return
        how = "mid-reply" if self._got_bytes else "without a reply"
        why = f" ({exc})" if exc is not None else ""
        self._fail(WireError("dropped", f"connection dropped: the server closed it {how}{why}"))

    def _fail(self, error: Exception) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(error)

    def _parse(self) -> None:
        buf = self._buf
        while self._headers is None:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > _MAX_HEAD:
                    raise WireError("unreadable", "reply headers over 64 KiB")
                return
            lines = buf[:end].decode("latin-1").split("\r\n")
            del buf[: end + 4]
            version, _, rest = lines[0].partition(" ")
            code = rest[:3]
            if not version.startswith("HTTP/1.") or not code.isdigit():
                raise WireError("unreadable", f"not an HTTP reply: {lines[0][:60]!r}")
            headers: multidict.CIMultiDict[str] = multidict.CIMultiDict()
            for line in lines[1:]:
                name, colon, value = line.partition(":")
                if not colon or not name or name != name.strip():
                    raise WireError("unreadable", f"malformed reply header {line[:60]!r}")
                headers.add(name, value.strip())
            status = int(code)
            if 100 <= status < 200:  # an interim reply: the real one follows
                continue
            self._status, self._headers = status, headers
            connection = headers.get("connection", "").lower()
            if connection == "close" or (version == "HTTP/1.0" and connection != "keep-alive"):
                self.reusable = False
            if "chunked" in headers.get("transfer-encoding", "").lower():
                self._need = -1
                self._chunks.clear()
            elif (length := headers.get("content-length")) is not None:
                if not length.isdigit():
                    raise WireError("unreadable", f"bad Content-Length {length[:20]!r}")
                self._need = int(length)
            elif status in (204, 304):
                self._need = 0
            else:
                self._need = -2
                self.reusable = False
        if self._need >= 0:
            if len(buf) >= self._need:
                body = bytes(buf[: self._need])
                del buf[: self._need]
                self._finish(body)
        elif self._need == -1:
            self._parse_chunks()

    def _parse_chunks(self) -> None:
        buf = self._buf
        while True:
            end = buf.find(b"\r\n")
            if end < 0:
                return
            size_text = bytes(buf[:end]).split(b";")[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise WireError("unreadable", f"bad chunk size {size_text[:20]!r}") from None
            if size == 0:  # the last chunk, then trailers up to an empty line
                trailers = buf.find(b"\r\n\r\n", end)  # at `end` when there are none
                if trailers < 0:
                    return
                del buf[: trailers + 4]
                self._finish(bytes(self._chunks))
                return
            if len(buf) < end + 2 + size + 2:
                return
            self._chunks += buf[end + 2 : end + 2 + size]
            del buf[: end + 2 + size + 2]

    def _finish(self, body: bytes) -> None:
        assert self._headers is not None and self._waiter is not None
        if self._buf:  # more than one reply's bytes: not safe to reuse
            self.reusable = False
        encoding = self._headers.get("content-encoding", "identity").lower().strip()
        try:
            if encoding in ("gzip", "x-gzip", "deflate"):
                body = _inflate(body, encoding)
            elif encoding not in ("", "identity"):
                raise WireError("unreadable", f"unsupported Content-Encoding {encoding!r}")
        except WireError as e:
            self._waiter.set_exception(e)
            return
        self._waiter.set_result(Reply(self._status, self._headers, body))
        self._waiter = None


def _inflate(body: bytes, encoding: str) -> bytes:
    """A gzip or deflate body, decompressed (deflate as zlib-wrapped or raw)."""
    try:
        if encoding == "deflate":
            try:
                return zlib.decompress(body)
            except zlib.error:
                return zlib.decompress(body, -zlib.MAX_WBITS)
        return zlib.decompress(body, 16 + zlib.MAX_WBITS)
    except zlib.error as e:
        raise WireError("unreadable", f"bad {encoding} body: {e}") from None


class Http11Wire:
    """Our minimal HTTP/1.1 client for `http://` base URLs (no TLS, no proxy, no
    redirects): a pool of keep-alive connections (one request at a time each, as many as
    `Model`'s limiter lets through), the key as a Bearer header.

    A connection the server closed while idle is noticed and left; one that breaks during a
    request is an error (`dropped`), which `Model` retries, as with aiohttp. A request
    cancelled or timed out closes its connection, so no late reply is read as another's.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        timeout_s: float,
        connect_s: float,
        *,
        reuse: bool = True,
    ) -> None:
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme.lower() != "http":
            raise ValueError(f"the http11 client speaks plain http:// only, not {parts.scheme}")
        self._host = parts.hostname or ""
        self._port = parts.port or 80
        host = f"[{self._host}]" if ":" in self._host else self._host
        host_header = host if self._port == 80 else f"{host}:{self._port}"
        self._prefix = urllib.parse.quote(parts.path.rstrip("/"), safe="/%:@!$&'()*+,;=-._~")
        self._query = f"?{parts.query}" if parts.query else ""
        key = api_key or "not-needed"
        self._bad_key = any(c in key for c in "\r\n\0")
        headers = (
            f"Host: {host_header}\r\n"
            f"Authorization: Bearer {key}\r\n"
            "Content-Type: application/json\r\n"
            "Accept: application/json\r\n"
            "Accept-Encoding: identity\r\n"
            f"User-Agent: dialogbench/{__version__}\r\n"
        )
        if not reuse:
            headers += "Connection: close\r\n"
        self._headers = headers.encode("utf-8")
        self._heads: dict[str, bytes] = {}
        self._timeout_s = timeout_s
        self._connect_s = connect_s
        self._reuse = reuse
        self._idle: list[_Http11] = []
        self._loop: asyncio.AbstractEventLoop | None = None

    def _head(self, path: str) -> bytes:
        head = self._heads.get(path)
        if head is None:
            target = f"{self._prefix}{path}{self._query}".encode()
            head = self._heads[path] = b"POST " + target + b" HTTP/1.1\r\n" + self._headers
        return head

    async def _connect(self) -> _Http11:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self._connect_s):
                _, conn = await loop.create_connection(_Http11, self._host, self._port)
        except TimeoutError:
            raise WireError("unreachable", f"no connection within {self._connect_s:g} s") from None
        except OSError as e:
            raise WireError("unreachable", os_failure(e, self._host)) from None
        return conn

    async def post(self, path: str, body: bytes) -> Reply:
        if self._bad_key:
            raise WireError("bad_url", "the API key holds a line break or NUL")
        data = self._head(path) + b"Content-Length: %d\r\n\r\n" % len(body) + body
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # connections of an earlier event loop cannot be used
            self._idle.clear()
            self._loop = loop
        conn = None
        while self._idle and conn is None:  # the most recently used first
            candidate = self._idle.pop()
            if candidate.usable():
                conn = candidate
        if conn is None:
            conn = await self._connect()
        try:
            async with asyncio.timeout(self._timeout_s):
                reply = await conn.send(data)
        except TimeoutError:
            conn.close()
            raise WireError("timeout", "timed out") from None
        except BaseException:  # cancelled (a hedge lost, a deadline) or failed
            conn.close()
            raise
        if self._reuse and conn.usable():
            self._idle.append(conn)
        else:
            conn.close()
        return reply

    async def aclose(self) -> None:
        while self._idle:
            self._idle.pop().close()
