"""`dialogbench build demo`: DEMO's five-step synthesis pipeline (Wang et al., 2024, sec. 3.2).

    seeds ──► 1 distill ──┐
                          ├─► 3 conflict ──► 4 generate ──► 5 quality ──► DEMO release files
    pool  ──► 2 persona ──┘

1. **distill**: from each seed dialogue (any corpus dialogbench loads: CPED, CaSiNo, a DEMO
   release, the sample or an import), each speaker's goal, the goal's type (one of ten,
   `demo_prompts.GOAL_TYPES`) and the scene (topic, time, location).
2. **persona**: attributes sampled from a pool (name, gender, age band, Big Five, moral
   values, Schwartz values, social skills, decision style; SOTOPIA's agent profiles first,
   for English, when `$DIALOGBENCH_DATA/sotopia` has them), expanded by the model into
   background, hobby, education, occupation, culture and speaking style.
3. **conflict**: each goal pair meets two personas of its language (drawn with a generator
   seeded by the build seed and the goal's key); the model keeps or rejects the combination
   with a reason and adds relationship, familiarity (0-10) and medium to kept ones.
4. **generate**: kept combinations are taken round-robin over goal types (balanced), the
   model writes the dialogue one utterance per call (the speakers alternating; from
   `min_turns` on a reply says whether the dialogue ends; `max_turns` ends it), then
   annotates each utterance (intent, sentiment, emotion, stance, strategy) and the epilogue
   (goal completion, completion reason, information flow as workflow steps, one summary per
   participant).
5. **quality**: two checker models each return an edited copy of the annotation; for each
   label the generator's value and the two checkers' values vote, and a value two of the
   three share wins (no majority: the generator's value stays, counted). `audit.jsonl`
   keeps every edit a checker proposed, whether it was adopted and why it was made.

The build is a `Track` (`DemoBuild`) run by `run_track`, the runner every benchmark
track runs on; `OUT` is its run folder. The five steps are its stages, each unit saved to
`OUT/parts/<step>.jsonl` as soon as it is done under that stage's own identity (what decides
it: its settings and prompts, the writer at `distill`, the checkers at `quality`, and the
stage before), so a killed build resumes with every finished unit, an unchanged rerun sends
nothing, and a changed setting redoes only the stages it changes. Every unit's inputs are
drawn before any call (the seeds, the persona plan, each goal's persona pairs), so the plan
lists every unit of every stage and what it needs (`Plan.needs`); a unit whose inputs did not
come out usable says so (`waiting`, or `skipped` for a combination that is rejected or not
selected) without a call, and the runner does it again whenever an input is done again. A
failed call, or a reply still unusable after `max_fixes` corrections
(`Model.generate_structured`), is a failed call charged to its role: the unit is counted
(`failed`, `unparsed`), kept out of the output and done again by the next run; the exit status,
usage.json (per stage and role), warnings.json and the lock are the runner's. One solve unit
per combination records what became of it (items.jsonl).

The output, in DEMO's release format, loads into `demo-awareness` and `demo-interaction`
(`--dataset OUT`): `element_awareness_{en,zh}.json` (one goal, persona, scene and utterance
item per dialogue, each `instruction` holding the whole dialogue, as DEMO's do, so that
`--protocol paper` shows it) and `dialogue_agent_interaction_{en,zh}.jsonl` (one episode per
dialogue), beside `dialogues.jsonl` (each dialogue with all its elements), `audit.jsonl` and
`build.json` (the settings and every step's counts).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import random
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, create_model

from dialogbench.build import demo_prompts as bp
from dialogbench.build.demo_prompts import GoalType
from dialogbench.data.demo.items import PARTICIPANTS
from dialogbench.data.demo.labels import written
from dialogbench.data.demo.model import (
    AGE_BANDS,
    TRAITS,
    DemoDialogue,
    Epilogue,
    Lang,
    Persona,
    Scene,
    Stance,
    Strategy,
    Utterance,
    UtteranceLabels,
)
from dialogbench.data.errors import DataError
from dialogbench.data.io import json_lines, source_name
from dialogbench.models.model import Model
from dialogbench.models.structured import Structured
from dialogbench.models.types import ChatMessage, GenerateConfig
from dialogbench.runner import Finished, Outcome, Plan, Progress, Role, TrackBase, run_track
from dialogbench.runner.record import DatasetInfo, RunFolder, RunLock, digest, writing
from dialogbench.runner.roles import Given
from dialogbench.runner.track import Corpus, Models, Need, Rows, Stage

VERSION = 4
"""Bumped when a step's logic changes what it produces (part of every stage's identity)."""
REPORT = "build.json"

NonBlank = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=400)]
"""A text (a goal, a reason, an utterance): not blank, at most 400 characters."""
Label = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=80)]
"""A short label (an emotion, a strategy type, a location): not blank, at most 80 characters.

The limits bound the grammar a local model decodes with, so a small model has to close a
string instead of running on inside it until its token budget is spent."""

BUDGETS = {
    "distill": 400,
    "persona": 500,
    "conflict": 300,
    "turn": 200,
    "annotate": 400,
    "annotate_per_utterance": 160,
    "review": 600,
    "review_per_utterance": 180,
}
"""Each step's reply budget in tokens for an English reply (per utterance where the reply
grows with the dialogue); `--max-tokens` caps them all."""
BUDGET_FACTOR: dict[Lang, int] = {"en": 1, "zh": 2}
"""A Chinese reply gets twice the budget: a byte-level tokenizer trained mostly on English
spends far more tokens on a Chinese character (SmolLM2's: about 1.7, against about 0.2 per
English character), so the same reply in Chinese runs out of an English budget."""


# -- settings and seeds ---------------------------------------------------------------------


@dataclass(frozen=True)
class BuildConfig:
    """What a build makes. Each stage's identity covers the fields that stage reads (and
    the stage before it); a changed field redoes only the stages from the first that reads
    it (`Builder.plan`)."""

    seed_dataset: str
    limit: int | None = 20
    """At most this many seed dialogues (in the corpus's order)."""
    personas: int | None = None
    """Personas to design (None: two per seed dialogue of each language)."""
    pairs_per_goal: int = 1
    """Persona pairs each distilled goal is combined with."""
    dialogues: int | None = None
    """Dialogues to generate, balanced over goal types (None: every kept combination)."""
    min_turns: int = 6
    max_turns: int = 12
    seed_lines: int = 24
    """At most this many lines of a seed dialogue are shown to the model."""
    temperature: float = 0.7
    """Sampling temperature of steps 2 and 4 (steps 1, 3 and 5 run at 0)."""
    max_tokens: int = 2048
    max_fixes: int = 2
    seed: int = 0
    sotopia_pool: bool = True
    """Use SOTOPIA's agent profiles as the first English personas when they are on disk."""
    persona_texts: str | None = None
    """A file of web passages (one per line, or JSONL with a `text` field): each designed
    persona is shown one, drawn by the seed, as the paper prompts with web texts."""

    def __post_init__(self) -> None:
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"--limit: {self.limit} is below the minimum 1")
        if self.pairs_per_goal < 1:
            raise ValueError(f"--pairs-per-goal: {self.pairs_per_goal} is below the minimum 1")
        if not 2 <= self.min_turns <= self.max_turns:
            raise ValueError(
                f"--min-turns {self.min_turns} / --max-turns {self.max_turns}: need 2 <= min <= max"
            )


