"""The languages dialogbench works in, the judge's wording (our own) in each, and which CJK
language a text is written in (by its script: `cjk_language`).

`Lang` is the one definition of a language code (DEMO items and episodes, rubrics); a
`Framing` is everything a judge is told besides the rubric itself (system text, headings,
output instructions, the reply schema's field descriptions, the correction after an
unusable reply), and `FRAMINGS[lang]` the framing of each language. `judging.prompts` builds
messages from them and `judging.rubric` its reply schemas; the rubric no longer imports the
prompts (and the prompts read `Rubric` for type checking only).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, get_args

from dialogbench.models.structured import CORRECTION

Lang = Literal["en", "zh"]
LANGS: tuple[Lang, ...] = get_args(Lang)


@dataclass(frozen=True)
class Framing:
    """Every phrase around a rubric in one language."""

    system: str
    dimensions_head: str
    dimension_line: str
    """One dimension: {name}, {low}, {high}, {criteria}."""
    flags_head: str
    flag_line: str
    """One flag: {name}, {question}."""
    context_intro: str
    reference_intro: str
    candidate_intro: str
    candidates_intro: str
    single_output: str
    """What to reply for one candidate: {fields}."""
    blind_output: str
    """What to reply for blinded candidates: {labels}, {fields}."""
    score_fields: str
    """The dimensions in the output instructions: {dims}."""
    flag_fields: str
    """The flags in the output instructions: {flags}."""
    reason_help: str
    """Schema: the `reason` field."""
    score_help: str
    """Schema: a dimension's field, {criteria}, {low}, {high}."""
    label_help: str
    """Schema: a blinded entry's `label`."""
    entries_help: str
    """Schema: the blinded `candidates` list."""
    correction: str
    """Sent back after an unusable reply: {error}, {schema}."""


EN = Framing(
    system=(
        "You evaluate replies written by conversational AI systems, impartially and strictly. "
        "Judge only what is on the page, against the criteria you are given. Give the top of a "
        "scale only when a criterion is met in full, and never reward length, confidence or "
        "polish for their own sake. Score every dimension on its own: one score must not pull "
        "another up or down."
    ),
    dimensions_head="Score these dimensions, each with an integer in the range shown:",
    dimension_line="- {name} ({low} to {high}): {criteria}",
    flags_head="Also answer each of these with true or false:",
    flag_line="- {name}: {question}",
    context_intro="The conversation or question the candidate responds to:",
    reference_intro=(
        "A reference answer, to be taken as correct. Different wording is fine; what matters "
        "is whether the candidate agrees with it:"
    ),
    candidate_intro="The candidate to evaluate:",
    candidates_intro=(
        "The candidates to evaluate. Their labels and their order are arbitrary and say "
        "nothing about their quality; evaluate each one on its own merits, not by comparison "
        "with its neighbours:"
    ),
    single_output=(
        "Reply with one JSON object and nothing else. Write your reasoning first, in a few "
        'sentences, under "reason"; then give {fields}.'
    ),
    blind_output=(
        'Reply with one JSON object and nothing else, of the form {{"candidates": [...]}}, '
        "holding exactly one entry for each label ({labels}). In each entry put the label "
        'under "label", your reasoning for that candidate under "reason" (written first, in '
        "a few sentences), then {fields}."
    ),
    score_fields="one integer per dimension under its name: {dims}",
    flag_fields="; and true or false for {flags}",
    reason_help=(
        "Your reasoning, written before the scores: what the candidate gets right and wrong."
    ),
    score_help="{criteria} Score: an integer from {low} to {high}.",
    label_help="The candidate's label, exactly as shown.",
    entries_help="One entry per candidate label.",
    correction=CORRECTION,
)

ZH = Framing(
    system=(
        "你负责评估对话式 AI 系统写出的回复，要公正、严格。只依据眼前给出的内容，对照给定的"
        "标准作判断。只有完全满足某项标准时才给这一项的最高分；不要因为回复更长、语气更笃定"
        "或文字更漂亮就加分。每个维度单独打分，一项的分数不能拉高或拉低另一项。"
    ),
    dimensions_head="请为以下各个维度打分，每项给出所示范围内的一个整数：",
    dimension_line="- {name}（{low} 到 {high}）：{criteria}",
    flags_head="另外，请对下面每个问题回答 true 或 false：",
    flag_line="- {name}：{question}",
    context_intro="候选回复所针对的对话或问题：",
    reference_intro="参考答案，一律视为正确。措辞不同没有关系，关键在于候选回复是否与它一致：",
    candidate_intro="需要评估的候选回复：",
    candidates_intro=(
        "需要评估的候选回复。它们的标签和先后顺序都是随意安排的，与质量无关；请就每一条"
        "本身的优劣作评估，不要拿它和前后的回复比较："
    ),
    single_output=(
        '只回复一个 JSON 对象，不要写其他内容。先在 "reason" 下用几句话写出你的分析，'
        "然后给出{fields}。"
    ),
    blind_output=(
        '只回复一个 JSON 对象，不要写其他内容，形式为 {{"candidates": [...]}}，每个标签'
        '（{labels}）恰好对应其中一项。每一项里，在 "label" 下写标签，在 "reason" 下写你对'
        "这条候选回复的分析（先写，用几句话），然后给出{fields}。"
    ),
    score_fields="各维度的分数（以维度名为键，各一个整数）：{dims}",
    flag_fields="；以及 {flags} 的 true 或 false",
    reason_help="你的分析，写在分数之前：候选回复哪些地方对、哪些地方错。",
    score_help="{criteria}评分：{low} 到 {high} 之间的整数。",
    label_help="候选回复的标签，与所示的写法完全一致。",
    entries_help="每个候选标签对应一项。",
    correction=(
        "你的回复无法使用：{error}。请重新回复，只写一个符合下面这个 JSON schema 的 JSON "
        "对象，不要写其他内容：\n{schema}"
    ),
)

FRAMINGS: dict[Lang, Framing] = {"en": EN, "zh": ZH}
"""The framing of each language a rubric can be written in (`Rubric.lang`)."""

JUDGE_SYSTEM = EN.system
"""The English system message (what a judge of an English rubric is told first)."""


Cjk = Literal["ko", "ja", "zh"]
"""Languages written without spaces between words (Korean spaces words, but glues particles
and endings to them): BM25 over whitespace words finds little in them."""
CJK_LANGS: tuple[Cjk, ...] = get_args(Cjk)

_HANGUL = re.compile(r"[\u1100-\u11ff\u3130-\u318f\ua960-\ua97f\uac00-\ud7af]")
_KANA = re.compile(r"[\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f]")
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
CJK_SHARE = 0.25
"""Texts are CJK when at least this share of their characters (spaces included) are Hangul,
kana or Han."""


def cjk_language(texts: Iterable[str]) -> Cjk | None:
    """The CJK language `texts` are written in, by script, or None (a language that spaces its
    words, or too little CJK): Hangul outnumbering kana and Han together is Korean; kana at
    least a twentieth of kana and Han is Japanese; Han otherwise Chinese. ASCII texts are only
    counted, never scanned."""
    total = 0
    wide: list[str] = []
    for text in texts:
        total += len(text)
        if not text.isascii():
            wide.append(text)
    joined = "".join(wide)
    hangul, kana, han = (len(p.findall(joined)) for p in (_HANGUL, _KANA, _HAN))
    if hangul + kana + han < CJK_SHARE * max(total, 1):
        return None
    if hangul >= kana + han:
        return "ko"
    return "ja" if kana >= 0.05 * (kana + han) else "zh"
