"""report demo across runs: Table 3 rows per model, languages apart and pooled, DEMO's
Overall, from hand-made run folders whose figures are worked out by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from dialogbench.cli import app
from dialogbench.data.errors import DataError
from dialogbench.tracks.demo.report import POOLED, paper_rows, played_sides, read_run, sotopia_rows

runner = CliRunner()


def write_run(
    folder: Path, track: str, model: str, rows: list[dict[str, Any]], **extra: Any
) -> Path:
    folder.mkdir(parents=True)
    judge = extra.pop("judge", "gpt-4o")  # None: the judge falls back to the model
    roles: dict[str, Any] = {"model": {"model": model}}
    roles["judge"] = {"model": judge} if judge else {"same_as": "model"}
    manifest = {"track": track, "roles": roles, "config": extra}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    (folder / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def aw(task: str, lang: str, score: float | None) -> dict[str, Any]:
    return {"task": task, "lang": lang, "score": score}


def ep(eid: str, lang: str, g: float, b: float, s: float, r: float) -> dict[str, Any]:
    return {
        "episode": eid,
        "lang": lang,
        "goal": g,
        "believability": b,
        "skillfulness": s,
        "realism": r,
        "average": (g + b + s + r) / 4,
    }


@pytest.fixture
def runs(tmp_path: Path) -> list[Path]:
    a_rows = [
        aw("goal", "en", 6),
        aw("goal", "en", 8),
        aw("persona", "en", 4),
        aw("scene", "en", 5),
        aw("utterance", "en", 9),
        aw("goal", "zh", 2),
        aw("persona", "zh", 4),
        aw("scene", "zh", 6),
        aw("utterance", "zh", 8),
        aw("utterance", "zh", None),
    ]
    i_rows = [ep("e1", "en", 8, 9, 8, 7), ep("e2", "en", 6, 9, 8, 9), ep("z1", "zh", 4, 5, 6, 7)]
    return [
        write_run(tmp_path / "a", "demo-awareness", "m1", a_rows),
        write_run(tmp_path / "i", "demo-interaction", "m1", i_rows, rubric="demo"),
        write_run(tmp_path / "b", "demo-awareness", "m2", [aw("goal", "en", 3)]),
    ]


def test_rows_per_model_language_and_pooled(runs: list[Path]) -> None:
    rows = paper_rows([read_run(r) for r in runs], n_boot=200)
    assert list(rows) == ["m1", "m2"] and list(rows["m1"]) == ["en", "zh", POOLED]
    en = rows["m1"]["en"]
    assert en.awareness["goal"].value == 7.0
    assert en.awareness_average.value == pytest.approx((7 + 4 + 5 + 9) / 4)
    assert en.interaction["believability"].value == 9.0
    assert en.interaction_average.value == pytest.approx((8 + 9 + 8 + 7 + 6 + 9 + 8 + 9) / 8)
    assert en.overall.value == pytest.approx((2 * 6.25 + 8.0) / 3)  # DEMO's Overall
    pooled = rows["m1"][POOLED]
    assert pooled.awareness["goal"].value == pytest.approx((6 + 8 + 2) / 3)  # items pooled
    assert pooled.awareness["utterance"].value == pytest.approx((9 + 8) / 2)  # None left out
    assert pooled.interaction["goal"].value == pytest.approx(6.0)
    zh = rows["m1"]["zh"]
    assert zh.overall.value == pytest.approx((2 * 5.0 + 5.5) / 3)
    m2 = rows["m2"]["en"]
    assert m2.interaction == {} and any("no interaction" in n for n in m2.notes)


def test_cli_prints_table3(runs: list[Path]) -> None:
    result = runner.invoke(
        app, ["report", "demo", *map(str, runs), "--n-boot", "50"], terminal_width=250
    )
    assert result.exit_code == 0, result.output
    assert "Table 3" in result.output and "pooled" in result.output
    assert "6.833" in result.output  # m1 en Overall: (2 x 6.25 + 8) / 3


def test_two_runs_of_one_model_and_track_is_an_error(tmp_path: Path, runs: list[Path]) -> None:
    again = write_run(tmp_path / "again", "demo-awareness", "m1", [aw("goal", "en", 1)])
    with pytest.raises(DataError, match="second demo-awareness run of m1"):
        paper_rows([read_run(r) for r in [*runs, again]])
    result = runner.invoke(app, ["report", "demo", str(tmp_path / "nothing")])
    assert result.exit_code == 2 and "no finished run" in result.output


def test_sotopia_runs_go_to_table4(tmp_path: Path) -> None:
    run = write_run(tmp_path / "s", "demo-interaction", "m1", [], rubric="sotopia")
    figure = {"value": -0.5, "ci_low": -1.0, "ci_high": 0.0, "n": 3}
    (run / "summary.json").write_text(json.dumps({"en": {"secret": figure, "overall": figure}}))
    info = read_run(run)
    assert paper_rows([info]) == {}
    assert sotopia_rows([info])["m1"]["secret"].value == -0.5


def test_two_sotopia_runs_of_one_model_are_refused_naming_both(tmp_path: Path) -> None:
    figure = {"value": -0.5, "ci_low": -1.0, "ci_high": 0.0, "n": 3}
    folders = []
    for name in ("first", "second"):
        run = write_run(tmp_path / name, "demo-interaction", "m1", [], rubric="sotopia")
        (run / "summary.json").write_text(json.dumps({"en": {"overall": figure}}))
        folders.append(run)
    other = write_run(tmp_path / "other", "demo-interaction", "m2", [], rubric="sotopia")
    (other / "summary.json").write_text(json.dumps({"en": {"overall": figure}}))
    assert set(sotopia_rows([read_run(folders[0]), read_run(other)])) == {"m1", "m2"}
    with pytest.raises(DataError, match="second SOTOPIA-judged demo-interaction run of m1"):
        sotopia_rows([read_run(f) for f in folders])
    result = runner.invoke(app, ["report", "demo", *map(str, folders)], terminal_width=400)
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert str(folders[0]) in text and str(folders[1]) in text, text


def test_runs_of_two_judges_get_a_table_each(tmp_path: Path, runs: list[Path]) -> None:
    """Issue 25.8 (Table 8's shape): a run and its re-judging by another judge
    (`RUN/judges/<judge>/`) are one table per judge, never a second run of the model."""
    rejudged = write_run(
        runs[0] / "judges" / "deepseek",
        "demo-awareness",
        "m1",
        [
            aw("goal", "en", 9),
            aw("persona", "en", 5),
            aw("scene", "en", 6),
            aw("utterance", "en", 7),
        ],
        judge="deepseek",
    )
    assert read_run(runs[0]).judge == "gpt-4o" and read_run(rejudged).judge == "deepseek"
    self_judged = write_run(tmp_path / "self", "demo-awareness", "m3", [], judge=None)
    assert read_run(self_judged).judge == "m3"  # the judge fell back to the model's own
    result = runner.invoke(
        app,
        ["report", "demo", *map(str, runs), str(rejudged), "--n-boot", "50"],
        terminal_width=250,
    )
    assert result.exit_code == 0, result.output
    assert "judged by gpt-4o" in result.output and "judged by deepseek" in result.output
    assert "2 judges, one table each" in result.output
    deepseek = result.output.split("judged by deepseek")[1]
    assert "6.750" in deepseek  # its awareness average: (9 + 5 + 6 + 7) / 4


def test_sotopia_table_says_which_side_the_model_played(tmp_path: Path) -> None:
    """Issue 25.8: SOTOPIA-hard's figures are one side's; the Table 4 shape says which."""
    rows = [{"episode": f"e{i}", "lang": "en", "under_test": "p2"} for i in range(3)]
    run = write_run(tmp_path / "s", "demo-interaction", "m1", rows, rubric="sotopia")
    figure = {"value": 2.5, "ci_low": 2.0, "ci_high": 3.0, "n": 3}
    (run / "summary.json").write_text(json.dumps({"en": {"goal": figure, "overall": figure}}))
    mixed = [*rows, {"episode": "e9", "lang": "en", "under_test": "p1"}]
    other = write_run(tmp_path / "t", "demo-interaction", "m2", mixed, rubric="sotopia")
    (other / "summary.json").write_text(json.dumps({"en": {"goal": figure, "overall": figure}}))
    assert played_sides([read_run(run), read_run(other)]) == {"m1": "p2", "m2": "p1 x1, p2 x3"}
    result = runner.invoke(app, ["report", "demo", str(run)], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "plays" in result.output and " p2 " in result.output
