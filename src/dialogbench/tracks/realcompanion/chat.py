"""Chat track (RealCompanion, "Most of the benefit from context lands where it is not
needed"): the model under test replies to real probes under five context conditions, and
one judge call per probe scores every reply against the reference reply.

Conditions differ only in the messages shown before the probe (never the probe or after):

    C0   nothing
    C1   the last 3 messages
    C2   the recorded reference messages
    C3   BM25's top 10 over the history before the probe
    C4   the last 10 messages
    M:NAME  (one per `--memory` spec) what the memory system recalled for the probe, fed the
         conversation in time order up to it (`tracks/realcompanion/recall.py`): its message
         memories and its text memories (as notes), in the memories framing whatever
         `--framing` says (`chat_prompts.memory_reply_messages`); every memory system gets
         the same `Budget(k=memory_k, tokens=memory_tokens)` (10 memories, like C3 and C4,
         and no token cap by default; tokens counted by `memory.approx_tokens`). Its replies
         are judged in the same blinded call as C0-C4 (of each framing run); its gains are
         M-C1 and M-C0. For a like-for-like contrast with C3 (BM25 as earlier turns), run
         with `--framing memories`.

`framing` ("turns" | "memories" | "both") labels the same messages as earlier turns of this
chat or as retrieved memories (`both`: each probe is answered under each framing, and each
framing's replies are judged in a call of their own, the same call a one-framing run makes);
see `chat_prompts`. The judge (blinded, shuffled, all conditions of a framing in one call)
gives `content_match` 0-3 and `uses_earlier_context` per reply.

Populations: a probe *needs memory* by its own labels under `--reading` (recorded or strict;
`memory.py`: the item's verified `needs_memory` / `needs_memory_strict`, or, unlabelled, a
reference more than RECENT_WINDOW = 8 messages back; C1's window of 3 is only what C1
shows); *dependent* as the paper counts its 167 items: the item is marked so (its reference
reply depends on the recorded messages) and a reference lies beyond the last three messages,
so C2 adds something C1 lacks (`memory.py`, `depends_past_last_three`); a *cold open*
needs no memory under the reading and opens a session (an item of the abstention stratum,
or the person's first message of a session: `memory.cold_open`, the detection track's cold
opens); a probe's locus is *none* when
its verified locus is "none" (unlabelled: its tier is "none" or it has no references).

Figures (means with 95% bootstrap intervals over probes; all but memory_use and
framing_difference on the first framing run, "turns" under `both`):

    content_match   condition -> facet -> mean score; facets: all, stratum=S, need=N,
                    dependent
    gains           "Ca-Cb" -> facet -> mean of the per-probe differences (paired); on
                    dependent items C2-C1 is the paper's "+0.455 on 167 items"
    gain_split      "Ca-Cb" -> stratum=S -> need -> that need's share of the stratum's gain:
                    mean over the stratum of diff x [probe has that need]; the two add up to
                    the stratum's gain (the paper's "+0.108 = +0.004 + +0.104")
    no_need_share   "Ca-Cb" -> all | stratum=S -> the share of that gain that comes from
                    probes that need no memory: sum(diff x [no need]) / sum(diff), a ratio
                    with a bootstrap interval (the paper's 96% on the proportional stratum)
    misfire         condition -> cold open | locus none -> share flagged uses_earlier_context
    memory_use      framing -> condition -> population -> share of replies flagged
                    uses_earlier_context; populations: all, need=N, cold open, locus none
    framing_difference  (both framings only) condition -> population -> memories minus
                    turns, the mean of the per-probe differences (paired; the paper's ten
                    to fourteen points)
    unscored        judge verdicts that could not be used (kept in items.jsonl with raw and
                    error, left out of every figure), and failed reply calls per condition
                    (over every framing run); with --memory also memory_failed: per memory
                    condition, replies not written because the system failed on the subject
                    (counted, exit status 3, done again on a rerun)

One unit per probe (`subject/probe`): solve writes its five replies, score makes its one
blinded judge call; the runner writes the run folder (manifest, parts, usage):

RUN_DIR/items.jsonl     one record per probe x condition x framing: the item's labels
                        (needs_memory, needs_memory_strict, dependent, locus), supplied ids,
                        reply, the judge fields (`judging.verdict_fields`: scores, flags,
                        blinded label and the label mapping; raw + error if unscored),
                        content_match and uses_earlier_context
RUN_DIR/summary.json    the figures above
RUN_DIR/memory_costs.json  with --memory: the budget, the cost definitions and each system's
                        ingest time, recall latency p50/p95/p99, memories and context tokens
                        per probe (`memory/costs.py`); a memory condition's rows also carry
                        memory_ids, memory_texts, memory_invalid_ids, evidence_cited (the
                        memories cite a reference message), evidence_share,
                        memory_latency_ms and memory_error
RUN_DIR/warnings.json   data repairs, probes left out, unscored verdicts
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from rich.table import Table

from dialogbench.data.model import ChatItem, Dataset, Message, Subject
from dialogbench.judging import is_unscored, verdict_fields
from dialogbench.judging.judge import BlindVerdict, Judge
from dialogbench.memory import Budget, Query, query_of
from dialogbench.models.model import Call, Model
from dialogbench.models.types import ModelError
from dialogbench.report.table import summary_table
from dialogbench.retrieval.base import build_probes
from dialogbench.retrieval.bm25 import BM25Retriever
from dialogbench.runner import Outcome, Plan, TrackBase, option, register
from dialogbench.runner import config as shared
from dialogbench.runner.roles import judge_role, model_role
from dialogbench.runner.track import Models, Rows
from dialogbench.stats.bootstrap import (
    Estimate,
    bootstrap_means,
    nan_estimate,
    percentile_estimate,
    resample_counts,
)
from dialogbench.tracks.common import judged_values, stratified_limit
from dialogbench.tracks.realcompanion import chat_prompts as cp
from dialogbench.tracks.realcompanion import recall as rc
from dialogbench.tracks.realcompanion.memory import (
    LAST_THREE,
    READING_HELP,
    MemoryLabels,
    cold_open,
    memory_labels,
    session_openers,
)

TRACK = "chat"
CONDITIONS = ("C0", "C1", "C2", "C3", "C4")
RECENT, TOP_K, WINDOW = LAST_THREE, 10, 10
"""C1's last messages, C3's BM25 depth, C4's last messages."""
GAINS = (("C2", "C1"), ("C3", "C4"), ("C2", "C0"), ("C1", "C0"), ("C3", "C0"), ("C4", "C0"))
NEEDS, NO_NEED = "needs memory", "no memory need"
COLD, LOCUS_NONE = "cold open", "locus none"
DEPENDENT = "dependent"
FRAMING_ORDER: tuple[cp.Framing, ...] = ("turns", "memories")
REPLY_TAG, JUDGE_TAG = "chat:reply", "chat:judge"
MEMORY_PREFIX = "M:"
MEMORY_GAINS = ("C1", "C0")
"""What each memory condition's gain is taken against."""


