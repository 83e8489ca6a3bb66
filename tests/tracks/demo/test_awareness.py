"""The element-awareness track: prompts, answer schemas, labels, objective metrics, a full run
against a scripted loopback server (with resume), and short runs on real data."""

from __future__ import annotations

import asyncio
import json
import math
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from dialogbench.data.demo.labels import match_label, normalise_gender
from dialogbench.data.demo.model import AwarenessItem, DemoSet
from dialogbench.data.demo.registry import load_demo
from dialogbench.data.errors import DataError
from dialogbench.judging.prompts import FRAMINGS, single_messages
from dialogbench.models import Model, ModelSpec
from dialogbench.models.embedded import unavailable
from dialogbench.models.model import RETRY_SEED_STEP
from dialogbench.models.structured import parse_reply
from dialogbench.runner import RoleSpec, run_track
from dialogbench.testing import ChatServer, UnusableFirst
from dialogbench.tracks.demo import awareness_prompts as ap
from dialogbench.tracks.demo.awareness import (
    AWARENESS,
    AwarenessConfig,
    answer_schema,
    label_metrics,
    number_metrics,
    objective_outcomes,
    select_items,
)
from tests_support_unusable import run_twice

JUDGE_SYSTEMS = {f.system for f in FRAMINGS.values()}
SENTIMENTS = ["positive", "negative", "neutral"]
EMOTIONS = ["happy", "sad", "angry", "neutral"]
LEVELS = ["high", "low"]
AGES = ["children", "teenager", "young", "middle-aged", "elderly"]


def utterance_item(
    n: int, lang: str = "en", sentiment: str = "positive", emotion: str = "happy"
) -> AwarenessItem:
    lines = [f"Ana: line {n} one", f"Bo: line {n} two", f"Ana: line {n} three"]
    return AwarenessItem(
        id=f"u{n}-{lang}",
        task="utterance",
        lang=lang,  # type: ignore[arg-type]
        dialogue_id=f"d{n}",
        transcript="\n".join(lines),
        target=1,
        gold={
            "person": "Bo",
            "content": f"line {n} two",
            "sentiment": sentiment,
            "emotion": emotion,
        },
        options={"sentiment": SENTIMENTS, "emotion": EMOTIONS},
    )


def persona_item(n: int, lang: str = "zh") -> AwarenessItem:
    """CPED-like: names, gender, age and Big Five only."""
    return AwarenessItem(
        id=f"p{n}-{lang}",
        task="persona",
        lang=lang,  # type: ignore[arg-type]
        dialogue_id=f"pd{n}",
        transcript=f"林宛瑜: 第{n}句\n曾小贤: 好的{n}",
        gold={
            "participant1": {
                "name": "林宛瑜",
                "gender": "female",
                "age": "young",
                "big_five": {"openness": "high", "neuroticism": "low"},
            },
            "participant2": {"name": "曾小贤", "gender": "male", "age": "young"},
        },
        options={
            "participant1.gender": ["male", "female"],
            "participant2.gender": ["male", "female"],
            "participant1.age": AGES,
            "participant2.age": AGES,
            "participant1.big_five.openness": LEVELS,
            "participant1.big_five.neuroticism": LEVELS,
        },
    )


def goal_item(n: int) -> AwarenessItem:
    return AwarenessItem(
        id=f"g{n}",
        task="goal",
        lang="en",
        dialogue_id=f"gd{n}",
        transcript=f"Ana: can I have the firewood {n}\nBo: only if I get the water",
        gold={"goal1": "get firewood", "goal2": "get water", "goal_completion": 7},
    )


def scene_item(n: int) -> AwarenessItem:
    return AwarenessItem(
        id=f"s{n}",
        task="scene",
        lang="en",
        dialogue_id=f"sd{n}",
        transcript=f"Ana: see you at home {n}\nBo: bring milk",
        gold={"relationship": "siblings", "familiarity": 9, "location": "home"},
    )


def demo_set(items: list[AwarenessItem]) -> DemoSet:
    return DemoSet(name="hand", items=items, sha256="0" * 64, source="hand-made")


# -- prompts --------------------------------------------------------------------------------


def _user(item: AwarenessItem, names: tuple[str, str] | None = None) -> str:
    return ap.prediction_messages(item, names)[1]["content"]


