"""How a run ends when something goes wrong: the exit status, failures counted by kind, an
unreachable server (fail fast, exit 4), the run-folder lock (two real processes, a lock
left by a killed one), Ctrl-C (a real SIGINT), damaged state and an unwritable folder.

Real parts only: the loopback `ChatServer`, real processes and real files."""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from dialogbench.cli import app
from dialogbench.data.registry import load_dataset
from dialogbench.models import Model, ModelSpec, make_provider
from dialogbench.models.spec import public_url
from dialogbench.runner import run_track
from dialogbench.runner.record import RunLock
from dialogbench.runner.status import (
    EXIT_STATUS_HELP,
    ExitCode,
    FolderError,
    FolderLocked,
    Unreachable,
)
from dialogbench.testing.chatserver import ChatServer, Fault, delay, ok
from golden.cases import golden_reply

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
from examples.echo_track import ECHO, EchoConfig  # noqa: E402

CONFIG = EchoConfig(limit=6, n_boot=100)
WAIT_S = 60.0
"""Generous bound for a subprocess to reach a state (a loaded 2-core machine is slow)."""

# `dialogbench` with the echo track registered, as a real process
ECHO_CLI = (
    "import sys; sys.path.insert(0, {repo!r}); import examples.echo_track; "
    "from dialogbench.cli import main; sys.argv[0] = 'dialogbench'; main()"
)


