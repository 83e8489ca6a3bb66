"""`dialogbench build realcompanion` and `dialogbench data show`: a build through the CLI
against a scripted loopback model, its exit status, and one item's stages printed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dialogbench.cli import app
from dialogbench.testing import ChatServer
from dialogbench.testing.chatserver import Fault, status

from .scripted import Script, Scripted

runner = CliRunner()


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    monkeypatch.setenv("COLUMNS", "200")


def test_build_then_validate_then_show(tmp_path: Path) -> None:
    out = tmp_path / "built"
    scripted = Scripted(default=Script("back-reference", ["@first"]))
    with ChatServer(reply=scripted) as srv:
        args = ["build", "realcompanion", "--from", "sample", "--out", str(out)]
        args += ["--model", "openai-compatible/scripted", "--base-url", srv.base_url]
        args += ["--proportional", "6", "--enriched", "3", "--abstention", "2", "--seed", "4"]
        args += ["--subjects", "maya", "--no-profile", "--no-anonymise"]
        result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "Stage A proposed a distant referent" in result.output
    assert "rules fired" in result.output
    report = json.loads((out / "build.json").read_text())
    assert report["output"]["subjects"] == ["maya"]
    assert report["provenance"]["seed"] == 4
    assert sum(n["built"] for n in report["strata"].values()) == 11
    valid = runner.invoke(app, ["data", "validate", str(out)])
    assert valid.exit_code == 0 and "valid. 1 subjects" in valid.output
    item = json.loads((out / "maya" / "chat.jsonl").read_text().splitlines()[-1])
    shown = runner.invoke(app, ["data", "show", str(out), "--item", f"maya/{item['probe_id']}"])
    assert shown.exit_code == 0, shown.output
    for stage in ("resolve", "verify", "classify", "reply", "validate"):
        assert stage in shown.output
    assert f"rule {item['rule']} (" in shown.output
    assert "recorded" in shown.output and "strict" in shown.output
    missing = runner.invoke(app, ["data", "show", str(out), "--item", "nope"])
    assert missing.exit_code == 2 and "no chat item" in missing.output


def test_failed_stage_exits_3_and_names_the_failures(tmp_path: Path) -> None:
    out = tmp_path / "built"
    scripted = Scripted(default=Script("back-reference", ["@first"]))

    def refuse(number: int, body: dict[str, object]) -> Fault | None:
        fmt = body.get("response_format")
        return status(400) if isinstance(fmt, dict) and "Validate" in str(fmt) else None

    with ChatServer(reply=scripted, rules=refuse) as srv:
        args = ["build", "realcompanion", "--from", "sample", "--out", str(out)]
        args += ["--model", "openai-compatible/scripted", "--base-url", srv.base_url]
        args += ["--proportional", "3", "--enriched", "0", "--abstention", "0", "--no-profile"]
        result = runner.invoke(app, args)
    assert result.exit_code == 3, result.output
    assert "failed" in result.output and "rerun the same command" in result.output


def test_judge_options_are_the_run_role_options() -> None:
    result = runner.invoke(app, ["build", "realcompanion", "--help"])
    assert result.exit_code == 0
    for option in ("--judge-model", "--judge-base-url", "--judge-timeout", "--proportional"):
        assert option in result.output
    bad = runner.invoke(app, ["build", "realcompanion", "--from", "sample", "--out", "x"])
    assert bad.exit_code == 2 and "--model" in bad.output
