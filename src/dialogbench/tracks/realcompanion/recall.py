"""`--memory` in the retrieval, questions, chat and detection tracks: the memory role and the
`recall` stage every one of them runs before solve.

1. `resolve_systems`: each spec becomes a memory system (`memory.resolve_memory`), reported
   under `memory_name` (the spec for built-ins, the system's own `name` for plug-ins); a bad
   spec or two systems with one name is a usage error naming `--memory`;
2. `Recalls.plan`: one `recall` unit per system and subject, holding all of the subject's
   queries in the run, under one `Budget` for every system; the track's units that show a
   recall name the recall unit they need. The runner runs the recall units through the
   executor (a Ray cluster spreads them too), saves each to `parts/recall.jsonl` under the
   stage's identity (memory systems, their specs, the budget, the dataset), and charges
   each ingest and recall call to the `memory` role in usage.json (calls, failures by
   kind, latency p50/p95, the tokens the system reports). A rerun, or `dialogbench score`,
   never repeats a finished recall;
3. `run_recall`: one `memory.replay` of the subject (so a stateful system is fed once, in
   time order, with no future leakage: a recall sees only what was ingested before its
   probe). A failure of the system is a failed call of the memory role: the unit is not
   saved, the units that need it are not run (counted, exit status 3) and a rerun does
   both again; a missing optional dependency (the dense embedder) is a set-up error;
4. `Recalls.costs`: `memory_costs.json`, system -> `memory.replay_costs` entry (definitions
   in `memory/costs.py`), with the budget, from the saved recalls.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dialogbench.data.model import Message, Subject
from dialogbench.memory import (
    DEFINITIONS,
    Budget,
    MemorySpecError,
    MemorySystem,
    MemorySystemError,
    Query,
    Recalled,
    Replay,
    replay,
    replay_costs,
    resolve_memory,
)
from dialogbench.memory.base import Memory, SystemCost
from dialogbench.memory.costs import TokenCount, approx_tokens
from dialogbench.memory.harness import ingested_positions
from dialogbench.memory.registry import memory_name
from dialogbench.models.embedding import EmbedderUnavailable
from dialogbench.models.types import ErrorKind, ModelError, Usage
from dialogbench.models.usage import charge
from dialogbench.retrieval.analyzers import (
    ANALYZER_HELP,
    CHOICES,
    AnalyzerUnavailable,
    analyzer_record,
)
from dialogbench.runner import OptionError, option
from dialogbench.runner.record import digest
from dialogbench.runner.track import Need, Plan, Rows, Stage

MEMORY_HELP = (
    "memory systems, each one more system: bm25, recency, full-context, dense, hybrid, "
    "module:Class, an entry point or http://... (docs/memory.md)"
)


MEMORY_PANEL = "memory role"
"""Where `--help` shows the memory role's options (beside the model roles' own panels)."""


def memory_option(help: str = MEMORY_HELP) -> Any:
    """`memory`: the memory systems replayed into (none by default: no recall stage)."""
    return option((), help=help, nonempty=False, panel=MEMORY_PANEL)


def memory_k_option(default: int | None, said: str) -> Any:
    """`memory_k`: the most memories per recall, from 1, `said` naming the default."""
    help = f"at most this many memories per recall, the same for every memory system ({said})"
    return option(default, help=help, min=1, panel=MEMORY_PANEL)


LIMITED_WINDOW = 100
"""Messages before each probe a memory system ingests in a run with `--limit` (unless
`--memory-window` says otherwise): a limited run's ingestion is bounded too."""

LARGE_INGEST = 1000
"""Planned ingestion (messages, all systems) that the run announces before it starts."""


def memory_window_option() -> Any:
    """`memory_window`: messages before each probe a memory system ingests (None: all)."""
    help = (
        "ingest only this many messages before each probe into each memory system (default: "
        f"the whole history; with --limit, {LIMITED_WINDOW}, so that a limited run's "
        "ingestion is bounded too)"
    )
    return option(None, help=help, min=1, panel=MEMORY_PANEL)


def ingest_window(config: Any) -> int | None:
    """The run's ingestion window: `--memory-window`, else `LIMITED_WINDOW` under `--limit`."""
    given: int | None = getattr(config, "memory_window", None)
    if given is not None:
        return given
    return LIMITED_WINDOW if getattr(config, "limit", None) is not None else None


