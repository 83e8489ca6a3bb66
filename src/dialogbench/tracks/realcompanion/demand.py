"""Memory-demand track (RealCompanion, "The past is rarely needed, and far away"; "Pooled
measures mislead"): how often a person's message needs memory, and how far back, read from a
release folder's chat labels. No model is called.

"Needs memory" is the item's own labels under each reading (`memory.py`): *recorded* (a
verified reference lies outside the recent thread) and *strict* (and the reference reply
depends on it). Distances count messages back from the probe (1 = the message just before).

Figures, each with a 95% bootstrap interval (items resampled, or whole subjects with
`--cluster subject`):

    demand rate        share of proportional-stratum items that need memory (the only
                       stratum that answers "how often": a uniform sample of messages)
    census rate        the paper's census: the share of the person's messages *outside the
                       proportional sample* that need memory, over those the census labelled:
                       in each subject with census labels (`census.jsonl`, `build
                       realcompanion --census`; the censused subjects, named in
                       summary.json), every person message that is no proportional item and
                       carries a label (its enriched or abstention chat item, or its census
                       line). No census labels: no value, and a warning
    re-reading rate    the second procedure over the same population: the share of the
                       re-read person messages outside the proportional sample (`reread.jsonl`,
                       `build realcompanion --reread`) whose re-reading under the verification
                       instruction kept a referent outside the recent thread (one reading:
                       under `recorded`; `strict` has none). No re-reading: no value, and a
                       warning
    nearest / furthest how many messages back the nearest and the furthest *required*
                       reference sit (`memory.py`: outside the recent thread, the ones that
                       make the item need memory), over every item (any stratum) that needs
                       memory: median, upper quartile (p75) and max (a sample maximum has no
                       bootstrap interval: its ci is null). The paper's 450 and 2,157.
    recency window     over items with a reference set: the share for which the last
                       `window` messages hold a required reference (`finds required`: the
                       paper's "finds the required message", 95.9% of all such probes, 2.2%
                       of those that need memory) and every required one (`finds all
                       required`, ours); over all such items and over those that need memory.
                       Over all of them too: the share whose every reference lies in the
                       recent thread (`answerable from the recent thread`, the paper's 72.6%)
    subjects           each subject's items, memory-needing items and share of all of them,
                       its own proportional demand rate, per reading (subjects.json); and the
                       subjects that contribute no memory-needing item (summary.json)

Subjects without a chat item, census line or re-reading are left out (they have nothing to
read). Every figure but the two census rates reads the chat items alone. A corpus with no chat
item at all (LoCoMo, MemoryBank: questions only) stops with an error saying so; build its
chat ground truth first.

One unit per subject; its rows (one per chat item, census line and re-reading) hold the
labels and distances:

RUN_DIR/items.jsonl     source (chat, census or reread), subject, probe, stratum, tier, rule,
                        locus, person, references, nearest, furthest, needs_memory,
                        needs_memory_strict, dependent, supported, surface_tier, labelled (the
                        item has needs_memory); a re-reading's row: source, subject, probe,
                        person, outside (no proportional item), needs_memory, referents
RUN_DIR/summary.json    readings -> reading -> figure; recency window -> population -> figure;
                        census (subjects, population, labelled); re-reading (subjects,
                        re-read); subjects contributing none; item counts
RUN_DIR/subjects.json   subject -> its counts, censused flag and per-reading contribution
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from rich.table import Table

from dialogbench.data.model import RECENT_WINDOW, Dataset, Message, Reading, Subject
from dialogbench.report.table import summary_table
from dialogbench.runner import Outcome, Plan, TrackBase, option, register
from dialogbench.runner import config as shared
from dialogbench.runner.track import Models, Rows
from dialogbench.stats.bootstrap import (
    Estimate,
    bootstrap_means,
    nan_estimate,
    percentile_interval,
    resample_counts,
)
from dialogbench.tracks.realcompanion.memory import READINGS, labels_of, memory_labels

TRACK = "demand"
FloatArray = npt.NDArray[np.float64]
QUANTILES = (("median", 0.5), ("p75", 0.75))
RATE_FIGURES = ("demand rate", "census rate", "re-reading rate")
DISTANCE_FIGURES = tuple(
    f"{side} {name}" for side in ("nearest", "furthest") for name in ("median", "p75", "max")
)
WITH_REFERENCES = "probes with references"
RECENCY_WINDOW = 10
"""The recency window's default: the ten preceding messages the paper's context conditions
supply (the paper does not state the window behind its 95.9% and 2.2%)."""
WINDOW_FIGURES = ("finds required", "finds all required")
RECENT_THREAD = "answerable from the recent thread"


def needs_label(reading: Reading) -> str:
    """The recency-window population of the items that need memory under `reading`."""
    return f"needs memory ({reading})"


@dataclass(frozen=True)
class DemandConfig:
    """The recency window and how to draw intervals."""

    window: int = option(
        RECENCY_WINDOW,
        help="the recency window: messages before the probe whose finds are counted (at "
        f"most {RECENT_WINDOW}, the recent thread, it never finds a memory item's required "
        "message)",
        min=1,
        max=1_000_000,
        stage="aggregate",
    )
    seed: int = shared.seed("the bootstrap", stage="aggregate")
    n_boot: int = shared.n_boot()
    cluster: Literal["item", "subject"] = option(
        "item", help="resample items, or whole subjects", stage="aggregate"
    )


@dataclass(frozen=True)
class Census:
    """One subject's person messages, how many carry a chat item, and the census's and the
    re-reading's population: the person messages outside the proportional sample."""

    person_messages: int
    labelled: int
    outside: int = 0
    """Person messages that are no proportional item."""
    census_lines: int = 0
    """Of those, how many carry a census line."""
    census_labelled: int = 0
    """Of those, how many carry a label (a chat item or a census line)."""
    reread: int = 0
    """Of those, how many were re-read."""

    @property
    def censused(self) -> bool:
        """The subject has census labels (`census.jsonl`)."""
        return self.census_lines > 0


