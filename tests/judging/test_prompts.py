"""The judge's framing follows the rubric's language: English by default, Chinese for `zh`."""

from __future__ import annotations

import dataclasses
import json
import re
import string

from dialogbench.judging import Dimension, Flag, Rubric, blind_schema, verdict_schema
from dialogbench.judging.prompts import (
    EN,
    FRAMINGS,
    JUDGE_SYSTEM,
    ZH,
    blind_messages,
    single_messages,
)
from dialogbench.testing import ok
from judging.judging_support import QA, Harness, first_prompt

QA_ZH = Rubric(
    name="qa-zh",
    instructions="判断候选回复对问题回答得怎么样。",
    dimensions=(
        Dimension("accuracy", 0, 10, "回答是否与参考答案一致？"),
        Dimension("clarity", 1, 5, "回答是否容易看懂？"),
    ),
    flags=(Flag("uses_context", "回答是否用到了对话里的内容？"),),
    lang="zh",
)


def _placeholders(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


def _english_framing(text: str) -> list[str]:
    """The English framing phrases (less their placeholders) found in `text`."""
    found = []
    for value in dataclasses.asdict(EN).values():
        for piece in re.split(r"\{[a-z]*\}", value):
            piece = piece.strip(" :;.\n")
            if len(piece) > 8 and piece in text:
                found.append(piece)
    return found


def test_every_language_fills_the_same_placeholders() -> None:
    assert set(FRAMINGS) == {"en", "zh"} and EN.system == JUDGE_SYSTEM
    for field in dataclasses.fields(EN):
        en, zh = getattr(EN, field.name), getattr(ZH, field.name)
        assert _placeholders(zh) == _placeholders(en), field.name
        assert re.search(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]", zh), field.name


def test_a_chinese_rubric_is_framed_in_chinese() -> None:
    single = single_messages(QA_ZH, "巴黎。", "巴黎", "法国的首都是哪里？")
    blind = blind_messages(QA_ZH, [("A", "巴黎。"), ("B", "里昂。")], "巴黎", None)
    for system, user in ((m[0]["content"], m[1]["content"]) for m in (single, blind)):
        assert system == ZH.system
        assert ZH.dimensions_head in user and ZH.flags_head in user
        assert "- accuracy（0 到 10）：回答是否与参考答案一致？" in user
        assert _english_framing(system + user) == []
    assert ZH.context_intro in single[1]["content"] and ZH.candidate_intro in single[1]["content"]
    assert ZH.candidates_intro in blind[1]["content"] and "（A, B）" in blind[1]["content"]
    english = single_messages(QA, "Paris.", "Paris", None)
    assert english[0]["content"] == EN.system and EN.reference_intro in english[1]["content"]


def test_a_chinese_rubric_has_chinese_schema_descriptions() -> None:
    for schema in (verdict_schema(QA_ZH), blind_schema(QA_ZH, ("A", "B"))):
        text = json.dumps(schema.model_json_schema(), ensure_ascii=False)
        assert ZH.reason_help in text and "评分：0 到 10 之间的整数。" in text
        assert _english_framing(text) == []


def test_a_chinese_judge_is_corrected_in_chinese(harness: Harness) -> None:
    good = {"reason": "一致", "accuracy": 9, "clarity": 4, "uses_context": False}
    srv = harness.server(script=(ok("我觉得挺好。"), ok(json.dumps(good, ensure_ascii=False))))
    judge = harness.judge(srv, QA_ZH)
    v = harness.run(judge.score("巴黎。", reference="巴黎"))
    assert v.scores == {"accuracy": 9, "clarity": 4} and v.attempts == 2
    first, second = srv.requests
    assert first["messages"][0]["content"] == ZH.system
    assert ZH.single_output.split("{")[0] in first_prompt(first)
    correction = second["messages"][-1]["content"]
    assert correction.startswith("你的回复无法使用：") and "JSON schema" in correction
