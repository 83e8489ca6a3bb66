"""Harness overhead of `Model` against a loopback chat server with a fixed latency, per HTTP client.

For concurrency 32 and 128 over N items (default 2,000) with 200 ms server latency, each
client: achieved throughput against the ideal (concurrency / latency), the client's CPU time
per call (the harness plus the HTTP client: user and system time of this process), the
server process's CPU per request, and the 1-minute load average before the row. The
clients, all behind the same `Model` (retries, hedging, usage) and `OpenAICompatible`
(errors, masking, parsing), differ only in how the bytes travel and are parsed:

- `http11`: our minimal HTTP/1.1 client (`models/transport.py`; the default, `auto`, for an
  `http://` base URL), keep-alive connections reused;
- `http11 no-reuse`: the same, a new connection for every request;
- `http11 json` / `http11 orjson`: the JSON codec forced (orjson only where installed; the
  default takes orjson where it is installed);
- `http11 gc-walks`: without `runner.heap.frozen_heap` (which a run's local executor holds
  while its units run): the garbage collector walks the whole heap;
- `aiohttp` / `aiohttp no-reuse`: aiohttp directly (the default for `https://`);
- `sdk-aiohttp`: the `openai` SDK's POST over the aiohttp transport (the default before);
- `sdk-httpx`: the SDK over its own httpx client;
- `null`: no HTTP at all (sleeps the latency): the harness's own cost, the ceiling.

Then the cached rerun: the same work answered from the SQLite cache, timed inside the
process, with the server's request count proving that no request was made.

    python benchmarks/bench_model_overhead.py [--items 2000] [--latency 0.2] [--repeats 1]
        [--clients aiohttp,sdk-aiohttp,...]

The server runs in a separate process; on a 2-core machine client and server share the
CPUs, so at high concurrency the client's CPU per call sets the ceiling. With `--repeats`,
every client runs once per round (rounds interleave clients against load drift) and the
summary gives the median of the rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing as mp
import os
import resource
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dialogbench.models import Call, GenerateConfig, Model, ModelOutput, ResponseCache, Usage
from dialogbench.models.openai_compat import OpenAICompatible, orjson_installed
from dialogbench.models.transport import DEFAULT_WIRE
from dialogbench.models.types import ChatMessage
from dialogbench.runner.heap import frozen_heap

GOAL_RATIO, GOAL_CPU_MS = 0.9, 0.3
"""Issue 27's goal for the default client at 128 connections."""
DEFAULT_CLIENT = "http11"
"""What `DEFAULT_WIRE` (`auto`) picks for the loopback server's http:// URL."""


def _serve(latency: float, conn: Any) -> None:
    from dialogbench.testing import ChatServer

    with ChatServer(latency=latency) as srv:
        conn.send(srv.base_url)
        while True:
            cmd = conn.recv()
            if cmd == "count":
                conn.send(srv.request_count)
            elif cmd == "cpu":
                conn.send(time.process_time())
            else:
                break


class NullProvider:
    """Answers after `latency` seconds without any HTTP: the harness's cost alone."""

    name = "null/sleep"
    endpoint = "null:"

    def __init__(self, latency: float) -> None:
        self.latency = latency

    async def generate(self, messages: list[ChatMessage], config: GenerateConfig) -> ModelOutput:
        await asyncio.sleep(self.latency)
        return ModelOutput(text="ok", usage=Usage(prompt_tokens=10, completion_tokens=1))

    async def aclose(self) -> None:
        pass


@dataclass(frozen=True)
class Client:
    """One way of making the calls: a provider factory, and whether the heap is frozen."""

    name: str
    make: Callable[[str, float], Any]
    frozen: bool = True


def _http(**kwargs: Any) -> Callable[[str, float], Any]:
    def make(base_url: str, latency: float) -> Any:
        return OpenAICompatible("openai-compatible/bench", "bench", base_url, None, **kwargs)

    return make


CLIENTS = [
    Client("http11", _http(wire="http11")),
    Client("http11 no-reuse", _http(wire="http11", reuse=False)),
    Client("http11 json", _http(wire="http11", codec="json")),
    Client("http11 orjson", _http(wire="http11", codec="orjson")),
    Client("http11 gc-walks", _http(wire="http11"), frozen=False),
    Client("aiohttp", _http(wire="aiohttp")),
    Client("aiohttp no-reuse", _http(wire="aiohttp", reuse=False)),
    Client("sdk-aiohttp", _http(wire="sdk-aiohttp")),
    Client("sdk-httpx", _http(wire="sdk-httpx")),
    Client("null", lambda base_url, latency: NullProvider(latency)),
]


async def _run(model: Model, items: int) -> tuple[float, float, float]:
    """Send `items` distinct calls as one batch, close the model; (wall s, CPU s, sys s)."""
    try:
        return await _timed_batch(model, items)
    finally:
        await model.aclose()


async def _timed_batch(model: Model, items: int) -> tuple[float, float, float]:
    config = GenerateConfig(max_tokens=16)
    calls = [
        Call([{"role": "user", "content": f"item {i}: say something"}], config)
        for i in range(items)
    ]
    wall, cpu = time.perf_counter(), time.process_time()
    sys0 = resource.getrusage(resource.RUSAGE_SELF).ru_stime
    results = await model.generate_many(calls)
    failed = sum(isinstance(r, Exception) for r in results)
    if failed:
        raise SystemExit(f"{failed} calls failed")
    sys1 = resource.getrusage(resource.RUSAGE_SELF).ru_stime
    return time.perf_counter() - wall, time.process_time() - cpu, sys1 - sys0


