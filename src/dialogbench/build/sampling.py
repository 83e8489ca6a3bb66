"""Probe sampling in three strata, and the cheap surface signal that drives the enriched one.

The person's messages are those with role `user` (and, where a subject names its speakers
under study, spoken by one of them). Three strata, drawn in this order so that no message
falls in two, all with one `numpy` generator seeded by `seed`:

    proportional  a uniform sample of every person's message, pooled over the subjects (a
                  heavy relationship gives more probes, as it gives more messages): the only
                  stratum that answers "how often is the past needed"
    abstention    a uniform sample of the remaining session openers (the person's first
                  message of each session; with no session labels, of the conversation):
                  messages that need nothing earlier
    enriched      from the remaining messages that are not openers, a sample weighted by
                  the surface signal among those it marks as reaching outside the recent
                  thread: over-samples deep history so conditional statements can be made

The surface signal (`surface`) is computed for every message at once. For a probe at
position p it scores each earlier message with BM25 over the history before p (the
retrieval package's vectorised index, stop words removed) and takes

    far    the best score among messages more than RECENT_WINDOW back, divided by the
           number of the probe's distinct content words (so long probes do not win by length)
    near   the same within the recent thread
    cue    1 when the probe holds a back-reference cue (`CUES`: "remember", "last time",
           "you said", "update", "again", ...), else 0

    signal = far + CUE_WEIGHT * cue

and a pre-verification `surface_tier`: `distant` when far >= FAR_THRESHOLD and the best far
match lies in an earlier session, `session` when it lies in the probe's session, else
`recent` when near >= FAR_THRESHOLD or a cue is present, else `none`. It costs one sparse
BM25 pass per subject; the build reports how often the verified tier differs from it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from dialogbench.data.model import RECENT_WINDOW, Dataset, Stratum, Subject
from dialogbench.retrieval.base import FloatArray, IntArray
from dialogbench.retrieval.bm25 import BM25Index

CUES = re.compile(
    r"\b(remember|recall|last (time|week|month|night|year)|the other day|you said|you told|"
    r"i told you|i mentioned|as i said|like i said|again|still|update|anyway|finally|"
    r"that thing|since then|ever since|back when|earlier|before|how did|it went|went well)\b",
    re.IGNORECASE,
)
"""Words and phrases that often point back in a conversation (a cheap cue, not a rule)."""
CUE_WEIGHT = 0.5
FAR_THRESHOLD = 1.0
"""A far (or near) score at or above this marks a likely referent (per content word)."""
BLOCK = 1024
"""Probes scored per BM25 pass."""
STRATA: tuple[Stratum, ...] = ("proportional", "enriched", "abstention")


@dataclass(frozen=True)
class Surface:
    """The surface signal of every message of one subject (arrays indexed by position)."""

    far: FloatArray
    near: FloatArray
    cue: FloatArray
    far_best: IntArray
    """Position of the best far match (-1: none)."""
    tier: tuple[str, ...]

    @property
    def signal(self) -> FloatArray:
        return self.far + CUE_WEIGHT * self.cue


def best_matches(
    index: BM25Index, queries: sp.csr_matrix
) -> tuple[FloatArray, FloatArray, IntArray]:
    """For each message p (row p of `queries`, scored against the messages before it): the
    best BM25 score more than RECENT_WINDOW back, the best within the recent thread, and the
    position of that best far match (-1: none)."""
    n = queries.shape[0]
    parts = []
    for lo in range(0, n, BLOCK):  # blocks of probes bound the expanded postings
        hi = min(n, lo + BLOCK)
        got = index.score(queries[lo:hi], np.arange(lo, hi, dtype=np.int64)).tocoo()
        parts.append((got.row.astype(np.int64) + lo, got.col.astype(np.int64), got.data))
    rows = np.concatenate([r for r, _, _ in parts]) if parts else np.zeros(0, np.int64)
    cols = np.concatenate([c for _, c, _ in parts]) if parts else np.zeros(0, np.int64)
    vals = np.concatenate([v for _, _, v in parts]) if parts else np.zeros(0)
    is_far = cols < rows - RECENT_WINDOW
    far = np.zeros(n)
    near = np.zeros(n)
    np.maximum.at(far, rows[is_far], vals[is_far])
    np.maximum.at(near, rows[~is_far], vals[~is_far])
    best = np.full(n, -1, dtype=np.int64)
    if is_far.any():
        fr, fc, fv = rows[is_far], cols[is_far], vals[is_far]
        hit = fv >= far[fr]  # the best entry of its row (ties: the latest, written last)
        order = np.lexsort((fc[hit], fr[hit]))
        best[fr[hit][order]] = fc[hit][order]
    return far, near, best


def surface(subject: Subject) -> Surface:
    """The surface signal and tier of every message of `subject` (see the module doc)."""
    texts = [m.text for m in subject.messages]
    n = len(texts)
    index = BM25Index.from_texts(texts)
    queries = index.text_queries(texts)
    far, near, best = best_matches(index, queries)
    words = np.diff(queries.indptr).astype(np.float64)  # distinct known content words
    far /= np.maximum(words, 1.0)
    near /= np.maximum(words, 1.0)
    cue = np.array([1.0 if CUES.search(t) else 0.0 for t in texts])
    sessions = [m.session for m in subject.messages]
    tiers = []
    for p in range(n):
        if far[p] >= FAR_THRESHOLD:
            b = int(best[p])
            tiers.append("distant" if sessions[b] != sessions[p] else "session")
        elif near[p] >= FAR_THRESHOLD or cue[p]:
            tiers.append("recent")
        else:
            tiers.append("none")
    return Surface(far, near, cue, best, tuple(tiers))


def person_positions(subject: Subject) -> list[int]:
    """Positions of the person's messages (role user, by a speaker under study if named)."""
    who = set(subject.speakers)
    return [
        m.position for m in subject.messages if m.role == "user" and (not who or m.speaker in who)
    ]


