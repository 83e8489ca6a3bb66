"""DEMO's released benchmark files, read the way the authors' code reads them.

Element awareness (`element_awareness_en.json` / `_zh.json`): one JSON list; each item
has `type` (goal | persona | scene | utterance), `dialogue_hs` (the whole dialogue as
text), `instruction` (the released prompt), `answer` (the gold: a JSON object or a string
holding one, possibly in a ```json fence) and `dataset_id`. Each item becomes an
`AwarenessItem` whose gold is normalised to the shapes in the model module: the paper's
keys are snake_cased (`"goal completion"` -> `goal_completion`, `"big five"` ->
`big_five`), a task wrapper (`{"goal": {...}}`) is unwrapped, `"M"`/`"F"`/`"男"`/`"女"`
become male/female, Big Five pairs `[[trait, High|Low], ...]` become `{trait: high|low}`,
age strings become AGE_BANDS when they name one, sentiment becomes positive/negative/
neutral and "unknown" values are left out. Item ids are `dataset_id:type` (a repeated pair
gets `#2`, `#3`, ...).

Interaction (`dialogue_agent_interaction_en.jsonl` / `_zh.jsonl`): one episode per line
with `uuid`, `topic`, `goal` [g1, g2], `person1`/`person2` {`name`, `background`} and
`combine` {`time`, `location`, `talkway`, `relationship`, `familiarity`}; each becomes an
`Episode`. Familiarity is parsed as the whole number in the field (`parse_familiarity`):
DEMO's own code reads only the first digit, which turns "10" into 1.

The language comes from the file name (`_en` / `_zh`) or the `lang` argument.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any, cast, get_args

from dialogbench.data.demo.items import PARTICIPANTS
from dialogbench.data.demo.labels import (
    GENDERS,
    LEVELS,
    SENTIMENTS,
    as_number,
    is_unknown,
    normalise_age,
    normalise_gender,
    normalise_sentiment,
    parse_big_five,
)
from dialogbench.data.demo.model import (
    AGE_BANDS,
    TASKS,
    TRAITS,
    AwarenessItem,
    DemoSet,
    Episode,
    Lang,
    Persona,
    Scene,
    Task,
)
from dialogbench.data.errors import DataError
from dialogbench.data.io import (
    expect_object,
    read_json,
    read_jsonl,
    require_fields,
    sha256_files,
)

AWARENESS_GLOB = "element_awareness_*.json"
INTERACTION_GLOB = "dialogue_agent_interaction_*.jsonl"
LICENCE = "Apache-2.0 (DEMO release, huggingface.co/datasets/iiiiwis/DEMO)"

ITEM_FIELDS = ("type", "dialogue_hs", "instruction", "answer", "dataset_id")
EPISODE_FIELDS = ("uuid", "topic", "goal", "person1", "person2", "combine")
COMBINE_FIELDS = ("time", "location", "talkway", "relationship", "familiarity")

GOAL_KEYS = ("goal1", "goal2", "goal_completion", "reason")
PERSON_KEYS = (
    "name",
    "gender",
    "age",
    "big_five",
    "education",
    "occupation",
    "culture",
    "speaking_style",
    "hobby",
)
PERSON_TEXTS = tuple(k for k in PERSON_KEYS if k != "big_five")
SCENE_KEYS = (
    "topic",
    "relationship",
    "familiarity",
    "talkway",
    "location",
    "time",
    "workflow",
    "summary",
)
UTTERANCE_KEYS = (
    "person",
    "content",
    "intent",
    "sentiment",
    "emotion",
    "dialogue_act",
    "stance",
    "strategy",
)


def parse_familiarity(
    value: object, *, path: str | Path = "familiarity", record: str | None = None
) -> int:
    """The familiarity level 0-10 written in `value`: `"10"`, `"10 (very close)"`, `"8分"`, 7.

    The whole first number counts (DEMO's code keeps only its first digit). No number, a
    fraction or a value outside 0-10 raises `DataError` naming `path` and `record`.
    """
    fix = "give familiarity as a whole number from 0 (strangers) to 10 (very close)"
    number = as_number(value)
    if number is None:
        raise DataError(
            path, f"no number in {value!r}", record=record, field="familiarity", fix=fix
        )
    if not number.is_integer() or not 0 <= number <= 10:
        raise DataError(
            path,
            f"{value!r} is not a level from 0 to 10",
            record=record,
            field="familiarity",
            fix=fix,
        )
    return int(number)


def lang_of(path: Path, lang: str | None = None) -> Lang:
    """The language of a DEMO file: `lang` if given, else `_en` / `_zh` in its name."""
    if lang is None:
        match = re.search(r"_(en|zh)(?:[._]|$)", path.name)
        lang = match.group(1) if match else None
    if lang not in get_args(Lang):
        raise DataError(
            path,
            "cannot tell the language" if lang is None else f"unknown language {lang!r}",
            fix="name the file with _en or _zh (as DEMO does), or pass lang='en' or 'zh'",
        )
    return cast(Lang, lang)


def load_awareness(path: Path, lang: str | None = None) -> tuple[list[AwarenessItem], list[str]]:
    """Read an element-awareness file: its items and the warnings met normalising gold."""
    language = lang_of(path, lang)
    data = read_json(path)
    if not isinstance(data, list):
        raise DataError(
            path,
            f"expected a JSON list of items, found {type(data).__name__}",
            fix="an element-awareness file holds one JSON list of items",
        )
    items: list[AwarenessItem] = []
    notes: Counter[str] = Counter()
    seen: Counter[str] = Counter()
    for index, raw in enumerate(data):
        record = f"item {index}"
        obj = expect_object(raw, path, record, "each item must be a JSON object")
        require_fields(obj, ITEM_FIELDS, path, record)
        record = f"{record} (dataset_id {obj['dataset_id']!r})"
        if obj["type"] not in TASKS:
            raise DataError(
                path,
                f"unknown task type {obj['type']!r}",
                record=record,
                field="type",
                fix=f"use one of {list(TASKS)}",
            )
        task = cast(Task, obj["type"])
        answer = _answer_object(obj["answer"], path, record)
        gold = normalise_gold(task, answer, path, record, notes)
        if not gold:
            notes["item whose answer holds no gold field, left out"] += 1
            continue
        transcript = _history_text(obj["dialogue_hs"], path, record)
        dataset_id = str(obj["dataset_id"])
        base = f"{dataset_id}:{task}"
        seen[base] += 1
        item_id = base if seen[base] == 1 else f"{base}#{seen[base]}"
        target = None
        if task == "utterance":
            target = _find_target(transcript, gold)
            if target is None:
                notes["utterance item whose target is not found in dialogue_hs"] += 1
        items.append(
            AwarenessItem(
                id=item_id,
                task=task,
                lang=language,
                dialogue_id=dataset_id,
                transcript=transcript,
                target=target,
                gold=gold,
                options=gold_options(gold),
                instruction=str(obj["instruction"]),
                released_answer=released_text(obj["answer"]),
            )
        )
    warnings = [f"{path.name}: {n} x {what}" for what, n in sorted(notes.items())]
    return items, warnings


def load_interaction(path: Path, lang: str | None = None) -> list[Episode]:
    """Read an interaction file (JSON Lines): one `Episode` per line."""
    language = lang_of(path, lang)
    episodes: list[Episode] = []
    for lineno, obj in read_jsonl(path):
        record = f"line {lineno}"
        require_fields(obj, EPISODE_FIELDS, path, record)
        record = f"line {lineno} (uuid {obj['uuid']!r})"
        goal = obj["goal"]
        if not (
            isinstance(goal, list) and len(goal) == 2 and all(isinstance(g, str) for g in goal)
        ):
            raise DataError(
                path, "expected two goal strings", record=record, field="goal", fix="give [g1, g2]"
            )
        people = []
        for key in ("person1", "person2"):
            person = expect_object(obj[key], path, record, "give {name, background}", key)
            require_fields(person, ("name", "background"), path, record, prefix=f"{key}.")
            people.append(Persona(name=str(person["name"]), background=str(person["background"])))
        combine = expect_object(obj["combine"], path, record, "give the scene object", "combine")
        require_fields(combine, COMBINE_FIELDS, path, record, prefix="combine.")
        scene = Scene(
            time=str(combine["time"]),
            location=str(combine["location"]),
            medium=str(combine["talkway"]),
            topic=str(obj["topic"]),
            relationship=str(combine["relationship"]),
            familiarity=parse_familiarity(combine["familiarity"], path=path, record=record),
        )
        if people[0].name == people[1].name:
            raise DataError(
                path,
                "both people have the same name",
                record=record,
                field="person2.name",
                fix="give the two participants different names",
            )
        episodes.append(
            Episode(
                id=str(obj["uuid"]),
                lang=language,
                scene=scene,
                participants=(people[0], people[1]),
                goals=(goal[0], goal[1]),
                source=f"DEMO {path.name} {record}",
            )
        )
    return episodes


def release_files(path: Path) -> list[Path]:
    """The DEMO files at `path`: the file itself, or those a folder holds."""
    if path.is_file():
        return [path]
    files = sorted(path.glob(AWARENESS_GLOB)) + sorted(path.glob(INTERACTION_GLOB))
    if not files:
        raise DataError(
            path,
            "no DEMO files in this folder",
            fix=f"the folder should hold {AWARENESS_GLOB} and/or {INTERACTION_GLOB} "
            "(unzip DEMO's data/DEMO.zip there)",
        )
    return files


def load_release(path: Path, lang: str | None = None) -> DemoSet:
    """Load a DEMO file or a folder of them into one `DemoSet` (items and/or episodes)."""
    if not path.exists():
        raise DataError(path, "no such file or folder", fix="check the path")
    items: list[AwarenessItem] = []
    episodes: list[Episode] = []
    warnings: list[str] = []
    files = release_files(path)
    for file in files:
        if file.suffix == ".jsonl":
            episodes += load_interaction(file, lang)
        elif file.suffix == ".json":
            found, notes = load_awareness(file, lang)
            items += found
            warnings += notes
        else:
            raise DataError(
                file,
                "not a DEMO file",
                fix="give element_awareness_*.json or dialogue_agent_interaction_*.jsonl",
            )
    root = path if path.is_dir() else path.parent
    return DemoSet(
        name=path.stem if path.is_file() else path.name,
        items=items,
        episodes=episodes,
        sha256=sha256_files(files, root=root),
        source=str(path),
        warnings=warnings,
        licence=LICENCE,
    )


def normalise_gold(
    task: Task, answer: dict[str, Any], path: Path, record: str, notes: Counter[str]
) -> dict[str, Any]:
    """A released answer in the paper's shape -> the gold shape for `task` (module doc)."""
    answer = _snake(answer)
    inner = answer.get(task)
    if len(answer) == 1 and isinstance(inner, dict):
        answer = _snake(inner)
    if task == "goal":
        gold = _texts(_pick(answer, GOAL_KEYS, notes, task), ("goal1", "goal2", "reason"))
        if "goal_completion" in gold:
            gold["goal_completion"] = _score(gold["goal_completion"], path, record)
        return gold
    if task == "persona":
        _count_unknown(answer, PARTICIPANTS, notes, task)
        return {
            key: _person(_snake(answer[key]), notes)
            for key in PARTICIPANTS
            if isinstance(answer.get(key), dict)
        }
    if task == "scene":
        return _scene(answer, path, record, notes)
    return _utterance(answer, notes)


def _scene(answer: dict[str, Any], path: Path, record: str, notes: Counter[str]) -> dict[str, Any]:
    texts = ("topic", "relationship", "talkway", "location", "time")
    gold = _texts(_pick(answer, SCENE_KEYS, notes, "scene"), texts)
    if "familiarity" in gold:
        gold["familiarity"] = parse_familiarity(gold["familiarity"], path=path, record=record)
    for key in ("workflow", "summary"):
        if key in gold:
            steps = gold[key] if isinstance(gold[key], list) else [gold[key]]
            gold[key] = [str(step) for step in steps]
    return gold


def _utterance(answer: dict[str, Any], notes: Counter[str]) -> dict[str, Any]:
    gold = _pick(answer, UTTERANCE_KEYS, notes, "utterance")
    gold = _texts(gold, ("person", "content", "intent", "emotion", "dialogue_act"))
    if "sentiment" in gold:
        sentiment = normalise_sentiment(str(gold.pop("sentiment")))
        if sentiment is None:
            notes["unrecognised sentiment, dropped"] += 1
        else:
            gold["sentiment"] = sentiment
    if "stance" in gold:
        stance = gold.pop("stance")
        pairs = [
            {"aspect": str(s.get("aspect", "")), "viewpoint": str(s.get("viewpoint", ""))}
            for s in (stance if isinstance(stance, list) else [stance])
            if isinstance(s, dict)
        ]
        if pairs:
            gold["stance"] = pairs
    if "strategy" in gold:
        strategy = gold["strategy"]
        if isinstance(strategy, dict):
            gold["strategy"] = {
                k: str(strategy[k]) for k in ("description", "type") if k in strategy
            }
        else:
            gold["strategy"] = {"description": str(strategy)}
    return gold


def gold_options(gold: dict[str, Any]) -> dict[str, list[str]]:
    """The closed label sets DEMO's own prompts give, for the categorical fields in `gold`."""
    options: dict[str, list[str]] = {}
    if "sentiment" in gold:
        options["sentiment"] = list(SENTIMENTS)
    for key in PARTICIPANTS:
        person = gold.get(key)
        if not isinstance(person, dict):
            continue
        if "gender" in person:
            options[f"{key}.gender"] = list(GENDERS)
        if person.get("age") in AGE_BANDS:
            options[f"{key}.age"] = list(AGE_BANDS)
        for trait in person.get("big_five", {}):
            options[f"{key}.big_five.{trait}"] = list(LEVELS)
    return options


def _person(raw: dict[str, Any], notes: Counter[str]) -> dict[str, Any]:
    person = _pick(raw, PERSON_KEYS, notes, "persona")
    person = _texts(person, PERSON_TEXTS)
    if "gender" in person:
        gender = normalise_gender(person["gender"])
        if gender is None:
            notes["unrecognised gender, dropped"] += 1
            del person["gender"]
        else:
            person["gender"] = gender
    if "age" in person:
        person["age"] = normalise_age(person["age"]) or person["age"]
    if "big_five" in person:
        traits, bad = parse_big_five(person["big_five"])
        if bad:
            notes["unreadable Big Five entry, dropped"] += len(bad)
        if traits:
            person["big_five"] = {t: traits[t] for t in TRAITS if t in traits}
        else:
            del person["big_five"]
    return person


def _pick(
    answer: dict[str, Any], keys: tuple[str, ...], notes: Counter[str], task: str
) -> dict[str, Any]:
    """The known keys of `answer` whose value says something; counts the unknown keys."""
    _count_unknown(answer, keys, notes, task)
    return {k: answer[k] for k in keys if k in answer and not _empty(answer[k])}


def _count_unknown(
    answer: dict[str, Any], keys: tuple[str, ...], notes: Counter[str], task: str
) -> None:
    for key in sorted(set(answer) - set(keys)):
        notes[f"{task} answer key {key!r} not in the gold shape, dropped"] += 1


def _texts(gold: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """Turn the `keys` present into stripped strings, dropping "unknown" ones."""
    out = dict(gold)
    for key in keys:
        if key in out:
            text = str(out[key]).strip()
            if is_unknown(text):
                del out[key]
            else:
                out[key] = text
    return out


def _empty(value: object) -> bool:
    return is_unknown(value) or value == [] or value == {}


def _snake(obj: dict[str, Any]) -> dict[str, Any]:
    """Keys lower-cased with spaces and hyphens as underscores (`"goal completion"`)."""
    return {re.sub(r"[\s\-]+", "_", str(k).strip().lower()): v for k, v in obj.items()}


def _score(value: object, path: Path, record: str) -> int:
    number = as_number(value)
    if number is None or not 0 <= number <= 10:
        raise DataError(
            path,
            f"goal completion {value!r} is not a number from 0 to 10",
            record=record,
            field="answer.goal_completion",
            fix="give an integer from 0 to 10",
        )
    return round(number)


def released_text(answer: object) -> str:
    """The released gold as the judge reads it: a string as written, an object as its JSON
    text with every character kept (Chinese labels stay Chinese)."""
    return answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False)


def _answer_object(answer: object, path: Path, record: str) -> dict[str, Any]:
    """The answer as an object: as given, or parsed from its JSON text (fence allowed)."""
    if isinstance(answer, str):
        text = answer.strip()
        fenced = re.search(r"```(?:json)?\s*(.*?)```", text, re.DOTALL)
        if fenced:
            text = fenced.group(1).strip()
        try:
            answer = json.loads(text)
        except json.JSONDecodeError as e:
            raise DataError(
                path,
                f"answer is not valid JSON: {e.msg} at column {e.colno}",
                record=record,
                field="answer",
                fix="give the gold answer as a JSON object (or a string holding one)",
            ) from None
    return expect_object(answer, path, record, "give the gold answer as a JSON object", "answer")


def _history_text(history: object, path: Path, record: str) -> str:
    """`dialogue_hs` as text: a string, or a list of lines / {person, content} turns."""
    if isinstance(history, str):
        return history.strip()
    if isinstance(history, list):
        lines = []
        for turn in history:
            if isinstance(turn, dict) and "person" in turn and "content" in turn:
                lines.append(f"{turn['person']}: {turn['content']}")
            else:
                lines.append(str(turn))
        return "\n".join(lines)
    raise DataError(
        path,
        f"expected the dialogue as text, found {type(history).__name__}",
        record=record,
        field="dialogue_hs",
        fix="give dialogue_hs as a string (one 'Name: text' line per utterance)",
    )


def _find_target(transcript: str, gold: dict[str, Any]) -> int | None:
    """The index, among the transcript's utterance lines, of the gold's utterance."""
    content = str(gold.get("content", "")).strip()
    person = str(gold.get("person", "")).strip().lower()
    if not content:
        return None
    lines = [ln.strip() for ln in transcript.splitlines() if ln.strip()]
    lines = [ln for ln in lines if not re.fullmatch(r"Turn #\d+", ln)]
    for index, line in enumerate(lines):
        if content in line and (not person or line.lower().startswith(person)):
            return index
    for index, line in enumerate(lines):
        if content in line:
            return index
    return None
