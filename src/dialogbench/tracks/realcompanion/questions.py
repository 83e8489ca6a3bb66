"""Question track (RealCompanion question sets, LoCoMo QA): the model under test answers each
authored question from a chosen context, and a judge (plus, on LoCoMo, the official
scorer) scores the answers.

Systems (each is a context choice; a run answers with every configured one):

    full        every message before the question, when the prompt fits `context_tokens`
                (the estimated prompt plus `max_tokens` for the answer); otherwise the
                question falls back to `retrieval` and its row says so (`fell_back`)
    retrieval   BM25's top `k` messages before the question, shown in conversation order
    memory:NAME one per `--memory` spec: what the memory system recalled for the question
                (`tracks/realcompanion/recall.py`): its message memories as the message
                lines, in conversation order, and its text memories as a list of notes
                (`questions_prompts.memory_answer_messages`). Every memory system gets the
                same `Budget(k=memory_k, tokens=memory_tokens)`; `memory_tokens` defaults
                to `context_tokens` less the largest fixed part of a memory prompt in the
                run (system prompt, headings, question, task, template overhead and the
                answer's `max_tokens`), counted with the same tokenizer, each message as
                its rendered line. So `memory:full-context` shows exactly what `full` shows
                whenever the whole history fits that budget. The answer model, prompt,
                budget and judge are the same for every system (like for like).

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

One unit per system x question (`system/subject/question`): solve asks for its answer,
score judges and scores it; the runner writes the run folder (manifest, parts, usage):

RUN_DIR/items.jsonl     one record per question x system: context ids, fell_back, answer,
                        the judge fields (`judging.verdict_fields`), every score; a memory
                        system's rows also: memory_ids, memory_texts, memory_invalid_ids,
                        evidence_cited, evidence_share, memory_latency_ms, memory_error
RUN_DIR/summary.json    system -> facet (all, answerable, unanswerable, category=C) ->
                        metric -> {value, ci_low, ci_high, n}
RUN_DIR/counts.json     questions, unscored verdicts, failed answers, fallbacks per system
                        (a memory system: and memory_failed, questions whose subject's
                        replay failed: counted, exit status 3, done again on a rerun)
RUN_DIR/memory_costs.json  with --memory: the budget, the cost definitions, and per system
                        ingest time, recall latency p50/p95/p99, memories and context
                        tokens per query (`memory/costs.py`)
RUN_DIR/warnings.json   data repairs, unscored verdicts, questions left out of a score
"""

from __future__ import annotations

import math
import warnings as warnings_module
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from rich.table import Table

from dialogbench.data.model import Dataset, Question, Subject
from dialogbench.judging import is_unscored, verdict_fields
from dialogbench.judging.judge import Judge, Verdict
from dialogbench.judging.rubric import Rubric
from dialogbench.memory import Budget, Query, Recalled, query_of
from dialogbench.memory.costs import TokenCount
from dialogbench.models.model import Call, Model
from dialogbench.models.tokenizer import GGUFTokenizer, TokenCounter
from dialogbench.models.types import ModelError
from dialogbench.report.table import FLAG, summary_table
from dialogbench.retrieval.base import build_probes
from dialogbench.retrieval.bm25 import BM25Retriever
from dialogbench.runner import OptionError, Outcome, Plan, TrackBase, option, register
from dialogbench.runner import config as shared
from dialogbench.runner.roles import Role, judge_role, model_role
from dialogbench.runner.track import Models, Rows, Stage
from dialogbench.scoring.locomo import ADVERSARIAL, CATEGORY_NAMES, is_abstention, locomo_score
from dialogbench.scoring.locomo import set_f1 as set_f1_score
from dialogbench.stats.bootstrap import Estimate, bootstrap_means
from dialogbench.tracks.common import judged_values, outcome_of, stratified_limit
from dialogbench.tracks.realcompanion import questions_prompts as qp
from dialogbench.tracks.realcompanion import recall as rc

TRACK = "questions"
SYSTEMS = ("full", "retrieval")
METRICS = ("judge", "abstention_rule", "official_f1", "set_f1")
MEMORY_METRICS = ("evidence_cited",)
"""Figures only a memory system has: the share of questions whose memories cite evidence."""
MEMORY_PREFIX = "memory:"
MAX_K = 10_000
ANSWER_TAG, JUDGE_TAG = "questions:answer", "questions:judge"


