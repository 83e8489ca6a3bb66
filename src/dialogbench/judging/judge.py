"""`Judge`: a model scoring candidates against a rubric, one at a time or several blinded.

    judge = Judge(model, rubric)  # temperature 0, seed 0
    v = await judge.score(answer, reference=gold, context=question)
    b = await judge.score_blind({"ours": a, "baseline": b}, reference=gold)

A reply that still fails validation after the corrective retries gives an unscored verdict
(`scores` None) that keeps the raw text and the error: it is never scored 0 or dropped, and
it is a failed call of the judge's role (`Model.generate_parsed`), so a rerun asks it again.
Blind scoring shuffles the candidates, shows them as A, B, C, ... only, records which
label was whom, and maps the scores back to the original names.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from dialogbench.judging.prompts import FRAMINGS, blind_messages, single_messages
from dialogbench.judging.rubric import Rubric, blind_labels, blind_schema, verdict_schema
from dialogbench.models.model import Model
from dialogbench.models.structured import Structured
from dialogbench.models.types import ChatMessage, GenerateConfig

DEFAULT_JUDGE_CONFIG = GenerateConfig(temperature=0.0, seed=0, max_tokens=1024)


class _Asked(BaseModel):
    """Who judged under which rubric, and how the call went: the reply as it came, why it
    went unscored (None: scored), how many requests it took, which asking of it this was."""

    judge: str
    rubric: str
    raw: str = ""
    error: str | None = None
    attempts: int = 0
    retry: int = 0
    """Earlier askings of this verdict that came back unusable (`Structured.retry`)."""


class Verdict(_Asked):
    """One judge's scores for one candidate, or the raw reply and why it went unscored."""

    scores: dict[str, int] | None = None
    flags: dict[str, bool] | None = None
    reason: str = ""

    @property
    def scored(self) -> bool:
        return self.scores is not None


class BlindVerdict(_Asked):
    """One judge's scores for several blinded candidates, keyed by their original names."""

    labels: dict[str, str]
    """Blinded label -> original name, in the order the candidates were shown."""
    seed: int | None = None
    """The shuffle's seed (None when the caller passed its own `random.Random`)."""
    scores: dict[str, dict[str, int]] | None = None
    flags: dict[str, dict[str, bool]] | None = None
    reasons: dict[str, str] = {}

    @property
    def scored(self) -> bool:
        return self.scores is not None

    @property
    def order(self) -> list[str]:
        """Original names in the order shown to the judge."""
        return list(self.labels.values())

    def verdict(self, name: str) -> Verdict:
        """The part of this verdict about candidate `name`."""
        if name not in self.labels.values():
            raise KeyError(f"no candidate {name!r} in this verdict")
        return Verdict(
            judge=self.judge,
            rubric=self.rubric,
            scores=None if self.scores is None else self.scores[name],
            flags=None if self.flags is None else self.flags[name],
            reason=self.reasons.get(name, ""),
            raw=self.raw,
            error=self.error,
            attempts=self.attempts,
            retry=self.retry,
        )


def content_seed(*parts: object) -> int:
    """A stable seed from the item itself, so every item gets its own (reproducible) order."""
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).digest()
    return int.from_bytes(digest[:8], "big")


class Judge:
    """A model that scores candidates against a rubric."""

    def __init__(
        self,
        model: Model,
        rubric: Rubric,
        config: GenerateConfig | None = None,
        *,
        name: str | None = None,
        max_fixes: int = 2,
    ) -> None:
        self.model = model
        self.rubric = rubric
        self.config = config or DEFAULT_JUDGE_CONFIG
        self.name = name or model.name
        self.max_fixes = max_fixes
        self._single = verdict_schema(rubric)
        self._blind: dict[int, type[BaseModel]] = {}
        self._correction = FRAMINGS[rubric.lang].correction

    def _require(self, reference: str | None, context: str | None) -> None:
        needs = self.rubric.compares_to
        if (needs == "reference" and reference is None) or (needs == "context" and context is None):
            raise ValueError(f"rubric {self.rubric.name!r} needs a {needs} to judge against")

    def _pick(self, data: dict[str, Any]) -> tuple[dict[str, int], dict[str, bool], str]:
        scores = {d.name: int(data[d.name]) for d in self.rubric.dimensions}
        flags = {f.name: bool(data[f.name]) for f in self.rubric.flags}
        return scores, flags, str(data["reason"])

    async def _ask(
        self, messages: list[ChatMessage], schema: type[BaseModel], tag: str
    ) -> Structured[BaseModel]:
        """One judge call: a reply of `schema`, corrected up to `max_fixes` times."""
        return await self.model.generate_structured(
            messages,
            schema,
            self.config,
            max_fixes=self.max_fixes,
            tag=tag,
            correction=self._correction,
        )

    def _asked(self, got: Structured[BaseModel]) -> dict[str, Any]:
        """A verdict's fields about the call (`_Asked`'s): who judged, under which rubric,
        and how the call went."""
        return {
            "judge": self.name,
            "rubric": self.rubric.name,
            "raw": got.raw,
            "error": got.error,
            "attempts": got.attempts,
            "retry": got.retry,
        }

    async def score(
        self,
        candidate: str,
        reference: str | None = None,
        context: str | None = None,
        *,
        tag: str = "judge",
    ) -> Verdict:
        """Score one candidate."""
        self._require(reference, context)
        messages = single_messages(self.rubric, candidate, reference, context)
        got = await self._ask(messages, self._single, tag)
        found: dict[str, Any] = {}
        if got.value is not None:
            scores, flags, reason = self._pick(got.value.model_dump())
            found = {"scores": scores, "flags": flags or None, "reason": reason}
        return Verdict(**self._asked(got), **found)

    async def score_blind(
        self,
        candidates: Mapping[str, str],
        reference: str | None = None,
        context: str | None = None,
        *,
        seed: int | None = None,
        rng: random.Random | None = None,
        tag: str = "judge",
    ) -> BlindVerdict:
        """Score named candidates shown in shuffled order under blinded labels.

        The order comes from `rng`, else from `seed`, else from a seed derived from the
        item's content (reproducible, and different from item to item).
        """
        if not candidates:
            raise ValueError("score_blind needs at least one candidate")
        self._require(reference, context)
        if rng is not None and seed is not None:
            raise ValueError("pass either seed or rng, not both")
        if rng is None:
            if seed is None:
                seed = content_seed(sorted(candidates.items()), reference, context)
            rng = random.Random(seed)
        order = sorted(candidates)  # the shown order never depends on the caller's dict order
        rng.shuffle(order)
        labels = blind_labels(len(order))
        mapping = dict(zip(labels, order, strict=True))
        shown = [(label, candidates[name]) for label, name in mapping.items()]
        messages = blind_messages(self.rubric, shown, reference, context)
        schema = self._blind.get(len(labels)) or blind_schema(self.rubric, labels)
        self._blind[len(labels)] = schema
        got = await self._ask(messages, schema, tag)
        found: dict[str, Any] = {}
        if got.value is not None:
            picked = {
                mapping[item["label"]]: self._pick(item)
                for item in got.value.model_dump()["candidates"]
            }
            found = {
                "scores": {name: picked[name][0] for name in order},
                "flags": {name: picked[name][1] for name in order} if self.rubric.flags else None,
                "reasons": {name: picked[name][2] for name in order},
            }
        return BlindVerdict(**self._asked(got), labels=mapping, seed=seed, **found)
