"""The memory system is a role: its ingest and recall calls run as the runner's `recall`
stage, saved to parts/recall.jsonl, charged to the `memory` role in usage.json, and never
repeated by a rerun, by `dialogbench score` or after a kill. Against the loopback memory
service, which counts every request it gets, and the loopback chat server for the model
and the judge."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dialogbench.cli import app
from dialogbench.data.registry import load_dataset
from dialogbench.testing import ChatServer, MemoryFault, MemoryServer
from tracks.test_questions import Scripted, sample_answers

REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()


def questions(out: Path, chat: str, memory: str, *extra: str) -> list[str]:
    return [
        "run", "questions", "--dataset", "sample", "--systems", "retrieval", "--memory",
        memory, "--limit", "6", "--n-boot", "50", "--model", "openai-compatible/scripted",
        "--base-url", chat, "--out", str(out), *extra,
    ]  # fmt: skip


def test_memory_calls_are_the_runners_run_rerun_and_score(tmp_path: Path) -> None:
    answers, _ = sample_answers(load_dataset("sample"))
    monkey = pytest.MonkeyPatch()
    monkey.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    out = tmp_path / "run"
    try:
        with ChatServer(reply=Scripted(answers)) as chat, MemoryServer() as memory:
            argv = questions(out, chat.base_url, memory.base_url)
            first = runner.invoke(app, argv)
            assert first.exit_code == 0, first.output
            sent = len(memory.requests)
            ingests, recalls = memory.count("ingest"), memory.count("recall")
            assert recalls == 6 and ingests > 0

            usage = json.loads((out / "usage.json").read_text())
            role = usage["roles"]["memory"]
            assert role["calls"] == ingests + recalls and role["failed_calls"] == 0
            assert set(role["latency_ms"]) == {"p50", "p95", "timed_calls"}
            assert role["latency_ms"]["timed_calls"] == ingests + recalls
            assert 0 <= role["latency_ms"]["p50"] <= role["latency_ms"]["p95"]
            assert usage["stages"]["recall"]["memory"]["calls"] == role["calls"]
            saved = (out / "parts" / "recall.jsonl").read_text().splitlines()
            subjects = {json.loads(x)["rows"][0]["subject"] for x in saved}
            assert len(saved) == len(subjects) >= 1  # one recall unit per subject asked
            manifest = json.loads((out / "manifest.json").read_text())
            assert {"recall", "solve", "score"} <= set(manifest["identity"])
            assert manifest["stages"]["recall"]["memory budget"]["tokens"] > 0

            again = runner.invoke(app, argv)  # unchanged rerun of a finished run
            assert again.exit_code == 0, again.output
            assert len(memory.requests) == sent

            judge = ["--judge-model", "openai-compatible/judge", "--judge-base-url"]
            scored = runner.invoke(app, ["score", str(out), *judge, chat.base_url])
            assert scored.exit_code == 0, scored.output
            assert len(memory.requests) == sent  # score never calls the system under test

            other = runner.invoke(app, [*argv, "--temperature", "0.5"])  # a new solve identity
            assert other.exit_code == 0, other.output
            assert len(memory.requests) == sent  # the recalls are kept: only answers redone
    finally:
        monkey.undo()


CLI = "import sys; from dialogbench.cli import main; sys.argv[0] = 'dialogbench'; main()"


def test_a_kill_mid_recall_then_a_rerun_sends_only_the_unfinished_recalls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO / "tests")])}
    with MemoryServer() as memory:
        argv = [
            sys.executable, "-c", CLI, "run", "retrieval", "--dataset", "sample",
            "--retrievers", "bm25", "--memory", memory.base_url, "--n-boot", "50",
            "--out", str(out),
        ]  # fmt: skip
        saved = out / "parts" / "recall.jsonl"
        memory.enqueue("recall", *[MemoryFault.ok(delay=0.05)] * 2000)  # a slow service
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        end = time.monotonic() + 120
        while not (saved.exists() and saved.read_text().count("\n") >= 1):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < end, "no recall unit saved in 120 s"
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        done = {json.loads(x)["rows"][0]["subject"] for x in saved.read_text().splitlines()}
        before = len(memory.requests)
        assert len(done) == 1
        memory.clear("recall")  # the service is quick again
        rerun = runner.invoke(app, argv[3:])
        assert rerun.exit_code == 0, rerun.output
        resent = memory.requests[before:]
        subjects = {r.body.get("subject") for r in resent}
        subjects.discard(None)
        assert resent and done.isdisjoint(subjects)  # the finished subject is not replayed
        lines = saved.read_text().splitlines()
        assert len({json.loads(x)["rows"][0]["subject"] for x in lines}) == 2


def test_the_memory_options_are_the_memory_roles_in_help() -> None:
    """`--memory`, `--memory-k` and `--memory-tokens` are declared once (recall.py) and
    shown as the memory role's options, as `--judge-model` is the judge role's."""
    from typer.testing import CliRunner

    from dialogbench.cli import app

    for track in ("retrieval", "questions", "chat", "detection"):
        got = CliRunner().invoke(app, ["run", track, "--help"], env={"COLUMNS": "200"})
        assert got.exit_code == 0, got.output
        panel = got.output[got.output.index("memory role") :].split("╰")[0]
        assert "--memory " in panel
        if track in ("questions", "chat"):
            assert "--memory-k" in panel and "--memory-tokens" in panel