def official_option() -> Any:
    """`official`: whether LoCoMo's own scorer scores (a score-stage option; answers too)."""
    return option(
        None,
        help="LoCoMo's official scorer (default: when the dataset or its categories are LoCoMo's)",
        stage="score",
    )


@dataclass(frozen=True)
class QuestionsConfig(shared.Sampled, shared.Judged):
    """Systems, context settings, the answer and judge settings, a limit (models are roles)."""

    systems: tuple[str, ...] = option(
        SYSTEMS, help="contexts: full (whole history if it fits), retrieval", choices=SYSTEMS
    )
    k: int = option(
        10,
        help="messages BM25 picks for retrieval (and for a full that falls back)",
        min=1,
        max=MAX_K,
    )
    context_tokens: int = option(
        4096,
        help="the model's context budget: full shows the whole history only within it",
        min=1,
    )
    tokenizer: str = option(
        "embedded", help="counts tokens for the budget: embedded (SmolLM2-135M) or a GGUF path"
    )
    memory: tuple[str, ...] = rc.memory_option()
    memory_k: int | None = rc.memory_k_option(None, "default: no cap")
    memory_tokens: int | None = rc.memory_tokens_option(
        "default: --context-tokens less the prompt's fixed parts"
    )
    memory_window: int | None = rc.memory_window_option()
    analyzer: str = rc.analyzer_option()
    limit: int | None = shared.limit("questions, drawn in turn from each category")
    seed: int = shared.seed("the limit draw, the answers and the bootstrap")
    n_boot: int = shared.n_boot()
    official: bool | None = official_option()
    temperature: float = shared.temperature(0.0, "sampling temperature of the answers")
    max_tokens: int = shared.tokens(64, "answer budget (tokens)", max=None)
    judge_max_tokens: int = shared.judge_tokens(512)
    max_fixes: int = shared.judge_fixes()


@dataclass(frozen=True)
class Asked:
    """One question with the contexts each system shows before it."""

    subject_id: str
    question: Question
    cutoff: int
    retrieved: tuple[int, ...]
    """BM25's top k positions before the question, in conversation order."""
    query: Query
    """What a memory system is asked at this question (with --memory)."""
    full_tokens: int | None = None
    """Estimated prompt tokens with the whole history (None when `full` is not run)."""
    speakers: tuple[str, ...] = ()
    """The people the question names (what a memory query is about)."""
    evidence: tuple[int, ...] = ()
    """Positions of the question's evidence messages."""


@dataclass
class QuestionsResult:
    """The track's figures as written to the run folder."""

    summary: dict[str, dict[str, dict[str, Estimate]]]
    counts: dict[str, dict[str, int]]
    """system -> questions, judge_unscored, answer_failed, no_gold, fell_back."""
    official: bool
    usage: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    memory_costs: dict[str, Any] | None = None
    """memory_costs.json, with --memory."""


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


def memory_fixed_tokens(q: Question, counter: TokenCounter, max_tokens: int) -> int:
    """`fixed_tokens` for a memory system's prompt: both blocks shown, with no message and
    one empty note (an upper bound on what is not a memory)."""
    empty = qp.memory_answer_messages([], [""], q.text, q.asked_at)
    texts = [m["content"] for m in empty]
    overhead = counter.overhead("system") + counter.overhead("user")
    return int(np.sum(counter.count(texts))) + overhead + max_tokens


def memory_counter(subject: Subject, counter: TokenCounter) -> TokenCount:
    """Tokens of a memory as the prompt shows it: a message memory (`memory_text`'s
    "speaker: text") as its rendered line plus its line break, a text memory as its note
    line plus its line break."""
    lines = line_tokens(subject, counter)
    known: dict[str, int] = {}
    for m, n in zip(subject.messages, lines, strict=True):
        key = f"{m.speaker}: {m.text}"
        known[key] = max(known.get(key, 0), int(n))

    def count(text: str) -> int:
        if text not in known:
            known[text] = int(counter.count([qp.note(text)])[0]) + 1
        return known[text]

    return count