@dataclass(frozen=True)
class ChatConfig(shared.Sampled, shared.Judged):
    """Framing, the reply and judge settings, a limit, the bootstrap (models are roles)."""

    framing: Literal["turns", "memories", "both"] = option(
        "turns",
        help="label the supplied messages as earlier turns or as retrieved memories "
        "(both: reply under each, and compare memory use)",
    )
    memory: tuple[str, ...] = rc.memory_option()
    memory_k: int | None = rc.memory_k_option(TOP_K, "default: 10, like C3 and C4")
    memory_tokens: int | None = rc.memory_tokens_option("default: no cap", approximate=True)
    memory_window: int | None = rc.memory_window_option()
    analyzer: str = rc.analyzer_option()
    limit: int | None = shared.limit("probes, drawn in turn from each stratum x need")
    seed: int = shared.seed("the limit draw, the replies and the bootstrap")
    n_boot: int = shared.n_boot()
    temperature: float = shared.temperature(0.0, "sampling temperature of the replies")
    max_tokens: int = shared.tokens(256, "reply budget (tokens)", max=None)
    judge_max_tokens: int = shared.judge_tokens(1024)
    max_fixes: int = shared.judge_fixes()
    reading: Literal["recorded", "strict"] = option(
        "recorded", help=READING_HELP, stage="aggregate"
    )

    @property
    def framings(self) -> tuple[cp.Framing, ...]:
        """The framings run, the first one giving every figure but memory use."""
        return FRAMING_ORDER if self.framing == "both" else (self.framing,)


