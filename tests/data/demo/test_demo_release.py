"""DEMO's released files: element-awareness gold normalisation, episodes, familiarity, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dialogbench.data.demo.release import (
    load_awareness,
    load_interaction,
    load_release,
    parse_familiarity,
)
from dialogbench.data.errors import DataError

FIXTURES = Path(__file__).parent / "fixtures"

BROKEN = FIXTURES / "broken"


@pytest.mark.parametrize(
    ("value", "level"),
    [
        ("10", 10),
        ("10 (very close)", 10),
        ("10: Close relationship, stay together for many years", 10),
        ("8分", 8),
        (7, 7),
        (0, 0),
        ("0: Strangers", 0),
        (6.0, 6),
        ("６分", 6),
    ],
)
def test_parse_familiarity_reads_the_whole_number(value: object, level: int) -> None:
    assert parse_familiarity(value) == level


@pytest.mark.parametrize("value", ["11", -1, "close", "", None, True, 6.5, [6]])
def test_parse_familiarity_rejects(value: object) -> None:
    with pytest.raises(DataError) as err:
        parse_familiarity(value, path="f.jsonl", record="line 3")
    assert err.value.field == "familiarity" and err.value.record == "line 3"
    assert err.value.fix


def test_english_awareness_gold_is_normalised() -> None:
    items, warnings = load_awareness(FIXTURES / "element_awareness_en.json")
    assert warnings == []
    by_id = {i.id: i for i in items}
    assert list(by_id) == ["en-0001:goal", "en-0001:persona", "en-0002:scene", "en-0002:utterance"]
    assert all(i.lang == "en" and i.instruction for i in items)

    goal = by_id["en-0001:goal"].gold  # answer given as a JSON string with a task wrapper
    assert goal["goal_completion"] == 9
    assert set(goal) == {"goal1", "goal2", "goal_completion", "reason"}

    persona = by_id["en-0001:persona"]
    p1, p2 = persona.gold["participant1"], persona.gold["participant2"]
    assert p1["gender"] == "female" and p2["gender"] == "male"
    assert p1["age"] == "adulthood" and p2["age"] == "youth"
    assert p1["big_five"] == {
        "openness": "high",
        "conscientiousness": "high",
        "extraversion": "high",
        "agreeableness": "high",
        "neuroticism": "low",
    }
    assert p1["speaking_style"] == "Warm and direct, polite requests"
    assert "hobby" not in p1  # "Unknown" is no gold
    assert p2["hobby"] == "Hiking"
    assert persona.options["participant1.gender"] == ["male", "female"]
    assert "participant2.big_five.neuroticism" in persona.options

    scene = by_id["en-0002:scene"].gold
    assert scene["familiarity"] == 10
    assert scene["talkway"] == "Face-to-face conversation"
    assert len(scene["summary"]) == 2 and len(scene["workflow"]) == 3

    utterance = by_id["en-0002:utterance"]  # fenced JSON string
    assert utterance.gold["sentiment"] == "negative"
    assert utterance.gold["strategy"] == {
        "description": "States a practical constraint to justify the decision",
        "type": "changing viewpoints",
    }
    assert utterance.gold["stance"][0]["aspect"] == "the old house"
    assert utterance.target == 3
    lines = utterance.transcript.splitlines()
    assert lines[utterance.target].startswith("Samuel Okafor: Plans change.")
    assert utterance.options == {"sentiment": ["positive", "negative", "neutral"]}


def test_chinese_awareness_gold_is_normalised() -> None:
    items, _ = load_awareness(FIXTURES / "element_awareness_zh.json")
    by_task = {i.task: i for i in items}
    assert all(i.lang == "zh" for i in items)
    p1 = by_task["persona"].gold["participant1"]
    assert p1["gender"] == "male" and p1["age"] == "middle age"
    assert p1["big_five"]["agreeableness"] == "low"  # 谦逊性
    assert by_task["persona"].gold["participant2"]["age"] == "youth"
    assert by_task["scene"].gold["familiarity"] == 6  # "6分"
    assert by_task["utterance"].gold["sentiment"] == "negative"  # 负向
    assert by_task["utterance"].target == 2
    assert by_task["goal"].gold["goal_completion"] == 8


def test_interaction_episodes_keep_familiarity_ten() -> None:
    episodes = load_interaction(FIXTURES / "dialogue_agent_interaction_en.jsonl")
    assert [e.id for e in episodes] == ["ep-en-001", "ep-en-002", "ep-en-003"]
    first = episodes[0]
    assert first.scene.familiarity == 10  # DEMO's first-digit reading would give 1
    assert first.scene.medium == "Face-to-face conversation"
    assert first.scene.topic == "Planning a surprise anniversary dinner"
    assert first.participants[0].name == "Nora Diaz"
    assert first.participants[1].background is not None
    assert first.goals[0].startswith("Convince Leo")
    assert [e.scene.familiarity for e in episodes] == [10, 1, 6]
    zh = load_interaction(FIXTURES / "dialogue_agent_interaction_zh.jsonl")
    assert [(e.lang, e.scene.familiarity) for e in zh] == [("zh", 10), ("zh", 2)]


def test_folder_loads_every_file_with_a_stable_digest() -> None:
    demo = load_release(FIXTURES)
    assert len(demo.items) == 8 and len(demo.episodes) == 5
    assert {i.lang for i in demo.items} == {"en", "zh"}
    assert demo.sha256 == load_release(FIXTURES).sha256
    one = load_release(FIXTURES / "element_awareness_zh.json")
    assert len(one.items) == 4 and not one.episodes and one.name == "element_awareness_zh"


def test_language_from_argument_or_error(tmp_path: Path) -> None:
    file = tmp_path / "episodes.jsonl"
    file.write_text((FIXTURES / "dialogue_agent_interaction_zh.jsonl").read_text("utf-8"), "utf-8")
    assert {e.lang for e in load_interaction(file, lang="zh")} == {"zh"}
    with pytest.raises(DataError, match="_en or _zh"):
        load_interaction(file)


def test_malformed_json_names_the_line() -> None:
    with pytest.raises(DataError) as err:
        load_awareness(BROKEN / "malformed_en.json")
    assert "not valid JSON" in err.value.problem
    assert err.value.record == "line 3"
    assert err.value.path.endswith("malformed_en.json")


def test_missing_field_names_item_and_field() -> None:
    with pytest.raises(DataError) as err:
        load_awareness(BROKEN / "missing_field_en.json")
    assert err.value.record == "item 1"
    assert err.value.field == "answer"
    assert err.value.fix == "add 'answer' to this record"


def test_unknown_task_type() -> None:
    with pytest.raises(DataError) as err:
        load_awareness(BROKEN / "unknown_type_en.json")
    assert err.value.field == "type"
    assert "'emotion'" in err.value.problem
    assert "en-b02" in (err.value.record or "")
    assert "goal" in (err.value.fix or "")


def test_answer_that_is_not_json() -> None:
    with pytest.raises(DataError) as err:
        load_awareness(BROKEN / "bad_answer_en.json")
    assert err.value.field == "answer"
    assert "en-b03" in (err.value.record or "")


@pytest.mark.parametrize(
    ("name", "problem"),
    [("bad_familiarity_en.jsonl", "no number"), ("out_of_range_familiarity_zh.jsonl", "0 to 10")],
)
def test_bad_familiarity_in_an_episode(name: str, problem: str) -> None:
    with pytest.raises(DataError) as err:
        load_interaction(BROKEN / name)
    assert problem in err.value.problem
    assert err.value.field == "familiarity"
    assert (err.value.record or "").startswith("line 1 (uuid")


def test_missing_nested_field(tmp_path: Path) -> None:
    row = json.loads((FIXTURES / "dialogue_agent_interaction_en.jsonl").read_text().splitlines()[0])
    del row["combine"]["talkway"]
    file = tmp_path / "x_en.jsonl"
    file.write_text(json.dumps(row) + "\n")
    with pytest.raises(DataError) as err:
        load_interaction(file)
    assert err.value.field == "combine.talkway"