def test_prompt_asks_exactly_the_gold_fields_with_their_labels() -> None:
    prompt = _user(persona_item(1), ("林宛瑜", "曾小贤"))
    asked = set(re.findall(r'- "(\w+)"', prompt))
    assert asked == {"participant1", "participant2", "name", "gender", "age", "big_five"}
    assert "hobby" not in prompt and "occupation" not in prompt
    assert "openness, neuroticism" in prompt and "extraversion" not in prompt
    assert '"children", "teenager", "young", "middle-aged", "elderly"' in prompt
    assert ap.LABELS_RULE["zh"] in prompt
    assert "参与者 1 是林宛瑜" in prompt  # participants named, in Chinese
    assert ap.prediction_messages(persona_item(1))[0]["content"] == ap.SYSTEM["zh"]
    assert ap.WHO_UNKNOWN["zh"] in _user(persona_item(1))

    goal = _user(goal_item(1))
    assert set(re.findall(r'- "(\w+)"', goal)) == {"goal1", "goal2", "goal_completion"}
    assert "an integer from 0 to 10" in goal and "allowed labels" not in goal
    assert ap.LABELS_RULE["en"] not in goal  # no closed field, no rule about labels


def test_utterance_prompt_names_the_target() -> None:
    prompt = _user(utterance_item(4))
    assert "line 2 of the dialogue" in prompt and "\nBo: line 4 two\n" in prompt
    assert "<dialogue>\nAna: line 4 one\nBo: line 4 two\nAna: line 4 three\n</dialogue>" in prompt
    assert 'allowed labels: "positive", "negative", "neutral"' in prompt
    typed = utterance_item(4).model_copy(
        update={"gold": {"person": "Bo", "content": "x", "strategy": {"description": "d"}}}
    )
    assert '{"description": text}' in _user(typed) and "under type" not in _user(typed)
    with_type = {"person": "Bo", "content": "x", "strategy": {"description": "d", "type": "t"}}
    assert "under type" in _user(typed.model_copy(update={"gold": with_type}))


def test_judge_rubrics_follow_appendix_f() -> None:
    for lang in ("en", "zh"):
        for task, rubric in ap.RUBRICS[lang].items():
            assert [(d.name, d.low, d.high) for d in rubric.dimensions] == [
                ("accuracy", 0, 10),
                ("hallucination", 0, 10),
            ]
            assert ap.TASK_NAME[task][lang] in rubric.instructions
    assert "标准答案" in ap.RUBRICS["zh"]["goal"].instructions
    assert len(ap.PROMPT_SHA256) == 64


def test_chinese_items_are_judged_in_chinese() -> None:
    rubric = ap.RUBRICS["zh"]["scene"]
    assert rubric.lang == "zh" and ap.RUBRICS["en"]["scene"].lang == "en"
    system, user = (m["content"] for m in single_messages(rubric, "{}", "{}", None))
    assert system == FRAMINGS["zh"].system and FRAMINGS["zh"].reference_intro in user
    assert not re.search(r"Score these|Reply with|reference answer", user)


# -- schemas and labels ---------------------------------------------------------------------


def test_answer_schema_requires_the_gold_fields() -> None:
    schema = answer_schema(persona_item(1))
    good = {
        "participant1": {
            "name": "林宛瑜",
            "gender": "F",
            "age": "young",
            "big_five": {"openness": "high", "neuroticism": "低"},
        },
        "participant2": {"name": "曾小贤", "gender": "male", "age": "old", "hobby": "x"},
    }
    parsed = schema.model_validate(good).model_dump()
    assert "hobby" not in parsed["participant2"]  # extra keys ignored
    missing = json.loads(json.dumps(good))
    del missing["participant1"]["big_five"]["neuroticism"]
    with pytest.raises(ValidationError, match="neuroticism"):
        schema.model_validate(missing)
    goal = answer_schema(goal_item(1))
    assert goal.model_validate({"goal1": "a", "goal2": "b", "goal_completion": "7"})
    for bad in (11, -1, 6.5, "high"):
        with pytest.raises(ValueError, match="goal_completion"):
            parse_reply(json.dumps({"goal1": "a", "goal2": "b", "goal_completion": bad}), goal)
    with pytest.raises(ValueError, match="no JSON"):
        parse_reply("I think they both wanted firewood.", goal)
    assert answer_schema(goal_item(2)) is goal  # one schema per shape of gold