def build_asked(
    subject: Subject,
    k: int,
    counter: TokenCounter | None,
    max_tokens: int,
    analyzer: str = "auto",
) -> list[Asked]:
    """Every question of `subject` with its BM25 context (with `analyzer`) and, given a
    counter, the estimated size of its full-history prompt."""
    probes = [p for p in build_probes(subject) if p.kind == "question"]
    if not probes:
        return []
    top = BM25Retriever(analyzer=analyzer).rank(subject, probes, k).top
    cum = None
    if counter is not None:
        cum = np.concatenate([[0], np.cumsum(line_tokens(subject, counter))])
    out = []
    for q, p, row in zip(subject.questions, probes, top, strict=True):
        found = tuple(sorted(int(t) for t in row if 0 <= t < p.cutoff))
        full = None
        if cum is not None and counter is not None:
            full = int(cum[p.cutoff]) + fixed_tokens(q, counter, max_tokens)
        query = query_of(p, asked_at=q.asked_at)
        out.append(
            Asked(subject.id, q, p.cutoff, found, query, full, p.speakers, p.reference_positions)
        )
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


Unit = tuple[str, Asked]
"""A system and one question it answers."""


@dataclass
class Context:
    """What every unit shares: the subjects' messages, whether the official scorer runs,
    and, with `--memory`, the recall stage."""

    subjects: dict[str, Subject]
    official: bool
    recalls: rc.Recalls | None = None
    memory: list[str] = field(default_factory=list)
    """The memory systems' names as systems (`memory:NAME`)."""


def fell_back_flags(counts: Mapping[str, Mapping[str, int]]) -> dict[str, str]:
    """`full` -> how often it fell back to `retrieval` (the history did not fit)."""
    flags: dict[str, str] = {}
    for system, c in counts.items():
        n, of = c.get("fell_back", 0), c.get("questions", 0)
        if n:
            same = " (all of them: its figures are retrieval's)" if n == of else ""
            flags[system] = (
                f"fell back to retrieval on {n} of {of} questions{same}: the history did not "
                "fit --context-tokens"
            )
    return flags


def memory_budget(asked: Sequence[Asked], counter: TokenCounter, config: QuestionsConfig) -> Budget:
    """The one budget of every memory system (see the module docstring)."""
    tokens = config.memory_tokens
    if tokens is None:
        fixed = max(memory_fixed_tokens(a.question, counter, config.max_tokens) for a in asked)
        tokens = config.context_tokens - fixed
        if tokens < 1:
            raise OptionError(
                "context_tokens",
                f"{config.context_tokens} leaves no room for memories (the prompt's fixed "
                f"parts take {fixed} tokens): raise it, or give --memory-tokens",
            )
    return Budget(k=config.memory_k, tokens=tokens)


def plan_recalls(
    asked: Sequence[Asked],
    subjects: dict[str, Subject],
    systems: Sequence[rc.System],
    budget: Budget,
    counter: TokenCounter,
    window: int | None = None,
    analyzer: str = "auto",
) -> rc.Recalls:
    """The recall stage: one replay per subject and system, of the subject's questions,
    ingesting `window` messages before each (None: the whole history)."""
    return rc.Recalls.plan(
        systems,
        [a.query for a in asked],
        subjects,
        budget,
        lambda subject: memory_counter(subject, counter),
        tokenizer=counter.name,
        window=window,
        analyzer=analyzer,
    )


