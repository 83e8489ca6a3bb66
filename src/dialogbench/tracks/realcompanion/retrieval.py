"""Retrieval track (RealCompanion, "Locating distant evidence").

For every probe with at least one reference, each retriever ranks the messages before
the probe; we score whether the references come back (hit@k, MRR, recall@k), each with a
bootstrap interval. The broken oracle control must score 0: the track says so loudly when
it does not.

summary.json gives the headline figures for chat probes and question probes apart (a pooled
figure mostly reports how many of each a corpus holds), for the *dependent* chat probes
(the item's reference reply depends on its recorded messages, one of them beyond the last
three: `memory.py`; the paper's BM25 hit@5 0.347),
and then pooled:

    population -> retriever -> metric    populations: "chat probes", "question probes",
                                         "dependent chat probes", "distant chat probes",
                                         "all probes (pooled)"

*Distant* chat probes are the paper's "distant items" (its hit@5: Random 0.005, Recency 0.022,
BM25 0.248, Oracle 1.000): locus `distant` (unlabelled: needing memory by the recorded
reading), scored against their *required* references only (`memory.py`: the ones outside the
recent thread, which make the item need memory); a reference in the recent thread that a
recency window finds is no find of the distant evidence. Every other population and facet
scores every reference.

breakdown.json: retriever -> facet -> level -> metric, facets kind, stratum, tier, category,
need (chat probes that need memory or not, by their labels under `--reading`; `memory.py`),
dependent, and the nearest reference's distance. distance.json: how far back references sit.

`--memory SPEC,...` adds memory systems (docs/memory.md): each is one more unit, named
`memory:NAME`, replayed subject by subject through `memory.replay` (messages in time order,
no future leakage) with `Budget(k=largest --k, tokens=--memory-tokens)`. Its id memories are
scored exactly as a retriever's ranking (same rows, same tables: `--memory bm25` gives the
figures of `--retrievers bm25`, with `mrr` over what it returned, i.e. `mrr@K`); its text
memories are scored by the evidence they cite (`cite-hit@k`, `cite-mrr@K`, `cite-recall@K`
over the cited positions in order of first citation), in populations of their own
("cited evidence: ..."), never mixed into id hit@k. memory_costs.json: each system's ingest
time, recall latency p50/p95/p99, memories and context tokens per query (`memory/costs.py`).
A memory system that fails is counted (`failed memory systems`, exit status 3) and named in
warnings.json; a rerun does it again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from rich.table import Table

from dialogbench.data.model import Dataset, Subject
from dialogbench.memory.base import Budget, MemorySystem, Recalled, SystemCost
from dialogbench.memory.costs import DEFINITIONS, summarise_costs
from dialogbench.memory.harness import query_of
from dialogbench.report.table import summary_table
from dialogbench.retrieval.base import BatchRetriever, Probe, scoreable_probes
from dialogbench.retrieval.registry import DEFAULT_RETRIEVERS, resolve
from dialogbench.runner import Outcome, Plan, TrackBase, option, register
from dialogbench.runner import config as shared
from dialogbench.runner.track import Models, Rows
from dialogbench.stats.bootstrap import Estimate, bootstrap_means
from dialogbench.stats.metrics import metric_table, random_hit_expectation
from dialogbench.tracks.common import masked_estimates
from dialogbench.tracks.realcompanion import recall as rc
from dialogbench.tracks.realcompanion.memory import (
    READING_HELP,
    RECENT_WINDOW,
    MemoryLabels,
    labels_of,
)

TRACK = "retrieval"
DISTANCE_BUCKETS = ((1, 3), (4, 10), (11, 100), (101, 1000), (1001, None))
MAX_K = 10_000
FloatArray = npt.NDArray[np.float64]
CHAT, QUESTIONS, DEPENDENT, DISTANT, POOLED = (
    "chat probes",
    "question probes",
    "dependent chat probes",
    "distant chat probes",
    "all probes (pooled)",
)
NEEDS, NO_NEED = "needs memory", "no memory need"
CITED = "cited evidence: "
"""Prefix of the populations that score text memories by the messages they cite."""


@dataclass(frozen=True)
class MemoryUnit:
    """A `--memory` system: its spec (as given) and the system."""

    spec: str
    system: MemorySystem


Unit = tuple[str, BatchRetriever | MemoryUnit]
"""A retriever's name (as configured) and the retriever, or `memory:NAME` and the system."""