@dataclass
class DemandResult:
    """The track's figures as written to the run folder."""

    readings: dict[str, dict[str, Estimate]]
    window: dict[str, dict[str, Estimate]]
    subjects: dict[str, dict[str, Any]]
    censused: list[str]
    contributing_none: dict[str, list[str]]
    items: dict[str, int]
    window_size: int = RECENT_WINDOW
    warnings: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return {
            "readings": self.readings,
            "recency window": self.window,
            "window": self.window_size,
            "census": {
                "subjects": self.censused,
                "person messages outside the proportional sample": sum(
                    self.subjects[s]["outside the proportional sample"] for s in self.censused
                ),
                "labelled": sum(self.subjects[s]["census labelled"] for s in self.censused),
            },
            "re-reading": {
                "subjects": sorted(s for s, v in self.subjects.items() if v["re-read"]),
                "re-read": sum(v["re-read"] for v in self.subjects.values()),
            },
            "subjects contributing none": {
                r: {"count": len(v), "subjects": v} for r, v in self.contributing_none.items()
            },
            "items": self.items,
        }


def person_messages(subject: Subject) -> list[Message]:
    """The messages of the person under study: role `user`, and one of `subject.speakers`
    when the subject names them."""
    who = set(subject.speakers)
    return [m for m in subject.messages if m.role == "user" and (not who or m.speaker in who)]


def subject_rows(subject: Subject) -> Rows:
    """One row per chat item of `subject` (its labels and reference distances), per census
    line (the same) and per re-reading."""
    labels = labels_of(subject)
    pos = subject.position_of()
    person = {m.id for m in person_messages(subject)}
    sampled = {i.probe_id for i in subject.chat_items if i.stratum == "proportional"}
    rows: Rows = []
    items = [("chat", i) for i in subject.chat_items] + [("census", i) for i in subject.census]
    for source, item in items:
        if source == "chat":
            lab = labels[item.probe_id]
        else:
            refs = [pos[r] for r in item.reference_ids if r in pos]
            lab = memory_labels(item, pos[item.probe_id], refs)
        rows.append(
            {
                "source": source,
                "subject": subject.id,
                "probe": item.probe_id,
                "stratum": item.stratum,
                "tier": item.tier,
                "rule": item.rule,
                "locus": item.locus,
                "person": item.probe_id in person,
                "references": 0 if lab.nearest is None else len(item.reference_ids),
                "nearest": lab.nearest,
                "furthest": lab.furthest,
                "required nearest": lab.required_nearest,
                "required furthest": lab.required_furthest,
                "needs_memory": lab.recorded,
                "needs_memory_strict": lab.strict,
                "dependent": lab.dependent,
                "supported": item.supported,
                "surface_tier": item.surface_tier,
                "labelled": item.needs_memory is not None,
            }
        )
    for r in subject.reread:
        rows.append(
            {
                "source": "reread",
                "subject": subject.id,
                "probe": r.probe_id,
                "person": r.probe_id in person,
                "outside": r.probe_id not in sampled,
                "needs_memory": r.needs_memory,
                "referents": len(r.referent_ids),
            }
        )
    return rows


