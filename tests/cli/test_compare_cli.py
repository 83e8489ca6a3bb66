"""`dialogbench compare TRACK RUN_DIR...` on real run folders: like-for-like runs ranked with
intervals and paired differences (checked by hand), and runs whose judge, answer model,
settings or dataset differ refused, naming the field and the run; `--force` ranks loudly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from dialogbench.cli import app
from dialogbench.cli.compare import held_fixed
from dialogbench.data.registry import load_dataset
from dialogbench.data.release import write_release
from dialogbench.runner import REGISTRY
from dialogbench.testing import ChatServer
from tracks.answers_support import judge_reply, our_file


def answers_run(
    cli: CliRunner, url: str, file: Path, out: Path, judge: str = "j", dataset: str = "sample"
) -> None:
    got = cli.invoke(
        app,
        [
            "score",
            "questions",
            "--answers",
            str(file),
            "--dataset",
            dataset,
            "--judge-model",
            f"openai-compatible/{judge}",
            "--judge-base-url",
            url,
            "--calibration",
            "2",
            "--n-boot",
            "100",
            "--out",
            str(out),
        ],
    )
    assert got.exit_code == 0, got.output


def items(run: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (run / "items.jsonl").read_text().splitlines()]


@pytest.fixture
def runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """Answer files of two systems, each judged by j; the first also by k, and on a
    dataset with one subject fewer."""
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    ds = load_dataset("sample")
    fewer = tmp_path / "fewer"
    write_release(ds.model_copy(update={"subjects": ds.subjects[:1]}), fewer)
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    our_file(ds, a, shift=0, system="acme")
    our_file(ds, b, shift=1, system="other")
    cli = CliRunner()
    out = {name: tmp_path / name for name in ("a", "b", "a_k", "a_fewer")}
    with ChatServer(reply=judge_reply) as srv:
        answers_run(cli, srv.base_url, a, out["a"])
        answers_run(cli, srv.base_url, b, out["b"])
        answers_run(cli, srv.base_url, a, out["a_k"], judge="k")
        answers_run(cli, srv.base_url, a, out["a_fewer"], dataset=str(fewer))
    return out


def test_like_for_like_runs_are_ranked(runs: dict[str, Path], tmp_path: Path) -> None:
    report = tmp_path / "ranking.json"
    got = CliRunner().invoke(
        app,
        ["compare", "answers", str(runs["a"]), str(runs["b"]), "--out", str(report)],
        terminal_width=200,
    )
    assert got.exit_code == 0, got.output
    assert "ranked by judge" in got.output and "lenient" in got.output
    ranking = json.loads(report.read_text())
    assert not ranking["forced"] and ranking["differences"] == []
    for rubric in ("lenient", "strict"):
        by: dict[str, dict[str, float]] = {}
        for name in ("a", "b"):
            by[str(runs[name])] = {
                f"{r['subject']}/{r['question']}": r["judge"]
                for r in items(runs[name])
                if r.get("rubric") == rubric and r["judge"] is not None
            }
        means = {run: float(np.mean(list(v.values()))) for run, v in by.items()}
        entries = ranking["groups"][rubric]
        assert [e["run"] for e in entries] == sorted(means, key=lambda r: -means[r])
        best, other = entries
        assert best["estimate"]["value"] == pytest.approx(means[best["run"]])
        common = set(by[best["run"]]) & set(by[other["run"]])
        diff = np.mean([by[best["run"]][u] - by[other["run"]][u] for u in common])
        asked = sum(len(s.questions) for s in load_dataset("sample").subjects)
        assert other["paired"] == len(common) == asked  # every question, in both runs
        assert other["vs_best"]["value"] == pytest.approx(diff)
        assert other["vs_best"]["ci_low"] <= other["vs_best"]["value"]


def test_answers_scored_without_a_judge_rank_by_an_official_figure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two files scored without a judge: the default figure (the judge's) is absent, and
    the refusal names the figures there are; --metric exact_match ranks them, by hand."""
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    ds = load_dataset("sample")
    cli = CliRunner()
    runs = []
    for shift in (0, 1):
        file, out = tmp_path / f"{shift}.jsonl", tmp_path / f"run{shift}"
        our_file(ds, file, shift=shift)
        args = ["score", "questions", "--answers", str(file), "--dataset", "sample"]
        got = cli.invoke(app, [*args, "--official", "--n-boot", "100", "--out", str(out)])
        assert got.exit_code == 0, got.output
        runs.append(str(out))
    refused = cli.invoke(app, ["compare", "answers", *runs], terminal_width=200)
    assert refused.exit_code == 2 and "--metric NAME" in refused.output, refused.output
    assert "exact_match" in refused.output and "official_f1" in refused.output
    report = tmp_path / "ranking.json"
    got = cli.invoke(
        app, ["compare", "answers", *runs, "--metric", "exact_match", "--out", str(report)]
    )
    assert got.exit_code == 0, got.output
    (entries,) = json.loads(report.read_text())["groups"].values()  # one group: no rubric
    means = {
        run: float(
            np.mean([r["exact_match"] for r in items(Path(run)) if r["exact_match"] is not None])
        )
        for run in runs
    }
    assert [e["run"] for e in entries] == sorted(runs, key=lambda r: -means[r])
    assert entries[0]["estimate"]["value"] == pytest.approx(max(means.values()))


