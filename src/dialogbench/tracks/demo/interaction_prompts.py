"""Wording (our own) of DEMO's dialogue agent interaction: the agent's turn prompt and the
judge's rubric and inputs, in English and in Chinese (chosen by `Episode.lang`).

Agent prompt, one call per turn (the whole state is restated each time, as in the paper's
Markov formulation): the scene (time, place, medium, topic, relationship, familiarity on
0-10), the agent's own profile, its own goal only, the partner's name, the partner's
profile only when `knows_partner` (familiarity 4 or more; otherwise "unknown"), a note
that the partner's goal is unknown and must be inferred, the conversation so far with turn
numbers, and what to write:

    a turn          {"person": "<own name>", "content": "<what they say>"}
    the end marker  {"person": "<own name>", "end": true}

An agent ends the conversation with the end marker when its goal is achieved or the
conversation is over; `"person"` is optional there. DEMO's own marker, `*ENDING*` as the
content (or anywhere in a reply, as DEMO's code reads it), ends it too. The agent's own
profile includes what only it knows (`Persona.values`, `Persona.secret`: SOTOPIA's), which
the partner's never does; the judge sees both. An object carrying both `content` and
`"end": true` is a last turn followed by the end. With `constrain_turns` the reply's shape
is also sent as `TURN_SCHEMA` (person, content, end all required).

Judging (temperature 0, in the episode's language) goes through `judging.Judge` with
`JUDGE_RUBRICS[lang]`: the paper's four criteria (appendix F.1), each an integer 0-10,
scored independently. The judge sees the full background (`judge_context`: the scene, both
profiles and both goals, whatever the familiarity) as the context and the transcript
(`transcript`) as the candidate. The reply is
`{"reason": ..., "goal": n, "believability": n, "skillfulness": n, "realism": n}`. The
paper's published output format names the last three keys naturalness, coherence and
smoothness; its criteria (and the authors' code) are believability, skillful and
realistic, which is what we score.

`PROMPT_SHA256` digests every constant here and the judge's framing
(`judging.prompts.FRAMINGS`), so a change of wording starts a run afresh.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from dialogbench.data.demo.model import Episode, Persona, Scene
from dialogbench.judging.prompts import FRAMINGS
from dialogbench.judging.rubric import Dimension, Rubric
from dialogbench.lang import Lang
from dialogbench.models.types import ChatMessage
from dialogbench.tracks.common import prompt_digest

KNOWN_FROM = 4
"""Familiarity (0-10) from which an agent knows its partner's profile (DEMO's rule)."""

END_KEY = "end"
"""The end marker: a reply object with `"end": true` ends the conversation."""

DEMO_END = "*ENDING*"
"""DEMO's own end marker (`{"person": ..., "content": "*ENDING*"}`; DEMO's code ends an
episode on any reply containing it), recognised as well as ours."""

TURN_SCHEMA: dict[str, object] = {
    "type": "object",
    "properties": {
        "person": {"type": "string"},
        "content": {"type": "string"},
        END_KEY: {"type": "boolean"},
    },
    "required": ["person", "content", END_KEY],
    "additionalProperties": False,
}
"""The turn's shape sent as a JSON schema when `InteractionConfig.constrain_turns` is on
(grammar-constrained decoding on local models): `end` false for a turn, true (with any last
words in `content`) for the end marker."""

DIMENSIONS = ("goal", "believability", "skillfulness", "realism")
"""The judge's criteria, in the paper's order (Goa, Bel, Ski, Rea)."""


def knows_partner(scene: Scene) -> bool:
    """Whether an agent is shown its partner's profile: only when the two know each other
    well enough (familiarity >= `KNOWN_FROM`). An unstated familiarity hides it."""
    return scene.familiarity is not None and scene.familiarity >= KNOWN_FROM


@dataclass(frozen=True)
class Wording:
    """Every phrase of the agent prompt and of the judge's inputs in one language."""

    agent_system: str
    colon: str
    scene_head: str
    scene_labels: dict[str, str]
    familiarity_scale: str
    self_head: str
    profile_labels: dict[str, str]
    traits: dict[str, str]
    levels: dict[str, str]
    genders: dict[str, str]
    no_profile: str
    private_labels: dict[str, str]
    goal_head: str
    partner_head: str
    partner_known: str
    partner_unknown: str
    partner_goal: str
    history_head: str
    no_history: str
    turn_line: str
    task_head: str
    task: str
    content_placeholder: str
    correction: str
    judge_participants_head: str
    judge_goals_head: str
    judge_goal_line: str


