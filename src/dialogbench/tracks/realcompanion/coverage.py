"""Context-coverage track (RealCompanion, "Context coverage"): what a recency window holds.

A model given the last B tokens before a probe sees its required messages only if they
fall inside that window. For every probe with references (chat items with reference_ids,
questions with evidence_ids) and every budget B we ask whether *all* references fit
("all references") and whether the nearest one does ("nearest reference").

Tokens: each message costs the tokens of its text plus the chat template's fixed
overhead for its role (see `dialogbench.models.tokenizer`; 5 tokens for a user message
with SmolLM2). The window ends just before the probe (the probe itself, a system prompt
and speaker names are not counted) and holds whole messages: message j is inside when the
tokens of messages j .. probe-1 sum to at most B. Budgets are tokens: 8k = 8,192 and
1M = 1,048,576. Every figure is a mean with a percentile bootstrap interval.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from dialogbench.data.model import Dataset, Subject
from dialogbench.models.tokenizer import GGUFTokenizer, TokenCounter
from dialogbench.report.run import Progress, RunDir, dataset_info, to_json
from dialogbench.retrieval.base import Probe, build_probes
from dialogbench.stats.bootstrap import Estimate, bootstrap_means

TRACK = "coverage"
SCOPES = ("all references", "nearest reference")
IntArray = npt.NDArray[np.int64]


def budget_label(tokens: int) -> str:
    """`8192` -> `8k`, `1048576` -> `1M`; other numbers as they are."""
    if tokens % 2**20 == 0:
        return f"{tokens // 2**20}M"
    if tokens % 2**10 == 0:
        return f"{tokens // 2**10}k"
    return str(tokens)


@dataclass(frozen=True)
class CoverageConfig:
    """Budgets in tokens, the tokenizer, and how to draw intervals."""

    budgets: tuple[int, ...] = (2**13, 2**14, 2**15, 2**16, 2**17, 2**20)
    tokenizer: str = "embedded"
    """`embedded` (SmolLM2-135M-Instruct) or the path of a GGUF file."""
    seed: int = 0
    n_boot: int = 2000
    cluster: Literal["item", "subject"] = "item"

    def __post_init__(self) -> None:
        if not self.budgets or any(b <= 0 for b in self.budgets):
            raise ValueError(f"budgets must be positive token counts, got {self.budgets}")
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
    tokens: IntArray, probes: Sequence[Probe], budgets: Sequence[int]
) -> dict[str, IntArray]:
    """Per probe of one subject: tokens back to the nearest/furthest reference, window sizes.

    `tokens back` to a message is the sum of its tokens and those of every message after it
    up to the probe, so a message is inside a B-token window when that sum is <= B.
    `window@B` is how many messages a B-token window holds (found with searchsorted).
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
    for b in budgets:  # first message whose tokens back are <= b
        window_start = np.searchsorted(starts, end - b, side="left")
        out[f"window@{budget_label(b)}"] = cutoff - np.minimum(window_start, cutoff)
    return out


def scoreable_probes(dataset: Dataset) -> tuple[dict[str, list[Probe]], dict[str, int]]:
    """Probes with references by subject, and counts of those left out by kind."""
    kept: dict[str, list[Probe]] = {}
    skipped: dict[str, int] = {}
    for subject in dataset.subjects:
        for p in build_probes(subject):
            if p.reference_positions:
                kept.setdefault(subject.id, []).append(p)
            else:
                key = f"{p.kind} probes without references"
                skipped[key] = skipped.get(key, 0) + 1
    return kept, skipped


def run_coverage(
    dataset: Dataset,
    out: Path,
    config: CoverageConfig = CoverageConfig(),
    progress: Progress | None = None,
    tokenizer: TokenCounter | None = None,
) -> CoverageResult:
    """Measure context coverage per budget, write the run folder and return the figures.

    `tokenizer` overrides `config.tokenizer` (tests pass a deterministic counter).
    """
    by_subject, skipped = scoreable_probes(dataset)
    if not by_subject:
        raise ValueError(
            f"dataset {dataset.name!r} has no probe with references: the coverage track "
            "needs chat items with reference_ids or questions with evidence_ids"
        )
    counter = tokenizer or GGUFTokenizer(_gguf_path(config.tokenizer))
    try:
        overhead = {role: counter.overhead(role) for role in ("user", "assistant", "system")}
        tokens = {s.id: message_tokens(s, counter) for s in dataset.subjects}
    finally:
        if tokenizer is None and isinstance(counter, GGUFTokenizer):
            counter.close()  # ours to free
    tokenizer_info: dict[str, Any] = {"name": counter.name, "overhead per message": overhead}
    run = RunDir(out)
    done = run.start(
        TRACK,
        dataset_info(dataset),
        config,
        dataset.warnings,
        {"tokenizer name": counter.name, "overhead": overhead},
    )
    history: dict[str, dict[str, int]] = {}
    parts: list[str] = []
    for index, subject in enumerate(dataset.subjects):
        if progress:
            progress("coverage", index, len(dataset.subjects))
        probes = by_subject.get(subject.id, [])
        text, overhead_tokens = tokens[subject.id]
        per_message = text + overhead_tokens
        history[subject.id] = {
            "messages": len(subject.messages),
            "tokens": int(per_message.sum()),
            "text tokens": int(text.sum()),
            "probes": len(probes),
        }
        if not probes:
            continue
        name = f"subject-{index:04d}"
        parts.append(name)
        if name not in done:
            table = coverage_table(per_message, probes, config.budgets)
            ids = [m.id for m in subject.messages]
            run.write_part(name, [_item_row(p, i, ids, table) for i, p in enumerate(probes)])
    if progress:
        progress("summary", 1, 1)
    rows = [row for name in parts for row in run.read_part(name)]
    result = summarise(rows, config)
    result.history, result.tokenizer, result.skipped = history, tokenizer_info, skipped
    result.warnings = list(dataset.warnings)
    run.finish(
        parts,
        {
            "summary.json": {**to_json(result.summary), "tokenizer": tokenizer_info},
            "breakdown.json": to_json(result.breakdown),
            "tokens.json": {"tokens back": result.tokens_back, "history": history},
            "warnings.json": {"warnings": result.warnings, "skipped": skipped},
        },
    )
    write_csv(out / "coverage.csv", result.summary, config.budgets)
    return result


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
        **{k: int(v[i]) for k, v in table.items() if k not in ("nearest", "furthest")},
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

    def estimate(mask: npt.NDArray[np.bool_]) -> dict[str, dict[str, Estimate]]:
        sub = None if clusters is None else clusters[mask]
        ests = bootstrap_means(matrix[mask], sub, n_boot=config.n_boot, seed=config.seed)
        table: dict[str, dict[str, Estimate]] = {}
        for (scope, metric), e in zip(columns, ests, strict=True):
            table.setdefault(scope, {})[metric] = e
        return table

    summary = estimate(np.ones(len(rows), dtype=bool))
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


def write_csv(path: Path, summary: dict[str, dict[str, Estimate]], budgets: Sequence[int]) -> None:
    """The plot-ready table: one row per budget x scope."""
    tmp = path.with_suffix(".csv.tmp")
    with tmp.open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["budget", "scope", "value", "ci_low", "ci_high", "n"])
        for scope in SCOPES:
            for b in budgets:
                e = summary[scope][f"coverage@{budget_label(b)}"]
                writer.writerow([b, scope, e.value, e.ci_low, e.ci_high, e.n])
    os.replace(tmp, path)
