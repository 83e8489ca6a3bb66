"""Answers produced elsewhere, re-judged here (`dialogbench score questions --answers FILE`).

A file of answers to a dataset's questions (`answers_file`: our JSONL schema or mem0's
result files) is matched to the questions and scored as the question track scores its own
answers, with its scoring (`questions.judge_row`, `score_row`, `summarise`): under two
rubrics side by side (`judging.qa_rubrics`: lenient and strict; an unanswerable question
is judged for abstention under both), LoCoMo's official F1 where it applies, and the
judge's calibration: its false-accept rate on known-wrong answers (another question's gold
answer from the same conversation, same category where there is one) and false-reject rate
on known-right ones (the gold itself), per rubric.

No model answers anything: solve reads the file's answer into a row, score judges it, so
the runner gives the run its folder, manifest (the file's sha256 and format are part of
the config, the systems and models it names are recorded), resume, and `dialogbench score
RUN_DIR` re-judges it.

Without a judge (no `--judge-model`, or `--no-judge`) no model is called at all: each answer
gets LoCoMo's official scores alone, its token F1 (`official_f1`) and exact match
(`exact_match`, `scoring.locomo.locomo_exact_match`), under `official` in summary.json; no
calibration. LoCoMo's scorer must apply to the dataset (else the run is refused).

Units: `answer/SUBJECT/QUESTION` (two rows: one per rubric; one row without a judge) and
`calibration/RUBRIC` (one row per probe).

RUN_DIR/summary.json    lenient|strict -> facet -> metric (as the question track), or,
                        without a judge, official -> facet -> official_f1|exact_match;
                        reported -> facet -> file_grade (the file's own grades, if any);
                        calibration -> rubric -> false_accept|false_reject
RUN_DIR/counts.json     per rubric as the question track; the file's systems, models,
                        latency and tokens
RUN_DIR/matching.json   matched (by id, by text), unmatched, ambiguous, repeated records,
                        questions not answered, and the category map found
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from rich.table import Table

from dialogbench.data.errors import DataError
from dialogbench.data.io import sha256_file
from dialogbench.data.model import Dataset, Question
from dialogbench.judging import verdict_fields
from dialogbench.judging.calibration import CalibrationProbe, PassRule, calibrate
from dialogbench.judging.judge import Judge
from dialogbench.judging.qa_rubrics import QA_RUBRICS
from dialogbench.report.table import summary_table
from dialogbench.runner import OptionError, Outcome, Plan, TrackBase, option, register
from dialogbench.runner import config as shared
from dialogbench.runner.record import digest
from dialogbench.runner.roles import judge_role
from dialogbench.runner.track import Models, Rows
from dialogbench.scoring.locomo import f1_score, locomo_exact_match
from dialogbench.stats.bootstrap import Estimate, bootstrap_means
from dialogbench.tracks.common import judged_values, stratified_limit
from dialogbench.tracks.realcompanion import questions_prompts as qp
from dialogbench.tracks.realcompanion.answers_file import (
    FORMATS,
    AnswersFile,
    CategoryMap,
    Matched,
    Matching,
    detect_category_map,
    match_answers,
    read_answers,
)
from dialogbench.tracks.realcompanion.questions import (
    QuestionsConfig,
    judge_row,
    official_option,
    score_row,
    summarise,
    uses_official,
)

TRACK = "answers"
RUBRICS = tuple(QA_RUBRICS)
OFFICIAL = "official"
"""summary.json's key for the figures of a run without a judge."""
OFFICIAL_METRICS = ("official_f1", "exact_match")
"""What a run without a judge scores: LoCoMo's official F1 and exact match."""
NO_JUDGE = "no judge: LoCoMo's official F1 and exact match alone"
"""`judge_skipped` of an answer scored without a judge."""
PASS = PassRule("correct", 1)
JUDGE_TAG, CALIBRATION_TAG = "answers:judge", "answers:calibration"
PROMPT_SHA256 = digest(
    {
        "rubrics": {k: repr(r) for k, r in QA_RUBRICS.items()},
        "abstention": repr(qp.ABSTENTION_RUBRIC),
        "pass": [PASS.dimension, PASS.threshold],
    }
)


