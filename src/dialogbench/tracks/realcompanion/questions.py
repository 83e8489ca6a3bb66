"""Question track (RealCompanion question sets, LoCoMo QA): the model under test answers each
authored question from a chosen context, and a judge (plus, on LoCoMo, the official
scorer) scores the answers.

Systems (each is a context choice; a run answers with every configured one):

    full        every message before the question, when the prompt fits `context_tokens`
                (the estimated prompt plus `max_tokens` for the answer); otherwise the
                question falls back to `retrieval` and its row says so (`fell_back`)
    retrieval   BM25's top `k` messages before the question, shown in conversation order

Prompt tokens are estimated with a tokenizer (default: the embedded SmolLM2's): each
rendered message line, plus one token per line break, plus the fixed parts of the prompt
and the chat template's overhead per message.

Scores per question (all on [0, 1]; NaN where a score does not apply or went unscored):

    judge            answerable: the judge's `correct` (0-2) / 2 against the gold answer;
                     unanswerable: the judge's `abstains` (0/1). Temperature 0. Unscored
                     verdicts are kept with raw text and error, counted, never 0.
    abstention_rule  unanswerable only: LoCoMo's rule (the answer contains "no information
                     available" or "not mentioned"), on every dataset
    official_f1      LoCoMo's official per-category score (`scoring.locomo.locomo_score`),
                     when the dataset is LoCoMo or all its categories are LoCoMo's
                     (`QuestionsConfig.official` forces it on or off); left out for a
                     question whose answerability contradicts its category (an answerable
                     "adversarial" question or an unanswerable other one)
    set_f1           set-based token F1 (NOT the official metric), where official_f1 is
                     computed and the category is not adversarial

RUN_DIR/manifest.json   dataset, config, model and judge settings, prompt sha256, tokenizer
RUN_DIR/items.jsonl     one record per question x system: context ids, fell_back, answer,
                        verdict (raw + error when unscored), every score
RUN_DIR/summary.json    system -> facet (all, answerable, unanswerable, category=C) ->
                        metric -> {value, ci_low, ci_high, n}
RUN_DIR/counts.json     questions, unscored verdicts, failed answers, fallbacks per system
RUN_DIR/usage.json      per system: calls and tokens of the answers and of the judge
RUN_DIR/warnings.json   data repairs, unscored verdicts, questions left out of a score
RUN_DIR/parts/          one per system; a rerun of the same run keeps them
"""

from __future__ import annotations

import asyncio
import math
import warnings as warnings_module
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from dialogbench.data.model import Dataset, Question, Subject
from dialogbench.judging.judge import DEFAULT_JUDGE_CONFIG, Judge, Verdict
from dialogbench.judging.rubric import Rubric
from dialogbench.models.model import Call, Model
from dialogbench.models.tokenizer import GGUFTokenizer, TokenCounter
from dialogbench.models.types import GenerateConfig, ModelError
from dialogbench.report.run import Progress, RunDir, dataset_info, to_json
from dialogbench.retrieval.base import build_probes
from dialogbench.retrieval.bm25 import BM25Retriever
from dialogbench.scoring.locomo import ADVERSARIAL, CATEGORY_NAMES, is_abstention, locomo_score
from dialogbench.scoring.locomo import set_f1 as set_f1_score
from dialogbench.stats.bootstrap import Estimate, bootstrap_means
from dialogbench.tracks.common import (
    ModelSettings,
    spent,
    stratified_limit,
    usage_by_part,
    write_usage,
)
from dialogbench.tracks.realcompanion import questions_prompts as qp

TRACK = "questions"
SYSTEMS = ("full", "retrieval")
METRICS = ("judge", "abstention_rule", "official_f1", "set_f1")
ANSWER_TAG, JUDGE_TAG = "questions:answer", "questions:judge"