@dataclass(frozen=True)
class RetrievalConfig:
    """What to run: retrievers, cut-offs and how to draw intervals."""

    retrievers: tuple[str, ...] = option(
        DEFAULT_RETRIEVERS, help="retrievers: registered names or module:Class paths"
    )
    ks: tuple[int, ...] = option(
        (1, 5, 10), help="cut-offs for hit@k and recall@k", min=1, max=MAX_K, flag="--k", sort=True
    )
    seed: int = shared.seed("the random retrievers and the bootstrap")
    n_boot: int = shared.n_boot()
    cluster: Literal["item", "subject"] = option(
        "item", help="resample items, or whole subjects", stage="aggregate"
    )
    offset: int = option(50, help="shift of the offset-permuted control", min=1)
    reading: Literal["recorded", "strict"] = option(
        "recorded", help=READING_HELP, stage="aggregate"
    )
    memory: tuple[str, ...] = rc.memory_option(
        "memory systems replayed as well (no future leakage): bm25, recency, dense, "
        "hybrid, full-context, module:Class, an entry point or http://... (docs/memory.md)"
    )
    memory_tokens: int | None = rc.memory_tokens_option("default: no cap; k is the largest --k")
    memory_window: int | None = rc.memory_window_option()
    analyzer: str = rc.analyzer_option()

    @property
    def depth(self) -> int:
        return max(self.ks)


@dataclass
class RetrievalResult:
    """The track's figures as written to the run folder."""

    summary: dict[str, dict[str, Estimate]]
    """Pooled over every probe: retriever -> metric."""
    breakdown: dict[str, dict[str, dict[str, dict[str, Estimate]]]]
    distance: dict[str, dict[str, float]]
    warnings: list[str] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    populations: dict[str, dict[str, dict[str, Estimate]]] = field(default_factory=dict)
    """Chat probes, question probes and dependent chat probes apart: population -> retriever
    -> metric (a population with no probe is left out; dependent is there with chat)."""
    cited: dict[str, dict[str, dict[str, Estimate]]] = field(default_factory=dict)
    """Memory systems with text memories, scored by the evidence they cite: `cited evidence:
    POPULATION` -> system -> cite-metric."""
    costs: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Each memory system's costs (memory_costs.json's `systems`)."""
    memory_errors: dict[str, str] = field(default_factory=dict)
    """Memory systems that failed: unit name -> the error."""

    def headline(self) -> dict[str, dict[str, dict[str, Estimate]]]:
        """summary.json: each population apart, then the pooled figures, then the cited
        evidence of text memories (when a memory system returned any)."""
        return {**self.populations, POOLED: self.summary, **self.cited}


@dataclass
class Probes:
    """What every retriever unit shares: the probes grouped by subject."""

    probes: list[Probe]
    by_subject: dict[str, list[Probe]]
    subjects: dict[str, Subject]
    skipped: dict[str, int]
    labels: list[MemoryLabels | None]
    """Each chat probe's memory labels, in the order of `probes` (None for questions)."""
    recalls: rc.Recalls | None = None
    """With `--memory`: the recall stage (each system's replay of each subject)."""


def probe_labels(dataset: Dataset, probes: Sequence[Probe]) -> list[MemoryLabels | None]:
    """The memory labels of each chat probe (None for a question)."""
    by_subject = {s.id: labels_of(s) for s in dataset.subjects}
    return [by_subject[p.subject_id][p.id] if p.kind == "chat" else None for p in probes]