@dataclass(frozen=True)
class Seed:
    """One seed dialogue: where it came from, its language and its lines."""

    id: str
    lang: Lang
    speakers: tuple[str, str]
    lines: tuple[tuple[str, str], ...]

    def text(self, limit: int) -> str:
        return "\n".join(f"{who}: {what[:300]}" for who, what in self.lines[:limit])


@dataclass(frozen=True)
class SeedSet:
    name: str
    source: str
    sha256: str
    seeds: list[Seed]


_CJK = re.compile(r"[\u4e00-\u9fff]")


def guess_lang(text: str) -> Lang:
    """zh when at least a fifth of the letters are CJK ideographs, else en."""
    letters = [c for c in text if c.isalpha()]
    cjk = sum(1 for c in letters if _CJK.match(c))
    return "zh" if letters and cjk / len(letters) >= 0.2 else "en"


_SPEAKER_SEP = re.compile("[:\uff1a]")


def _split_speaker(line: str) -> tuple[str, str, str]:
    """`line` split as `partition` does at the first ASCII ":" or full-width "：" (DEMO's
    Chinese `dialogue_hs` writes "名字：话"); ("line", "", "") when it has neither."""
    m = _SPEAKER_SEP.search(line)
    if m is None:
        return line, "", ""
    return line[: m.start()], m.group(), line[m.end() :]


def _seed_from_lines(sid: str, lines: list[tuple[str, str]], lang: Lang | None) -> Seed | None:
    counts = Counter(who for who, _ in lines)
    if len(counts) < 2:
        return None
    top = [who for who, _ in counts.most_common(2)]
    first = next(who for who, _ in lines if who in top)
    speakers = (first, top[1] if top[0] == first else top[0])
    kept = tuple((w, t) for w, t in lines if w in speakers and t.strip())
    language = lang or guess_lang(" ".join(t for _, t in kept))
    return Seed(sid, language, speakers, kept)


def load_seeds(name: str, limit: int | None) -> SeedSet:
    """The seed dialogues of `name`: a DEMO corpus (`cped`, `casino[:split]`, DEMO's files)
    or any dataset `load_dataset` reads (`sample`, a release folder, an import)."""
    from dialogbench.data.demo.registry import DEMO_DATASETS, load_demo
    from dialogbench.data.registry import load_dataset

    seeds: list[Seed] = []
    base = name.partition(":")[0]
    path = Path(name)
    demo_files = path.exists() and (
        any(path.glob("element_awareness_*.json")) or path.name.startswith("element_awareness_")
    )
    if base in DEMO_DATASETS or demo_files:
        demo = load_demo(name)
        for d in demo.dialogues:
            got = _seed_from_lines(d.id, [(u.speaker, u.text) for u in d.utterances], d.lang)
            if got is not None:
                seeds.append(got)
        if not demo.dialogues:
            seen: set[str] = set()
            for item in demo.items:
                if item.dialogue_id in seen:
                    continue
                seen.add(item.dialogue_id)
                pairs = [
                    (a.strip(), b.strip())
                    for a, sep, b in map(_split_speaker, item.transcript.splitlines())
                    if sep and a.strip()
                ]
                got = _seed_from_lines(item.dialogue_id, pairs, item.lang)
                if got is not None:
                    seeds.append(got)
        source, sha = demo.source, demo.sha256
    else:
        data = load_dataset(name)
        for subject in data.subjects:
            sessions: dict[str, list[tuple[str, str]]] = {}
            for m in subject.messages:
                sessions.setdefault(m.session or "all", []).append((m.speaker, m.text))
            for session, lines in sessions.items():
                for start in range(0, len(lines), 24):
                    sid = f"{subject.id}:{session}:{start}"
                    got = _seed_from_lines(sid, lines[start : start + 24], None)
                    if got is not None:
                        seeds.append(got)
        source, sha = data.source, data.sha256
    if not seeds:
        raise DataError(
            name,
            "no two-person dialogue to seed the build with",
            fix="give a corpus with dialogues (cped, casino, sample, an imported chat)",
        )
    return SeedSet(name, source, sha, seeds[:limit] if limit else seeds)


# -- the attribute pool ---------------------------------------------------------------------

NAMES: dict[Lang, dict[str, tuple[str, ...]]] = {
    "en": {
        "male": ("James", "Omar", "Lucas", "Daniel", "Ravi", "Mateo", "Samuel", "Ethan"),
        "female": ("Emma", "Aisha", "Sofia", "Grace", "Mei", "Hannah", "Olivia", "Nora"),
        "family": ("Carter", "Nguyen", "Patel", "Garcia", "Brooks", "Kim", "Walsh", "Okafor"),
    },
    "zh": {
        "male": ("伟", "强", "磊", "军", "洋", "勇", "杰", "涛"),
        "female": ("芳", "娜", "敏", "静", "丽", "艳", "婷", "雪"),
        "family": ("王", "李", "张", "刘", "陈", "杨", "赵", "黄"),
    },
}
MORAL_VALUES = ("care", "fairness", "loyalty", "authority", "sanctity", "liberty")
"""Moral foundations (Graham et al., 2011)."""
SCHWARTZ_VALUES = (
    "self-direction",
    "stimulation",
    "hedonism",
    "achievement",
    "power",
    "security",
    "conformity",
    "tradition",
    "benevolence",
    "universalism",
)
"""Basic personal values (Schwartz, 1992)."""
SOCIAL_SKILLS = (
    "active listening",
    "empathy",
    "assertiveness",
    "persuasion",
    "conflict management",
    "humour",
    "cooperation",
    "small talk",
)
DECISION_STYLES = ("rational", "intuitive", "dependent", "avoidant", "spontaneous")
"""Decision-making styles (Scott and Bruce, 1995)."""
ADULT_BANDS = AGE_BANDS[2:]
SOTOPIA_PROFILES = "sotopia/agent_profiles.jsonl"


def sample_attributes(rng: random.Random, lang: Lang) -> dict[str, Any]:
    """One persona's attributes, drawn from the pool."""
    gender = rng.choice(("male", "female"))
    names = NAMES[lang]
    given, family = rng.choice(names[gender]), rng.choice(names["family"])
    name = f"{family}{given}" if lang == "zh" else f"{given} {family}"
    return {
        "name": name,
        "gender": gender,
        "age": rng.choice(ADULT_BANDS),
        "big_five": {t: rng.choice(("high", "low")) for t in TRAITS},
        "moral_values": rng.sample(MORAL_VALUES, 2),
        "schwartz_values": rng.sample(SCHWARTZ_VALUES, 3),
        "social_skills": rng.sample(SOCIAL_SKILLS, 2),
        "decision_style": rng.choice(DECISION_STYLES),
    }