@dataclass(frozen=True)
class AnswersConfig(shared.Judged):
    """The answers file, its format, the calibration probes, a limit, the judge settings."""

    answers: str | None = option(None, help="the file of answers (required)")
    format: str = option(
        "dialogbench", help="the file's format: dialogbench (JSONL) or mem0", choices=FORMATS
    )
    answers_sha256: str | None = option(
        None, help="the sha256 the file must have (default: as it is now; the run records it)"
    )
    strict: bool = option(
        False,
        help="refuse a file whose records give fields our schema does not know (default: "
        "ignore them, counted in the warnings)",
        stage="aggregate",
    )
    judge: bool | None = option(
        None,
        help="judge the answers with --judge-model (default: when one is given); without a "
        "judge no model is called: LoCoMo's official F1 and exact match alone",
        stage="score",
    )
    calibration: int = option(
        20,
        help="known-wrong (and as many known-right) answers per rubric to calibrate the judge",
        min=0,
        max=10_000,
    )
    limit: int | None = shared.limit("answers, drawn in turn from each category")
    seed: int = shared.seed("the limit, the probes and the bootstrap")
    n_boot: int = shared.n_boot()
    official: bool | None = official_option()
    judge_max_tokens: int = shared.judge_tokens(512)
    max_fixes: int = shared.judge_fixes()

    def questions_config(self) -> QuestionsConfig:
        """The question track's settings its scoring reads (official, bootstrap, judge)."""
        return QuestionsConfig(
            official=self.official,
            n_boot=self.n_boot,
            seed=self.seed,
            judge_max_tokens=self.judge_max_tokens,
            max_fixes=self.max_fixes,
        )


@dataclass(frozen=True)
class Probes:
    """The calibration probes of one rubric."""

    rubric: str
    probes: tuple[CalibrationProbe, ...]


Unit = Matched | Probes


@dataclass
class Context:
    """What the units share: whether the official scorer runs, the matching, the map."""

    official: bool
    matching: Matching
    categories: CategoryMap
    file: AnswersFile
    warnings: list[str]
    """What matching, the category map and the probe draw found (printed with the figures)."""


@dataclass
class AnswersResult:
    """The track's figures as written to the run folder."""

    summary: dict[str, Any]
    counts: dict[str, Any]
    matching: dict[str, Any]
    categories: CategoryMap
    official: bool
    warnings: list[str]


def probes_for(
    matched: Sequence[Matched], data: Dataset, n: int, seed: int
) -> tuple[CalibrationProbe, ...]:
    """Up to `n` known-wrong probes on the matched questions (the gold of another question
    of the same subject in `data`, of the same category where one shares no token with the
    gold, else any that shares none) and as many known-right ones (the gold itself), drawn
    by `seed`."""
    pool = [m for m in matched if m.question.answerable and m.question.answer]
    by_subject: dict[str, list[Question]] = {
        s.id: [q for q in s.questions if q.answerable and q.answer] for s in data.subjects
    }
    rng = random.Random(seed)
    order = list(range(len(pool)))
    rng.shuffle(order)
    out: list[CalibrationProbe] = []
    wrong = 0
    for i in order:
        if wrong >= n:
            break
        m = pool[i]
        q, gold = m.question, m.question.answer or ""
        others = [o for o in by_subject[m.subject_id] if o.id != q.id and o.answer]
        unlike = [o for o in others if f1_score(o.answer or "", gold) == 0.0]
        same = [o for o in unlike if o.category == q.category]
        choice = same or unlike
        if not choice:
            continue
        other = choice[rng.randrange(len(choice))]
        key = f"{m.subject_id}/{q.id}"
        out.append(
            CalibrationProbe(
                id=f"wrong:{key}",
                candidate=other.answer or "",
                expected="wrong",
                question=q.text,
                reference=gold,
            )
        )
        out.append(
            CalibrationProbe(
                id=f"right:{key}", candidate=gold, expected="right", question=q.text, reference=gold
            )
        )
        wrong += 1
    return tuple(out)


