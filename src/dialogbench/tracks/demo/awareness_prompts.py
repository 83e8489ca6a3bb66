"""Wording (our own) of DEMO's element-awareness track, in English and Chinese.

The model under test gets a system message and one user message: the whole dialogue (one
line per utterance, "Name: text"), for utterance mining the utterance to analyse, then the
task and a list of the JSON fields to fill in. Only the fields the item's gold holds are
asked (a CPED persona item asks for gender, age and Big Five, not hobby), and a field with a
closed label set (`AwarenessItem.options`) lists its labels as the allowed answers.

The judge follows the paper's appendix F: two integer scores from 0 to 10 given the gold
answer and the prediction, `accuracy` (semantic agreement with the gold) and `hallucination`
(10: nothing the gold neither states nor implies). `RUBRICS[lang][task]` holds the rubric,
written in `lang`; its framing (system message, output instructions, corrections) is the
shared one of `judging.prompts` in the same language.

`PROMPT_SHA256` digests every constant here and the judge's framing, so a change of wording
starts a run afresh.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Literal

from dialogbench.data.demo.items import PARTICIPANTS
from dialogbench.data.demo.model import AwarenessItem, Task
from dialogbench.judging.prompts import FRAMINGS
from dialogbench.judging.rubric import Dimension, Rubric
from dialogbench.lang import Lang
from dialogbench.models.types import ChatMessage
from dialogbench.tracks.common import prompt_digest

Kind = Literal["text", "score", "label", "lines", "two_lines", "stance", "strategy", "traits"]

GOAL_FIELDS: dict[str, Kind] = {
    "goal1": "text",
    "goal2": "text",
    "goal_completion": "score",
    "reason": "text",
}
PERSON_FIELDS: dict[str, Kind] = {
    "name": "text",
    "gender": "label",
    "age": "label",
    "big_five": "traits",
    "education": "text",
    "occupation": "text",
    "culture": "text",
    "speaking_style": "text",
    "hobby": "text",
}
SCENE_FIELDS: dict[str, Kind] = {
    "topic": "text",
    "relationship": "text",
    "familiarity": "score",
    "talkway": "text",
    "location": "text",
    "time": "text",
    "workflow": "lines",
    "summary": "two_lines",
}
UTTERANCE_FIELDS: dict[str, Kind] = {
    "person": "text",
    "content": "text",
    "intent": "text",
    "sentiment": "label",
    "emotion": "label",
    "dialogue_act": "label",
    "stance": "stance",
    "strategy": "strategy",
}
TASK_FIELDS: dict[Task, dict[str, Kind]] = {
    "goal": GOAL_FIELDS,
    "scene": SCENE_FIELDS,
    "utterance": UTTERANCE_FIELDS,
}
"""The fields each task can ask; persona asks `PERSON_FIELDS` per participant instead."""

SYSTEM: dict[Lang, str] = {
    "en": (
        "You study conversations between two people. Read the whole dialogue, work out what "
        "you are asked from what the two people say and how they say it, and answer with "
        "one JSON object only."
    ),
    "zh": (
        "你的工作是研究两个人之间的对话。请读完整段对话，从双方说了什么、怎么说的来推断所问"
        "的内容，只用一个 JSON 对象作答。"
    ),
}

DIALOGUE_HEAD: dict[Lang, str] = {
    "en": "The dialogue, one utterance per line:",
    "zh": "对话内容（每行一句）：",
}

WHO: dict[Lang, str] = {
    "en": "Participant 1 is {p1}; participant 2 is {p2}.",
    "zh": "参与者 1 是{p1}，参与者 2 是{p2}。",
}
WHO_UNKNOWN: dict[Lang, str] = {
    "en": "Participant 1 is the person who speaks first; participant 2 is the other person.",
    "zh": "参与者 1 是先开口说话的人，参与者 2 是另一个人。",
}

TARGET_HEAD: dict[Lang, str] = {
    "en": "The utterance to analyse (line {n} of the dialogue):",
    "zh": "需要分析的那句话（对话的第 {n} 行）：",
}

TASK_ASK: dict[Task, dict[Lang, str]] = {
    "goal": {
        "en": (
            "The dialogue above is complete. Work out what each participant was trying to "
            "achieve by talking, and how far they got."
        ),
        "zh": "上面是一段完整的对话。请推断每位参与者想通过这次对话达成什么，以及达成了多少。",
    },
    "persona": {
        "en": (
            "The dialogue above is complete. Work out who the two participants are: describe "
            "each of them as far as the dialogue lets you tell."
        ),
        "zh": "上面是一段完整的对话。请推断两位参与者分别是什么样的人，尽对话所能透露的去描述。",
    },
    "scene": {
        "en": (
            "The dialogue above is complete. Work out the setting it takes place in, how the "
            "two participants stand towards each other, and how the exchange unfolds."
        ),
        "zh": "上面是一段完整的对话。请推断对话发生的情境、双方之间的关系，以及交流是如何展开的。",
    },
    "utterance": {
        "en": (
            "Using the whole dialogue as context, analyse what the utterance above conveys: "
            "why it is said, the feeling behind it and what it does in the conversation."
        ),
        "zh": (
            "结合整段对话，分析上面这句话传达了什么：为什么这么说、背后的情感，"
            "以及它在对话中起的作用。"
        ),
    },
}

ANSWER_HEAD: dict[Lang, str] = {
    "en": "Reply with one JSON object holding exactly these keys, and nothing else:",
    "zh": "请只回复一个 JSON 对象，恰好包含以下这些键，不要写其他内容：",
}

LABELS_RULE: dict[Lang, str] = {
    "en": "Where allowed labels are listed, answer with one of them, spelled exactly as shown.",
    "zh": "凡列出了可选标签的字段，请从中选一个作答，写法与所列完全一致。",
}

KIND_HELP: dict[Kind, dict[Lang, str]] = {
    "text": {"en": "text", "zh": "文本"},
    "score": {"en": "an integer from 0 to 10", "zh": "0 到 10 的整数"},
    "label": {"en": "one label", "zh": "一个标签"},
    "lines": {"en": "a list of short texts", "zh": "由简短文本组成的列表"},
    "two_lines": {"en": "a list of exactly two texts", "zh": "恰好两条文本的列表"},
    "stance": {
        "en": 'a list of objects {"aspect": text, "viewpoint": text}',
        "zh": '由 {"aspect": 文本, "viewpoint": 文本} 组成的列表',
    },
    "strategy": {
        "en": 'an object {"description": text, "type": text}',
        "zh": '一个对象 {"description": 文本, "type": 文本}',
    },
    "traits": {"en": "an object", "zh": "一个对象"},
}

ALLOWED: dict[Lang, str] = {"en": "allowed labels: {labels}", "zh": "可选标签：{labels}"}

FIELD_HELP: dict[str, dict[Lang, str]] = {
    "goal1": {
        "en": "what participant 1 wanted to achieve in this conversation",
        "zh": "参与者 1 在这次对话中想达成的目标",
    },
    "goal2": {
        "en": "what participant 2 wanted to achieve in this conversation",
        "zh": "参与者 2 在这次对话中想达成的目标",
    },
    "goal_completion": {
        "en": "how far both participants reached their goals; 0: not at all, 10: both fully",
        "zh": "双方目标的达成程度；0 表示完全没有达成，10 表示双方都完全达成",
    },
    "reason": {
        "en": "why you gave that goal-completion score",
        "zh": "给出这个目标达成分数的理由",
    },
    "name": {"en": "the participant's name", "zh": "参与者的名字"},
    "gender": {"en": "the participant's gender", "zh": "参与者的性别"},
    "age": {"en": "the participant's age group", "zh": "参与者所处的年龄段"},
    "big_five": {
        "en": "the participant's Big Five personality traits, each rated high or low",
        "zh": "参与者的大五人格特质，每项评为高（high）或低（low）",
    },
    "education": {"en": "the participant's education", "zh": "参与者的教育背景"},
    "occupation": {"en": "the participant's occupation", "zh": "参与者的职业"},
    "culture": {"en": "the participant's cultural background", "zh": "参与者的文化背景"},
    "speaking_style": {
        "en": "how the participant speaks: tone, habits, choice of words",
        "zh": "参与者的说话方式：语气、习惯、用词",
    },
    "hobby": {"en": "the participant's hobbies", "zh": "参与者的爱好"},
    "topic": {"en": "what the conversation is about", "zh": "对话的主题"},
    "relationship": {
        "en": "how the two participants are related",
        "zh": "两位参与者之间的关系",
    },
    "familiarity": {
        "en": (
            "how well the participants know each other; 0: strangers, 2: have only heard of "
            "each other, 4: have met a few times, 6: know each other's background, 8: spend "
            "much time together, 10: very close for many years"
        ),
        "zh": (
            "双方的熟悉程度；0：素不相识，2：只听说过对方，4：见过几次面，6：了解彼此的背景，"
            "8：经常相处，10：多年的亲密关系"
        ),
    },
    "talkway": {
        "en": "the medium: face to face, phone call, video call, text messages, email, ...",
        "zh": "交流方式：面对面、打电话、视频通话、文字消息、邮件等",
    },
    "location": {"en": "where the conversation takes place", "zh": "对话发生的地点"},
    "time": {"en": "when the conversation takes place", "zh": "对话发生的时间"},
    "workflow": {
        "en": (
            "the main steps of the exchange in order (who did what first, then next, ...), "
            "summarising the flow rather than repeating each line"
        ),
        "zh": "按顺序列出交流的主要步骤（谁先做了什么，接着又怎样……），概括流程而不是逐句复述",
    },
    "summary": {
        "en": "a short summary of the dialogue from participant 1's side, then participant 2's",
        "zh": "先从参与者 1 的角度、再从参与者 2 的角度，各写一段简短的对话总结",
    },
    "person": {"en": "who says the utterance", "zh": "说这句话的人"},
    "content": {"en": "the utterance itself", "zh": "这句话的原文"},
    "intent": {
        "en": "what the speaker means to achieve with it",
        "zh": "说话人想通过这句话达成什么",
    },
    "sentiment": {"en": "the overall polarity it expresses", "zh": "这句话整体的情感倾向"},
    "emotion": {"en": "the emotion it expresses", "zh": "这句话表达的情绪"},
    "dialogue_act": {
        "en": "the dialogue act it performs (asking, stating, thanking, ...)",
        "zh": "这句话执行的对话行为（提问、陈述、致谢等）",
    },
    "stance": {
        "en": "the positions it takes: each matter it touches on with the view it expresses",
        "zh": "这句话表明的立场：涉及的每个方面及所表达的观点",
    },
    "strategy": {
        "en": (
            "under description, the conversational strategy it uses; under type, the turn it "
            "gives the conversation (steering it, easing or sharpening a conflict, changing "
            "someone's mind, ...)"
        ),
        "zh": (
            "description 写这句话使用的对话策略；type 写它给对话带来的走向（引导话题、缓和或激化"
            "矛盾、改变看法等）"
        ),
    },
}

STRATEGY_WITHOUT_TYPE: dict[Lang, str] = {
    "en": 'an object {"description": text}; the conversational strategy it uses',
    "zh": '一个对象 {"description": 文本}；这句话使用的对话策略',
}
"""`strategy` when the gold has no `type`: only the description is asked."""

TRAIT_NAMES: dict[Lang, str] = {
    "en": "one key per trait: {traits}; each high or low",
    "zh": "每项特质一个键：{traits}；取值为 high 或 low",
}

PARTICIPANT_HEAD: dict[Lang, str] = {
    "en": "an object describing participant {n}, with these keys:",
    "zh": "描述参与者 {n} 的对象，包含以下键：",
}

# -- the judge (appendix F's criteria) ------------------------------------------------------

TASK_NAME: dict[Task, dict[Lang, str]] = {
    "goal": {"en": "goal recognition", "zh": "目标识别"},
    "persona": {"en": "persona modelling", "zh": "人物建模"},
    "scene": {"en": "scene reconstruction", "zh": "场景重建"},
    "utterance": {"en": "utterance mining", "zh": "话语挖掘"},
}

JUDGE_INSTRUCTIONS: dict[Lang, str] = {
    "en": (
        "A system read a complete dialogue and answered a {task} question about it in JSON. "
        "Compare its answer with the gold answer, which is correct by definition. Be strict: "
        "give 10 on a dimension only when the answer meets its criterion in full, and score "
        "each dimension without letting the other sway it."
    ),
    "zh": (
        "一个系统读完一段完整的对话后，用 JSON 回答了一个关于{task}的问题。请把它的回答与标准答案"
        "比较，标准答案一律视为正确。请严格评分：只有完全满足某项标准时才给该项 10 分，各项分别"
        "评分，互不影响。"
    ),
}

ACCURACY_CRITERIA: dict[Lang, str] = {
    "en": (
        "How far the answer means the same as the gold answer, field by field; wording may "
        "differ. 10: every field agrees with the gold; 0: nothing agrees."
    ),
    "zh": (
        "回答在各个字段上与标准答案的意思一致到什么程度，措辞可以不同。"
        "10：每个字段都与标准答案一致；0：没有一处一致。"
    ),
}

HALLUCINATION_CRITERIA: dict[Lang, str] = {
    "en": (
        "Whether the answer adds information the gold answer neither states nor implies, or "
        "that contradicts it. 10: nothing of the kind; 0: the answer is mostly made up."
    ),
    "zh": (
        "回答是否加入了标准答案既没有说明也没有暗示的信息，或与之矛盾的信息。"
        "10：完全没有；0：回答大多是编造的。"
    ),
}


def _rubric(lang: Lang, task: Task) -> Rubric:
    return Rubric(
        name=f"demo-awareness-{task}-{lang}",
        instructions=JUDGE_INSTRUCTIONS[lang].format(task=TASK_NAME[task][lang]),
        dimensions=(
            Dimension("accuracy", 0, 10, ACCURACY_CRITERIA[lang]),
            Dimension("hallucination", 0, 10, HALLUCINATION_CRITERIA[lang]),
        ),
        compares_to="reference",
        lang=lang,
    )


RUBRICS: dict[Lang, dict[Task, Rubric]] = {
    lang: {task: _rubric(lang, task) for task in TASK_NAME} for lang in ("en", "zh")
}
"""The judge's rubric for each language and task: two 0-10 dimensions."""