def test_bad_gold_is_a_data_error() -> None:
    bad = goal_item(1).model_copy(update={"gold": {"goal1": "x", "mood": "y"}})
    with pytest.raises(DataError, match=r"item g1 .*gold\.mood"):
        answer_schema(bad)
    no_speaker = utterance_item(1).model_copy(update={"gold": {"sentiment": "positive"}})
    with pytest.raises(DataError, match="speaker"):
        answer_schema(no_speaker)
    not_a_score = scene_item(1).model_copy(update={"gold": {"familiarity": "close"}})
    with pytest.raises(DataError, match=r"gold\.familiarity"):
        objective_outcomes(not_a_score, None, "hand.json")
    off_set = utterance_item(1, sentiment="ecstatic")
    with pytest.raises(DataError, match="not in its label set"):
        objective_outcomes(off_set, None, "hand.json")


def test_labels_are_matched_after_normalising() -> None:
    assert match_label(" Positive. ", SENTIMENTS) == "positive"
    assert match_label("积极", SENTIMENTS) == "positive"
    assert match_label("M", ["male", "female"]) == "male"
    assert match_label("Middle_Aged", AGES) == "middle-aged"
    assert match_label("高", LEVELS) == "high"
    assert match_label("ecstatic", SENTIMENTS) is None
    assert match_label("m", SENTIMENTS) is None  # a synonym counts only inside the set
    assert match_label(3, SENTIMENTS) is None
    assert match_label("pos", SENTIMENTS) == "positive"


def test_gold_and_prediction_read_boy_the_same_way() -> None:
    # the loaders read a gold "boy" as male (data.demo.labels); a predicted one is too
    assert normalise_gender("boy") == "male"
    assert match_label("boy", ["male", "female"]) == "male"
    assert match_label("Girl.", ["male", "female"]) == "female"
    item = persona_item(1)
    gold = item.gold["participant1"]["gender"]
    answer = json.loads(json.dumps(item.gold))
    answer["participant1"]["gender"] = "boy" if gold == "male" else "girl"
    outcome = objective_outcomes(item, answer)["participant1.gender"]
    assert outcome["label"] == gold and outcome["correct"] is True


def test_objective_outcomes_by_hand() -> None:
    item = persona_item(1)
    answer = {
        "participant1": {"gender": "Female", "age": "elderly", "big_five": {"openness": "high"}},
        "participant2": {"gender": "unknown", "age": "young"},
    }
    out = objective_outcomes(item, answer)
    assert out["participant1.gender"]["correct"] and out["participant1.gender"]["label"] == "female"
    assert out["participant1.age"]["correct"] is False
    assert out["participant2.gender"] == {
        "kind": "label",
        "gold": "male",
        "pred": "unknown",
        "label": None,
        "correct": False,
    }
    assert out["participant1.big_five.neuroticism"]["pred"] is None
    assert out["participant1.big_five.neuroticism"]["correct"] is False
    unparsed = objective_outcomes(item, None)
    assert all(o["correct"] is None for o in unparsed.values())
    scene = objective_outcomes(scene_item(1), {"familiarity": 6})
    assert scene == {"familiarity": {"kind": "number", "gold": 9, "pred": 6, "abs_error": 3.0}}


# -- macro-F1 -------------------------------------------------------------------------------


def test_label_metrics_by_hand() -> None:
    def outcome(gold: str, label: str | None, parsed: bool = True) -> dict[str, Any]:
        correct = (label == gold) if parsed else None
        return {"kind": "label", "gold": gold, "pred": label, "label": label, "correct": correct}

    outcomes = [
        ("i1", outcome("male", "male")),
        ("i1", outcome("female", "female")),  # the other participant of the same item
        ("i2", outcome("male", None)),  # out of set
        ("i3", outcome("female", "male")),
        ("i4", outcome("male", None, parsed=False)),
    ]
    got = label_metrics(outcomes, n_boot=300, seed=0)
    assert (got["n"], got["unparsed"], got["out_of_set"]) == (4, 1, 1)
    assert got["labels"] == ["female", "male"]
    assert got["accuracy"].value == 0.5 and got["accuracy"].n == 4
    # male: tp 1, fp 1, fn 1 -> 1/2; female: tp 1, fp 0, fn 1 -> 2/3; the out-of-set
    # answer is a label of its own (never gold): F1 0, as scikit-learn counts it
    assert got["macro_f1"].value == pytest.approx((1 / 2 + 2 / 3 + 0) / 3)
    metrics = pytest.importorskip("sklearn.metrics")
    gold = ["male", "female", "male", "female"]
    pred = ["male", "female", "<outside>", "male"]
    assert got["macro_f1"].value == pytest.approx(metrics.f1_score(gold, pred, average="macro"))
    assert got["macro_f1"].ci_low <= got["macro_f1"].value <= got["macro_f1"].ci_high
    # scored golds: male, female, male, female -> a tie, broken by the label order
    assert got["majority_label"] == "female" and got["majority_accuracy"].value == 0.5