def analyzer_option() -> Any:
    """`analyzer`: how BM25 cuts text into terms, for the BM25 a track builds itself and its
    memory systems' (`retrieval/analyzers.py`; default `auto`, by each subject's script)."""
    return option("auto", help=ANALYZER_HELP, choices=CHOICES)


def bm25_analyzer(option: str, subjects: Iterable[Subject]) -> dict[str, Any]:
    """`analyzers.analyzer_record`: what a run records of its BM25 analyzer; a segmenter that
    is not installed is a usage error naming `--analyzer`."""
    try:
        return analyzer_record(option, subjects)
    except AnalyzerUnavailable as e:
        raise OptionError("analyzer", str(e)) from None


def memory_tokens_option(said: str, *, approximate: bool = False) -> Any:
    """`memory_tokens`: tokens of memories per recall, from 1 (default None), `said` naming
    what None means; `approximate` where the count is the approximate one."""
    count = " (approximate count)" if approximate else ""
    help = f"tokens of memories per recall{count}, the same for every memory system ({said})"
    return option(None, help=help, min=1, panel=MEMORY_PANEL)


@dataclass(frozen=True)
class System:
    """One `--memory` spec, resolved."""

    name: str
    spec: str
    system: MemorySystem


def resolve_systems(specs: Sequence[str], seed: int, analyzer: str = "auto") -> list[System]:
    """The memory systems `specs` name (the built-ins that use BM25 with `analyzer`);
    `OptionError` (--memory) for a bad spec or a name given to two systems."""
    out: list[System] = []
    for spec in specs:
        try:
            system = resolve_memory(spec, seed=seed, analyzer=analyzer)
        except MemorySpecError as e:
            raise OptionError("memory", str(e)) from None
        name = memory_name(spec, system)
        if any(s.name == name for s in out):
            raise OptionError("memory", f"two memory systems are named {name!r}: {','.join(specs)}")
        out.append(System(name, spec, system))
    return out


@dataclass(frozen=True)
class RecallUnit:
    """One memory system's replay of one subject: every query of it in the run."""

    system: System
    subject: Subject
    queries: tuple[Query, ...]
    budget: Budget
    count: TokenCount | None = None
    """Sizes memories against `budget.tokens` (default: `approx_tokens`)."""
    window: int | None = None
    """Messages before each query that are ingested (None: the whole history)."""

    def planned_ingest(self) -> int:
        """How many messages the replay will hand to `ingest`."""
        return len(ingested_positions((q.cutoff for q in self.queries), self.window))


_LOCKS: dict[int, threading.Lock] = {}
"""One lock per memory system object: its replays run one at a time, off the event loop."""


def recall_key(
    system: str, subject: str, queries: Sequence[Query], window: int | None = None
) -> str:
    """`SYSTEM/SUBJECT#DIGEST`: the digest covers the queries (and the ingestion window when
    there is one), so a run that asks other queries of the subject (another `--limit`) or
    ingests another window replays it again."""
    material: list[Any] = [[q.id, q.cutoff, q.text] for q in queries]
    if window is not None:
        material.append(["window", window])
    asked = digest(material)[:12]
    return f"{system}/{subject}#{asked}"