class QuestionsTrack(TrackBase[QuestionsConfig, Unit]):
    """One unit per system x question: its answer (solve), then its verdict and scores."""

    name = TRACK
    summary = "Answer each question from the chosen context; judge against gold (and LoCoMo's F1)."
    config_type = QuestionsConfig
    roles: ClassVar[tuple[Role, ...]] = (
        model_role("the model under test (answers the questions)"),
        judge_role("the judge of the answers"),
    )
    judged = True
    stages: ClassVar[tuple[Stage, ...]] = (rc.RECALL,)

    def __init__(self, tokenizer: TokenCounter | None = None) -> None:
        self.tokenizer = tokenizer
        """Overrides `QuestionsConfig.tokenizer` (tests pass a deterministic counter)."""

    def plan(self, data: Dataset, config: QuestionsConfig) -> Plan[Unit]:
        if len(set(config.systems)) < len(config.systems):
            raise OptionError("systems", f"a system is named twice: {','.join(config.systems)}")
        memories = rc.resolve_systems(config.memory, config.seed, config.analyzer)
        counter: TokenCounter | None = None
        if "full" in config.systems or memories:
            counter = self.tokenizer or GGUFTokenizer(_gguf_path(config.tokenizer))
        full_counter = counter if "full" in config.systems else None
        subjects = {s.id: s for s in data.subjects}
        context = Context(subjects, uses_official(data, config))
        analyzer = rc.bm25_analyzer(config.analyzer, data.subjects)
        resolved: dict[str, Any] = {}
        try:
            asked = [
                a
                for s in data.subjects
                for a in build_asked(s, config.k, full_counter, config.max_tokens, config.analyzer)
            ]
            if not asked:
                raise ValueError(f"dataset {data.name!r} has no questions")
            if not any(a.question.answer is not None or not a.question.answerable for a in asked):
                raise ValueError(
                    f"dataset {data.name!r} has questions but no gold answers (and none "
                    "marked unanswerable): the question track scores against gold"
                )
            asked = limit_asked(asked, config.limit, config.seed)
            if memories:
                assert counter is not None  # kept open: the recalls count memory tokens
                budget = memory_budget(asked, counter, config)
                context.recalls = plan_recalls(
                    asked,
                    subjects,
                    memories,
                    budget,
                    counter,
                    rc.ingest_window(config),
                    config.analyzer,
                )
                context.memory = [MEMORY_PREFIX + s.name for s in memories]
                resolved = {
                    "memory budget": rc.budget_json(budget),
                    "memory systems": {MEMORY_PREFIX + s.name: s.spec for s in memories},
                    "memory prompt_sha256": qp.MEMORY_PROMPT_SHA256,
                }
        finally:
            if not memories and self.tokenizer is None and isinstance(counter, GGUFTokenizer):
                counter.close()  # ours to free
        units: dict[str, Unit] = {}
        for system in [*config.systems, *context.memory]:
            for a in asked:
                key = f"{system}/{a.subject_id}/{a.question.id}"
                if key in units:
                    raise ValueError(f"dataset {data.name!r}: question id {key!r} appears twice")
                units[key] = (system, a)
        resolved = {
            "prompt_sha256": qp.PROMPT_SHA256,
            "tokenizer name": counter.name if counter is not None else None,
            "bm25 analyzer": analyzer,
            **resolved,
        }
        plan = Plan(units, warnings=list(data.warnings), resolved=resolved, context=context)
        if context.recalls is not None:
            recalls = context.recalls
            needs = {
                key: [recalls.need(system.removeprefix(MEMORY_PREFIX), a.subject_id)]
                for key, (system, a) in units.items()
                if system in context.memory
            }
            recalls.into(plan, needs)
        return plan

    async def solve(
        self, unit: Unit, models: Models, config: QuestionsConfig, plan: Plan[Unit]
    ) -> Rows:
        ctx: Context = plan.context
        system, a = unit
        subject = ctx.subjects[a.subject_id]
        if ctx.recalls is not None and system in ctx.memory:
            name = system.removeprefix(MEMORY_PREFIX)
            got = ctx.recalls.recalled(plan, name, a.subject_id, a.question.id)
            return [await _answer_memory(system, a, subject, got, models["model"], config)]
        return [await _answer(system, a, subject, models["model"], config)]

    async def score(
        self, unit: Unit, rows: Rows, models: Models, config: QuestionsConfig, plan: Plan[Unit]
    ) -> Rows:
        ctx: Context = plan.context
        out = []
        for row in rows:
            row = {**row, **await judge_row(row, models["judge"], config)}
            out.append({**row, **score_row(row, ctx.official)})
        return out

    def judgments(self, rows: Rows) -> dict[str, float]:
        """`system/subject/question` -> the judge's score on [0, 1]."""
        return judged_values(
            rows, lambda r: f"{r['system']}/{r['subject']}/{r['question']}", "judge"
        )

    def aggregate(self, plan: Plan[Unit], rows: Rows, config: QuestionsConfig) -> Outcome:
        ctx: Context = plan.context
        parts: dict[str, Rows] = {s: [] for s in [*config.systems, *ctx.memory]}
        for row in rows:
            parts[row["system"]].append(row)
        result = summarise(parts, ctx.official, config)
        unscored = sum(c["judge_unscored"] for c in result.counts.values())
        memory_failed = sum(c.get("memory_failed", 0) for c in result.counts.values())
        files: dict[str, Any] = {
            "counts.json": {"official scorer": ctx.official, "counts": result.counts}
        }
        if ctx.recalls is not None:
            costs = ctx.recalls.costs(plan)
            files["memory_costs.json"] = costs
            result.memory_costs = costs
        failures = {
            "answers the judge left unscored": unscored,
            "questions whose memory system failed": memory_failed,
        }
        outcome = outcome_of(result, files, failures)
        outcome.flags = fell_back_flags(result.counts)
        if ctx.recalls is not None:
            outcome.flags |= rc.cut_flags(files["memory_costs.json"]["systems"], MEMORY_PREFIX)
        return outcome

    def show(self, outcome: Outcome, config: QuestionsConfig) -> list[Table | str]:
        result: QuestionsResult = outcome.result
        shown: list[Table | str] = []
        for system, facets in result.summary.items():
            title = f"Questions, context '{system}' (95% bootstrap intervals)"
            if system in outcome.flags:
                title += f"\n{FLAG} {system}: {outcome.flags[system]}"
            columns = list(dict.fromkeys(col for row in facets.values() for col in row))
            shown += [
                summary_table(title, facets, columns, row_label="questions"),
                f"counts: {result.counts.get(system, {})}",
            ]
        costs = (result.memory_costs or {}).get("systems", {})
        for name, c in costs.items():
            ms = c["recall_ms"]
            shown.append(
                f"memory:{name}: recall p50 {_ms(ms['p50'])} / p95 {_ms(ms['p95'])} ms, "
                f"ingest {_ms(c['ingest_ms_per_message'])} ms per message, "
                f"{_ms(c['memories_per_query'])} memories and "
                f"{_ms(c['context_tokens_per_query'])} context tokens per question"
            )
        return shown

    def headline(self, outcome: Outcome) -> dict[str, float]:
        """The judge score per system: over all, answerable and unanswerable questions."""
        result: QuestionsResult = outcome.result
        return {
            f"{system} judge {facet}": facets[facet]["judge"].value
            for system, facets in result.summary.items()
            for facet in ("all", "answerable", "unanswerable")
            if facet in facets
        }


