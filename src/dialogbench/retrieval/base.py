"""Probes, rankings and the two retriever protocols.

A *probe* is a point in a subject's conversation where a system must find earlier
messages: a chat item's probe message, or a question placed after the last message.
Only messages before the probe (positions < `cutoff`) are candidates.

Users plug in a memory system by implementing `Retriever` (one probe at a time, return
message ids best first). Built-ins implement `BatchRetriever`, which ranks many probes
of one subject at once with numpy; `as_batch` adapts the simple protocol to it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from dialogbench.data.model import Dataset, Message, Subject

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Probe:
    """One retrieval query against the history before `cutoff`."""

    id: str
    subject_id: str
    kind: Literal["chat", "question"]
    text: str
    cutoff: int
    reference_positions: tuple[int, ...]
    speakers: tuple[str, ...]
    labels: dict[str, str] = field(default_factory=dict)


def build_probes(subject: Subject) -> list[Probe]:
    """All probes of a subject: its chat items, then its questions (asked after `after_id`)."""
    pos = subject.position_of()
    probes: list[Probe] = []
    for item in subject.chat_items:
        msg = subject.messages[pos[item.probe_id]]
        probes.append(
            Probe(
                id=item.probe_id,
                subject_id=subject.id,
                kind="chat",
                text=msg.text,
                cutoff=msg.position,
                reference_positions=tuple(sorted(pos[r] for r in item.reference_ids)),
                speakers=(msg.speaker,),
                labels={"stratum": item.stratum, "tier": item.tier or "unlabelled"},
            )
        )
    default_speakers = tuple(subject.speakers) or tuple(
        sorted({m.speaker for m in subject.messages if m.role == "user"})
    )
    for q in subject.questions:
        cutoff = len(subject.messages) if q.after_id is None else pos[q.after_id] + 1
        named = tuple(s for s in default_speakers if re.search(rf"\b{re.escape(s)}\b", q.text))
        probes.append(
            Probe(
                id=q.id,
                subject_id=subject.id,
                kind="question",
                text=q.text,
                cutoff=cutoff,
                reference_positions=tuple(sorted(pos[r] for r in q.evidence_ids)),
                speakers=named or default_speakers,
                labels={"category": q.category},
            )
        )
    return probes


def scoreable_probes(dataset: Dataset) -> tuple[list[Probe], dict[str, int]]:
    """Probes that have references, and counts of those left out by kind."""
    kept: list[Probe] = []
    skipped: dict[str, int] = {}
    for subject in dataset.subjects:
        for p in build_probes(subject):
            if p.reference_positions:
                kept.append(p)
            else:
                key = f"{p.kind} probes without references"
                skipped[key] = skipped.get(key, 0) + 1
    return kept, skipped


@dataclass(frozen=True)
class Rankings:
    """What a retriever returned for a batch of probes of one subject.

    `top[i]` holds the positions ranked 1..depth for probe i (-1 pads short lists);
    `ref_ranks[i, j]` the 1-based rank of probe i's j-th reference, `inf` when it was not
    retrieved, `nan` where probe i has fewer than j+1 references.
    """

    top: IntArray
    ref_ranks: FloatArray


def concat_rankings(parts: Sequence[Rankings], depth: int) -> Rankings:
    """Stack the rankings of consecutive probe blocks."""
    if not parts:
        return Rankings(np.zeros((0, depth), np.int64), np.zeros((0, 1)))
    width = max(p.ref_ranks.shape[1] for p in parts)
    return Rankings(
        top=np.concatenate([p.top for p in parts]),
        ref_ranks=np.concatenate(
            [
                np.pad(
                    p.ref_ranks, ((0, 0), (0, width - p.ref_ranks.shape[1])), constant_values=np.nan
                )
                for p in parts
            ]
        ),
    )


def reference_matrix(probes: Sequence[Probe]) -> IntArray:
    """References as a padded (P, R) array, -1 where a probe has fewer than R."""
    width = max((len(p.reference_positions) for p in probes), default=0)
    out = np.full((len(probes), max(width, 1)), -1, dtype=np.int64)
    for i, p in enumerate(probes):
        out[i, : len(p.reference_positions)] = p.reference_positions
    return out


@runtime_checkable
class BatchRetriever(Protocol):
    """Ranks the candidates of many probes of one subject at once."""

    name: str

    def rank(self, subject: Subject, probes: Sequence[Probe], depth: int) -> Rankings:
        """Rank each probe's candidates; `top` must hold at least `depth` columns."""
        ...


@runtime_checkable
class Retriever(Protocol):
    """The simple plug-in protocol: one probe, the history before it, k ids best first.

    `history` holds exactly the candidate messages (everything before the probe).
    Ranks past what is returned count as not retrieved, so MRR is MRR@k.
    """

    name: str

    def retrieve(self, history: Sequence[Message], probe: Probe, k: int) -> Sequence[str]: ...


class _PerProbe:
    """Adapts a `Retriever` to `BatchRetriever` (one call per probe)."""

    def __init__(self, inner: Retriever) -> None:
        self.inner = inner
        self.name = inner.name

    def rank(self, subject: Subject, probes: Sequence[Probe], depth: int) -> Rankings:
        pos = subject.position_of()
        refs = reference_matrix(probes)
        top = np.full((len(probes), depth), -1, dtype=np.int64)
        ranks = np.where(refs >= 0, np.inf, np.nan)
        for i, p in enumerate(probes):
            history = subject.messages[: p.cutoff]
            got: list[int] = []
            for mid in self.inner.retrieve(history, p, depth):
                at = pos.get(mid)
                if at is None or at >= p.cutoff:
                    raise ValueError(
                        f"retriever {self.name!r} returned {mid!r} for probe {p.id!r}, "
                        "which is not a message before the probe; return ids from `history`"
                    )
                if at not in got:
                    got.append(at)
            got = got[:depth]
            top[i, : len(got)] = got
            for j, r in enumerate(p.reference_positions):
                if r in got:
                    ranks[i, j] = got.index(r) + 1
        return Rankings(top=top, ref_ranks=ranks)


def as_batch(retriever: Retriever | BatchRetriever) -> BatchRetriever:
    """Return `retriever` as a `BatchRetriever`."""
    if isinstance(retriever, BatchRetriever):
        return retriever
    if isinstance(retriever, Retriever):
        return _PerProbe(retriever)
    raise TypeError(
        f"{retriever!r} has neither rank(subject, probes, depth) nor retrieve(history, probe, k)"
    )
