"""Agreement between raters (people, judges) on the same items, per dimension.

For every pair of raters, on the items both scored: Cohen's kappa (scores as categories),
Pearson's r and Spearman's rho with their two-sided p-values, each with a 95% bootstrap
interval that resamples items (`stats.kappa`, `stats.correlation`). For all the raters of a
dimension together: Fleiss' kappa on the items every one of them scored, and Krippendorff's
alpha (interval and nominal) on every item at least two scored, missing ratings allowed
(`stats.agreement`), also with intervals from resampling items.

A pair is "between humans", "between judges" or "judge and human" by the raters' kinds
(`judging.ratings`). `paper_tables` gives the paper's two shapes against one reference
rater (the judge): Table 2, Cohen's kappa of each other rater per dimension and over all
dimensions pooled, and Table 6, Pearson's r with its p-value per dimension. For every
person and judge pair, per dimension, `ScoreDifferences` is Figure 3: the distribution of
human - judge scores, its mean and sample SD ("all below 1.5") and the share of items
within 1.5 SD of zero difference ("over 80% within 1.5 standard deviations of the human
scores", read as |human - judge| <= 1.5 SD), with intervals from resampling items.

A figure that cannot be computed is NaN (null in JSON) and `PairAgreement.undefined` names
it with the reason: a constant rater (no correlation, kappa 0 / 0 when both are constant),
fewer than two shared items, or Spearman's p at n = 2 (no degrees of freedom). The p-values
are scipy's (`stats.correlation`): at n = 2 Pearson's is 1.0.

Table 2's "Avg." column is not the mean of its dimension columns (Rater1: 0.80, 0.87, 0.71,
0.74 average 0.78, printed 0.82), so the paper pooled the items of every dimension into
one kappa; `all` here is that pooled kappa, computed over every (dimension, item) pair.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel

from dialogbench.stats.agreement import krippendorff_alpha, rating_matrix
from dialogbench.stats.bootstrap import Estimate, nan_estimate, percentile_estimate, resample_counts
from dialogbench.stats.correlation import (
    pearson,
    pearson_p,
    spearman,
    spearman_p,
    undefined_correlation,
)
from dialogbench.stats.kappa import cohen_kappa, fleiss_kappa

if TYPE_CHECKING:
    from dialogbench.judging.ratings import Ratings

ALL = "all"
"""The pseudo-dimension pooling every dimension's items (the paper's Table 2 "Avg.")."""


class PairAgreement(BaseModel):
    """Two raters on one dimension, over the items both scored."""

    dimension: str
    a: str
    b: str
    between: str
    n: int
    cohen_kappa: Estimate
    pearson: Estimate
    pearson_p: float
    spearman: Estimate
    spearman_p: float
    undefined: dict[str, str] = {}
    """Figure (cohen_kappa, pearson, pearson_p, spearman, spearman_p) -> why it is NaN."""


class GroupAgreement(BaseModel):
    """Every rater of one dimension together."""

    dimension: str
    raters: list[str]
    fleiss_kappa: Estimate
    """Over the items every rater scored (n: how many)."""
    alpha_interval: Estimate
    alpha_nominal: Estimate
    """Over the items at least two raters scored (n: how many)."""


class ScoreDifferences(BaseModel):
    """The paper's Figure 3 on one dimension: a person's score minus the judge's, per item
    both scored (the distribution the figure plots, and the two figures its text gives)."""

    dimension: str
    human: str
    judge: str
    n: int
    mean: Estimate
    sd: Estimate
    """Sample standard deviation (ddof 1) of the differences: "all below 1.5" in the paper."""
    within_1_5_sd: Estimate
    """Share of items whose |difference| is at most 1.5 SDs: "over 80%" in the paper."""
    histogram: dict[str, int]
    """Difference (rounded to a whole point) -> items, what the figure's density smooths."""


class AgreementReport(BaseModel):
    """Everything `dialogbench agreement` prints."""

    path: str
    raters: dict[str, str]
    dimensions: list[str]
    blank: int
    pairs: list[PairAgreement]
    groups: list[GroupAgreement]
    differences: list[ScoreDifferences] = []


def between(kind_a: str, kind_b: str) -> str:
    """Which comparison a pair of raters makes, by their kinds."""
    kinds = {kind_a, kind_b}
    if kinds == {"human"}:
        return "between humans"
    if kinds == {"judge"}:
        return "between judges"
    if kinds == {"human", "judge"}:
        return "judge and human"
    return "kinds not given"