def test_number_metrics_and_the_median_baseline_by_hand() -> None:
    def outcome(gold: float, pred: float | None) -> dict[str, Any]:
        error = None if pred is None else abs(gold - pred)
        return {"kind": "number", "gold": gold, "pred": pred, "abs_error": error}

    outcomes = [
        ("a", outcome(10, 9)),
        ("b", outcome(9, 9)),
        ("c", outcome(4, 10)),
        ("d", outcome(7, None)),  # unparsed: in neither mean
    ]
    got = number_metrics(outcomes, n_boot=300, seed=0)
    assert (got["n"], got["unparsed"], got["median"]) == (3, 1, 9.0)
    assert got["mae"].value == pytest.approx((1 + 0 + 6) / 3)
    assert got["median_mae"].value == pytest.approx((1 + 0 + 5) / 3)
    empty = number_metrics([("d", outcome(7, None))], n_boot=300, seed=0)
    assert empty["n"] == 0 and math.isnan(empty["mae"].value)


# -- a full run against a scripted server ----------------------------------------------------

_TAG = {
    n: re.compile(rf"<{n}>\n(.*?)\n</{n}>", re.DOTALL)
    for n in ("dialogue", "candidate", "reference")
}


def _tagged(name: str, text: str) -> str:
    found = _TAG[name].search(text)
    assert found is not None, name
    return found.group(1)


def right_answer(item: AwarenessItem) -> dict[str, Any]:
    answer: dict[str, Any] = json.loads(json.dumps(item.gold))
    return answer


class Scripted:
    """Predictions from `answers` (transcript -> reply text); the judge gives 10/10 to an
    answer equal to the gold and 4/6 otherwise, and an unusable verdict to any candidate
    holding "BROKEN"."""

    def __init__(self, answers: dict[str, str]) -> None:
        self.answers = answers
        self.predictions = 0
        self.verdicts = 0

    def __call__(self, body: dict[str, Any]) -> str:
        system, prompt = body["messages"][0]["content"], body["messages"][1]["content"]
        if system in JUDGE_SYSTEMS:
            self.verdicts += 1
            candidate = _tagged("candidate", prompt)
            if "BROKEN" in candidate:
                return "Mostly right, I would say."
            try:
                same = json.loads(candidate) == json.loads(_tagged("reference", prompt))
            except json.JSONDecodeError:  # an answer judged as written
                same = False
            scores = (10, 10) if same else (4, 6)
            return json.dumps(
                {"reason": "compared", "accuracy": scores[0], "hallucination": scores[1]}
            )
        assert system in ap.SYSTEM.values()
        self.predictions += 1
        return self.answers[_tagged("dialogue", prompt)]


def scripted_set() -> tuple[DemoSet, dict[str, str]]:
    u = [
        utterance_item(1),
        utterance_item(2, sentiment="negative", emotion="sad"),
        utterance_item(3),
        utterance_item(4, "zh"),
    ]
    p = [persona_item(1), persona_item(2)]
    g = [goal_item(1), goal_item(2)]
    s = [scene_item(1)]
    answers = {i.transcript: json.dumps(right_answer(i), ensure_ascii=False) for i in u + p + g + s}
    wrong = right_answer(u[1]) | {"sentiment": "Positive", "emotion": "ecstatic"}  # 2 misses
    answers[u[1].transcript] = "Here you go:\n```json\n" + json.dumps(wrong) + "\n```"
    answers[u[2].transcript] = "The sentiment is positive and the emotion happy."  # never JSON
    off = right_answer(p[1])
    off["participant2"]["gender"] = "女"  # a synonym, matched (and wrong)
    off["participant1"]["big_five"]["openness"] = "low"
    answers[p[1].transcript] = json.dumps(off, ensure_ascii=False)
    answers[g[1].transcript] = json.dumps(
        right_answer(g[1]) | {"goal1": "BROKEN", "goal_completion": 3}
    )
    return demo_set(u + p + g + s), answers