@dataclass(frozen=True)
class QuestionsConfig:
    """Systems, context settings, the model and the judge with their settings, a limit."""

    systems: tuple[str, ...] = SYSTEMS
    k: int = 10
    """Messages BM25 picks for `retrieval` (and for a `full` question that falls back)."""
    context_tokens: int = 4096
    """The model's context budget: `full` shows the whole history only within it."""
    tokenizer: str = "embedded"
    """Counts tokens for the budget: `embedded` (SmolLM2-135M) or the path of a GGUF file."""
    limit: int | None = None
    """At most this many questions, drawn in turn from each category (seeded)."""
    seed: int = 0
    n_boot: int = 2000
    official: bool | None = None
    """LoCoMo's official scorer: None = when the dataset is LoCoMo or its categories are."""
    models: ModelSettings = field(default_factory=ModelSettings)
    """The model under test and the judge (none set: the model under test judges)."""
    temperature: float = 0.0
    max_tokens: int = 64
    judge_max_tokens: int = 512
    max_fixes: int = 2

    def __post_init__(self) -> None:
        bad = [s for s in self.systems if s not in SYSTEMS]
        if bad or not self.systems:
            raise ValueError(f"systems must be among {', '.join(SYSTEMS)}, got {self.systems}")
        if self.k < 1 or self.context_tokens < 1:
            raise ValueError("k and context_tokens must be positive")

    def answer_config(self) -> GenerateConfig:
        return GenerateConfig(
            temperature=self.temperature, max_tokens=self.max_tokens, seed=self.seed
        )

    def judge_config(self) -> GenerateConfig:
        return replace(DEFAULT_JUDGE_CONFIG, max_tokens=self.judge_max_tokens)


@dataclass(frozen=True)
class Asked:
    """One question with the contexts each system shows before it."""

    subject_id: str
    question: Question
    cutoff: int
    retrieved: tuple[int, ...]
    """BM25's top k positions before the question, in conversation order."""
    full_tokens: int | None = None
    """Estimated prompt tokens with the whole history (None when `full` is not run)."""


@dataclass
class QuestionsResult:
    """The track's figures as written to the run folder."""

    summary: dict[str, dict[str, dict[str, Estimate]]]
    counts: dict[str, dict[str, int]]
    """system -> questions, judge_unscored, answer_failed, no_gold, fell_back."""
    official: bool
    usage: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


# -- questions and contexts -----------------------------------------------------------------


def uses_official(dataset: Dataset, config: QuestionsConfig) -> bool:
    """Whether LoCoMo's official scorer applies (see `QuestionsConfig.official`)."""
    if config.official is not None:
        return config.official
    cats = {q.category for s in dataset.subjects for q in s.questions}
    return dataset.name == "locomo" or (bool(cats) and cats <= set(CATEGORY_NAMES))


def official_applies(q: Question) -> bool:
    """A LoCoMo category whose rule fits the question: adversarial iff unanswerable, and a
    gold answer unless adversarial."""
    if q.category not in CATEGORY_NAMES or (q.category == ADVERSARIAL) == q.answerable:
        return False
    return q.category == ADVERSARIAL or q.answer is not None


def line_tokens(subject: Subject, counter: TokenCounter) -> np.ndarray:
    """Tokens of each rendered message line, plus one for its line break."""
    return np.asarray(counter.count([qp.render(m) for m in subject.messages]), np.int64) + 1


def fixed_tokens(q: Question, counter: TokenCounter, max_tokens: int) -> int:
    """Tokens of the prompt without messages, the template overhead and the answer."""
    empty = qp.answer_messages([], "full", q.text, q.asked_at)
    texts = [m["content"] for m in empty]
    overhead = counter.overhead("system") + counter.overhead("user")
    return int(np.sum(counter.count(texts))) + overhead + max_tokens


