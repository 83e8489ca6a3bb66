"""The HTML report without a browser: what the page holds, escaping, comparability, the
ROC points against scikit-learn, the CLI (`report RUN_DIR...`, `report demo`) and `view`'s
server."""

from __future__ import annotations

import json
import re
import shutil
import threading
import urllib.request
from html import escape
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import roc_curve  # type: ignore[import-untyped]
from typer.testing import CliRunner

from dialogbench.cli import app
from dialogbench.cli.report import serve
from dialogbench.data.errors import DataError
from dialogbench.report.html import (
    arrange,
    figures,
    not_comparable,
    read_run,
    read_runs,
    render,
    roc_points,
)
from golden.cases import FIXTURES
from report.conftest import HOSTILE, MakeRun


def test_figures_flatten_every_estimate() -> None:
    summary = {
        "bm25": {"hit@1": {"value": 0.5, "ci_low": 0.4, "ci_high": 0.6, "n": 10}},
        "x": {"y": {"z": {"value": None, "ci_low": None, "ci_high": None, "n": 0}}},
        "note": "not a figure",
    }
    got = dict(figures(summary))
    assert set(got) == {("bm25", "hit@1"), ("x", "y", "z")}
    assert got[("bm25", "hit@1")].value == 0.5
    assert got[("x", "y", "z")].value is None


def test_arrange_default_and_layout() -> None:
    assert arrange(("bm25", "hit@1"), None) == ("", "bm25", "hit@1", None)
    assert arrange(("gains", "C1-C0", "all"), None) == ("gains", "C1-C0", "all", None)
    layout = ("row", "break", "col")
    assert arrange(("full", "all", "judge"), layout) == ("", "full", "judge", None)
    assert arrange(("full", "category=temporal", "judge"), layout) == (
        "",
        "full",
        "judge",
        "category=temporal",
    )


@pytest.mark.parametrize("seed", range(5))
def test_roc_points_match_scikit_learn(seed: int) -> None:
    rng = np.random.default_rng(seed)
    scores = rng.integers(0, 6, size=60).astype(float)  # ties on purpose
    labels = rng.random(60) < 0.4
    pts = roc_points(list(zip(scores.tolist(), labels.tolist(), strict=True)))
    fpr, tpr, _ = roc_curve(labels, scores, drop_intermediate=False)
    assert np.allclose([p[0] for p in pts], fpr)
    assert np.allclose([p[1] for p in pts], tpr)


def test_roc_points_need_both_classes() -> None:
    assert roc_points([(0.1, True), (0.5, True)]) == []


def test_retrieval_page_holds_figures_plots_and_drilldown(make_run: MakeRun) -> None:
    run = make_run("retrieval-sample")
    page = render(read_runs([run]))
    summary = json.loads((run / "summary.json").read_text())["all probes (pooled)"]
    for system, metrics in summary.items():
        assert f"<th>{escape(system)}</th>" in page
        assert f"<b>{metrics['hit@5']['value']:.3f}</b>" in page
    assert "hit@k per system" in page
    assert 'class="whisker"' in page
    assert '<details class="item">' in page
    assert '<mark class="id hit"' in page  # evidence marked in what a retriever brought back
    assert "breakdown.json" in page and "distance.json" in page
    assert re.search(r"(src|href)=\"(https?:)?//", page) is None  # nothing fetched


def test_detection_and_chat_plots(make_run: MakeRun) -> None:
    page = render(read_runs([make_run("detection-sample-model")]))
    assert "ROC: needs memory" in page and "AUROC per system" in page
    page = render(read_runs([make_run("chat-sample")]))
    assert "judge scores: content_match" in page
    assert "paired gains per condition" in page
    assert "judge_reason" in page
    assert '<mark class="id hit"' in page  # the chat items' references, from the dataset
    assert "evidence:<ul>" in page


def test_text_from_a_run_is_escaped(hostile_run: Path) -> None:
    page = render(read_runs([hostile_run]))
    assert HOSTILE not in page
    assert "<script>window.__pwned" not in page
    assert escape(HOSTILE) in page


