"""Score-based retrievers: Random, Recency, Recency-user, Oracle and the three controls.

Each fills a (probes x messages) score matrix; `-inf` means "not retrieved". Ties are
broken toward the more recent message. Future messages are masked by `rank_scores`,
so a retriever cannot leak them whatever it scores.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np

from dialogbench.data.model import Subject
from dialogbench.retrieval.base import (
    FloatArray,
    Probe,
    Rankings,
    concat_rankings,
    reference_matrix,
)

_MAX_CELLS = 1 << 23  # bound on probes x messages (x references) per block


def rank_scores(scores: FloatArray, probes: Sequence[Probe], depth: int) -> Rankings:
    """Turn a score matrix into `Rankings`, masking each probe's future first."""
    n = scores.shape[1]
    cols = np.arange(n)
    cutoffs = np.array([p.cutoff for p in probes])
    scores = np.where(cols[None, :] < cutoffs[:, None], scores, -np.inf)
    # stable sort of the reversed row = ties go to the later message
    order = np.argsort(-scores[:, ::-1], axis=1, kind="stable")[:, :depth]
    top = (n - 1 - order).astype(np.int64)
    top[np.take_along_axis(scores, top, axis=1) == -np.inf] = -1
    if top.shape[1] < depth:
        top = np.pad(top, ((0, 0), (0, depth - top.shape[1])), constant_values=-1)
    refs = reference_matrix(probes)
    ranks = np.full(refs.shape, np.nan)
    valid = refs >= 0
    ref_scores = (
        np.take_along_axis(scores, np.maximum(refs, 0), axis=1)
        if n
        else np.full(refs.shape, -np.inf)  # no messages: no reference can be scored
    )
    step = max(1, _MAX_CELLS // max(1, n * refs.shape[1]))
    for lo in range(0, len(probes), step):
        s = scores[lo : lo + step, None, :]
        r = ref_scores[lo : lo + step, :, None]
        above = (s > r) | ((s == r) & (cols[None, None, :] > refs[lo : lo + step, :, None]))
        ranks[lo : lo + step] = 1 + above.sum(axis=2)
    ranks[valid & (ref_scores == -np.inf)] = np.inf
    ranks[~valid] = np.nan
    return Rankings(top=top, ref_ranks=ranks)


class ScoreRetriever:
    """Base for retrievers defined by a score matrix; ranks in memory-bounded blocks."""

    name = "score"

    def scores(self, subject: Subject, probes: Sequence[Probe]) -> FloatArray:
        raise NotImplementedError

    def rank(self, subject: Subject, probes: Sequence[Probe], depth: int) -> Rankings:
        n = len(subject.messages)
        step = max(1, _MAX_CELLS // max(1, n))
        return concat_rankings(
            [
                rank_scores(
                    self.scores(subject, probes[lo : lo + step]), probes[lo : lo + step], depth
                )
                for lo in range(0, len(probes), step)
            ],
            depth,
        )


def _rng(seed: int, subject: Subject, name: str) -> np.random.Generator:
    """A generator that depends only on the seed, the subject and the retriever."""
    return np.random.default_rng([seed, zlib.crc32(subject.id.encode()), zlib.crc32(name.encode())])


def _empty(subject: Subject, probes: Sequence[Probe]) -> FloatArray:
    return np.full((len(probes), len(subject.messages)), -np.inf)


class RandomRetriever(ScoreRetriever):
    """Every candidate in a uniformly random order."""

    name = "random"

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def scores(self, subject: Subject, probes: Sequence[Probe]) -> FloatArray:
        n = len(subject.messages)
        out = np.empty((len(probes), n))
        for i, p in enumerate(probes):
            out[i] = _rng(self.seed, subject, f"{self.name}:{p.id}").random(n)
        return out


class RecencyRetriever(ScoreRetriever):
    """The last messages before the probe, newest first."""

    name = "recency"

    def scores(self, subject: Subject, probes: Sequence[Probe]) -> FloatArray:
        n = len(subject.messages)
        return np.broadcast_to(np.arange(n, dtype=np.float64), (len(probes), n)).copy()


class RecencyUserRetriever(ScoreRetriever):
    """The last messages written by the probe's person, newest first, then everything else."""

    name = "recency-user"

    def scores(self, subject: Subject, probes: Sequence[Probe]) -> FloatArray:
        n = len(subject.messages)
        speakers = np.array([m.speaker for m in subject.messages], dtype=object)
        base = np.arange(n, dtype=np.float64)
        out = np.empty((len(probes), n))
        for i, p in enumerate(probes):
            mine = np.isin(speakers, p.speakers)
            out[i] = np.where(mine, base, base - n)
        return out


class OracleRetriever(ScoreRetriever):
    """The recorded references and nothing else (the upper bound)."""

    name = "oracle"

    def scores(self, subject: Subject, probes: Sequence[Probe]) -> FloatArray:
        out = _empty(subject, probes)
        for i, p in enumerate(probes):
            out[i, list(p.reference_positions)] = 1.0
        return out


class OffsetOracle(ScoreRetriever):
    """Control: the reference positions shifted back by a fixed offset (cyclic in the history)."""

    name = "offset-permuted"

    def __init__(self, offset: int = 50) -> None:
        self.offset = offset

    def scores(self, subject: Subject, probes: Sequence[Probe]) -> FloatArray:
        out = _empty(subject, probes)
        for i, p in enumerate(probes):
            if p.cutoff:
                shifted = [(r - self.offset) % p.cutoff for r in p.reference_positions]
                out[i, shifted] = 1.0
        return out


class RandomPositionOracle(ScoreRetriever):
    """Control: as many positions as there are references, drawn at random from the history."""

    name = "position-randomized"

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def scores(self, subject: Subject, probes: Sequence[Probe]) -> FloatArray:
        out = _empty(subject, probes)
        for i, p in enumerate(probes):
            rng = _rng(self.seed, subject, f"{self.name}:{p.id}")
            m = min(len(p.reference_positions), p.cutoff)
            out[i, rng.choice(p.cutoff, size=m, replace=False)] = 1.0
        return out


class BrokenOracle(ScoreRetriever):
    """Control: another probe's references (the next probe of the subject whose set is disjoint).

    It must score 0; the retrieval track says so loudly when it does not.
    """

    name = "broken-oracle"

    def __init__(self) -> None:
        self._donated: dict[str, list[int]] = {}

    def rank(self, subject: Subject, probes: Sequence[Probe], depth: int) -> Rankings:
        sets = [set(p.reference_positions) for p in probes]
        self._donated = {}
        for i, p in enumerate(probes):
            donor = donor_for(i, sets, p.cutoff)
            if donor is not None:
                self._donated[p.id] = [r for r in sets[donor] if r < p.cutoff]
        return super().rank(subject, probes, depth)

    def scores(self, subject: Subject, probes: Sequence[Probe]) -> FloatArray:
        out = _empty(subject, probes)
        for i, p in enumerate(probes):
            out[i, self._donated.get(p.id, [])] = 1.0
        return out


def donor_for(i: int, sets: Sequence[set[int]], cutoff: int) -> int | None:
    """The first later probe (cyclically) with a disjoint reference set inside the history."""
    n = len(sets)
    for step in range(1, n):
        j = (i + step) % n
        if sets[j] and not (sets[j] & sets[i]) and min(sets[j]) < cutoff:
            return j
    return None