class RetrievalTrack(TrackBase[RetrievalConfig, Unit]):
    """One unit per retriever: it ranks the history before every probe."""

    name = TRACK
    summary = "Rank earlier messages for every probe; score hit@k, MRR, recall@k."
    config_type = RetrievalConfig
    stages = (rc.RECALL,)

    def plan(self, data: Dataset, config: RetrievalConfig) -> Plan[Unit]:
        units: dict[str, Unit] = {
            name: (
                name,
                resolve(name, seed=config.seed, offset=config.offset, analyzer=config.analyzer),
            )
            for name in config.retrievers
        }  # fail on a bad name before any work
        systems = rc.resolve_systems(config.memory, config.seed, config.analyzer)
        for system in systems:
            key = f"memory:{system.name}"
            if key in units:
                raise ValueError(f"--memory {system.spec!r}: a retriever is also called {key!r}")
            units[key] = (key, MemoryUnit(system.spec, system.system))
        probes, skipped = scoreable_probes(data)
        if not probes:
            raise ValueError(
                f"dataset {data.name!r} has no probe with references: the retrieval track "
                "needs chat items with reference_ids or questions with evidence_ids"
            )
        by_subject: dict[str, list[Probe]] = {}
        for p in probes:
            by_subject.setdefault(p.subject_id, []).append(p)
        subjects = {s.id: s for s in data.subjects}
        context = Probes(probes, by_subject, subjects, skipped, probe_labels(data, probes))
        plan = Plan(units, warnings=list(data.warnings), context=context)
        plan.resolved["bm25 analyzer"] = rc.bm25_analyzer(config.analyzer, data.subjects)
        if systems:
            depth = min(config.depth, max(p.cutoff for p in probes))
            queries = [query_of(p) for p in probes]
            budget = Budget(k=depth, tokens=config.memory_tokens)
            window = rc.ingest_window(config)
            context.recalls = rc.Recalls.plan(
                systems, queries, subjects, budget, window=window, analyzer=config.analyzer
            )
            needs = {f"memory:{s.name}": context.recalls.needs_all(s.name) for s in systems}
            context.recalls.into(plan, needs)
        return plan

    async def solve(
        self, unit: Unit, models: Models, config: RetrievalConfig, plan: Plan[Unit]
    ) -> Rows:
        ctx: Probes = plan.context
        depth = min(config.depth, max(p.cutoff for p in ctx.probes))
        name, retriever = unit
        if isinstance(retriever, MemoryUnit):
            return solve_memory(name, retriever, ctx, plan)
        rows: Rows = []
        for sid, group in ctx.by_subject.items():
            subject = ctx.subjects[sid]
            ranking = retriever.rank(subject, group, depth)
            ids = [m.id for m in subject.messages]
            for i, p in enumerate(group):
                rows.append(_item_row(name, p, ids, ranking.top[i], ranking.ref_ranks[i]))
        return rows

    def aggregate(self, plan: Plan[Unit], rows: Rows, config: RetrievalConfig) -> Outcome:
        ctx: Probes = plan.context
        by_retriever: dict[str, Rows] = {}
        for row in rows:
            by_retriever.setdefault(row["retriever"], []).append(row)
        memories = [k for k, u in plan.units.items() if isinstance(u[1], MemoryUnit)]
        errors = {  # the runner counts them (failed memory calls, units not finished)
            k: "its recall did not finish (rerun to retry)"
            for k in memories
            if k not in by_retriever
        }
        done = [k for k in memories if k in by_retriever]
        by_ids = [k for k in done if _scored_by_id(by_retriever[k])]
        by_cites = [k for k in done if any(r["text_memories"] for r in by_retriever[k])]
        names = [n for n in config.retrievers if n in by_retriever] + by_ids
        result = summarise(by_retriever, ctx.probes, config, ctx.labels, names=names)
        if by_cites:
            result.cited = summarise_cited(by_retriever, ctx.probes, config, by_cites)
        result.costs = {k: memory_costs(by_retriever[k]) for k in done}
        result.memory_errors = errors
        result.skipped = ctx.skipped
        files: dict[str, Any] = {
            "breakdown.json": result.breakdown,
            "distance.json": result.distance,
        }
        if memories:
            budget = {"k": min(config.depth, max(p.cutoff for p in ctx.probes))}
            budget["tokens"] = config.memory_tokens  # type: ignore[assignment]
            files["memory_costs.json"] = {
                "definitions": DEFINITIONS,
                "budget": budget,
                "systems": result.costs,
                "failed": errors,
            }
        outcome = Outcome(
            summary=result.headline(),
            files=files,
            warnings=result.warnings,
            notes={"skipped": ctx.skipped},
            result=result,
            flags=rc.cut_flags(result.costs, ""),
        )
        return outcome

    def show(self, outcome: Outcome, config: RetrievalConfig) -> list[Table | str]:
        result: RetrievalResult = outcome.result
        metrics = [
            *(f"hit@{k}" for k in config.ks),
            "mrr",
            f"mrr@{config.depth}",
            f"recall@{config.depth}",
        ]
        cite_metrics = [f"cite-{m}" for m in metrics if m != "mrr"]
        shown: list[Table | str] = [
            summary_table(
                f"Retrieval: {name} (95% bootstrap intervals)",
                table,
                cite_metrics if name.startswith(CITED) else metrics,
                "memory system" if name.startswith(CITED) else "retriever",
                outcome.flags,
            )
            for name, table in result.headline().items()
        ]
        chance = result.summary.get("random", {})
        if f"expected hit@{config.depth}" in chance:
            expected = ", ".join(
                f"hit@{k} {chance[f'expected hit@{k}'].value:.3f}" for k in config.ks
            )
            shown.append(
                f"random: chance level given each probe's candidates and references: {expected}"
            )
        if result.costs:
            shown.append(costs_table(result.costs))
        shown += [f"left out: {count} {what}" for what, count in result.skipped.items()]
        return shown


