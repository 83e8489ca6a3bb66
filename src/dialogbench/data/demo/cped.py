"""CPED (Chen et al., 2022): Chinese TV-series dialogues with human labels, as DEMO dialogues.

Reads `valid_split.csv` / `test_split.csv` (columns TV_ID, Dialogue_ID, Utterance_ID,
Speaker, Gender, Age, Neuroticism, Extraversion, Openness, Agreeableness,
Conscientiousness, Scene, ..., Sentiment, Emotion, DA, Utterance). Rows are grouped by
Dialogue_ID, in file order, into a `DemoDialogue` (lang "zh"); participants are ordered by
who speaks first. Only what the labels say is mapped:

- each utterance: Sentiment, Emotion, DA -> `UtteranceLabels(sentiment, emotion,
  dialogue_act)`, with CPED's own English label strings;
- each speaker: Gender -> male/female, Age group -> AGE_BANDS by `AGE_MAP`, the five
  traits high/low -> `big_five`; "unknown" leaves the attribute out. CPED labels a speaker
  once for the whole series (the same values on every row);
- Scene -> `Scene.location` (CPED's English label, e.g. "home"). A dialogue whose rows
  carry two scenes gets no location (there is no single label); those are counted.

DEMO is two-party: dialogues with more than two speakers are left out and counted in the
warnings, as are the utterances and dialogues kept. The speaker `OTHER` ("其他", "other")
is CPED's placeholder for unnamed speakers, not one person: its lines may come from several
people and it has no labels (gender, age and traits all "unknown"). It is never made a
participant, so a dialogue between one named speaker and "其他" (920 of the real splits'
two-speaker dialogues) is not known to be two-party and is left out, counted in the
warnings like the dialogues with more than two speakers.
"""

from __future__ import annotations

import csv
from collections import Counter
from collections.abc import Sequence
from functools import cache
from pathlib import Path

from dialogbench.data.demo.items import awareness_items, persona_options
from dialogbench.data.demo.labels import GENDERS, LEVELS
from dialogbench.data.demo.model import (
    TRAITS,
    DemoDialogue,
    DemoSet,
    Persona,
    Scene,
    Utterance,
    UtteranceLabels,
)
from dialogbench.data.errors import DataError
from dialogbench.data.io import sha256_files

SPLITS = {"valid": "valid_split.csv", "test": "test_split.csv"}
LICENCE = "Apache-2.0 (github.com/scutcyr/CPED)"

COLUMNS = (
    "Dialogue_ID",
    "Utterance_ID",
    "Speaker",
    "Gender",
    "Age",
    *(t.capitalize() for t in TRAITS),
    "Scene",
    "Sentiment",
    "Emotion",
    "DA",
    "Utterance",
)

SENTIMENTS = ("positive", "neutral", "negative")
EMOTIONS = (
    "happy",
    "grateful",
    "relaxed",
    "positive-other",
    "neutral",
    "anger",
    "sadness",
    "fear",
    "depress",
    "disgust",
    "astonished",
    "worried",
    "negative-other",
)
"""CPED's 13 emotion labels as the CSV writes them (its README spells some differently)."""
DIALOGUE_ACTS = (
    "greeting",
    "question",
    "answer",
    "statement-opinion",
    "statement-non-opinion",
    "apology",
    "command",
    "agreement",
    "disagreement",
    "acknowledge",
    "appreciation",
    "interjection",
    "conventional-closing",
    "thanking",
    "quotation",
    "reject",
    "irony",
    "comfort",
    "other",
)
SCENES = (
    "home",
    "office",
    "school",
    "mall",
    "hospital",
    "restaurant",
    "sports-venue",
    "entertainment-venue",
    "car",
    "outdoor",
    "other-venue",
)
AGE_MAP = {
    "children": "childhood",
    "teenager": "adolescence",
    "young": "youth",
    "middle-aged": "middle age",
    "elderly": "old age",
}
"""CPED age group -> DEMO age band, matched by name; CPED gives no year ranges.

CPED has five groups and DEMO seven: "young" (everyone between teenager and middle-aged)
maps to youth, so DEMO's adulthood and advanced age are never gold here, and the options
offered for CPED ages are exactly the five mapped bands."""
UNKNOWN = "unknown"
OTHER = "其他"
"""CPED's speaker name for unnamed other people (possibly several): never a participant."""

OPTIONS: dict[str, list[str]] = {
    "sentiment": list(SENTIMENTS),
    "emotion": list(EMOTIONS),
    "dialogue_act": list(DIALOGUE_ACTS),
    "location": list(SCENES),
    **persona_options(gender=GENDERS, age=tuple(AGE_MAP.values()), big_five=LEVELS),
}
"""CPED's closed label sets, keyed by dotted gold path."""


DEFAULT_SPLITS = ("test", "valid")
"""The splits `load_cped` reads unless told otherwise."""


def load_cped(folder: Path, splits: Sequence[str] = DEFAULT_SPLITS, seed: int = 0) -> DemoSet:
    """CPED's splits in `folder` as dialogues and awareness items (see module docstring)."""
    dialogues: list[DemoDialogue] = []
    warnings: list[str] = []
    files = []
    for split in splits:
        if split not in SPLITS:
            raise DataError(folder, f"unknown CPED split {split!r}", fix=f"use {sorted(SPLITS)}")
        path = folder / SPLITS[split]
        files.append(path)
        found, notes = read_split(path)
        dialogues += found
        warnings += notes
    return DemoSet(
        name="cped",
        dialogues=dialogues,
        items=awareness_items(dialogues, seed=seed, options=OPTIONS),
        sha256=sha256_files(files, root=folder),
        source=f"CPED {', '.join(splits)} ({folder})",
        warnings=warnings,
        licence=LICENCE,
    )


