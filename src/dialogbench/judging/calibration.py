"""Calibration probes: how often a judge accepts known-wrong answers and rejects known-right ones.

Each probe is a candidate whose verdict is known in advance. A pass rule turns the judge's
scores into accept/reject; the false-accept rate is taken over the scored known-wrong probes,
the false-reject rate over the scored known-right ones, each with a bootstrap interval.
Unscored calibration verdicts are counted and listed in the report, never dropped silently.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import BaseModel

from dialogbench.judging.judge import Judge, Verdict
from dialogbench.stats.bootstrap import Estimate, bootstrap_means

Expected = Literal["right", "wrong"]


class CalibrationProbe(BaseModel):
    """A candidate answer whose correctness is known."""

    id: str
    candidate: str
    expected: Expected
    question: str | None = None
    """Shown to the judge as the context the candidate responds to."""
    reference: str | None = None


@dataclass(frozen=True)
class PassRule:
    """A candidate is accepted when its score on `dimension` is at least `threshold`."""

    dimension: str
    threshold: int

    def accepts(self, scores: Mapping[str, int]) -> bool:
        return scores[self.dimension] >= self.threshold


class ProbeOutcome(BaseModel):
    """What the judge made of one probe; `accepted` is None when the verdict is unscored."""

    probe: CalibrationProbe
    accepted: bool | None
    verdict: Verdict


class CalibrationReport(BaseModel):
    """False-accept and false-reject rates of one judge under one pass rule."""

    judge: str
    rubric: str
    dimension: str
    threshold: int
    n_right: int
    n_wrong: int
    false_accept: Estimate | None
    """Share of scored known-wrong probes that were accepted (None when none was scored)."""
    false_reject: Estimate | None
    """Share of scored known-right probes that were rejected (None when none was scored)."""
    unscored: int
    unscored_ids: list[str]
    outcomes: list[ProbeOutcome]


def _rate(hits: list[float], n_boot: int, seed: int) -> Estimate | None:
    if not hits:  # None rather than NaN: NaN does not survive a JSON round trip
        return None
    return bootstrap_means(np.array(hits), n_boot=n_boot, seed=seed)[0]


def _check(judge: Judge, probes: Sequence[CalibrationProbe], rule: PassRule) -> None:
    dim = judge.rubric.dimension(rule.dimension)
    if not dim.low < rule.threshold <= dim.high:
        raise ValueError(
            f"threshold {rule.threshold} must be above {dim.low} and at most {dim.high}, "
            f"or the rule would accept or reject everything"
        )
    ids = [p.id for p in probes]
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        raise ValueError(f"probe ids must be distinct; repeated: {repeated}")


async def calibrate(
    judge: Judge,
    probes: Sequence[CalibrationProbe],
    rule: PassRule,
    *,
    n_boot: int = 2000,
    seed: int = 0,
    tag: str = "calibration",
) -> CalibrationReport:
    """Run `judge` on every probe and report its false-accept and false-reject rates."""
    _check(judge, probes, rule)
    verdicts = await asyncio.gather(
        *(judge.score(p.candidate, p.reference, p.question, tag=tag) for p in probes)
    )
    outcomes = [
        ProbeOutcome(
            probe=p, accepted=None if v.scores is None else rule.accepts(v.scores), verdict=v
        )
        for p, v in zip(probes, verdicts, strict=True)
    ]
    false_accepts = [
        float(o.accepted)
        for o in outcomes
        if o.probe.expected == "wrong" and o.accepted is not None
    ]
    false_rejects = [
        float(not o.accepted)
        for o in outcomes
        if o.probe.expected == "right" and o.accepted is not None
    ]
    unscored = [o.probe.id for o in outcomes if o.accepted is None]
    return CalibrationReport(
        judge=judge.name,
        rubric=judge.rubric.name,
        dimension=rule.dimension,
        threshold=rule.threshold,
        n_right=sum(p.expected == "right" for p in probes),
        n_wrong=sum(p.expected == "wrong" for p in probes),
        false_accept=_rate(false_accepts, n_boot, seed),
        false_reject=_rate(false_rejects, n_boot, seed),
        unscored=len(unscored),
        unscored_ids=unscored,
        outcomes=outcomes,
    )
