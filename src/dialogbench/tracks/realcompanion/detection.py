"""Memory-need detection track (RealCompanion, "No detector tried can tell when memory is
needed"): can a detector tell, from a probe, whether a good reply needs older messages?

Populations (each probe falls in one), under `--reading` (recorded or strict):

chat track (chat items)
    needs memory     the item needs memory by its own labels under the reading (`memory.py`:
                     its verified needs_memory / needs_memory_strict; unlabelled, a reference
                     more than RECENT_WINDOW = 8 messages back): the positives
    recent thread    references, and no memory needed under the reading
    cold open        no memory needed, and the item is in the `abstention` stratum or its
                     probe is a session opener (the first user message of its session; with
                     no session labels, the first user message of the conversation)
    referent absent  no references, and not a cold open
question track
    question         every authored question (all are about the past): the positives
    session opener   the first user message of every session (the first one has no history)

Contrasts, each an AUROC with a 95% bootstrap interval (positives and negatives resampled
separately) and an operating point at `threshold` (flagged = score >= threshold):

    auroc vs referent absent    needs memory vs referent absent
    auroc vs cold opens         needs memory vs cold open
    auroc vs recent thread      needs memory vs recent thread
    auroc vs own target         needs memory vs every other chat probe: the target the
                                detectors are asked about; the model detectors' own yes/no
                                is scored against it too ("own decision")
    question auroc vs session openers   question vs session opener

Each chat contrast is also given on the proportional stratum alone ("... (proportional)"):
positives and negatives from the natural-rate sample only, where the paper's operating point
reads "6 of 40 caught, 40 false alarms"; against cold opens the negatives stay every cold
open (the abstention control is a stratum of its own).

Cue leakage, per detector: `question - chat auroc` = question auroc vs session openers minus
auroc vs own target, with a bootstrap interval from the two AUROCs' replicates drawn in the
same resample (each class resampled on its own).

A contrast with an empty side is reported with a null value and the reason, never dropped.
Unscored model replies are left out of the AUROC and counted per detector and population.
`--limit` draws by the populations under the recorded reading.

RUN_DIR/manifest.json     dataset, config, model settings, prompt and cue digests
RUN_DIR/items.jsonl       one record per probe x detector: population and label (under the
                          recorded reading), needs_memory / needs_memory_strict (chat items),
                          score, the detector's own decision, cues or retrieved ids, raw +
                          error if unscored
RUN_DIR/summary.json      detector -> "auroc vs <population>" (and "... (proportional)",
                          "question - chat auroc") -> {value, ci_low, ci_high, n}
RUN_DIR/contrasts.json    the same with operating points (threshold, own decision) and the
                          unscored counts
RUN_DIR/populations.json  population sizes, contrast definitions, empty contrasts and why,
                          unscored probes per detector and population
RUN_DIR/memory_costs.json with --memory: the budget (k = window), the cost definitions and
                          each system's ingest time, recall latency and context tokens per
                          probe (`memory/costs.py`)
RUN_DIR/usage.json        calls and tokens of the model role (the model detectors)
RUN_DIR/warnings.json     data repairs, empty contrasts, unscored replies
RUN_DIR/parts/solved.jsonl  one line per finished detector; a rerun of the same run keeps them

`--memory SPEC[,SPEC...]` adds a detector per memory system, `model-memory:NAME`: the
model reads the probe and what the system recalled for it (at most `window` memories; the
system is fed each subject's conversation in time order up to each probe, once per subject,
at plan time: `tracks/realcompanion/recall.py`), as model-retrieved reads BM25's top
`window`. Its rows carry the recalled ids and texts and the recall's latency; a subject the
system failed on leaves its probes unscored with the error (counted, exit status 3, done
again on a rerun).

Units: one detector over every probe (the text detectors are vectorised per subject; a
model detector sends every probe's prompt as one batch, then the corrections).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel
from rich.table import Table

from dialogbench.data.model import Dataset, Reading, Subject
from dialogbench.memory import Budget, query_of
from dialogbench.models.model import Model
from dialogbench.report.table import summary_table
from dialogbench.retrieval.analyzers import analyzer_for
from dialogbench.retrieval.base import Probe, build_probes
from dialogbench.runner import Outcome, Plan, TrackBase, model_role, option, register
from dialogbench.runner import config as shared
from dialogbench.runner.track import Models, Rows
from dialogbench.stats.bootstrap import Estimate, nan_estimate, percentile_estimate
from dialogbench.stats.roc import (
    OperatingPoint,
    auroc,
    auroc_replicates,
    bootstrap_auroc,
    operating_point,
)
from dialogbench.tracks.common import ask_each, outcome_of, stratified_limit
from dialogbench.tracks.realcompanion import detectors as det
from dialogbench.tracks.realcompanion import recall as rc
from dialogbench.tracks.realcompanion.detection_prompts import (
    MEMORY_PROMPT_SHA256,
    PROMPT_SHA256,
    MemoryNeed,
)
from dialogbench.tracks.realcompanion.memory import (
    READING_HELP,
    MemoryLabels,
    cold_open,
    labels_of,
    session_openers,
)

TRACK = "detection"
TEXT_DETECTORS = ("lexical", "bm25")
MODEL_DETECTORS = ("model-context", "model-retrieved")
ALL_DETECTORS = TEXT_DETECTORS + MODEL_DETECTORS
MEMORY_DETECTOR = "model-memory:"
"""The prefix of a memory system's detector (`--memory`)."""