EN = Wording(
    agent_system=(
        "You are playing one person in a conversation with someone else. Speak only as "
        "that person, one turn at a time, in the way they would speak in this situation. "
        "Pursue your own goal as that person would; you learn what the other person wants "
        "only from what they say. Reply with the JSON object asked for and nothing else."
    ),
    colon=": ",
    scene_head="## The situation",
    scene_labels={
        "time": "Time",
        "location": "Place and surroundings",
        "medium": "Medium",
        "topic": "Topic",
        "relationship": "Relationship between the two",
        "familiarity": "How well the two know each other",
    },
    familiarity_scale=(
        "{value} out of 10 (0: strangers; 2: have heard of each other; 4: have met several "
        "times; 6: know each other's background well; 8: live or work closely together; "
        "10: very close for many years)"
    ),
    self_head="## You are {name}",
    profile_labels={
        "gender": "Gender",
        "age": "Age",
        "big_five": "Personality",
        "education": "Education",
        "occupation": "Occupation",
        "culture": "Cultural background",
        "speaking_style": "Way of speaking",
        "hobby": "Hobbies",
        "background": "Background",
    },
    traits={
        "openness": "openness",
        "conscientiousness": "conscientiousness",
        "extraversion": "extraversion",
        "agreeableness": "agreeableness",
        "neuroticism": "neuroticism",
    },
    levels={"high": "high", "low": "low"},
    genders={"male": "male", "female": "female"},
    no_profile="(no details given)",
    private_labels={
        "values": "What you value",
        "secret": "Your secret (the other person does not know it)",
    },
    goal_head="## Your goal",
    partner_head="## The other person: {name}",
    partner_known="What you know about them:",
    partner_unknown="What you know about them: unknown (you do not know them well).",
    partner_goal=(
        "Their goal: unknown. Work out what they want from what they say, and take it into account."
    ),
    history_head="## The conversation so far",
    no_history="(Nothing has been said yet: you speak first.)",
    turn_line="Turn {turn} - {person}: {content}",
    task_head="## Your turn",
    task=(
        "Write turn {turn}, as {name}. Say only what {name} would say here, in this medium, "
        "without narration or stage directions. Reply with one JSON object only:\n"
        "{say}\n"
        "If you have achieved your goal, or the conversation has come to its end, reply "
        "instead with:\n"
        "{end}"
    ),
    content_placeholder="what you say",
    correction=(
        "Your reply could not be used: {error}. Reply again with one JSON object only, "
        "either\n{say}\nor, to end the conversation,\n{end}"
    ),
    judge_participants_head="## The participants",
    judge_goals_head="## Their goals",
    judge_goal_line="{name}'s goal: {goal}",
)