def sotopia_attributes() -> list[dict[str, Any]]:
    """SOTOPIA's agent profiles as persona attributes, when `$DIALOGBENCH_DATA` has them."""
    from dialogbench.data.demo.labels import age_band, parse_big_five
    from dialogbench.data.io import read_jsonl
    from dialogbench.data.registry import data_roots

    for root in data_roots():
        path = root / SOTOPIA_PROFILES
        if not path.exists():
            continue
        out = []
        for _, raw in read_jsonl(path):
            gender = {"man": "male", "woman": "female"}.get(str(raw.get("gender", "")).lower())
            pairs = [p.split(" - ") for p in str(raw.get("big_five", "")).split(";")]
            traits, _ = parse_big_five([[p[0].strip(), p[-1].strip()] for p in pairs if p])
            age = raw.get("age")
            attrs: dict[str, Any] = {
                "name": f"{raw.get('first_name', '')} {raw.get('last_name', '')}".strip(),
                "gender": gender,
                "age": age_band(int(age)) if isinstance(age, int) else None,
                "big_five": {t: traits[t] for t in TRAITS if t in traits},
                "moral_values": [v.strip().lower() for v in raw.get("moral_values", [])],
                "schwartz_values": [
                    v.strip().lower() for v in raw.get("schwartz_personal_values", [])
                ],
                "decision_style": str(raw.get("decision_making_style", "")).strip() or None,
                "occupation": str(raw.get("occupation", "")).strip() or None,
            }
            out.append({k: v for k, v in attrs.items() if v not in (None, "", [], {})})
        return [a for a in out if a.get("name")]
    return []


# -- reply schemas --------------------------------------------------------------------------


class _Reply(BaseModel):
    model_config = ConfigDict(extra="ignore")


class Distilled(_Reply):
    goal1: NonBlank
    goal2: NonBlank
    goal_type: GoalType
    topic: Label
    domain: Label
    """The area of life the conversation belongs to (work, family, study, health, ...)."""
    time: Label
    location: Label
    atmosphere: Label
    """The scene's emotional tone (relaxed, tense, festive, ...)."""


class PersonaDetails(_Reply):
    background: NonBlank
    hobby: Label
    education: Label
    occupation: Label
    culture: Label
    speaking_style: NonBlank


class Assessment(_Reply):
    reason: NonBlank
    """Asked before the verdict, so the verdict follows from it."""
    reasonable: bool
    relationship: Label
    familiarity: int = Field(ge=0, le=10)
    medium: Label


class StanceNote(_Reply):
    aspect: Label
    viewpoint: NonBlank


class StrategyNote(_Reply):
    description: NonBlank
    type: Label


class UtteranceNote(_Reply):
    intent: NonBlank
    sentiment: Literal["positive", "negative", "neutral"]
    emotion: Label
    stance: list[StanceNote] = Field(default_factory=list, max_length=3)
    strategy: StrategyNote


class EpilogueNote(_Reply):
    goal_completion: int = Field(ge=0, le=10)
    completion_reason: NonBlank
    workflow: list[NonBlank] = Field(min_length=1, max_length=8)
    summary1: NonBlank
    summary2: NonBlank


class Reason(_Reply):
    label: Label
    reason: NonBlank


class Turn(_Reply):
    """One utterance of the dialogue, written in its own call (the speaker is fixed)."""

    content: NonBlank


class LastTurn(Turn):
    """An utterance once the dialogue is long enough to end: `end` says whether it does."""

    end: bool


@functools.cache
def annotation_schema(n: int, review: bool = False) -> type[BaseModel]:
    """Labels for exactly `n` utterances and the epilogue (and `reasons`, for a review)."""
    fields: dict[str, Any] = {
        "utterances": (list[UtteranceNote], Field(min_length=n, max_length=n)),
        "epilogue": (EpilogueNote, ...),
    }
    if review:
        fields["reasons"] = (list[Reason], Field(default_factory=list, max_length=2 * n + 5))
    return create_model("Review" if review else "Annotation", __base__=_Reply, **fields)


def _schemas_digest() -> str:
    shapes = [
        m.model_json_schema()
        for m in (Distilled, PersonaDetails, Assessment, Turn, LastTurn, UtteranceNote)
    ]
    shapes += [EpilogueNote.model_json_schema(), Reason.model_json_schema()]
    return hashlib.sha256(json.dumps(shapes, sort_keys=True).encode()).hexdigest()


SCHEMAS_SHA256 = _schemas_digest()
"""One digest over the reply schemas (field order and limits change replies too)."""


# -- the track: five stages on the runner ----------------------------------------------------

STAGES = (
    Stage("distill", "model", "each seed dialogue's goals, goal type and scene"),
    Stage("persona", "model", "each planned persona's details, from its drawn attributes"),
    Stage("conflict", "model", "each goal with a persona pair: kept (with its scene) or not"),
    Stage("generate", "model", "each selected combination's dialogue, turn by turn, annotated"),
    Stage("quality", "checker1", "two checkers' reviews of each annotation (checker1, checker2)"),
)
"""The builder's steps, each a runner stage saved to `parts/<name>.jsonl`."""
STEPS = tuple(s.name for s in STAGES)
OUTPUT_FILES = tuple(
    f"{stem}_{lang}.{ext}"
    for lang in ("en", "zh")
    for stem, ext in (("element_awareness", "json"), ("dialogue_agent_interaction", "jsonl"))
)
"""The release files a build may write (one pair per language with dialogues)."""


def read_passages(path: Path) -> list[str]:
    """The web passages of `--persona-texts`: one per non-blank line of a text file, or the
    `text` of each line of a .jsonl file; `DataError` naming the line when one is unusable."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise DataError(
            path, f"cannot read it: {e}", fix="give a UTF-8 text or JSONL file"
        ) from None
    if path.suffix == ".jsonl":
        raw: list[str] = []
        for number, obj in json_lines(path, text, "one JSON object a line"):
            passage = obj.get("text") if isinstance(obj, dict) else None
            if not isinstance(passage, str) or not passage.strip():
                raise DataError(
                    path,
                    "no text",
                    record=f"line {number}",
                    field="text",
                    fix='give each line a non-empty "text" string',
                )
            raw.append(passage)
    else:
        raw = [line for line in text.splitlines() if line.strip()]
    if not raw:
        raise DataError(path, "holds no passage", fix="one web passage per line")
    return [" ".join(p.split())[:2000] for p in raw]


def _scene_text(goal: Mapping[str, Any]) -> str:
    """A distilled scene in one line: topic, domain, time, location, atmosphere (domain and
    atmosphere only where the build distilled them)."""
    keys = ("topic", "domain", "time", "location", "atmosphere")
    return "; ".join(f"{k} {goal[k]}" for k in keys if goal.get(k))


def conflict_prompt(
    lang: Lang, goal: Mapping[str, Any], people: tuple[Mapping[str, Any], Mapping[str, Any]]
) -> list[ChatMessage]:
    """Step 3's question on one combination: its scene, the two personas, the two goals."""
    return bp.conflict_messages(
        lang,
        _scene_text(goal),
        (bp.attributes_text(people[0]), bp.attributes_text(people[1])),
        (goal["goal1"], goal["goal2"]),
    )