NEEDS, RECENT, COLD, ABSENT = "needs memory", "recent thread", "cold open", "referent absent"
QUESTION, OPENER = "question", "session opener"
GROUPS = (NEEDS, RECENT, COLD, ABSENT, QUESTION, OPENER)
CONTRASTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "auroc vs referent absent": (NEEDS, (ABSENT,)),
    "auroc vs cold opens": (NEEDS, (COLD,)),
    "auroc vs recent thread": (NEEDS, (RECENT,)),
    "auroc vs own target": (NEEDS, (ABSENT, COLD, RECENT)),
    "question auroc vs session openers": (QUESTION, (OPENER,)),
}
OWN_TARGET = "auroc vs own target"
QUESTION_CONTRAST = "question auroc vs session openers"
CHAT_CONTRASTS = tuple(k for k in CONTRASTS if k != QUESTION_CONTRAST)
PROPORTIONAL = " (proportional)"
LEAKAGE = "question - chat auroc"
"""question auroc vs session openers minus auroc vs own target, on the same detector."""


def default_detectors(with_model: bool) -> tuple[str, ...]:
    """Every detector when a model is given, else the two that need none."""
    return ALL_DETECTORS if with_model else TEXT_DETECTORS


@dataclass(frozen=True)
class DetectionConfig(shared.Sampled):
    """Detectors, threshold, intervals, the model detectors' reply settings, a probe limit."""

    detectors: tuple[str, ...] | None = option(
        None,
        help="detectors (default: lexical, bm25, and the model detectors when --model is given)",
        choices=ALL_DETECTORS,
    )
    threshold: float = option(
        0.5,
        help="operating point: scores at or above it are flagged",
        min=0,
        max=1,
        stage="aggregate",
    )
    memory: tuple[str, ...] = rc.memory_option(
        rc.MEMORY_HELP + "; each gives a detector model-memory:NAME reading its recall"
    )
    memory_window: int | None = rc.memory_window_option()
    analyzer: str = rc.analyzer_option()
    seed: int = shared.seed("the probe limit, the replies and the bootstrap")
    n_boot: int = shared.n_boot()
    window: int = option(3, help="messages the model detectors see", min=1, max=1000)
    """How many messages the model detectors see (the preceding ones, or the best BM25
    matches), and how many BM25 matches the bm25 detector lists."""
    reading: Literal["recorded", "strict"] = option(
        "recorded", help=READING_HELP, stage="aggregate"
    )
    limit: int | None = shared.limit("probes, drawn in turn from each population")
    max_tokens: int = shared.tokens(48, "reply budget of the model detectors")
    temperature: float = shared.temperature(0.0, "sampling temperature of the model detectors")
    max_fixes: int = shared.fixes(1, "corrections of an unusable model reply")

    @property
    def chosen(self) -> tuple[str, ...]:
        """The detectors as run (`configure` fills in the default)."""
        return self.detectors if self.detectors is not None else TEXT_DETECTORS