QUESTIONS = register(QuestionsTrack())


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _row(system: str, a: Asked, shown: str, *, fell_back: bool) -> dict[str, Any]:
    """The fields every answer row starts with: the question and what was shown."""
    return {
        "system": system,
        "subject": a.subject_id,
        "question": a.question.id,
        "category": a.question.category,
        "answerable": a.question.answerable,
        "text": a.question.text,
        "gold": a.question.answer,
        "shown": shown,
        "fell_back": fell_back,
        "full_tokens_est": a.full_tokens,
    }


async def _answer(
    system: str, a: Asked, subject: Subject, model: Model, config: QuestionsConfig
) -> dict[str, Any]:
    """One answer to one question; the row records what was shown."""
    mode, positions = shown(a, system, config.context_tokens)
    q, msgs = a.question, subject.messages
    lines = [qp.render(msgs[i]) for i in positions]
    call = Call(qp.answer_messages(lines, mode, q.text, q.asked_at), config.generate_config())
    row = _row(system, a, mode, fell_back=system == "full" and mode != "full")
    row["context_ids"] = [msgs[i].id for i in positions]
    (got,) = await model.generate_many([call], tag=ANSWER_TAG)
    failed = isinstance(got, ModelError)
    row["answer"] = None if isinstance(got, ModelError) else got.text.strip()
    row["answer_error"] = str(got) if failed else None
    return row


async def _answer_memory(
    system: str,
    a: Asked,
    subject: Subject,
    got: Recalled | str,
    model: Model,
    config: QuestionsConfig,
) -> dict[str, Any]:
    """One answer from what a memory system recalled (or a row saying it failed)."""
    q = a.question
    row = _row(system, a, "memory", fell_back=False)
    if isinstance(got, str):
        return {
            **row,
            "context_ids": [],
            **rc.failed_fields(got),
            "answer": None,
            "answer_error": None,
        }
    view = rc.shown_of(got, subject, a.evidence)
    row |= {"context_ids": [m.id for m in view.messages], **view.fields}
    lines = [qp.render(m) for m in view.messages]
    messages = qp.memory_answer_messages(lines, view.notes, q.text, q.asked_at)
    (out,) = await model.generate_many([Call(messages, config.generate_config())], tag=ANSWER_TAG)
    failed = isinstance(out, ModelError)
    row["answer"] = None if isinstance(out, ModelError) else out.text.strip()
    row["answer_error"] = str(out) if failed else None
    return row