class AnswersTrack(TrackBase[AnswersConfig, Unit]):
    """Re-judge a file of answers: one unit per matched answer, one per rubric's probes."""

    name = TRACK
    summary = (
        "Re-judge answers produced elsewhere (a file): lenient and strict judge, LoCoMo's F1, "
        "the judge's false-accept rate; without a judge, LoCoMo's F1 and exact match alone."
    )
    config_type = AnswersConfig
    roles = (
        judge_role(
            "the judge of the answers (none: no model is called, LoCoMo's official F1 and "
            "exact match alone)",
            fallback=None,
            required=False,
        ),
    )
    judged = True

    def configure(self, config: AnswersConfig, roles: frozenset[str]) -> AnswersConfig:
        """The file's absolute path and sha256 pinned, so a re-judge reads the same file;
        whether a judge scores, from the roles given unless said (without one, no
        calibration: a later re-judge then has no probes to ask)."""
        if config.answers is None:
            raise OptionError("answers", "give the file of answers (--answers FILE)")
        path = Path(config.answers).expanduser().resolve()
        if not path.is_file():
            raise DataError(path, "no such answers file", fix="give the path of a file of answers")
        sha = config.answers_sha256 or sha256_file(path)
        given = "judge" in roles
        if config.judge is not None and config.judge != given:
            raise OptionError(
                "judge",
                "pass --judge-model SPEC to judge the answers"
                if config.judge
                else "--no-judge scores without a model: leave out --judge-model (to judge "
                "a run scored without one: dialogbench score RUN_DIR --judge-model SPEC "
                "--set judge=true)",
            )
        calibration = config.calibration if given else 0  # no judge: nothing to calibrate
        return replace(
            config, answers=str(path), answers_sha256=sha, judge=given, calibration=calibration
        )

    def plan(self, data: Dataset, config: AnswersConfig) -> Plan[Unit]:
        if config.answers is None or config.answers_sha256 is None:  # configure sets both
            raise OptionError("answers", "give the file of answers (--answers FILE)")
        read = read_answers(Path(config.answers), config.format, strict=config.strict)
        if read.sha256 != config.answers_sha256:
            raise DataError(
                read.path,
                f"the file has changed (sha256 {read.sha256[:12]} now, "
                f"{config.answers_sha256[:12]} expected)",
                field="answers_sha256",
                fix="score the file the run used, or start a new run folder",
            )
        matching = match_answers(data, read.records)
        if not matching.matched:
            first = (matching.unmatched or [{"where": "?", "why": "nothing matched"}])[0]
            raise DataError(
                read.path,
                f"no answer matches a question of {data.name!r} ({len(read.records)} records; "
                f"e.g. {first['where']}: {first.get('why', 'ambiguous')})",
                fix="check --dataset and --format, or give question_id / subject",
            )
        categories = detect_category_map(
            ((m.record.category, m.question.category) for m in matching.matched), read.format
        )
        chosen = stratified_limit(
            matching.matched, lambda m: m.question.category, config.limit, config.seed
        )
        units: dict[str, Unit] = {f"answer/{m.subject_id}/{m.question.id}": m for m in chosen}
        official = uses_official(data, config.questions_config())
        if not config.judge and not official:
            raise DataError(
                read.path,
                f"without a judge only LoCoMo's official scorer scores, and it does not apply "
                f"to {data.name!r} (its categories are not LoCoMo's)",
                field="judge",
                fix="give --judge-model SPEC, or --official to score it the LoCoMo way anyway",
            )
        probes = probes_for(chosen, data, config.calibration, config.seed)
        if probes:
            for rubric in RUBRICS:
                units[f"calibration/{rubric}"] = Probes(rubric, probes)
        found = matching.warnings()
        unknown = read.unknown_warning()
        if unknown is not None:
            found.insert(0, unknown)
        if categories.status not in ("ours", "none") or read.format == "mem0":
            found.append(f"categories: {categories.message}")
        if config.calibration and not probes:
            found.append("calibration: no known-wrong probe could be drawn (too few answers)")
        resolved = {
            "prompt_sha256": PROMPT_SHA256,
            "rubrics": {k: r.name for k, r in QA_RUBRICS.items()},
            "answer systems": sorted({m.record.system for m in chosen if m.record.system}),
            "answer models": sorted({m.record.model for m in chosen if m.record.model}),
            "category map": categories.status,
        }
        context = Context(official, matching, categories, read, found)
        return Plan(units, warnings=list(data.warnings), resolved=resolved, context=context)

    async def solve(
        self, unit: Unit, models: Models, config: AnswersConfig, plan: Plan[Unit]
    ) -> Rows:
        if isinstance(unit, Probes):
            return [{"calibration": unit.rubric, **p.model_dump()} for p in unit.probes]
        r, q = unit.record, unit.question
        return [
            {
                "subject": unit.subject_id,
                "question": q.id,
                "category": q.category,
                "answerable": q.answerable,
                "text": q.text,
                "gold": q.answer,
                "answer": r.answer,
                "answer_error": r.error if r.answer is None else None,
                "record": unit.where,
                "matched_by": unit.by,
                "file_category": r.category,
                "file_gold": r.gold,
                "system": r.system,
                "model": r.model,
                "evidence_ids": r.evidence_ids,
                "latency_s": r.latency_s,
                "tokens": r.tokens,
                "file_grade": r.grade,
                "fell_back": False,
            }
        ]

    async def score(
        self, unit: Unit, rows: Rows, models: Models, config: AnswersConfig, plan: Plan[Unit]
    ) -> Rows:
        ctx: Context = plan.context
        if not config.judge:  # no model: only answers are units (no calibration probes)
            (row,) = rows
            return [official_scores(row, ctx.official)]
        judge_model = models["judge"]
        if isinstance(unit, Probes):
            rubric = QA_RUBRICS[unit.rubric]
            judge = Judge(judge_model, rubric, config.judge_config(), max_fixes=config.max_fixes)
            probes = [
                CalibrationProbe.model_validate({k: v for k, v in r.items() if k != "calibration"})
                for r in rows
            ]
            report = await calibrate(
                judge, probes, PASS, n_boot=config.n_boot, seed=config.seed, tag=CALIBRATION_TAG
            )
            return [
                {**row, "accepted": o.accepted, **verdict_fields(o.verdict)}
                for row, o in zip(rows, report.outcomes, strict=True)
            ]
        (row,) = rows
        out = []
        asked = config.questions_config()
        for name in RUBRICS:
            fields = await judge_row(row, judge_model, asked, QA_RUBRICS[name], JUDGE_TAG)
            out.append({**row, "rubric": name, **fields, **score_row(row, ctx.official)})
        return out

    def aggregate(self, plan: Plan[Unit], rows: Rows, config: AnswersConfig) -> Outcome:
        ctx: Context = plan.context
        answers = [r for r in rows if "calibration" not in r]
        probes = [r for r in rows if "calibration" in r]
        parts: dict[str, Rows] = {OFFICIAL: answers}
        metrics: Sequence[str] | None = OFFICIAL_METRICS
        if config.judge:
            parts = {name: [r for r in answers if r["rubric"] == name] for name in RUBRICS}
            metrics = None
        scored = summarise(parts, ctx.official, config.questions_config(), metrics)
        summary: dict[str, Any] = dict(scored.summary)
        first = next(iter(parts.values()))
        if any(r["file_grade"] is not None for r in first):
            summary["reported"] = _reported(first, config)
        calibration, unscored_probes = _calibration(probes, config)
        if calibration:
            summary["calibration"] = calibration
        counts: dict[str, Any] = {
            "official scorer": ctx.official,
            "counts": scored.counts,
            "calibration unscored": unscored_probes,
            "file": _file_figures(first, ctx.file),
        }
        matching = {**ctx.matching.report(), "category_map": _map_json(ctx.categories)}
        unscored = sum(c["judge_unscored"] for c in scored.counts.values()) + unscored_probes
        warnings = ctx.warnings + list(scored.warnings)
        if unscored_probes:
            warnings.append(f"calibration: {unscored_probes} probe verdicts unscored (left out)")
        result = AnswersResult(summary, counts, matching, ctx.categories, ctx.official, warnings)
        return Outcome(
            summary=summary,
            files={"counts.json": counts, "matching.json": matching},
            warnings=warnings,
            result=result,
            failures={"verdicts the judge left unscored": unscored} if unscored else {},
        )

    def show(self, outcome: Outcome, config: AnswersConfig) -> list[Table | str]:
        result: AnswersResult = outcome.result
        s = result.summary
        judged = RUBRICS[0] in s
        first = s[RUBRICS[0]] if judged else s[OFFICIAL]
        table: dict[str, dict[str, Estimate]] = {}
        for facet in first:
            row: dict[str, Estimate] = {}
            for name in RUBRICS if judged else ():
                row[f"judge {name}"] = s[name][facet]["judge"]
            for metric in ("official_f1", "exact_match", "set_f1", "abstention_rule"):
                if metric in first[facet]:
                    row[metric] = first[facet][metric]
            if "reported" in s and facet in s["reported"]:
                row["file's grade"] = s["reported"][facet]["file_grade"]
            if any(e.n for e in row.values()):  # a category no figure covers is not shown
                table[facet] = row
        columns = list(dict.fromkeys(c for row in table.values() for c in row))
        title = (
            "Answers re-judged"
            if judged
            else "Answers scored without a judge: LoCoMo's official F1 and exact match"
        )
        out: list[Table | str] = [
            summary_table(f"{title} (95% bootstrap intervals)", table, columns, "questions")
        ]
        for name, rates in s.get("calibration", {}).items():
            fa, fr = rates["false_accept"], rates["false_reject"]
            out.append(
                f"calibration, {name}: false-accept {_fmt(fa)} on known-wrong answers, "
                f"false-reject {_fmt(fr)} on known-right ones"
            )
        m = result.matching
        out.append(
            f"matched {m['matched']} of {m['records']} records (by id {m['matched_by']['id']}, "
            f"by text {m['matched_by']['text']}); unmatched {len(m['unmatched'])}, ambiguous "
            f"{len(m['ambiguous'])}, repeated {len(m['repeated'])}; dataset questions not "
            f"answered {m['not_answered']}"
        )
        out.append(f"categories: {result.categories.message}")
        return out

    def judgments(self, rows: Rows) -> dict[str, float]:
        """`rubric/subject/question` -> the judge's score on [0, 1]."""
        answers = [r for r in rows if r.get("rubric")]
        return judged_values(
            answers, lambda r: f"{r['rubric']}/{r['subject']}/{r['question']}", "judge"
        )

    def headline(self, outcome: Outcome) -> dict[str, float]:
        """The judge score per rubric (all, answerable) and the official F1 (and, without a
        judge, the exact match)."""
        s = outcome.result.summary
        if OFFICIAL in s:
            return {f"{m} all": s[OFFICIAL]["all"][m].value for m in OFFICIAL_METRICS}
        out = {
            f"{name} judge {facet}": s[name][facet]["judge"].value
            for name in RUBRICS
            for facet in ("all", "answerable")
            if facet in s[name]
        }
        if "official_f1" in s[RUBRICS[0]]["all"]:
            out["official_f1 all"] = s[RUBRICS[0]]["all"]["official_f1"].value
        return out