@dataclass(frozen=True)
class Unit:
    """One probe in one population: `group` is its population under the recorded reading,
    `labels` the chat item's memory labels (None for questions and session openers), and
    `opener` says the probe opens a session (a chat item's probe, or an OPENER unit)."""

    probe: Probe
    group: str
    labels: MemoryLabels | None = None
    opener: bool = False

    @property
    def positive(self) -> bool:
        return self.group in (NEEDS, QUESTION)

    def group_under(self, reading: Reading) -> str:
        """The population under `reading` (questions and openers do not depend on it)."""
        if self.labels is None:
            return self.group
        return chat_group(self.probe, self.opener, self.labels, reading)

    @property
    def proportional(self) -> bool:
        return self.probe.kind == "chat" and self.probe.labels.get("stratum") == "proportional"


class Contrast(BaseModel):
    """One contrast for one detector: AUROC, operating points and what was left out."""

    auroc: Estimate
    threshold: OperatingPoint
    own_decision: OperatingPoint | None = None
    unscored_pos: int = 0
    unscored_neg: int = 0
    empty: str | None = None
    """Why the contrast has no value, when a side is empty."""


@dataclass
class DetectionResult:
    """The track's figures as written to the run folder."""

    summary: dict[str, dict[str, Estimate]]
    contrasts: dict[str, dict[str, Contrast]]
    populations: dict[str, int]
    unscored: dict[str, dict[str, int]]
    empty: dict[str, str] = field(default_factory=dict)
    usage: dict[str, Any] = field(default_factory=dict)
    """usage.json: calls and tokens per role and stage (the model detectors' calls)."""
    warnings: list[str] = field(default_factory=list)


# -- populations ----------------------------------------------------------------------------


def chat_group(p: Probe, opener: bool, labels: MemoryLabels, reading: Reading) -> str:
    """The chat population of a chat probe under `reading` (see the module docstring)."""
    refs = p.reference_positions
    if labels.needs(reading):
        return NEEDS
    if cold_open(False, p.labels.get("stratum", ""), opener):
        return COLD
    return RECENT if refs else ABSENT


def build_units(dataset: Dataset) -> list[Unit]:
    """Every probe of the dataset with its population (under the recorded reading)."""
    units: list[Unit] = []
    for subject in dataset.subjects:
        openers = session_openers(subject)
        first = set(openers)
        labels = labels_of(subject)
        for p in build_probes(subject):
            if p.kind == "question":
                units.append(Unit(p, QUESTION))
            else:
                lab, opener = labels[p.id], p.cutoff in first
                units.append(Unit(p, chat_group(p, opener, lab, "recorded"), lab, opener))
        for at in openers:
            m = subject.messages[at]
            probe = Probe(
                id=m.id,
                subject_id=subject.id,
                kind="chat",
                text=m.text,
                cutoff=at,
                reference_positions=(),
                speakers=(m.speaker,),
                labels={"session": m.session or ""},
            )
            units.append(Unit(probe, OPENER, opener=True))
    return units


def limit_units(units: Sequence[Unit], limit: int | None, seed: int) -> list[Unit]:
    """At most `limit` units, taken in turn from each population."""
    return stratified_limit(units, lambda u: u.group, limit, seed, GROUPS)


# -- running --------------------------------------------------------------------------------