def test_runs_that_differ_are_refused_naming_field_and_run(runs: dict[str, Path]) -> None:
    cli = CliRunner()
    got = cli.invoke(app, ["compare", "answers", str(runs["a"]), str(runs["a_k"])])
    assert got.exit_code == 2
    text = " ".join(got.output.split())
    assert "refusing to rank" in text and "judge model differs" in text
    assert f"{runs['a']} = openai-compatible/j" in text
    assert f"{runs['a_k']} = openai-compatible/k" in text and "--force" in text
    got = cli.invoke(app, ["compare", "answers", str(runs["a"]), str(runs["a_fewer"])])
    assert got.exit_code == 2 and "dataset sha256 differs" in " ".join(got.output.split())
    forced = cli.invoke(app, ["compare", "answers", str(runs["a"]), str(runs["a_k"]), "--force"])
    assert forced.exit_code == 0, forced.output
    assert "RANKED ALTHOUGH NOT LIKE FOR LIKE" in forced.output
    wrong = cli.invoke(app, ["compare", "questions", str(runs["a"]), str(runs["b"])])
    assert wrong.exit_code == 2 and "not 'questions'" in wrong.output
    alone = cli.invoke(app, ["compare", "answers", str(runs["a"])])
    assert alone.exit_code == 2 and "two or more" in alone.output


def test_question_runs_refused_on_answer_model_and_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    cli = CliRunner()

    def run(name: str, model: str, k: str) -> Path:
        out = tmp_path / name
        got = cli.invoke(
            app,
            [
                "run", "questions", "--dataset", "sample", "--systems", "retrieval",
                "--model", f"openai-compatible/{model}", "--base-url", srv.base_url,
                "--judge-model", "openai-compatible/judge", "--judge-base-url",
                srv.base_url, "--k", k, "--n-boot", "50", "--out", str(out),
            ],
        )  # fmt: skip
        assert got.exit_code in (0, 3), got.output
        return out

    def reply(body: dict[str, Any]) -> str:
        if "<candidate>" in body["messages"][-1]["content"]:  # a verdict, either rubric
            return json.dumps({"reason": "r", "correct": 1, "abstains": 1})
        return "a short answer"

    with ChatServer(reply=reply) as srv:
        x, y, x5 = run("x", "m1", "10"), run("y", "m2", "10"), run("x5", "m1", "5")
        x2 = run("x2", "m1", "10")
    got = cli.invoke(app, ["compare", "questions", str(x), str(y)])
    text = " ".join(got.output.split())
    assert got.exit_code == 2 and "answer model differs" in text
    assert f"{x} = openai-compatible/m1" in text and f"{y} = openai-compatible/m2" in text
    got = cli.invoke(app, ["compare", "questions", str(x), str(x5)])
    assert got.exit_code == 2 and "k differs" in " ".join(got.output.split())
    same = cli.invoke(app, ["compare", "questions", str(x), str(x2)], terminal_width=200)
    assert same.exit_code == 0 and "ranked by judge" in same.output, same.output


def test_memory_field_names_the_system_and_its_budget_is_held_fixed() -> None:
    track = REGISTRY["questions"]
    base: dict[str, Any] = {
        "track": "questions",
        "dataset": {"sha256": "d"},
        "config": {"k": 10, "n_boot": 100, "systems": ["full"]},
        "roles": {"model": {"model": "m"}, "judge": {"same_as": "model"}},
        "resolved": {"prompt_sha256": "p"},
    }
    one = held_fixed({**base, "config": {**base["config"], "memory": "bm25"}}, track)
    two = held_fixed({**base, "config": {**base["config"], "memory": "dense", "n_boot": 5}}, track)
    assert one == two  # the memory system and an aggregate setting may differ
    assert one["judge model"] == "m" and one["answer model"] == "m" and one["k"] == 10
    budget = {"spec": "dense", "budget_tokens": 2000}
    three = held_fixed({**base, "config": {**base["config"], "memory": budget}}, track)
    assert three["memory.budget_tokens"] == 2000 and "memory.spec" not in three
    roles = {**base["roles"], "memory": {"model": "mem0", "budget": 5}}
    four = held_fixed({**base, "roles": roles}, track)
    assert four["memory role.budget"] == 5 and "memory model" not in four


def test_memory_runs_ranked_like_for_like_and_refused_on_a_budget_difference(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    cli = CliRunner()

    def run(name: str, memory: str, *budget: str) -> Path:
        out = tmp_path / name
        got = cli.invoke(
            app,
            [
                "run", "questions", "--dataset", "sample", "--systems", "retrieval",
                "--memory", memory, *budget, "--model", "openai-compatible/m", "--base-url",
                srv.base_url, "--n-boot", "50", "--limit", "6", "--out", str(out),
            ],
        )  # fmt: skip
        assert got.exit_code in (0, 3), got.output
        return out

    def reply(body: dict[str, Any]) -> str:
        if "<candidate>" in body["messages"][-1]["content"]:
            return json.dumps({"reason": "r", "correct": 1, "abstains": 1})
        return "a short answer"

    with ChatServer(reply=reply) as srv:
        bm25 = run("bm25", "bm25", "--memory-k", "5")
        full = run("full", "full-context", "--memory-k", "5")
        wider = run("wider", "full-context", "--memory-k", "8")
        tokens = run("tokens", "full-context", "--memory-k", "5", "--memory-tokens", "300")
    same = cli.invoke(app, ["compare", "questions", str(bm25), str(full)], terminal_width=200)
    assert same.exit_code == 0, same.output  # the memory system may differ
    assert "memory:bm25" in same.output and "memory:full-context" in same.output
    for other, field in ((wider, "memory_k"), (tokens, "memory_tokens")):
        got = cli.invoke(app, ["compare", "questions", str(full), str(other)])
        text = " ".join(got.output.split())
        assert got.exit_code == 2 and f"{field} differs" in text, got.output
        assert "refusing to rank" in text
    assert json.loads((full / "manifest.json").read_text())["config"]["memory_k"] == 5