# -- the judge under --protocol paper (DEMO's own judging set-up) ---------------------------
#
# DEMO judges both languages with one English prompt per element (appendix F): a strict
# judge, the element's name, the two criteria, the 0-10 scale, the gold answer as released
# and the prediction; for persona also the task's instruction (its text before the answer
# template), which names the traits asked. The criteria below are our paraphrase of theirs;
# the reply's shape is our judge's (docs/demo.md says where and why it differs).

PAPER_ELEMENT: dict[Task, str] = {
    "goal": "Goal",
    "persona": "Persona",
    "scene": "Scene",
    "utterance": "Utterance",
}

PAPER_JUDGE_INSTRUCTIONS = (
    "You are a fair and exacting judge. An assistant analysed a dialogue for one of its "
    "elements ({element}); grade its answer against the gold answer, which is a correct "
    "answer to the task by definition, and may be written in another language or shape than "
    "the assistant's. Score each criterion from 0 to 10 on its own, without letting the other "
    "sway it; an answer that meets a criterion fully gets 10 on it."
)

PAPER_ACCURACY = (
    "How far the assistant's answer means the same as the gold answer (semantic agreement, "
    "not wording)."
)

PAPER_HALLUCINATION = (
    "The answer brings in nothing the gold answer neither states nor implies: no invented "
    "or unsupported detail. 10: none at all."
)

