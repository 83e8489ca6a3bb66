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

Every step writes one line per unit to `OUT/steps/<n>-<step>.jsonl` as soon as the unit is
done, so a killed build resumes where it stopped. A unit whose call failed or whose reply
never parsed is counted (`failed`, `unparsed`), kept out of the output and done again on
the next run; a unit waiting on an upstream one is counted as `waiting`. A build folder
belongs to one set of settings (`steps/identity.json`): another seed, model or setting needs
another `--out`.

The output, in DEMO's release format, loads into `demo-awareness` and `demo-interaction`
(`--dataset OUT`): `element_awareness_{en,zh}.json` (one goal, persona, scene and utterance
item per dialogue) and `dialogue_agent_interaction_{en,zh}.jsonl` (one episode per
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
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, cast

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, create_model

from dialogbench.build import demo_prompts as bp
from dialogbench.build.demo_prompts import GoalType
from dialogbench.data.demo.items import PARTICIPANTS
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
from dialogbench.models.model import Model
from dialogbench.models.structured import CORRECTION, Structured, parse_reply
from dialogbench.models.types import ChatMessage, GenerateConfig

T = TypeVar("T", bound=BaseModel)
STEPS = ("distill", "persona", "conflict", "generate", "quality")
VERSION = 3
"""Bumped when a step's logic changes what it produces (part of the identity)."""

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
    """What a build makes; every field is part of the folder's identity."""

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
                    for a, sep, b in (ln.partition(":") for ln in item.transcript.splitlines())
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
    time: Label
    location: Label


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


# -- the step logs --------------------------------------------------------------------------

FINISHED = ("ok", "rejected")


class StepLog:
    """One step's units on disk: a JSON line per finished attempt, the last one counts."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: dict[str, dict[str, Any]] = {}
        self.torn = 0
        if not path.exists():
            return
        good: list[str] = []
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
                self.entries[str(entry["key"])] = entry
                good.append(line)
            except (json.JSONDecodeError, KeyError, TypeError):
                self.torn += 1  # cut by a kill mid-write: the unit is done again
        if self.torn:  # rewritten without it, so the next line starts on a line of its own
            path.write_text("".join(x + "\n" for x in good), encoding="utf-8")

    def done(self, key: str) -> bool:
        entry = self.entries.get(key)
        return entry is not None and entry["status"] in FINISHED

    def ok(self) -> dict[str, dict[str, Any]]:
        return {k: e for k, e in self.entries.items() if e["status"] == "ok"}

    def write(self, entry: dict[str, Any]) -> None:
        self.entries[entry["key"]] = entry
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(entry, ensure_ascii=False) + "\n")
            f.flush()

    def counts(self, keys: Iterable[str], waiting: int = 0) -> dict[str, int]:
        keys = list(keys)
        status = Counter(self.entries[k]["status"] if k in self.entries else "todo" for k in keys)
        out = {"units": len(keys) + waiting, "waiting": waiting}
        for name in ("ok", "rejected", "failed", "unparsed"):
            out[name] = status.get(name, 0)
        out["not_run"] = status.get("todo", 0)
        if self.torn:
            out["torn_lines_dropped"] = self.torn
        return out


def _entry(key: str, got: Structured[Any], value: Any = None, **extra: Any) -> dict[str, Any]:
    """A log line from a structured reply: ok (with `value`), failed or unparsed."""
    retry = {"retry": got.retry} if got.retry else {}
    if got.value is not None:
        ok = {"key": key, "status": "ok", "value": value, "attempts": got.attempts}
        return {**ok, **retry, **extra}
    status = "failed" if got.call_failed else "unparsed"
    return {"key": key, "status": status, "error": got.error, "raw": got.raw, **retry, **extra}


async def ask(
    model: Model,
    messages: list[ChatMessage],
    schema: type[T],
    config: GenerateConfig,
    *,
    max_fixes: int,
    tag: str,
    sample: int = 0,
    check: Callable[[T], None] | None = None,
) -> Structured[T]:
    """A reply validated against `schema` (and `check`, which raises `ValueError`), sent
    back for a fix up to `max_fixes` times; the schema goes with the call (a grammar for
    local models, `response_format` for servers)."""
    json_schema = schema.model_json_schema()
    config = replace(config, json_schema=json_schema, schema_name=schema.__name__)
    shown = json.dumps(json_schema)

    def parse(raw: str) -> T:
        value = parse_reply(raw, schema)
        if check is not None:
            check(value)
        return value

    return await model.generate_parsed(
        messages,
        parse,
        lambda error: {"role": "user", "content": CORRECTION.format(error=error, schema=shown)},
        config,
        max_fixes=max_fixes,
        sample=sample,
        tag=tag,
    )


async def _run_units(
    log: StepLog, jobs: dict[str, Callable[[], Awaitable[dict[str, Any]]]]
) -> None:
    """Run the jobs not yet finished, concurrently, logging each as soon as it ends."""

    async def one(key: str) -> None:
        log.write(await jobs[key]())

    await asyncio.gather(*(one(k) for k in jobs if not log.done(k)))


# -- the pipeline ---------------------------------------------------------------------------


@dataclass
class Builder:
    """One build: the settings, the models and the folder (see the module docstring)."""

    config: BuildConfig
    out: Path
    model: Model
    checkers: tuple[Model, Model]
    roles: dict[str, Any] = field(default_factory=dict)
    """What build.json records about the models (never a key)."""

    def __post_init__(self) -> None:
        self.seeds = load_seeds(self.config.seed_dataset, self.config.limit)
        self.steps_dir = self.out / "steps"
        self.logs: dict[str, StepLog] = {}
        self._plan: dict[str, tuple[Lang, dict[str, Any]]] | None = None
        self.from_sotopia: set[str] = set()

    # identity -------------------------------------------------------------------------------

    def identity(self) -> dict[str, Any]:
        return {
            "version": VERSION,
            "config": asdict(self.config),
            "seed_sha256": self.seeds.sha256,
            "prompts_sha256": bp.PROMPT_SHA256,
            "schemas_sha256": SCHEMAS_SHA256,
            "model": self.model.name,
            "checkers": [c.name for c in self.checkers],
        }

    def _open(self) -> None:
        try:
            self.steps_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise DataError(
                self.out,
                f"cannot create the build folder: {e.strerror}",
                fix="choose a writable --out",
            ) from None
        wanted = self.identity()
        path = self.steps_dir / "identity.json"
        if path.exists():
            had = json.loads(path.read_text(encoding="utf-8"))
            if had != wanted:
                changed = sorted(k for k in wanted if had.get(k) != wanted.get(k))
                raise DataError(
                    path,
                    f"this folder was built with other settings ({', '.join(changed)} differ)",
                    fix="resume with the same command, or give another --out",
                )
        else:
            path.write_text(json.dumps(wanted, indent=1, ensure_ascii=False), encoding="utf-8")
        for n, step in enumerate(STEPS, 1):
            self.logs[step] = StepLog(self.steps_dir / f"{n}-{step}.jsonl")

    def gen(
        self, step: str, lang: Lang, temperature: float = 0.0, utterances: int = 0
    ) -> GenerateConfig:
        """A call's settings: `step`'s token budget in `lang` (`BUDGETS`, `BUDGET_FACTOR`),
        capped by `max_tokens`."""
        budget = BUDGETS[step] + utterances * BUDGETS.get(f"{step}_per_utterance", 0)
        budget *= BUDGET_FACTOR[lang]
        return GenerateConfig(
            temperature=temperature,
            max_tokens=min(budget, self.config.max_tokens),
            seed=self.config.seed,
        )

    # 1 ---------------------------------------------------------------------------------------

    async def distill(self) -> None:
        log, c = self.logs["distill"], self.config

        def job(seed: Seed) -> Callable[[], Awaitable[dict[str, Any]]]:
            async def run() -> dict[str, Any]:
                msgs = bp.distill_messages(seed.lang, seed.text(c.seed_lines), seed.speakers)
                got = await ask(
                    self.model,
                    msgs,
                    Distilled,
                    self.gen("distill", seed.lang),
                    max_fixes=c.max_fixes,
                    tag="distill",
                )
                value = got.value.model_dump() if got.value else None
                return _entry(seed.id, got, value, lang=seed.lang)

            return run

        await _run_units(log, {s.id: job(s) for s in self.seeds.seeds})

    # 2 ---------------------------------------------------------------------------------------

    def persona_plan(self) -> dict[str, tuple[Lang, dict[str, Any]]]:
        """Persona key -> (language, sampled attributes); fixed by the seed and settings."""
        if self._plan is None:
            self._plan = self._persona_plan()
        return self._plan

    def _persona_plan(self) -> dict[str, tuple[Lang, dict[str, Any]]]:
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

    async def persona(self) -> None:
        log, c = self.logs["persona"], self.config

        def job(key: str, lang: Lang, attrs: dict[str, Any]) -> Callable[[], Awaitable[Any]]:
            async def run() -> dict[str, Any]:
                got = await ask(
                    self.model,
                    bp.persona_messages(lang, attrs),
                    PersonaDetails,
                    self.gen("persona", lang, c.temperature),
                    max_fixes=c.max_fixes,
                    tag="persona",
                )
                value = {**attrs, **got.value.model_dump()} if got.value else None
                if value is not None and "occupation" in attrs:
                    value["occupation"] = attrs["occupation"]  # a seed profile's own stays
                return _entry(key, got, value, lang=lang)

            return run

        await _run_units(log, {k: job(k, lang, a) for k, (lang, a) in self.persona_plan().items()})

    # 3 ---------------------------------------------------------------------------------------

    def combinations(self) -> tuple[dict[str, dict[str, Any]], int]:
        """Combination key -> its goal key and persona keys, for goals and personas that are
        done; and how many combinations wait on an unfinished goal or persona."""
        c = self.config
        plan = self.persona_plan()
        personas = self.logs["persona"].ok()
        combos: dict[str, dict[str, Any]] = {}
        waiting = 0
        for seed in self.seeds.seeds:
            keys = sorted(k for k, (lang, _) in plan.items() if lang == seed.lang)
            goal = self.logs["distill"].ok().get(seed.id)
            for k in range(c.pairs_per_goal):
                rng = random.Random(f"{c.seed}:pair:{seed.id}:{k}")
                a, b = rng.sample(keys, 2)
                if goal is None or a not in personas or b not in personas:
                    waiting += 1
                    continue
                combos[f"{seed.id}#{k}"] = {"goal": seed.id, "personas": [a, b], "lang": seed.lang}
        return combos, waiting

    def people(self, combo: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        ok = self.logs["persona"].ok()
        a, b = (ok[k]["value"] for k in combo["personas"])
        return a, b

    async def conflict(self) -> None:
        log, c = self.logs["conflict"], self.config
        goals = self.logs["distill"].ok()

        def job(key: str, combo: dict[str, Any]) -> Callable[[], Awaitable[dict[str, Any]]]:
            async def run() -> dict[str, Any]:
                lang, goal = combo["lang"], goals[combo["goal"]]["value"]
                p1, p2 = self.people(combo)
                scene = f"{goal['topic']}; {goal['time']}; {goal['location']}"
                msgs = bp.conflict_messages(
                    lang,
                    scene,
                    (bp.attributes_text(p1), bp.attributes_text(p2)),
                    (goal["goal1"], goal["goal2"]),
                )
                got = await ask(
                    self.model,
                    msgs,
                    Assessment,
                    self.gen("conflict", lang),
                    max_fixes=c.max_fixes,
                    tag="conflict",
                )
                value = {**combo, **got.value.model_dump()} if got.value else None
                entry = _entry(key, got, value, lang=lang)
                if got.value is not None and not got.value.reasonable:
                    entry["status"] = "rejected"
                return entry

            return run

        combos, _ = self.combinations()
        await _run_units(log, {k: job(k, v) for k, v in combos.items()})

    # 4 ---------------------------------------------------------------------------------------

    def selection(self) -> list[str]:
        """Kept combinations, round-robin over goal types (each type in key order), up to
        `dialogues`."""
        goals = self.logs["distill"].ok()
        by_type: dict[str, list[str]] = {}
        for key, e in sorted(self.logs["conflict"].ok().items()):
            by_type.setdefault(goals[e["value"]["goal"]]["value"]["goal_type"], []).append(key)
        order: list[str] = []
        queues = [by_type[t] for t in bp.GOAL_TYPES if t in by_type]
        while any(queues):
            for q in queues:
                if q:
                    order.append(q.pop(0))
        limit = self.config.dialogues
        return order[:limit] if limit is not None else order

    def prelude(self, combo_key: str) -> tuple[Lang, str, tuple[dict[str, Any], dict[str, Any]]]:
        combo = self.logs["conflict"].ok()[combo_key]["value"]
        goal = self.logs["distill"].ok()[combo["goal"]]["value"]
        lang: Lang = combo["lang"]
        p1, p2 = self.people(combo)
        lines = [
            f"Scene: topic {goal['topic']}; time {goal['time']}; location {goal['location']}; "
            f"medium {combo['medium']}; relationship {combo['relationship']}; familiarity "
            f"{combo['familiarity']}/10",
            f"Participant 1 ({p1['name']}):\n{bp.attributes_text(p1)}",
            f"Goal of {p1['name']}: {goal['goal1']}",
            f"Participant 2 ({p2['name']}):\n{bp.attributes_text(p2)}",
            f"Goal of {p2['name']}: {goal['goal2']}",
        ]
        return lang, "\n\n".join(lines), (p1, p2)

    async def write_turns(
        self, key: str, lang: Lang, prelude: str, names: tuple[str, str]
    ) -> tuple[list[dict[str, str]], dict[str, Any] | None]:
        """The dialogue, one utterance per call, the two speakers taking turns (the first
        speaker first); from `min_turns` on each reply also says whether the dialogue ends,
        and it stops at `max_turns`. Returns the turns and, when a turn never came or never
        fitted its schema, that turn's log entry (the unit is then not done)."""
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
            got: Structured[Turn] = await ask(
                self.model,
                msgs,
                LastTurn if may_end else Turn,
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

    async def generate(self) -> None:
        log, c = self.logs["generate"], self.config

        def job(key: str) -> Callable[[], Awaitable[dict[str, Any]]]:
            async def run() -> dict[str, Any]:
                lang, prelude, (p1, p2) = self.prelude(key)
                turns, failed = await self.write_turns(key, lang, prelude, (p1["name"], p2["name"]))
                if failed is not None:
                    return failed
                got = await ask(
                    self.model,
                    bp.annotate_messages(lang, prelude, numbered(turns), len(turns)),
                    annotation_schema(len(turns)),
                    self.gen("annotate", lang, utterances=len(turns)),
                    max_fixes=c.max_fixes,
                    tag="annotate",
                )
                value = (
                    {"utterances": turns, "annotation": got.value.model_dump()}
                    if (got.value)
                    else None
                )
                return _entry(key, got, value, stage="annotation", lang=lang)

            return run

        await _run_units(log, {k: job(k) for k in self.selection()})

    # 5 ---------------------------------------------------------------------------------------

    async def quality(self) -> None:
        log, c = self.logs["quality"], self.config
        generated = self.logs["generate"].ok()

        def job(key: str) -> Callable[[], Awaitable[dict[str, Any]]]:
            async def run() -> dict[str, Any]:
                lang, prelude, _ = self.prelude(key)
                made = generated[key]["value"]
                n = len(made["utterances"])
                msgs = bp.review_messages(
                    lang, prelude, numbered(made["utterances"]), made["annotation"]
                )
                got = await asyncio.gather(
                    *(
                        ask(
                            m,
                            msgs,
                            annotation_schema(n, review=True),
                            self.gen("review", lang, utterances=n),
                            max_fixes=c.max_fixes,
                            tag=f"checker{i + 1}",
                            sample=i + 1,
                        )
                        for i, m in enumerate(self.checkers)
                    )
                )
                for i, g in enumerate(got):
                    if g.value is None:
                        return _entry(key, g, stage=f"checker{i + 1}", lang=lang)
                reviews = [g.value.model_dump() for g in got if g.value is not None]
                final, edits, split = vote(made["annotation"], reviews)
                value = {"reviews": reviews, "final": final, "edits": edits, "no_majority": split}
                return _entry(key, got[0], value, lang=lang)

            return run

        await _run_units(log, {k: job(k) for k in self.selection() if k in generated})

    # all -------------------------------------------------------------------------------------

    async def run(self) -> dict[str, Any]:
        """Every step in order (each skipping what is done), then the output and build.json."""
        self._open()
        await asyncio.gather(self.distill(), self.persona())
        await self.conflict()
        await self.generate()
        await self.quality()
        return self.write_output()

    def write_output(self) -> dict[str, Any]:
        """The release files, dialogues.jsonl, audit.jsonl and build.json from the logs."""
        quality = self.logs["quality"].ok()
        dialogues: list[tuple[DemoDialogue, dict[str, Any]]] = []
        audit: list[dict[str, Any]] = []
        for key in self.selection():
            if key not in quality:
                continue
            dialogue, extra = self.dialogue(key, quality[key]["value"]["final"])
            dialogues.append((dialogue, extra))
            for edit in quality[key]["value"]["edits"]:
                checker = self.checkers[int(edit["checker"][-1]) - 1].name
                audit.append({"dialogue": dialogue.id, **edit, "checker_model": checker})
        files = write_release(self.out, dialogues, self.config.seed)
        _write_jsonl(
            self.out / "dialogues.jsonl", [{**d.model_dump(mode="json"), **x} for d, x in dialogues]
        )
        _write_jsonl(self.out / "audit.jsonl", audit)
        summary = self.summary(dialogues, audit, files)
        (self.out / "build.json").write_text(
            json.dumps(summary, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        return summary

    def summary(
        self,
        dialogues: list[tuple[DemoDialogue, dict[str, Any]]],
        audit: list[dict[str, Any]],
        files: dict[str, int],
    ) -> dict[str, Any]:
        logs, seeds = self.logs, self.seeds.seeds
        goals = logs["distill"].ok()
        combos, waiting = self.combinations()
        selected = self.selection()
        generated = logs["generate"].ok()
        plan = self.persona_plan()
        steps: dict[str, dict[str, Any]] = {
            "distill": logs["distill"].counts(s.id for s in seeds),
            "persona": logs["persona"].counts(plan),
            "conflict": logs["conflict"].counts(combos, waiting),
            "generate": logs["generate"].counts(selected),
            "quality": logs["quality"].counts(
                [k for k in selected if k in generated],
                waiting=sum(1 for k in selected if k not in generated),
            ),
        }
        steps["distill"]["by_goal_type"] = dict(
            sorted(Counter(e["value"]["goal_type"] for e in goals.values()).items())
        )
        steps["persona"]["from_sotopia"] = len(self.from_sotopia)
        rejected = [e for e in logs["conflict"].entries.values() if e["status"] == "rejected"]
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
        reviewed = logs["quality"].ok().values()
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
                "source": self.seeds.source,
                "sha256": self.seeds.sha256,
                "dialogues": len(seeds),
                "by_lang": dict(sorted(Counter(s.lang for s in seeds).items())),
            },
            "models": self.roles
            or {"model": self.model.name, "checkers": [m.name for m in self.checkers]},
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

    def dialogue(self, key: str, final: dict[str, Any]) -> tuple[DemoDialogue, dict[str, Any]]:
        """The finished dialogue (its elements in our model) and what the model lacks."""
        combo = self.logs["conflict"].ok()[key]["value"]
        goal = self.logs["distill"].ok()[combo["goal"]]["value"]
        made = self.logs["generate"].ok()[key]["value"]
        p1, p2 = self.people(combo)
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


def _big_five_pairs(traits: Mapping[str, str]) -> list[list[str]]:
    return [[t, traits[t].capitalize()] for t in TRAITS if t in traits]


def person_answer(p: Persona) -> dict[str, Any]:
    """A persona in the awareness answer's shape."""
    out: dict[str, Any] = {"name": p.name}
    for key in ("gender", "age", "education", "occupation", "culture", "speaking_style", "hobby"):
        value = getattr(p, key)
        if value:
            out[key] = value
    if p.big_five:
        out["big_five"] = _big_five_pairs(p.big_five)
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
    instruction = bp.INSTRUCTIONS[d.lang]
    goal = {
        "goal1": d.goals[0],
        "goal2": d.goals[1],
        "goal_completion": d.epilogue.goal_completion,
        "reason": d.epilogue.completion_reason,
    }
    persona = dict(zip(PARTICIPANTS, (person_answer(p1), person_answer(p2)), strict=True))
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
        "sentiment": labels.sentiment,
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
    items = [
        {
            "type": task,
            "dialogue_hs": transcript,
            "instruction": instruction[task],
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


def write_release(
    out: Path, dialogues: list[tuple[DemoDialogue, dict[str, Any]]], seed: int
) -> dict[str, int]:
    """`element_awareness_<lang>.json` and `dialogue_agent_interaction_<lang>.jsonl` for each
    language with dialogues (stale ones of a language now without any are removed);
    returns file name -> records written."""
    written: dict[str, int] = {}
    langs = cast(tuple[Lang, ...], ("en", "zh"))
    for lang in langs:
        items: list[dict[str, Any]] = []
        episodes: list[dict[str, Any]] = []
        for d, _ in dialogues:
            if d.lang == lang:
                got, episode = release_records(d, seed)
                items += got
                episodes.append(episode)
        aw, ia = (
            out / f"element_awareness_{lang}.json",
            out / f"dialogue_agent_interaction_{lang}.jsonl",
        )
        if not items:
            aw.unlink(missing_ok=True)
            ia.unlink(missing_ok=True)
            continue
        aw.write_text(json.dumps(items, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        _write_jsonl(ia, episodes)
        written[aw.name], written[ia.name] = len(items), len(episodes)
    return written


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    path.write_text(text, encoding="utf-8")


async def build_demo(
    config: BuildConfig,
    out: Path,
    model: Model,
    checkers: tuple[Model, Model] | None = None,
    roles: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run (or resume) a build into `out`; returns build.json's content. Without
    `checkers`, the model checks its own annotation twice (samples 1 and 2)."""
    builder = Builder(config, out, model, checkers or (model, model), roles or {})
    return await builder.run()
