"""Chat labels that contradict their references are refused at load, naming the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from dialogbench.build.rules import RULES
from dialogbench.cli import app
from dialogbench.data.errors import DataError
from dialogbench.data.labels import RULE_IDS
from dialogbench.data.model import RECENT_WINDOW
from dialogbench.data.registry import load_dataset
from dialogbench.data.release import load_release

N = RECENT_WINDOW + 6
"""Messages in the fixture: the probe is the last, m0 lies N-1 back (far), m{N-2} is 1."""


def _release(tmp_path: Path, item: dict[str, Any], sessions: bool = True) -> Path:
    folder = tmp_path / "rel" / "ana"
    folder.mkdir(parents=True)
    rows = []
    for i in range(N):
        row: dict[str, Any] = {
            "id": f"m{i}",
            "speaker": "Ana" if i % 2 == 0 else "bot",
            "role": "user" if i % 2 == 0 else "assistant",
            "text": f"message {i}",
        }
        if sessions:
            row["session"] = "s1" if i < 3 else "s2"
        rows.append(row)
    (folder / "conversation.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    probe = f"m{N - 1}" if (N - 1) % 2 == 0 else f"m{N - 2}"
    chat = {"probe_id": probe, **item}
    (folder / "chat.jsonl").write_text(json.dumps(chat) + "\n")
    return tmp_path / "rel"


def _probe_at() -> int:
    return N - 1 if (N - 1) % 2 == 0 else N - 2


FAR, NEAR = "m0", f"m{_probe_at() - 1}"


def _error(path: Path) -> DataError:
    with pytest.raises(DataError) as e:
        load_release(path)
    return e.value


def test_the_rule_ids_are_the_derivations() -> None:
    assert tuple(r.id for r in RULES) == RULE_IDS


def test_an_unknown_rule_id_is_refused(tmp_path: Path) -> None:
    e = _error(_release(tmp_path, {"rule": "R99", "reference_ids": [NEAR]}))
    assert e.path.endswith("chat.jsonl") and (e.record, e.field) == ("line 1", "rule")
    assert "'R99' is not a rule of the derivation (R01..R19)" in str(e) and e.fix


@pytest.mark.parametrize(
    ("labels", "field"),
    [
        ({"tier": "distant", "reference_ids": [NEAR]}, "tier"),  # a memory tier, nothing far
        ({"tier": "session", "reference_ids": []}, "tier"),
        ({"tier": "recent", "reference_ids": [FAR]}, "tier"),
        ({"locus": "none", "reference_ids": [NEAR]}, "locus"),
        ({"locus": "session", "reference_ids": [FAR]}, "locus"),  # m0 is in session s1
        ({"needs_memory": True, "reference_ids": [NEAR]}, "needs_memory"),
        ({"needs_memory": False, "reference_ids": [FAR, NEAR]}, "needs_memory"),
        (
            {"needs_memory": True, "needs_memory_strict": True, "dependent": False,
             "reference_ids": [FAR]},
            "needs_memory_strict",
        ),
    ],
)  # fmt: skip
def test_contradictory_labels_are_refused(
    tmp_path: Path, labels: dict[str, Any], field: str
) -> None:
    e = _error(_release(tmp_path, labels))
    assert (e.record, e.field) == ("line 1", field) and e.fix


@pytest.mark.parametrize(
    "labels",
    [
        {"tier": "distant", "locus": "distant", "needs_memory": True, "reference_ids": [FAR]},
        {"tier": "recent", "locus": "recent", "needs_memory": False, "reference_ids": [NEAR]},
        {"tier": "none", "locus": "none", "needs_memory": False},
        {"tier": "a tier of the data's own", "reference_ids": [FAR]},  # not checked
        {"rule": "R19", "locus": "distant", "reference_ids": [FAR, NEAR]},
    ],
)
def test_labels_that_agree_load(tmp_path: Path, labels: dict[str, Any]) -> None:
    ds = load_release(_release(tmp_path, labels))
    assert len(ds.subjects[0].chat_items) == 1


def test_without_sessions_session_and_distant_are_both_accepted(tmp_path: Path) -> None:
    for locus in ("session", "distant"):
        item = {"locus": locus, "reference_ids": [FAR]}
        load_release(_release(tmp_path / locus, item, sessions=False))
    e = _error(_release(tmp_path / "near", {"locus": "distant", "reference_ids": [NEAR]}, False))
    assert e.field == "locus" and "distant" in str(e)


def test_a_hand_check_of_the_sample_agrees() -> None:
    """The committed sample's labels, checked by plain loops (not the code under test)."""
    for s in load_dataset("sample").subjects:
        pos = {m.id: m.position for m in s.messages}
        session = {m.id: m.session for m in s.messages}
        for c in s.chat_items:
            far = [r for r in c.reference_ids if pos[c.probe_id] - pos[r] > RECENT_WINDOW]
            if c.needs_memory is not None:
                assert c.needs_memory == bool(far)
            if c.rule is not None:
                assert c.rule in {f"R{n:02d}" for n in range(1, 20)}
            if c.locus == "distant":
                assert any(session[r] != session[c.probe_id] for r in far)


def test_data_validate_names_the_problem(tmp_path: Path) -> None:
    path = _release(tmp_path, {"tier": "distant", "reference_ids": [NEAR]})
    got = CliRunner().invoke(app, ["data", "validate", str(path)])
    assert got.exit_code != 0 and "Traceback" not in got.output
    assert "chat.jsonl" in got.output and "'tier'" in got.output and "fix:" in got.output