def _estimate(point: float, replicates: npt.NDArray[np.float64], n: int) -> Estimate:
    if math.isnan(point):
        return nan_estimate(n)
    return percentile_estimate(point, replicates, n)


FIGURES = ("cohen_kappa", "pearson", "pearson_p", "spearman", "spearman_p")
"""A pair's figures, as `PairAgreement.undefined` names them."""
PairFigures = tuple[int, Estimate, Estimate, float, Estimate, float, dict[str, str]]


def pair_agreement(
    x: Sequence[float], y: Sequence[float], *, n_boot: int = 2000, seed: int = 0
) -> PairFigures:
    """(n, kappa, pearson, its p, spearman, its p, undefined) of two paired score lists;
    `undefined` maps each NaN figure to why it is undefined."""
    n = len(x)
    if n == 0:
        undefined = dict.fromkeys(FIGURES, "no item scored by both raters")
        return 0, nan_estimate(), nan_estimate(), math.nan, nan_estimate(), math.nan, undefined
    r_p, rho_p = pearson_p(x, y), spearman_p(x, y)
    undefined = {
        name: p.undefined
        for name, p in (("pearson_p", r_p), ("spearman_p", rho_p))
        if p.undefined is not None
    }
    w = resample_counts(n, n_boot, np.random.default_rng(seed))
    k = float(cohen_kappa(x, y)[0])
    r = float(pearson(x, y)[0])
    rho = float(spearman(x, y)[0])
    why_r = undefined_correlation(x, y)
    if why_r is not None:
        undefined["pearson"] = undefined["spearman"] = why_r
    if math.isnan(k):
        undefined["cohen_kappa"] = "every score in one category: chance agreement is complete"
    return (
        n,
        _estimate(k, cohen_kappa(x, y, w), n),
        _estimate(r, pearson(x, y, w), n),
        r_p.value,
        _estimate(rho, spearman(x, y, w), n),
        rho_p.value,
        dict(sorted(undefined.items())),
    )