RETRIEVAL = register(RetrievalTrack())


def solve_memory(name: str, unit: MemoryUnit, ctx: Probes, plan: Plan[Unit]) -> Rows:
    """Score what the memory system recalled at every probe (its saved recall units): id
    memories as a ranking (`_item_row`), text memories by the positions they cite."""
    assert ctx.recalls is not None
    system = name.removeprefix("memory:")
    rows: Rows = []
    for sid, group in ctx.by_subject.items():
        subject = ctx.subjects[sid]
        got = ctx.recalls.recalls(plan, system, sid)
        ids = [m.id for m in subject.messages]
        for p, r in zip(group, got, strict=True):
            rows.append(_memory_row(name, unit.spec, p, ids, r))
    return rows


def _positional_ranks(p: Probe, found: Sequence[int]) -> list[int | None]:
    """The 1-based place of each of `p`'s references among `found` (None: not there)."""
    where = {at: i + 1 for i, at in enumerate(found)}
    return [where.get(r) for r in p.reference_positions]


def _memory_row(
    name: str,
    spec: str,
    p: Probe,
    ids: Sequence[str],
    r: Recalled,
) -> dict[str, Any]:
    top = np.array(r.positions, dtype=np.int64)
    ranks = np.array(
        [np.inf if x is None else x for x in _positional_ranks(p, r.positions)], dtype=float
    )
    row = _item_row(name, p, ids, top, ranks)
    cost = r.cost
    row.update(
        memory=spec,
        id_memories=len(r.id_memories),
        text_memories=len(r.text_memories),
        cited=[ids[c] for c in r.cited_positions],
        cite_ranks=_positional_ranks(p, r.cited_positions),
        invalid_ids=list(r.invalid_ids),
        latency_ms=1000 * r.latency_s,
        ingested=r.ingested,
        ingest_ms=1000 * r.ingest_s,
        context_tokens=r.context_tokens,
        cut=r.cut,
        system_cost=None if cost is None else vars(cost).copy(),
    )
    return row


def _scored_by_id(rows: Rows) -> bool:
    """A memory system is scored as a ranking when it returned an id memory, or nothing but
    id memories (a system that returned nothing at all scores 0 there)."""
    return any(r["id_memories"] for r in rows) or not any(r["text_memories"] for r in rows)


def memory_costs(rows: Rows) -> dict[str, Any]:
    """One system's memory_costs.json entry from its rows (`memory/costs.py`, the same
    figures `memory.replay_costs` gives over the replays)."""
    reported = [SystemCost(**r["system_cost"]) for r in rows if r.get("system_cost") is not None]
    system = None
    for c in reported:
        system = c if system is None else system + c
    return summarise_costs(
        ingested=sum(r["ingested"] for r in rows),
        ingest_s=sum(r["ingest_ms"] for r in rows) / 1000,
        latencies_s=[r["latency_ms"] / 1000 for r in rows],
        memories=[r["id_memories"] + r["text_memories"] for r in rows],
        context_tokens=[r["context_tokens"] for r in rows],
        invalid_ids=sum(len(r["invalid_ids"]) for r in rows),
        system=system,
        cut=[(r.get("cut", 0), r["id_memories"] + r["text_memories"]) for r in rows],
    )


def costs_table(costs: dict[str, dict[str, Any]]) -> Table:
    """What each memory system cost (definitions in memory_costs.json)."""
    table = Table(title="Memory systems: cost and speed (memory_costs.json)", title_justify="left")
    heads = ["system", "recall ms p50", "p95", "p99", "ingest ms/msg", "memories/q", "tokens/q"]
    for i, head in enumerate([*heads, "invalid ids"]):
        table.add_column(
            head, style="bold" if i == 0 else None, justify="left" if i == 0 else "right"
        )

    def num(x: float | None, digits: int = 2) -> str:
        return "-" if x is None else f"{x:.{digits}f}"

    for name, c in costs.items():
        ms = c["recall_ms"]
        table.add_row(
            name,
            num(ms["p50"], 3),
            num(ms["p95"], 3),
            num(ms["p99"], 3),
            num(c["ingest_ms_per_message"], 4),
            num(c["memories_per_query"], 1),
            num(c["context_tokens_per_query"], 1),
            str(c["invalid_ids"]),
        )
    return table