@dataclass
class Recalls:
    """A run's recall stage: its units, and where each query's recall lies."""

    systems: list[System]
    budget: Budget
    units: dict[str, RecallUnit] = field(default_factory=dict)
    where: dict[tuple[str, str], str] = field(default_factory=dict)
    """(system name, subject) -> the recall unit's key."""
    tokenizer: str | None = None
    window: int | None = None
    """Messages before each query that are ingested (None: the whole history)."""
    analyzer: dict[str, Any] | None = None
    """The BM25 analyzer's record (`analyzers.analyzer_record`), when the track sets one."""
    _read: dict[str, dict[str, Recalled]] = field(default_factory=dict, repr=False)

    @classmethod
    def plan(
        cls,
        systems: Sequence[System],
        queries: Iterable[Query],
        subjects: Mapping[str, Subject],
        budget: Budget,
        count: Callable[[Subject], TokenCount] | None = None,
        tokenizer: str | None = None,
        window: int | None = None,
        analyzer: str | None = None,
    ) -> Recalls:
        """One recall unit per system and subject asked, of that subject's `queries` in the
        order given; `count` gives a subject's token counter, named `tokenizer`; `window`
        caps ingestion at that many messages before each query (`ingest_window`); `analyzer`
        the BM25 analyzer option the systems were resolved with (recorded per subject)."""
        by_subject: dict[str, list[Query]] = {}
        for q in queries:
            by_subject.setdefault(q.subject_id, []).append(q)
        record = None
        if analyzer is not None:
            record = bm25_analyzer(analyzer, [subjects[sid] for sid in by_subject])
        out = cls(list(systems), budget, tokenizer=tokenizer, window=window, analyzer=record)
        for system in systems:
            for sid, asked in by_subject.items():
                subject = subjects[sid]
                key = recall_key(system.name, sid, asked, window)
                counter = count(subject) if count is not None else None
                unit = RecallUnit(system, subject, tuple(asked), budget, counter, window)
                out.units[key] = unit
                out.where[(system.name, sid)] = key
        return out

    def need(self, system: str, subject: str) -> Need:
        """The recall unit a unit showing `system`'s recalls for `subject` needs."""
        return (RECALL.name, self.where[(system, subject)])

    def needs_all(self, system: str) -> list[Need]:
        """Every recall unit of `system` (a unit covering every subject needs them all)."""
        return [(RECALL.name, k) for (name, _), k in self.where.items() if name == system]

    def resolved(self) -> dict[str, Any]:
        """What decides the recalls beyond the dataset: the recall stage's identity."""
        out: dict[str, Any] = {
            "memory systems": {s.name: s.spec for s in self.systems},
            "memory budget": budget_json(self.budget),
            "tokenizer": self.tokenizer,
        }
        if self.window is not None:
            out["memory window"] = self.window
        if self.analyzer is not None:
            out["bm25 analyzer"] = self.analyzer
        return out

    def planned_ingest(self) -> dict[str, int]:
        """System name -> messages its replays will ingest, over every subject."""
        out = {s.name: 0 for s in self.systems}
        for unit in self.units.values():
            out[unit.system.name] += unit.planned_ingest()
        return out

    def notices(self) -> list[str]:
        """What the run says before it starts: a capped ingestion (always), a large one."""
        planned = self.planned_ingest()
        total = sum(planned.values())
        subjects = len({u.subject.id for u in self.units.values()})
        each = ", ".join(f"{name} {n:,}" for name, n in planned.items())
        out = []
        if self.window is not None:
            out.append(
                f"memory ingestion capped: each memory system ingests only the {self.window} "
                "messages before each probe (--memory-window; the default under --limit), "
                f"{total:,} messages in all ({each}); its recall of older evidence is not "
                "comparable with a run over the whole history"
            )
        elif total >= LARGE_INGEST:
            out.append(
                f"memory ingestion planned: {total:,} messages of {subjects} subjects ({each});"
                " a system that calls a model per message makes at least that many calls "
                "(--memory-window N caps it at N messages before each probe)"
            )
        return out

    def into(self, plan: Plan[Any], needs: Mapping[str, Sequence[Need]]) -> None:
        """Add the recall stage to `plan`: its units, identity and each solve unit's needs."""
        plan.stages[RECALL.name] = dict(self.units)
        plan.stage_resolved[RECALL.name] = self.resolved()
        plan.notices += self.notices()
        for key, wanted in needs.items():
            plan.needs[("solve", key)] = list(wanted)

    def recalls(self, plan: Plan[Any], system: str, subject: str) -> list[Recalled]:
        """`system`'s recalls for `subject`, aligned with the queries planned for it."""
        key = self.where[(system, subject)]
        unit = self.units[key]
        row = plan.done[RECALL.name][key][0]
        return [recalled_of(r, q) for r, q in zip(row["recalls"], unit.queries, strict=True)]

    def recalled(self, plan: Plan[Any], system: str, subject: str, query: str) -> Recalled:
        """`system`'s recall at query id `query` of `subject` (from its saved unit)."""
        key = self.where[(system, subject)]
        if key not in self._read:
            self._read[key] = {r.query.id: r for r in self.recalls(plan, system, subject)}
        return self._read[key][query]

    def costs(self, plan: Plan[Any]) -> dict[str, Any]:
        """`memory_costs.json`: the budget, the definitions, and system -> its costs (over
        the recalls saved; a subject whose recall did not finish is listed)."""
        systems: dict[str, Any] = {}
        done = plan.done.get(RECALL.name, {})
        for system in self.systems:
            replays: list[Replay] = []
            missing: list[str] = []
            for (name, sid), key in self.where.items():
                if name != system.name:
                    continue
                if key not in done:
                    missing.append(sid)
                    continue
                replays.append(replay_of(done[key][0], self.recalls(plan, name, sid)))
            entry = replay_costs(replays, {})
            entry["spec"] = system.spec
            entry["subjects_failed"] = {sid: "its recall did not finish" for sid in missing}
            systems[system.name] = entry
        return {"budget": budget_json(self.budget), "definitions": DEFINITIONS, "systems": systems}


