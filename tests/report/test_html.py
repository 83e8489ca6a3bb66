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
    Figure,
    FigureTable,
    arrange,
    figure_plots,
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


MARKED_ID = re.compile(r'<span class="ids">(?:(?!</span>).)*<mark>')
"""An evidence id marked among the ids a row shows."""


def test_retrieval_page_holds_figures_plots_and_drilldown(make_run: MakeRun) -> None:
    run = make_run("retrieval-sample")
    page = render(read_runs([run]))
    summary = json.loads((run / "summary.json").read_text())["all probes (pooled)"]
    for system, metrics in summary.items():
        assert f"<th>{escape(system)}</th>" in page
        assert f"<b>{metrics['hit@5']['value']:.3f}</b>" in page
    assert "hit@k per system" in page
    assert 'class="whisker"' in page
    assert '<details class="item" data-subject=' in page
    assert MARKED_ID.search(page)  # evidence marked in what a retriever brought back
    assert "breakdown.json" in page and "distance.json" in page
    assert re.search(r"(src|href)=\"(https?:)?//", page) is None  # nothing fetched


def test_detection_and_chat_plots(make_run: MakeRun) -> None:
    page = render(read_runs([make_run("detection-sample-model")]))
    assert "ROC: needs memory" in page and "AUROC per system" in page
    page = render(read_runs([make_run("chat-sample")]))
    assert "judge scores: content_match" in page
    assert "paired gains per condition" in page
    assert "judge_reason" in page
    assert MARKED_ID.search(page)  # the chat items' references, from the dataset
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


def _fig(value: float, low: float, high: float, n: int = 10) -> Figure:
    return Figure(value, low, high, n)


def test_coverage_lines_show_their_intervals_and_an_identical_line_stays_visible() -> None:
    table = FigureTable("")
    for row in ("full", "retrieval"):  # the same figures: one line would hide the other
        table.add("r", row, "coverage@512", _fig(0.2, 0.1, 0.3))
        table.add("r", row, "coverage@2k", _fig(0.5, 0.4, 0.6))
    (svg,) = figure_plots([table])
    assert svg.count('class="band"') == 2  # each line's 95% interval shaded
    lines = re.findall(
        r'<path class="line" d="([^"]+)" stroke="([^"]+)"( stroke-dasharray="[^"]+")?', svg
    )
    assert len(lines) == 2 and lines[0][0] == lines[1][0]  # drawn where they are...
    assert lines[0][1:] != lines[1][1:]  # ...in another colour and dash pattern
    assert "retrieval (same as full)" in svg


def test_two_runs_plot_as_small_multiples_on_one_scale() -> None:
    table = FigureTable("")
    for run, v in (("a-very-long-run-name-for-the-baseline", 0.4), ("candidate-run", 0.9)):
        for row in ("bm25", "recency"):
            table.add(run, row, "hit@5", _fig(v, v - 0.1, min(1.0, v + 0.1)))
    plots = figure_plots([table])
    assert len(plots) == 2  # one chart per run...
    assert "run a-very-long-run-name-for-the-baseline" in plots[0]  # ...titled in full
    assert "run candidate-run" in plots[1]
    for svg in plots:
        labels = re.findall(r'<text class="axis xlabel"[^>]*><title>([^<]*)</title>', svg)
        assert labels == ["bm25", "recency"]  # the systems, without the run's name
    ticks = [re.findall(r'text-anchor="end">([0-9.]+)</text>', svg) for svg in plots]
    assert ticks[0] == ticks[1]  # one value axis for both


def test_a_judge_panels_agreement_reaches_the_report(make_run: MakeRun, tmp_path: Path) -> None:
    from dialogbench.testing import ChatServer
    from golden.cases import KEY_ENV, environment, golden_reply

    run = tmp_path / "chat"
    shutil.copytree(make_run("chat-sample"), run)
    with environment(tmp_path / "cache.sqlite"), ChatServer(reply=golden_reply) as srv:
        judges = ["--judge-model", "openai-compatible/judge-a"]
        judges += ["--judge-model", "openai-compatible/judge-b"]
        got = CliRunner().invoke(
            app,
            [
                "score",
                str(run),
                *judges,
                "--judge-base-url",
                srv.base_url,
                "--judge-api-key-env",
                KEY_ENV,
            ],
        )
    assert got.exit_code == 0, got.output
    stored = json.loads((run / "judges" / "judges.json").read_text())
    page = render(read_runs([run]))
    assert "Judge agreement (2 judges" in page
    alpha = stored["agreement"]["krippendorff_alpha"]
    said = "undefined" if alpha is None else f"{alpha:.3f}"
    assert f"Krippendorff's alpha (interval): <b>{said}</b>" in page
    for figure, per in stored["spread"].items():
        assert f"<th>{escape(figure)}</th>" in page
        assert f'<td class="fig">{per["spread"]:.3f}</td>' in page