def summarise_cited(
    rows: dict[str, Rows], probes: Sequence[Probe], config: RetrievalConfig, names: Sequence[str]
) -> dict[str, dict[str, dict[str, Estimate]]]:
    """Text memories scored by the evidence they cite: `cited evidence: POPULATION` ->
    system -> cite-hit@k, cite-mrr@K, cite-recall@k (one paired bootstrap per population)."""
    n = len(probes)
    width = max(len(p.reference_positions) for p in probes)
    columns: list[tuple[str, str]] = []
    values: list[np.ndarray] = []
    for name in names:
        ranks = np.full((n, width), np.nan)
        for i, row in enumerate(rows[name]):
            got = row["cite_ranks"]
            ranks[i, : len(got)] = [np.inf if r is None else r for r in got]
        for metric, v in metric_table(ranks, config.ks).items():
            if metric != "mrr":  # what was cited is all there is: mrr is mrr@K
                columns.append((name, f"cite-{metric}"))
                values.append(v)
    matrix = np.column_stack(values)
    clusters = np.array([p.subject_id for p in probes]) if config.cluster == "subject" else None
    kind = np.array([p.kind for p in probes])
    out: dict[str, dict[str, dict[str, Estimate]]] = {}
    for population, mask in (
        (CHAT, kind == "chat"),
        (QUESTIONS, kind == "question"),
        (POOLED, np.ones(n, dtype=bool)),
    ):
        if not mask.any():
            continue
        sub = None if clusters is None else clusters[mask]
        ests = bootstrap_means(matrix[mask], sub, n_boot=config.n_boot, seed=config.seed)
        table: dict[str, dict[str, Estimate]] = {}
        for (name, metric), e in zip(columns, ests, strict=True):
            table.setdefault(name, {})[metric] = e
        out[CITED + population] = table
    return out


def _item_row(
    retriever: str, p: Probe, ids: Sequence[str], top: np.ndarray, ranks: np.ndarray
) -> dict[str, Any]:
    refs = p.reference_positions
    return {
        "retriever": retriever,
        "subject": p.subject_id,
        "probe": p.id,
        "kind": p.kind,
        **p.labels,
        "candidates": p.cutoff,
        "references": [ids[r] for r in refs],
        "ranks": [None if np.isinf(x) else int(x) for x in ranks[: len(refs)]],
        "top": [ids[t] for t in top if t >= 0],
        "nearest": p.cutoff - max(refs),
        "furthest": p.cutoff - min(refs),
    }


def _bucket(distance: int) -> str:
    for lo, hi in DISTANCE_BUCKETS:
        if hi is None or distance <= hi:
            return f"{lo}+" if hi is None else f"{lo}-{hi}"
    raise AssertionError("unreachable")