def cut_flags(systems: Mapping[str, Mapping[str, Any]], prefix: str) -> dict[str, str]:
    """`PREFIX + NAME` -> what the budget did to that system's context, for each system of
    `memory_costs.json`'s `systems` whose budget cut any recall (`Outcome.flags`)."""
    flags: dict[str, str] = {}
    for name, c in systems.items():
        cut, emptied, n = c.get("budget_cut", 0), c.get("cut_to_nothing", 0), c["recall_ms"]["n"]
        if not cut:
            continue
        said = f"the memory budget cut {cut} of {n} recalls"
        if emptied:
            said += f", {emptied} to nothing (those items had no memory at all)"
        flags[prefix + name] = said + " (raise --memory-tokens or --memory-k)"
    return flags


def memory_kind(message: str) -> ErrorKind:
    """The failure kind of a memory system's error, read from its message."""
    text = message.lower()
    if "could not be reached" in text or "connection refused" in text:
        return "unreachable"
    if "timed out" in text or "timeout" in text:
        return "timeout"
    if "http 429" in text:
        return "rate_limited"
    if re.search(r"http 5\d\d", text):
        return "server"
    if re.search(r"http [34]\d\d", text):
        return "rejected"
    if "no json" in text or "returned" in text or "not an object" in text:
        return "unreadable"
    return "other"


async def run_recall(unit: RecallUnit) -> Rows:
    """Replay `unit`'s subject into its system (in a thread, one replay of a system at a
    time) and return its one row; every ingest and recall call is charged to the memory
    role. A failure of the system is a failed call (`ModelError`)."""
    system = unit.system
    lock = _LOCKS.setdefault(id(system.system), threading.Lock())
    counter = unit.count or approx_tokens
    sid = unit.subject.id

    def go() -> Replay:
        with lock:
            return replay(
                system.system,
                sid,
                unit.subject.messages,
                unit.queries,
                unit.budget,
                counter,
                unit.window,
            )

    try:
        got = await asyncio.to_thread(go)
    except MemorySystemError as e:
        if isinstance(e.__cause__, EmbedderUnavailable):
            raise ValueError(f"memory system {system.spec!r}: {e.__cause__}") from None
        kind = memory_kind(str(e))
        charge(RECALL.role, system.name, None, False, kind)
        raise ModelError(str(e), retryable=False, kind=kind) from None
    for r in got.recalled:
        if r.ingested:
            spent = None if r is not got.recalled[0] else got.ingest_cost
            charge(RECALL.role, system.name, _tokens(spent), False, None, r.ingest_s)
        charge(RECALL.role, system.name, _tokens(r.cost), False, None, r.latency_s)
    return [replay_row(system, got)]


RECALL = Stage(
    "recall",
    "memory",
    "replay each subject into each memory system once, recalling at each of its probes",
    run=run_recall,
)
"""The stage every track with `--memory` runs before solve (a track declaring it needs no
`run_stage` of its own)."""


def _tokens(cost: SystemCost | None) -> Usage:
    if cost is None:
        return Usage()
    return Usage(prompt_tokens=cost.prompt_tokens, completion_tokens=cost.completion_tokens)


def _memory_json(m: Memory) -> dict[str, Any]:
    return {"message_id": m.message_id, "text": m.text, "cites": list(m.cites), "score": m.score}


def _cost_json(c: SystemCost | None) -> dict[str, int] | None:
    if c is None:
        return None
    return {
        "calls": c.calls,
        "prompt_tokens": c.prompt_tokens,
        "completion_tokens": c.completion_tokens,
    }


