"""Prompts of the DEMO synthesis pipeline (`build demo`), in English and Chinese.

The wording is our own; the fields, scales and label sets follow the DEMO paper (Wang et
al., 2024, section 3.2): goals and scene distilled from a seed dialogue, a persona expanded
from sampled attributes, a conflict check that adds relationship, familiarity and medium, a
dialogue with per-utterance annotation (intent, sentiment, emotion, stance, strategy) and
an epilogue (goal completion 0-10, information flow, one summary per participant), and a
checker's review of that annotation.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Literal, get_args

from dialogbench.lang import Lang
from dialogbench.models.types import ChatMessage

GoalType = Literal[
    "persuasion",
    "negotiation",
    "information exchange",
    "emotional support",
    "conflict resolution",
    "joint planning",
    "debate",
    "asking a favour",
    "socialising",
    "apology and reconciliation",
]
GOAL_TYPES: tuple[str, ...] = get_args(GoalType)
"""Ten kinds of dialogue goal; the generation step draws combinations evenly over them."""

GOAL_TYPES_ZH = {
    "persuasion": "说服",
    "negotiation": "谈判",
    "information exchange": "信息交流",
    "emotional support": "情感支持",
    "conflict resolution": "化解冲突",
    "joint planning": "共同规划",
    "debate": "辩论",
    "asking a favour": "请求帮忙",
    "socialising": "社交闲聊",
    "apology and reconciliation": "道歉与和解",
}

SENTIMENTS = ("positive", "negative", "neutral")

SYSTEM: dict[Lang, str] = {
    "en": "You help build a dataset of realistic two-person conversations. Reply with one "
    "JSON object and nothing else.",
    "zh": "你在帮助构建一个真实的双人对话数据集。只回复一个 JSON 对象，不要写别的内容。",
}

_DISTILL: dict[Lang, str] = {
    "en": "Read the conversation below and work out what lies behind it.\n\n<dialogue>\n"
    "{dialogue}\n</dialogue>\n\nGive: goal1 and goal2, what each of the two speakers wants "
    "to achieve in this conversation (one sentence each, speaker 1 is {p1}, speaker 2 is "
    "{p2}); goal_type, the kind of goal, one of: {types}; topic, what the conversation is "
    "about; domain, the area of life it belongs to (work, family, study, health, leisure, "
    "...); time and location, when and where it most plausibly happens; atmosphere, the "
    "emotional tone of the scene (relaxed, tense, festive, ...). Describe goals in general "
    "terms (no names), so they can be given to other people.",
    "zh": "阅读下面的对话，推断其背后的要素。\n\n<dialogue>\n{dialogue}\n</dialogue>\n\n"
    "请给出：goal1 和 goal2，两位说话人各自想在这次对话中达成的目标（各一句话，说话人1是"
    "{p1}，说话人2是{p2}）；goal_type，目标的类型，取以下之一：{types}；topic，对话的话题；"
    "domain，对话所属的生活领域（工作、家庭、学习、健康、休闲等）；time 和 location，对话最可能"
    "发生的时间和地点；atmosphere，场景的情绪氛围（轻松、紧张、喜庆等）。目标用概括的说法"
    "（不写人名），以便交给其他人物使用。",
}

_PERSONA: dict[Lang, str] = {
    "en": "Here are the fixed attributes of a person:\n{attributes}\n\nInvent the rest of "
    "this person so that it fits the attributes: background (two or three sentences of "
    "life story), hobby, education, occupation, culture (cultural background) and "
    "speaking_style (how they talk). Keep every attribute above unchanged.",
    "zh": "以下是一个人物的固定属性：\n{attributes}\n\n请补全这个人物，使之与属性相符："
    "background（两三句生平）、hobby（爱好）、education（教育）、occupation（职业）、"
    "culture（文化背景）和 speaking_style（说话风格）。上面的属性保持不变。",
}

INSPIRATION: dict[Lang, str] = {
    "en": "\n\nFor ideas, here is a passage from the web. Let it suggest who this person "
    "could be (their work, interests, circumstances), without copying it or contradicting "
    "the attributes above:\n{passage}",
    "zh": "\n\n以下是一段网络文本，供你构思：让它启发这个人可能是谁（工作、兴趣、处境），"
    "但不要照抄，也不要与上面的属性矛盾：\n{passage}",
}
"""Step 2 with `--persona-texts`: the paper prompts persona design with diverse web texts."""
INSPIRATION_SHA256 = hashlib.sha256(json.dumps(INSPIRATION, sort_keys=True).encode()).hexdigest()

_CONFLICT: dict[Lang, str] = {
    "en": "Two people are to have a conversation. Check whether this combination makes "
    "sense.\n\nScene: {scene}\n\nParticipant 1:\n{p1}\nGoal of participant 1: {g1}\n\n"
    "Participant 2:\n{p2}\nGoal of participant 2: {g2}\n\nLook for contradictions in a "
    "person's identity, a goal that does not suit the person who holds it, and a pair "
    "that would not plausibly talk about this. Give reason (one sentence: what you found) "
    "and then reasonable (true or false). If it is reasonable, also give relationship "
    "(how the two are "
    "related), familiarity (0 = strangers ... 10 = very close for many years) and medium "
    "(how they talk: face-to-face, phone call, online chat, ...); if not, give your best "
    "guess for them anyway.",
    "zh": "两个人将进行一次对话。请检查这个组合是否合理。\n\n场景：{scene}\n\n参与者1：\n"
    "{p1}\n参与者1的目标：{g1}\n\n参与者2：\n{p2}\n参与者2的目标：{g2}\n\n检查人物身份是否"
    "自相矛盾、目标是否与其持有者不符、这两个人是否不太可能谈论此事。先给出 reason"
    "（一句话：你的发现），再给出 reasonable（true 或 false）。"
    "如果合理，再给出 relationship（两人的关系）、"
    "familiarity（0 = 陌生人 …… 10 = 多年的亲密关系）和 medium（交流方式：面对面、电话、"
    "网上聊天……）；若不合理，也请尽量给出。",
}

_TURN: dict[Lang, str] = {
    "en": "Write the next utterance of a conversation between these two people.\n\n"
    "{prelude}\n\n<dialogue>\n{so_far}\n</dialogue>\n\nIt is {speaker}'s turn: utterance "
    "{index} (the conversation has {low} to {high} utterances, {p1} speaking first). Give "
    "content: what {speaker} says now, in their own speaking style, pursuing their own "
    "goal; neither knows the other's goal. Sound like a real person, not like an "
    "assistant.",
    "zh": "写出这两个人对话中的下一句话。\n\n{prelude}\n\n<dialogue>\n{so_far}\n"
    "</dialogue>\n\n轮到{speaker}说话：第 {index} 句（整段对话共 {low} 到 {high} 句，{p1}"
    "先说）。给出 content：{speaker}此刻说的话，用自己的说话风格追求自己的目标；双方都不知道"
    "对方的目标。要像真实的人，不要像助手。",
}

_TURN_END: dict[Lang, str] = {
    "en": " Also give end: true if the conversation ends with this utterance, otherwise false.",
    "zh": "另外给出 end：如果对话在这句话后结束则为 true，否则为 false。",
}

_NOTHING_YET: dict[Lang, str] = {"en": "(nothing said yet)", "zh": "（还没有人说话）"}

_ANNOTATE: dict[Lang, str] = {
    "en": "Annotate this conversation.\n\n{prelude}\n\n<dialogue>\n{dialogue}\n</dialogue>"
    "\n\nFor each of the {n} numbered utterances, in order, give: intent (what the speaker "
    "means to achieve with it), sentiment (positive, negative or neutral), emotion (one "
    "word), stance (a list of {{aspect, viewpoint}} pairs: the speaker's view on what is "
    "discussed; may be empty) and strategy ({{description, type}}: how the utterance "
    "moves the speaker toward the goal, and the turn it gives the conversation). Then the "
    "epilogue: goal_completion (0-10, how far both goals were achieved), "
    "completion_reason, workflow (the information flow: the steps the conversation went "
    "through, in order) and summary1 and summary2 (the conversation summarised from each "
    "participant's point of view).",
    "zh": "为这段对话做标注。\n\n{prelude}\n\n<dialogue>\n{dialogue}\n</dialogue>\n\n"
    "对编号的 {n} 句话，按顺序逐句给出：intent（说话人想通过这句话达到什么）、sentiment"
    "（positive、negative 或 neutral）、emotion（一个词）、stance（{{aspect, viewpoint}} "
    "列表：说话人对所谈内容的看法，可以为空）和 strategy（{{description, type}}：这句话如何"
    "推动说话人接近目标，以及它给对话带来的转向）。然后是结尾：goal_completion（0-10，双方"
    "目标的达成程度）、completion_reason、workflow（信息流：对话依次经过的步骤）以及 "
    "summary1 和 summary2（分别从两位参与者的角度总结对话）。",
}

_REVIEW: dict[Lang, str] = {
    "en": "You check the annotation of a conversation for a dataset.\n\n{prelude}\n\n"
    "<dialogue>\n{dialogue}\n</dialogue>\n\nThe annotation:\n{annotation}\n\nReturn the "
    "annotation in the same shape, with every label you find wrong, unreasonable or of "
    "low quality replaced by a better one, and every other label exactly as it was. In "
    "`reasons`, give one {{label, reason}} entry for each label you changed (label as "
    "`utterances[3].emotion` or `epilogue.goal_completion`).",
    "zh": "你负责检查数据集中一段对话的标注。\n\n{prelude}\n\n<dialogue>\n{dialogue}\n"
    "</dialogue>\n\n标注如下：\n{annotation}\n\n请按相同结构返回标注：把你认为错误、不合理或"
    "质量低的标签换成更好的，其余标签保持原样。在 `reasons` 中，为每个改动的标签写一条 "
    "{{label, reason}}（label 写成 `utterances[3].emotion` 或 `epilogue.goal_completion`）。",
}

INSTRUCTIONS: dict[Lang, dict[str, str]] = {
    "en": {
        "goal": "From the whole conversation, give each participant's goal (goal1, goal2), "
        "goal_completion (0-10) and the reason, as JSON.",
        "persona": "From the whole conversation, describe participant1 and participant2 "
        "(name, gender, age, big_five, education, occupation, culture, speaking_style, "
        "hobby), as JSON.",
        "scene": "From the whole conversation, reconstruct the scene (topic, relationship, "
        "familiarity 0-10, talkway, location, time, workflow, summary), as JSON.",
        "utterance": "For the utterance named, give person, content, intent, sentiment, "
        "emotion, stance and strategy, as JSON.",
    },
    "zh": {
        "goal": "根据整段对话，给出每位参与者的目标（goal1、goal2）、goal_completion（0-10）"
        "及理由，以 JSON 回答。",
        "persona": "根据整段对话，描述 participant1 和 participant2（name、gender、age、"
        "big_five、education、occupation、culture、speaking_style、hobby），以 JSON 回答。",
        "scene": "根据整段对话，还原场景（topic、relationship、familiarity 0-10、talkway、"
        "location、time、workflow、summary），以 JSON 回答。",
        "utterance": "对指定的那句话，给出 person、content、intent、sentiment、emotion、"
        "stance 和 strategy，以 JSON 回答。",
    },
}
"""The task each released awareness item's `instruction` asks (our wording)."""