@dataclass
class Probes:
    """What every detector unit shares: the probes with their populations, by subject."""

    units: list[Unit]
    subjects: dict[str, Subject]
    by_subject: dict[str, list[int]]
    detectors: list[str] = field(default_factory=list)
    """Every detector run, the memory ones last."""
    memory: list[str] = field(default_factory=list)
    """The memory detectors (`memory:NAME`)."""
    recalls: rc.Recalls | None = None
    """With `--memory`: the recall stage (each system's replay of each subject)."""

    def shown(self, detector: str, plan: Plan[str]) -> list[rc.Shown | str]:
        """What memory detector `detector`'s system recalled at each unit, in unit order."""
        assert self.recalls is not None
        name = detector.removeprefix(MEMORY_DETECTOR)
        out: list[rc.Shown | str] = []
        for u in self.units:
            sid = u.probe.subject_id
            got = self.recalls.recalled(plan, name, sid, u.probe.id)
            out.append(rc.shown_of(got, self.subjects[sid], u.probe.reference_positions))
        return out


class DetectionTrack(TrackBase[DetectionConfig, str]):
    """One unit per detector: it scores every probe (vectorised per subject, or one batch
    of model calls)."""

    name = TRACK
    summary = "Tell probes that need earlier messages from those that do not; AUROC per contrast."
    config_type = DetectionConfig
    version = 2
    """2: rows carry needs_memory / needs_memory_strict; populations no longer follow window."""
    roles = (model_role("the model the model detectors ask", required=False),)
    stages = (rc.RECALL,)

    def configure(self, config: DetectionConfig, roles: frozenset[str]) -> DetectionConfig:
        """Default detectors: the text ones, plus the model ones when a model is given."""
        if config.detectors is None:
            config = replace(config, detectors=default_detectors("model" in roles))
        unknown = [d for d in config.chosen if d not in ALL_DETECTORS]
        if unknown:
            raise ValueError(f"unknown detector(s) {unknown}; known: {', '.join(ALL_DETECTORS)}")
        wants_model = [d for d in config.chosen if d in MODEL_DETECTORS]
        wants_model += [MEMORY_DETECTOR + spec for spec in config.memory]
        if wants_model and "model" not in roles:
            raise ValueError(
                f"detector(s) {', '.join(wants_model)} need a model: pass --model "
                "(e.g. `embedded`) or model="
            )
        return config

    def plan(self, data: Dataset, config: DetectionConfig) -> Plan[str]:
        units = limit_units(build_units(data), config.limit, config.seed)
        by_subject: dict[str, list[int]] = {}
        for i, u in enumerate(units):
            by_subject.setdefault(u.probe.subject_id, []).append(i)
        subjects = {s.id: s for s in data.subjects}
        context = Probes(units, subjects, by_subject, list(config.chosen))
        resolved: dict[str, Any] = {
            "prompt_sha256": PROMPT_SHA256,
            "cues_sha256": det.CUES_SHA256,
            "bm25 analyzer": rc.bm25_analyzer(config.analyzer, data.subjects),
        }
        systems = rc.resolve_systems(config.memory, config.seed, config.analyzer)
        plan = Plan(
            {name: name for name in context.detectors},
            warnings=list(data.warnings),
            resolved=resolved,
            context=context,
        )
        if systems:
            budget = Budget(k=config.window)
            queries = [query_of(u.probe) for u in units]
            window = rc.ingest_window(config)
            context.recalls = recalls = rc.Recalls.plan(
                systems, queries, subjects, budget, window=window, analyzer=config.analyzer
            )
            context.memory = [MEMORY_DETECTOR + s.name for s in systems]
            context.detectors += context.memory
            plan.units |= {name: name for name in context.memory}
            recalls.into(
                plan, {MEMORY_DETECTOR + s.name: recalls.needs_all(s.name) for s in systems}
            )
            resolved |= {
                "memory budget": rc.budget_json(budget),
                "memory systems": {MEMORY_DETECTOR + s.name: s.spec for s in systems},
                "memory prompt_sha256": MEMORY_PROMPT_SHA256,
            }
        return plan

    async def solve(
        self, unit: str, models: Models, config: DetectionConfig, plan: Plan[str]
    ) -> Rows:
        ctx: Probes = plan.context
        scored: list[det.Scored | None] = [None] * len(ctx.units)
        if unit in ctx.memory:
            probes = [u.probe for u in ctx.units]
            scored = list(det.memory_prompts(probes, ctx.shown(unit, plan)))
        else:
            for sid, idx in ctx.by_subject.items():
                got = _detect(unit, ctx.subjects[sid], [ctx.units[i].probe for i in idx], config)
                for i, one in zip(idx, got, strict=True):
                    scored[i] = one
        if unit in MODEL_DETECTORS or unit in ctx.memory:
            await _ask_model(unit, scored, models["model"], config)
        return [_row(unit, u, s) for u, s in zip(ctx.units, scored, strict=True)]

    def aggregate(self, plan: Plan[str], rows: Rows, config: DetectionConfig) -> Outcome:
        ctx: Probes = plan.context
        by_detector: dict[str, Rows] = {}
        for row in rows:
            by_detector.setdefault(row["detector"], []).append(row)
        result = summarise(by_detector, ctx.units, config, ctx.detectors)
        files: dict[str, Any] = {
            "contrasts.json": result.contrasts,
            "populations.json": {
                "populations": result.populations,
                "contrasts": {
                    **{k: {"positives": p, "negatives": n} for k, (p, n) in CONTRASTS.items()},
                    **{
                        f"{k}{PROPORTIONAL}": {
                            "positives": CONTRASTS[k][0],
                            "negatives": CONTRASTS[k][1],
                            "stratum": "proportional"
                            if CONTRASTS[k][1] != (COLD,)
                            else "proportional positives, every cold open",
                        }
                        for k in CHAT_CONTRASTS
                    },
                    LEAKAGE: {"minus": [QUESTION_CONTRAST, OWN_TARGET]},
                },
                "reading": config.reading,
                "empty": result.empty,
                "unscored": result.unscored,
            },
        }
        if ctx.recalls is not None:
            files["memory_costs.json"] = ctx.recalls.costs(plan)
        memory_failed = {
            name: sum(1 for r in mine if r.get("memory_error"))
            for name, mine in by_detector.items()
        }
        failures = {
            f"unscored {name} replies": sum(counts.values()) - memory_failed.get(name, 0)
            for name, counts in result.unscored.items()
        }
        failures |= {
            f"{name}: probes whose memory system failed": n for name, n in memory_failed.items()
        }
        outcome = outcome_of(result, files, failures)
        if ctx.recalls is not None:
            costs = files["memory_costs.json"]["systems"]
            outcome.flags = rc.cut_flags(costs, MEMORY_DETECTOR)
        return outcome

    def show(self, outcome: Outcome, config: DetectionConfig) -> list[Table | str]:
        result: DetectionResult = outcome.result
        title = "Memory-need detection: AUROC (95% bootstrap intervals)"
        metrics = list(CONTRASTS)
        proportional = [f"{k}{PROPORTIONAL}" for k in CHAT_CONTRASTS]
        shown: list[Table | str] = [
            summary_table(title, result.summary, metrics, "detector", outcome.flags),
            summary_table(
                "On the proportional stratum alone, and the cue leakage (questions - chat)",
                result.summary,
                [*proportional, LEAKAGE],
                "detector",
            ),
        ]
        for detector, contrasts in result.contrasts.items():
            for name, c in contrasts.items():
                if c.empty is None:
                    shown.append(f"{detector}, {name}: {c.threshold.describe()}")
        shown += [f"no figure for {name}: {why}" for name, why in result.empty.items()]
        for detector, counts in result.unscored.items():
            if any(counts.values()):
                shown.append(f"{detector}: unscored replies {counts} (left out, listed in items)")
        return shown


