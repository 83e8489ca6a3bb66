"""Profile and persona reconstruction track (RealCompanion, "Three agent systems reconstruct
the persona at equal quality and very different cost"): a model reads a subject's whole
history and writes the profile (claims: field, statement) and the persona (entries:
dimension, statement); both are matched against the released `profile.json` and
`persona.json` (for MemoryBank, the users' meta information).

Chunking (map-reduce). The prompt must fit `context_tokens` (the model's window) with
`max_tokens` left for the reply. Tokens are counted with `tokenizer`: `gguf` is the
embedded SmolLM2's own vocabulary and chat-template overhead (`GGUFTokenizer`), `chars`
a model-free estimate of one token per 4 characters (rounded up) plus 4 per message,
`auto` the first when cyllama and the GGUF file are installed. A history that does not fit
(with room kept for `max_fixes` correction rounds) is split into consecutive chunks of
whole messages (each line costs its tokens plus one for
the line break); a message too long for a chunk on its own is cut to fit and counted. Each
chunk is sent with the same task (naming the part), then the parts are merged
deterministically (`merge`): records are concatenated in chunk order, and a later chunk's
records that restate records kept from earlier chunks are dropped (matched one-to-one by
the lexical rule at `DEDUPE_THRESHOLD`); the records of one reply are all kept, so the gold
replayed as one reply keeps its near-duplicate claims. A subject is
*unscored* in a run when any chunk's reply could not be used after corrections: counted,
shown, and left out of the figures, never scored 0.

Figures (see `reconstruction_match` for the two matching rules, `--matcher meaning`, the
default: field synonyms and MiniLM sentence embeddings with contradiction checks; or
`lexical`: equal normalised fields and content-word F1 >= 0.25; and `reconstruction_judge`
for `--matcher judge`: a judge model's verdict on each candidate pair, `--judge-model`;
each pairs records one-to-one, optimally):

    precision, recall, F1   per (subject, run), for profile, persona and both pooled
                            ("all"); the headline is their mean with a 95% bootstrap
                            interval resampling subjects
    run agreement           per subject, the mean pooled F1 between every pair of its
                            scored runs (runs differ by sample index, so by seed and cache
                            key); then the mean over subjects, resampling subjects
    tokens processed        prompt + completion tokens of the model role (usage.json)
    agreement between       `compare_runs(run_a, run_b)`: the mean pooled F1 between every
    systems                 run of system A and every run of system B, per shared subject
    matched profile claims  over every matched pair (subjects resampled): confidence error
                            (|written - gold|), window agreement (overlap of the validity
                            windows, open ends at the history's edges) and evidence
                            agreement (Jaccard of the evidence ids; pairs where neither
                            cites any are left out)
    matched persona entries evidence agreement (of the grounds) and hypothesis agreement

Stages. A unit is one subject in one run (its chunks sent as one batch, then the
corrections). Solving writes the profile and persona; scoring matches them against the
released ones (deterministic, no judge: `matcher` and `threshold` are score-stage options,
so another rule re-matches saved outputs without calling the model); aggregating draws the
figures (`n_boot`).

RUN_DIR/manifest.json   dataset, config, model settings, prompt and matcher digests, counter
RUN_DIR/items.jsonl     one record per run x subject: the written profile and persona,
                        matched pairs, their agreement, counts, P/R/F1, raw + error of
                        unusable replies
RUN_DIR/summary.json    kind -> {precision, recall, f1}; "run agreement" -> {f1}; "matched
                        profile claims", "matched persona entries" -> agreement figures
RUN_DIR/subjects.json   per subject: mean P/R/F1 over runs, run agreement, unscored runs
RUN_DIR/unscored.json   unscored (run, subject) pairs, in all and per subject
RUN_DIR/written/run-R/SUBJECT/   each scored output in the release format
RUN_DIR/usage.json      calls and tokens of the model role
RUN_DIR/warnings.json   data repairs, skipped subjects, cut messages, unscored replies
RUN_DIR/parts/solved.jsonl, scored.jsonl   finished units; a rerun of the same run keeps them
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from rich.table import Table

from dialogbench.data.model import Dataset, PersonaEntry, ProfileClaim, Role, Subject
from dialogbench.data.release import PERSONA, PROFILE
from dialogbench.models.embedding import load_embedder
from dialogbench.models.model import Model
from dialogbench.models.structured import CORRECTION
from dialogbench.models.tokenizer import IntArray, TokenCounter
from dialogbench.models.types import ChatMessage, GenerateConfig, ModelError
from dialogbench.report.table import summary_table
from dialogbench.runner import Outcome, Plan, TrackBase, model_role, option, register
from dialogbench.runner import config as shared
from dialogbench.runner.options import OptionError
from dialogbench.runner.record import RunFolder
from dialogbench.runner.roles import judge_role
from dialogbench.runner.track import Models, Rows
from dialogbench.stats.bootstrap import Estimate, bootstrap_means
from dialogbench.tracks.common import ask_each, outcome_of
from dialogbench.tracks.realcompanion import reconstruction_judge as rj
from dialogbench.tracks.realcompanion import reconstruction_match as rm
from dialogbench.tracks.realcompanion.reconstruction_prompts import (
    MATCH_PROMPT_SHA256,
    PROMPT_SHA256,
    ClaimReply,
    ClaimVerdict,
    PersonaReply,
    Reconstruction,
    reconstruction_messages,
    render,
    reply_model,
)

TRACK = "reconstruction"
DEDUPE_THRESHOLD = 0.6
EMBEDDER = "minilm"
"""The sentence embedder of the meaning matcher (`dialogbench.models.embedding`)."""
ERROR_ROOM = 400
METRICS = ("precision", "recall", "f1")
SUMMARY_KINDS = (*rm.KINDS, "all")
AGREEMENT_ROWS = {"profile": "matched profile claims", "persona": "matched persona entries"}
"""summary.json rows of how far matched pairs agree beyond their statements."""
TOKENIZERS = ("auto", "gguf", "chars")


@dataclass(frozen=True)
class ReconstructionConfig(shared.Sampled, shared.Judged):
    """Runs, context budget, matching, intervals, the reply settings, a subject limit."""

    runs: int = option(1, help="repeated runs per subject (run r uses seed + r)", min=1, max=1000)
    """Repeated runs per subject; run r uses sample index r (seed + r, its own cache keys)."""
    context_tokens: int = option(
        4096, help="the model's context window; longer histories are chunked", min=1
    )
    tokenizer: Literal["auto", "gguf", "chars"] = option(
        "auto", help="how prompt tokens are counted (see the track's docstring)"
    )
    matcher: Literal["meaning", "lexical", "judge"] = option(
        "meaning",
        help="how written records are matched to gold: meaning (field synonyms, sentence "
        "embeddings), lexical (same field, shared words) or judge (a judge model reads each "
        "candidate pair; needs --judge-model)",
        stage="score",
    )
    """The matching rule (`reconstruction_match`; `judge`: `reconstruction_judge`):
    `meaning` and `judge` need the packaged MiniLM."""
    threshold: float | None = option(
        None,
        help=f"statement similarity for a match (default: {rm.MEANING_THRESHOLD} meaning, "
        f"{rm.LEXICAL_THRESHOLD} lexical; lexical 0: field only)",
        min=0,
        max=1,
        stage="score",
    )
    """Statement similarity at or above which two records agree: embedding cosine
    (meaning) or content-word F1 (lexical)."""
    limit: int | None = shared.limit("subjects (the first with a profile or persona)")
    seed: int = shared.seed("the replies and the bootstrap")
    n_boot: int = shared.n_boot()
    max_tokens: int = shared.tokens(1024, "reply budget per call")
    temperature: float = shared.temperature(
        0.7, "sampling temperature (above 0 so repeated runs can differ)"
    )
    max_fixes: int = shared.fixes(1, "corrections of an unusable reply")
    max_claims: int | None = option(
        None, help="bound the claims per reply (helps small models)", min=1, max=10_000
    )
    max_persona: int | None = option(
        None, help="bound the persona entries per reply", min=1, max=10_000
    )
    judge_candidates: int = option(
        rj.TOP_K,
        help="--matcher judge: per record, the other side's most similar statements asked "
        "about whatever their fields",
        min=1,
        max=1000,
        stage="score",
    )
    judge_max_tokens: int = shared.judge_tokens(256)
    judge_max_fixes: int = shared.fixes(
        1, "--matcher judge: corrections of an unusable verdict", stage="score"
    )

    def reply_model(self) -> type[Reconstruction]:
        return reply_model(self.max_claims, self.max_persona)

    def matching(self) -> rm.Matcher:
        """The matcher the config names, at its threshold (`judge`: the meaning matcher
        that picks the judge's candidates, and matches runs against each other)."""
        if self.matcher == "lexical":
            return rm.lexical(rm.LEXICAL_THRESHOLD if self.threshold is None else self.threshold)
        threshold = rm.MEANING_THRESHOLD if self.threshold is None else self.threshold
        return rm.meaning(embedding_similarity(), threshold)

    def verdict_config(self) -> GenerateConfig:
        """The judge's settings for one claim verdict (`--matcher judge`)."""
        schema = ClaimVerdict.model_json_schema()
        return replace(self.judge_config(), json_schema=schema, schema_name="ClaimVerdict")

    def reply_config(self) -> GenerateConfig:
        """The calls' settings, asking for the reply's JSON shape."""
        schema = self.reply_model().model_json_schema()
        return replace(self.generate_config(), json_schema=schema, schema_name="Reconstruction")


@dataclass
class ReconstructionResult:
    """The track's figures as written to the run folder."""

    summary: dict[str, dict[str, Estimate]]
    subjects: dict[str, dict[str, Any]]
    unscored: dict[str, Any]
    usage: dict[str, Any] = field(default_factory=dict)
    """usage.json: calls and tokens per role and stage."""
    warnings: list[str] = field(default_factory=list)


# -- counting and chunking ------------------------------------------------------------------


class CharCounter:
    """A model-free token estimate: ceil(characters / 4) per text, 4 per message."""

    name = "chars/4"

    def count(self, texts: Sequence[str]) -> IntArray:
        return np.array([math.ceil(len(t) / 4) for t in texts], dtype=np.int64)

    def overhead(self, role: Role) -> int:
        return 4


def make_counter(name: str) -> TokenCounter:
    """The token counter `name` (auto | gguf | chars) stands for."""
    if name not in TOKENIZERS:
        raise ValueError(f"unknown tokenizer {name!r}; known: {', '.join(TOKENIZERS)}")
    if name == "chars":
        return CharCounter()
    try:
        from dialogbench.models.tokenizer import GGUFTokenizer

        return GGUFTokenizer()
    except (ImportError, ModelError, OSError):
        if name == "gguf":
            raise
        return CharCounter()


def prompt_tokens(counter: TokenCounter, messages: Sequence[ChatMessage]) -> int:
    """Tokens of a prompt: its texts plus the template's overhead per message."""
    texts = [m["content"] for m in messages]
    return int(counter.count(texts).sum()) + sum(counter.overhead(m["role"]) for m in messages)


def history_budget(counter: TokenCounter, person: str, config: ReconstructionConfig) -> int:
    """Tokens left for message lines once the instructions, the reply and every correction
    round (the unusable reply sent back plus the correction with the schema and a
    `ERROR_ROOM`-character error) are set aside; counted with the longest part label, so
    every chunk's prompt and its corrections fit."""
    fixed = prompt_tokens(counter, reconstruction_messages(person, [], 999, 999))
    schema = json.dumps(config.reply_config().json_schema)
    fix: list[ChatMessage] = [
        {"role": "user", "content": CORRECTION.format(error="x" * ERROR_ROOM, schema=schema)}
    ]
    per_fix = config.max_tokens + counter.overhead("assistant") + prompt_tokens(counter, fix)
    return config.context_tokens - config.max_tokens - fixed - config.max_fixes * per_fix


def chunk_spans(costs: Sequence[int], budget: int) -> list[tuple[int, int]]:
    """Consecutive [start, end) spans of lines, each as long as fits in `budget` tokens
    (a line costs its tokens plus one for the line break). Every cost must fit alone."""
    spans: list[tuple[int, int]] = []
    start, used = 0, 0
    for i, cost in enumerate(costs):
        if cost + 1 > budget:
            raise ValueError(f"line {i} costs {cost} tokens, over the budget of {budget}")
        if i > start and used + cost + 1 > budget:
            spans.append((start, i))
            start, used = i, 0
        used += cost + 1
    if start < len(costs):
        spans.append((start, len(costs)))
    return spans


@dataclass(frozen=True)
class History:
    """A subject's history as prompt lines, split into chunks that fit."""

    lines: tuple[str, ...]
    spans: tuple[tuple[int, int], ...]
    cut: tuple[str, ...] = ()
    """Ids of messages cut to fit a chunk on their own."""


def fit_history(subject: Subject, counter: TokenCounter, budget: int) -> History:
    """Render every message, cut any that cannot fit alone, and chunk the lines."""
    if budget < 16:
        raise ValueError(
            f"context_tokens leaves {budget} tokens for the history once the instructions "
            "and max_tokens are set aside; raise context_tokens or lower max_tokens"
        )
    lines = [render(m) for m in subject.messages]
    costs = [int(c) for c in counter.count(lines)]
    cut = []
    for i, m in enumerate(subject.messages):
        text = m.text
        while costs[i] + 1 > budget:
            keep = max(1, int(len(text) * (budget - 1) / (costs[i] + 1) * 0.9))
            text = text[:keep] if keep < len(text) else text[:-1]
            lines[i] = render(m, text + " [...]")
            costs[i] = int(counter.count([lines[i]])[0])
        if text != m.text:
            cut.append(m.id)
    return History(tuple(lines), tuple(chunk_spans(costs, budget)), tuple(cut))


def person_of(subject: Subject) -> str:
    """The person under study: the first listed speaker, else the first user's name."""
    if subject.speakers:
        return subject.speakers[0]
    return next((m.speaker for m in subject.messages if m.role == "user"), subject.id)


# -- merging and scoring ---------------------------------------------------------------------


def records(rec: Reconstruction) -> dict[str, list[rm.Record]]:
    """A reply's profile and persona as (field, statement) records."""
    return {
        "profile": [(c.field, c.statement) for c in rec.profile],
        "persona": [(e.dimension, e.statement) for e in rec.persona],
    }


def gold_records(subject: Subject) -> dict[str, list[rm.Record]]:
    """The released profile and persona as (field, statement) records."""
    return {
        "profile": [(c.field, c.statement) for c in subject.profile],
        "persona": [(e.dimension, e.statement) for e in subject.persona],
    }


def to_release(
    subject: Subject, written: Reconstruction
) -> tuple[list[ProfileClaim], list[PersonaEntry], int]:
    """The reply as release-format records; ids that name no message of the subject are
    dropped and counted, unreadable dates left empty."""
    known = {m.id for m in subject.messages}
    dropped = 0

    def ids(refs: list[str]) -> list[str]:
        nonlocal dropped
        kept = [i for i in refs if i in known]
        dropped += len(refs) - len(kept)
        return kept

    def when(text: str | None) -> datetime | None:
        try:
            return datetime.fromisoformat(text) if text else None
        except ValueError:
            return None

    profile = [
        ProfileClaim(
            field=c.field,
            statement=c.statement,
            confidence=c.confidence,
            valid_from=when(c.valid_from),
            valid_to=when(c.valid_to),
            evidence_ids=ids(c.evidence_ids),
        )
        for c in written.profile
    ]
    persona = [
        PersonaEntry(
            dimension=e.dimension,
            statement=e.statement,
            hypothesis=e.hypothesis,
            grounds=ids(e.grounds),
        )
        for e in written.persona
    ]
    return profile, persona, dropped


def merge(parts: Sequence[Reconstruction]) -> Reconstruction:
    """The chunks' replies concatenated; a record of a later chunk that restates one kept
    from an earlier chunk is dropped: the later chunk's records are matched one-to-one to
    the kept ones (the lexical rule at DEDUPE_THRESHOLD), and the matched ones go. Records
    of one reply are all kept, so two near-duplicates a reply states stay two records."""
    dedupe = rm.lexical(DEDUPE_THRESHOLD)
    profile: list[ClaimReply] = []
    persona: list[PersonaReply] = []
    for part in parts:
        kept_p = [(c.field, c.statement) for c in profile]
        new_p = [(c.field, c.statement) for c in part.profile]
        restated = {i for i, _, _ in dedupe.match(new_p, kept_p)}
        profile += [c for i, c in enumerate(part.profile) if i not in restated]
        kept_q = [(e.dimension, e.statement) for e in persona]
        new_q = [(e.dimension, e.statement) for e in part.persona]
        restated = {i for i, _, _ in dedupe.match(new_q, kept_q)}
        persona += [e for i, e in enumerate(part.persona) if i not in restated]
    return Reconstruction(profile=profile, persona=persona)


@functools.cache
def embedding_similarity(name: str = EMBEDDER) -> rm.StatementSimilarity:
    """The meaning matcher's statement similarity: cosines of sentence embeddings (`name`,
    MiniLM by default; `dialogbench.models.embedding`, offline), each statement embedded
    once per process. A `ValueError` saying how to install it when it is missing."""
    try:
        embedder = load_embedder(name)
    except ValueError as e:
        raise ValueError(f"--matcher meaning: {e} (or pass --matcher lexical)") from None
    vectors: dict[str, npt.NDArray[np.float64]] = {}

    def embed(texts: Sequence[str]) -> npt.NDArray[np.float64]:
        new = [t for t in dict.fromkeys(texts) if t not in vectors]
        if new:
            for t, v in zip(new, embedder.encode(new), strict=True):
                vectors[t] = np.asarray(v, dtype=np.float64)
        return np.array([vectors[t] for t in texts]).reshape(len(texts), -1)

    def similar(a: Sequence[str], b: Sequence[str]) -> npt.NDArray[np.float64]:
        sims: npt.NDArray[np.float64] = embed(a) @ embed(b).T
        return sims

    return similar


def _num(x: float) -> float | None:
    return None if math.isnan(x) else x


def history_span(subject: Subject) -> tuple[datetime, datetime] | None:
    """The first and last timestamps of the history (time zones dropped), if it has any."""
    times = [m.timestamp.replace(tzinfo=None) for m in subject.messages if m.timestamp]
    return (min(times), max(times)) if times else None


def score_row(
    run: int,
    subject: Subject,
    written: Reconstruction,
    matcher: rm.MatcherLike,
    matched: dict[str, list[tuple[int, int, float]]] | None = None,
) -> dict[str, Any]:
    """One scored (run, subject) record: what was written, matched pairs, figures, and how
    far each matched pair agrees beyond its statement (`rm.claim_agreement`). `matched`:
    the pairs already matched (by the judge), else `matcher` matches them."""
    pred, gold = records(written), gold_records(subject)
    if matched is None:
        matched = {k: rm.match(pred[k], gold[k], matcher) for k in rm.KINDS}
    counts = {k: rm.Counts(len(matched[k]), len(pred[k]), len(gold[k])) for k in rm.KINDS}
    counts["all"] = counts["profile"] + counts["persona"]
    profile, persona, _ = to_release(subject, written)
    span = history_span(subject)
    agreement = {
        "profile": [
            rm.claim_agreement(profile[i], subject.profile[j], span)
            for i, j, _ in matched["profile"]
        ],
        "persona": [
            rm.persona_agreement(persona[i], subject.persona[j]) for i, j, _ in matched["persona"]
        ],
    }
    return {
        "run": run,
        "subject": subject.id,
        "scored": True,
        "profile": [c.model_dump() for c in written.profile],
        "persona": [e.model_dump() for e in written.persona],
        "matched": matched,
        "agreement": {
            k: [{m: _num(v) for m, v in a.items()} for a in agreement[k]] for k in agreement
        },
        "counts": {k: asdict(c) for k, c in counts.items()},
        **{m: {k: _num(getattr(c, m)) for k, c in counts.items()} for m in METRICS},
    }


# -- running ---------------------------------------------------------------------------------


async def judged_row(
    run: int, subject: Subject, written: Reconstruction, judge: Model, config: ReconstructionConfig
) -> dict[str, Any]:
    """A (run, subject) scored by the judge's verdicts (`reconstruction_judge`); unscored,
    saying how many verdicts failed, when any could not be had."""
    pred, gold = records(written), gold_records(subject)
    base = config.matching()
    got = {
        k: await rj.judge_match(
            judge,
            pred[k],
            gold[k],
            base,
            config.verdict_config(),
            max_fixes=config.judge_max_fixes,
            tag=f"{TRACK}:match:run-{run}",
            top_k=config.judge_candidates,
        )
        for k in rm.KINDS
    }
    judged = {
        k: {"asked": g.asked, "identical": g.identical, "verdicts": g.verdicts, "pairs": g.pairs}
        for k, g in got.items()
    }
    failed = sum(len(g.failed) for g in got.values())
    if failed:
        return {"run": run, "subject": subject.id, "scored": False, "judged": judged,
                "failed_verdicts": failed}  # fmt: skip
    row = score_row(run, subject, written, base, {k: g.matched for k, g in got.items()})
    row["judged"] = judged
    row["dropped_ids"] = to_release(subject, written)[2]
    return row


def select_subjects(dataset: Dataset, limit: int | None) -> tuple[list[Subject], list[str]]:
    """Subjects with a released profile or persona (at most `limit`), and warnings."""
    have = [s for s in dataset.subjects if s.profile or s.persona]
    skipped = [s.id for s in dataset.subjects if not (s.profile or s.persona)]
    warnings = (
        [f"{len(skipped)} subject(s) without a profile or persona skipped: {', '.join(skipped)}"]
        if skipped
        else []
    )
    return have[:limit] if limit is not None else have, warnings


Unit = tuple[int, Subject]
"""A run index and a subject."""


@dataclass
class Histories:
    """What every unit shares: each subject's history, chunked to fit."""

    histories: dict[str, History]
    subjects: list[Subject]


class ReconstructionTrack(TrackBase[ReconstructionConfig, Unit]):
    """One unit per (run, subject): solve writes the profile and persona (all chunks as one
    batch), score matches them against the released ones (no judge)."""

    name = TRACK
    summary = (
        "The model writes each subject's profile and persona; field-level P/R/F1 against gold."
    )
    config_type = ReconstructionConfig
    roles = (
        model_role("the model that writes the profiles and personas"),
        judge_role(
            "the judge of claim matching under --matcher judge (none: the rules match)",
            fallback=None,
            required=False,
        ),
    )
    version = 2
    """2: chunk replies merged with one-to-one dedupe (a reply's own records all kept)."""
    judged = True
    """Scoring is the matching (deterministic rules, or the judge's verdicts under
    `--matcher judge`), kept apart from solving so a new `threshold` or matcher re-matches
    saved outputs without calling the model."""

    def configure(
        self, config: ReconstructionConfig, roles: frozenset[str]
    ) -> ReconstructionConfig:
        """A judge is given exactly when `--matcher judge` reads it."""
        if config.matcher == "judge" and "judge" not in roles:
            raise OptionError(
                "matcher",
                "--matcher judge asks a judge model about each candidate pair: pass "
                "--judge-model SPEC (with --judge-base-url for a server)",
            )
        if config.matcher != "judge" and "judge" in roles:
            raise OptionError(
                "matcher",
                f"--judge-model is read only by --matcher judge (this run: {config.matcher}): "
                "add --matcher judge (dialogbench score: --set matcher=judge), or leave out "
                "--judge-model",
            )
        return config

    def __init__(self, counter: TokenCounter | None = None) -> None:
        self.counter = counter
        """Overrides `config.tokenizer` (tests)."""

    def plan(self, data: Dataset, config: ReconstructionConfig) -> Plan[Unit]:
        subjects, warnings = select_subjects(data, config.limit)
        if not subjects:
            raise ValueError(f"no subject of {data.name} has a profile or persona to score")
        config.matching()  # a missing embedder is named before any model call
        counter = self.counter or make_counter(config.tokenizer)
        histories = {
            s.id: fit_history(s, counter, history_budget(counter, person_of(s), config))
            for s in subjects
        }
        for sid, h in histories.items():
            if h.cut:
                warnings.append(f"{sid}: {len(h.cut)} message(s) cut to fit the context budget")
        units = {f"run-{r}/{s.id}": (r, s) for r in range(config.runs) for s in subjects}
        return Plan(
            units,
            warnings=list(data.warnings) + warnings,
            resolved={
                "prompt_sha256": PROMPT_SHA256,
                "matcher_sha256": rm.MATCHER_SHA256,
                "meaning_sha256": rm.MEANING_SHA256,
                "embedder": EMBEDDER,
                "dedupe_threshold": DEDUPE_THRESHOLD,
                "counter": counter.name,
            },
            context=Histories(histories, subjects),
            stage_resolved=(
                {"score": {"match_prompt_sha256": MATCH_PROMPT_SHA256}}
                if config.matcher == "judge"
                else {}
            ),
        )

    async def solve(
        self, unit: Unit, models: Models, config: ReconstructionConfig, plan: Plan[Unit]
    ) -> Rows:
        r, s = unit
        h: History = plan.context.histories[s.id]
        prompts = [
            reconstruction_messages(person_of(s), h.lines[a:b], c + 1, len(h.spans))
            for c, (a, b) in enumerate(h.spans)
        ]
        mine = await ask_each(
            models["model"],
            prompts,
            config.reply_model(),
            config.reply_config(),
            max_fixes=config.max_fixes,
            tag=f"{TRACK}:run-{r}",
            sample=r,
        )
        written = None
        if all(got.value is not None for got in mine):
            merged = merge([got.value for got in mine if got.value is not None])
            written = {
                "profile": [c.model_dump() for c in merged.profile],
                "persona": [e.model_dump() for e in merged.persona],
            }
        return [
            {
                "run": r,
                "subject": s.id,
                "written": written,
                "chunks": len(h.spans),
                "cut_messages": list(h.cut),
                "attempts": [got.attempts for got in mine],
                "failed": [
                    {"chunk": c, "raw": got.raw, "error": got.error}
                    for c, got in enumerate(mine)
                    if got.value is None
                ],
            }
        ]

    async def score(
        self,
        unit: Unit,
        rows: Rows,
        models: Models,
        config: ReconstructionConfig,
        plan: Plan[Unit],
    ) -> Rows:
        r, s = unit
        (solved,) = rows
        row: dict[str, Any]
        if solved["written"] is None:
            row = {"run": r, "subject": s.id, "scored": False}
        elif config.matcher == "judge":
            written = _reconstruction(solved["written"])
            row = await judged_row(r, s, written, models["judge"], config)
        else:
            written = _reconstruction(solved["written"])
            row = score_row(r, s, written, config.matching())
            row["dropped_ids"] = to_release(s, written)[2]
        for key in ("chunks", "cut_messages", "attempts", "failed"):
            row[key] = solved[key]
        return [row]

    def judgments(self, rows: Rows) -> dict[str, float]:
        """Under `--matcher judge`: `run-R/SUBJECT/KIND/I-J` -> 1 when the judge read written
        record I and gold record J as the same claim, else 0 (the candidate pairs do not
        depend on the judge, so a panel's judges rate the same pairs)."""
        out: dict[str, float] = {}
        for r in rows:
            for kind, judged in (r.get("judged") or {}).items():
                for i, j, verdict in judged["pairs"]:
                    out[f"run-{r['run']}/{r['subject']}/{kind}/{i}-{j}"] = float(verdict == "same")
        return out

    def headline(self, outcome: Outcome) -> dict[str, float]:
        """Precision, recall and F1 of profile, persona and both pooled."""
        result: ReconstructionResult = outcome.result
        return {f"{k} {m}": result.summary[k][m].value for k in SUMMARY_KINDS for m in METRICS}

    def aggregate(self, plan: Plan[Unit], rows: Rows, config: ReconstructionConfig) -> Outcome:
        ctx: Histories = plan.context
        result = summarise(rows, ctx.subjects, config)
        files: dict[str, Any] = {"subjects.json": result.subjects, "unscored.json": result.unscored}
        by_id = {s.id: s for s in ctx.subjects}
        for row in rows:
            if row["scored"]:
                folder = f"written/run-{row['run']}/{row['subject']}"
                files.update(release_files(folder, by_id[row["subject"]], row))
        failures = {"unscored (run, subject) pairs": result.unscored["pairs"]}
        return outcome_of(result, files, failures)

    def show(self, outcome: Outcome, config: ReconstructionConfig) -> list[Table | str]:
        result: ReconstructionResult = outcome.result
        title = f"Reconstruction, {config.matcher} matching (95% intervals, subjects resampled)"
        main = {k: v for k, v in result.summary.items() if k not in AGREEMENT_ROWS.values()}
        extra = {k: v for k, v in result.summary.items() if k in AGREEMENT_ROWS.values()}
        columns = list(dict.fromkeys(c for row in main.values() for c in row))
        more = list(dict.fromkeys(c for row in extra.values() for c in row))
        return [
            summary_table(title, main, columns, row_label="file"),
            summary_table("Matched pairs beyond the statement", extra, more, row_label="pairs"),
            f"unscored: {result.unscored}",
        ]


RECONSTRUCTION = register(ReconstructionTrack())


def _reconstruction(written: dict[str, Any]) -> Reconstruction:
    """A saved output as a `Reconstruction` (its records as the reply model dumped them)."""
    return Reconstruction(
        profile=[ClaimReply.model_validate(c) for c in written["profile"]],
        persona=[PersonaReply.model_validate(e) for e in written["persona"]],
    )


def release_files(folder: str, subject: Subject, row: dict[str, Any]) -> dict[str, str]:
    """A scored row's output as release files (`profile.json`, `persona.json`, each only
    when it has records), by path in the run folder."""
    profile, persona, _ = to_release(subject, _reconstruction(row))
    files = {}
    if profile:
        claims = [c.model_dump(mode="json", exclude_defaults=True) for c in profile]
        files[f"{folder}/{PROFILE}"] = json.dumps({"claims": claims}, indent=2, ensure_ascii=False)
    if persona:
        entries = [e.model_dump(mode="json", exclude_defaults=True) for e in persona]
        files[f"{folder}/{PERSONA}"] = json.dumps(
            {"entries": entries}, indent=2, ensure_ascii=False
        )
    return files


# -- figures ---------------------------------------------------------------------------------


def summarise(
    rows: Rows, subjects: Sequence[Subject], config: ReconstructionConfig
) -> ReconstructionResult:
    """Figures from the scored rows (one per run and subject)."""
    matcher = config.matching()
    scored = [r for r in rows if r["scored"]]
    clusters = [r["subject"] for r in scored]
    summary: dict[str, dict[str, Estimate]] = {}
    for kind in SUMMARY_KINDS:
        values = [[_nan(r[m][kind]) for m in METRICS] for r in scored]
        est = bootstrap_means(
            np.array(values, dtype=float).reshape(-1, 3),
            clusters,
            n_boot=config.n_boot,
            seed=config.seed,
        )
        summary[kind] = dict(zip(METRICS, est, strict=True))
    agree_vals, agree_clusters = [], []
    per_subject: dict[str, dict[str, Any]] = {}
    for s in subjects:
        mine = [r for r in scored if r["subject"] == s.id]
        outputs = [_written(r) for r in mine]
        pairs = rm.pairwise_f1(outputs, matcher)
        agree_vals += pairs
        agree_clusters += [s.id] * len(pairs)
        per_subject[s.id] = {
            kind: {m: _mean([_nan(r[m][kind]) for r in mine]) for m in METRICS}
            for kind in SUMMARY_KINDS
        }
        per_subject[s.id][agreement_row(config)] = _mean(pairs)
        per_subject[s.id]["unscored runs"] = sum(
            1 for r in rows if r["subject"] == s.id and not r["scored"]
        )
    (agreement,) = bootstrap_means(
        np.array(agree_vals, dtype=float), agree_clusters, n_boot=config.n_boot, seed=config.seed
    )
    summary[agreement_row(config)] = {"f1": agreement}
    for kind, metrics in (("profile", rm.CLAIM_METRICS), ("persona", rm.PERSONA_METRICS)):
        pairs_of = [(r["subject"], a) for r in scored for a in r["agreement"][kind]]
        values = [[_nan(a[m]) for m in metrics] for _, a in pairs_of]
        est = bootstrap_means(
            np.array(values, dtype=float).reshape(-1, len(metrics)),
            [sid for sid, _ in pairs_of],
            n_boot=config.n_boot,
            seed=config.seed,
        )
        summary[AGREEMENT_ROWS[kind]] = dict(zip(metrics, est, strict=True))
    unscored = [r for r in rows if not r["scored"]]
    warnings = []
    if unscored:
        warnings.append(
            f"{len(unscored)} of {len(rows)} (run, subject) pairs unscored (a reply or a "
            "judge's verdict could not be had); left out of the figures"
        )
    if config.runs < 2:
        warnings.append("run agreement needs two runs or more (config.runs)")
    by_subject: dict[str, int] = {}
    for r in unscored:
        by_subject[r["subject"]] = by_subject.get(r["subject"], 0) + 1
    return ReconstructionResult(
        summary=summary,
        subjects=per_subject,
        unscored={"pairs": len(unscored), "of": len(rows), "by_subject": by_subject},
        warnings=warnings,
    )


def agreement_row(config: ReconstructionConfig) -> str:
    """The run-agreement row's name: under `--matcher judge` runs are matched against each
    other by the meaning matcher (the judge reads written records against gold only), and
    the row says so."""
    return "run agreement (meaning matcher)" if config.matcher == "judge" else "run agreement"


def _nan(x: float | None) -> float:
    return math.nan if x is None else float(x)


def _mean(xs: Sequence[float]) -> float | None:
    kept = [x for x in xs if not math.isnan(x)]
    return sum(kept) / len(kept) if kept else None


def _written(row: dict[str, Any]) -> dict[str, list[rm.Record]]:
    """A scored row's written profile and persona as records."""
    return {
        "profile": [(c["field"], c["statement"]) for c in row["profile"]],
        "persona": [(e["dimension"], e["statement"]) for e in row["persona"]],
    }


def compare_runs(
    a: Path,
    b: Path,
    threshold: float | None = None,
    n_boot: int = 2000,
    seed: int = 0,
    matcher: Literal["meaning", "lexical", "judge"] | None = None,
) -> Estimate:
    """Agreement between two systems: per subject both scored, the mean pooled F1 between
    every run of folder `a` and every run of folder `b`; then the mean over subjects with
    a 95% interval resampling subjects. `matcher` and `threshold` default to `a`'s."""
    recorded = json.loads((Path(a) / "manifest.json").read_text())["config"]
    config = ReconstructionConfig(
        matcher=matcher or recorded.get("matcher", "lexical"),
        threshold=threshold if threshold is not None else recorded.get("threshold"),
    )
    rule = config.matching()
    runs_a, runs_b = _outputs(Path(a)), _outputs(Path(b))
    values, clusters = [], []
    for sid in sorted(set(runs_a) & set(runs_b)):
        pairs = [rm.count_all(x, y, rule)["all"].f1 for x in runs_a[sid] for y in runs_b[sid]]
        kept = [p for p in pairs if not math.isnan(p)]
        if kept:
            values.append(sum(kept) / len(kept))
            clusters.append(sid)
    (est,) = bootstrap_means(np.array(values, dtype=float), clusters, n_boot=n_boot, seed=seed)
    return est


def _outputs(folder: Path) -> dict[str, list[dict[str, list[rm.Record]]]]:
    """Subject -> every usable output of the run folder, from its solved units
    (`parts/solved.jsonl`); a folder without them (an older run) is read from items.jsonl."""
    out: dict[str, list[dict[str, list[rm.Record]]]] = {}
    solved = RunFolder(folder).read("solved")
    if solved:
        for record in solved.values():
            for row in record.rows:
                if row.get("written") is not None:
                    out.setdefault(row["subject"], []).append(_written(row["written"]))
        return out
    for line in (folder / "items.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            if row["scored"]:
                out.setdefault(row["subject"], []).append(_written(row))
    return out