def _entry(key: str, got: Structured[Any], value: Any = None, **extra: Any) -> dict[str, Any]:
    """A unit's row from a structured reply: ok (with `value`), failed or unparsed."""
    retry = {"retry": got.retry} if got.retry else {}
    if got.value is not None:
        ok = {"key": key, "status": "ok", "value": value, "attempts": got.attempts}
        return {**ok, **retry, **extra}
    status = "failed" if got.call_failed else "unparsed"
    return {"key": key, "status": status, "error": got.error, "raw": got.raw, **retry, **extra}


Done = Mapping[str, Mapping[str, Rows]]
"""Stage -> unit key -> rows of the finished units (`Plan.done`)."""


def entries(done: Done, stage: str) -> dict[str, dict[str, Any]]:
    """A stage's finished units by key: each unit's one row."""
    return {k: rows[0] for k, rows in done.get(stage, {}).items() if rows}


def ok(done: Done, stage: str) -> dict[str, dict[str, Any]]:
    return {k: e for k, e in entries(done, stage).items() if e["status"] == "ok"}


def counts(
    found: Mapping[str, dict[str, Any]], keys: Iterable[str], waiting: int = 0
) -> dict[str, int]:
    """A step's counts over `keys`: units, waiting, ok, rejected, failed, unparsed, not run."""
    keys = list(keys)
    status = Counter(found[k]["status"] if k in found else "todo" for k in keys)
    out = {"units": len(keys) + waiting, "waiting": waiting}
    for name in ("ok", "rejected", "failed", "unparsed"):
        out[name] = status.get(name, 0)
    out["not_run"] = status.get("todo", 0)
    return out


def call_config(
    config: BuildConfig, step: str, lang: Lang, temperature: float = 0.0, utterances: int = 0
) -> GenerateConfig:
    """A call's settings: `step`'s token budget in `lang` (`BUDGETS`, `BUDGET_FACTOR`),
    capped by `max_tokens`."""
    budget = BUDGETS[step] + utterances * BUDGETS.get(f"{step}_per_utterance", 0)
    budget *= BUDGET_FACTOR[lang]
    return GenerateConfig(
        temperature=temperature, max_tokens=min(budget, config.max_tokens), seed=config.seed
    )