def session_openers(subject: Subject) -> set[int]:
    """Positions of the person's first message of each session (of the conversation, when
    no message carries a session)."""
    seen: set[str | None] = set()
    out: set[int] = set()
    labelled = any(m.session is not None for m in subject.messages)
    for p in person_positions(subject):
        key = subject.messages[p].session if labelled else None
        if key not in seen:
            seen.add(key)
            out.add(p)
    return out


@dataclass(frozen=True)
class Pick:
    """One sampled probe."""

    subject_id: str
    position: int
    stratum: Stratum
    surface_tier: str
    surface_score: float
    opener: bool


@dataclass(frozen=True)
class Sizes:
    """How many probes each stratum draws, over all subjects together."""

    proportional: int = 40
    enriched: int = 20
    abstention: int = 10


def sample_strata(
    data: Dataset, sizes: Sizes, seed: int, subjects: Sequence[str] = ()
) -> tuple[list[Pick], list[str]]:
    """The probes of the three strata (ordered by subject, then position) and warnings for a
    stratum that could not be filled."""
    chosen = [s for s in data.subjects if not subjects or s.id in subjects]
    missing = sorted(set(subjects) - {s.id for s in data.subjects})
    if missing:
        known = ", ".join(s.id for s in data.subjects[:10])
        raise ValueError(f"--subjects: {', '.join(missing)} not in {data.name} (it has {known})")
    rng = np.random.default_rng(seed)
    pool: list[tuple[int, int]] = []  # (subject index, position)
    signals: list[Surface] = []
    openers: list[set[int]] = []
    for si, s in enumerate(chosen):
        signals.append(surface(s))
        openers.append(session_openers(s))
        pool += [(si, p) for p in person_positions(s)]
    warnings: list[str] = []
    taken: set[tuple[int, int]] = set()
    strata: dict[tuple[int, int], Stratum] = {}

    def draw(
        stratum: Stratum, candidates: list[tuple[int, int]], n: int, w: FloatArray | None
    ) -> None:
        if n <= 0:
            return
        usable = len(candidates) if w is None else int((w > 0).sum())
        if usable < n:
            warnings.append(
                f"the {stratum} stratum asked for {n} probes but only {usable} messages "
                "qualify: all of them are taken"
            )
        k = min(n, usable)
        if k == 0:
            return
        p = None if w is None else w / w.sum()
        for i in rng.choice(len(candidates), size=k, replace=False, p=p):
            key = candidates[int(i)]
            taken.add(key)
            strata[key] = stratum

    draw("proportional", pool, sizes.proportional, None)
    cold = [k for k in pool if k not in taken and k[1] in openers[k[0]]]
    draw("abstention", cold, sizes.abstention, None)
    rest = [
        k
        for k in pool
        if k not in taken
        and k[1] not in openers[k[0]]
        and signals[k[0]].tier[k[1]] in ("session", "distant")
    ]
    weights = np.array([float(signals[si].signal[p]) for si, p in rest])
    draw("enriched", rest, sizes.enriched, weights)
    picks = [
        Pick(
            chosen[si].id,
            p,
            strata[(si, p)],
            signals[si].tier[p],
            round(float(signals[si].signal[p]), 6),
            p in openers[si],
        )
        for si, p in sorted(strata)
    ]
    return picks, warnings


def outside_sample(
    data: Dataset, picks: Sequence[Pick], subjects: Sequence[str] = ()
) -> list[Pick]:
    """Every person message outside the proportional sample (ordered by subject, then
    position): the sampled enriched and abstention probes as they were drawn, and each
    other person message as a pick of stratum `census`, with its surface signal. The
    census and the re-reading (`build realcompanion --census`, `--reread`) read these."""
    chosen = [s for s in data.subjects if not subjects or s.id in subjects]
    drawn = {(p.subject_id, p.position): p for p in picks}
    out: list[Pick] = []
    for s in chosen:
        sig = surface(s)
        openers = session_openers(s)
        for p in person_positions(s):
            got = drawn.get((s.id, p))
            if got is None:
                got = Pick(
                    s.id, p, "census", sig.tier[p], round(float(sig.signal[p]), 6), p in openers
                )
            if got.stratum != "proportional":
                out.append(got)
    return out
