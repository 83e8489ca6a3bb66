"""`verdict_fields`: a judge's verdict as the fields of a result row, the same in every track.

    row |= verdict_fields(verdict)                        # one candidate, one verdict
    row |= verdict_fields(blind, candidate="C2")          # that candidate of a blinded verdict
    row |= verdict_fields(None, skipped="episode failed") # nothing was judged, and why

Every judged row (items.jsonl) carries these fields:

    judged          True when the verdict is usable (it has scores); False when unscored or
                    when nothing was judged
    judge_model     the judge's name (its model); None when nothing was judged
    judge_rubric    the rubric's name; None when nothing was judged
    judge_scores    {dimension: integer score}; None unless judged
    judge_flags     {flag: bool}; None unless judged or when the rubric has no flags
    judge_reason    the judge's stated reason ("" when it gave none or was unscored)
    judge_attempts  calls made for this verdict (1 + corrective retries; 0 when not judged)

and, by case:

    judge_raw, judge_error           an unscored verdict: the judge's last raw reply and why
                                     it could not be used (kept, counted, never scored 0)
    judge_skipped                    nothing was judged: why (e.g. "episode failed")
    judge_retry                      a verdict whose earlier askings came back unusable
                                     (failed calls, asked again by a rerun): how many
    judge_label, judge_labels,       a blinded verdict: this candidate's label, every label ->
    judge_seed                       candidate as shown (in order), and the shuffle's seed

A row went *unscored* (counted as a failure) when `judge_model` is set and `judged` is
False. Figures a track derives from the scores (chat's `content_match`, questions' `judge`
on [0, 1], ...) sit beside these fields and are computed from `judge_scores`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dialogbench.judging.judge import BlindVerdict, Verdict


def verdict_fields(
    v: Verdict | BlindVerdict | None, candidate: str | None = None, *, skipped: str | None = None
) -> dict[str, Any]:
    """The judge fields of one row (see the module's docstring for each field).

    `candidate` picks one candidate of a blinded verdict (required for a `BlindVerdict`, not
    allowed for a `Verdict`); with `v` None, `skipped` says why nothing was judged.
    """
    if v is None:
        if not skipped:
            raise ValueError("a row without a verdict needs `skipped`: why nothing was judged")
        return {
            "judged": False,
            "judge_model": None,
            "judge_rubric": None,
            "judge_scores": None,
            "judge_flags": None,
            "judge_reason": "",
            "judge_attempts": 0,
            "judge_skipped": skipped,
        }
    if skipped is not None:
        raise ValueError("`skipped` is only for a row without a verdict")
    blind: dict[str, Any] = {}
    if isinstance(v, BlindVerdict):
        if candidate is None:
            raise ValueError("a blinded verdict needs `candidate`: whose fields to give")
        label = next((k for k, name in v.labels.items() if name == candidate), None)
        if label is None:
            raise KeyError(f"no candidate {candidate!r} in this verdict")
        blind = {"judge_label": label, "judge_labels": v.labels, "judge_seed": v.seed}
        one = v.verdict(candidate)
    elif candidate is not None:
        raise ValueError("`candidate` is only for a blinded verdict")
    else:
        one = v
    row: dict[str, Any] = {
        "judged": one.scored,
        "judge_model": one.judge,
        "judge_rubric": one.rubric,
        "judge_scores": one.scores,
        "judge_flags": one.flags,
        "judge_reason": one.reason,
        "judge_attempts": one.attempts,
    }
    if not one.scored:
        row.update(judge_raw=one.raw, judge_error=one.error)
    if one.retry:
        row["judge_retry"] = one.retry
    return {**row, **blind}


def is_unscored(row: Mapping[str, Any]) -> bool:
    """Whether a row's verdict came back unusable (a judge was asked; no scores came)."""
    return row["judge_model"] is not None and not row["judged"]
