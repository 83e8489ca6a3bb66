"""Nothing a dataset or a command line names is written outside the output folder.

Ids that are absolute paths, `..`, backslashes, NUL or control characters, 300 characters,
or that differ only by case or Unicode form, go through every command that writes. Around
each, a listing of every file under the test's folder (the output folder left out) is taken
before and after: it must not change. A refused id ends the command with exit code 2 and a
message naming the file, the record and the field, never a traceback, and the output
folder is not made."""

from __future__ import annotations

import json
import os
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from dialogbench.cli import app
from dialogbench.data.safe_names import digest, name_problem
from dialogbench.runner.track import REGISTRY, find_track
from dialogbench.testing import ChatServer
from golden.cases import golden_reply

runner = CliRunner()
FIXTURES = Path(__file__).parent / "fixtures"
LOCOMO_SAMPLE = json.loads((FIXTURES / "locomo_like_sample.json").read_text(encoding="utf-8"))
NFC, NFD = (unicodedata.normalize(form, "José") for form in ("NFC", "NFD"))

UNSAFE = {
    "absolute": "{parent}/PWNED",  # filled in with the watched folder: a write would show
    "dotdot": "../PWNED",
    "dotdot-deep": "../../PWNED",
    "backslash": "..\\PWNED",
    "nul": "a\0b",
    "control": "a\x1bb",
    "long": "x" * 300,
}
COLLIDING = {"case": ("Ana-Ben", "ana-ben"), "nfc-nfd": (NFC, NFD)}
CASES = [*UNSAFE, *COLLIDING]
LOCOMO_IMPORT = ["--session-keys", "--body-field", "conversation", "--id-field", "sample_id",
                 "--session-time-suffix", "_date_time", "--turn-id-field", "dia_id",
                 "--questions-field", "qa"]  # fmt: skip


