"""Context-coverage track (RealCompanion, "Context coverage"): what a recency window holds.

A model given the last B tokens before a probe sees its required messages only if they
fall inside that window. For every probe with references (chat items with reference_ids,
questions with evidence_ids) and every budget B we ask whether *all* references fit
("all references") and whether the nearest one does ("nearest reference"). Over the chat
probes that need memory (recorded reading) we ask whether the window holds a *required*
reference (`memory.py`: one outside the recent thread, which makes the item need memory):
"required message (needs memory)", the paper's coverage of the required message (0.109 at
8k, 0.453 at 128k, 1.000 at 1M); a reference in the recent thread is in every window and
says nothing about memory.

Tokens: each message costs the tokens of its text plus the chat template's fixed
overhead for its role (see `dialogbench.models.tokenizer`; 5 tokens for a user message
with SmolLM2). The window ends just before the probe (the probe itself, a system prompt
and speaker names are not counted) and holds whole messages: message j is inside when the
tokens of messages j .. probe-1 sum to at most B. Budgets are tokens: 8k = 8,192 and
1M = 1,048,576. Every figure is a mean with a percentile bootstrap interval.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from rich.table import Table

from dialogbench.data.model import Dataset, Subject
from dialogbench.models.tokenizer import GGUFTokenizer, TokenCounter
from dialogbench.report.table import summary_table
from dialogbench.retrieval.base import Probe, scoreable_probes
from dialogbench.runner import Outcome, Plan, TrackBase, option, register
from dialogbench.runner import config as shared
from dialogbench.runner.track import Models, Rows
from dialogbench.stats.bootstrap import Estimate
from dialogbench.tracks.common import masked_estimates
from dialogbench.tracks.realcompanion.memory import labels_of

TRACK = "coverage"
SCOPES = ("all references", "nearest reference")
REQUIRED = "required message (needs memory)"
MAX_BUDGET = 2**30
IntArray = npt.NDArray[np.int64]


def budget_label(tokens: int) -> str:
    """`8192` -> `8k`, `1048576` -> `1M`; other numbers as they are."""
    if tokens % 2**20 == 0:
        return f"{tokens // 2**20}M"
    if tokens % 2**10 == 0:
        return f"{tokens // 2**10}k"
    return str(tokens)


def parse_tokens(text: str) -> int:
    """'8k' -> 8192, '1M' -> 1048576, '5000' -> 5000."""
    text = text.strip().lower()
    scale = {"k": 2**10, "m": 2**20}.get(text[-1:], 1)
    try:
        return int(float(text[:-1] if scale > 1 else text) * scale)
    except ValueError:
        raise ValueError(f"budget {text!r} is not a number like 8k, 1M or 5000") from None


@dataclass(frozen=True)
class CoverageConfig:
    """Budgets in tokens, the tokenizer, and how to draw intervals."""

    budgets: tuple[int, ...] = option(
        (2**13, 2**14, 2**15, 2**16, 2**17, 2**20),
        help="token budgets, e.g. 8k,16k,32k,64k,128k,1M",
        min=1,
        max=MAX_BUDGET,
        parse=parse_tokens,
    )
    tokenizer: str = option(
        "embedded", help="'embedded' (SmolLM2-135M-Instruct) or the path of a GGUF file"
    )
    seed: int = shared.seed("the bootstrap", stage="aggregate")
    n_boot: int = shared.n_boot()
    cluster: Literal["item", "subject"] = option(
        "item", help="resample items, or whole subjects", stage="aggregate"
    )

    def __post_init__(self) -> None:
        if len(set(self.budgets)) != len(self.budgets):
            raise ValueError(f"budgets repeat a value: {self.budgets}")


@dataclass
class CoverageResult:
    """The track's figures as written to the run folder."""

    summary: dict[str, dict[str, Estimate]]
    """scope -> `coverage@8k` ... -> estimate."""
    breakdown: dict[str, dict[str, dict[str, dict[str, Estimate]]]]
    """scope -> facet (kind, stratum, tier, category) -> level -> metric -> estimate."""
    tokens_back: dict[str, dict[str, float]]
    """Tokens back to the nearest / furthest reference and messages per window: median..."""
    history: dict[str, dict[str, int]]
    """subject -> messages, tokens (whole history, overhead included), text tokens, probes."""
    tokenizer: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)


def message_tokens(subject: Subject, tokenizer: TokenCounter) -> tuple[IntArray, IntArray]:
    """Tokens of each message's text, and of the template overhead for its role."""
    text = tokenizer.count([m.text for m in subject.messages])
    per_role = {role: tokenizer.overhead(role) for role in {m.role for m in subject.messages}}
    overhead = np.array([per_role[m.role] for m in subject.messages], dtype=np.int64)
    return np.asarray(text, dtype=np.int64), overhead