def test_scripted_run_resumes_and_counts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ds, answers = scripted_set()
    script = Scripted(answers)
    out = tmp_path / "run"
    with ChatServer(reply=script) as srv:
        settings = RoleSpec("openai-compatible/scripted", srv.base_url)
        config = AwarenessConfig(n_boot=200, max_fixes=1)
        seen: list[tuple[str, int, int]] = []
        monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache1.sqlite"))
        result = run_track(
            AWARENESS,
            ds,
            out,
            config,
            {"model": settings},
            progress=lambda w, i, n: seen.append((w, i, n)),
        ).result()
        first = srv.request_count
        # 9 items: one prediction never parses (2 tries) and is judged as written; one
        # verdict never validates (2 tries)
        assert (script.predictions, script.verdicts) == (10, 10) and first == 20
        assert seen[0] == ("solve", 0, 18) and seen[-1][1:] == (18, 18)
        assert {w for w, _, _ in seen} == {"solve", "score"}
        items_text = (out / "items.jsonl").read_text()

        # a fresh response cache each time: what is not asked again was kept, not cached.
        # The unusable prediction and verdict are failed calls: a rerun asks them again
        # (this server answers them the same way), u3's prediction (2 tries) and its
        # judging as written, g2's verdict (2 tries); the 7 other items are kept
        failed_again = 2 + 1 + 2
        monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache2.sqlite"))
        again = run_track(AWARENESS, ds, out, config, {"model": settings}).result()
        assert srv.request_count == first + failed_again
        assert again.summary.keys() == result.summary.keys()
        for stage in ("solved", "scored"):  # as if killed before the persona-zh items
            part = out / "parts" / f"{stage}.jsonl"
            kept = [x for x in part.read_text().splitlines() if '"unit": "persona-zh:' not in x]
            part.write_text("".join(x + "\n" for x in kept))
        monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache3.sqlite"))
        run_track(AWARENESS, ds, out, config, {"model": settings})
        # two predictions and two verdicts, and the failed calls once more
        assert srv.request_count == first + failed_again + 4 + failed_again
        assert (out / "items.jsonl").read_text() == items_text

        # a new n_boot only redraws the figures; a new judge re-judges, the model is not asked
        monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache4.sqlite"))
        before = srv.request_count
        run_track(AWARENESS, ds, tmp_path / "boot", config, {"model": settings})
        solved = srv.request_count - before
        run_track(
            AWARENESS, ds, tmp_path / "boot", replace(config, n_boot=100), {"model": settings}
        )
        # only the failed calls are asked again, as retry 1: u3's prediction (2 tries; its
        # judging as written comes from the cache) and g2's verdict (2 tries)
        assert srv.request_count == before + solved + 2 + 2
        retried = [b for b in srv.requests[before + solved :] if b["seed"] == RETRY_SEED_STEP]
        assert len(retried) == 4
        predictions = script.predictions
        judge = RoleSpec("openai-compatible/other-judge", srv.base_url)
        rejudged = run_track(
            AWARENESS,
            ds,
            tmp_path / "boot",
            replace(config, n_boot=100),
            {"model": settings, "judge": judge},
        ).result()
        # the model under test is asked only for the prediction that failed (2 tries)
        assert script.predictions == predictions + 2 and script.verdicts > 9
        assert rejudged.usage["stages"]["score"]["judge"]["model"] == (
            "openai-compatible/other-judge"
        )

    counts = json.loads((out / "counts.json").read_text())
    assert counts["en"]["utterance"] == {
        "items": 3,
        "prediction_unparsed": 1,
        "prediction_call_failed": 0,
        "unparsed_scored": 1,
        "judge_unscored": 0,
        "scored": 3,
    }
    assert counts["en"]["goal"]["judge_unscored"] == 1 and counts["en"]["goal"]["scored"] == 1
    assert counts["zh"] == {
        "persona": {
            "items": 2,
            "prediction_unparsed": 0,
            "prediction_call_failed": 0,
            "unparsed_scored": 0,
            "judge_unscored": 0,
            "scored": 2,
        },
        "utterance": {
            "items": 1,
            "prediction_unparsed": 0,
            "prediction_call_failed": 0,
            "unparsed_scored": 0,
            "judge_unscored": 0,
            "scored": 1,
        },
    }

    rows = {r["id"]: r for r in map(json.loads, items_text.splitlines())}
    assert len(rows) == 9
    unparsed = rows["u3-en"]
    assert unparsed["prediction"]["parsed"] is None and unparsed["judged"]  # as written
    assert unparsed["prediction"]["raw"].startswith("The sentiment is positive")
    assert unparsed["prediction"]["error"] and unparsed["prediction"]["attempts"] == 2
    assert unparsed["score"] == 5.0
    assert all(o["correct"] is None for o in unparsed["objective"].values())
    unscored = rows["g2"]
    assert unscored["judged"] is False and unscored["judge_raw"].startswith("Mostly right")
    assert unscored["judge_error"] and unscored["judge_scores"] is None
    assert unscored["judge_model"] and unscored["score"] is None
    for r in rows.values():  # the item's score is the mean of the verdict's two scores
        if r["judged"]:
            assert set(r["judge_scores"]) == {"accuracy", "hallucination"}
            assert r["score"] == sum(r["judge_scores"].values()) / 2
    assert rows["g2"]["objective"]["goal_completion"]["abs_error"] == 4.0
    assert rows["u2-en"]["prediction"]["parsed"]["sentiment"] == "Positive"  # kept as given
    assert rows["u2-en"]["objective"]["emotion"]["label"] is None
    assert rows["u1-en"]["gold"] == utterance_item(1).gold

    judge = result.summary["judge"]
    assert judge["en"]["utterance"]["accuracy"].value == 6.0  # (10 + 4 + 4) / 3, u3 counted
    assert judge["en"]["utterance"]["score"].n == 3
    assert judge["en"]["utterance"]["score_parsed_only"].value == 7.5  # (10 + 5) / 2
    assert judge["en"]["utterance"]["score_parsed_only"].n == 2
    assert judge["en"]["goal"]["score"].value == 10.0 and judge["en"]["goal"]["score"].n == 1
    assert judge["zh"]["persona"]["score"].value == 7.5  # (10 + 5) / 2
    en = result.tables["en"]
    assert en.tasks["utterance"].value == pytest.approx(20 / 3) and en.unscored["utterance"] == 0
    assert en.average.value == pytest.approx((10.0 + 10.0 + 20 / 3) / 3)
    assert en.missing == ["persona"] and result.tables["zh"].missing == ["goal", "scene"]
    for lang, by_task in judge.items():  # one figure, one interval: bootstrapped once
        for task, figures in by_task.items():
            assert figures["score"] == result.tables[lang].tasks[task]

    objective = result.summary["objective"]
    sentiment = objective["en"]["sentiment"]
    assert (sentiment["n"], sentiment["unparsed"], sentiment["out_of_set"]) == (2, 1, 0)
    assert sentiment["accuracy"].value == 0.5
    assert sentiment["macro_f1"].value == pytest.approx((2 / 3 + 0) / 2)  # positive, negative
    assert objective["en"]["emotion"]["out_of_set"] == 1
    assert (
        objective["zh"]["gender"]["n"] == 4 and objective["zh"]["gender"]["accuracy"].value == 0.75
    )
    assert objective["zh"]["big_five.openness"]["accuracy"].value == 0.5
    assert objective["zh"]["sentiment"]["accuracy"].value == 1.0  # never pooled with English
    assert objective["en"]["familiarity"]["mae"].value == 0.0
    assert objective["en"]["goal_completion"]["mae"].value == 2.0  # (0 + 4) / 2
    assert objective["en"]["goal_completion"]["n"] == 2

    warnings = json.loads((out / "warnings.json").read_text())["warnings"]
    said = "utterance (en): 1 of 3 answers could not be read as JSON fields; 1 were judged"
    assert any(said in w for w in warnings), warnings
    assert any("goal (en): 1 verdicts unscored" in w for w in warnings)
    assert any("emotion (en): 1 predicted labels outside" in w for w in warnings)
    # zh holds utterance and persona items only: goal and scene are absent, not unscored
    zh = "zh: the awareness average leaves out goal, scene (no item in this run), so"
    assert any(zh in w for w in warnings), warnings
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["resolved"]["prompt_sha256"] == ap.PROMPT_SHA256
    assert manifest["roles"]["model"]["model"] == "openai-compatible/scripted"
    assert manifest["roles"]["judge"] == {"same_as": "model"}
    assert manifest["dataset"]["sha256"] == "0" * 64 and manifest["track"] == "demo-awareness"
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["awareness"]["en"]["average"]) == {"value", "ci_low", "ci_high", "n"}
    usage = json.loads((out / "usage.json").read_text())
    assert usage["roles"]["model"]["calls"] == 10  # 9 items + 1 correction
    assert usage["roles"]["judge"]["calls"] == 10  # 9 answers + 1 correction
    assert usage["stages"]["solve"]["model"]["calls"] == 10
    # the prediction and the verdict still unusable after their correction: failed calls
    assert usage["roles"]["model"]["failed_by_kind"] == {"unparseable": 1}
    assert usage["roles"]["judge"]["failed_by_kind"] == {"unparseable": 1}
    noted = json.loads((out / "warnings.json").read_text())
    assert noted["failed_calls_by_kind"] == {
        "model": {"unparseable": 1},
        "judge": {"unparseable": 1},
    }
    assert noted["failures"]["failed model calls"] == 1
    assert usage["total"]["tokens_processed"] > 0