@contextlib.contextmanager
def _heap(frozen: bool) -> Iterator[None]:
    if frozen:
        with frozen_heap():
            yield
    else:
        yield


def _cached_pair(base_url: str, n: int) -> tuple[float, float, float, tuple[int, int]]:
    """First pass and rerun of the same work with a fresh cache; requests made by each."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cache.sqlite"
        walls: list[float] = []
        sent: list[int] = []
        cpu = 0.0
        for _ in range(2):
            model = Model(
                OpenAICompatible("openai-compatible/bench", "bench", base_url, None),
                cache=ResponseCache(path),
                concurrency=128,
            )
            with frozen_heap():
                wall, cpu, _ = asyncio.run(_run(model, n))
            walls.append(wall)
            sent.append(model.requests)
    return walls[0], walls[1], cpu, (sent[0], sent[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--clients", default="", help="comma-separated names (default: all)")
    args = parser.parse_args()
    n, lat = args.items, args.latency
    wanted = [c for c in args.clients.split(",") if c]
    known = {c.name for c in CLIENTS}
    if unknown := [c for c in wanted if c not in known]:
        parser.error(f"unknown client(s) {unknown}; known: {sorted(known)}")
    clients = [c for c in CLIENTS if not wanted or c.name in wanted]
    if not orjson_installed():
        print("orjson is not installed: the 'http11 orjson' row is skipped\n")
        clients = [c for c in clients if c.name != "http11 orjson"]

    parent, child = mp.Pipe()
    server = mp.Process(target=_serve, args=(lat, child), daemon=True)
    server.start()
    base_url = parent.recv()
    print(
        f"{n} items, server latency {lat * 1000:.0f} ms, server in pid {server.pid}, "
        f"{os.cpu_count()} CPUs, default client {DEFAULT_WIRE!r} (here {DEFAULT_CLIENT!r})\n"
    )
    print(
        f"{'client':<17} {'conc':>4} {'wall s':>7} {'calls/s':>8} {'ideal':>6} {'ratio':>6} "
        f"{'CPU ms/call':>11} {'(sys)':>6} {'server ms/req':>13} {'load':>5}"
    )
    seen: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for _ in range(args.repeats):
        for client in clients:
            for conc in (32, 128):
                load = os.getloadavg()[0]
                parent.send("cpu")
                server_cpu = parent.recv()
                parent.send("count")
                served = parent.recv()
                model = Model(client.make(base_url, lat), concurrency=conc)
                with _heap(client.frozen):
                    wall, cpu, sys_cpu = asyncio.run(_run(model, n))
                parent.send("cpu")
                server_cpu = parent.recv() - server_cpu
                parent.send("count")
                served = parent.recv() - served
                ratio = n / wall / (conc / lat)
                seen.setdefault((client.name, conc), []).append((ratio, cpu / n * 1000))
                per_request = f"{server_cpu / served * 1000:.3f}" if served else "-"
                print(
                    f"{client.name:<17} {conc:>4} {wall:>7.2f} {n / wall:>8.1f} "
                    f"{conc / lat:>6.0f} {ratio:>6.3f} {cpu / n * 1000:>11.3f} "
                    f"{sys_cpu / n * 1000:>6.3f} {per_request:>13} {load:>5.2f}",
                    flush=True,
                )

    # the cache pair runs in a fresh process, so neither pass pays for what earlier
    # measurements left on the heap
    with mp.get_context("spawn").Pool(1) as pool:
        first, second, cpu2, requests = pool.apply(_cached_pair, (base_url, n))
    parent.send("count")
    total = parent.recv()
    print(
        f"\ncached rerun: first pass {first:.2f} s ({requests[0]} requests), "
        f"rerun {second:.3f} s ({requests[1]} requests, "
        f"{cpu2 / n * 1e6:.0f} us CPU per call): speed-up {first / second:.0f}x "
        f"(server saw {total} requests in all)"
    )
    parent.send("stop")
    server.join(5)

    rounds = f"median of {args.repeats} rounds" if args.repeats > 1 else "one round"
    print(f"\nsummary ({rounds}): ratio of ideal / client CPU ms per call")
    print(f"{'client':<17} {'32 conns':>15} {'128 conns':>15}")
    for client in clients:
        cells = []
        for conc in (32, 128):
            got = seen[(client.name, conc)]
            ratio = statistics.median(r for r, _ in got)
            cpu_ms = statistics.median(c for _, c in got)
            cells.append(f"{ratio:.3f} / {cpu_ms:.3f}")
        print(f"{client.name:<17} {cells[0]:>15} {cells[1]:>15}")
    default = seen.get((DEFAULT_CLIENT, 128))
    if default:
        ratio = statistics.median(r for r, _ in default)
        cpu_ms = statistics.median(c for _, c in default)
        met = ratio >= GOAL_RATIO and cpu_ms <= GOAL_CPU_MS
        print(
            f"\ngoal for the default client at 128 connections (ratio >= {GOAL_RATIO}, "
            f"CPU <= {GOAL_CPU_MS} ms a call): {'met' if met else 'NOT met'} "
            f"(ratio {ratio:.3f}, {cpu_ms:.3f} ms; load average now "
            f"{', '.join(f'{x:.2f}' for x in os.getloadavg())})"
        )


if __name__ == "__main__":
    main()