@dataclass(frozen=True)
class ChatProbe:
    """One chat item with what each condition supplies before it."""

    subject_id: str
    item: ChatItem
    probe: Message
    contexts: dict[str, tuple[Message, ...]]
    labels: MemoryLabels
    query: Query
    """What a memory system is asked at this probe (with --memory)."""
    opener: bool = False
    """The probe is the person's first message of its session (`memory.session_openers`)."""
    memory: dict[str, rc.Shown | str] = field(default_factory=dict)
    """Memory condition -> what its system recalled, or why it failed (with --memory)."""

    @property
    def needs_memory(self) -> bool:
        """Needs memory under the recorded reading (what `--limit` draws by)."""
        return self.labels.recorded

    @property
    def opens_session(self) -> bool:
        """An item of the abstention stratum, or the person's first message of a session:
        a cold open when it needs no memory (`memory.cold_open`, under the reading)."""
        return self.item.stratum == "abstention" or self.opener

    @property
    def locus_none(self) -> bool:
        if self.item.locus is not None:
            return self.item.locus == "none"
        return self.item.tier == "none" or not self.item.reference_ids


SUMMARY_KEYS = (
    *("content_match", "gains", "gain_split", "no_need_share", "misfire", "memory_use"),
    *("framing_difference", "reading", "unscored", "probes"),
)
"""The fields of `ChatResult` in summary.json, in its order (not usage or warnings)."""


@dataclass
class ChatResult:
    """The track's figures as written to summary.json."""

    content_match: dict[str, dict[str, Estimate]]
    gains: dict[str, dict[str, Estimate]]
    gain_split: dict[str, dict[str, dict[str, Estimate]]]
    misfire: dict[str, dict[str, Estimate]]
    unscored: dict[str, Any]
    probes: int
    no_need_share: dict[str, dict[str, Estimate]] = field(default_factory=dict)
    memory_use: dict[str, dict[str, dict[str, Estimate]]] = field(default_factory=dict)
    framing_difference: dict[str, dict[str, Estimate]] = field(default_factory=dict)
    reading: str = "recorded"
    usage: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """summary.json: the fields in `SUMMARY_KEYS`, in that order."""
        return {key: getattr(self, key) for key in SUMMARY_KEYS}


# -- contexts -------------------------------------------------------------------------------


def build_chat_probes(
    subject: Subject, analyzer: str = "auto"
) -> tuple[list[ChatProbe], list[str]]:
    """Every chat item of `subject` with its five contexts (C3 by BM25 with `analyzer`), and
    warnings for what was left out (no reference reply) or dropped (a reference at or after
    the probe)."""
    probes = [p for p in build_probes(subject) if p.kind == "chat"]
    bm25 = BM25Retriever(analyzer=analyzer)
    top = bm25.rank(subject, probes, TOP_K).top if probes else np.zeros((0, TOP_K))
    msgs = subject.messages
    openers = set(session_openers(subject))
    out: list[ChatProbe] = []
    warnings: list[str] = []
    for item, p, row in zip(subject.chat_items, probes, top, strict=True):
        if not item.reference_reply.strip():
            warnings.append(f"{subject.id}/{item.probe_id}: no reference reply; left out")
            continue
        refs = [r for r in p.reference_positions if r < p.cutoff]
        if len(refs) < len(p.reference_positions):
            warnings.append(f"{subject.id}/{item.probe_id}: reference at/after the probe dropped")
        found = sorted(int(t) for t in row if 0 <= t < p.cutoff)
        contexts = {
            "C0": (),
            "C1": tuple(msgs[max(0, p.cutoff - RECENT) : p.cutoff]),
            "C2": tuple(msgs[r] for r in refs),
            "C3": tuple(msgs[t] for t in found),
            "C4": tuple(msgs[max(0, p.cutoff - WINDOW) : p.cutoff]),
        }
        labels = memory_labels(item, p.cutoff, refs)
        query = query_of(p, asked_at=msgs[p.cutoff].timestamp)
        opener = p.cutoff in openers
        out.append(ChatProbe(subject.id, item, msgs[p.cutoff], contexts, labels, query, opener))
    return out, warnings