def census_of(subject: Subject) -> Census:
    """How many of the subject's person messages carry a chat item, and of those outside
    the proportional sample how many carry a census line, any label, a re-reading."""
    ids = {m.id for m in person_messages(subject)}
    labelled = {i.probe_id for i in subject.chat_items} & ids
    outside = ids - {i.probe_id for i in subject.chat_items if i.stratum == "proportional"}
    lines = {i.probe_id for i in subject.census} & outside
    return Census(
        person_messages=len(ids),
        labelled=len(labelled),
        outside=len(outside),
        census_lines=len(lines),
        census_labelled=len((labelled & outside) | lines),
        reread=len({r.probe_id for r in subject.reread} & outside),
    )


def _has_labels(subject: Subject) -> bool:
    return bool(subject.chat_items or subject.census or subject.reread)


class DemandTrack(TrackBase[DemandConfig, Subject]):
    """One unit per subject with chat items: its items' labels and distances."""

    name = TRACK
    summary = "How often the past is needed and how far back, from the chat labels (no model)."
    config_type = DemandConfig

    def plan(self, data: Dataset, config: DemandConfig) -> Plan[Subject]:
        units = {s.id: s for s in data.subjects if _has_labels(s)}
        if not any(s.chat_items for s in data.subjects):
            raise ValueError(
                f"dataset {data.name!r} has no chat item: the demand track reads chat.jsonl "
                "labels (needs_memory, needs_memory_strict, or reference_ids)"
            )
        census = {s.id: census_of(s) for s in data.subjects if _has_labels(s)}
        return Plan(units, warnings=list(data.warnings), context=census)

    async def solve(
        self, unit: Subject, models: Models, config: DemandConfig, plan: Plan[Subject]
    ) -> Rows:
        return subject_rows(unit)

    def aggregate(self, plan: Plan[Subject], rows: Rows, config: DemandConfig) -> Outcome:
        result = summarise(rows, plan.context, config)
        return Outcome(
            summary=result.summary(),
            files={"subjects.json": result.subjects},
            warnings=list(result.warnings),
            result=result,
        )

    def show(self, outcome: Outcome, config: DemandConfig) -> list[Table | str]:
        result: DemandResult = outcome.result
        far = "How many messages back, when memory is needed (max: no interval)"
        shown: list[Table | str] = [
            summary_table(
                "Memory demand (95% bootstrap intervals)", result.readings, RATE_FIGURES, "reading"
            ),
            summary_table(far, result.readings, DISTANCE_FIGURES, "reading"),
            summary_table(
                f"Recency window of the last {result.window_size} messages",
                result.window,
                [*WINDOW_FIGURES, RECENT_THREAD],
                "probes",
            ),
        ]
        censused = ", ".join(result.censused) or "none (no census labels: build --census)"
        shown.append(f"censused subjects: {censused}")
        summary = result.summary()
        census, reread = summary["census"], summary["re-reading"]
        outside = census["person messages outside the proportional sample"]
        if result.censused:
            shown.append(
                f"census rate over the {census['labelled']} labelled of their {outside} person "
                "messages outside the proportional sample"
            )
        if reread["re-read"]:
            shown.append(
                f"re-reading rate over {reread['re-read']} re-read person messages outside the "
                f"proportional sample ({', '.join(reread['subjects'])})"
            )
        n = len(result.subjects)
        for reading, none in result.contributing_none.items():
            names = f": {', '.join(none)}" if none else ""
            shown.append(
                f"{reading}: {len(none)} of {n} subjects contribute no memory-needing item{names}"
            )
        return shown


DEMAND = register(DemandTrack())


# -- figures --------------------------------------------------------------------------------