DETECTION = register(DetectionTrack())


def _detect(
    name: str, subject: Subject, probes: list[Probe], config: DetectionConfig
) -> list[det.Scored]:
    """Scores of the text detectors; for a model detector, placeholders holding the prompt
    to send (`detail["prompt"]`), or a final score where no call is needed."""
    if name == "lexical":
        return det.lexical_scores(subject, probes)
    if name == "model-context":
        prompts = det.context_prompts(subject, probes, config.window)
        return [det.Scored(None, detail={"prompt": p}) for p in prompts]
    analyzer = analyzer_for(config.analyzer, [m.text for m in subject.messages])
    if name == "bm25":
        return det.bm25_scores(subject, probes, config.window, analyzer)
    maybe, found = det.retrieved_prompts(subject, probes, config.window, analyzer)
    return [
        det.Scored(None, detail={"prompt": p, "retrieved": f})
        if p is not None
        else det.Scored(0.0, False, {"retrieved": [], "note": "BM25 found nothing to show"})
        for p, f in zip(maybe, found, strict=True)
    ]


async def _ask_model(
    name: str, scored: list[det.Scored | None], model: Model, config: DetectionConfig
) -> None:
    """Send every pending prompt of a model detector as one batch; fill in the verdicts."""
    pending = [(i, s) for i, s in enumerate(scored) if s is not None and "prompt" in s.detail]
    replies = await ask_each(
        model,
        [s.detail["prompt"] for _, s in pending],
        MemoryNeed,
        config.generate_config(),
        max_fixes=config.max_fixes,
        tag=f"detection:{name}",
    )
    for (i, old), reply in zip(pending, replies, strict=True):
        keep = {k: v for k, v in old.detail.items() if k != "prompt"}
        verdict = det.from_reply(reply)
        scored[i] = replace(verdict, detail={**verdict.detail, **keep})