ANSWERS = register(AnswersTrack())


def official_scores(row: dict[str, Any], official: bool) -> dict[str, Any]:
    """An answer scored without a judge: the question track's rules (LoCoMo's official F1
    among them) and LoCoMo's exact match where the official F1 applies (None elsewhere, and
    for an adversarial question, which has no gold to match)."""
    scores: dict[str, Any] = {**row, **score_row(row, official), "exact_match": None}
    if scores["official_f1"] is not None:
        scores["exact_match"] = locomo_exact_match(row["answer"], row["gold"], row["category"])
    return {**scores, **verdict_fields(None, skipped=NO_JUDGE)}


def _fmt(e: Estimate | None) -> str:
    if e is None or math.isnan(e.value):
        return "n/a"
    return f"{e.value:.3f} [{e.ci_low:.3f}, {e.ci_high:.3f}] (n={e.n})"


def _reported(rows: Rows, config: AnswersConfig) -> dict[str, dict[str, Estimate]]:
    """The file's own grades per facet (all, answerable, unanswerable, category=C)."""
    grades = np.array([math.nan if r["file_grade"] is None else r["file_grade"] for r in rows])
    answerable = np.array([bool(r["answerable"]) for r in rows])
    cats = np.array([r["category"] for r in rows], dtype=object)
    masks = {"all": np.ones(len(rows), bool), "answerable": answerable, "unanswerable": ~answerable}
    for c in sorted(set(cats.tolist())):
        masks[f"category={c}"] = cats == c
    out = {}
    for facet, mask in masks.items():
        (est,) = bootstrap_means(grades[mask][:, None], n_boot=config.n_boot, seed=config.seed)
        out[facet] = {"file_grade": est}
    return out


