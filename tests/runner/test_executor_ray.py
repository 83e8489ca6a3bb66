"""The Ray executor against the local one: the same run gives byte-identical result files,
and a run interrupted under one executor resumes under the other. A local Ray instance is
started by the module's fixture (2 CPUs, no dashboard); model-backed runs talk to the
loopback ChatServer, which the Ray workers reach over 127.0.0.1."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from dialogbench.cli import app
from dialogbench.data.registry import load_dataset
from dialogbench.runner import REGISTRY as TRACKS
from dialogbench.runner import Finished, run_track
from dialogbench.runner.executor import Executor, LocalExecutor, make_executor
from dialogbench.runner.roles import RoleSpec
from dialogbench.testing import ChatServer, MemoryServer
from golden.cases import JUDGE, KEY_ENV, MODEL, golden_reply

RESULTS = ("summary.json", "items.jsonl", "warnings.json")

ray = pytest.importorskip(
    "ray", reason="the Ray executor's tests need the ray extra: pip install -e '.[ray]'"
)


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A local Ray instance for this module: 2 CPUs, no dashboard; its workers get the
    package's path, a response cache of their own and the loopback server's dummy key."""
    cache = tmp_path_factory.mktemp("ray") / "cache.sqlite"
    src = str(Path(__file__).resolve().parents[2] / "src")
    path = os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH", "")) if p)
    env = {"PYTHONPATH": path, "DIALOGBENCH_CACHE": str(cache), KEY_ENV: "dummy"}
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": env},
    )
    try:
        yield
    finally:
        ray.shutdown()


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "driver-cache.sqlite"))
    monkeypatch.setenv(KEY_ENV, "dummy")


def _results(folder: Path) -> dict[str, bytes]:
    return {name: (folder / name).read_bytes() for name in RESULTS}


def _chat(out: Path, url: str, executor: Executor) -> Finished:
    roles: dict[str, Any] = {
        "model": RoleSpec(f"openai-compatible/{MODEL}", base_url=url, api_key_env=KEY_ENV),
        "judge": RoleSpec(f"openai-compatible/{JUDGE}", base_url=url, api_key_env=KEY_ENV),
    }
    track = TRACKS["chat"]
    config = track.config_type(limit=4, n_boot=200)
    return run_track(track, load_dataset("sample"), out, config, roles, executor=executor)


def test_retrieval_is_the_same_on_both_executors(ray_cluster: None, tmp_path: Path) -> None:
    track, data = TRACKS["retrieval"], load_dataset("sample")
    config = track.config_type(n_boot=200)
    local = run_track(track, data, tmp_path / "local", config, executor=LocalExecutor())
    spread = run_track(track, data, tmp_path / "ray", config, executor=make_executor("ray"))
    assert spread.solved_now == local.solved_now == len(local.outcome.summary["chat probes"])
    assert _results(tmp_path / "ray") == _results(tmp_path / "local")


def _untimed(folder: Path) -> list[dict[str, Any]]:
    """items.jsonl without the fields that time the memory system (they vary run to run)."""
    timed = {"latency_ms", "ingest_ms"}
    rows = [json.loads(x) for x in (folder / "items.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k not in timed} for r in rows]


def test_memory_recalls_spread_over_ray_give_the_local_run(
    ray_cluster: None, tmp_path: Path
) -> None:
    """The recall stage's units run on the workers (a worker's plan replays nothing): the
    same memory requests as a local run, the same result files; a rerun sends none."""
    track, data = TRACKS["retrieval"], load_dataset("sample")
    with MemoryServer() as memory:
        config = track.config_type(retrievers=("bm25",), memory=(memory.base_url,), n_boot=200)
        local = run_track(track, data, tmp_path / "local", config, executor=LocalExecutor())
        sent = len(memory.requests)
        ingest_recall = memory.count("ingest") + memory.count("recall")
        spread = run_track(track, data, tmp_path / "ray", config, executor=make_executor("ray"))
        assert len(memory.requests) == 2 * sent
        again = run_track(track, data, tmp_path / "ray", config, executor=make_executor("ray"))
        assert len(memory.requests) == 2 * sent and again.solved_now == 0
    assert local.exit_code == spread.exit_code == 0
    for name in ("summary.json", "warnings.json"):
        assert (tmp_path / "ray" / name).read_bytes() == (tmp_path / "local" / name).read_bytes()
    assert _untimed(tmp_path / "ray") == _untimed(tmp_path / "local")
    recalls = (tmp_path / "ray" / "parts" / "recall.jsonl").read_text().splitlines()
    assert len(recalls) == len(data.subjects)
    calls = spread.usage["roles"]["memory"]["calls"]
    assert calls == local.usage["roles"]["memory"]["calls"] == ingest_recall


def test_chat_is_the_same_on_both_executors(ray_cluster: None, cache: None, tmp_path: Path) -> None:
    with ChatServer(reply=golden_reply) as srv:
        local = _chat(tmp_path / "local", srv.base_url, LocalExecutor())
        spread = _chat(tmp_path / "ray", srv.base_url, make_executor("ray"))
    assert local.exit_code == spread.exit_code == 0
    assert (spread.solved_now, spread.scored_now) == (local.solved_now, local.scored_now) == (4, 4)
    assert _results(tmp_path / "ray") == _results(tmp_path / "local")
    assert spread.usage["roles"]["judge"]["calls"] == local.usage["roles"]["judge"]["calls"]


def test_a_local_run_cut_short_resumes_on_ray(
    ray_cluster: None, cache: None, tmp_path: Path
) -> None:
    with ChatServer(reply=golden_reply) as srv:
        _chat(tmp_path / "whole", srv.base_url, LocalExecutor())
        _chat(tmp_path / "cut", srv.base_url, LocalExecutor())
        parts = tmp_path / "cut" / "parts"
        for name, keep in (("solved.jsonl", 3), ("scored.jsonl", 1)):
            lines = (parts / name).read_text().splitlines(keepends=True)
            (parts / name).write_text("".join(lines[:keep]))
        resumed = _chat(tmp_path / "cut", srv.base_url, make_executor("ray"))
    assert (resumed.solved_now, resumed.scored_now) == (1, 3)
    assert _results(tmp_path / "cut") == _results(tmp_path / "whole")


def test_cli_runs_on_ray(ray_cluster: None, tmp_path: Path) -> None:
    out = tmp_path / "run"
    argv = ["run", "retrieval", "--out", str(out), "--n-boot", "200", "--executor", "ray"]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, result.output
    assert (out / "summary.json").exists()
    result = CliRunner().invoke(app, [*argv[:-1], "dask"])
    assert result.exit_code == 2 and "unknown executor 'dask'" in result.output