ZH = Wording(
    agent_system=(
        "你在一场对话中扮演其中一个人。只以这个人的身份说话，一次说一轮，用这个人在此情境下"
        "会用的方式说话。像这个人那样去争取自己的目标；对方想要什么，你只能从对方说的话里"
        "了解。只回复要求的 JSON 对象，不要写任何其他内容。"
    ),
    colon="：",
    scene_head="## 情境",
    scene_labels={
        "time": "时间",
        "location": "地点与周围环境",
        "medium": "交流方式",
        "topic": "话题",
        "relationship": "双方关系",
        "familiarity": "双方熟悉程度",
    },
    familiarity_scale=(
        "{value}（满分 10；0：素不相识；2：听说过对方；4：见过几次面；6：很了解对方的背景；"
        "8：一起生活或密切共事；10：多年的亲密关系）"
    ),
    self_head="## 你是{name}",
    profile_labels={
        "gender": "性别",
        "age": "年龄",
        "big_five": "性格",
        "education": "教育背景",
        "occupation": "职业",
        "culture": "文化背景",
        "speaking_style": "说话风格",
        "hobby": "爱好",
        "background": "背景",
    },
    traits={
        "openness": "开放性",
        "conscientiousness": "尽责性",
        "extraversion": "外向性",
        "agreeableness": "宜人性",
        "neuroticism": "神经质",
    },
    levels={"high": "高", "low": "低"},
    genders={"male": "男", "female": "女"},
    no_profile="（没有更多信息）",
    private_labels={"values": "你看重的东西", "secret": "你的秘密（对方不知道）"},
    goal_head="## 你的目标",
    partner_head="## 对方：{name}",
    partner_known="你对对方的了解：",
    partner_unknown="你对对方的了解：未知（你们还不够熟悉）。",
    partner_goal="对方的目标：未知。请从对方说的话里推断对方想要什么，并在回应时考虑进去。",
    history_head="## 目前的对话",
    no_history="（还没有人说话：由你先开口。）",
    turn_line="第 {turn} 轮 - {person}：{content}",
    task_head="## 轮到你了",
    task=(
        "以{name}的身份写第 {turn} 轮。只写{name}在此情境、以这种交流方式会说的话，不要旁白，"
        "也不要动作描写。只回复一个 JSON 对象：\n"
        "{say}\n"
        "如果你已经达成目标，或者对话已经自然结束，请改为回复：\n"
        "{end}"
    ),
    content_placeholder="你要说的话",
    correction=(
        "你的回复无法使用：{error}。请重新回复，只写一个 JSON 对象，格式为\n{say}\n"
        "或者，如要结束对话：\n{end}"
    ),
    judge_participants_head="## 对话双方",
    judge_goals_head="## 双方的目标",
    judge_goal_line="{name}的目标：{goal}",
)

WORDING: dict[Lang, Wording] = {"en": EN, "zh": ZH}


def _rubric(name: str, lang: Lang, instructions: str, criteria: Sequence[str]) -> Rubric:
    dims = tuple(
        Dimension(name=d, low=0, high=10, criteria=c)
        for d, c in zip(DIMENSIONS, criteria, strict=True)
    )
    return Rubric(
        name=name, instructions=instructions, dimensions=dims, compares_to="context", lang=lang
    )