def _sd(d: npt.NDArray[np.float64], w: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Sample SDs of `d` under each row of resample counts `w` (NaN below two items)."""
    n = w.sum(axis=1)
    mean = w @ d / n
    with np.errstate(invalid="ignore", divide="ignore"):
        sd: npt.NDArray[np.float64] = np.sqrt((w @ d**2 - n * mean**2).clip(min=0) / (n - 1))
    return sd


def score_differences(
    human: Sequence[float], judge: Sequence[float], *, n_boot: int = 2000, seed: int = 0
) -> tuple[Estimate, Estimate, Estimate, dict[str, int]]:
    """(mean, SD, share within 1.5 SD, histogram) of human - judge over paired scores, each
    with a bootstrap interval over items (the paper's Figure 3)."""
    d = np.asarray(human, np.float64) - np.asarray(judge, np.float64)
    n = len(d)
    if n == 0:
        return nan_estimate(), nan_estimate(), nan_estimate(), {}
    w = resample_counts(n, n_boot, np.random.default_rng(seed))
    ones = np.ones((1, n))
    sd_point = float(_sd(d, ones)[0])
    sds = _sd(d, w)
    within = np.abs(d)[None, :] <= 1.5 * sds[:, None]
    share_reps = np.where(np.isnan(sds), np.nan, (w * within).sum(axis=1) / w.sum(axis=1))
    share = float(np.mean(np.abs(d) <= 1.5 * sd_point)) if not math.isnan(sd_point) else math.nan
    counts: dict[str, int] = {}
    for value in sorted(np.rint(d).astype(int).tolist()):
        counts[str(value)] = counts.get(str(value), 0) + 1
    return (
        _estimate(float(d.mean()), w @ d / w.sum(axis=1), n),
        _estimate(sd_point, sds, n),
        _estimate(share, share_reps, n),
        counts,
    )


def group_agreement(
    table: Mapping[str, Mapping[str, float]], *, n_boot: int = 2000, seed: int = 0
) -> tuple[Estimate, Estimate, Estimate]:
    """(Fleiss' kappa, alpha interval, alpha nominal) of rater -> {item: score}."""
    matrix = rating_matrix(table)
    rng = np.random.default_rng(seed)
    complete = matrix[:, ~np.isnan(matrix).any(axis=0)]
    fleiss = nan_estimate(complete.shape[1])
    if len(table) >= 2 and complete.shape[1] > 0:
        w = resample_counts(complete.shape[1], n_boot, rng)
        fleiss = _estimate(
            float(fleiss_kappa(complete)[0]), fleiss_kappa(complete, w), complete.shape[1]
        )
    pairable = matrix[:, (~np.isnan(matrix)).sum(axis=0) >= 2]
    m = pairable.shape[1]
    alphas: list[Estimate] = []
    for level in ("interval", "nominal"):
        if m == 0:
            alphas.append(nan_estimate())
            continue
        point = krippendorff_alpha(pairable, level)
        draws = rng.integers(0, m, size=(n_boot, m))
        reps = np.array([krippendorff_alpha(pairable[:, d], level) for d in draws])
        alphas.append(_estimate(point, reps, m))
    return fleiss, alphas[0], alphas[1]


def agreement_report(ratings: Ratings, *, n_boot: int = 2000, seed: int = 0) -> AgreementReport:
    """Pairwise and group agreement on each dimension, and on all of them pooled."""
    kinds = ratings.raters()
    dimensions = ratings.dimensions()
    pairs: list[PairAgreement] = []
    groups: list[GroupAgreement] = []
    differences: list[ScoreDifferences] = []
    for dimension in [*dimensions, ALL] if len(dimensions) > 1 else dimensions:
        table = ratings.table(None if dimension == ALL else dimension)
        raters = [r for r in kinds if r in table]
        for a, b in itertools.combinations(raters, 2):
            shared = sorted(set(table[a]) & set(table[b]))
            x = [table[a][i] for i in shared]
            y = [table[b][i] for i in shared]
            n, kappa, r, r_p, rho, rho_p, undefined = pair_agreement(x, y, n_boot=n_boot, seed=seed)
            if between(kinds[a], kinds[b]) == "judge and human" and dimension != ALL:
                human, judge = (a, b) if kinds[a] == "human" else (b, a)
                xs, ys = (x, y) if human == a else (y, x)
                mean, sd, within, histogram = score_differences(xs, ys, n_boot=n_boot, seed=seed)
                differences.append(
                    ScoreDifferences(
                        dimension=dimension,
                        human=human,
                        judge=judge,
                        n=n,
                        mean=mean,
                        sd=sd,
                        within_1_5_sd=within,
                        histogram=histogram,
                    )
                )
            pairs.append(
                PairAgreement(
                    dimension=dimension,
                    a=a,
                    b=b,
                    between=between(kinds[a], kinds[b]),
                    n=n,
                    cohen_kappa=kappa,
                    pearson=r,
                    pearson_p=r_p,
                    spearman=rho,
                    spearman_p=rho_p,
                    undefined=undefined,
                )
            )
        if len(raters) >= 2:
            fleiss, alpha_i, alpha_n = group_agreement(
                {r: table[r] for r in raters}, n_boot=n_boot, seed=seed
            )
            groups.append(
                GroupAgreement(
                    dimension=dimension,
                    raters=raters,
                    fleiss_kappa=fleiss,
                    alpha_interval=alpha_i,
                    alpha_nominal=alpha_n,
                )
            )
    return AgreementReport(
        path=ratings.path,
        raters=dict(kinds),
        dimensions=dimensions,
        blank=ratings.blank,
        pairs=pairs,
        groups=groups,
        differences=differences,
    )


def default_reference(raters: Mapping[str, str]) -> str | None:
    """The rater the paper's tables compare against: the only judge, if there is one."""
    judges = [r for r, kind in raters.items() if kind == "judge"]
    return judges[0] if len(judges) == 1 else None


def paper_tables(
    report: AgreementReport, reference: str
) -> tuple[dict[str, dict[str, Estimate]], dict[str, dict[str, tuple[Estimate, float]]]]:
    """Table 2 (rater -> dimension | all -> Cohen's kappa) and Table 6 (rater -> dimension
    -> (Pearson's r, p)) of every other rater against `reference`."""
    if reference not in report.raters:
        raise ValueError(
            f"no rater {reference!r} in {report.path}; raters: {', '.join(report.raters)}"
        )
    kappas: dict[str, dict[str, Estimate]] = {}
    pearsons: dict[str, dict[str, tuple[Estimate, float]]] = {}
    for p in report.pairs:
        if reference not in (p.a, p.b):
            continue
        other = p.b if p.a == reference else p.a
        kappas.setdefault(other, {})[p.dimension] = p.cohen_kappa
        if p.dimension != ALL:
            pearsons.setdefault(other, {})[p.dimension] = (p.pearson, p.pearson_p)
    return kappas, pearsons