PAPER_TASK_HEAD = "The task the assistant was given (its answer template left out):"
"""Persona only: DEMO's judge sees the persona instruction, which names the fields asked."""


def _paper_rubric(task: Task) -> Rubric:
    return Rubric(
        name=f"demo-awareness-{task}-paper",
        instructions=PAPER_JUDGE_INSTRUCTIONS.format(element=PAPER_ELEMENT[task]),
        dimensions=(
            Dimension("accuracy", 0, 10, PAPER_ACCURACY),
            Dimension("hallucination", 0, 10, PAPER_HALLUCINATION),
        ),
        compares_to="reference",
        lang="en",
    )


PAPER_RUBRICS: dict[Task, Rubric] = {task: _paper_rubric(task) for task in PAPER_ELEMENT}
"""The judge's rubric under `--protocol paper`, one per element for both languages."""


def paper_judge_context(item: AwarenessItem) -> str | None:
    """What DEMO's judge reads besides the gold and the answer: for persona, the released
    instruction up to its JSON answer template; nothing for the other elements."""
    if item.task != "persona" or not item.instruction:
        return None
    return f"{PAPER_TASK_HEAD}\n{item.instruction.split(chr(10) + '```json')[0].strip()}"


PROMPT_SHA256 = prompt_digest(
    globals(),
    "SYSTEM DIALOGUE_HEAD TARGET_HEAD TASK_ASK ANSWER_HEAD LABELS_RULE KIND_HELP ALLOWED"
    " FIELD_HELP STRATEGY_WITHOUT_TYPE TRAIT_NAMES PARTICIPANT_HEAD",
    fields=[GOAL_FIELDS, PERSON_FIELDS, SCENE_FIELDS, UTTERANCE_FIELDS],
    WHO=[WHO, WHO_UNKNOWN],
    rubrics={lang: [repr(r) for r in by_task.values()] for lang, by_task in RUBRICS.items()},
    framing={lang: asdict(FRAMINGS[lang]) for lang in RUBRICS},
)