def test_runs_that_differ_are_flagged_saying_which(make_run: MakeRun, tmp_path: Path) -> None:
    a = tmp_path / "a"
    shutil.copytree(make_run("retrieval-sample"), a)
    b = tmp_path / "b"
    shutil.copytree(a, b)
    manifest = json.loads((b / "manifest.json").read_text())
    manifest["dataset"]["sha256"] = "0" * 64
    (b / "manifest.json").write_text(json.dumps(manifest))
    runs = read_runs([a, b], texts=False)
    problems = not_comparable(runs)
    assert len(problems) == 1 and problems[0].startswith("dataset sha256 differs (a: ")
    page = render(runs)
    assert "Not comparable" in page and "dataset sha256 differs" in page
    assert '<td class="run">a</td>' in page and '<td class="run">b</td>' in page
    assert not_comparable(read_runs([a, a], texts=False)) == []


def test_judge_and_model_differences_are_named(make_run: MakeRun, tmp_path: Path) -> None:
    a = tmp_path / "a"
    shutil.copytree(make_run("chat-sample"), a)
    b = tmp_path / "b"
    shutil.copytree(a, b)
    manifest = json.loads((b / "manifest.json").read_text())
    manifest["roles"]["judge"]["model"] = "openai-compatible/other-judge"
    manifest["config"]["max_tokens"] = 512
    (b / "manifest.json").write_text(json.dumps(manifest))
    problems = not_comparable(read_runs([a, b], texts=False))
    assert [p.split(" differs")[0] for p in problems] == ["judge", "budget (max_tokens)"]


def test_not_a_run_folder_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"no manifest\.json: not a finished run folder"):
        read_run(tmp_path)
    (tmp_path / "manifest.json").write_text("{broken")
    with pytest.raises(DataError, match=r"manifest\.json: cannot be read as JSON"):
        read_run(tmp_path)


def test_cli_report_writes_the_page_and_report_demo_still_works(
    make_run: MakeRun, tmp_path: Path
) -> None:
    run = make_run("retrieval-sample")
    out = tmp_path / "page.html"
    result = CliRunner().invoke(app, ["report", str(run), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_text().startswith("<!doctype html>")
    result = CliRunner().invoke(app, ["report", "html", str(run), "--out", str(out)])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(app, ["report", str(tmp_path / "nothing")])
    assert result.exit_code == 2
    result = CliRunner().invoke(app, ["report", "demo"])
    assert result.exit_code == 2 and "give RUN_DIR" in result.output


def test_view_serves_the_report(make_run: MakeRun) -> None:
    server = serve([make_run("retrieval-sample")])
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        with urllib.request.urlopen(url, timeout=30) as got:
            assert got.status == 200
            assert "hit@k per system" in got.read().decode()
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(url + "elsewhere", timeout=30)
    finally:
        server.shutdown()
        server.server_close()


def _from_fixture(case: str, into: Path) -> Path:
    """A run folder from a golden fixture's result files (with a minimal manifest)."""
    import gzip

    into.mkdir()
    for f in (FIXTURES / case).iterdir():
        if f.is_file():
            data = gzip.decompress(f.read_bytes()) if f.suffix == ".gz" else f.read_bytes()
            (into / f.name.removesuffix(".gz")).write_bytes(data)
    track = case.split("-")[0] if not case.startswith("demo-") else "-".join(case.split("-")[:2])
    (into / "manifest.json").write_text(json.dumps({"track": track, "dataset": {}}))
    return into


@pytest.mark.parametrize("case", sorted(p.name for p in FIXTURES.iterdir() if p.is_dir()))
def test_every_tracks_outputs_render(case: str, tmp_path: Path) -> None:
    run = _from_fixture(case, tmp_path / case)
    page = render(read_runs([run], texts=False))
    summary = json.loads((run / "summary.json").read_text())
    first = next(f.value for _, f in figures(summary) if f.value is not None)
    assert f"<b>{first:.3f}</b>" in page
    assert '<svg class="plot"' in page
    if case.startswith("coverage"):
        assert "coverage against token budget" in page