@pytest.fixture
def where(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The watched folder; the response cache lies beside it."""
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    monkeypatch.setenv("DUMMY_KEY", "x")
    parent = tmp_path / "parent"
    (parent / "in").mkdir(parents=True)
    (parent / "bystander.txt").write_text("left alone\n")
    yield parent


def listing(root: Path, out: Path) -> dict[str, tuple[int, int]]:
    """Every file and folder under `root` but `out`: its size (-1 a folder) and mtime."""
    got = {}
    for path in root.rglob("*"):
        if path == out or path.is_relative_to(out):
            continue
        st = path.lstat()
        got[str(path.relative_to(root))] = (-1 if path.is_dir() else st.st_size, st.st_mtime_ns)
    return got


def locomo_file(parent: Path, case: str) -> tuple[Path, str]:
    """A LoCoMo file of two samples whose ids are the case's; the sample holding the bad id."""
    ids = ("ok-sample", UNSAFE[case].format(parent=parent)) if case in UNSAFE else COLLIDING[case]
    samples = [{**LOCOMO_SAMPLE, "sample_id": sid} for sid in ids]
    for s in samples:  # the fixture's deliberately bad question is not this test's concern
        s["qa"] = [q for q in s["qa"] if q.get("category") in (1, 2, 3, 4, 5)]
    path = parent / "in" / f"locomo-{case}.json"
    path.write_text(json.dumps(samples, ensure_ascii=False), encoding="utf-8")
    return path, "sample 1"


def assert_refused(result: Any, path: Path, record: str, field: str) -> None:
    """Exit code 2, one message naming the file, the record and the field."""
    assert result.exit_code == 2, result.output
    out = result.output
    assert "Traceback" not in out and isinstance(result.exception, SystemExit), out
    assert str(path) in out and record in out and f"field '{field}'" in out, out
    assert "fix:" in out, out


def commands(data: Path, out: Path, url: str) -> dict[str, list[str]]:
    """Every command that writes from a realcompanion dataset, fed `data`, writing `out`:
    the imports and builds, `score questions`, and `run` of every realcompanion track."""
    model = ["--model", "openai-compatible/m", "--base-url", url, "--api-key-env", "DUMMY_KEY"]
    judge = ["--judge-model", "openai-compatible/j", "--judge-base-url", url,
             "--judge-api-key-env", "DUMMY_KEY"]  # fmt: skip
    answers = ["--answers", str(FIXTURES / "chat_export.jsonl"), "--format", "dialogbench"]
    got = {
        "data import": ["data", "import", str(data), "--out", str(out), *LOCOMO_IMPORT],
        "build realcompanion": ["build", "realcompanion", "--from", str(data), "--out", str(out),
                                *model],
        "build demo": ["build", "demo", "--seed", str(data), "--out", str(out), *model],
        "score questions": ["score", "questions", *answers, "--dataset", str(data), "--out",
                            str(out), *judge],
    }  # fmt: skip
    find_track("retrieval")  # the built-in tracks, registered
    for name, track in REGISTRY.items():
        if track.corpus != "realcompanion":
            continue
        roles = {r.name for r in track.roles}
        argv = ["run", name, "--dataset", str(data), "--out", str(out)]
        argv += model if "model" in roles else judge if "judge" in roles else []
        got[f"run {name}"] = argv + (answers if name == "answers" else [])
    return got


COMMANDS = list(commands(Path("d"), Path("o"), "u"))


@pytest.mark.parametrize("case", CASES)
def test_data_validate_refuses_the_id(where: Path, case: str) -> None:
    data, record = locomo_file(where, case)
    before = listing(where, where / "none")
    result = runner.invoke(app, ["data", "validate", str(data)])
    assert_refused(result, data, record, "sample_id")
    assert listing(where, where / "none") == before


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("case", CASES)
def test_every_writing_command_refuses_the_id_and_writes_nothing(
    where: Path, case: str, command: str
) -> None:
    data, record = locomo_file(where, case)
    out = where / "out"
    argv = commands(data, out, "http://127.0.0.1:9/v1")[command]  # never reached
    before = listing(where, out)
    result = runner.invoke(app, argv)
    field = "sample_id"
    if command == "data import":  # the import names a conversation by its place
        record = record.replace("sample", "conversation")
    assert_refused(result, data, record, field)
    assert listing(where, out) == before
    assert not out.exists()  # the build with such an id writes nothing at all
    assert not (where / "PWNED").exists() and not (where.parent / "PWNED").exists()


def release_with(parent: Path, names: list[str]) -> Path:
    """A release folder whose subject folders are named `names` (made on disk as given)."""
    folder = parent / "in" / "release"
    message = {"id": "m1", "speaker": "ana", "role": "user", "text": "Hello there."}
    for name in names:
        (folder / name).mkdir(parents=True)
        (folder / name / "conversation.jsonl").write_text(json.dumps(message) + "\n")
    return folder


RELEASE_CASES = {
    "control": ["ok", "a\x1bb"],
    "long": ["ok", "é" * 120],  # 240 bytes: a folder here, over the limit for a release
    "case": ["Ana", "ana"],
    "nfc-nfd": [NFC, NFD],
}


@pytest.mark.parametrize("case", list(RELEASE_CASES))
def test_a_release_folder_with_such_names_is_refused(where: Path, case: str) -> None:
    try:
        data = release_with(where, RELEASE_CASES[case])
    except OSError as e:  # a file system that folds case or form itself
        pytest.skip(f"this file system cannot hold both names: {e}")
    if len([p for p in data.iterdir()]) < 2:
        pytest.skip("this file system folds the two names into one folder")
    out = where / "out"
    before = listing(where, out)
    for argv in (
        ["data", "validate", str(data)],
        ["run", "retrieval", "--dataset", str(data), "--out", str(out)],
    ):
        result = runner.invoke(app, argv)
        assert_refused(result, data, "subject folder", "(the folder's name)")
    assert listing(where, out) == before and not out.exists()


def test_the_build_keeps_its_cleanup_inside_out(where: Path) -> None:
    """A build.json edited to name folders outside --out: a rebuild removes none of them."""
    out = where / "out"
    victim = where / "victim"
    victim.mkdir()
    for f in ("conversation.jsonl", "chat.jsonl", "questions.jsonl"):
        (victim / f).write_text("{}\n")
    from build.scripted import Script, Scripted

    scripted = Scripted(default=Script("back-reference", ["@first"]))
    with ChatServer(reply=scripted) as srv:
        args = ["build", "realcompanion", "--from", "sample", "--out", str(out)]
        args += ["--model", "openai-compatible/scripted", "--base-url", srv.base_url]
        args += ["--proportional", "2", "--enriched", "0", "--abstention", "0"]
        args += ["--subjects", "maya", "--no-profile", "--no-anonymise"]
        assert runner.invoke(app, args).exit_code == 0
        report = json.loads((out / "build.json").read_text())
        report["output"]["subjects"] += ["../victim", str(victim), "..", 7]
        (out / "build.json").write_text(json.dumps(report))
        before = listing(where, out)
        result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert listing(where, out) == before
    assert sorted(p.name for p in victim.iterdir()) == [
        "chat.jsonl",
        "conversation.jsonl",
        "questions.jsonl",
    ]


@pytest.fixture
def finished(where: Path) -> Iterator[tuple[Path, ChatServer]]:
    """A finished judged run (questions on the sample), and the server it was judged by."""
    run = where / "out"
    with ChatServer(reply=golden_reply) as srv:
        argv = ["run", "questions", "--dataset", "sample", "--out", str(run), "--model",
                "openai-compatible/m", "--base-url", srv.base_url, "--api-key-env", "DUMMY_KEY",
                "--limit", "3", "--n-boot", "20"]  # fmt: skip
        result = runner.invoke(app, argv)
        assert result.exit_code in (0, 3), result.output
        yield run, srv


JUDGES = ["openai-compatible/" + "x" * 300, "openai-compatible/A", "openai-compatible/a",
          "openai-compatible/a/b", "openai-compatible/a_b", f"openai-compatible/{NFC}",
          f"openai-compatible/{NFD}", "openai-compatible/..", "openai-compatible/\x1b"]  # fmt: skip


def test_judge_names_become_folders_inside_the_run(finished: tuple[Path, ChatServer]) -> None:
    run, srv = finished
    where = run.parent
    before = listing(where, run)
    argv = ["score", str(run)]
    for j in JUDGES:
        argv += ["--judge-model", j]
    argv += ["--judge-base-url", srv.base_url, "--judge-api-key-env", "DUMMY_KEY"]
    result = runner.invoke(app, argv)
    assert result.exit_code in (0, 3), result.output
    assert listing(where, run) == before
    folders = [p for p in (run / "judges").iterdir() if p.is_dir()]
    assert len(folders) == len(JUDGES)  # none shared, none outside
    assert len({p.name.casefold() for p in folders}) == len(JUDGES)
    for p in folders:
        assert name_problem(p.name) is None and len(p.name) <= 80
        assert (p / "summary.json").exists()
    names = {p.name for p in folders}
    assert f"openai-compatible_A-{digest('openai-compatible/A')}" in names  # A and a: two
    assert f"openai-compatible_a_b-{digest('openai-compatible/a/b')}" in names
    for argv in (
        ["export", "ratings", str(run), *map(str, sorted(folders)), "--out",
         str(run / "ratings.csv")],
        ["report", str(run), "--out", str(run / "report.html")],
        ["score", str(run), "--judge-model", JUDGES[0], "--judge-base-url", srv.base_url,
         "--judge-api-key-env", "DUMMY_KEY"],
    ):  # fmt: skip
        result = runner.invoke(app, argv)
        assert result.exit_code in (0, 3), result.output
    assert (run / "ratings.csv").exists() and (run / "report.html").exists()
    assert listing(where, run) == before


def test_a_tampered_run_cannot_name_a_file_outside_it(finished: tuple[Path, ChatServer]) -> None:
    """The run folder's own writer refuses a result name that leaves it."""
    from dialogbench.data.errors import DataError
    from dialogbench.runner.record import RunFolder

    run, _ = finished
    folder = RunFolder(run)
    for name in ("../PWNED.json", "/tmp/PWNED.json", "written/../../x.json", "a\0.json"):
        with pytest.raises(DataError, match="result file"):
            folder.write(name, {})
    with pytest.raises(DataError, match="stage"):
        folder.part("../x")
    assert not (run.parent / "PWNED.json").exists() and not os.path.exists("/tmp/PWNED.json")