PAPER_PROMPT_SHA256 = prompt_digest(
    globals(),
    "PROMPT_SHA256 PAPER_TASK_HEAD",
    paper_rubrics=[repr(r) for r in PAPER_RUBRICS.values()],
    framing=asdict(FRAMINGS["en"]),
)
"""`PROMPT_SHA256` under `--protocol paper`: its judge's wording as well."""

# -- building the prompt --------------------------------------------------------------------


def _field_line(
    name: str, kind: Kind, lang: Lang, labels: Sequence[str] | None, indent: str
) -> str:
    """One bullet: the key, its type, what it means, and its labels when closed."""
    help_ = FIELD_HELP[name][lang]
    shape = KIND_HELP["label" if labels else kind][lang]
    line = f'{indent}- "{name}" ({shape}): {help_}'
    if labels:
        quoted = ", ".join(json.dumps(label, ensure_ascii=False) for label in labels)
        line += "; " + ALLOWED[lang].format(labels=quoted)
    return line


def _fields_block(
    fields: Mapping[str, Kind],
    gold: Mapping[str, object],
    options: Mapping[str, list[str]],
    lang: Lang,
    prefix: str = "",
    indent: str = "",
) -> list[str]:
    """Bullets for the gold's keys, in the table's order (nested for participants)."""
    lines: list[str] = []
    for name, kind in fields.items():
        if name not in gold:
            continue
        path = f"{prefix}{name}"
        if kind == "traits":
            traits = _mapping(gold[name])
            lines.append(_field_line(name, kind, lang, None, indent))
            lines.append(f"{indent}  " + TRAIT_NAMES[lang].format(traits=", ".join(traits)))
        elif kind == "strategy" and "type" not in _mapping(gold[name]):
            lines.append(f'{indent}- "{name}" ({STRATEGY_WITHOUT_TYPE[lang]})')
        else:
            lines.append(_field_line(name, kind, lang, options.get(path), indent))
    return lines


