"""`dialogbench score` on a finished run of every judged track: with one judge and with a
panel of two, never asking the model under test again. The runs are the golden cases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dialogbench.cli import app
from dialogbench.testing import ChatServer
from golden.cases import CASES, KEY_ENV, MODEL, environment, golden_reply, missing

JUDGED = (
    "chat-sample",
    "questions-locomo",
    "answers-sample",
    "demo-awareness-cped",
    "demo-interaction-sotopia",
)


@pytest.mark.parametrize("name", JUDGED)
def test_score_a_finished_run(name: str, tmp_path: Path) -> None:
    case = next(c for c in CASES if c.name == name)
    if (why := missing(case)) is not None:
        pytest.skip(why)
    run, cli = tmp_path / "run", CliRunner()
    with environment(tmp_path / "cache.sqlite"), ChatServer(reply=golden_reply) as srv:
        done = cli.invoke(app, case.argv(run, srv.base_url))
        assert done.exit_code in (0, 3), done.output
        before = json.loads((run / "summary.json").read_text())
        srv.reset()
        judge = ["--judge-base-url", srv.base_url, "--judge-api-key-env", KEY_ENV]
        one = cli.invoke(
            app,
            [
                "score",
                str(run),
                "--judge-model",
                "openai-compatible/other",
                *judge,
                "--out",
                str(tmp_path / "one"),
            ],
        )
        assert one.exit_code in (0, 3), one.output
        panel = cli.invoke(
            app,
            [
                "score",
                str(run),
                "--judge-model",
                "openai-compatible/a",
                "--judge-model",
                "openai-compatible/b",
                *judge,
                "--out",
                str(tmp_path / "p"),
            ],
        )
        assert panel.exit_code in (0, 3), panel.output
        asked = {body["model"] for body in srv.requests}
    assert MODEL not in asked and asked == {"other", "a", "b"}
    assert json.loads((run / "summary.json").read_text()) == before  # the run is untouched
    manifest = json.loads((tmp_path / "one" / "manifest.json").read_text())
    assert manifest["roles"]["judge"]["model"] == "openai-compatible/other"
    if "--model" in case.args:  # the answers track has no model under test, only a file
        assert manifest["roles"]["model"]["model"] == f"openai-compatible/{MODEL}"
    stored = json.loads((tmp_path / "p" / "judges.json").read_text())
    assert stored["agreement"]["judges"] == ["openai-compatible_a", "openai-compatible_b"]
    assert stored["agreement"]["rows"] > 0 and stored["spread"]
    assert all("spread" in figures for figures in stored["spread"].values())
    assert "Krippendorff's alpha" in panel.output


def test_a_track_without_a_judge_is_re_aggregated_not_re_judged(tmp_path: Path) -> None:
    case = next(c for c in CASES if c.name == "retrieval-sample")
    run, cli = tmp_path / "run", CliRunner()
    assert cli.invoke(app, case.argv(run, None)).exit_code == 0
    got = cli.invoke(app, ["score", str(run), "--judge-model", "openai-compatible/x"])
    assert got.exit_code == 2 and "has no judge" in got.output
    got = cli.invoke(app, ["score", str(run), "--set", "n_boot=50", "--out", str(tmp_path / "b")])
    assert got.exit_code == 0, got.output
    summary = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert summary["all probes (pooled)"]["bm25"]["hit@5"]["n"] > 0


def test_reconstruction_is_re_matched_with_a_new_threshold(tmp_path: Path) -> None:
    case = next(c for c in CASES if c.name == "reconstruction-memorybank")
    if (why := missing(case)) is not None:
        pytest.skip(why)
    run, cli = tmp_path / "run", CliRunner()
    with environment(tmp_path / "cache.sqlite"), ChatServer(reply=golden_reply) as srv:
        assert cli.invoke(app, case.argv(run, srv.base_url)).exit_code in (0, 3)
        srv.reset()
        got = cli.invoke(app, ["score", str(run), "--judge-model", "openai-compatible/x"])
        assert got.exit_code == 2 and "--set matcher=judge" in got.output
        got = cli.invoke(
            app, ["score", str(run), "--set", "threshold=0.5", "--out", str(tmp_path / "b")]
        )
        assert got.exit_code in (0, 3), got.output
        assert srv.request_count == 0
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert manifest["config"]["threshold"] == 0.5