def read_split(path: Path) -> tuple[list[DemoDialogue], list[str]]:
    """One CPED CSV -> its two-party dialogues and a summary of what was kept or left out."""
    groups: dict[str, list[dict[str, str]]] = {}
    try:
        with path.open(encoding="utf-8-sig", newline="") as f:
            reader = csv.DictReader(f)
            missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
            if missing:
                raise DataError(
                    path,
                    f"missing column {missing[0]!r}",
                    record="header line",
                    field=missing[0],
                    fix=f"the CSV needs CPED's columns {list(COLUMNS)}",
                )
            for lineno, row in enumerate(reader, start=2):
                row["_line"] = str(lineno)
                groups.setdefault(row["Dialogue_ID"], []).append(row)
    except FileNotFoundError:
        raise DataError(path, "file not found", fix="check DIALOGBENCH_DATA/cped") from None
    dialogues: list[DemoDialogue] = []
    left_out: Counter[str] = Counter()
    two_scenes = 0
    for dialogue_id, rows in groups.items():
        speakers = list(dict.fromkeys(r["Speaker"] for r in rows))
        if len(speakers) != 2:
            kind = "more than two speakers" if len(speakers) > 2 else "a single speaker"
            left_out[kind] += 1
            left_out[f"{kind} utterances"] += len(rows)
            continue
        if OTHER in speakers:
            left_out[OTHER] += 1
            left_out[f"{OTHER} utterances"] += len(rows)
            continue
        scenes = {r["Scene"] for r in rows}
        if len(scenes) > 1:
            two_scenes += 1
        dialogues.append(_dialogue(path, dialogue_id, rows, speakers, scenes))
    kept_rows = sum(len(d.utterances) for d in dialogues)
    notes = [
        f"{path.name}: kept {len(dialogues)} two-party dialogues ({kept_rows} utterances) "
        f"of {len(groups)}"
    ]
    for kind in ("more than two speakers", "a single speaker"):
        if left_out[kind]:
            notes.append(
                f"{path.name}: left out {left_out[kind]} dialogues with {kind} "
                f"({left_out[kind + ' utterances']} utterances); DEMO dialogues are two-party"
            )
    if left_out[OTHER]:
        notes.append(
            f"{path.name}: left out {left_out[OTHER]} dialogues between one named speaker and "
            f"{OTHER!r} ({left_out[OTHER + ' utterances']} utterances); {OTHER!r} stands for "
            "unnamed other people, not one participant"
        )
    if two_scenes:
        notes.append(
            f"{path.name}: {two_scenes} dialogues change scene midway; they have no location gold"
        )
    return dialogues, notes


def _dialogue(
    path: Path, dialogue_id: str, rows: list[dict[str, str]], speakers: list[str], scenes: set[str]
) -> DemoDialogue:
    first = {name: next(r for r in rows if r["Speaker"] == name) for name in speakers}
    people = [_persona(path, name, first[name]) for name in speakers]
    utterances = [
        Utterance(
            id=r["Utterance_ID"],
            speaker=r["Speaker"],
            text=r["Utterance"],
            labels=_labels(
                _label(path, r, "Sentiment", SENTIMENTS),
                _label(path, r, "Emotion", EMOTIONS),
                _label(path, r, "DA", DIALOGUE_ACTS),
            ),
        )
        for r in rows
    ]
    location = None
    if len(scenes) == 1:
        location = _label(path, rows[0], "Scene", SCENES)
    return DemoDialogue(
        id=dialogue_id,
        lang="zh",
        scene=Scene(location=location),
        participants=(people[0], people[1]),
        utterances=utterances,
        source=f"CPED {path.name} Dialogue_ID {dialogue_id}",
    )


@cache
def _labels(sentiment: str | None, emotion: str | None, act: str | None) -> UtteranceLabels:
    """One shared (frozen) labels object per combination: CPED has few of them."""
    return UtteranceLabels(sentiment=sentiment, emotion=emotion, dialogue_act=act)


def _persona(path: Path, name: str, row: dict[str, str]) -> Persona:
    age = _label(path, row, "Age", tuple(AGE_MAP))
    big_five = {}
    for trait in TRAITS:
        level = _label(path, row, trait.capitalize(), LEVELS)
        if level is not None:
            big_five[trait] = level
    return Persona(
        name=name,
        gender=_label(path, row, "Gender", GENDERS),  # type: ignore[arg-type]
        age=AGE_MAP[age] if age else None,
        big_five=big_five,  # type: ignore[arg-type]
    )


def _label(path: Path, row: dict[str, str], column: str, allowed: tuple[str, ...]) -> str | None:
    """The row's label in `column`: None for "unknown" or blank, an error if not allowed."""
    value = row[column].strip()
    if value in ("", UNKNOWN):
        return None
    if value not in allowed:
        raise DataError(
            path,
            f"unexpected label {value!r}",
            record=f"line {row['_line']} (Utterance_ID {row['Utterance_ID']})",
            field=column,
            fix=f"use one of {[*allowed, UNKNOWN]}",
        )
    return value