RELEASE_FRAME: dict[Lang, dict[str, str]] = {
    "en": {"dialogue": "Dialogue history:", "utterance": "Utterance to analyze:"},
    "zh": {"dialogue": "对话历史：", "utterance": "需要分析的对话："},
}
"""The headings DEMO's released instructions put before the dialogue and, in an utterance
item, before the utterance to analyse. Left out of `PROMPT_SHA256`, as they shape only the
release files, which every run of a build writes afresh from its stages."""


def release_instruction(lang: Lang, task: str, dialogue: str, utterance: str = "") -> str:
    """A released awareness item's `instruction`, shaped as DEMO's are: the whole dialogue
    under its heading, the utterance to analyse under its own (utterance items), then the
    task. `--protocol paper` sends it as the one user message."""
    frame = RELEASE_FRAME[lang]
    parts = [frame["dialogue"], dialogue]
    if task == "utterance":
        parts += [frame["utterance"], utterance]
    parts.append(INSTRUCTIONS[lang][task])
    return "\n".join(parts)


def _messages(lang: Lang, text: str) -> list[ChatMessage]:
    return [{"role": "system", "content": SYSTEM[lang]}, {"role": "user", "content": text}]


def goal_types_text(lang: Lang) -> str:
    if lang == "zh":
        return "、".join(f"{t}（{GOAL_TYPES_ZH[t]}）" for t in GOAL_TYPES)
    return ", ".join(GOAL_TYPES)