def _row(detector: str, u: Unit, s: det.Scored | None) -> dict[str, Any]:
    assert s is not None
    p = u.probe
    row: dict[str, Any] = {
        "detector": detector,
        "subject": p.subject_id,
        "probe": p.id,
        "track": "question" if u.group in (QUESTION, OPENER) else "chat",
        "population": u.group,
        "label": u.positive,
        **(
            {}
            if u.labels is None
            else {"needs_memory": u.labels.recorded, "needs_memory_strict": u.labels.strict}
        ),
        "score": s.score,
        "decision": s.decision,
        "cutoff": p.cutoff,
        **p.labels,
        **s.detail,
    }
    if p.reference_positions:
        row["nearest"] = p.cutoff - max(p.reference_positions)
        row["furthest"] = p.cutoff - min(p.reference_positions)
    return row


# -- figures --------------------------------------------------------------------------------


def contrast_masks(
    units: Sequence[Unit], reading: Reading
) -> tuple[dict[str, tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]], dict[str, int]]:
    """Contrast name -> (positives, negatives) masks over `units` under `reading`: the five
    contrasts and each chat contrast on the proportional stratum; and the population sizes."""
    groups = np.array([u.group_under(reading) for u in units])
    proportional = np.array([u.proportional for u in units], bool)
    masks = {}
    for name, (pos, negs) in CONTRASTS.items():
        masks[name] = (groups == pos, np.isin(groups, negs))
    for name in CHAT_CONTRASTS:
        pos_mask, neg_mask = masks[name]
        if CONTRASTS[name][1] == (COLD,):  # the abstention control lies outside the stratum
            masks[f"{name}{PROPORTIONAL}"] = (pos_mask & proportional, neg_mask)
        else:
            masks[f"{name}{PROPORTIONAL}"] = (pos_mask & proportional, neg_mask & proportional)
    populations = {g: int((groups == g).sum()) for g in GROUPS}
    populations[f"{NEEDS}{PROPORTIONAL}"] = int(((groups == NEEDS) & proportional).sum())
    populations[f"chat probes{PROPORTIONAL}"] = int(proportional.sum())
    return masks, populations