def _cost_of(c: Mapping[str, int] | None) -> SystemCost | None:
    return None if c is None else SystemCost(**c)


def replay_row(system: System, got: Replay) -> dict[str, Any]:
    """One replay as `parts/recall.jsonl` stores it (recalls in the order asked)."""
    return {
        "system": system.name,
        "spec": system.spec,
        "subject": got.subject_id,
        "ingested": got.ingested,
        "ingest_s": got.ingest_s,
        "ingest_cost": _cost_json(got.ingest_cost),
        "notes": list(got.notes),
        "recalls": [
            {
                "query": r.query.id,
                "memories": [_memory_json(m) for m in r.memories],
                "latency_s": r.latency_s,
                "cost": _cost_json(r.cost),
                "invalid_ids": list(r.invalid_ids),
                "positions": list(r.positions),
                "cited_positions": list(r.cited_positions),
                "ingested": r.ingested,
                "ingest_s": r.ingest_s,
                "context_tokens": r.context_tokens,
                "cut": r.cut,
            }
            for r in got.recalled
        ],
    }


def recalled_of(row: Mapping[str, Any], query: Query) -> Recalled:
    """A saved recall (`replay_row`'s) of `query`, as the harness returned it."""
    if row["query"] != query.id:
        raise ValueError(f"a saved recall is of query {row['query']!r}, not {query.id!r}")
    memories = tuple(
        Memory(m["message_id"], m["text"], tuple(m["cites"]), m["score"]) for m in row["memories"]
    )
    return Recalled(
        query,
        memories,
        float(row["latency_s"]),
        _cost_of(row["cost"]),
        tuple(row["invalid_ids"]),
        tuple(row["positions"]),
        tuple(row["cited_positions"]),
        int(row["ingested"]),
        float(row["ingest_s"]),
        int(row["context_tokens"]),
        int(row.get("cut", 0)),  # saved before the budget's cuts were counted: none known
    )


def replay_of(row: Mapping[str, Any], recalled: list[Recalled]) -> Replay:
    """A saved replay with its recalls (for `replay_costs`)."""
    return Replay(
        row["subject"],
        recalled,
        int(row["ingested"]),
        float(row["ingest_s"]),
        _cost_of(row["ingest_cost"]),
        list(row["notes"]),
    )


def budget_json(budget: Budget) -> dict[str, int | None]:
    """The budget as the manifest and memory_costs.json record it."""
    return {"k": budget.k, "tokens": budget.tokens}


@dataclass(frozen=True)
class Shown:
    """What one recall puts before a model: messages in conversation order, notes in the
    order recalled, and what the row records about it."""

    messages: tuple[Message, ...]
    notes: tuple[str, ...]
    fields: dict[str, Any]


def shown_of(got: Recalled, subject: Subject, evidence: Sequence[int]) -> Shown:
    """The context of a recall: id memories as their messages (conversation order), text
    memories as notes; the row fields: ids and texts recalled, ids dropped as invalid,
    whether the memories cite the evidence (None when there is none before the query), the
    share of it they cite, and the recall's latency."""
    msgs = subject.messages
    positions = sorted(got.positions)
    found = set(got.positions) | set(got.cited_positions)
    before = [e for e in evidence if e < got.query.cutoff]
    fields: dict[str, Any] = {
        "memory_ids": [msgs[p].id for p in got.positions],
        "memory_texts": [
            {"text": m.text, "cites": list(m.cites)} for m in got.memories if m.text is not None
        ],
        "memory_invalid_ids": list(got.invalid_ids),
        "evidence_cited": bool(found & set(before)) if before else None,
        "evidence_share": len(found & set(before)) / len(before) if before else None,
        "memory_latency_ms": 1000 * got.latency_s,
        "memory_error": None,
    }
    notes = tuple(m.text for m in got.memories if m.text is not None)
    return Shown(tuple(msgs[p] for p in positions), notes, fields)


def failed_fields(error: str) -> dict[str, Any]:
    """The memory fields of a row whose memory system failed on its subject."""
    return {
        "memory_ids": [],
        "memory_texts": [],
        "memory_invalid_ids": [],
        "evidence_cited": None,
        "evidence_share": None,
        "memory_latency_ms": None,
        "memory_error": error,
    }