def distill_messages(lang: Lang, dialogue: str, speakers: tuple[str, str]) -> list[ChatMessage]:
    """Step 1: the goals, goal type and scene behind a seed dialogue."""
    text = _DISTILL[lang].format(
        dialogue=dialogue, p1=speakers[0], p2=speakers[1], types=goal_types_text(lang)
    )
    return _messages(lang, text)


def attributes_text(attributes: Mapping[str, Any]) -> str:
    """A persona's attributes, one `key: value` line each (lists joined with commas)."""
    lines = []
    for key, value in attributes.items():
        if isinstance(value, dict):
            value = ", ".join(f"{k} {v}" for k, v in value.items())
        elif isinstance(value, list):
            value = ", ".join(str(v) for v in value)
        lines.append(f"- {key}: {value}")
    return "\n".join(lines)


def persona_messages(
    lang: Lang, attributes: dict[str, Any], passage: str | None = None
) -> list[ChatMessage]:
    """Step 2: expand sampled attributes into a full persona, inspired by `passage` (a web
    text, `--persona-texts`) when given."""
    text = _PERSONA[lang].format(attributes=attributes_text(attributes))
    if passage:
        text += INSPIRATION[lang].format(passage=passage)
    return _messages(lang, text)


def conflict_messages(
    lang: Lang, scene: str, people: tuple[str, str], goals: tuple[str, str]
) -> list[ChatMessage]:
    """Step 3: is this goal-scene-persona combination reasonable?"""
    text = _CONFLICT[lang].format(scene=scene, p1=people[0], p2=people[1], g1=goals[0], g2=goals[1])
    return _messages(lang, text)


