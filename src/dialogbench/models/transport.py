"""An aiohttp transport for the `openai` SDK's httpx client.

The SDK keeps doing what it does (auth, base URL, typed errors, timeouts); only the bytes
travel over aiohttp, whose connection handling costs a fraction of httpcore's per call.
httpcore's pool walks every connection it holds on each request and response, which
makes one call cost O(concurrency) of Python at the 128-way concurrency a batch runs at.
"""

from __future__ import annotations

import asyncio
import importlib
import socket
from typing import Any

import aiohttp
import openai

# the httpx distribution this openai release is built on (httpx, or its successor httpx2)
httpx: Any = importlib.import_module(
    next(
        c for c in openai.DefaultAsyncHttpxClient.__mro__ if c.__name__ == "AsyncClient"
    ).__module__.split(".")[0]
)


class AiohttpTransport(httpx.AsyncBaseTransport):  # type: ignore[misc]
    """Send httpx requests with one shared aiohttp session (created on first use)."""

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
    os_error = e.os_error
    if isinstance(e, aiohttp.ClientConnectorDNSError) or isinstance(os_error, socket.gaierror):
        return f"host name {e.host!r} not found (DNS)"
    if isinstance(e, aiohttp.ClientConnectorCertificateError):
        return f"TLS certificate rejected: {e.certificate_error}"
    if isinstance(e, aiohttp.ClientConnectorSSLError):
        return f"TLS handshake failed: {os_error}"
    if isinstance(os_error, ConnectionRefusedError):
        return "connection refused; is a server listening there?"
    why = os_error.strerror if os_error.strerror else str(os_error) or type(os_error).__name__
    return f"cannot connect: {why}"