JUDGE_RUBRICS: dict[Lang, Rubric] = {
    "en": _rubric(
        "demo-interaction",
        "en",
        "The candidate is a conversation between two people, each played by an AI agent. "
        "The context gives the situation it took place in: the scene, both participants' "
        "profiles and both of their goals. Read all of it, then weigh the conversation "
        "against each of the four criteria below separately.",
        (
            "Goal achievement: how far both participants get toward their own goals. Take "
            "each participant's goal from the information below and follow the progress the "
            "conversation makes toward it. 0: neither moves toward their goal at all. 10: "
            "both fully achieve everything they set out to do.",
            "Believability: how well the participants understand and stay true to the "
            "situation, their own profiles and their own goals. Nothing they say, nor the way "
            "they say it, may contradict them: a way of speaking that does not fit the "
            "person, content that clashes with the situation, or a reply that works against "
            "the speaker's own goal all count against it. 0: serious contradictions or "
            "misreadings; the situation, the people and their goals could not be told from "
            "the conversation. 10: fully consistent with everything given; the situation, "
            "the people and their goals could be reconstructed from the conversation alone.",
            "Skillfulness: how well each participant builds every reply on the conversation "
            "so far: understands what has been said, reads the other's intention, feelings "
            "and stance, and chooses a fitting strategy for what to say next. 0: what was "
            "said is ignored or misread; replies are off the point and aimless. 10: every "
            "reply uses the history, reads both sides' intentions and follows a deliberate "
            "strategy.",
            "Realism: how much the conversation reads like two real people talking rather "
            "than a simulated or implausible exchange. Typical signs of AI-written dialogue: "
            "too much politeness or formality, replies that are too long or too detailed, "
            "little real emotion, missing what is only implied, the same phrases or reply "
            "patterns again and again, and a stiff flow with awkward changes of subject. "
            "0: plainly AI-written. 5: natural and artificial passages mixed. 10: entirely "
            "believable as two real people.",
        ),
    ),
    "zh": _rubric(
        "demo-interaction-zh",
        "zh",
        "候选回复是两个人之间的一段对话，对话双方各由一个 AI 智能体扮演。上下文给出了对话"
        "发生的背景：情境、双方的资料和双方各自的目标。请全部读完，再对照下面四项标准，"
        "逐项分别衡量这段对话。",
        (
            "目标达成：双方各自在多大程度上实现了自己的目标。根据下面给出的信息确定每一方的"
            "目标，并跟踪对话朝这些目标推进了多少。0：双方都没有朝自己的目标取得任何进展。"
            "10：双方都完全实现了各自想做的一切。",
            "可信度：双方在多大程度上理解并忠实于情境、各自的资料和各自的目标。说话的内容和"
            "方式都不能与之冲突：说话风格与人物不符、内容与情境矛盾、回复与说话者自己的目标"
            "背道而驰，都要扣分。0：存在严重的矛盾或误解；从对话中看不出情境、人物和目标。"
            "10：与给定信息完全一致；仅凭对话就能还原情境、人物和各自的目标。",
            "技巧性：每一方在多大程度上基于此前的对话来组织每一次回复：理解已经说过的内容，"
            "读懂对方的意图、情绪和立场，并为接下来要说的话选择合适的策略。0：忽视或误解已说"
            "的内容；回复答非所问、漫无目的。10：每次回复都充分利用对话历史，读懂双方的意图，"
            "并有明确的策略。",
            "真实感：这段对话在多大程度上像两个真人在交谈，而不是模拟的或不合情理的对话。AI "
            "生成的对话常见的迹象有：过分客气或正式、回复过长或过于详尽、缺少真实的情感、"
            "听不出言外之意、反复使用同样的措辞或回复套路、衔接生硬、转换话题突兀。0：明显是 "
            "AI 写的。5：自然与不自然的部分混杂。10：完全可信，就像两个真人的对话。",
        ),
    ),
}
"""The judge's rubric per language; the dimension names (`DIMENSIONS`) are the same."""


PROMPT_SHA256 = prompt_digest(
    globals(),
    "KNOWN_FROM END_KEY DEMO_END TURN_SCHEMA",
    wording={lang: asdict(w) for lang, w in WORDING.items()},
    rubrics={lang: repr(r) for lang, r in JUDGE_RUBRICS.items()},
    framing={lang: asdict(FRAMINGS[lang]) for lang in JUDGE_RUBRICS},
)


# -- rendering ------------------------------------------------------------------------------


def _json(value: dict[str, object]) -> str:
    return json.dumps(value, ensure_ascii=False)


def say_example(name: str, w: Wording) -> str:
    """The turn object an agent writes."""
    return _json({"person": name, "content": f"<{w.content_placeholder}>"})


def end_example(name: str) -> str:
    """The end marker as an agent writes it."""
    return _json({"person": name, END_KEY: True})