def turn_messages(
    lang: Lang,
    prelude: str,
    so_far: str,
    speaker: str,
    *,
    first: str,
    index: int,
    span: tuple[int, int],
    may_end: bool,
) -> list[ChatMessage]:
    """Step 4a: the dialogue's next utterance (`index`, from 1), by `speaker`; `so_far` is
    the dialogue until now; `may_end` asks whether it ends there too."""
    text = _TURN[lang].format(
        prelude=prelude,
        so_far=so_far or _NOTHING_YET[lang],
        speaker=speaker,
        index=index,
        low=span[0],
        high=span[1],
        p1=first,
    )
    return _messages(lang, text + (_TURN_END[lang] if may_end else ""))


def annotate_messages(lang: Lang, prelude: str, dialogue: str, n: int) -> list[ChatMessage]:
    """Step 4b: per-utterance labels and the epilogue."""
    return _messages(lang, _ANNOTATE[lang].format(prelude=prelude, dialogue=dialogue, n=n))


def review_messages(
    lang: Lang, prelude: str, dialogue: str, annotation: dict[str, Any]
) -> list[ChatMessage]:
    """Step 5: a checker's edited copy of the annotation."""
    shown = json.dumps(annotation, ensure_ascii=False, indent=1)
    text = _REVIEW[lang].format(prelude=prelude, dialogue=dialogue, annotation=shown)
    return _messages(lang, text)


def _digest() -> str:
    parts: list[object] = [SYSTEM, _DISTILL, _PERSONA, _CONFLICT, _TURN, _TURN_END]
    parts += [_NOTHING_YET, _ANNOTATE]
    parts += [_REVIEW, INSTRUCTIONS]
    text = json.dumps([parts, GOAL_TYPES], ensure_ascii=False, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


PROMPT_SHA256 = _digest()
"""One digest over every prompt of the pipeline: part of a build's identity."""