def quantile_replicates(values: FloatArray, q: float, weights: FloatArray) -> FloatArray:
    """The q-quantile (linear interpolation, as `np.percentile`) of `values` in each resample,
    where `weights[b, i]` is how often item i is drawn in resample b; NaN for an empty one."""
    order = np.argsort(values, kind="stable")
    xs = values[order]
    cum = np.cumsum(weights[:, order], axis=1)
    total = cum[:, -1] if len(xs) else np.zeros(len(weights))
    h = np.maximum(total - 1, 0) * q
    lo = np.floor(h)
    frac = h - lo

    def order_stat(k: FloatArray) -> FloatArray:
        at = (cum > k[:, None]).argmax(axis=1)  # first item whose cumulative count passes k
        got: FloatArray = xs[at]
        return got

    out = order_stat(lo) + frac * (order_stat(np.minimum(lo + 1, total - 1)) - order_stat(lo))
    return np.where(total > 0, out, np.nan)


def bootstrap_quantile(
    values: Sequence[float] | FloatArray,
    q: float,
    clusters: Sequence[str] | None = None,
    *,
    n_boot: int = 2000,
    seed: int = 0,
) -> Estimate:
    """The q-quantile of `values` with a percentile bootstrap interval (items resampled, or
    whole `clusters`); NaN over nothing."""
    x = np.asarray(values, dtype=np.float64)
    if len(x) == 0:
        return nan_estimate()
    if clusters is None:
        unit = np.arange(len(x))
    else:
        _, unit = np.unique(np.asarray(clusters), return_inverse=True)
    counts = resample_counts(int(unit.max()) + 1, n_boot, np.random.default_rng(seed))
    reps = quantile_replicates(x, q, counts[:, unit])
    lo, hi = percentile_interval(reps)
    value = float(np.percentile(x, q * 100))
    return Estimate(value=value, ci_low=float(lo), ci_high=float(hi), n=len(x))


def _max(values: FloatArray) -> Estimate:
    if not len(values):
        return nan_estimate()
    nan = float("nan")
    return Estimate(value=float(values.max()), ci_low=nan, ci_high=nan, n=len(values))


def summarise(
    rows: Sequence[dict[str, Any]], census: dict[str, Census], config: DemandConfig
) -> DemandResult:
    """The figures from the item rows and each subject's census."""
    everything = rows
    rows = [r for r in everything if r.get("source", "chat") == "chat"]
    n = len(rows)
    subject = np.array([r["subject"] for r in rows], dtype=object)
    stratum = np.array([r["stratum"] for r in rows], dtype=object)

    def distances(key: str) -> FloatArray:
        return np.array([np.nan if r[key] is None else r[key] for r in rows], float)

    furthest = distances("furthest")
    nearest, far = distances("required nearest"), distances("required furthest")
    need = {
        "recorded": np.array([r["needs_memory"] for r in rows], bool),
        "strict": np.array([r["needs_memory_strict"] for r in rows], bool),
    }
    censused = sorted(s for s, c in census.items() if c.censused)
    proportional = stratum == "proportional"
    population = [
        r
        for r in everything
        if r.get("source", "chat") in ("chat", "census")
        and r["subject"] in censused
        and r["person"]
        and r["stratum"] != "proportional"
    ]
    reread = [r for r in everything if r.get("source") == "reread" and r["person"] and r["outside"]]
    has_refs = ~np.isnan(nearest)
    boot = {"n_boot": config.n_boot, "seed": config.seed}

    def clusters(mask: npt.NDArray[np.bool_]) -> Sequence[str] | None:
        return list(subject[mask]) if config.cluster == "subject" else None

    def mean(values: npt.NDArray[np.bool_], mask: npt.NDArray[np.bool_]) -> Estimate:
        return bootstrap_means(values[mask].astype(float), clusters(mask), **boot)[0]

    def rate(of: Sequence[dict[str, Any]], key: str) -> Estimate:
        """The share of `of` whose `key` is true (clusters: their subjects)."""
        if not of:
            return nan_estimate()
        values = np.array([bool(r[key]) for r in of], float)
        who = [str(r["subject"]) for r in of] if config.cluster == "subject" else None
        return bootstrap_means(values, who, **boot)[0]

    nan = nan_estimate()
    readings: dict[str, dict[str, Estimate]] = {}
    window: dict[str, dict[str, Estimate]] = {}
    finds = nearest <= config.window  # NaN compares False
    finds_all = far <= config.window
    window[WITH_REFERENCES] = {
        "finds required": mean(finds, has_refs),
        "finds all required": mean(finds_all, has_refs),
        RECENT_THREAD: mean(furthest <= RECENT_WINDOW, has_refs),
    }
    for reading in READINGS:
        needs = need[reading]
        key = "needs_memory" if reading == "recorded" else "needs_memory_strict"
        figures = {
            "demand rate": mean(needs, proportional),
            "census rate": rate(population, key),
            "re-reading rate": rate(reread, "needs_memory") if reading == "recorded" else nan,
        }
        measured = needs & has_refs
        for side, d in (("nearest", nearest), ("furthest", far)):
            for name, q in QUANTILES:
                figures[f"{side} {name}"] = bootstrap_quantile(
                    d[measured], q, clusters(measured), **boot
                )
            figures[f"{side} max"] = _max(d[measured])
        readings[reading] = figures
        window[needs_label(reading)] = {
            "finds required": mean(finds, measured),
            "finds all required": mean(finds_all, measured),
        }
    per_subject, none = _subjects(rows, census, need, config)
    items = {"all": n, **{s: int((stratum == s).sum()) for s in sorted(set(stratum.tolist()))}}
    warnings = _warnings(rows, proportional, census, bool(reread))
    return DemandResult(
        readings=readings,
        window=window,
        window_size=config.window,
        subjects=per_subject,
        censused=censused,
        contributing_none=none,
        items=items,
        warnings=warnings,
    )


