"""CPED adapter: fixture behaviour, the real splits' counts and label sets, a missing column."""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

import pytest

from dialogbench.data.demo.cped import (
    AGE_MAP,
    DIALOGUE_ACTS,
    EMOTIONS,
    OPTIONS,
    SCENES,
    SENTIMENTS,
    load_cped,
    read_split,
)
from dialogbench.data.demo.model import AGE_BANDS, DemoSet
from dialogbench.data.errors import DataError

FIXTURES = Path(__file__).parent / "fixtures"


def test_fixture_dialogues_labels_and_left_out_counts() -> None:
    dialogues, notes = read_split(FIXTURES / "cped" / "test_split.csv")
    assert [d.id for d in dialogues] == ["90_000"]  # 90_001 is 王芳 and "其他": left out
    work = dialogues[0]
    assert work.lang == "zh" and work.scene.location == "office"
    boss, clerk = work.participants
    assert (boss.name, boss.gender, boss.age) == ("张明", "male", "middle age")
    assert boss.big_five["openness"] == "low" and clerk.big_five["neuroticism"] == "high"
    labels = work.utterances[2].labels
    assert labels is not None
    assert (labels.sentiment, labels.emotion, labels.dialogue_act) == (
        "negative",
        "anger",
        "command",
    )
    # "其他" is CPED's placeholder for unnamed others, never one participant
    assert all(p.name != "其他" for d in dialogues for p in d.participants)
    text = "\n".join(notes)
    assert "kept 1 two-party dialogues (4 utterances) of 3" in text
    assert "left out 1 dialogues with more than two speakers (3 utterances)" in text
    assert "left out 1 dialogues between one named speaker and '其他' (3 utterances)" in text
    assert "change scene midway" not in text  # the two-scene dialogue was 90_001


def test_two_named_speakers_are_kept_and_other_lines_are_not_a_participant(
    tmp_path: Path,
) -> None:
    """A "其他" dialogue left out; one with a scene change and two named speakers kept."""
    text = (FIXTURES / "cped" / "test_split.csv").read_text("utf-8-sig")
    (tmp_path / "test_split.csv").write_text(text.replace(",其他,", ",李强,"), "utf-8")
    dialogues, notes = read_split(tmp_path / "test_split.csv")
    assert [d.id for d in dialogues] == ["90_000", "90_001"]
    assert dialogues[1].scene.location is None  # two scenes in one dialogue: no single label
    assert "1 dialogues change scene midway" in "\n".join(notes)
    assert not any("其他" in n for n in notes)


def test_csv_missing_a_column() -> None:
    with pytest.raises(DataError) as err:
        read_split(FIXTURES / "cped_broken" / "test_split.csv")
    assert err.value.field == "DA"
    assert err.value.record == "header line"
    assert "DA" in (err.value.fix or "")


def test_unexpected_label_names_line_and_column(tmp_path: Path) -> None:
    text = (FIXTURES / "cped" / "test_split.csv").read_text("utf-8-sig")
    (tmp_path / "test_split.csv").write_text(text.replace(",anger,", ",rage,"), "utf-8")
    with pytest.raises(DataError) as err:
        read_split(tmp_path / "test_split.csv")
    assert err.value.field == "Emotion"
    assert err.value.record == "line 4 (Utterance_ID 90_000_002)"


@pytest.fixture(scope="module")
def cped(cped_dir: Path) -> DemoSet:
    return load_cped(cped_dir)


def _rows(cped_dir: Path) -> list[dict[str, str]]:
    rows = []
    for name in ("test_split.csv", "valid_split.csv"):
        with (cped_dir / name).open(encoding="utf-8-sig", newline="") as f:
            rows += list(csv.DictReader(f))
    return rows


def test_real_counts_match_source(cped_dir: Path, cped: DemoSet) -> None:
    for name, utterances, dialogues in (
        ("valid_split.csv", 11137, 934),
        ("test_split.csv", 27438, 2815),
    ):
        kept, notes = read_split(cped_dir / name)
        left = [n for n in notes if "left out" in n]
        left_dialogues = sum(int(n.split("left out ")[1].split()[0]) for n in left)
        left_utterances = sum(int(n.split("(")[1].split()[0]) for n in left)
        assert len(kept) + left_dialogues == dialogues
        assert sum(len(d.utterances) for d in kept) + left_utterances == utterances
    # 9 + 27 dialogues have three or more speakers, 211 + 709 are one named speaker and 其他
    assert len(cped.dialogues) == 714 + 2079
    assert sum(len(d.utterances) for d in cped.dialogues) == 11020 - 2408 + 27123 - 7016
    assert any("left out 27 dialogues with more than two speakers" in w for w in cped.warnings)
    assert Counter(i.task for i in cped.items) == {
        "persona": 2793,
        "utterance": 2793,
        "scene": 2725,
    }


def test_real_label_sets(cped_dir: Path, cped: DemoSet) -> None:
    rows = _rows(cped_dir)
    assert {r["Sentiment"] for r in rows} == set(SENTIMENTS) and len(SENTIMENTS) == 3
    assert {r["Emotion"] for r in rows} == set(EMOTIONS) and len(EMOTIONS) == 13
    assert {r["DA"] for r in rows} == set(DIALOGUE_ACTS) and len(DIALOGUE_ACTS) == 19
    assert {r["Scene"] for r in rows} == set(SCENES)
    assert {r["Age"] for r in rows} - {"unknown"} <= set(AGE_MAP)
    assert set(AGE_MAP.values()) <= set(AGE_BANDS)
    for item in cped.items:
        for path, labels in item.options.items():
            assert labels == OPTIONS[path]
        if item.task == "utterance":
            assert item.gold["emotion"] in item.options["emotion"]
            assert item.transcript.splitlines()[item.target or 0].endswith(item.gold["content"])