@pytest.fixture(autouse=True)
def interruptible() -> Iterator[None]:
    """Children here must take Ctrl-C: a pytest started in the background by a shell without
    job control ignores SIGINT, and a child would inherit that (Python then installs no
    KeyboardInterrupt handler). Restore the default for the test, and after it what it was."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    monkeypatch.setenv("DUMMY_KEY", "x")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO / "tests")])}


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def quick(name: str, base_url: str) -> Model:
    """A model that does not retry: an unreachable server fails at once."""
    spec = ModelSpec.parse(f"openai-compatible/{name}", base_url=base_url, api_key_env="DUMMY_KEY")
    return Model(make_provider(spec), max_retries=0)


def echo_argv(out: Path, url: str, *extra: str) -> list[str]:
    return [
        sys.executable, "-c", ECHO_CLI.format(repo=str(REPO)), "run", "echo",
        "--dataset", "sample", "--out", str(out), "--limit", "6", "--n-boot", "50",
        "--model", "openai-compatible/m", "--base-url", url, "--api-key-env", "DUMMY_KEY",
        "--judge-model", "openai-compatible/j", "--judge-base-url", url,
        "--judge-api-key-env", "DUMMY_KEY", *extra,
    ]  # fmt: skip


def wait_for(what: str, check: Callable[[], bool], proc: subprocess.Popen[str]) -> None:
    end = time.monotonic() + WAIT_S
    while not check():
        if proc.poll() is not None:
            raise AssertionError(f"exited {proc.returncode} before {what}: {proc.communicate()}")
        if time.monotonic() > end:
            proc.kill()
            raise AssertionError(f"no {what} within {WAIT_S} s")
        time.sleep(0.05)


def lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def judge_slow_after(n: int) -> Callable[[int, dict[str, Any]], Fault | None]:
    """The model answers at once; the judge answers its first `n` calls, then hangs."""
    seen = {"j": 0}

    def rule(number: int, body: dict[str, Any]) -> Fault | None:
        if body.get("model") != "j":
            return None
        seen["j"] += 1
        return ok() if seen["j"] <= n else delay(600)

    return rule


def test_exit_codes_are_documented_once() -> None:
    assert [int(c) for c in ExitCode] == [0, 2, 3, 4, 130]
    got = CliRunner().invoke(app, ["run", "retrieval", "--help"])
    assert got.exit_code == 0 and "Exit status" in got.output
    got = CliRunner().invoke(app, ["score", "--help"])
    assert "Exit status" in got.output
    for word in ("0 every row scored", "3 some rows failed", "4 a model's server", "130"):
        assert word in EXIT_STATUS_HELP
    doc = (REPO / "docs" / "architecture.md").read_text()
    assert "runner/status.py" in doc and "| 4 |" in doc


def test_an_unreachable_server_stops_the_run(tmp_path: Path, env: dict[str, str]) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    with pytest.raises(Unreachable) as caught:
        run_track(
            ECHO, load_dataset("sample"), tmp_path / "run", CONFIG, {"model": quick("m", url)}
        )
    message = str(caught.value)
    assert f"the model's server at {url} could not be reached" in message
    assert "0 of 6 units saved" in message and "rerun the same command" in message
    assert caught.value.exit_code == ExitCode.UNREACHABLE
    assert not (tmp_path / "run" / ".lock").exists()


def test_a_url_in_a_message_has_no_credentials() -> None:
    assert public_url("https://me:hunter2@host:8443/v1?key=hunter2") == "https://host:8443/v1"
    assert public_url("http://[::1]:8000/v1") == "http://[::1]:8000/v1"
    assert public_url("embedded:/models/x.gguf") == "embedded:/models/x.gguf"


def test_an_unreachable_judge_keeps_the_solved_units(tmp_path: Path, env: dict[str, str]) -> None:
    ds, out = load_dataset("sample"), tmp_path / "run"
    with ChatServer(reply=golden_reply) as srv:
        judge = quick("j", f"http://127.0.0.1:{closed_port()}/v1")
        with pytest.raises(Unreachable, match=r"the judge's server at http://127\.0\.0\.1"):
            run_track(ECHO, ds, out, CONFIG, {"model": quick("m", srv.base_url), "judge": judge})
        assert lines(out / "parts" / "solved.jsonl") == 6  # units done so far stay saved
        srv.reset()
        roles = {"model": quick("m", srv.base_url), "judge": quick("j", srv.base_url)}
        again = run_track(ECHO, ds, out, CONFIG, roles)
    assert again.exit_code == ExitCode.OK and again.solved_now == 0 and again.scored_now == 6
    assert [b["model"] for b in srv.requests] == ["j"] * 6  # the model is not asked again


def test_unreachable_on_the_command_line_exits_4(tmp_path: Path, env: dict[str, str]) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    argv = echo_argv(tmp_path / "run", url)
    argv[argv.index("6")] = "1"  # one unit: one call (with its retries)
    got = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert got.returncode == 4, got.stderr
    assert f"server at {url} could not be reached" in got.stderr
    assert "Traceback" not in got.stderr


def test_a_base_url_without_v1_gets_one_diagnosis_in_run_and_models_check(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """The server answers 404 (it is there): both commands say the URL lacks /v1."""
    with ChatServer(reply=golden_reply) as srv:
        root = srv.base_url.removesuffix("/v1")
        argv = echo_argv(tmp_path / "run", root)
        argv[argv.index("6")] = "1"
        ran = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
        checked = CliRunner().invoke(
            app, ["models", "check", "--model", "openai-compatible/m", "--base-url", root]
        )
        assert srv.request_count == 0  # nothing reached the chat-completions route
    said = f"server at {root} answered HTTP 404: the base URL probably lacks /v1 (try {root}/v1)"
    assert ran.returncode == checked.exit_code == ExitCode.UNREACHABLE
    for output in (ran.stderr, checked.output):
        flat = " ".join(output.split())
        assert said in flat and "could not be reached" not in flat, output
    assert "Traceback" not in ran.stderr


def test_two_runs_into_one_folder(tmp_path: Path, env: dict[str, str]) -> None:
    """A second process is refused, naming the holder; Ctrl-C ends the first cleanly,
    saying how to resume; the rerun resends exactly what was not done."""
    out = tmp_path / "run"
    with ChatServer(reply=golden_reply, rules=judge_slow_after(2)) as srv:
        first = subprocess.Popen(
            echo_argv(out, srv.base_url), env=env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        wait_for("2 judged units", lambda: lines(out / "parts" / "scored.jsonl") == 2, first)
        wait_for("6 solved units", lambda: lines(out / "parts" / "solved.jsonl") == 6, first)
        holder = json.loads((out / ".lock").read_text())
        assert holder["pid"] == first.pid and holder["host"] == socket.gethostname()

        second = subprocess.run(
            echo_argv(out, srv.base_url), env=env, capture_output=True, text=True, timeout=300
        )
        assert second.returncode == ExitCode.USAGE
        assert f"in use by process {first.pid}" in second.stderr, second.stderr
        assert "Traceback" not in second.stderr

        first.send_signal(signal.SIGINT)
        _, err = first.communicate(timeout=WAIT_S)
        assert first.returncode == ExitCode.INTERRUPTED, err
        assert "Traceback" not in err
        assert (
            f"interrupted: 2 of 6 units (and 4 more solved, not yet judged) saved in {out} "
            "(8 model replies in the response cache); rerun the same command to resume"
        ) in " ".join(err.split())
        assert not (out / ".lock").exists()

        srv.reset()
        srv.rules = None
        again = subprocess.run(
            echo_argv(out, srv.base_url), env=env, capture_output=True, text=True, timeout=300
        )
        assert again.returncode == ExitCode.OK, again.stderr
        assert [b["model"] for b in srv.requests] == ["j"] * 4


def detection_argv(out: Path, url: str) -> list[str]:
    """detection's model detector over 12 probes: one unit, one batch of 12 calls."""
    return [
        sys.executable, "-c", ECHO_CLI.format(repo=str(REPO)), "run", "detection",
        "--dataset", "sample", "--out", str(out), "--limit", "12", "--n-boot", "20",
        "--detectors", "model-context", "--model", "openai-compatible/m", "--base-url", url,
        "--api-key-env", "DUMMY_KEY",
    ]  # fmt: skip