def _group(p: ChatProbe) -> tuple[str, bool]:
    return (p.item.stratum, p.needs_memory)


def limit_probes(probes: Sequence[ChatProbe], limit: int | None, seed: int) -> list[ChatProbe]:
    """At most `limit` probes, taken in turn from each stratum x need group."""
    return stratified_limit(probes, _group, limit, seed)


def plan_recalls(
    probes: Sequence[ChatProbe],
    subjects: dict[str, Subject],
    systems: Sequence[rc.System],
    budget: Budget,
    window: int | None = None,
    analyzer: str = "auto",
) -> rc.Recalls:
    """The recall stage: one replay per subject and system, of that subject's probes,
    ingesting `window` messages before each (None: the whole history)."""
    queries = [p.query for p in probes]
    return rc.Recalls.plan(systems, queries, subjects, budget, window=window, analyzer=analyzer)


def with_memory(
    p: ChatProbe, recalls: rc.Recalls, plan: Plan[ChatProbe], subject: Subject
) -> ChatProbe:
    """The probe with what each memory system recalled for it (its saved recall units)."""
    evidence = [m.position for m in p.contexts["C2"]]
    memory: dict[str, rc.Shown | str] = {}
    for system in recalls.systems:
        got = recalls.recalled(plan, system.name, p.subject_id, p.item.probe_id)
        memory[MEMORY_PREFIX + system.name] = rc.shown_of(got, subject, evidence)
    return replace(p, memory=memory)


@dataclass
class Context:
    """What the chat units share: the subjects and, with `--memory`, the recall stage."""

    subjects: dict[str, Subject]
    recalls: rc.Recalls | None = None


# -- running --------------------------------------------------------------------------------


