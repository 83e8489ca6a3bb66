"""Harness overhead of `Model` against a loopback chat server with a fixed latency.

Measures, for concurrency 32 and 128 over N items (default 2,000) with 200 ms server
latency: achieved throughput against the ideal concurrency / latency, and the client's
CPU time per call (the harness plus the `openai` SDK). Then the cached rerun: the same
work answered from the SQLite cache, timed inside the process, with the server's request
count proving that no request was made. A `null` provider (sleep only, no HTTP) separates
the harness's own cost from the SDK's.

    python benchmarks/bench_model_overhead.py [--items 2000] [--latency 0.2]

The server runs in a separate process; on this 2-core machine client and server share
the CPUs, so at high concurrency the client's CPU per call sets the ceiling.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from dialogbench.models import Call, GenerateConfig, Model, ModelOutput, ResponseCache, Usage
from dialogbench.models.openai_compat import OpenAICompatible
from dialogbench.models.types import ChatMessage


def _serve(latency: float, conn: Any) -> None:
    from dialogbench.testing import ChatServer

    with ChatServer(latency=latency) as srv:
        conn.send(srv.base_url)
        while True:
            cmd = conn.recv()
            if cmd == "count":
                conn.send(srv.request_count)
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


async def _run(model: Model, items: int) -> tuple[float, float]:
    """Send `items` distinct calls as one batch, close the model; (wall s, process CPU s)."""
    try:
        return await _timed_batch(model, items)
    finally:
        await model.aclose()


async def _timed_batch(model: Model, items: int) -> tuple[float, float]:
    config = GenerateConfig(max_tokens=16)
    calls = [
        Call([{"role": "user", "content": f"item {i}: say something"}], config)
        for i in range(items)
    ]
    wall, cpu = time.perf_counter(), time.process_time()
    results = await model.generate_many(calls)
    failed = sum(isinstance(r, Exception) for r in results)
    if failed:
        raise SystemExit(f"{failed} calls failed")
    return time.perf_counter() - wall, time.process_time() - cpu


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
            wall, cpu = asyncio.run(_run(model, n))
            walls.append(wall)
            sent.append(model.requests)
    return walls[0], walls[1], cpu, (sent[0], sent[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--latency", type=float, default=0.2)
    args = parser.parse_args()
    n, lat = args.items, args.latency

    parent, child = mp.Pipe()
    server = mp.Process(target=_serve, args=(lat, child), daemon=True)
    server.start()
    base_url = parent.recv()
    print(
        f"{n} items, server latency {lat * 1000:.0f} ms, server in pid {server.pid}, "
        f"{os.cpu_count()} CPUs\n"
    )
    print(
        f"{'provider':<10} {'conc':>5} {'wall s':>8} {'calls/s':>9} {'ideal':>7} "
        f"{'ratio':>6} {'CPU ms/call':>12}"
    )
    for kind in ("http", "null"):
        for conc in (32, 128):
            provider: Any = (
                NullProvider(lat)
                if kind == "null"
                else OpenAICompatible("openai-compatible/bench", "bench", base_url, None)
            )
            wall, cpu = asyncio.run(_run(Model(provider, concurrency=conc), n))
            ideal = conc / lat
            print(
                f"{kind:<10} {conc:>5} {wall:>8.2f} {n / wall:>9.1f} {ideal:>7.0f} "
                f"{n / wall / ideal:>6.3f} {cpu / n * 1000:>12.3f}"
            )

    # the cache pair runs in a fresh process, so neither pass pays for what earlier
    # measurements left on the heap (the garbage collector walks all of it)
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


if __name__ == "__main__":
    main()
