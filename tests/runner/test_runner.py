"""The runner around a track: resume by solve and score identity, usage per role, the
score command (one judge and a panel), and the generated CLI. Driven with the smallest
judged track (examples/echo_track.py) against the scripted loopback server."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dialogbench.cli import app
from dialogbench.data.registry import load_dataset
from dialogbench.runner import REGISTRY, RoleSpec, run_track
from dialogbench.runner.rescore import rescore
from dialogbench.testing.chatserver import ChatServer
from golden.cases import golden_reply

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
from examples.echo_track import ECHO, EchoConfig  # noqa: E402

CONFIG = EchoConfig(limit=6, n_boot=100)


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ChatServer]:
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    monkeypatch.setenv("DUMMY_KEY", "x")
    with ChatServer(reply=golden_reply) as srv:
        yield srv


def spec(srv: ChatServer, name: str) -> RoleSpec:
    return RoleSpec(f"openai-compatible/{name}", srv.base_url, "DUMMY_KEY")


def models_asked(srv: ChatServer) -> list[str]:
    return [body["model"] for body in srv.requests]


def units(path: Path) -> list[str]:
    return [json.loads(line)["unit"] for line in path.read_text().splitlines()]


def test_run_resume_and_reaggregate(tmp_path: Path, server: ChatServer) -> None:
    ds, out = load_dataset("sample"), tmp_path / "run"
    roles = {"model": spec(server, "m"), "judge": spec(server, "j")}
    first = run_track(ECHO, ds, out, CONFIG, roles)
    assert models_asked(server).count("m") == 6 and models_asked(server).count("j") == 6
    assert first.usage["roles"]["model"]["calls"] == 6
    assert first.usage["stages"]["score"]["judge"]["model"] == "openai-compatible/j"
    assert len((out / "items.jsonl").read_text().splitlines()) == 6
    manifest = json.loads((out / "manifest.json").read_text())
    assert set(manifest["roles"]) == {"model", "judge"}
    assert "api_key" not in json.dumps(manifest).replace("api_key_env", "")

    server.reset()
    again = run_track(ECHO, ds, out, replace(CONFIG, n_boot=50), roles)  # aggregate only
    assert server.request_count == 0 and again.solved_now == again.scored_now == 0
    assert again.usage == first.usage  # kept units keep what they spent

    rejudged = run_track(ECHO, ds, out, CONFIG, {**roles, "judge": spec(server, "j2")})
    assert set(models_asked(server)) == {"j2"}  # the model under test is not asked
    assert rejudged.solved_now == 0 and rejudged.scored_now == 6

    items = (out / "items.jsonl").read_text()
    solved = out / "parts" / "solved.jsonl"
    lines = solved.read_text().splitlines()
    solved.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:20])  # killed mid-write
    resumed = run_track(ECHO, ds, out, CONFIG, {**roles, "judge": spec(server, "j2")})
    assert resumed.solved_now == 1 and resumed.scored_now == 0  # only the lost unit
    assert len(set(units(solved))) == 6
    assert (out / "items.jsonl").read_text() == items


def test_judge_falls_back_to_the_model_and_is_charged_as_judge(
    tmp_path: Path, server: ChatServer
) -> None:
    done = run_track(ECHO, load_dataset("sample"), tmp_path, CONFIG, {"model": spec(server, "m")})
    assert done.manifest.roles["judge"] == {"same_as": "model"}
    assert done.usage["roles"]["judge"]["calls"] == 6
    assert done.usage["roles"]["model"]["calls"] == 6


def test_a_required_role_missing_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"needs a model .*--model"):
        run_track(ECHO, load_dataset("sample"), tmp_path, CONFIG, {})


def test_rescore_with_a_panel(tmp_path: Path, server: ChatServer) -> None:
    ds, run = load_dataset("sample"), tmp_path / "run"
    run_track(ECHO, ds, run, CONFIG, {"model": spec(server, "m"), "judge": spec(server, "j")})
    server.reset()
    judges = [spec(server, "a"), spec(server, "b")]
    got = rescore(run, judges, tmp_path / "panel", lambda t, n, s: load_dataset(n))
    assert sorted(set(models_asked(server))) == ["a", "b"]  # never "m"
    assert set(got.runs) == {"openai-compatible_a", "openai-compatible_b"}
    assert got.agreement is not None and got.agreement["rows"] == 6
    assert got.spread is not None and "spread" in got.spread["rating"]
    stored = json.loads((tmp_path / "panel" / "judges.json").read_text())
    assert stored["agreement"]["judges"] == list(got.runs)
    for name, finished in got.runs.items():
        assert finished.manifest.roles["model"]["model"] == "openai-compatible/m"
        assert (tmp_path / "panel" / name / "summary.json").exists()


def test_score_command(tmp_path: Path, server: ChatServer) -> None:
    run = tmp_path / "run"
    run_track(
        ECHO,
        load_dataset("sample"),
        run,
        CONFIG,
        {"model": spec(server, "m"), "judge": spec(server, "j")},
    )
    server.reset()
    cli = CliRunner()
    got = cli.invoke(app, ["score", str(run), "--set", "n_boot=20"])
    assert got.exit_code == 0, got.output
    assert server.request_count == 0
    got = cli.invoke(
        app,
        [
            "score",
            str(run),
            "--judge-model",
            "openai-compatible/a",
            "--judge-model",
            "openai-compatible/b",
            "--judge-base-url",
            server.base_url,
            "--judge-api-key-env",
            "DUMMY_KEY",
        ],
    )
    assert got.exit_code == 0, got.output
    assert "Krippendorff's alpha" in got.output
    assert (run / "judges" / "judges.json").exists()
    before = (run / "summary.json").read_text()
    got = cli.invoke(
        app,
        ["score", str(run), "--judge-model", "openai-compatible/c", "--judge-base-url",
         server.base_url, "--judge-api-key-env", "DUMMY_KEY"],
    )  # fmt: skip
    assert got.exit_code == 0, got.output
    assert (run / "judges" / "openai-compatible_c" / "summary.json").exists()
    assert (run / "summary.json").read_text() == before  # the run itself is left alone
    got = cli.invoke(app, ["score", str(run), "--set", "limit=2"])
    assert got.exit_code == 2 and "rerun the track" in got.output


def test_every_config_field_is_an_option() -> None:
    cli = CliRunner()
    for name, track in REGISTRY.items():
        if name == "echo":
            continue
        shown = cli.invoke(app, ["run", name, "--help"], terminal_width=200).output
        from dialogbench.runner.options import config_fields, flag

        for f in config_fields(track.config_type):
            option = flag(f.name, f)
            if f.metadata.get("help") is None:
                pytest.fail(f"{name}: field {f.name} has no help")
            assert option in shown, f"{name}: {option} missing from --help"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--k", "0"], "--k: 0 is below the minimum 1"),
        (["--k", "1000000000"], "--k: 1000000000 is above the maximum"),
        (["--n-boot", "0"], "--n-boot: 0 is below the minimum 1"),
        (["--cluster", "subjcet"], "--cluster: 'subjcet' is not one of: item, subject"),
        (["--seed", "x"], "--seed: 'x' is not an integer"),
    ],
)
def test_bad_options_are_one_line_errors(tmp_path: Path, argv: list[str], message: str) -> None:
    got = CliRunner().invoke(app, ["run", "retrieval", "--out", str(tmp_path), *argv])
    assert got.exit_code == 2
    assert message in got.output and "Traceback" not in got.output


def test_out_naming_a_file_is_an_error(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("")
    got = CliRunner().invoke(app, ["run", "retrieval", "--out", str(target)])
    assert got.exit_code == 2 and "is a file" in got.output


def test_a_unit_with_a_failed_call_is_done_again(tmp_path: Path, server: ChatServer) -> None:
    from dialogbench.testing.chatserver import status

    ds, out = load_dataset("sample"), tmp_path / "run"
    roles = {"model": spec(server, "m"), "judge": spec(server, "j")}
    server.rules = {1: status(400, message="scripted refusal")}  # not retried by the client
    first = run_track(ECHO, ds, out, CONFIG, roles)
    assert first.failures == {"failed model calls": 1, "units not finished (a call failed)": 1}
    assert first.failed_by_kind == {"model": {"rejected": 1}}
    assert first.exit_code == 3 and len(first.rows) == 5
    recorded = json.loads((out / "warnings.json").read_text())
    assert recorded["failures"] == first.failures
    assert recorded["failed_calls_by_kind"] == {"model": {"rejected": 1}}
    assert any("scripted refusal" in w for w in first.warnings)
    server.reset()
    server.rules = None
    again = run_track(ECHO, ds, out, CONFIG, roles)
    assert again.solved_now == 1 and again.exit_code == 0 and len(again.rows) == 6
    assert "failures" not in json.loads((out / "warnings.json").read_text())
    assert models_asked(server).count("m") == 1  # only the failed call is sent again
    assert again.usage["roles"]["model"]["failed_calls"] == 0


def test_a_failed_call_inside_a_unit_is_retried_on_resume(
    tmp_path: Path, server: ChatServer
) -> None:
    from dialogbench.testing.chatserver import status
    from dialogbench.tracks.realcompanion.chat import CHAT, ChatConfig

    ds, out = load_dataset("sample"), tmp_path / "run"
    roles = {"model": spec(server, "m"), "judge": spec(server, "j")}
    config = ChatConfig(limit=2, n_boot=50)
    server.rules = {1: status(400, message="scripted refusal")}
    first = run_track(CHAT, ds, out, config, roles)
    assert first.failures.get("failed model calls") == 1 and first.exit_code == 3
    server.reset()
    server.rules = None
    again = run_track(CHAT, ds, out, config, roles)
    assert again.retried == 1 and again.solved_now == 1
    assert models_asked(server).count("m") <= 1  # the good replies come from the cache
    assert again.usage["roles"]["model"]["failed_calls"] == 0
    assert all(row["reply"] is not None for row in again.rows)