class ChatTrack(TrackBase[ChatConfig, ChatProbe]):
    """One unit per probe: its five replies (solve), then one blinded judge call (score)."""

    name = TRACK
    summary = "Replies under five context conditions, judged together against the reference reply."
    config_type = ChatConfig
    version = 2
    """2: rows carry the item's labels (both readings, dependent, locus) and a framing each."""
    roles = (
        model_role("the model under test (writes the replies)"),
        judge_role("the judge of the replies"),
    )
    judged = True
    stages = (rc.RECALL,)

    def plan(self, data: Dataset, config: ChatConfig) -> Plan[ChatProbe]:
        probes: list[ChatProbe] = []
        warnings = list(data.warnings)
        for subject in data.subjects:
            got, why = build_chat_probes(subject, config.analyzer)
            probes += got
            warnings += why
        if not probes:
            raise ValueError(
                f"dataset {data.name!r} has no chat item with a reference reply: the chat "
                "track needs chat.jsonl items (probe, reference ids, reference reply)"
            )
        probes = limit_probes(probes, config.limit, config.seed)
        resolved: dict[str, Any] = {
            "prompt_sha256": cp.PROMPT_SHA256,
            "bm25 analyzer": rc.bm25_analyzer(config.analyzer, data.subjects),
        }
        context = Context({s.id: s for s in data.subjects})
        systems = rc.resolve_systems(config.memory, config.seed, config.analyzer)
        units = {f"{p.subject_id}/{p.item.probe_id}": p for p in probes}
        plan = Plan(units, warnings=warnings, resolved=resolved, context=context)
        if systems:
            budget = Budget(k=config.memory_k, tokens=config.memory_tokens)
            context.recalls = recalls = plan_recalls(
                probes,
                context.subjects,
                systems,
                budget,
                rc.ingest_window(config),
                config.analyzer,
            )
            needs = {
                key: [recalls.need(s.name, p.subject_id) for s in systems]
                for key, p in units.items()
            }
            recalls.into(plan, needs)
            resolved |= {
                "memory budget": rc.budget_json(budget),
                "memory systems": {MEMORY_PREFIX + s.name: s.spec for s in systems},
                "memory prompt_sha256": cp.MEMORY_PROMPT_SHA256,
            }
        return plan

    async def solve(
        self, unit: ChatProbe, models: Models, config: ChatConfig, plan: Plan[ChatProbe]
    ) -> Rows:
        ctx: Context = plan.context
        if ctx.recalls is not None:
            unit = with_memory(unit, ctx.recalls, plan, ctx.subjects[unit.subject_id])
        return await _reply(unit, models["model"], config)

    async def score(
        self,
        unit: ChatProbe,
        rows: Rows,
        models: Models,
        config: ChatConfig,
        plan: Plan[ChatProbe],
    ) -> Rows:
        judge = Judge(
            models["judge"], cp.CHAT_RUBRIC, config.judge_config(), max_fixes=config.max_fixes
        )
        return await _judge(unit, rows, judge)

    def aggregate(self, plan: Plan[ChatProbe], rows: Rows, config: ChatConfig) -> Outcome:
        result = summarise(rows, config)
        recalls = plan.context.recalls
        files = {} if recalls is None else {"memory_costs.json": recalls.costs(plan)}
        unscored = {
            "replies the judge left unscored": _unscored(rows),
            "replies not written: the memory system failed": sum(
                1 for r in rows if r.get("memory_error")
            ),
        }
        outcome = Outcome(
            summary=result.summary(),
            files=files,
            warnings=list(result.warnings),
            result=result,
            failures={k: v for k, v in unscored.items() if v},
        )
        if recalls is not None:
            outcome.flags = rc.cut_flags(files["memory_costs.json"]["systems"], MEMORY_PREFIX)
        return outcome

    def show(self, outcome: Outcome, config: ChatConfig) -> list[Table | str]:
        result: ChatResult = outcome.result
        misfire = "Misfire: replies using earlier context where none is needed"
        need = f"needs memory: {result.reading} reading"
        shown: list[Table | str] = [
            _table(
                f"Chat: content match 0-3 (95% bootstrap intervals; {need})",
                result.content_match,
                flags=outcome.flags,
            ),
            _table("Paired gains", result.gains, "gain"),
            _table("Share of each gain from probes that need no memory", result.no_need_share),
            _table(misfire, result.misfire),
        ]
        for framing, table in result.memory_use.items():
            shown.append(_table(f"Memory use (uses_earlier_context), {framing} framing", table))
        if result.framing_difference:
            title = "Framing difference in memory use: memories - turns (paired)"
            shown.append(_table(title, result.framing_difference))
        return shown

    def judgments(self, rows: Rows) -> dict[str, float]:
        """`subject/probe/condition` -> the judge's content match (0-3); a run of both
        framings keys its memories rows `subject/probe/condition/memories`."""
        both = len({r.get("framing", "turns") for r in rows}) > 1

        def key(r: Mapping[str, Any]) -> str:
            tail = f"/{r['framing']}" if both and r["framing"] != "turns" else ""
            return f"{r['subject']}/{r['probe']}/{r['condition']}{tail}"

        return judged_values(rows, key, "content_match")

    def headline(self, outcome: Outcome) -> dict[str, float]:
        """Content match per condition and every paired gain, over all probes."""
        result: ChatResult = outcome.result
        out = {f"content_match {c}": e["all"].value for c, e in result.content_match.items()}
        out.update({f"gain {g}": e["all"].value for g, e in result.gains.items()})
        return out


CHAT = register(ChatTrack())


def _table(
    title: str,
    table: dict[str, dict[str, Estimate]],
    label: str = "condition",
    flags: Mapping[str, str] | None = None,
) -> Table:
    columns = list(dict.fromkeys(col for row in table.values() for col in row))
    return summary_table(title, table, columns, row_label=label, flags=flags)


def _ids(messages: Sequence[Message]) -> list[str]:
    return [m.id for m in messages]