def build_asked(
    subject: Subject, k: int, counter: TokenCounter | None, max_tokens: int
) -> list[Asked]:
    """Every question of `subject` with its BM25 context and, given a counter, the estimated
    size of its full-history prompt."""
    probes = [p for p in build_probes(subject) if p.kind == "question"]
    if not probes:
        return []
    top = BM25Retriever().rank(subject, probes, k).top
    cum = None
    if counter is not None:
        cum = np.concatenate([[0], np.cumsum(line_tokens(subject, counter))])
    out = []
    for q, p, row in zip(subject.questions, probes, top, strict=True):
        found = tuple(sorted(int(t) for t in row if 0 <= t < p.cutoff))
        full = None
        if cum is not None and counter is not None:
            full = int(cum[p.cutoff]) + fixed_tokens(q, counter, max_tokens)
        out.append(Asked(subject.id, q, p.cutoff, found, full))
    return out


def limit_asked(asked: Sequence[Asked], limit: int | None, seed: int) -> list[Asked]:
    """At most `limit` questions, taken in turn from each category."""
    return stratified_limit(asked, lambda a: a.question.category, limit, seed)


def shown(a: Asked, system: str, budget: int) -> tuple[str, tuple[int, ...]]:
    """What `system` shows for `a`: the mode actually used and the message positions."""
    if system == "full" and a.full_tokens is not None and a.full_tokens <= budget:
        return "full", tuple(range(a.cutoff))
    return "retrieval", a.retrieved


# -- running --------------------------------------------------------------------------------


def _gguf_path(spec: str) -> Path | None:
    return None if spec == "embedded" else Path(spec)


def run_questions(
    dataset: Dataset,
    out: Path,
    config: QuestionsConfig = QuestionsConfig(),
    model: Model | None = None,
    progress: Progress | None = None,
    judge_model: Model | None = None,
    tokenizer: TokenCounter | None = None,
) -> QuestionsResult:
    """Answer every question with every system, judge and score the answers, write the run
    folder and return the figures. Finished systems of the same run are kept.

    `model` (else one built from `config.models.model`, with the response cache) answers;
    `judge_model` (else `config.models.judge_model`, else the model under test) judges.
    `tokenizer` overrides `config.tokenizer` (tests pass a deterministic counter).
    """
    if model is None and config.models.model is None:
        raise ValueError(
            "the question track needs a model: set QuestionsConfig.models.model or pass model="
        )
    counter: TokenCounter | None = None
    if "full" in config.systems:
        counter = tokenizer or GGUFTokenizer(_gguf_path(config.tokenizer))
    try:
        asked = [
            a
            for s in dataset.subjects
            for a in build_asked(s, config.k, counter, config.max_tokens)
        ]
    finally:
        if tokenizer is None and isinstance(counter, GGUFTokenizer):
            counter.close()  # ours to free
    if not asked:
        raise ValueError(f"dataset {dataset.name!r} has no questions")
    if not any(a.question.answer is not None or not a.question.answerable for a in asked):
        raise ValueError(
            f"dataset {dataset.name!r} has questions but no gold answers (and none marked "
            "unanswerable): the question track scores against gold"
        )
    asked = limit_asked(asked, config.limit, config.seed)
    official = uses_official(dataset, config)
    run = RunDir(out)
    done = run.start(
        TRACK,
        dataset_info(dataset),
        config,
        dataset.warnings,
        {
            **config.models.recorded(model, judge_model),
            "prompt_sha256": qp.PROMPT_SHA256,
            "tokenizer name": counter.name if counter is not None else None,
            "official scorer": official,
        },
    )
    todo = [s for s in config.systems if s not in done]
    subjects = {s.id: s for s in dataset.subjects}
    asyncio.run(_work(run, todo, asked, subjects, official, config, (model, judge_model), progress))
    result = summarise({s: run.read_part(s) for s in config.systems}, official, config)
    result.usage = usage_by_part(run, config.systems)
    result.warnings = list(dataset.warnings) + result.warnings
    files: dict[str, Any] = {
        "summary.json": to_json(result.summary),
        "counts.json": {"official scorer": official, "counts": result.counts},
        "usage.json": result.usage,
        "warnings.json": {"warnings": result.warnings},
    }
    run.finish(config.systems, files)
    return result