def _calibration(
    rows: Rows, config: AnswersConfig
) -> tuple[dict[str, dict[str, Estimate | None]], int]:
    """False-accept (known-wrong) and false-reject (known-right) rates per rubric."""
    out: dict[str, dict[str, Estimate | None]] = {}
    unscored = 0
    for name in RUBRICS:
        mine = [r for r in rows if r["calibration"] == name]
        if not mine:
            continue
        unscored += sum(1 for r in mine if r["accepted"] is None)
        rates: dict[str, Estimate | None] = {}
        for key, expected, hit in (
            ("false_accept", "wrong", True),
            ("false_reject", "right", False),
        ):
            values = [
                float(r["accepted"] == hit)
                for r in mine
                if r["expected"] == expected and r["accepted"] is not None
            ]
            rates[key] = (
                bootstrap_means(np.array(values)[:, None], n_boot=config.n_boot, seed=config.seed)[
                    0
                ]
                if values
                else None
            )
        out[name] = rates
    return out, unscored


def _file_figures(rows: Rows, read: AnswersFile) -> dict[str, Any]:
    """What the file says about its systems: names, models, latency and tokens."""

    def spread(values: list[float]) -> dict[str, float] | None:
        if not values:
            return None
        a = np.array(values, float)
        return {
            "n": len(a),
            "mean": float(a.mean()),
            "p50": float(np.percentile(a, 50)),
            "p95": float(np.percentile(a, 95)),
            "p99": float(np.percentile(a, 99)),
        }

    out = {
        "format": read.format,
        "sha256": read.sha256,
        "systems": sorted({r["system"] for r in rows if r["system"]}),
        "models": sorted({r["model"] for r in rows if r["model"]}),
        "latency_s": spread([r["latency_s"] for r in rows if r["latency_s"] is not None]),
        "tokens": spread([r["tokens"] for r in rows if r["tokens"] is not None]),
        "answers_missing": sum(1 for r in rows if r["answer"] is None),
    }
    if read.unknown:  # only when there are some: a clean file's counts stay as they were
        out["unknown_fields"] = {k: len(v) for k, v in sorted(read.unknown.items())}
    return out


def _map_json(c: CategoryMap) -> dict[str, Any]:
    return {
        "status": c.status,
        "mapping": c.mapping,
        "agree": c.agree,
        "compared": c.compared,
        "message": c.message,
    }
