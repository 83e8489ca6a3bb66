"""The generated `dialogbench run TRACK` options: what a fuzz of the CLI found, as one-line
errors naming the option, for every track that has the field."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from dialogbench.cli import app
from dialogbench.runner import REGISTRY
from dialogbench.runner.options import config_fields, flag

BAD = (
    ("limit", "0", "below the minimum 1"),
    ("n_boot", "0", "below the minimum 1"),
    ("ks", "1000000000", "above the maximum"),
    ("ks", "0", "below the minimum 1"),
    ("k", "0", "below the minimum 1"),
    ("max_tokens", "-5", "below the minimum 1"),
    ("threshold", "nan", "not a finite number"),
    ("seed", "-1", "below the minimum 0"),
)
TRACKS = [n for n in REGISTRY if n != "echo"]


def model(track: str) -> list[str]:
    """`--model embedded` for a track with a model role."""
    return ["--model", "embedded"] if any(r.name == "model" for r in REGISTRY[track].roles) else []


def cases() -> list[tuple[str, str, str, str]]:
    out = []
    for name in TRACKS:
        fields = {f.name: f for f in config_fields(REGISTRY[name].config_type)}
        for field_name, value, message in BAD:
            if field_name in fields:
                out.append((name, flag(field_name, fields[field_name]), value, message))
    return out


@pytest.mark.parametrize(("track", "option", "value", "message"), cases())
def test_bad_values_are_one_line_errors(
    track: str, option: str, value: str, message: str, tmp_path: Path
) -> None:
    got = CliRunner().invoke(
        app, ["run", track, "--out", str(tmp_path), *model(track), option, value]
    )
    assert got.exit_code == 2, got.output
    assert f"{option}: " in got.output and message in got.output
    assert "Traceback" not in got.output and not (tmp_path / "manifest.json").exists()


@pytest.mark.parametrize("track", TRACKS)
def test_out_naming_a_file(track: str, tmp_path: Path) -> None:
    target = tmp_path / "a-file"
    target.write_text("")
    got = CliRunner().invoke(app, ["run", track, "--out", str(target), *model(track)])
    assert got.exit_code == 2 and "is a file" in got.output, got.output


@pytest.mark.parametrize("track", TRACKS)
def test_help_lists_every_option_with_its_default(track: str) -> None:
    shown = CliRunner().invoke(app, ["run", track, "--help"], terminal_width=240).output
    for f in config_fields(REGISTRY[track].config_type):
        assert flag(f.name, f) in shown or f"--no-{f.name.replace('_', '-')}" in shown
        assert f.metadata.get("help"), f"{track}.{f.name} has no help"
    assert "default" in shown
    assert ("--model" in shown) == bool(model(track))