def _subjects(
    rows: Sequence[dict[str, Any]],
    census: dict[str, Census],
    need: dict[str, npt.NDArray[np.bool_]],
    config: DemandConfig,
) -> tuple[dict[str, dict[str, Any]], dict[str, list[str]]]:
    """Each subject's contribution per reading, and who contributes nothing."""
    subject = np.array([r["subject"] for r in rows], dtype=object)
    proportional = np.array([r["stratum"] == "proportional" for r in rows], bool)
    out: dict[str, dict[str, Any]] = {}
    none: dict[str, list[str]] = {r: [] for r in READINGS}
    for sid, c in sorted(census.items()):
        mine = subject == sid
        entry: dict[str, Any] = {
            "items": int(mine.sum()),
            "proportional items": int((mine & proportional).sum()),
            "person messages": c.person_messages,
            "labelled person messages": c.labelled,
            "censused": c.censused,
            "outside the proportional sample": c.outside,
            "census lines": c.census_lines,
            "census labelled": c.census_labelled,
            "re-read": c.reread,
        }
        for reading in READINGS:
            needs = need[reading]
            count = int((needs & mine).sum())
            total = int(needs.sum())
            mask = mine & proportional
            entry[reading] = {
                "memory items": count,
                "share of memory items": count / total if total else None,
                "demand rate": bootstrap_means(
                    needs[mask].astype(float), n_boot=config.n_boot, seed=config.seed
                )[0],
            }
            if count == 0:
                none[reading].append(sid)
        out[sid] = entry
    return out, none


def _warnings(
    rows: Sequence[dict[str, Any]],
    proportional: npt.NDArray[np.bool_],
    census: dict[str, Census],
    reread: bool,
) -> list[str]:
    out = []
    unlabelled = sum(1 for r in rows if not r["labelled"])
    if unlabelled:
        out.append(
            f"{unlabelled} of {len(rows)} chat items carry no needs_memory label: read by their "
            f"references (needed when the furthest lies more than {RECENT_WINDOW} messages "
            "back; the strict reading also needs `dependent`)"
        )
    if not proportional.any():
        out.append("no item of the proportional stratum: the demand rate has no value")
    censused = {s: c for s, c in census.items() if c.censused}
    if not censused:
        out.append(
            "no census labels (census.jsonl: build realcompanion --census): the census rate "
            "has no value"
        )
    for sid, c in sorted(censused.items()):
        if c.census_labelled < c.outside:
            out.append(
                f"{sid}: the census labelled {c.census_labelled} of its {c.outside} person "
                "messages outside the proportional sample; the census rate counts those only"
            )
    if not reread:
        out.append(
            "no re-reading of the person messages outside the proportional sample "
            "(reread.jsonl: build realcompanion --reread): the re-reading rate has no value"
        )
    return out
