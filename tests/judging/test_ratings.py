"""Ratings files: reading (and its errors), writing, and a run's judged rows as ratings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dialogbench.data.errors import DataError
from dialogbench.judging.ratings import Rating, ratings_from_run, read_ratings, write_ratings


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_read_skips_blank_scores_and_keeps_kinds(tmp_path: Path) -> None:
    f = _write(
        tmp_path / "r.csv",
        "rater,item,dimension,score,kind\nj,a,goal,7,judge\nh,a,goal,,human\nh,b,goal,6.5,human\n",
    )
    got = read_ratings(f)
    assert got.blank == 1
    assert got.raters() == {"j": "judge", "h": "human"}
    assert got.table("goal") == {"j": {"a": 7.0}, "h": {"b": 6.5}}


def test_kind_column_is_optional(tmp_path: Path) -> None:
    got = read_ratings(_write(tmp_path / "r.csv", "item,rater,dimension,score\na,x,d,1\n"))
    assert got.ratings == [Rating("a", "x", "d", 1.0, "unknown")]


@pytest.mark.parametrize(
    ("text", "where", "field"),
    [
        ("item,rater,score\na,x,1\n", "line 1", "dimension"),
        ("item,rater,dimension,score\na,x,d,seven\n", "line 2", "score"),
        ("item,rater,dimension,score\na,x,d,inf\n", "line 2", "score"),
        ("item,rater,dimension,score\na,x,d,1\na,x,d,2\n", "line 3", "score"),
        ("item,rater,dimension,score\n,x,d,1\n", "line 2", "item"),
        ("item,rater,dimension,score\na,x\n", "line 2", "dimension"),
        ("item,rater,dimension,score,kind\na,x,d,1,robot\n", "line 2", "kind"),
        ("item,rater,dimension,score,kind\na,x,d,1,human\nb,x,d,1,judge\n", "line 3", "kind"),
        ("item,rater,dimension,score\na,x,d,\n", None, None),
        ("", "line 1", None),
    ],
)
def test_bad_files_name_the_line_field_and_fix(
    tmp_path: Path, text: str, where: str | None, field: str | None
) -> None:
    f = _write(tmp_path / "bad.csv", text)
    with pytest.raises(DataError) as caught:
        read_ratings(f)
    e = caught.value
    assert e.path == str(f) and e.fix
    assert e.record == where
    assert e.field == field


def test_write_then_read_round_trips(tmp_path: Path) -> None:
    rows = [Rating("i1", "j", "goal", 7.5, "judge"), Rating("i1", "h", "goal", None, "human")]
    f = tmp_path / "out" / "r.csv"
    assert write_ratings(f, rows) == 2
    assert f.read_text().splitlines()[1:] == ["i1,j,goal,7.5,judge", "i1,h,goal,,human"]
    got = read_ratings(f)
    assert got.ratings == rows[:1] and got.blank == 1


def _run(folder: Path, track: str, rows: list[dict[str, object]]) -> Path:
    folder.mkdir()
    (folder / "manifest.json").write_text(json.dumps({"track": track}))
    (folder / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def test_awareness_run_gives_one_score_per_answer(tmp_path: Path) -> None:
    judged = {
        "judged": True,
        "judge_model": "J",
        "judge_scores": {"accuracy": 6, "hallucination": 9},
    }
    rows: list[dict[str, object]] = [
        {"id": "d1:goal", "task": "goal", "lang": "en", "score": 7.5, **judged},
        {
            "id": "d2:goal",
            "task": "goal",
            "lang": "en",
            "score": None,
            "judged": False,
            "judge_model": "J",
            "judge_scores": None,
        },
    ]
    got = ratings_from_run(_run(tmp_path / "aw", "demo-awareness", rows), ["ann", "bo"])
    assert got == [
        Rating("goal-en:d1:goal", "J", "goal", 7.5, "judge"),
        Rating("goal-en:d1:goal", "ann", "goal", None, "human"),
        Rating("goal-en:d1:goal", "bo", "goal", None, "human"),
    ]


def test_interaction_run_gives_each_dimension(tmp_path: Path) -> None:
    row = {
        "id": "e1",
        "judged": True,
        "judge_model": "J",
        "judge_scores": {"goal": 3, "realism": 8},
    }
    got = ratings_from_run(_run(tmp_path / "int", "demo-interaction", [row]), ["h"])
    assert [(r.rater, r.dimension, r.score) for r in got] == [
        ("J", "goal", 3.0),
        ("h", "goal", None),
        ("J", "realism", 8.0),
        ("h", "realism", None),
    ]


def test_not_a_run(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="no finished run"):
        ratings_from_run(tmp_path)