async def _work(
    run: RunDir,
    todo: Sequence[str],
    asked: Sequence[Asked],
    subjects: dict[str, Subject],
    official: bool,
    config: QuestionsConfig,
    models: tuple[Model | None, Model | None],
    progress: Progress | None,
) -> None:
    """Answer, judge and score each system not yet done; one part (and its usage) each."""
    if todo:
        async with config.models.opened(*models) as (model, judger):
            for i, system in enumerate(todo):
                if progress:
                    progress(system, i, len(todo))
                before = (model.ledger.totals(ANSWER_TAG), judger.ledger.totals(JUDGE_TAG))
                rows = await _answer(system, asked, subjects, model, config)
                await _judge(rows, judger, config)
                for row in rows:
                    row.update(score_row(row, official))
                usage = {
                    "answer": spent(model, ANSWER_TAG, before[0]),
                    "judge": spent(judger, JUDGE_TAG, before[1]),
                }
                write_usage(run, system, usage)
                run.write_part(system, rows)
    if progress:
        progress("summary", len(todo), len(todo))


async def _answer(
    system: str,
    asked: Sequence[Asked],
    subjects: dict[str, Subject],
    model: Model,
    config: QuestionsConfig,
) -> list[dict[str, Any]]:
    """One answer per question, in one batch; rows record what was shown."""
    rows: list[dict[str, Any]] = []
    calls: list[Call] = []
    for a in asked:
        mode, positions = shown(a, system, config.context_tokens)
        q, msgs = a.question, subjects[a.subject_id].messages
        lines = [qp.render(msgs[i]) for i in positions]
        calls.append(
            Call(qp.answer_messages(lines, mode, q.text, q.asked_at), config.answer_config())
        )
        rows.append(
            {
                "system": system,
                "subject": a.subject_id,
                "question": q.id,
                "category": q.category,
                "answerable": q.answerable,
                "text": q.text,
                "gold": q.answer,
                "shown": mode,
                "fell_back": system == "full" and mode != "full",
                "full_tokens_est": a.full_tokens,
                "context_ids": [msgs[i].id for i in positions],
            }
        )
    outs = await model.generate_many(calls, tag=ANSWER_TAG)
    for row, got in zip(rows, outs, strict=True):
        failed = isinstance(got, ModelError)
        row["answer"] = None if isinstance(got, ModelError) else got.text.strip()
        row["answer_error"] = str(got) if failed else None
    return rows


async def _judge(rows: list[dict[str, Any]], model: Model, config: QuestionsConfig) -> None:
    """Judge every answered question: correctness against the gold when answerable,
    abstention when not. Rows gain the verdict (raw and error when unscored)."""
    judges = {
        True: Judge(
            model, qp.CORRECTNESS_RUBRIC, config.judge_config(), max_fixes=config.max_fixes
        ),
        False: Judge(
            model, qp.ABSTENTION_RUBRIC, config.judge_config(), max_fixes=config.max_fixes
        ),
    }

    async def one(row: dict[str, Any]) -> Verdict | None:
        if row["answer"] is None or (row["answerable"] and row["gold"] is None):
            return None
        judge = judges[bool(row["answerable"])]
        reference = row["gold"] if row["answerable"] else None
        return await judge.score(row["answer"], reference, row["text"], tag=JUDGE_TAG)

    verdicts = await asyncio.gather(*(one(r) for r in rows))
    for row, v in zip(rows, verdicts, strict=True):
        row.update(verdict_fields(v, judges[bool(row["answerable"])].rubric))


def verdict_fields(v: Verdict | None, rubric: Rubric) -> dict[str, Any]:
    """A row's judge fields; `judge` is the verdict scaled to [0, 1], None when unscored."""
    if v is None:
        return {"judged": False, "judge": None}
    dim = rubric.dimensions[0]
    out: dict[str, Any] = {
        "judged": v.scored,
        "judge_rubric": v.rubric,
        "judge_model": v.judge,
        "judge_raw_score": None,
        "judge": None,
        "judge_reason": v.reason,
        "judge_attempts": v.attempts,
    }
    if v.scores is not None:
        raw = v.scores[dim.name]
        out.update(judge_raw_score=raw, judge=(raw - dim.low) / (dim.high - dim.low))
    else:
        out.update(judge_raw=v.raw, judge_error=v.error)
    return out