def scene_lines(scene: Scene, w: Wording) -> list[str]:
    """The scene's stated fields, one line each (unstated ones are left out)."""
    lines = []
    for key in ("time", "location", "medium", "topic", "relationship"):
        value = getattr(scene, key)
        if value:
            lines.append(f"{w.scene_labels[key]}{w.colon}{value}")
    if scene.familiarity is not None:
        scale = w.familiarity_scale.format(value=scene.familiarity)
        lines.append(f"{w.scene_labels['familiarity']}{w.colon}{scale}")
    return lines


def profile_lines(person: Persona, w: Wording, private: bool = False) -> list[str]:
    """A persona's stated fields (not its name), one line each; `private` adds what only
    the person themself knows (values and secret: shown to them and to the judge, never
    to the partner)."""
    lines = []
    for key, label in w.profile_labels.items():
        value = getattr(person, key)
        if key == "gender" and value:
            value = w.genders.get(value, value)
        if key == "big_five" and value:
            value = ", ".join(
                f"{w.traits[t]} {w.levels[level]}" for t, level in sorted(value.items())
            )
        if value:
            lines.append(f"{label}{w.colon}{value}")
    if private:
        for key, label in w.private_labels.items():
            value = getattr(person, key)
            if value:
                lines.append(f"{label}{w.colon}{value}")
    return lines or [w.no_profile]


def history_lines(turns: Sequence[tuple[str, str]], w: Wording) -> list[str]:
    """The conversation so far, `(person, content)` pairs numbered from turn 1."""
    return [
        w.turn_line.format(turn=i, person=person, content=content.strip())
        for i, (person, content) in enumerate(turns, start=1)
    ]


def agent_messages(
    episode: Episode, side: int, turns: Sequence[tuple[str, str]]
) -> list[ChatMessage]:
    """The prompt for participant `side` (0 or 1) to write the next turn after `turns`."""
    w = WORDING[episode.lang]
    me, other = episode.participants[side], episode.participants[1 - side]
    if knows_partner(episode.scene):
        about = [w.partner_known, *profile_lines(other, w)]
    else:
        about = [w.partner_unknown]
    history = history_lines(turns, w) or [w.no_history]
    task = w.task.format(
        turn=len(turns) + 1, name=me.name, say=say_example(me.name, w), end=end_example(me.name)
    )
    blocks = [
        [w.scene_head, *scene_lines(episode.scene, w)],
        [w.self_head.format(name=me.name), *profile_lines(me, w, private=True)],
        [w.goal_head, episode.goals[side].strip()],
        [w.partner_head.format(name=other.name), *about, w.partner_goal],
        [w.history_head, *history],
        [w.task_head, task],
    ]
    return [
        {"role": "system", "content": w.agent_system},
        {"role": "user", "content": "\n\n".join("\n".join(b) for b in blocks)},
    ]


def correction_message(episode: Episode, side: int, error: str) -> ChatMessage:
    """What an agent is told after a turn that could not be used."""
    w = WORDING[episode.lang]
    name = episode.participants[side].name
    text = w.correction.format(error=error, say=say_example(name, w), end=end_example(name))
    return {"role": "user", "content": text}


def judge_context(episode: Episode) -> str:
    """What the judge sees besides the transcript: the scene, both profiles, both goals."""
    w = WORDING[episode.lang]
    people = [w.judge_participants_head]
    for p in episode.participants:
        people += [f"### {p.name}", *profile_lines(p, w, private=True)]
    goals = [w.judge_goals_head] + [
        w.judge_goal_line.format(name=p.name, goal=g.strip())
        for p, g in zip(episode.participants, episode.goals, strict=True)
    ]
    blocks = [[w.scene_head, *scene_lines(episode.scene, w)], people, goals]
    return "\n\n".join("\n".join(b) for b in blocks)


def transcript(episode: Episode, turns: Sequence[tuple[str, str]]) -> str:
    """The conversation as the judge reads it, numbered from turn 1 ("-" when empty)."""
    return "\n".join(history_lines(turns, WORDING[episode.lang])) or "-"