async def judge_row(
    row: dict[str, Any],
    model: Model,
    config: QuestionsConfig,
    rubric: Rubric | None = None,
    tag: str = JUDGE_TAG,
) -> dict[str, Any]:
    """The verdict fields of one answered row: correctness against the gold when
    answerable, abstention when not (raw and error when unscored). `rubric` stands in for
    the correctness rubric (the answers track judges under a lenient and a strict one)."""
    if rubric is None or not row["answerable"]:
        rubric = qp.CORRECTNESS_RUBRIC if row["answerable"] else qp.ABSTENTION_RUBRIC
    if row["answer"] is None:
        why = "the memory system failed" if row.get("memory_error") else "the answer call failed"
        return judge_fields(None, rubric, skipped=why)
    if row["answerable"] and row["gold"] is None:
        return judge_fields(None, rubric, skipped="no gold answer")
    judge = Judge(model, rubric, config.judge_config(), max_fixes=config.max_fixes)
    reference = row["gold"] if row["answerable"] else None
    verdict = await judge.score(row["answer"], reference, row["text"], tag=tag)
    return judge_fields(verdict, rubric)


def judge_fields(v: Verdict | None, rubric: Rubric, skipped: str | None = None) -> dict[str, Any]:
    """A row's common judge fields (`judging.verdict_fields`) and `judge`, the rubric's one
    dimension scaled to [0, 1] (None unless scored)."""
    fields = verdict_fields(v, skipped=skipped)
    dim = rubric.dimensions[0]
    scores = fields["judge_scores"]
    scaled = None if scores is None else (scores[dim.name] - dim.low) / (dim.high - dim.low)
    return {**fields, "judge": scaled}


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
    parts: dict[str, list[dict[str, Any]]],
    official: bool,
    config: QuestionsConfig,
    metrics: Sequence[str] | None = None,
) -> QuestionsResult:
    """Figures from the stored parts (one per system): `metrics` (default: the judge's and
    the rules', the official ones when `official`) per facet."""
    if metrics is None:
        metrics = [m for m in METRICS if official or m not in ("official_f1", "set_f1")]
    summary: dict[str, dict[str, dict[str, Estimate]]] = {}
    counts: dict[str, dict[str, int]] = {}
    warnings: list[str] = []
    for system, rows in parts.items():
        memory = system.startswith(MEMORY_PREFIX)
        mine = [*metrics, *MEMORY_METRICS] if memory else list(metrics)
        facets = _facets(rows)
        cols = np.column_stack([_column(rows, m) for m in mine]) if rows else np.zeros((0, 0))
        summary[system] = {}
        for name, mask in facets.items():
            with warnings_module.catch_warnings():  # a metric that applies to none: NaN
                warnings_module.simplefilter("ignore", RuntimeWarning)
                ests = bootstrap_means(cols[mask], n_boot=config.n_boot, seed=config.seed)
            summary[system][name] = dict(zip(mine, ests, strict=True))
        answered = [r for r in rows if r["answer"] is not None]
        memory_failed = sum(1 for r in rows if r.get("memory_error"))
        c = {
            "questions": len(rows),
            "answer_failed": len(rows) - len(answered) - memory_failed,
            "judge_unscored": sum(1 for r in answered if is_unscored(r)),
            "no_gold": sum(1 for r in answered if r["answerable"] and r["gold"] is None),
            "fell_back": sum(1 for r in rows if r["fell_back"]),
        }
        if official:
            c["official_not_applicable"] = sum(1 for r in answered if r.get("official_f1") is None)
        if memory:
            c["memory_failed"] = memory_failed
            if memory_failed:
                warnings.append(
                    f"{system}: the memory system failed on {memory_failed} questions' "
                    "subjects; left out (rerun to retry; the errors are in items.jsonl)"
                )
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
