"""CaSiNo (Chawla et al., 2021): English campsite negotiations between two crowd workers.

Each of `casino_{train,valid,test}.json` is a list of dialogues with `dialogue_id`,
`chat_logs` [{text, task_data, id}], `participant_info` {mturk_agent_1|2: {value2issue,
value2reason, outcomes, demographics, personality}} and `annotations` [[utterance,
"label1,label2"]] (strategy labels, for about 40% of the dialogues).

Mapping to a `DemoDialogue` (lang "en"):

- names: CaSiNo has none, so the first speaker is "Participant 1" and the other
  "Participant 2" (neutral names that say nothing of gender or age); `source` keeps the
  mturk ids.
- transcript: the chat messages; the deal actions (Submit-Deal, Accept-Deal, Reject-Deal,
  Walk-Away) are not utterances and are left out, but they decide the outcome.
- goal: each side's item priorities (High/Medium/Low of Food, Water, Firewood) with the
  reasons they wrote for them.
- goal completion (0-10): with a deal, 10 x (points both scored) / (the most points any
  split of the 9 packages could give the pair, each item going to the side that values it
  more); items are worth 5/4/3 points per package at High/Medium/Low. The epilogue keeps
  the exact ratio; the awareness gold rounds it once to a whole number, halves up
  (`items.whole_score`: 37/39 of the best is 9.487, gold 9; 8.5 is 9). A walk-away scores
  0 (no one gets any package; CaSiNo's consolation of 5 points each is not counted). When
  both sides rank the items alike every complete split scores 10: the pair's total cannot
  be improved, and the reason says who got what. The reason states the deal and points.
- persona: demographics gender (male/female; "other" is left out), age -> AGE_BANDS via
  `labels.age_band` (under 6 is left out and counted) and education; Big Five on CaSiNo's
  1-7 scale split at the midpoint 4: above is high, below is low, exactly 4 is neither
  and is left out. Emotional stability is the reverse of neuroticism (above 4 -> low
  neuroticism).
- utterance: the strategy annotations, matched to the messages by text in order, give
  `strategy_labels` (CaSiNo's tags) and a `strategy` whose description explains them.

CaSiNo's scene (campsite neighbours bargaining over extra supplies in a text chat) is the
same by design for every dialogue and is not labelled per dialogue, so there is no scene
gold.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dialogbench.data.demo.items import awareness_items, persona_options
from dialogbench.data.demo.labels import GENDERS, LEVELS, age_band
from dialogbench.data.demo.model import (
    AGE_BANDS,
    DemoDialogue,
    DemoSet,
    Epilogue,
    Persona,
    Strategy,
    Utterance,
    UtteranceLabels,
)
from dialogbench.data.errors import DataError
from dialogbench.data.io import expect_object, read_json, require_fields, sha256_files

SPLITS = ("train", "valid", "test")
LICENCE = "CC BY 4.0 (github.com/kushalchawla/CaSiNo)"
AGENTS = ("mturk_agent_1", "mturk_agent_2")
NAMES = ("Participant 1", "Participant 2")
DEAL_ACTIONS = ("Submit-Deal", "Accept-Deal", "Reject-Deal", "Walk-Away")
ISSUES = ("Food", "Water", "Firewood")
PRIORITIES = ("High", "Medium", "Low")
POINTS = {"High": 5, "Medium": 4, "Low": 3}
"""Points per package of an item at each priority (CaSiNo's incentive scheme)."""
PACKAGES = 3
"""Packages of each item to split."""
WALK_AWAY_COMPLETION = 0.0

STRATEGIES = {
    "small-talk": "builds rapport by talking about things other than the negotiation",
    "self-need": "argues for an item by stating their own need for it",
    "other-need": "argues for an item by stating someone else's need for it",
    "no-need": "says they do not need an item, so the partner may have it",
    "elicit-pref": "asks about the partner's preferences",
    "promote-coordination": "pushes for coordination and a deal that works for both",
    "vouch-fair": "appeals to fairness",
    "showing-empathy": "shows empathy for the partner's situation",
    "uv-part": "undervalues the partner's need for an item",
    "non-strategic": "uses no negotiation strategy",
}
"""CaSiNo's strategy labels and the description each gives the strategy gold."""

BIG_FIVE = {
    "openness-to-experiences": ("openness", False),
    "conscientiousness": ("conscientiousness", False),
    "extraversion": ("extraversion", False),
    "agreeableness": ("agreeableness", False),
    "emotional-stability": ("neuroticism", True),
}
"""CaSiNo trait -> (DEMO trait, reversed?)."""
MIDPOINT = 4.0
EDUCATION = (
    "some high school, no diploma",
    "high school graduate / ged",
    "trade school",
    "some 2 year college, no degree",
    "some 2 year college, associate's degree",
    "some 4 year college, no degree",
    "some 4 year college, bachelor's degree",
    "master's degree",
    "doctorate degree",
)
"""The education answers found in CaSiNo's splits."""

OPTIONS: dict[str, list[str]] = persona_options(
    gender=GENDERS, age=AGE_BANDS, big_five=LEVELS, education=EDUCATION
)
"""CaSiNo's closed label sets, keyed by dotted gold path."""


def load_casino(folder: Path, splits: Sequence[str] = SPLITS, seed: int = 0) -> DemoSet:
    """CaSiNo's splits in `folder` as dialogues and awareness items (see module docstring)."""
    dialogues: list[DemoDialogue] = []
    notes: Counter[str] = Counter()
    files = []
    for split in splits:
        if split not in SPLITS:
            raise DataError(folder, f"unknown CaSiNo split {split!r}", fix=f"use {list(SPLITS)}")
        path = folder / f"casino_{split}.json"
        files.append(path)
        dialogues += read_split(path, notes)
    warnings = [f"CaSiNo: {n} x {what}" for what, n in sorted(notes.items())]
    return DemoSet(
        name="casino",
        dialogues=dialogues,
        items=awareness_items(dialogues, seed=seed, options=OPTIONS),
        sha256=sha256_files(files, root=folder),
        source=f"CaSiNo {', '.join(splits)} ({folder})",
        warnings=warnings,
        licence=LICENCE,
    )


def read_split(path: Path, notes: Counter[str] | None = None) -> list[DemoDialogue]:
    """One CaSiNo split file -> its dialogues; `notes` counts what was left out."""
    notes = Counter() if notes is None else notes
    data = read_json(path)
    if not isinstance(data, list):
        raise DataError(path, "expected a JSON list of dialogues", fix="use CaSiNo's split files")
    dialogues = []
    for index, raw in enumerate(data):
        obj = expect_object(raw, path, f"dialogue {index}", "each dialogue is a JSON object")
        dialogues.append(_dialogue(path, index, obj, notes))
    return dialogues


def _dialogue(path: Path, index: int, obj: dict[str, Any], notes: Counter[str]) -> DemoDialogue:
    record = f"dialogue {index}"
    require_fields(obj, ("dialogue_id", "chat_logs", "participant_info"), path, record)
    record = f"dialogue {index} (dialogue_id {obj['dialogue_id']})"
    info = obj["participant_info"]
    require_fields(info, AGENTS, path, record, "participant_info.")
    for agent in AGENTS:
        keys = ("value2issue", "value2reason", "outcomes", "demographics", "personality")
        require_fields(info[agent], keys, path, record, f"participant_info.{agent}.")
    logs = [
        expect_object(c, path, record, "chat_logs holds objects", "chat_logs")
        for c in obj["chat_logs"]
    ]
    for c in logs:
        require_fields(c, ("text", "id"), path, record, "chat_logs[].")
        if c["id"] not in AGENTS:
            raise DataError(
                path,
                f"message by unknown participant {c['id']!r}",
                record=record,
                field="chat_logs[].id",
                fix=f"use {list(AGENTS)}",
            )
    first = next((c["id"] for c in logs if c["text"] not in DEAL_ACTIONS), AGENTS[0])
    order = (first, next(a for a in AGENTS if a != first))
    name = dict(zip(order, NAMES, strict=True))
    values = {a: _values(info[a]["value2issue"], path, record, a) for a in AGENTS}

    messages = [c for c in logs if c["text"] not in DEAL_ACTIONS]
    labels = _strategies(obj.get("annotations") or [], messages, path, record, notes)
    utterances = [
        Utterance(
            id=f"{obj['dialogue_id']}-{i}",
            speaker=name[c["id"]],
            text=c["text"],
            labels=labels.get(i),
        )
        for i, c in enumerate(messages)
    ]
    people = tuple(_persona(name[a], info[a], notes) for a in order)
    goals = tuple(_goal(info[a]) for a in order)
    return DemoDialogue(
        id=f"casino-{obj['dialogue_id']}",
        lang="en",
        participants=(people[0], people[1]),
        goals=(goals[0], goals[1]),
        utterances=utterances,
        epilogue=_outcome(logs, info, values, name, order, path, record, notes),
        source=f"CaSiNo {path.name} dialogue_id {obj['dialogue_id']} "
        f"({order[0]} = {NAMES[0]}, {order[1]} = {NAMES[1]})",
    )


def _values(value2issue: Any, path: Path, record: str, agent: str) -> dict[str, int]:
    """Points per package of each item for one side, from its priorities."""
    field = f"participant_info.{agent}.value2issue"
    if not isinstance(value2issue, dict) or sorted(value2issue) != sorted(PRIORITIES):
        raise DataError(
            path,
            "expected High, Medium and Low",
            record=record,
            field=field,
            fix="map each of High, Medium, Low to one of Food, Water, Firewood",
        )
    values = {issue: POINTS[level] for level, issue in value2issue.items()}
    if sorted(values) != sorted(ISSUES):
        raise DataError(
            path,
            f"priorities name {sorted(values)}",
            record=record,
            field=field,
            fix=f"each of {list(ISSUES)} needs exactly one priority",
        )
    return values


def _goal(info: dict[str, Any]) -> str:
    issue, reason = info["value2issue"], info["value2reason"]
    parts = []
    for level, lead in zip(PRIORITIES, ("most", "next", "least"), strict=True):
        why = str(reason.get(level, "")).strip()
        parts.append(f"{issue[level]} matters {lead}" + (f' ("{why}")' if why else ""))
    return (
        "Agree with the other camper on how to split 3 packages each of food, water and "
        "firewood, getting as much as possible of what you need: " + "; ".join(parts) + "."
    )


def _persona(name: str, info: dict[str, Any], notes: Counter[str]) -> Persona:
    demo = info["demographics"] or {}
    gender = demo.get("gender")
    age = demo.get("age")
    band = age_band(age) if isinstance(age, int) and not isinstance(age, bool) else None
    if isinstance(age, int) and band is None:
        notes["participant age under 6 (implausible survey answer), left out"] += 1
    education = str(demo.get("education") or "").strip() or None
    if education is not None and education not in EDUCATION:
        notes[f"education answer {education!r} outside the known set, kept"] += 1
    traits = (info["personality"] or {}).get("big-five") or {}
    big_five = {}
    for key, (trait, reverse) in BIG_FIVE.items():
        score = traits.get(key)
        if not isinstance(score, int | float) or score == MIDPOINT:
            continue
        high = (score > MIDPOINT) != reverse
        big_five[trait] = "high" if high else "low"
    return Persona(
        name=name,
        gender=gender if gender in GENDERS else None,
        age=band,
        education=education,
        big_five=big_five,  # type: ignore[arg-type]
    )


def _strategies(
    annotations: list[Any],
    messages: list[dict[str, Any]],
    path: Path,
    record: str,
    notes: Counter[str],
) -> dict[int, UtteranceLabels]:
    """Strategy labels by message index, matching annotated texts to messages in order."""
    labels: dict[int, UtteranceLabels] = {}
    position = 0
    for pair in annotations:
        if not (isinstance(pair, list) and len(pair) == 2):
            raise DataError(
                path,
                "expected [utterance, labels]",
                record=record,
                field="annotations",
                fix="each annotation is a two-element list",
            )
        text, joined = str(pair[0]).strip(), str(pair[1])
        tags = [t.strip() for t in joined.split(",") if t.strip()]
        unknown = [t for t in tags if t not in STRATEGIES]
        if unknown:
            raise DataError(
                path,
                f"unknown strategy label {unknown[0]!r}",
                record=record,
                field="annotations",
                fix=f"use CaSiNo's labels {sorted(STRATEGIES)}",
            )
        match = next(
            (i for i in range(position, len(messages)) if messages[i]["text"].strip() == text),
            None,
        )
        if match is None:
            notes["strategy annotation matching no message, left out"] += 1
            continue
        position = match + 1
        if not tags:
            notes["annotated message with an empty label, left unlabelled"] += 1
            continue
        labels[match] = UtteranceLabels(
            strategy=Strategy(description="; ".join(f"{t}: {STRATEGIES[t]}" for t in tags)),
            strategy_labels=tags,
        )
    return labels


def _outcome(
    logs: list[dict[str, Any]],
    info: dict[str, Any],
    values: dict[str, dict[str, int]],
    name: dict[str, str],
    order: tuple[str, str],
    path: Path,
    record: str,
    notes: Counter[str],
) -> Epilogue:
    """Goal completion and its reason from the deal actions (module docstring)."""
    actions = [c for c in logs if c["text"] in DEAL_ACTIONS]
    walked = next((c for c in actions if c["text"] == "Walk-Away"), None)
    if walked is not None:
        return Epilogue(
            goal_completion=WALK_AWAY_COMPLETION,
            completion_reason=f"{name[walked['id']]} walked away without a deal, so neither "
            "side got any of the packages they negotiated for.",
        )
    if not actions or actions[-1]["text"] != "Accept-Deal":
        notes["dialogue ending without an accepted deal or a walk-away, no outcome"] += 1
        return Epilogue()
    deal = next((c for c in reversed(actions) if c["text"] == "Submit-Deal"), None)
    if deal is None:
        notes["accepted deal with no submitted deal, no outcome"] += 1
        return Epilogue()
    data = deal.get("task_data") or {}
    proposer = deal["id"]
    other = next(a for a in AGENTS if a != proposer)
    gets = {proposer: data.get("issue2youget"), other: data.get("issue2theyget")}
    if not all(isinstance(g, dict) for g in gets.values()):
        raise DataError(
            path,
            "the submitted deal has no split",
            record=record,
            field="chat_logs[].task_data",
            fix="give issue2youget and issue2theyget",
        )
    points = {a: int(info[a]["outcomes"].get("points_scored", 0)) for a in AGENTS}
    best = sum(PACKAGES * max(values[a][i] for a in AGENTS) for i in ISSUES)
    completion = 10 * sum(points.values()) / best  # exact; the gold rounds it once
    shares = []
    for agent in order:
        split = gets[agent] or {}
        items = ", ".join(f"{int(split.get(i, 0))} {i}" for i in ISSUES)
        shares.append(f"{name[agent]} gets {items} ({points[agent]} points)")
    return Epilogue(
        goal_completion=min(completion, 10.0),
        completion_reason=f"Deal reached: {'; '.join(shares)}; together "
        f"{sum(points.values())} of the {best} points the best split could give them.",
    )
