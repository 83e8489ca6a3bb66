"""CaSiNo adapter: outcome and persona rules on a fixture, real split counts and label sets."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from dialogbench.data.demo.casino import DEAL_ACTIONS, STRATEGIES, load_casino, read_split
from dialogbench.data.demo.items import whole_score
from dialogbench.data.demo.model import DemoSet
from dialogbench.data.errors import DataError

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="module")
def fixture_set() -> DemoSet:
    return load_casino(FIXTURES / "casino", splits=("test",))


def test_deal_outcome_and_goals(fixture_set: DemoSet) -> None:
    deal = fixture_set.dialogues[0]
    assert deal.id == "casino-9001"
    assert [p.name for p in deal.participants] == ["Participant 1", "Participant 2"]
    assert deal.epilogue.goal_completion == pytest.approx(10 * 41 / 42)  # exact, not rounded
    reason = deal.epilogue.completion_reason or ""
    assert "Participant 1 gets 3 Food, 1 Water, 0 Firewood (19 points)" in reason
    assert "41 of the 42 points" in reason
    assert "Food matters most" in (deal.goals[0] or "")
    assert "My kids are always hungry outdoors." in (deal.goals[0] or "")
    assert not any(u.text in DEAL_ACTIONS for u in deal.utterances)
    assert len(deal.utterances) == 6


def test_goal_completion_gold_is_rounded_once(tmp_path: Path) -> None:
    """37 of 39 points is 9.487: the gold is 9 (rounding to 0.1 first gave 9.5, then 10)."""
    dialogues = json.loads((FIXTURES / "casino" / "casino_test.json").read_text())
    info = dialogues[0]["participant_info"]
    # the best split now gives 39 points: Food 5 + Water 5 + Firewood 3, three packages each
    info["mturk_agent_2"]["value2issue"] = {"High": "Water", "Medium": "Food", "Low": "Firewood"}
    info["mturk_agent_1"]["outcomes"]["points_scored"] = 18
    info["mturk_agent_2"]["outcomes"]["points_scored"] = 19
    (tmp_path / "casino_test.json").write_text(json.dumps(dialogues))
    loaded = load_casino(tmp_path, splits=("test",))
    assert loaded.dialogues[0].epilogue.goal_completion == pytest.approx(370 / 39)
    goal = next(i for i in loaded.items if i.task == "goal" and i.dialogue_id == "casino-9001")
    assert goal.gold["goal_completion"] == 9
    assert "37 of the 39 points" in goal.gold["reason"]


@pytest.mark.parametrize(
    ("value", "whole"), [(9.487, 9), (8.5, 9), (9.5, 10), (0.5, 1), (0.0, 0), (10.0, 10)]
)
def test_whole_score_rounds_halves_up(value: float, whole: int) -> None:
    assert whole_score(value) == whole


def test_walk_away_scores_zero_and_first_speaker_is_participant_1(fixture_set: DemoSet) -> None:
    walk = fixture_set.dialogues[1]
    assert walk.epilogue.goal_completion == 0
    assert (walk.epilogue.completion_reason or "").startswith("Participant 2 walked away")
    assert walk.utterances[0].speaker == "Participant 1"
    assert "mturk_agent_2 = Participant 1" in walk.source


def test_persona_midpoint_and_demographics(fixture_set: DemoSet) -> None:
    first, second = fixture_set.dialogues[0].participants
    # 5.5 high, 4.0 left out, 3.0 low, stability 6.0 -> neuroticism low, 2.5 low
    assert first.big_five == {
        "openness": "low",
        "conscientiousness": "low",
        "extraversion": "high",
        "neuroticism": "low",
    }
    assert (first.gender, first.age, first.education) == ("female", "adulthood", "master's degree")
    assert second.big_five == {"openness": "high"}
    assert second.gender is None and second.age is None  # "other"; age 3 has no band
    assert any("age under 6" in w for w in fixture_set.warnings)


def test_strategies_match_messages_by_text(fixture_set: DemoSet) -> None:
    labels = [u.labels for u in fixture_set.dialogues[0].utterances]
    assert labels[1] is None  # not annotated: the annotations skip it
    assert labels[2] is not None and labels[2].strategy_labels == ["self-need", "other-need"]
    assert labels[2].strategy is not None
    assert labels[2].strategy.description.startswith("self-need: ")
    assert labels[4] is None  # annotated with an empty label
    assert labels[5] is not None and labels[5].strategy_labels == ["vouch-fair"]
    item = next(i for i in fixture_set.items if i.task == "utterance")
    assert item.target in (0, 2, 3, 5)
    assert [i.task for i in fixture_set.items if i.dialogue_id == "casino-9002"] == [
        "goal",
        "persona",
    ]


def test_missing_field_names_dialogue(tmp_path: Path) -> None:
    data = json.loads((FIXTURES / "casino" / "casino_test.json").read_text("utf-8"))
    del data[1]["participant_info"]["mturk_agent_1"]["value2issue"]
    (tmp_path / "casino_test.json").write_text(json.dumps(data), "utf-8")
    with pytest.raises(DataError) as err:
        read_split(tmp_path / "casino_test.json")
    assert err.value.record == "dialogue 1 (dialogue_id 9002)"
    assert err.value.field == "participant_info.mturk_agent_1.value2issue"


@pytest.fixture(scope="module")
def casino(casino_dir: Path) -> DemoSet:
    return load_casino(casino_dir)


def test_real_counts(casino_dir: Path, casino: DemoSet) -> None:
    sizes = {
        s: len(read_split(casino_dir / f"casino_{s}.json")) for s in ("train", "valid", "test")
    }
    assert sizes == {"train": 900, "valid": 30, "test": 100}
    assert len(casino.dialogues) == 1030
    assert Counter(i.task for i in casino.items) == {
        "goal": 1030,
        "persona": 1030,
        "utterance": 396,
    }
    walk_aways = [d for d in casino.dialogues if d.epilogue.goal_completion == 0]
    assert len(walk_aways) == 25
    assert all(d.epilogue.goal_completion is not None for d in casino.dialogues)


def test_real_label_sets_and_actions(casino_dir: Path) -> None:
    tags: Counter[str] = Counter()
    actions: Counter[str] = Counter()
    for split in ("train", "valid", "test"):
        for d in json.loads((casino_dir / f"casino_{split}.json").read_text("utf-8")):
            actions.update(c["text"] for c in d["chat_logs"] if c["text"] in DEAL_ACTIONS)
            for _, joined in d["annotations"]:
                tags.update(t for t in joined.split(",") if t)
    assert set(tags) == set(STRATEGIES) and len(STRATEGIES) == 10
    assert actions == {
        "Submit-Deal": 1181,
        "Accept-Deal": 1005,
        "Reject-Deal": 167,
        "Walk-Away": 25,
    }


def test_real_goal_completion_gold_is_the_exact_ratio_rounded_once(
    casino_dir: Path, casino: DemoSet
) -> None:
    """Recomputed by hand from the raw files, in integers: 10 x points / best, halves up."""
    points = {"High": 5, "Medium": 4, "Low": 3}
    expected: dict[str, int] = {}
    for split in ("train", "valid", "test"):
        for d in json.loads((casino_dir / f"casino_{split}.json").read_text("utf-8")):
            info = d["participant_info"]
            if any(c["text"] == "Walk-Away" for c in d["chat_logs"]):
                expected[f"casino-{d['dialogue_id']}"] = 0
                continue
            worth = [
                {item: points[level] for level, item in info[a]["value2issue"].items()}
                for a in ("mturk_agent_1", "mturk_agent_2")
            ]
            best = sum(3 * max(w[item] for w in worth) for item in ("Food", "Water", "Firewood"))
            total = sum(int(info[a]["outcomes"]["points_scored"]) for a in info)
            expected[f"casino-{d['dialogue_id']}"] = (20 * total + best) // (2 * best)
    gold = {i.dialogue_id: i.gold["goal_completion"] for i in casino.items if i.task == "goal"}
    assert gold == expected
    # rounding to 0.1 first, then to a whole number, had put 113 of these at 10
    assert Counter(gold.values()) == {10: 681, 9: 313, 0: 25, 8: 11}
