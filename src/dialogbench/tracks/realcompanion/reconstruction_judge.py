"""Claim matching by a judge model (`--matcher judge`): the judge reads two records and says
whether they state the same claim, contradict each other, or state different claims
(`reconstruction_prompts.MATCH_TASK`, `ClaimVerdict`).

Which pairs are asked. Asking about every (written, gold) pair would cost n x m calls, so
the judge is asked about candidate pairs only (`candidates`): the pairs whose fields agree
under the meaning matcher (its field groups, or the field-name cosine for a field outside
them), and, whatever the fields, each record's `TOP_K` most similar statements on the
other side (MiniLM cosine). A pair whose field and statement are equal once normalised is
`same` without a call. No other pair matches.

What agrees. A `same` verdict; `contradicts` and `different` do not. Records are then
paired one-to-one as by the other matchers (`rm.assign`: the most agreeing pairs, the
statement cosine breaking ties). A verdict that could not be had (the call failed, or the
reply was still unusable after `max_fixes` corrections) is never read as `different`: the
subject is left unscored in that run (counted, shown), and the runner asks again on a rerun
(the failed call is charged to the judge role, so the scored unit is done again; the
verdicts it had are answered from the cache).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from dialogbench.models.model import Model
from dialogbench.models.structured import Structured
from dialogbench.models.types import GenerateConfig
from dialogbench.tracks.common import ask_each
from dialogbench.tracks.realcompanion import reconstruction_match as rm
from dialogbench.tracks.realcompanion.reconstruction_prompts import ClaimVerdict, match_messages

TOP_K = 3
"""Per record, how many of the other side's most similar statements are asked about,
whatever their fields."""

BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class Candidates:
    """Which (pred, gold) pairs go to the judge, which are the same without asking, and the
    statement cosines that break ties in the pairing."""

    sims: rm.FloatArray
    asked: BoolArray
    identical: BoolArray


def record_key(record: rm.Record) -> tuple[str, str]:
    """A record once normalised (field as the lexical matcher folds it, statement in
    canonical form, case folded): two records with one key are `same` without a call."""
    field, statement = record
    return rm.norm_field(field), rm.canonical(statement).casefold().strip()


def candidates(
    pred: Sequence[rm.Record], gold: Sequence[rm.Record], base: rm.Matcher, top_k: int = TOP_K
) -> Candidates:
    """The pairs worth a judge's call (see the module's docstring); `base` is the meaning
    matcher (its embedder and field rule)."""
    n, m = len(pred), len(gold)
    if base.embed_similarity is None:
        raise ValueError("the judge's candidates need the meaning matcher (an embedder)")
    if not n or not m:
        empty = np.zeros((n, m), dtype=bool)
        return Candidates(np.zeros((n, m)), empty, empty)
    sims = np.asarray(
        base.embed_similarity([s for _, s in pred], [s for _, s in gold]), dtype=np.float64
    ).reshape(n, m)
    fields, _, _ = base.fields([f for f, _ in pred], [f for f, _ in gold])
    near = np.zeros((n, m), dtype=bool)
    rows = np.argsort(-sims, axis=1, kind="stable")[:, : min(top_k, m)]
    near[np.arange(n)[:, None], rows] = True
    cols = np.argsort(-sims, axis=0, kind="stable")[: min(top_k, n), :]
    near[cols, np.arange(m)[None, :]] = True
    key_p, key_g = [record_key(r) for r in pred], [record_key(r) for r in gold]
    identical = np.array([[a == b for b in key_g] for a in key_p], dtype=bool).reshape(n, m)
    return Candidates(sims, (fields | near) & ~identical, identical)


@dataclass
class JudgedMatch:
    """One kind's matching by the judge: the matched pairs (pred, gold, cosine), how many
    pairs were asked, the verdicts' counts, each asked pair's verdict (pred, gold,
    verdict), and the pairs whose verdict could not be had."""

    matched: list[tuple[int, int, float]]
    asked: int = 0
    identical: int = 0
    verdicts: dict[str, int] = field(default_factory=dict)
    pairs: list[tuple[int, int, str]] = field(default_factory=list)
    failed: list[tuple[int, int]] = field(default_factory=list)


async def ask_verdicts(
    model: Model,
    pairs: Sequence[tuple[rm.Record, rm.Record]],
    config: GenerateConfig,
    *,
    max_fixes: int,
    tag: str,
) -> list[Structured[ClaimVerdict]]:
    """The judge's reply on each (written, gold) pair: a verdict, or why there is none."""
    prompts = [match_messages(a, b) for a, b in pairs]
    return await ask_each(model, prompts, ClaimVerdict, config, max_fixes=max_fixes, tag=tag)


async def judge_match(
    model: Model,
    pred: Sequence[rm.Record],
    gold: Sequence[rm.Record],
    base: rm.Matcher,
    config: GenerateConfig,
    *,
    max_fixes: int,
    tag: str,
    top_k: int = TOP_K,
) -> JudgedMatch:
    """Match `pred` against `gold` by the judge's verdicts on the candidate pairs."""
    c = candidates(pred, gold, base, top_k)
    ask = [(int(i), int(j)) for i, j in zip(*np.nonzero(c.asked), strict=True)]
    got = await ask_verdicts(
        model, [(pred[i], gold[j]) for i, j in ask], config, max_fixes=max_fixes, tag=tag
    )
    agree = c.identical.copy()
    pairs: list[tuple[int, int, str]] = []
    failed = []
    for (i, j), reply in zip(ask, got, strict=True):
        if reply.value is None:
            failed.append((i, j))
            continue
        pairs.append((i, j, reply.value.verdict))
        agree[i, j] = reply.value.verdict == "same"
    matched = [(i, j, float(c.sims[i, j])) for i, j in rm.assign(c.sims, agree)]
    verdicts = Counter(v for _, _, v in pairs)
    return JudgedMatch(
        matched, len(ask), int(c.identical.sum()), dict(sorted(verdicts.items())), pairs, failed
    )
