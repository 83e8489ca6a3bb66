"""The lifecycle every loopback test server shares: an aiohttp app on its own thread and
event loop, started and stopped from synchronous or asynchronous code.

A subclass builds its app in `_app()` and names the URL path clients use in `_path`;
`base_url` is set once the socket is bound (port 0 picks a free one).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from types import TracebackType
from typing import Self

from aiohttp import web

__all__ = ["LoopbackServer"]


class LoopbackServer:
    """An aiohttp server on 127.0.0.1 in a thread of its own (see the module docstring)."""

    _path = ""
    """Appended to http://HOST:PORT to make `base_url`."""

    def __init__(
        self, host: str, port: int, shutdown_timeout: float, backlog: int | None = None
    ) -> None:
        self.host, self.port, self.backlog = host, port, backlog
        self.shutdown_timeout = shutdown_timeout
        self.base_url = ""
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._error: BaseException | None = None

    def _app(self) -> web.Application:
        """The application to serve (its routes)."""
        raise NotImplementedError

    def start(self) -> Self:
        name = type(self).__name__
        if self._thread is not None:
            raise RuntimeError(f"{name} already started")
        ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, args=(ready,), name=name, daemon=True)
        self._thread.start()
        if not ready.wait(30) or self._error is not None:
            self.stop()
            raise RuntimeError(f"{name} failed to start: {self._error!r}")
        return self

    def stop(self) -> None:
        loop, stopping, thread = self._loop, self._stopping, self._thread
        if loop is not None and stopping is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed in between
                loop.call_soon_threadsafe(stopping.set)
        if thread is not None:
            thread.join(self.shutdown_timeout + 10)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        return await asyncio.to_thread(self.start)

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await asyncio.to_thread(self.stop)

    def _serve(self, ready: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._main(ready))
        except BaseException as e:
            self._error = e
        finally:
            ready.set()
            loop.close()

    async def _main(self, ready: threading.Event) -> None:
        self._stopping = asyncio.Event()
        runner = web.AppRunner(self._app(), access_log=None, shutdown_timeout=self.shutdown_timeout)
        await runner.setup()
        try:
            if self.backlog is None:
                site = web.TCPSite(runner, self.host, self.port)
            else:
                site = web.TCPSite(runner, self.host, self.port, backlog=self.backlog)
            await site.start()
            host, port = runner.addresses[0][:2]
            self.base_url = f"http://{host}:{port}{self._path}"
            ready.set()
            await self._stopping.wait()
        finally:
            await runner.cleanup()
