"""`--memory` in the questions, chat and detection tracks: resolve the memory systems, replay
each subject into each of them once, and keep what every query recalled.

Every track that takes `--memory SPEC[,SPEC...]` does the same at plan time:

1. `resolve_systems`: each spec becomes a memory system (`memory.resolve_memory`), reported
   under `memory_name` (the spec for built-ins, the system's own `name` for plug-ins); a bad
   spec or two systems with one name is a usage error naming `--memory`;
2. `replay_subjects`: per system, per subject, one `memory.replay` of all the subject's
   queries in the run (so a stateful system is fed once, in time order, with no future
   leakage), under one `Budget` for every system. A failure of the system on a subject is
   kept (`MemoryRun.errors`) and makes that subject's units fail (counted, exit status 3,
   done again on a rerun), never a traceback; a missing optional dependency (the dense
   embedder) is a set-up error instead;
3. `costs_file`: `memory_costs.json`, system -> `memory.replay_costs` entry (definitions in
   `memory/costs.py`), with the budget and the subjects that failed.

The replay runs again on every run of the same folder (a rerun, `dialogbench score`): its
recalls are what the still unfinished units are shown, and its timings are this run's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
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
from dialogbench.memory.costs import TokenCount, approx_tokens
from dialogbench.memory.registry import memory_name
from dialogbench.models.embedding import EmbedderUnavailable
from dialogbench.runner import OptionError

MEMORY_HELP = (
    "memory systems, each one more system: bm25, recency, full-context, dense, hybrid, "
    "module:Class, an entry point or http://... (docs/memory.md)"
)
MEMORY_K_HELP = "at most this many memories per recall, the same for every memory system"


@dataclass(frozen=True)
class System:
    """One `--memory` spec, resolved."""

    name: str
    spec: str
    system: MemorySystem


@dataclass
class MemoryRun:
    """One system's replays: per subject, each query's recall (aligned with the queries
    given) or the error that stopped the subject's replay."""

    name: str
    spec: str
    recalls: dict[str, list[Recalled]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    replays: list[Replay] = field(default_factory=list)

    def recalled(self, subject: str, i: int) -> Recalled | str:
        """The `i`-th query's recall for `subject`, or why there is none."""
        if subject in self.errors:
            return self.errors[subject]
        return self.recalls[subject][i]


def resolve_systems(specs: Sequence[str], seed: int) -> list[System]:
    """The memory systems `specs` name; `OptionError` (--memory) for a bad spec or a name
    given to two systems."""
    out: list[System] = []
    for spec in specs:
        try:
            system = resolve_memory(spec, seed=seed)
        except MemorySpecError as e:
            raise OptionError("memory", str(e)) from None
        name = memory_name(spec, system)
        if any(s.name == name for s in out):
            raise OptionError("memory", f"two memory systems are named {name!r}: {','.join(specs)}")
        out.append(System(name, spec, system))
    return out


def replay_subjects(
    system: System,
    queries: Mapping[str, tuple[Subject, Sequence[Query]]],
    budget: Budget,
    count: Callable[[Subject], TokenCount] | None = None,
) -> MemoryRun:
    """Replay every subject's `queries` into `system` (one replay per subject); `count`
    gives the token counter of a subject (default: `approx_tokens`)."""
    run = MemoryRun(system.name, system.spec)
    for sid, (subject, asked) in queries.items():
        counter = count(subject) if count is not None else approx_tokens
        try:
            got = replay(system.system, sid, subject.messages, asked, budget, counter)
        except MemorySystemError as e:
            if isinstance(e.__cause__, EmbedderUnavailable):
                raise ValueError(f"memory system {system.spec!r}: {e.__cause__}") from None
            run.errors[sid] = str(e)
            continue
        run.recalls[sid] = got.recalled
        run.replays.append(got)
    return run


def costs_file(runs: Sequence[MemoryRun], budget: Budget) -> dict[str, Any]:
    """`memory_costs.json`: the budget, the definitions, and system -> its costs."""
    systems: dict[str, Any] = {}
    for run in runs:
        entry = replay_costs(run.replays, {})
        entry["spec"] = run.spec
        entry["subjects_failed"] = dict(run.errors)
        systems[run.name] = entry
    return {
        "budget": budget_json(budget),
        "definitions": DEFINITIONS,
        "systems": systems,
    }


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