def test_an_unusable_prediction_is_a_failed_call_asked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model under test answers each prediction first with JSON of the wrong shape: the
    first run exits 3 counting them (`schema`), the rerun sends exactly those predictions
    again (one request each, the seed moved) and exits 0."""
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    items = [utterance_item(1), utterance_item(2, "zh"), goal_item(1), scene_item(1)]
    answers = {i.transcript: json.dumps(right_answer(i), ensure_ascii=False) for i in items}
    flaky = UnusableFirst(
        Scripted(answers),
        bad='{"answer": "I am not sure"}',
        applies=lambda body: body["messages"][0]["content"] in ap.SYSTEM.values(),
    )
    out = tmp_path / "run"
    config = AwarenessConfig(n_boot=50, max_fixes=1)
    with ChatServer(reply=flaky) as srv:
        roles = {"model": RoleSpec("openai-compatible/scripted", srv.base_url)}
        got = run_twice(
            srv,
            flaky,
            out,
            lambda: run_track(AWARENESS, demo_set(items), out, config, roles=roles).exit_code,
        )
    assert got.exit_codes == (3, 0)
    assert got.failed_calls_by_kind == {"model": {"schema": 4}}
    assert got.usage_by_kind == {"model": {"schema": 4}}
    assert got.failures["failed model calls"] == 4
    assert len(got.failed) == 4 and got.asked_again == got.failed  # the first askings only
    assert got.seeds == [(0, RETRY_SEED_STEP)] * 4
    rows = [json.loads(x) for x in (out / "items.jsonl").read_text().splitlines()]
    assert all(r["prediction"]["parsed"] == r["gold"] and r["score"] == 10.0 for r in rows)
    assert all(r["prediction"]["retry"] == 1 and "judge_retry" not in r for r in rows)
    usage = json.loads((out / "usage.json").read_text())
    assert usage["roles"]["model"]["failed_calls"] == 0  # the units kept are the rerun's


def test_limit_draws_from_every_task_and_language() -> None:
    ds, _ = scripted_set()
    picked = select_items(ds, AwarenessConfig(limit=5))
    assert len(picked) == 5
    assert {(i.task, i.lang) for i in picked} == {
        ("goal", "en"),
        ("persona", "zh"),
        ("scene", "en"),
        ("utterance", "en"),
        ("utterance", "zh"),
    }
    only = select_items(ds, AwarenessConfig(tasks=("goal",)))
    assert [i.id for i in only] == ["g1", "g2"]


def test_bad_configurations_fail_early(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="tasks"):
        AwarenessConfig(tasks=("mood",))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="needs a model"):
        run_track(AWARENESS, demo_set([goal_item(1)]), tmp_path, AwarenessConfig())
    settings = RoleSpec("openai-compatible/x", "http://127.0.0.1:9")
    with pytest.raises(ValueError, match="no items"):
        run_track(
            AWARENESS,
            demo_set([goal_item(1)]),
            tmp_path,
            AwarenessConfig(("scene",)),
            {"model": settings},
        )
    bad = goal_item(1).model_copy(update={"gold": {"mood": "x"}})
    with pytest.raises(DataError):
        run_track(AWARENESS, demo_set([bad]), tmp_path, AwarenessConfig(), {"model": settings})
    with pytest.raises(ValueError, match="limit"):
        AwarenessConfig(limit=0)
    assert not (tmp_path / "manifest.json").exists()


# -- real data: CPED and CaSiNo -------------------------------------------------------------


def real_set() -> DemoSet:
    """CPED's validation split (Chinese) and CaSiNo's test split (English), in one set."""
    cped, casino = load_demo("cped:valid"), load_demo("casino:test")
    return DemoSet(
        name="cped+casino",
        dialogues=cped.dialogues + casino.dialogues,
        items=cped.items + casino.items,
        sha256=cped.sha256[:32] + casino.sha256[:32],
        source=f"{cped.source} + {casino.source}",
    )


class GoldEcho:
    """Answers every item with its gold; the judge gives 10/10 to an exact match."""

    def __init__(self, items: list[AwarenessItem]) -> None:
        self.gold = {(i.transcript, i.task): i.gold for i in items}

    def __call__(self, body: dict[str, Any]) -> str:
        system, prompt = body["messages"][0]["content"], body["messages"][1]["content"]
        if system in JUDGE_SYSTEMS:
            same = json.loads(_tagged("candidate", prompt)) == json.loads(
                _tagged("reference", prompt)
            )
            score = 10 if same else 0
            return json.dumps({"reason": "compared", "accuracy": score, "hallucination": score})
        task = next(t for t, ask in ap.TASK_ASK.items() if any(a in prompt for a in ask.values()))
        gold = self.gold[(_tagged("dialogue", prompt), task)]
        return json.dumps(gold, ensure_ascii=False)


@pytest.mark.usefixtures("cped_dir", "casino_dir")  # skipped when the corpora are absent
def test_gold_answers_on_cped_and_casino_score_full_marks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ds = real_set()
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    with ChatServer(reply=GoldEcho(ds.items)) as srv:
        settings = RoleSpec("openai-compatible/echo", srv.base_url)
        config = AwarenessConfig(limit=12, n_boot=100)
        result = run_track(AWARENESS, ds, tmp_path / "run", config, {"model": settings}).result()
    assert {lang: set(c) for lang, c in result.counts.items()} == {
        "en": {"goal", "persona", "utterance"},  # CaSiNo
        "zh": {"persona", "scene", "utterance"},  # CPED
    }
    for by_task in result.counts.values():
        for c in by_task.values():
            assert c["items"] == c["scored"] == 2 and c["prediction_unparsed"] == 0
    for table in result.tables.values():
        assert table.average.value == 10.0 and len(table.averaged) == 3
    objective = result.summary["objective"]
    assert {"sentiment", "emotion", "dialogue_act", "gender", "age"} <= set(objective["zh"])
    assert {"big_five.openness", "big_five.neuroticism"} <= set(objective["zh"])
    assert {"goal_completion", "gender", "age", "education"} <= set(objective["en"])
    for fields_ in objective.values():
        for name, metrics in fields_.items():
            if "mae" in metrics:
                assert metrics["mae"].value == 0.0, name
            else:
                assert metrics["accuracy"].value == metrics["macro_f1"].value == 1.0, name
    rows = [json.loads(x) for x in (tmp_path / "run" / "items.jsonl").read_text().splitlines()]
    prompts = [b["messages"][1]["content"] for b in srv.requests]
    persona_zh = next(p for p in prompts if ap.TASK_ASK["persona"]["zh"] in p)
    assert "参与者 1 是" in persona_zh and "取值为 high 或 low" in persona_zh
    assert "hobby" not in persona_zh  # CPED labels no hobby
    assert len(rows) == 12


@pytest.mark.skipif(unavailable() is not None, reason=unavailable() or "")
@pytest.mark.usefixtures("cped_dir")
def test_embedded_model_on_a_cped_item(tmp_path: Path) -> None:
    cped = load_demo("cped:valid")
    item = min((i for i in cped.items if i.task == "scene"), key=lambda i: len(i.transcript))
    ds = DemoSet(name="cped-one", items=[item], sha256=cped.sha256, source=cped.source)
    model = Model.from_spec(ModelSpec.parse("embedded"), cache=None)
    config = AwarenessConfig(n_boot=50, max_tokens=32, judge_max_tokens=64, max_fixes=0)
    try:
        result = run_track(AWARENESS, ds, tmp_path, config, {"model": model}).result()
    finally:
        asyncio.run(model.aclose())
    (row,) = [json.loads(x) for x in (tmp_path / "items.jsonl").read_text().splitlines()]
    c = result.counts["zh"]["scene"]
    assert c["items"] == 1 and row["prediction"]["raw"]
    # smoke-quality model: parsed or not, the answer is judged (as written when unparsed)
    assert c["prediction_unparsed"] == (row["prediction"]["parsed"] is None)
    assert row["judge_model"] == "embedded"
    assert c["scored"] + c["judge_unscored"] == 1
    # a verdict that failed to validate keeps its raw text; a call that timed out (a busy
    # machine) says so, and the run counts it as failed
    assert row["judged"] or row["judge_raw"] or row["judge_error"].startswith("call failed")
    assert result.usage["roles"]["model"]["completion_tokens"] > 0
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["roles"]["model"]["model"] == "embedded"