async def _reply(p: ChatProbe, model: Model, config: ChatConfig) -> Rows:
    """One reply per condition (and framing) of one probe, each the same call as ever (same
    cache key)."""
    gen = config.generate_config()
    runs = [(f, c) for f in config.framings for c in CONDITIONS]
    calls = [Call(cp.reply_messages(p.contexts[c], p.probe, f), gen) for f, c in runs]
    recalled = {c: v for c, v in p.memory.items() if not isinstance(v, str)}
    for f in config.framings:
        for c, view in recalled.items():
            runs.append((f, c))
            prompt = cp.memory_reply_messages(view.messages, view.notes, p.probe)
            calls.append(Call(prompt, gen))
    outs = await model.generate_many(calls, tag=REPLY_TAG)
    rows = []
    for (f, c), got in zip(runs, outs, strict=True):
        failed = isinstance(got, ModelError)
        supplied = p.contexts[c] if c in p.contexts else recalled[c].messages
        rows.append(
            {
                "subject": p.subject_id,
                "probe": p.item.probe_id,
                "condition": c,
                "framing": f,
                "stratum": p.item.stratum,
                "tier": p.item.tier,
                **p.labels.fields(),
                "opens_session": p.opens_session,
                "locus_none": p.locus_none,
                "supplied": _ids(supplied),
                "reply": None if isinstance(got, ModelError) else got.text,
                "reply_error": str(got) if failed else None,
                **(recalled[c].fields if c in recalled else {}),
            }
        )
    for c, why in p.memory.items():
        if isinstance(why, str):
            rows += [_failed_row(p, f, c, why) for f in config.framings]
    order = {c: i for i, c in enumerate([*CONDITIONS, *p.memory])}
    framing = {f: i for i, f in enumerate(config.framings)}
    rows.sort(key=lambda r: (framing[r["framing"]], order[r["condition"]]))
    return rows


def _failed_row(p: ChatProbe, framing: str, condition: str, why: str) -> dict[str, Any]:
    """The row of a memory condition whose system failed on the probe's subject."""
    return {
        "subject": p.subject_id,
        "probe": p.item.probe_id,
        "condition": condition,
        "framing": framing,
        "stratum": p.item.stratum,
        "tier": p.item.tier,
        **p.labels.fields(),
        "opens_session": p.opens_session,
        "locus_none": p.locus_none,
        "supplied": [],
        "reply": None,
        "reply_error": None,
        **rc.failed_fields(why),
    }


async def _judge(p: ChatProbe, rows: Rows, judge: Judge) -> Rows:
    """One blinded judge call per framing over the probe's replies (shuffled by a seed drawn
    from its own content); rows gain score, flag, label and the label mapping."""
    verdicts: dict[str, BlindVerdict | None] = {}
    for framing in dict.fromkeys(r["framing"] for r in rows):
        mine = [r for r in rows if r["framing"] == framing]
        candidates = {r["condition"]: r["reply"] for r in mine if r["reply"] is not None}
        verdicts[framing] = None
        if candidates:
            verdicts[framing] = await judge.score_blind(
                candidates,
                reference=p.item.reference_reply,
                context=cp.judge_context(p.probe),
                tag=JUDGE_TAG,
            )
    return [
        {**r, **_verdict_fields(r["condition"], verdicts[r["framing"]], r.get("memory_error"))}
        for r in rows
    ]


def _unscored(rows: Rows) -> int:
    """Replies written but left unscored (an unusable verdict)."""
    return sum(1 for r in rows if is_unscored(r))


def _verdict_fields(
    condition: str, v: BlindVerdict | None, memory_error: str | None = None
) -> dict[str, Any]:
    """The common judge fields of one condition's row, and the two figures drawn from them."""
    if memory_error:
        fields = verdict_fields(None, skipped="the memory system failed")
    elif v is None or condition not in v.labels.values():
        fields = verdict_fields(None, skipped="the reply call failed")
    else:
        fields = verdict_fields(v, condition)
    scores, flags = fields["judge_scores"], fields["judge_flags"]
    return {
        **fields,
        "content_match": None if scores is None else scores["content_match"],
        "uses_earlier_context": None if flags is None else flags["uses_earlier_context"],
    }


