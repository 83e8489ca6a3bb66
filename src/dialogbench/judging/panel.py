"""Several judges per item, and how far they agree (Krippendorff's alpha, judges as coders)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

import numpy as np

from dialogbench.judging.judge import Judge, Verdict
from dialogbench.stats.agreement import Level, krippendorff_alpha, rating_matrix


class Panel:
    """Judges that each score every item; they must have distinct names."""

    def __init__(self, judges: Sequence[Judge]) -> None:
        if not judges:
            raise ValueError("a panel needs at least one judge")
        names = [j.name for j in judges]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"judge names must be distinct (pass name=...); repeated: {repeated}")
        self.judges = tuple(judges)

    @property
    def names(self) -> list[str]:
        return [j.name for j in self.judges]

    async def score(
        self,
        candidate: str,
        reference: str | None = None,
        context: str | None = None,
        *,
        tag: str = "judge",
    ) -> dict[str, Verdict]:
        """Every judge's verdict on one candidate, keyed by judge name (calls run concurrently)."""
        verdicts = await asyncio.gather(
            *(j.score(candidate, reference, context, tag=tag) for j in self.judges)
        )
        return dict(zip(self.names, verdicts, strict=True))


def panel_agreement(
    verdicts_by_item: Mapping[str, Mapping[str, Verdict]] | Sequence[Mapping[str, Verdict]],
    dimension: str,
    level: Level = "interval",
) -> float:
    """Alpha on one dimension, judges (coders) x items (units).

    Unscored verdicts and judges missing from an item count as missing ratings. NaN when
    no item has two scores, or when the scores never vary.
    """
    items = list(
        verdicts_by_item.values() if isinstance(verdicts_by_item, Mapping) else verdicts_by_item
    )
    judges = sorted({name for item in items for name in item})
    scored = [v.scores for item in items for v in item.values() if v.scores is not None]
    if scored and not any(dimension in s for s in scored):
        raise KeyError(f"no verdict has a score for dimension {dimension!r}")
    ratings = np.full((len(judges), len(items)), np.nan)
    for u, item in enumerate(items):
        for c, name in enumerate(judges):
            verdict = item.get(name)
            if verdict is not None and verdict.scores is not None and dimension in verdict.scores:
                ratings[c, u] = verdict.scores[dimension]
    return krippendorff_alpha(ratings, level)


def rating_agreement(
    ratings: Mapping[str, Mapping[str, float]], level: Level = "interval"
) -> tuple[float, int]:
    """Alpha of judge -> {row id: rating} (NaN or absent = missing), and how many rows at
    least two judges rated."""
    matrix = rating_matrix(ratings)
    paired = int((np.sum(~np.isnan(matrix), axis=0) >= 2).sum()) if matrix.shape[1] else 0
    return krippendorff_alpha(matrix, level), paired
