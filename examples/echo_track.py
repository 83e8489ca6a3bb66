"""The smallest judged track, written against the `Track` protocol (docs/architecture.md).

For every chat probe the model under test is asked to say, in a few words, what the person
is talking about; a judge rates each answer 0-2 against the probe. Figures: the mean rating
with its bootstrap interval. It exists to show the shape of a track, not to measure much.

    dialogbench run echo ...     # once registered: importing this module registers it

From Python:

    from dialogbench.runner import RoleSpec, run_track
    import examples.echo_track as echo
    run_track(echo.ECHO, load_dataset("sample"), Path("runs/echo"),
              roles={"model": RoleSpec("embedded")})
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, Field

from dialogbench.data.model import Dataset, Message
from dialogbench.models.types import ChatMessage, GenerateConfig
from dialogbench.runner import Outcome, Plan, Role, TrackBase, option, register
from dialogbench.runner.record import digest
from dialogbench.runner.track import Models, Rows
from dialogbench.stats.bootstrap import bootstrap_means

ASK = "In at most eight words, what is this message about?\n\n{text}"
RATE = "A message and a short description of it. Rate the description: 0 wrong, 1 vague, 2 apt.\n\nMessage: {text}\nDescription: {answer}"  # noqa: E501
PROMPTS = digest([ASK, RATE])


class Rating(BaseModel):
    rating: int = Field(ge=0, le=2)


@dataclass(frozen=True)
class EchoConfig:
    limit: int | None = option(None, help="at most N probes", min=1)
    max_tokens: int = option(24, help="answer budget", min=1, max=4096)
    seed: int = option(0, help="seed of the calls and the bootstrap", min=0)
    n_boot: int = option(1000, help="bootstrap resamples", min=1, stage="aggregate")


class EchoTrack(TrackBase[EchoConfig, Message]):
    """One unit per probe: solve asks the model, score asks the judge."""

    name: ClassVar[str] = "echo"
    summary: ClassVar[str] = "Say what each probe is about; a judge rates it 0-2."
    config_type = EchoConfig
    roles: ClassVar[tuple[Role, ...]] = (
        Role("model", "solve", "the model under test"),
        Role("judge", "score", "the judge", fallback="model"),
    )
    judged: ClassVar[bool] = True

    def plan(self, data: Dataset, config: EchoConfig) -> Plan[Message]:
        probes: list[Message] = []
        for subject in data.subjects:
            by_id = {m.id: m for m in subject.messages}
            probes += [by_id[item.probe_id] for item in subject.chat_items]
        probes = probes[: config.limit]
        return Plan({m.id: m for m in probes}, resolved={"prompt_sha256": PROMPTS})

    async def solve(self, unit: Message, models: Models, config: EchoConfig, plan: Any) -> Rows:
        ask: list[ChatMessage] = [{"role": "user", "content": ASK.format(text=unit.text)}]
        out = await models["model"].generate(
            ask, GenerateConfig(max_tokens=config.max_tokens, seed=config.seed)
        )
        return [{"probe": unit.id, "answer": out.text}]

    async def score(
        self, unit: Message, rows: Rows, models: Models, config: EchoConfig, plan: Any
    ) -> Rows:
        rate = RATE.format(text=unit.text, answer=rows[0]["answer"])
        messages: list[ChatMessage] = [{"role": "user", "content": rate}]
        got = await models["judge"].generate_structured(messages, Rating)
        return [{**rows[0], "rating": got.value.rating if got.value else None, "error": got.error}]

    def aggregate(self, plan: Plan[Message], rows: Rows, config: EchoConfig) -> Outcome:
        rated = np.array([r["rating"] for r in rows if r["rating"] is not None], dtype=float)
        mean = bootstrap_means(rated, n_boot=config.n_boot, seed=config.seed)[0]
        unscored = sum(r["rating"] is None for r in rows)
        return Outcome(
            summary={"rating": mean, "unscored": unscored},
            failures={"unscored ratings": unscored},
            result=mean,
        )

    def judgments(self, rows: Rows) -> dict[str, float]:
        return {r["probe"]: float(r["rating"]) for r in rows if r["rating"] is not None}

    def headline(self, outcome: Outcome) -> dict[str, float]:
        return {"rating": outcome.result.value}


ECHO = register(EchoTrack())