@dataclass
class Builder:
    """What every unit of a build reads, all drawn before any call: the settings, the
    seeds, the persona plan and the goal-persona combinations. What the units produced
    comes in as `done` (`Plan.done`)."""

    config: BuildConfig
    seeds: SeedSet
    from_sotopia: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.personas = self._persona_plan()
        self.inspirations = self._inspirations()
        self.combos = self._combinations()

    def _inspirations(self) -> dict[str, str]:
        """Persona key -> the web passage its design is shown (none without `persona_texts`;
        SOTOPIA's profiles are complete already and get none)."""
        if self.config.persona_texts is None:
            return {}
        passages = read_passages(Path(self.config.persona_texts))
        return {
            key: passages[random.Random(f"{self.config.seed}:texts:{key}").randrange(len(passages))]
            for key in self.personas
            if key not in self.from_sotopia
        }

    def _persona_plan(self) -> dict[str, tuple[Lang, dict[str, Any]]]:
        """Persona key -> (language, sampled attributes); fixed by the seed and settings."""
        c = self.config
        by_lang = Counter(s.lang for s in self.seeds.seeds)
        total = sum(by_lang.values())
        wanted = {
            lang: max(2, round(c.personas * n / total)) if c.personas else max(2, 2 * n)
            for lang, n in sorted(by_lang.items())
        }
        pool = sotopia_attributes() if c.sotopia_pool else []
        random.Random(f"{c.seed}:sotopia").shuffle(pool)
        plan: dict[str, tuple[Lang, dict[str, Any]]] = {}
        for lang, n in wanted.items():
            rng = random.Random(f"{c.seed}:personas:{lang}")
            names: set[str] = set()
            for i in range(n):
                seeded = lang == "en" and bool(pool)
                attrs = pool.pop(0) if seeded else sample_attributes(rng, lang)
                if seeded:
                    self.from_sotopia.add(f"{lang}-p{i + 1:04d}")
                while attrs["name"] in names:
                    attrs = sample_attributes(rng, lang)
                names.add(attrs["name"])
                plan[f"{lang}-p{i + 1:04d}"] = (lang, attrs)
        return plan

    def _combinations(self) -> dict[str, dict[str, Any]]:
        """Combination key -> its goal (a seed id), its two persona keys and its language:
        each goal's `pairs_per_goal` pairs, drawn from the personas of its language."""
        c = self.config
        combos: dict[str, dict[str, Any]] = {}
        for seed in self.seeds.seeds:
            keys = sorted(k for k, (lang, _) in self.personas.items() if lang == seed.lang)
            for k in range(c.pairs_per_goal):
                rng = random.Random(f"{c.seed}:pair:{seed.id}:{k}")
                a, b = rng.sample(keys, 2)
                combos[f"{seed.id}#{k}"] = {"goal": seed.id, "personas": [a, b], "lang": seed.lang}
        return combos

    def ready(self, done: Done) -> tuple[dict[str, dict[str, Any]], int]:
        """The combinations whose goal and personas are done, and how many wait on one."""
        goals, personas = ok(done, "distill"), ok(done, "persona")
        combos = {
            k: v
            for k, v in self.combos.items()
            if v["goal"] in goals and all(p in personas for p in v["personas"])
        }
        return combos, len(self.combos) - len(combos)

    def selection(self, done: Done) -> list[str]:
        """Kept combinations, round-robin over goal types (each type in key order), up to
        `dialogues`."""
        goals = ok(done, "distill")
        by_type: dict[str, list[str]] = {}
        for key, e in sorted(ok(done, "conflict").items()):
            by_type.setdefault(goals[e["value"]["goal"]]["value"]["goal_type"], []).append(key)
        order: list[str] = []
        queues = [by_type[t] for t in bp.GOAL_TYPES if t in by_type]
        while any(queues):
            for q in queues:
                if q:
                    order.append(q.pop(0))
        limit = self.config.dialogues
        return order[:limit] if limit is not None else order

    def selected(self, done: Done, key: str) -> bool:
        """Whether combination `key` is in the selection (with `dialogues` unset: whether
        it was kept, which needs only its own conflict unit)."""
        if self.config.dialogues is None:
            return key in ok(done, "conflict")
        return key in self.selection(done)

    def plan(self) -> Plan[str]:
        """The stages' units and what each needs; a solve unit per combination assembles
        its dialogue. With `dialogues` set, the selection depends on every goal and every
        verdict, so a generate unit needs them all."""
        c, combos = self.config, self.combos
        stages: dict[str, dict[str, Any]] = {
            "distill": {s.id: s for s in self.seeds.seeds},
            "persona": {k: k for k in self.personas},
            "conflict": {k: k for k in combos},
            "generate": {k: k for k in combos},
            "quality": {k: k for k in combos},
        }
        needs: dict[Need, list[Need]] = {}
        everything: list[Need] = []
        if c.dialogues is not None:
            everything = [("distill", s.id) for s in self.seeds.seeds]
            everything += [("conflict", k) for k in combos]
        for key, combo in combos.items():
            own: list[Need] = [("distill", combo["goal"])]
            own += [("persona", p) for p in combo["personas"]]
            needs[("conflict", key)] = list(own)
            own.append(("conflict", key))
            needs[("generate", key)] = own + [n for n in everything if n not in own]
            needs[("quality", key)] = [("generate", key), *needs[("generate", key)]]
            needs[("solve", key)] = [("quality", key), *needs[("quality", key)]]
        fields = asdict(c)

        def some(*names: str) -> dict[str, Any]:
            return {n: fields[n] for n in names}

        resolved = {
            "distill": {
                "prompts_sha256": bp.PROMPT_SHA256,
                "schemas_sha256": SCHEMAS_SHA256,
                **some("seed_dataset", "seed_lines", "max_tokens", "max_fixes", "seed"),
            },
            "persona": {
                "personas": digest(self.personas),
                **some("temperature"),
                **(
                    {"inspirations": digest(self.inspirations), "prompt": bp.INSPIRATION_SHA256}
                    if self.inspirations
                    else {}
                ),
            },
            "conflict": {"combinations": digest(combos)},
            "generate": some("dialogues", "min_turns", "max_turns"),
            "quality": {},
        }
        s = self.seeds
        return Plan(
            {k: k for k in combos},
            resolved={"version": VERSION},
            context=self,
            dataset=DatasetInfo(
                name=s.name, source=s.source, sha256=s.sha256, subjects=len(s.seeds)
            ),
            stages=stages,
            needs=needs,
            stage_resolved=resolved,
        )

    def gen(
        self, step: str, lang: Lang, temperature: float = 0.0, utterances: int = 0
    ) -> GenerateConfig:
        return call_config(self.config, step, lang, temperature, utterances)

    # 1 ---------------------------------------------------------------------------------------

    async def distill(self, seed: Seed, models: Models) -> dict[str, Any]:
        c = self.config
        msgs = bp.distill_messages(seed.lang, seed.text(c.seed_lines), seed.speakers)
        got = await models["model"].generate_structured(
            msgs, Distilled, self.gen("distill", seed.lang), max_fixes=c.max_fixes, tag="distill"
        )
        value = got.value.model_dump() if got.value else None
        return _entry(seed.id, got, value, lang=seed.lang)

    # 2 ---------------------------------------------------------------------------------------

    async def persona(self, key: str, models: Models) -> dict[str, Any]:
        c = self.config
        lang, attrs = self.personas[key]
        passage = self.inspirations.get(key)
        got = await models["model"].generate_structured(
            bp.persona_messages(lang, attrs, passage),
            PersonaDetails,
            self.gen("persona", lang, c.temperature),
            max_fixes=c.max_fixes,
            tag="persona",
        )
        value = {**attrs, **got.value.model_dump()} if got.value else None
        if value is not None and "occupation" in attrs:
            value["occupation"] = attrs["occupation"]  # a seed profile's own stays
        shown = {"inspiration": passage} if passage else {}
        return _entry(key, got, value, lang=lang, **shown)

    # 3 ---------------------------------------------------------------------------------------

    def people(self, done: Done, combo: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        found = ok(done, "persona")
        a, b = (found[k]["value"] for k in combo["personas"])
        return a, b

    async def conflict(self, key: str, models: Models, done: Done) -> dict[str, Any]:
        combo = self.combos[key]
        if key not in self.ready(done)[0]:  # a goal or persona failed: done again later
            return {"key": key, "status": "waiting", "lang": combo["lang"]}
        lang, goal = combo["lang"], ok(done, "distill")[combo["goal"]]["value"]
        msgs = conflict_prompt(lang, goal, self.people(done, combo))
        got = await models["model"].generate_structured(
            msgs,
            Assessment,
            self.gen("conflict", lang),
            max_fixes=self.config.max_fixes,
            tag="conflict",
        )
        value = {**combo, **got.value.model_dump()} if got.value else None
        entry = _entry(key, got, value, lang=lang)
        if got.value is not None and not got.value.reasonable:
            entry["status"] = "rejected"
        return entry

    # 4 ---------------------------------------------------------------------------------------

    def prelude(
        self, done: Done, combo_key: str
    ) -> tuple[Lang, str, tuple[dict[str, Any], dict[str, Any]]]:
        combo = ok(done, "conflict")[combo_key]["value"]
        goal = ok(done, "distill")[combo["goal"]]["value"]
        lang: Lang = combo["lang"]
        p1, p2 = self.people(done, combo)
        lines = [
            f"Scene: {_scene_text(goal)}; medium {combo['medium']}; relationship "
            f"{combo['relationship']}; familiarity {combo['familiarity']}/10",
            f"Participant 1 ({p1['name']}):\n{bp.attributes_text(p1)}",
            f"Goal of {p1['name']}: {goal['goal1']}",
            f"Participant 2 ({p2['name']}):\n{bp.attributes_text(p2)}",
            f"Goal of {p2['name']}: {goal['goal2']}",
        ]
        return lang, "\n\n".join(lines), (p1, p2)

    async def write_turns(
        self, model: Model, key: str, lang: Lang, prelude: str, names: tuple[str, str]
    ) -> tuple[list[dict[str, str]], dict[str, Any] | None]:
        """The dialogue, one utterance per call, the two speakers taking turns (the first
        speaker first); from `min_turns` on each reply also says whether the dialogue ends,
        and it stops at `max_turns`. Returns the turns and, when a turn never came or never
        fitted its schema, that turn's row (the unit is then not done)."""
        c = self.config
        turns: list[dict[str, str]] = []
        while len(turns) < c.max_turns:
            speaker = names[len(turns) % 2]
            may_end = len(turns) + 1 >= c.min_turns
            msgs = bp.turn_messages(
                lang,
                prelude,
                numbered(turns),
                speaker,
                first=names[0],
                index=len(turns) + 1,
                span=(c.min_turns, c.max_turns),
                may_end=may_end,
            )
            schema: type[Turn] = LastTurn if may_end else Turn
            got = await model.generate_structured(
                msgs,
                schema,
                self.gen("turn", lang, c.temperature),
                max_fixes=c.max_fixes,
                tag="turn",
            )
            if got.value is None:
                return turns, _entry(key, got, stage="dialogue", turn=len(turns) + 1, lang=lang)
            turns.append({"person": speaker, "content": got.value.content})
            if isinstance(got.value, LastTurn) and got.value.end:
                break
        return turns, None

    async def generate(self, key: str, models: Models, done: Done) -> dict[str, Any]:
        if not self.selected(done, key):  # rejected, waiting, or beyond `dialogues`
            return {"key": key, "status": "skipped"}
        lang, prelude, (p1, p2) = self.prelude(done, key)
        model = models["model"]
        turns, failed = await self.write_turns(model, key, lang, prelude, (p1["name"], p2["name"]))
        if failed is not None:
            return failed
        got = await model.generate_structured(
            bp.annotate_messages(lang, prelude, numbered(turns), len(turns)),
            annotation_schema(len(turns)),
            self.gen("annotate", lang, utterances=len(turns)),
            max_fixes=self.config.max_fixes,
            tag="annotate",
        )
        value = {"utterances": turns, "annotation": got.value.model_dump()} if got.value else None
        return _entry(key, got, value, stage="annotation", lang=lang)

    # 5 ---------------------------------------------------------------------------------------

    async def quality(self, key: str, models: Models, done: Done) -> dict[str, Any]:
        made_entry = entries(done, "generate").get(key, {"status": "waiting"})
        if made_entry["status"] != "ok":  # not selected ("skipped"), or not generated
            skipped = made_entry["status"] == "skipped"
            return {"key": key, "status": "skipped" if skipped else "waiting"}
        lang, prelude, _ = self.prelude(done, key)
        made = made_entry["value"]
        n = len(made["utterances"])
        msgs = bp.review_messages(lang, prelude, numbered(made["utterances"]), made["annotation"])
        got = await asyncio.gather(
            *(
                models[f"checker{i + 1}"].generate_structured(
                    msgs,
                    annotation_schema(n, review=True),
                    self.gen("review", lang, utterances=n),
                    max_fixes=self.config.max_fixes,
                    tag=f"checker{i + 1}",
                    sample=i + 1,
                )
                for i in range(2)
            )
        )
        for i, g in enumerate(got):
            if g.value is None:
                return _entry(key, g, stage=f"checker{i + 1}", lang=lang)
        reviews = [g.value.model_dump() for g in got if g.value is not None]
        final, edits, split = vote(made["annotation"], reviews)
        value = {"reviews": reviews, "final": final, "edits": edits, "no_majority": split}
        names = [models[f"checker{i + 1}"].name for i in range(2)]
        return _entry(key, got[0], value, lang=lang, checkers=names)

    # the output ------------------------------------------------------------------------------

    def output(
        self, done: Done
    ) -> tuple[list[tuple[DemoDialogue, dict[str, Any]]], list[dict[str, Any]]]:
        """The finished dialogues, in selection order, and every edit a checker proposed."""
        quality = ok(done, "quality")
        dialogues: list[tuple[DemoDialogue, dict[str, Any]]] = []
        audit: list[dict[str, Any]] = []
        for key in self.selection(done):
            if key not in quality:
                continue
            dialogue, extra = self.dialogue(done, key, quality[key]["value"]["final"])
            dialogues.append((dialogue, extra))
            for edit in quality[key]["value"]["edits"]:
                checker = quality[key]["checkers"][int(edit["checker"][-1]) - 1]
                audit.append({"dialogue": dialogue.id, **edit, "checker_model": checker})
        return dialogues, audit

    def summary(
        self,
        done: Done,
        dialogues: list[tuple[DemoDialogue, dict[str, Any]]],
        audit: list[dict[str, Any]],
        files: dict[str, int],
    ) -> dict[str, Any]:
        """build.json without its `models` (the caller knows them): the seeds, the
        settings, every step's counts and what was written."""
        seeds = self.seeds.seeds
        found = {stage: entries(done, stage) for stage in STEPS}
        goals = ok(done, "distill")
        combos, waiting = self.ready(done)
        selected = self.selection(done)
        generated = ok(done, "generate")
        steps: dict[str, dict[str, Any]] = {
            "distill": counts(found["distill"], (s.id for s in seeds)),
            "persona": counts(found["persona"], self.personas),
            "conflict": counts(found["conflict"], combos, waiting),
            "generate": counts(found["generate"], selected),
            "quality": counts(
                found["quality"],
                [k for k in selected if k in generated],
                waiting=sum(1 for k in selected if k not in generated),
            ),
        }
        steps["distill"]["by_goal_type"] = dict(
            sorted(Counter(e["value"]["goal_type"] for e in goals.values()).items())
        )
        steps["persona"]["from_sotopia"] = len(self.from_sotopia)
        rejected = [e for e in found["conflict"].values() if e["status"] == "rejected"]
        steps["conflict"]["rejections"] = [
            {"combination": e["key"], "reason": e["value"]["reason"]} for e in rejected
        ]
        steps["generate"]["by_goal_type"] = dict(
            sorted(
                Counter(
                    goals[combos[k]["goal"]]["value"]["goal_type"] for k in selected if k in combos
                ).items()
            )
        )
        reviewed = ok(done, "quality").values()
        steps["quality"].update(
            labels_voted=sum(len(_labels(e["value"]["final"])) for e in reviewed),
            edits_proposed=len(audit),
            edits_adopted=sum(1 for a in audit if a["adopted"]),
            labels_changed=sum(
                len({a["label"] for a in audit if a["adopted"] and a["dialogue"] == d.id})
                for d, _ in dialogues
            ),
            no_majority=sum(e["value"]["no_majority"] for e in reviewed),
        )
        unfinished = sum(
            s["failed"] + s["unparsed"] + s["waiting"] + s["not_run"] for s in steps.values()
        )
        return {
            "seed": {
                "dataset": self.seeds.name,
                "source": source_name(self.seeds.source),
                "sha256": self.seeds.sha256,
                "dialogues": len(seeds),
                "by_lang": dict(sorted(Counter(s.lang for s in seeds).items())),
            },
            "config": asdict(self.config),
            "steps": steps,
            "output": {
                "dialogues": len(dialogues),
                "by_lang": dict(sorted(Counter(d.lang for d, _ in dialogues).items())),
                "files": files,
            },
            "complete": unfinished == 0,
            "unfinished_units": unfinished,
        }

    def dialogue(
        self, done: Done, key: str, final: dict[str, Any]
    ) -> tuple[DemoDialogue, dict[str, Any]]:
        """The finished dialogue (its elements in our model) and what the model lacks."""
        combo = ok(done, "conflict")[key]["value"]
        goal = ok(done, "distill")[combo["goal"]]["value"]
        made = ok(done, "generate")[key]["value"]
        p1, p2 = self.people(done, combo)
        lang: Lang = combo["lang"]
        did = f"build-{lang}-{hashlib.sha256(key.encode()).hexdigest()[:10]}"
        utterances = []
        for i, (turn, note) in enumerate(zip(made["utterances"], final["utterances"], strict=True)):
            labels = UtteranceLabels(
                intent=note["intent"],
                sentiment=note["sentiment"],
                emotion=note["emotion"],
                stance=[Stance(**s) for s in note["stance"]],
                strategy=Strategy(**note["strategy"]),
            )
            utterances.append(
                Utterance(
                    id=f"{did}:{i}", speaker=turn["person"], text=turn["content"], labels=labels
                )
            )
        ep = final["epilogue"]
        dialogue = DemoDialogue(
            id=did,
            lang=lang,
            scene=Scene(
                time=goal["time"],
                location=goal["location"],
                medium=combo["medium"],
                topic=goal["topic"],
                relationship=combo["relationship"],
                familiarity=combo["familiarity"],
            ),
            participants=(_persona(p1), _persona(p2)),
            goals=(goal["goal1"], goal["goal2"]),
            utterances=utterances,
            epilogue=Epilogue(
                goal_completion=ep["goal_completion"],
                completion_reason=ep["completion_reason"],
                topic=goal["topic"],
                workflow=list(ep["workflow"]),
                summaries={p1["name"]: ep["summary1"], p2["name"]: ep["summary2"]},
            ),
            source=f"dialogbench build demo: seed {combo['goal']} ({self.seeds.name}), "
            f"combination {key}",
        )
        extra = {
            "goal_type": goal["goal_type"],
            **{k: goal[k] for k in ("domain", "atmosphere") if goal.get(k)},
            "attributes": [
                {
                    k: p[k]
                    for k in ("moral_values", "schwartz_values", "social_skills", "decision_style")
                    if k in p
                }
                for p in (p1, p2)
            ],
        }
        return dialogue, extra


class DemoBuild(TrackBase[BuildConfig, str]):
    """`build demo` as a `Track` run by `run_track` (not a `run` command): the five steps
    are its stages, each unit saved to `parts/<stage>.jsonl` as soon as it is done; a
    solve unit per combination assembles its dialogue; `aggregate` writes the release."""

    name: ClassVar[str] = "build-demo"
    summary: ClassVar[str] = "DEMO's five-step synthesis pipeline, into DEMO's release format."
    config_type = BuildConfig
    version: ClassVar[int] = VERSION
    corpus: ClassVar[Corpus] = "demo"
    roles: ClassVar[tuple[Role, ...]] = (
        Role("model", "distill", "the writer: every step's calls but the reviews"),
        Role("checker1", "quality", "the first checker of each annotation", fallback="model"),
        Role("checker2", "quality", "the second checker of each annotation", fallback="model"),
    )
    stages: ClassVar[tuple[Stage, ...]] = STAGES

    def plan(self, data: SeedSet, config: BuildConfig) -> Plan[str]:
        return Builder(config, data).plan()

    async def run_stage(
        self, stage: str, unit: Any, models: Models, config: BuildConfig, plan: Plan[str]
    ) -> Rows:
        b: Builder = plan.context
        done = plan.done
        if stage == "distill":
            return [await b.distill(unit, models)]
        if stage == "persona":
            return [await b.persona(unit, models)]
        if stage == "conflict":
            return [await b.conflict(unit, models, done)]
        if stage == "generate":
            return [await b.generate(unit, models, done)]
        return [await b.quality(unit, models, done)]

    async def solve(self, unit: str, models: Models, config: BuildConfig, plan: Plan[str]) -> Rows:
        """The combination's fate, and its dialogue's id when it was written."""
        b: Builder = plan.context
        made = entries(plan.done, "quality").get(unit, {"status": "waiting"})
        did = None
        if made["status"] == "ok":
            did = b.dialogue(plan.done, unit, made["value"]["final"])[0].id
        return [{"combination": unit, "status": made["status"], "dialogue": did}]

    def aggregate(self, plan: Plan[str], rows: Rows, config: BuildConfig) -> Outcome:
        b: Builder = plan.context
        dialogues, audit = b.output(plan.done)
        files = release_files(dialogues, config.seed)
        written = {name: n for name, (_, n) in files.items()}
        texts = {name: text for name, (text, _) in files.items()}
        texts["dialogues.jsonl"] = _jsonl(
            [{**d.model_dump(mode="json"), **x} for d, x in dialogues]
        )
        texts["audit.jsonl"] = _jsonl(audit)
        summary = b.summary(plan.done, dialogues, audit, written)
        steps = summary["steps"]
        waiting = sum(s["waiting"] for s in steps.values())
        return Outcome(
            summary=summary,
            files=texts,
            result=summary,
            failures={"units waiting on an unfinished one": waiting} if waiting else {},
        )


BUILD_DEMO = DemoBuild()


def numbered(turns: list[dict[str, Any]]) -> str:
    """Utterances as `[1] Name: text` lines."""
    return "\n".join(f"[{i}] {t['person']}: {t['content']}" for i, t in enumerate(turns, 1))


def _persona(p: dict[str, Any]) -> Persona:
    return Persona(
        name=p["name"],
        gender=p.get("gender"),
        age=p.get("age"),
        big_five=p.get("big_five", {}),
        education=p.get("education"),
        occupation=p.get("occupation"),
        culture=p.get("culture"),
        speaking_style=p.get("speaking_style"),
        hobby=p.get("hobby"),
        background=p.get("background"),
    )


# -- the vote -------------------------------------------------------------------------------


def _labels(annotation: dict[str, Any]) -> dict[str, Any]:
    """Label path -> value: each utterance's five labels and the epilogue's five fields."""
    out: dict[str, Any] = {}
    for i, note in enumerate(annotation["utterances"]):
        for name in ("intent", "sentiment", "emotion", "stance", "strategy"):
            out[f"utterances[{i}].{name}"] = note.get(name)
    for name in ("goal_completion", "completion_reason", "workflow", "summary1", "summary2"):
        out[f"epilogue.{name}"] = annotation["epilogue"].get(name)
    return out


def _canon(value: Any) -> str:
    """A label's value for comparison: strings stripped and lower-cased, keys sorted."""

    def norm(v: Any) -> Any:
        if isinstance(v, str):
            return " ".join(v.split()).lower()
        if isinstance(v, list):
            return [norm(x) for x in v]
        if isinstance(v, dict):
            return {k: norm(x) for k, x in v.items()}
        return v

    return json.dumps(norm(value), sort_keys=True, ensure_ascii=False)


def _set(annotation: dict[str, Any], path: str, value: Any) -> None:
    head, _, name = path.rpartition(".")
    if head == "epilogue":
        annotation["epilogue"][name] = value
    else:
        index = int(head[len("utterances[") : -1])
        annotation["utterances"][index][name] = value


def vote(
    original: dict[str, Any], reviews: list[dict[str, Any]]
) -> tuple[dict[str, Any], list[dict[str, Any]], int]:
    """Settle each label by simple majority over the generator's value and each checker's.

    Returns the final annotation, the edits (one per checker per label it changed: label,
    before, after, reason, adopted) and how many labels had no majority (the generator's
    value stays there).
    """
    final = json.loads(json.dumps(original))
    before = _labels(original)
    voters = [_labels(r) for r in reviews]
    reasons = [{x["label"]: x["reason"] for x in r.get("reasons", [])} for r in reviews]
    edits: list[dict[str, Any]] = []
    split = 0
    for path, value in before.items():
        values = [value, *(v[path] for v in voters)]
        counts = Counter(_canon(v) for v in values)
        best, n = counts.most_common(1)[0]
        if counts[_canon(value)] == n:
            winner = value  # the generator's value wins ties
        else:
            winner = next(v for v in values if _canon(v) == best)
        if n * 2 <= len(values):
            split += 1
            winner = value
        _set(final, path, winner)
        for i, v in enumerate(voters):
            if _canon(v[path]) != _canon(value):
                edits.append(
                    {
                        "label": path,
                        "checker": f"checker{i + 1}",
                        "before": value,
                        "after": v[path],
                        "reason": reasons[i].get(path),
                        "adopted": _canon(winner) == _canon(v[path]),
                    }
                )
    return final, edits, split


# -- DEMO's release format ------------------------------------------------------------------


def _big_five_pairs(traits: Mapping[str, str], lang: Lang) -> list[list[str]]:
    return [[written(t, lang), written(traits[t], lang)] for t in TRAITS if t in traits]


def person_answer(p: Persona, lang: Lang) -> dict[str, Any]:
    """A persona in the awareness answer's shape, its labels as DEMO writes them in `lang`
    (`男`, `中年期` with its years, `["开放性", "低"]`)."""
    out: dict[str, Any] = {"name": p.name}
    for key in ("gender", "age", "education", "occupation", "culture", "speaking_style", "hobby"):
        value = getattr(p, key)
        if value:
            out[key] = written(value, lang) if key in ("gender", "age") else value
    if p.big_five:
        out["big_five"] = _big_five_pairs(p.big_five, lang)
    return out


def background_text(p: Persona, lang: Lang) -> str:
    """The interaction episode's free-text background of a persona."""
    if lang == "zh":
        parts = [
            f"{p.name}，{p.gender or ''}，{p.age or ''}，职业：{p.occupation}，"
            f"教育：{p.education}，文化背景：{p.culture}，爱好：{p.hobby}，说话风格：{p.speaking_style}。",
            p.background or "",
        ]
    else:
        parts = [
            f"{p.name} ({p.gender or 'gender not given'}, {p.age or 'age not given'}) works "
            f"as {p.occupation}; education: {p.education}; culture: {p.culture}; hobby: "
            f"{p.hobby}; speaking style: {p.speaking_style}.",
            p.background or "",
        ]
    return " ".join(x for x in parts if x)


def release_records(d: DemoDialogue, seed: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One dialogue's four awareness items and its interaction episode, as DEMO writes them."""
    transcript = "\n".join(f"{u.speaker}: {u.text}" for u in d.utterances)
    p1, p2 = d.participants
    goal = {
        "goal1": d.goals[0],
        "goal2": d.goals[1],
        "goal_completion": d.epilogue.goal_completion,
        "reason": d.epilogue.completion_reason,
    }
    persona = dict(
        zip(PARTICIPANTS, (person_answer(p1, d.lang), person_answer(p2, d.lang)), strict=True)
    )
    s = d.scene
    scene = {
        "topic": s.topic,
        "relationship": s.relationship,
        "familiarity": s.familiarity,
        "talkway": s.medium,
        "location": s.location,
        "time": s.time,
        "workflow": d.epilogue.workflow,
        "summary": [d.epilogue.summaries.get(p1.name, ""), d.epilogue.summaries.get(p2.name, "")],
    }
    target = random.Random(f"{seed}:{d.id}").randrange(len(d.utterances))
    u = d.utterances[target]
    labels = u.labels or UtteranceLabels()
    utterance = {
        "person": u.speaker,
        "content": u.text,
        "intent": labels.intent,
        "sentiment": written(labels.sentiment, d.lang) if labels.sentiment else None,
        "emotion": labels.emotion,
        "stance": [x.model_dump() for x in labels.stance],
        "strategy": labels.strategy.model_dump() if labels.strategy else None,
    }
    answers: dict[str, dict[str, Any]] = {
        "goal": goal,
        "persona": persona,
        "scene": scene,
        "utterance": utterance,
    }
    line = f"{u.speaker}: {u.text}"  # the target's line in the transcript
    items = [
        {
            "type": task,
            "dialogue_hs": transcript,
            "instruction": bp.release_instruction(d.lang, task, transcript, line),
            "answer": {k: v for k, v in answer.items() if v is not None},
            "dataset_id": d.id,
        }
        for task, answer in answers.items()
    ]
    episode = {
        "uuid": d.id,
        "topic": s.topic,
        "goal": [d.goals[0], d.goals[1]],
        "person1": {"name": p1.name, "background": background_text(p1, d.lang)},
        "person2": {"name": p2.name, "background": background_text(p2, d.lang)},
        "combine": {
            "time": s.time,
            "location": s.location,
            "talkway": s.medium,
            "relationship": s.relationship,
            "familiarity": str(s.familiarity),
        },
    }
    return items, episode


def release_files(
    dialogues: list[tuple[DemoDialogue, dict[str, Any]]], seed: int
) -> dict[str, tuple[str, int]]:
    """`element_awareness_<lang>.json` and `dialogue_agent_interaction_<lang>.jsonl` for each
    language with dialogues: file name -> (its text, records in it)."""
    written: dict[str, tuple[str, int]] = {}
    langs = cast(tuple[Lang, ...], ("en", "zh"))
    for lang in langs:
        items: list[dict[str, Any]] = []
        episodes: list[dict[str, Any]] = []
        for d, _ in dialogues:
            if d.lang == lang:
                got, episode = release_records(d, seed)
                items += got
                episodes.append(episode)
        if items:
            text = json.dumps(items, ensure_ascii=False, indent=1) + "\n"
            written[f"element_awareness_{lang}.json"] = (text, len(items))
            written[f"dialogue_agent_interaction_{lang}.jsonl"] = (_jsonl(episodes), len(episodes))
    return written


def _jsonl(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def _named(given: Given) -> Any:
    """build.json's record of a model: a given model's name, a spec's settings."""
    return given.name if isinstance(given, Model) else given.settings()


def build_demo(
    config: BuildConfig,
    out: Path,
    model: Given,
    checkers: tuple[Given, Given] | None = None,
    progress: Progress | None = None,
) -> tuple[dict[str, Any], Finished]:
    """Run (or resume) a build into the folder `out` (the run folder: manifest, parts,
    usage, warnings, beside the release files); returns build.json's content and the
    finished run (its `exit_code`). Without `checkers`, the model checks its own
    annotation twice (samples 1 and 2)."""
    seeds = load_seeds(config.seed_dataset, config.limit)
    given: dict[str, Given] = {"model": model}
    if checkers is not None:
        given["checker1"], given["checker2"] = checkers
    out = Path(out)
    with RunLock(out):  # the runner takes it again; held until build.json is written
        finished = run_track(BUILD_DEMO, seeds, out, config, roles=given, progress=progress)
        summary: dict[str, Any] = finished.outcome.summary
        models = {
            "model": _named(model),
            "checkers": [_named(c) for c in checkers] if checkers else [{"same_as": "model"}] * 2,
        }
        build = {"seed": summary["seed"], "models": models, **summary}
        for name in OUTPUT_FILES:  # a language without dialogues now: its files go
            if name not in finished.outcome.files:
                with writing(out / name):
                    (out / name).unlink(missing_ok=True)
        finished.outcome.files[REPORT] = json.dumps(build, indent=1, ensure_ascii=False) + "\n"
        RunFolder(out).write(REPORT, finished.outcome.files[REPORT])
    return build, finished
