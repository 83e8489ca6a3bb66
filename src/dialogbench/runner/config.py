"""What track configs share, said once: the common options and what a config derives from
them.

The field helpers make the options every track has (`seed`, `limit`, `n_boot`,
`temperature`, `max_tokens` and `judge_max_tokens`, `max_fixes`) with their one range and
stage; a track gives only what differs (its default, what its seed draws or its limit
counts). The mixins give a config that calls a model its request settings:

    from dialogbench.runner import config as shared

    @dataclass(frozen=True)
    class EchoConfig(shared.Sampled):
        limit: int | None = shared.limit("probes")
        seed: int = shared.seed("the limit draw and the replies")
        n_boot: int = shared.n_boot()
        temperature: float = shared.temperature(0.0, "sampling temperature of the replies")
        max_tokens: int = shared.tokens(64, "reply budget (tokens)")

Each track still lists these fields in its own config, in the place its `--help` shows
them: their defaults and wording differ from track to track (48 tokens for a detector's
answer, 1024 for a written profile), so no single base class could hold them.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from dialogbench.judging.judge import DEFAULT_JUDGE_CONFIG
from dialogbench.models.types import GenerateConfig
from dialogbench.runner.options import Stage, check, option

MAX_TOKENS = 1_000_000
"""The largest token budget a track allows (where it sets one)."""


def seed(what: str, *, stage: Stage = "solve") -> Any:
    """`seed` (0, any whole number from 0): the seed of `what` ("the limit draw, the replies
    and the bootstrap"); `stage="aggregate"` where it only seeds the bootstrap."""
    return option(0, help=f"seed of {what}", min=0, stage=stage)


def limit(what: str) -> Any:
    """`limit` (none: all): at most this many units, `what` saying which and how drawn."""
    return option(None, help=f"at most this many {what}", min=1)


def n_boot() -> Any:
    """`n_boot`: the bootstrap's resamples (2000), an aggregate-stage figure setting."""
    return option(2000, help="bootstrap resamples", min=1, max=1_000_000, stage="aggregate")


def temperature(default: float, help: str) -> Any:
    """`temperature`, from 0 to 2."""
    return option(default, help=help, min=0, max=2)


def tokens(
    default: int,
    help: str,
    *,
    stage: Stage = "solve",
    min: int = 1,
    max: int | None = MAX_TOKENS,
) -> Any:
    """A token budget: `max_tokens` (solve) or `judge_max_tokens` (`stage="score"`)."""
    return option(default, help=help, min=min, max=max, stage=stage)


def fixes(default: int, help: str, *, stage: Stage = "solve", max: int = 10) -> Any:
    """`max_fixes`: correction rounds for an unusable reply, from 0; `stage="score"` where
    only the judge's verdicts are corrected."""
    return option(default, help=help, min=0, max=max, stage=stage)


def judge_tokens(default: int) -> Any:
    """`judge_max_tokens`: the judge's budget per verdict (score stage, from 1, no cap)."""
    return tokens(default, "the judge's budget per verdict (tokens)", stage="score", max=None)


def judge_fixes(default: int = 2) -> Any:
    """`max_fixes` of a track that corrects only the judge's verdicts (score stage)."""
    return fixes(default, "corrective retries of an unusable verdict", stage="score")


class Checked:
    """A config checked as it is made (`options.check`): a bad value fails at once, in
    Python as on the command line."""

    def __post_init__(self) -> None:
        check(self)


class Sampled:
    """A config whose track asks a model: its calls' settings from its fields."""

    seed: int
    temperature: float
    max_tokens: int

    def generate_config(self) -> GenerateConfig:
        """The model calls' temperature, reply budget and seed (a track asking for JSON
        `replace`s in its schema)."""
        return GenerateConfig(
            temperature=self.temperature, max_tokens=self.max_tokens, seed=self.seed
        )


class Judged:
    """A config whose track calls a judge: its verdicts' settings."""

    judge_max_tokens: int

    def judge_config(self) -> GenerateConfig:
        """The judge's settings (`DEFAULT_JUDGE_CONFIG`) with the config's verdict budget."""
        return replace(DEFAULT_JUDGE_CONFIG, max_tokens=self.judge_max_tokens)


__all__ = [
    "MAX_TOKENS",
    "Checked",
    "Judged",
    "Sampled",
    "fixes",
    "judge_fixes",
    "judge_tokens",
    "limit",
    "n_boot",
    "seed",
    "temperature",
    "tokens",
]