# -- figures --------------------------------------------------------------------------------


def _facets(strata: np.ndarray, needs: np.ndarray, dependent: np.ndarray) -> dict[str, np.ndarray]:
    """Facet name -> mask over probes: all, each stratum, each need, dependent."""
    out = {"all": np.ones(len(strata), bool)}
    for s in sorted(set(strata.tolist())):
        out[f"stratum={s}"] = strata == s
    out[f"need={NEEDS}"] = needs
    out[f"need={NO_NEED}"] = ~needs
    out[DEPENDENT] = dependent
    return out


def _mean(values: np.ndarray, config: ChatConfig) -> Estimate:
    return bootstrap_means(values[~np.isnan(values)], n_boot=config.n_boot, seed=config.seed)[0]


def paired_gain(a: npt.ArrayLike, b: npt.ArrayLike, n_boot: int = 2000, seed: int = 0) -> Estimate:
    """Mean of the per-probe differences a - b (NaN pairs left out), with its interval."""
    diff = np.asarray(a, float) - np.asarray(b, float)
    return bootstrap_means(diff[~np.isnan(diff)], n_boot=n_boot, seed=seed)[0]


def gain_split(
    a: npt.ArrayLike, b: npt.ArrayLike, group: npt.ArrayLike, n_boot: int = 2000, seed: int = 0
) -> dict[str, Estimate]:
    """The gain a - b split into what probes in `group` and the others contribute: means over
    all (paired, non-NaN) probes of diff x [in group] and diff x [not in group]; they add up
    to the whole gain."""
    diff = np.asarray(a, float) - np.asarray(b, float)
    keep = ~np.isnan(diff)
    d, g = diff[keep], np.asarray(group, bool)[keep]
    cols = np.column_stack([d * g, d * ~g]) if len(d) else np.zeros((0, 2))
    inside, outside = bootstrap_means(cols, n_boot=n_boot, seed=seed)
    return {NEEDS: inside, NO_NEED: outside}


def share_outside(
    a: npt.ArrayLike, b: npt.ArrayLike, group: npt.ArrayLike, n_boot: int = 2000, seed: int = 0
) -> Estimate:
    """The share of the gain a - b that probes outside `group` contribute: sum over the
    (paired, non-NaN) probes of diff x [not in group], over the sum of diff; a ratio, with
    a percentile interval from resampling probes. NaN when the gain is 0 (nothing to share)."""
    diff = np.asarray(a, float) - np.asarray(b, float)
    keep = ~np.isnan(diff)
    d, g = diff[keep], np.asarray(group, bool)[keep]
    if not len(d) or d.sum() == 0:
        return nan_estimate(len(d))
    weights = resample_counts(len(d), n_boot, np.random.default_rng(seed))
    with np.errstate(invalid="ignore", divide="ignore"):
        reps = (weights @ (d * ~g)) / (weights @ d)
    reps[~np.isfinite(reps)] = np.nan
    return percentile_estimate(float((d * ~g).sum() / d.sum()), reps, len(d))


@dataclass
class _Scores:
    """One framing's judged scores and flags, probe x condition (NaN where none)."""

    score: dict[str, np.ndarray]
    flag: dict[str, np.ndarray]