def cached_replies(path: Path) -> int:
    """Replies in the response cache at `path`, read as another process sees them."""
    if not path.exists():
        return 0
    try:
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)) as db:
            return int(db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])
    except sqlite3.OperationalError:  # not created yet
        return 0


def bodies(srv: ChatServer) -> list[str]:
    return [json.dumps(b, sort_keys=True) for b in srv.requests]


def test_ctrl_c_keeps_the_answered_calls_of_an_unfinished_unit(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """A unit that is one batch of calls (detection's model detector: every probe) is cut
    by Ctrl-C after some of its calls were answered: those replies are kept in the
    response cache at once, not only once the whole batch is done, so the rerun sends
    exactly the calls that were not answered (first + rerun == a clean run, no repeats)."""
    answered, out, cache = 5, tmp_path / "run", tmp_path / "cache.sqlite"
    with ChatServer(rules=lambda n, body: ok() if n <= answered else delay(600)) as srv:
        first = subprocess.Popen(
            detection_argv(out, srv.base_url), env=env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        wait_for("5 cached replies", lambda: cached_replies(cache) == answered, first)
        wait_for("the rest in flight", lambda: srv.request_count > answered, first)
        first.send_signal(signal.SIGINT)
        _, err = first.communicate(timeout=WAIT_S)
        assert first.returncode == ExitCode.INTERRUPTED, err
        assert "Traceback" not in err
        assert (
            f"interrupted: 0 of 1 units saved in {out} (5 model replies in the response "
            "cache); rerun the same command to resume"
        ) in " ".join(err.split())
        kept = bodies(srv)[:answered]
        srv.reset()
        srv.rules = None
        again = subprocess.run(
            detection_argv(out, srv.base_url), env=env, capture_output=True, text=True,
            timeout=300,
        )  # fmt: skip
        assert again.returncode == ExitCode.OK, again.stderr
        rerun = bodies(srv)
        srv.reset()
        clean = subprocess.run(
            detection_argv(tmp_path / "clean", srv.base_url),
            env={**env, "DIALOGBENCH_CACHE": str(tmp_path / "clean.sqlite")},
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert clean.returncode == ExitCode.OK, clean.stderr
        total = bodies(srv)
    assert len(total) == len(set(total)) == 12
    assert not set(kept) & set(rerun)  # nothing answered before is asked again
    assert sorted(kept + rerun) == sorted(total)


def test_a_lock_left_by_a_killed_run_is_stale(tmp_path: Path, env: dict[str, str]) -> None:
    out = tmp_path / "run"
    with ChatServer(reply=golden_reply, rules=judge_slow_after(0)) as srv:
        first = subprocess.Popen(
            echo_argv(out, srv.base_url), env=env, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        wait_for("the lock", lambda: (out / ".lock").exists() and srv.request_count > 0, first)
        first.kill()  # kill -9: no clean-up at all
        first.wait(timeout=WAIT_S)
        assert json.loads((out / ".lock").read_text())["pid"] == first.pid
        srv.rules = None
        again = subprocess.run(
            echo_argv(out, srv.base_url), env=env, capture_output=True, text=True, timeout=300
        )
    assert again.returncode == ExitCode.OK, again.stderr
    assert not (out / ".lock").exists()


def test_a_stale_lock_file_and_a_held_lock(tmp_path: Path, env: dict[str, str]) -> None:
    out = tmp_path / "run"
    out.mkdir()
    stale = {"pid": 2**22 + 1, "host": "elsewhere", "started": "2020-01-01T00:00:00+00:00"}
    (out / ".lock").write_text(json.dumps({**stale, "command": "dialogbench run"}))
    got = CliRunner().invoke(app, ["run", "retrieval", "--out", str(out), "--n-boot", "20"])
    assert got.exit_code == 0, got.output
    assert not (out / ".lock").exists()
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from dialogbench.runner.record import RunLock; "
         f"l = RunLock({str(out)!r}); l.acquire(); print('held', flush=True); time.sleep(600)"],
        env=env, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(FolderLocked, match=f"in use by process {holder.pid}"), RunLock(out):
            pass
        rescored = CliRunner().invoke(app, ["score", str(out), "--set", "n_boot=10"])
        assert rescored.exit_code == ExitCode.USAGE  # score into a held folder: refused too
        assert f"in use by process {holder.pid}" in " ".join(rescored.output.split())
    finally:
        holder.kill()
        holder.wait()
    with RunLock(out), RunLock(out):  # the same process may take it again
        assert (out / ".lock").exists()
    assert not (out / ".lock").exists()


def test_a_damaged_part_and_manifest_are_reported(tmp_path: Path, env: dict[str, str]) -> None:
    ds, out = load_dataset("sample"), tmp_path / "run"
    with ChatServer(reply=golden_reply) as srv:

        def roles() -> dict[str, Model]:  # a given model lives in one event loop: one a run
            return {"model": quick("m", srv.base_url), "judge": quick("j", srv.base_url)}

        run_track(ECHO, ds, out, CONFIG, roles())
        scored = out / "parts" / "scored.jsonl"
        scored.write_text(scored.read_text()[:-40])  # the last line cut off
        got = run_track(ECHO, ds, out, CONFIG, roles())
        assert got.scored_now == 1 and got.exit_code == 0
        note = f"{scored}: dropped 1 damaged line(s)"
        assert any(note in w for w in got.repairs)
        assert any(note in w for w in json.loads((out / "warnings.json").read_text())["warnings"])

        manifest = out / "manifest.json"
        manifest.write_text(manifest.read_text()[:100])
        got = run_track(ECHO, ds, out, CONFIG, roles())
    assert got.exit_code == 0 and got.solved_now == 6  # afresh
    assert any("manifest.json: damaged" in w and "afresh" in w for w in got.repairs)


def test_a_full_disk_is_a_one_line_error(tmp_path: Path, env: dict[str, str]) -> None:
    if not Path("/dev/full").exists():
        pytest.skip("needs /dev/full to stand for a full disk")
    out = tmp_path / "run"
    out.mkdir()
    (out / "items.jsonl.tmp").symlink_to("/dev/full")  # every write to it: ENOSPC
    got = CliRunner().invoke(app, ["run", "retrieval", "--out", str(out), "--n-boot", "20"])
    assert got.exit_code == ExitCode.USAGE
    assert f"cannot write {out / 'items.jsonl'}: No space left on device (ENOSPC)" in " ".join(
        got.output.split()
    )
    assert "Traceback" not in got.output and not (out / ".lock").exists()


def test_a_folder_under_a_file_is_a_one_line_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    got = CliRunner().invoke(app, ["run", "retrieval", "--out", str(tmp_path / "file" / "run")])
    assert got.exit_code == ExitCode.USAGE and "Traceback" not in got.output
    assert "Not a directory (ENOTDIR)" in got.output
    with (
        pytest.raises(FolderError, match=r"cannot write .*file.*Not a directory \(ENOTDIR\)"),
        RunLock(tmp_path / "file" / "run"),
    ):
        pass


def test_a_read_only_folder_is_a_one_line_error(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("running as root: chmod does not stop root from writing (see the ENOSPC test)")
    out = tmp_path / "ro"
    out.mkdir()
    out.chmod(0o555)
    try:
        got = CliRunner().invoke(app, ["run", "retrieval", "--out", str(out / "run")])
    finally:
        out.chmod(0o755)
    assert got.exit_code == ExitCode.USAGE
    assert "Permission denied (EACCES)" in got.output and "Traceback" not in got.output