def _mapping(value: object) -> Mapping[str, object]:
    return value if isinstance(value, Mapping) else {}


def answer_fields(item: AwarenessItem) -> list[str]:
    """The bullet lines that ask for exactly the fields of `item.gold`."""
    lang, gold = item.lang, item.gold
    if item.task != "persona":
        return _fields_block(TASK_FIELDS[item.task], gold, item.options, lang)
    lines: list[str] = []
    for i, key in enumerate(PARTICIPANTS, start=1):
        person = gold.get(key)
        if not isinstance(person, Mapping):
            continue
        lines.append(f'- "{key}": ' + PARTICIPANT_HEAD[lang].format(n=i))
        lines += _fields_block(PERSON_FIELDS, person, item.options, lang, f"{key}.", "  ")
    return lines


def prediction_messages(
    item: AwarenessItem, participants: tuple[str, str] | None = None
) -> list[ChatMessage]:
    """The prompt for one item: dialogue, (target utterance), task, the fields to fill in.

    `participants` names participant 1 and 2 (the goal, persona and scene answers refer to
    them by number); without it the prompt says participant 1 is who speaks first.
    """
    lang = item.lang
    parts = [f"{DIALOGUE_HEAD[lang]}\n<dialogue>\n{item.transcript.strip()}\n</dialogue>"]
    if item.task == "utterance":
        parts.append(f"{TARGET_HEAD[lang].format(n=target_line(item))}\n{target_text(item)}")
    else:
        who = WHO[lang].format(p1=participants[0], p2=participants[1]) if participants else None
        parts.append(who or WHO_UNKNOWN[lang])
    parts.append(TASK_ASK[item.task][lang])
    fields = "\n".join([ANSWER_HEAD[lang], *answer_fields(item)])
    if item.options:
        fields += "\n" + LABELS_RULE[lang]
    parts.append(fields)
    return [
        {"role": "system", "content": SYSTEM[lang]},
        {"role": "user", "content": "\n\n".join(parts)},
    ]


def target_line(item: AwarenessItem) -> int:
    """The 1-based line of the target utterance in the transcript."""
    return (item.target or 0) + 1


def target_text(item: AwarenessItem) -> str:
    """The target utterance as shown: from the gold's speaker and text, else its line."""
    person, content = item.gold.get("person"), item.gold.get("content")
    if isinstance(person, str) and isinstance(content, str):
        return f"{person}: {content}"
    lines = item.transcript.splitlines()
    return lines[item.target] if item.target is not None and item.target < len(lines) else ""