def summarise(rows: Sequence[dict[str, Any]], config: ChatConfig) -> ChatResult:
    """Figures from the judged rows (one per probe x condition x framing)."""
    keys = sorted({(r["subject"], r["probe"]) for r in rows})
    at = {k: i for i, k in enumerate(keys)}
    n = len(keys)
    framings = [f for f in FRAMING_ORDER if any(r.get("framing", "turns") == f for r in rows)]
    memory = list(dict.fromkeys(r["condition"] for r in rows if r["condition"] not in CONDITIONS))
    conditions = (*CONDITIONS, *memory)
    by = {
        f: _Scores(
            {c: np.full(n, np.nan) for c in conditions}, {c: np.full(n, np.nan) for c in conditions}
        )
        for f in framings
    }
    strata = np.array([""] * n, dtype=object)
    needs, dependent = np.zeros(n, bool), np.zeros(n, bool)
    cold, none = np.zeros(n, bool), np.zeros(n, bool)
    judge_unscored: set[tuple[str, str]] = set()
    reply_failed = {c: 0 for c in conditions}
    memory_failed = {c: 0 for c in memory}
    need_key = "needs_memory" if config.reading == "recorded" else "needs_memory_strict"
    for r in rows:
        i, c = at[(r["subject"], r["probe"])], r["condition"]
        strata[i], needs[i], dependent[i], cold[i], none[i] = (
            r["stratum"],
            r[need_key],
            bool(r["depends_past_last_three"]),
            cold_open(r[need_key], r["stratum"], r["opens_session"]),
            r["locus_none"],
        )
        if r.get("memory_error"):
            memory_failed[c] += 1
        elif r["reply"] is None:
            reply_failed[c] += 1
        elif is_unscored(r):
            judge_unscored.add((r["subject"], r["probe"]))
        if r["judged"]:
            got = by[r.get("framing", "turns")]
            got.score[c][i] = r["judge_scores"]["content_match"]
            got.flag[c][i] = float(r["judge_flags"]["uses_earlier_context"])
    first = by[framings[0]] if framings else _Scores({}, {})
    score, flag = first.score, first.flag
    facets = _facets(strata, needs, dependent)
    boot = (config.n_boot, config.seed)
    content = {c: {f: _mean(score[c][m], config) for f, m in facets.items()} for c in conditions}
    gains: dict[str, dict[str, Estimate]] = {}
    split: dict[str, dict[str, dict[str, Estimate]]] = {}
    share: dict[str, dict[str, Estimate]] = {}
    for a, b in [*GAINS, *((c, against) for c in memory for against in MEMORY_GAINS)]:
        name = f"{a}-{b}"
        gains[name] = {f: paired_gain(score[a][m], score[b][m], *boot) for f, m in facets.items()}
        pooled = {f: m for f, m in facets.items() if f == "all" or f.startswith("stratum=")}
        split[name] = {
            f: gain_split(score[a][m], score[b][m], needs[m], *boot) for f, m in pooled.items()
        }
        share[name] = {
            f: share_outside(score[a][m], score[b][m], needs[m], *boot) for f, m in pooled.items()
        }
    misfire = {
        c: {COLD: _mean(flag[c][cold], config), LOCUS_NONE: _mean(flag[c][none], config)}
        for c in conditions
    }
    populations = {
        "all": np.ones(n, bool),
        f"need={NEEDS}": needs,
        f"need={NO_NEED}": ~needs,
        COLD: cold,
        LOCUS_NONE: none,
    }
    memory_use: dict[str, dict[str, dict[str, Estimate]]] = {
        f: {
            c: {p: _mean(by[f].flag[c][m], config) for p, m in populations.items()}
            for c in conditions
        }
        for f in framings
    }
    difference: dict[str, dict[str, Estimate]] = {}
    if len(framings) == 2:
        turns, memories = by["turns"].flag, by["memories"].flag
        difference = {
            c: {p: paired_gain(memories[c][m], turns[c][m], *boot) for p, m in populations.items()}
            for c in conditions
        }
    warnings = []
    if judge_unscored:
        warnings.append(
            f"judge: {len(judge_unscored)} of {n} probes unscored (the verdict could not be "
            "used); kept in items.jsonl with raw and error, left out of every figure"
        )
    if any(reply_failed.values()):
        warnings.append(f"reply calls failed per condition: {reply_failed}")
    if any(memory_failed.values()):
        warnings.append(
            f"memory systems failed, replies not written per condition: {memory_failed} "
            "(rerun to retry; the errors are in items.jsonl)"
        )
    unscored: dict[str, Any] = {"judge": len(judge_unscored), "replies_failed": reply_failed}
    if memory:
        unscored["memory_failed"] = memory_failed
    return ChatResult(
        content_match=content,
        gains=gains,
        gain_split=split,
        misfire=misfire,
        unscored=unscored,
        probes=n,
        no_need_share=share,
        memory_use=memory_use,
        framing_difference=difference,
        reading=config.reading,
        warnings=warnings,
    )
