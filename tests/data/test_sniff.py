"""Issue 26, point 1: every common nesting imports, and `data import --dry-run` prints the
layout it sees and a command that imports it (run here as printed)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from dialogbench.cli import app
from dialogbench.data.generic import ImportConfig, import_chat_export
from dialogbench.data.locomo import load_locomo
from dialogbench.data.release import load_release
from dialogbench.data.sniff import sniff

FIXTURES = Path(__file__).parent.parent / "fixtures"
LAYOUTS = FIXTURES / "layouts"
runner = CliRunner()

CASES = {
    # file -> conversations -> sessions -> turns, all bare lists
    "layouts/nested_lists.json": (
        "a list of 2 conversations, each a list of sessions, each a list of turns; "
        "turn keys: text 'text', speaker 'speaker', timestamp 'time'",
        "--rows nested --timestamp-field time",
        {"nested_lists-0": 5, "nested_lists-1": 2},
    ),
    # the same, conversations as the values of an object by id
    "layouts/nested_by_id.json": (
        "an object of 2 conversations by id, each a list of sessions, each a list of turns; "
        "turn keys: text 'content', speaker 'role', timestamp 'created_at'",
        "--rows nested --text-field content --speaker-field role --timestamp-field created_at "
        "--user-speakers user",
        {"amy": 4, "bo": 3},
    ),
    # JSON Lines, one conversation (a list of sessions) a line
    "layouts/nested_lines.jsonl": (
        "JSON Lines of 2 conversations (one a line), each a list of sessions, each a list of "
        "turns; turn keys: text 'text', speaker 'speaker'",
        "--rows nested",
        {"nested_lines-0": 3, "nested_lines-1": 3},
    ),
    # conversation objects -> a list of session objects -> turns
    "layouts/sessions_list.json": (
        "a list of 2 conversation objects; conversation id 'user_id'; sessions as a list under "
        "'sessions', each an object with its turns under 'turns'; turn keys: text 'text', "
        "speaker 'speaker'; session times under 'date'; questions under 'questions' (question "
        "'question', answer 'answer', evidence 'evidence', category 'category')",
        "--id-field user_id --sessions-field sessions --session-time-field date --user-speakers "
        "user --questions-field questions",
        {"u-17": 5, "u-18": 2},
    ),
    # conversations by id, sessions as session_1..N keys with session_N_date_time
    "layouts/sessions_by_key.json": (
        "an object of 2 conversation objects by id; sessions as keys session_1 ... session_2; "
        "turn keys: text 'text', speaker 'speaker', turn_id 'turn_id', caption 'blip_caption'; "
        "session times under session_N_date_time; questions under 'questions' (question "
        "'question', answer 'answer', evidence 'evidence', category 'category')",
        "--session-keys --session-time-suffix _date_time --turn-id-field turn_id "
        "--questions-field questions",
        {"kai-noor": 7, "mo-pia": 3},
    ),
    # JSON Lines of conversation objects
    "layouts/conversations.jsonl": (
        "JSON Lines of 2 conversation objects (one a line); conversation id 'conversation_id'; "
        "turns under 'messages'; turn keys: text 'body', speaker 'author', turn_id "
        "'message_id', timestamp 'sent_at'; questions under 'questions' (question 'q', answer "
        "'a', evidence 'evidence_ids', category 'type')",
        "--id-field conversation_id --turns-field messages --text-field body --speaker-field "
        "author --turn-id-field message_id --timestamp-field sent_at --questions-field "
        "questions --question-field q --answer-field a --evidence-field evidence_ids "
        "--category-field type",
        {"c-101": 5, "c-102": 3},
    ),
    # one LoCoMo sample: a conversation object, not a list
    "locomo_like_sample.json": (
        "one conversation object; conversation id 'sample_id'; sessions as keys session_1 ... "
        "session_2 under 'conversation'; turn keys: text 'text', speaker 'speaker', turn_id "
        "'dia_id'; session times under session_N_date_time; questions under 'qa' (question "
        "'question', answer 'answer', evidence 'evidence', category 'category')",
        "--id-field sample_id --body-field conversation --session-keys --session-time-suffix "
        "_date_time --turn-id-field dia_id --questions-field qa",
        {"ana-ben": 6},
    ),
    # one row per turn, grouped by a thread id
    "chat_export.jsonl": (
        "JSON Lines of 5 turns (one a line), grouped into conversations by 'thread'; turn keys: "
        "text 'content', speaker 'author', turn_id 'msg_id', timestamp 'ts'",
        "--rows turns --id-field thread --text-field content --speaker-field author "
        "--turn-id-field msg_id --timestamp-field ts",
        {"t-100": 3, "t-200": 2},
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_sniff_reads_each_layout(name: str) -> None:
    layout, args, _ = CASES[name]
    found = sniff(FIXTURES / name)
    assert found.layout == layout
    assert found.command(Path("in"), Path("out")) == f"dialogbench data import in --out out {args}"


@pytest.mark.parametrize("name", list(CASES))
def test_dry_run_prints_a_command_that_imports(tmp_path: Path, name: str) -> None:
    layout, args, messages = CASES[name]
    path, out = FIXTURES / name, tmp_path / "imported"
    dry = runner.invoke(app, ["data", "import", str(path), "--out", str(out), "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert not out.exists()  # a dry run writes nothing
    lines = dry.output.splitlines()
    assert lines[0].startswith("layout: " + layout[:60])
    command = lines[lines.index("import it with:") + 1].strip()
    assert (
        command == f"{shlex.join(['dialogbench', 'data', 'import', str(path)])} --out {out} {args}"
    )
    argv = shlex.split(command)
    assert argv[0] == "dialogbench"
    done = runner.invoke(app, argv[1:])
    assert done.exit_code == 0, done.output
    release = load_release(out)
    assert {s.id: len(s.messages) for s in release.subjects} == messages


def test_dry_run_keeps_the_options_given(tmp_path: Path) -> None:
    out = tmp_path / "x"
    path = LAYOUTS / "nested_by_id.json"
    dry = runner.invoke(
        app,
        [
            "data",
            "import",
            str(path),
            "--out",
            str(out),
            "--dry-run",
            "--user-speakers",
            "assistant",
            "--force",
        ],
    )
    assert dry.exit_code == 0, dry.output
    assert "--user-speakers user" not in dry.output
    assert dry.output.rstrip().endswith(
        "--timestamp-field created_at --user-speakers assistant --force"
    )


def test_nested_layouts_import_with_the_documented_flags() -> None:
    """The layouts the issue names, through the importer with `--rows nested` alone."""
    by_id = import_chat_export(
        LAYOUTS / "nested_by_id.json",
        ImportConfig(rows="nested", text_field="content", speaker_field="role"),
    )
    amy = by_id.subjects[0]
    assert [m.id for m in amy.messages] == [
        "session_1:0",
        "session_1:1",
        "session_2:0",
        "session_2:1",
    ]
    assert amy.messages[2].text == "I can order coffee in Portuguese now!"
    lines = import_chat_export(LAYOUTS / "nested_lines.jsonl", ImportConfig(rows="nested"))
    assert [m.session for m in lines.subjects[0].messages] == ["session_1"] * 2 + ["session_2"]


def test_a_failed_import_points_at_dry_run(tmp_path: Path) -> None:
    path = LAYOUTS / "nested_lists.json"
    result = runner.invoke(app, ["data", "import", str(path), "--out", str(tmp_path / "x")])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "--rows nested" in result.output
    assert f"--out {tmp_path / 'x'} --dry-run` prints the layout it sees" in result.output


def test_sniff_of_no_layout_says_so(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"meta": 1, "notes": "none"}))
    assert sniff(path).layout.endswith("(meta, notes) hold no conversations seen: no layout read")
    assert sniff(path).options == {}


def test_locomo_through_the_importer_equals_the_native_loader(
    locomo_dir: Path, tmp_path: Path
) -> None:
    """Issue 26, point 4, on the real file: the command `--dry-run` prints imports LoCoMo
    with its adversarial questions (no answer) and image captions, and BM25's figures on
    the imported folder equal those of the native loader."""
    source, out = locomo_dir / "locomo10.json", tmp_path / "imported"
    dry = runner.invoke(app, ["data", "import", str(source), "--out", str(out), "--dry-run"])
    assert dry.exit_code == 0, dry.output
    lines = dry.output.splitlines()
    argv = shlex.split(lines[lines.index("import it with:") + 1])
    assert "--category-names" in argv and "--unanswerable-categories" in argv
    done = runner.invoke(app, argv[1:])
    assert done.exit_code == 0, done.output
    imported, native = load_release(out), load_locomo(source)
    assert [s.id for s in imported.subjects] == [s.id for s in native.subjects]
    for mine, theirs in zip(imported.subjects, native.subjects, strict=True):
        assert mine.messages == theirs.messages  # captions, ids, sessions and times alike
        assert len(mine.questions) == len(theirs.questions)
        for q, r in zip(mine.questions, theirs.questions, strict=True):
            assert (q.id, q.text, q.category, q.evidence_ids, q.answerable) == (
                r.id,
                r.text,
                r.category,
                r.evidence_ids,
                r.answerable,
            )
            if r.answerable:
                assert q.answer == r.answer
    adversarial = [q for s in imported.subjects for q in s.questions if not q.answerable]
    assert len(adversarial) == 446
    assert any("[shares an image: " in m.text for s in imported.subjects for m in s.messages)
    figures: dict[str, Any] = {}
    for name, dataset in (("native", "locomo"), ("imported", str(out))):
        run = tmp_path / name
        args = ["run", "retrieval", "--dataset", dataset, "--out", str(run)]
        result = runner.invoke(app, [*args, "--retrievers", "bm25", "--n-boot", "50"])
        assert result.exit_code == 0, result.output
        summary = json.loads((run / "summary.json").read_text())
        figures[name] = summary["all probes (pooled)"]["bm25"]
    assert figures["imported"] == figures["native"]
    assert round(figures["native"]["hit@5"]["value"], 3) == 0.456


def test_sniff_of_a_folder_reads_its_first_file(tmp_path: Path) -> None:
    folder = tmp_path / "exports"
    folder.mkdir()
    for name in ("b", "a"):
        turns = [{"author": name, "body": "hello"}]
        (folder / f"{name}.json").write_text(json.dumps({"messages": turns}))
    found = sniff(folder)
    assert found.layout == (
        "a folder of 2 export files; the first, a.json: one conversation object; turns under "
        "'messages'; turn keys: text 'body', speaker 'author'"
    )
    out = tmp_path / "out"
    out.mkdir()
    (out / "x").write_text("earlier")
    dry = runner.invoke(app, ["data", "import", str(folder), "--out", str(out), "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "already holds files" in dry.output
    command = dry.output.splitlines()[-1].strip()
    assert command.endswith(" --turns-field messages --text-field body --speaker-field author")
    assert (out / "x").read_text() == "earlier"


def test_sessions_field_reads_lists_and_objects(tmp_path: Path) -> None:
    """Conversation objects whose sessions are a list: of turn lists, or of objects."""
    ds = import_chat_export(
        LAYOUTS / "sessions_list.json",
        ImportConfig(
            id_field="user_id",
            sessions_field="sessions",
            session_time_field="date",
            questions_field="questions",
        ),
    )
    bike = ds.subjects[0]
    assert [m.id for m in bike.messages][2:4] == ["session_1:2", "session_2:0"]
    assert [str(m.timestamp) for m in bike.messages][2:4] == [
        "2024-03-01 20:15:00",
        "2024-03-09 07:40:00",
    ]
    assert [q.evidence_ids for q in bike.questions] == [["session_1:2"], ["session_2:0"]]
    bare = [
        {"id": "c", "sessions": [[{"speaker": "a", "text": "x"}], [{"speaker": "b", "text": "y"}]]}
    ]
    path = tmp_path / "bare.json"
    path.write_text(json.dumps(bare))
    (one,) = import_chat_export(
        path, ImportConfig(id_field="id", sessions_field="sessions")
    ).subjects
    assert [(m.id, m.session) for m in one.messages] == [
        ("session_1:0", "session_1"),
        ("session_2:0", "session_2"),
    ]
    assert sniff(path).options == {"id_field": "id", "sessions_field": "sessions"}
    with pytest.raises(ValueError, match="two layouts"):
        ImportConfig(session_keys=True, sessions_field="sessions")