def summarise(
    rows: dict[str, Rows],
    probes: Sequence[Probe],
    config: RetrievalConfig,
    labels: Sequence[MemoryLabels | None] | None = None,
    names: Sequence[str] | None = None,
) -> RetrievalResult:
    """Figures from each retriever's rows: one paired bootstrap over all retrievers per group.

    `labels` are the chat probes' memory labels (None for a question; all None when not
    given), which the need and dependent facets read. `names`: the systems to score (the
    configured retrievers unless given; id-scored memory systems are added by the track)."""
    labels = list(labels) if labels is not None else [None] * len(probes)
    n = len(probes)
    rank_width = max(len(p.reference_positions) for p in probes)
    warnings: list[str] = []
    distant = np.array([_distant(lab) for lab in labels], bool)
    present = np.zeros((n, rank_width), bool)  # a probe's references (the rest is padding)
    required = np.zeros((n, rank_width), bool)  # those of them a distant probe counts
    for i, p in enumerate(probes):
        far = [p.cutoff - r > RECENT_WINDOW for r in p.reference_positions]
        present[i, : len(far)] = True
        required[i, : len(far)] = far if distant[i] else True

    def table(keep: npt.NDArray[np.bool_]) -> tuple[list[tuple[str, str]], FloatArray]:
        """Every system's per-probe metrics over the references `keep` marks."""
        columns: list[tuple[str, str]] = []
        values: list[FloatArray] = []
        for name in config.retrievers if names is None else names:
            ranks = np.full((n, rank_width), np.nan)
            for i, row in enumerate(rows[name]):
                got = [np.inf if r is None else r for r in row["ranks"]]
                ranks[i, : len(got)] = got
            ranks[~keep] = np.nan
            for metric, v in metric_table(ranks, config.ks).items():
                columns.append((name, metric))
                values.append(v)
            if name == "random":
                cand = np.array([p.cutoff for p in probes], dtype=float)
                m = keep.sum(axis=1).astype(float)
                for k in config.ks:
                    columns.append((name, f"expected hit@{k}"))
                    values.append(random_hit_expectation(cand, m, k))
        return columns, np.column_stack(values)

    columns, matrix = table(present)
    clusters = np.array([p.subject_id for p in probes]) if config.cluster == "subject" else None
    estimate = masked_estimates(matrix, columns, clusters, config.n_boot, config.seed)
    summary = estimate(np.ones(n, dtype=bool))
    kind = np.array([p.kind for p in probes])
    dependent = np.array([lab is not None and lab.depends_past_last_three for lab in labels], bool)
    populations = {
        name: estimate(mask)
        for name, mask in ((CHAT, kind == "chat"), (QUESTIONS, kind == "question"))
        if mask.any()
    }
    if CHAT in populations:
        populations[DEPENDENT] = estimate(dependent)
        if distant.any():
            far_columns, far_matrix = table(required)
            populations[DISTANT] = masked_estimates(
                far_matrix, far_columns, clusters, config.n_boot, config.seed
            )(distant)
    facets: dict[str, list[str]] = {"kind": [p.kind for p in probes]}
    for key in ("stratum", "tier", "category"):
        levels = [p.labels.get(key, "") for p in probes]
        if any(levels):
            facets[key] = levels
    if CHAT in populations:
        facets["need"] = [
            "" if lab is None else NEEDS if lab.needs(config.reading) else NO_NEED for lab in labels
        ]
        facets["dependent"] = [
            "" if lab is None else "dependent" if lab.depends_past_last_three else "not dependent"
            for lab in labels
        ]
    nearest = np.array([p.cutoff - max(p.reference_positions) for p in probes])
    furthest = np.array([p.cutoff - min(p.reference_positions) for p in probes])
    facets["nearest distance"] = [_bucket(int(d)) for d in nearest]
    breakdown: dict[str, dict[str, dict[str, dict[str, Estimate]]]] = {}
    distance: dict[str, dict[str, float]] = {"all": _distance_stats(nearest, furthest)}
    for facet, levels in facets.items():
        arr = np.array(levels)
        for level in sorted(set(levels) - {""}):
            mask = arr == level
            for name, metrics in estimate(mask).items():
                breakdown.setdefault(name, {}).setdefault(facet, {})[level] = metrics
            if facet != "nearest distance":
                distance[f"{facet}={level}"] = _distance_stats(nearest[mask], furthest[mask])
    if "broken-oracle" in summary:
        for metric, e in summary["broken-oracle"].items():
            if metric.startswith("hit@") and e.value > 0:
                warnings.append(
                    f"CONTROL FAILED: broken-oracle {metric} = {e.value:.4f}, expected 0. "
                    "Another item's references should never find this item's: check for "
                    "duplicate items or references shared between items."
                )
    if CHAT in populations and not dependent.any():
        warnings.append(
            "no chat probe with references is marked dependent: the dependent figures have no value"
        )
    return RetrievalResult(
        summary=summary,
        breakdown=breakdown,
        distance=distance,
        warnings=warnings,
        populations=populations,
    )


def _distant(lab: MemoryLabels | None) -> bool:
    """A distant chat probe: locus `distant`; unlabelled, one needing memory (recorded)."""
    if lab is None:
        return False
    return lab.locus == "distant" if lab.locus is not None else lab.recorded


def _distance_stats(nearest: np.ndarray, furthest: np.ndarray) -> dict[str, float]:
    """How many messages back the nearest and furthest references sit."""
    out: dict[str, float] = {"n": float(len(nearest))}
    for name, d in (("nearest", nearest), ("furthest", furthest)):
        out[f"{name} median"] = float(np.median(d))
        out[f"{name} p75"] = float(np.percentile(d, 75))
        out[f"{name} max"] = float(d.max())
    return out