def leakage(
    score: npt.NDArray[np.float64],
    question: tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]],
    chat: tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]],
    n_boot: int,
    seed: int,
) -> Estimate:
    """Question AUROC minus chat AUROC on one detector's scores (NaN scores left out), with
    the percentile interval of the replicates' differences (each AUROC's classes resampled
    on their own, in the same resample)."""
    ok = ~np.isnan(score)
    (qp, qn), (cp_, cn) = ((p & ok, n & ok) for p, n in (question, chat))
    n = int(qp.sum() + qn.sum() + cp_.sum() + cn.sum())
    if not (qp.any() and qn.any() and cp_.any() and cn.any()):
        return nan_estimate(n)
    point = auroc(score[qp], score[qn]) - auroc(score[cp_], score[cn])
    q_seed, c_seed = np.random.SeedSequence([seed, 13]).generate_state(2)
    reps = auroc_replicates(score[qp], score[qn], n_boot=n_boot, seed=int(q_seed))
    reps = reps - auroc_replicates(score[cp_], score[cn], n_boot=n_boot, seed=int(c_seed))
    return percentile_estimate(point, reps, n)


def summarise(
    rows: dict[str, Rows],
    units: Sequence[Unit],
    config: DetectionConfig,
    detectors: Sequence[str] | None = None,
) -> DetectionResult:
    """Figures from each detector's rows (one per probe, in the order of `units`), for
    `detectors` (default: the configured ones)."""
    masks, populations = contrast_masks(units, config.reading)
    groups = np.array([u.group_under(config.reading) for u in units])
    empty = {
        name: _why_empty(name, pos, neg)
        for name, (pos, neg) in masks.items()
        if not pos.any() or not neg.any()
    }
    if QUESTION_CONTRAST in empty or OWN_TARGET in empty:
        empty[LEAKAGE] = "needs both " + repr(QUESTION_CONTRAST) + " and " + repr(OWN_TARGET)
    summary: dict[str, dict[str, Estimate]] = {}
    contrasts: dict[str, dict[str, Contrast]] = {}
    unscored: dict[str, dict[str, int]] = {}
    warnings = [f"{name}: {why}" for name, why in empty.items()]
    for name in config.chosen if detectors is None else detectors:
        mine = rows[name]
        score = np.array([np.nan if r["score"] is None else r["score"] for r in mine], float)
        decision = np.array([np.nan if r["decision"] is None else r["decision"] for r in mine])
        missing = np.isnan(score)
        unscored[name] = {g: int((missing & (groups == g)).sum()) for g in GROUPS}
        if missing.any():
            warnings.append(
                f"{name}: {int(missing.sum())} of {len(mine)} probes unscored (the reply could "
                "not be used); left out of its AUROCs and operating points"
            )
        own = name in MODEL_DETECTORS or name.startswith(MEMORY_DETECTOR)
        for cname, (pos_all, neg_all) in masks.items():
            pos, neg = pos_all & ~missing, neg_all & ~missing
            c = Contrast(
                auroc=bootstrap_auroc(
                    score[pos], score[neg], n_boot=config.n_boot, seed=config.seed
                ),
                threshold=operating_point(score[pos], score[neg], config.threshold),
                own_decision=operating_point(decision[pos], decision[neg], 0.5) if own else None,
                unscored_pos=int((pos_all & missing).sum()),
                unscored_neg=int((neg_all & missing).sum()),
                empty=empty.get(cname),
            )
            contrasts.setdefault(name, {})[cname] = c
            summary.setdefault(name, {})[cname] = c.auroc
        summary[name][LEAKAGE] = leakage(
            score, masks[QUESTION_CONTRAST], masks[OWN_TARGET], config.n_boot, config.seed
        )
    return DetectionResult(
        summary=summary,
        contrasts=contrasts,
        populations=populations,
        unscored=unscored,
        empty=empty,
        warnings=warnings,
    )


def _why_empty(name: str, pos: npt.NDArray[np.bool_], neg: npt.NDArray[np.bool_]) -> str:
    pos_group, neg_groups = CONTRASTS[name.removesuffix(PROPORTIONAL)]
    where = " on the proportional stratum" if name.endswith(PROPORTIONAL) else ""
    missing = [pos_group] if not pos.any() else []
    missing += [] if neg.any() else list(neg_groups)
    return f"no probe in population(s) {', '.join(repr(g) for g in missing)}{where} in this dataset"
