"""`dialogbench export ratings`: a run's judged items as a ratings file people can fill."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from dialogbench.cli import app
from dialogbench.judging.ratings import read_ratings

runner = CliRunner()


def test_export_ratings_writes_judge_and_blank_rows(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "manifest.json").write_text(json.dumps({"track": "demo-interaction"}))
    row = {"id": "e1", "judged": True, "judge_model": "J", "judge_scores": {"goal": 4}}
    (run / "items.jsonl").write_text(json.dumps(row) + "\n")
    out = tmp_path / "ratings.csv"
    result = runner.invoke(
        app, ["export", "ratings", str(run), "--out", str(out), "--humans", "a,b"]
    )
    assert result.exit_code == 0, result.output
    assert "wrote 3 lines" in result.output
    assert out.read_text().splitlines() == [
        "item,rater,dimension,score,kind",
        "e1,J,goal,4,judge",
        "e1,a,goal,,human",
        "e1,b,goal,,human",
    ]
    assert read_ratings(out).blank == 2


def test_export_ratings_of_no_run_is_a_clear_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["export", "ratings", str(tmp_path), "--out", str(tmp_path / "x")])
    assert result.exit_code == 2
    assert "no finished run" in result.output


def test_export_ratings_merges_the_runs_of_several_judges(tmp_path: Path) -> None:
    for name, judge, score in (("run", "J1", 4), ("other", "J2", 6)):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "manifest.json").write_text(json.dumps({"track": "demo-interaction"}))
        row = {"id": "e1", "judged": True, "judge_model": judge, "judge_scores": {"goal": score}}
        (folder / "items.jsonl").write_text(json.dumps(row) + "\n")
    out = tmp_path / "ratings.csv"
    runs = [str(tmp_path / "run"), str(tmp_path / "other")]
    result = runner.invoke(app, ["export", "ratings", *runs, "--out", str(out), "--humans", "h"])
    assert result.exit_code == 0, result.output
    assert out.read_text().splitlines()[1:] == [
        "e1,J1,goal,4,judge",
        "e1,h,goal,,human",
        "e1,J2,goal,6,judge",
    ]
    twice = runner.invoke(app, ["export", "ratings", runs[0], runs[0], "--out", str(out)])
    assert twice.exit_code == 2 and "already scored" in twice.output