def coverage_table(
    tokens: IntArray,
    probes: Sequence[Probe],
    budgets: Sequence[int],
    required: Sequence[int | None] | None = None,
) -> dict[str, IntArray]:
    """Per probe of one subject: tokens back to the nearest/furthest reference, window sizes.

    `tokens back` to a message is the sum of its tokens and those of every message after it
    up to the probe, so a message is inside a B-token window when that sum is <= B.
    `window@B` is how many messages a B-token window holds (found with searchsorted).
    `required`: each probe's nearest required reference (a position; None: the probe needs
    no memory), whose tokens back are `required` (-1 for None).
    """
    starts = np.concatenate([[0], np.cumsum(tokens)])  # starts[i]: tokens before message i
    cutoff = np.array([p.cutoff for p in probes], dtype=np.int64)
    first = np.array([min(p.reference_positions) for p in probes], dtype=np.int64)
    last = np.array([max(p.reference_positions) for p in probes], dtype=np.int64)
    end = starts[cutoff]
    out = {
        "history tokens": end,
        "furthest": end - starts[first],
        "nearest": end - starts[last],
    }
    if required is not None:
        at = np.array([-1 if r is None else r for r in required], dtype=np.int64)
        out["required"] = np.where(at >= 0, end - starts[np.maximum(at, 0)], -1)
    for b in budgets:  # first message whose tokens back are <= b
        window_start = np.searchsorted(starts, end - b, side="left")
        out[f"window@{budget_label(b)}"] = cutoff - np.minimum(window_start, cutoff)
    return out


def probes_by_subject(dataset: Dataset) -> tuple[dict[str, list[Probe]], dict[str, int]]:
    """Probes with references by subject, and counts of those left out by kind."""
    probes, skipped = scoreable_probes(dataset)
    by_subject: dict[str, list[Probe]] = {}
    for p in probes:
        by_subject.setdefault(p.subject_id, []).append(p)
    return by_subject, skipped


@dataclass
class Unit:
    """One subject with probes: its messages' tokens (overhead included) and its probes."""

    subject: Subject
    probes: list[Probe]
    tokens: IntArray
    required: list[int | None] = field(default_factory=list)
    """Each probe's nearest required reference (None: it needs no memory)."""


@dataclass
class Counted:
    """What the aggregate step needs beyond the rows."""

    history: dict[str, dict[str, int]]
    tokenizer: dict[str, Any]
    skipped: dict[str, int]


class CoverageTrack(TrackBase[CoverageConfig, Unit]):
    """One unit per subject with probes: where each probe's references sit, in tokens.

    Every message is counted in `plan` (the history figures need every subject); `counter`
    replaces the config's tokenizer (tests pass a deterministic one).
    """

    name = TRACK
    summary = "Share of probes whose required messages fit in a recency window of B tokens."
    config_type = CoverageConfig

    def __init__(self, counter: TokenCounter | None = None) -> None:
        self.counter = counter

    def plan(self, data: Dataset, config: CoverageConfig) -> Plan[Unit]:
        by_subject, skipped = probes_by_subject(data)
        if not by_subject:
            raise ValueError(
                f"dataset {data.name!r} has no probe with references: the coverage track "
                "needs chat items with reference_ids or questions with evidence_ids"
            )
        counter = self.counter or GGUFTokenizer(_gguf_path(config.tokenizer))
        try:
            overhead = {role: counter.overhead(role) for role in ("user", "assistant", "system")}
            tokens = {s.id: message_tokens(s, counter) for s in data.subjects}
        finally:
            if self.counter is None and isinstance(counter, GGUFTokenizer):
                counter.close()  # ours to free
        history: dict[str, dict[str, int]] = {}
        units: dict[str, Unit] = {}
        for index, subject in enumerate(data.subjects):
            probes = by_subject.get(subject.id, [])
            text, overhead_tokens = tokens[subject.id]
            per_message = text + overhead_tokens
            history[subject.id] = {
                "messages": len(subject.messages),
                "tokens": int(per_message.sum()),
                "text tokens": int(text.sum()),
                "probes": len(probes),
            }
            if probes:
                required = _required(subject, probes)
                units[f"subject-{index:04d}"] = Unit(subject, probes, per_message, required)
        info: dict[str, Any] = {"name": counter.name, "overhead per message": overhead}
        return Plan(
            units,
            warnings=list(data.warnings),
            resolved={"tokenizer name": counter.name, "overhead": overhead},
            context=Counted(history, info, skipped),
        )

    async def solve(
        self, unit: Unit, models: Models, config: CoverageConfig, plan: Plan[Unit]
    ) -> Rows:
        table = coverage_table(unit.tokens, unit.probes, config.budgets, unit.required)
        ids = [m.id for m in unit.subject.messages]
        return [_item_row(p, i, ids, table) for i, p in enumerate(unit.probes)]

    def aggregate(self, plan: Plan[Unit], rows: Rows, config: CoverageConfig) -> Outcome:
        ctx: Counted = plan.context
        result = summarise(rows, config)
        result.history, result.tokenizer, result.skipped = ctx.history, ctx.tokenizer, ctx.skipped
        return Outcome(
            summary={**result.summary, "tokenizer": ctx.tokenizer},
            files={
                "breakdown.json": result.breakdown,
                "tokens.json": {"tokens back": result.tokens_back, "history": ctx.history},
                "coverage.csv": coverage_csv(result.summary, config.budgets),
            },
            notes={"skipped": ctx.skipped},
            result=result,
        )

    def show(self, outcome: Outcome, config: CoverageConfig) -> list[Table | str]:
        result: CoverageResult = outcome.result
        metrics = list(next(iter(result.summary.values())))
        table = summary_table(
            "Context coverage (95% bootstrap intervals)",
            result.summary,
            metrics,
            row_label="required",
        )
        return [table, "coverage.csv is plot-ready: one row per budget and scope"]


