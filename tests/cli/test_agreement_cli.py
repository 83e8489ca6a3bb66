"""`dialogbench agreement`: the tables from a hand-made ratings file, and clear errors."""

from __future__ import annotations

import json
from pathlib import Path

from scipy import stats
from typer.testing import CliRunner

from dialogbench.cli import app
from tests_support_ratings import SCORES, write_ratings_file

runner = CliRunner()


def test_agreement_prints_the_paper_tables_and_writes_json(tmp_path: Path) -> None:
    ratings = write_ratings_file(tmp_path / "r.csv")
    out = tmp_path / "agreement.json"
    result = runner.invoke(
        app, ["agreement", str(ratings), "--n-boot", "100", "--out", str(out)], terminal_width=200
    )
    assert result.exit_code == 0, result.output
    assert "1 blank scores left out" in result.output
    assert "the paper's Table 2" in result.output and "the paper's Table 6" in result.output
    assert "between humans" in result.output and "judge and human" in result.output
    assert "the paper's Figure 3: human - judge score differences" in result.output
    saved = json.loads(out.read_text())
    pair = next(
        p
        for p in saved["pairs"]
        if p["dimension"] == "goal" and {p["a"], p["b"]} == {"judge", "ann"}
    )
    x = [SCORES["goal"]["judge"][i] for i in sorted(SCORES["goal"]["judge"])]
    y = [SCORES["goal"]["ann"][i] for i in sorted(SCORES["goal"]["judge"])]
    want = stats.pearsonr(x, y)
    assert abs(pair["pearson"]["value"] - want.statistic) < 1e-9
    assert f"{want.statistic:.2f}" in result.output


def test_agreement_without_a_judge_asks_for_a_reference(tmp_path: Path) -> None:
    f = tmp_path / "r.csv"
    f.write_text("item,rater,dimension,score\na,x,d,1\nb,x,d,2\na,y,d,1\nb,y,d,3\n")
    result = runner.invoke(app, ["agreement", str(f), "--n-boot", "20"])
    assert result.exit_code == 0, result.output
    assert "--reference" in result.output
    result = runner.invoke(app, ["agreement", str(f), "--n-boot", "20", "--reference", "x"])
    assert "Table 6" in result.output


def test_agreement_on_a_bad_file_names_line_and_field(tmp_path: Path) -> None:
    f = tmp_path / "r.csv"
    f.write_text("item,rater,dimension,score\na,x,d,high\n")
    result = runner.invoke(app, ["agreement", str(f)])
    assert result.exit_code == 2
    assert "line 2" in result.output and "'score'" in result.output and "fix:" in result.output


def test_agreement_names_undefined_figures_with_their_reason(tmp_path: Path) -> None:
    f = tmp_path / "r.csv"
    # two items: Pearson's p is scipy's 1.0, Spearman's undefined; z gives one score only
    f.write_text(
        "item,rater,dimension,score\na,x,d,1\nb,x,d,2\na,y,d,1\nb,y,d,3\na,z,d,4\nb,z,d,4\n"
    )
    out = tmp_path / "agreement.json"
    result = runner.invoke(
        app, ["agreement", str(f), "--n-boot", "20", "--out", str(out)], terminal_width=400
    )
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    n2 = "x ~ y, Spearman p undefined: 2 pairs: the t-test of rho has no degrees of freedom"
    constant = (
        "x ~ z, Pearson r, Pearson p, Spearman rho, Spearman p undefined: "
        "constant scores from the second rater: no correlation"
    )
    assert n2 in text and constant in text
    pairs = {(p["a"], p["b"]): p for p in json.loads(out.read_text())["pairs"]}
    assert pairs["x", "y"]["pearson_p"] == 1.0 and pairs["x", "y"]["spearman_p"] is None
    assert set(pairs["x", "y"]["undefined"]) == {"spearman_p"}
    assert set(pairs["x", "z"]["undefined"]) >= {"pearson", "pearson_p", "spearman", "spearman_p"}