def score_row(row: dict[str, Any], official: bool) -> dict[str, float | None]:
    """The rule-based scores of one answered row (None where a score does not apply)."""
    answer: str | None = row["answer"]
    scores: dict[str, float | None] = {
        "abstention_rule": None,
        "official_f1": None,
        "set_f1": None,
    }
    if answer is None:
        return scores
    if not row["answerable"]:
        scores["abstention_rule"] = 1.0 if is_abstention(answer) else 0.0
    q = Question(
        id=row["question"],
        category=row["category"],
        text=row["text"],
        answer=row["gold"],
        answerable=row["answerable"],
    )
    if official and official_applies(q):
        scores["official_f1"] = locomo_score(answer, q.answer, q.category)
        if q.category != ADVERSARIAL and q.answer is not None:
            scores["set_f1"] = set_f1_score(answer, q.answer)
    return scores


# -- figures --------------------------------------------------------------------------------


def _facets(rows: Sequence[dict[str, Any]]) -> dict[str, np.ndarray]:
    answerable = np.array([bool(r["answerable"]) for r in rows], bool)
    cats = np.array([r["category"] for r in rows], dtype=object)
    out = {"all": np.ones(len(rows), bool), "answerable": answerable, "unanswerable": ~answerable}
    for c in sorted(set(cats.tolist())):
        out[f"category={c}"] = cats == c
    return out


def _column(rows: Sequence[dict[str, Any]], metric: str) -> np.ndarray:
    return np.array([math.nan if r.get(metric) is None else r[metric] for r in rows], float)


def summarise(
    parts: dict[str, list[dict[str, Any]]], official: bool, config: QuestionsConfig
) -> QuestionsResult:
    """Figures from the stored parts (one per system)."""
    metrics = [m for m in METRICS if official or m not in ("official_f1", "set_f1")]
    summary: dict[str, dict[str, dict[str, Estimate]]] = {}
    counts: dict[str, dict[str, int]] = {}
    warnings: list[str] = []
    for system, rows in parts.items():
        facets = _facets(rows)
        cols = np.column_stack([_column(rows, m) for m in metrics]) if rows else np.zeros((0, 0))
        summary[system] = {}
        for name, mask in facets.items():
            with warnings_module.catch_warnings():  # a metric that applies to none: NaN
                warnings_module.simplefilter("ignore", RuntimeWarning)
                ests = bootstrap_means(cols[mask], n_boot=config.n_boot, seed=config.seed)
            summary[system][name] = dict(zip(metrics, ests, strict=True))
        answered = [r for r in rows if r["answer"] is not None]
        c = {
            "questions": len(rows),
            "answer_failed": len(rows) - len(answered),
            "judge_unscored": sum(1 for r in answered if r.get("judge_rubric") and not r["judged"]),
            "no_gold": sum(1 for r in answered if r["answerable"] and r["gold"] is None),
            "fell_back": sum(1 for r in rows if r["fell_back"]),
        }
        if official:
            c["official_not_applicable"] = sum(1 for r in answered if r.get("official_f1") is None)
        counts[system] = c
        if c["judge_unscored"]:
            warnings.append(
                f"{system}: {c['judge_unscored']} of {len(rows)} verdicts unscored (kept in "
                "items.jsonl with raw and error, left out of the judge score)"
            )
        if c["answer_failed"]:
            warnings.append(f"{system}: {c['answer_failed']} answer calls failed; left out")
        if c["no_gold"]:
            warnings.append(f"{system}: {c['no_gold']} answerable questions have no gold answer")
        if official and c["official_not_applicable"]:
            warnings.append(
                f"{system}: {c['official_not_applicable']} questions left out of official_f1 "
                "(category not LoCoMo's, or answerability contradicts it)"
            )
    return QuestionsResult(summary=summary, counts=counts, official=official, warnings=warnings)