COVERAGE = register(CoverageTrack())


def _required(subject: Subject, probes: Sequence[Probe]) -> list[int | None]:
    """Each probe's nearest required reference: a chat probe that needs memory (recorded
    reading), the latest of its references outside the recent thread; else None."""
    labels = labels_of(subject)
    out: list[int | None] = []
    for p in probes:
        lab = labels.get(p.id) if p.kind == "chat" else None
        if lab is None or not lab.recorded or not lab.required:
            out.append(None)
        else:
            out.append(p.cutoff - lab.required[0])
    return out


def _or_none(tokens: int) -> int | None:
    return None if tokens < 0 else tokens


def _gguf_path(spec: str) -> Path | None:
    return None if spec == "embedded" else Path(spec)


def _item_row(p: Probe, i: int, ids: Sequence[str], table: dict[str, IntArray]) -> dict[str, Any]:
    return {
        "subject": p.subject_id,
        "probe": p.id,
        "kind": p.kind,
        **p.labels,
        "messages before": p.cutoff,
        "references": [ids[r] for r in p.reference_positions],
        "messages to nearest": p.cutoff - max(p.reference_positions),
        "messages to furthest": p.cutoff - min(p.reference_positions),
        "tokens to nearest": int(table["nearest"][i]),
        "tokens to furthest": int(table["furthest"][i]),
        "tokens to required": _or_none(int(table["required"][i])) if "required" in table else None,
        **{k: int(v[i]) for k, v in table.items() if k not in ("nearest", "furthest", "required")},
    }


def summarise(rows: Sequence[dict[str, Any]], config: CoverageConfig) -> CoverageResult:
    """Figures from the stored item rows: one paired bootstrap over both scopes per group."""
    furthest = np.array([r["tokens to furthest"] for r in rows], dtype=np.int64)
    nearest = np.array([r["tokens to nearest"] for r in rows], dtype=np.int64)
    budgets = np.array(config.budgets, dtype=np.int64)
    columns = [(scope, f"coverage@{budget_label(int(b))}") for scope in SCOPES for b in budgets]
    matrix = np.hstack(
        [furthest[:, None] <= budgets[None, :], nearest[:, None] <= budgets[None, :]]
    ).astype(np.float64)
    clusters = np.array([r["subject"] for r in rows]) if config.cluster == "subject" else None

    estimate = masked_estimates(matrix, columns, clusters, config.n_boot, config.seed)
    summary = estimate(np.ones(len(rows), dtype=bool))
    back = [r.get("tokens to required") for r in rows]  # None: needs no memory
    to_required = np.array([-1 if t is None else t for t in back], dtype=np.int64)
    needs = to_required >= 0
    if needs.any():
        fits = (to_required[:, None] <= budgets[None, :]).astype(np.float64)
        cols = [(REQUIRED, f"coverage@{budget_label(int(b))}") for b in budgets]
        summary.update(masked_estimates(fits, cols, clusters, config.n_boot, config.seed)(needs))
    breakdown: dict[str, dict[str, dict[str, dict[str, Estimate]]]] = {}
    for facet in ("kind", "stratum", "tier", "category"):
        labels = np.array([str(r.get(facet, "")) for r in rows])
        for level in sorted(set(labels) - {""}):
            for scope, metrics in estimate(labels == level).items():
                breakdown.setdefault(scope, {}).setdefault(facet, {})[level] = metrics
    tokens_back = {"nearest": _spread(nearest), "furthest": _spread(furthest)}
    for b in config.budgets:  # how many messages each window holds
        key = f"window@{budget_label(b)}"
        tokens_back[f"messages in {key}"] = _spread(np.array([r[key] for r in rows]))
    return CoverageResult(
        summary=summary, breakdown=breakdown, tokens_back=tokens_back, history={}, tokenizer={}
    )


def _spread(values: IntArray) -> dict[str, float]:
    return {
        "median": float(np.median(values)),
        "p75": float(np.percentile(values, 75)),
        "max": float(values.max()),
        "n": float(len(values)),
    }


def coverage_csv(summary: dict[str, dict[str, Estimate]], budgets: Sequence[int]) -> str:
    """The plot-ready table: one row per budget x scope."""
    f = io.StringIO(newline="")
    writer = csv.writer(f)
    writer.writerow(["budget", "scope", "value", "ci_low", "ci_high", "n"])
    for scope in SCOPES:
        for b in budgets:
            e = summary[scope][f"coverage@{budget_label(b)}"]
            writer.writerow([b, scope, e.value, e.ci_low, e.ci_high, e.n])
    return f.getvalue()
