"""Model roles: who plays `model` (the system under test), `judge` and `partner` in a run.

A track declares the roles it uses (`Role`); the caller gives each a `RoleSpec` (the CLI's
`--model`, `--judge-model`, `--partner-model` and their `--*-base-url`, `--*-api-key-env`,
`--*-max-connections`, `--*-timeout`, `--*-deadline`, `--*-retry-after-max`) or an
already-built `Model`. A role left unset falls back to the
role it names (the judge to the model under test), and the manifest says so.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AsyncExitStack, aclosing, asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal

from dialogbench.models.cache import ResponseCache
from dialogbench.models.model import Model
from dialogbench.models.spec import (
    DEFAULT_DEADLINE_S,
    DEFAULT_RETRY_AFTER_MAX_S,
    DEFAULT_TIMEOUT_S,
    ModelSpec,
    redacted_url,
)

DEFAULT_MAX_CONNECTIONS = 16

HOW_REACHED = frozenset({"max_connections", "timeout_s", "deadline_s", "retry_after_max_s"})
"""Settings a manifest records that change how a model is reached, not what it answers:
no part of a run's identity, so a resume with a longer timeout keeps the finished work."""


def answering(settings: dict[str, Any]) -> dict[str, Any]:
    """A role's manifest entry without the `HOW_REACHED` settings: what decides its replies."""
    return {k: v for k, v in settings.items() if k not in HOW_REACHED}


@dataclass(frozen=True)
class Role:
    """A model role a track uses, at which stage, and what stands in when it is unset."""

    name: str
    stage: Literal["solve", "score"] | str
    """`solve`, `score`, or the name of the earlier stage (`Track.stages`) that first
    calls it: its settings are then part of that stage's identity (and so of every later
    stage's), and it is opened whenever an earlier stage has units to do."""
    help: str
    required: bool = True
    """An error when neither it nor its fallback is given."""
    fallback: str | None = None
    """Another role that plays this one when it is not given (`judge` -> `model`)."""


def model_role(help: str = "the model under test", *, required: bool = True) -> Role:
    """The `model` role: the system under test, asked at solve (`--model`)."""
    return Role("model", "solve", help, required=required)


def judge_role(help: str, *, fallback: str | None = "model", required: bool = True) -> Role:
    """The `judge` role: it scores the saved outputs (`--judge-model`); unset, the model
    under test plays it (`fallback=None`: it must be given, unless not `required`)."""
    return Role("judge", "score", help, required=required, fallback=fallback)


@dataclass(frozen=True)
class RoleSpec:
    """How to reach a role's model; never a key, only the name of the variable holding it."""

    model: str
    base_url: str | None = None
    api_key_env: str | None = None
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    timeout_s: float = DEFAULT_TIMEOUT_S
    """Seconds one request may take."""
    deadline_s: float = DEFAULT_DEADLINE_S
    """Seconds one call may take in all, retries and back-off included."""
    retry_after_max_s: float = DEFAULT_RETRY_AFTER_MAX_S
    """The longest a server's `Retry-After` is waited."""

    def parsed(self) -> ModelSpec:
        """The model spec (a `ValueError` for one that would leak a secret or is malformed)."""
        return ModelSpec.parse(
            self.model,
            base_url=self.base_url,
            api_key_env=self.api_key_env,
            timeout_s=self.timeout_s,
            deadline_s=self.deadline_s,
            retry_after_max_s=self.retry_after_max_s,
        )

    def settings(self) -> dict[str, Any]:
        """What a manifest records (checks the spec parses)."""
        return {**self.parsed().settings(), "max_connections": self.max_connections}

    def open(self) -> Model:
        """The model behind the shared response cache, with this spec's timeout, deadline
        and Retry-After cap (`Model.from_spec` reads them from the spec)."""
        return Model.from_spec(
            self.parsed(), cache=ResponseCache(), concurrency=self.max_connections
        )


Given = RoleSpec | Model
"""What a caller gives for a role: how to reach it, or the model itself."""


def settings_of(given: Given) -> dict[str, Any]:
    """A role's manifest entry: a spec's settings, or a given model's name and endpoint."""
    if isinstance(given, Model):
        return {"model": given.name, "endpoint": redacted_url(given.provider.endpoint)}
    return given.settings()


def resolve(roles: Sequence[Role], given: Mapping[str, Given]) -> dict[str, str]:
    """Role -> the role whose model plays it (itself, or its fallback); an error naming
    the option for a required role nobody plays, or for a role the track has not."""
    known = {r.name for r in roles}
    for name in given:
        if name not in known:
            allowed = ", ".join(sorted(known)) or "none"
            raise ValueError(f"this track has no {name!r} role (its roles: {allowed})")
    plays: dict[str, str] = {}
    for role in roles:
        if role.name in given:
            plays[role.name] = role.name
        elif role.fallback is not None and role.fallback in given:
            plays[role.name] = role.fallback
        elif role.required:
            option = "--model" if role.name == "model" else f"--{role.name}-model"
            raise ValueError(
                f"this track needs a {role.name} ({role.help}): pass {option} "
                "(e.g. `embedded`, or openai-compatible/NAME with --base-url)"
            )
    return plays


def recorded(roles: Sequence[Role], given: Mapping[str, Given]) -> dict[str, dict[str, Any]]:
    """Each role once, as the manifest holds it: its settings, or which role stands in."""
    plays = resolve(roles, given)
    out: dict[str, dict[str, Any]] = {}
    for role in roles:
        if role.name not in plays:
            continue
        source = plays[role.name]
        if source == role.name:
            out[role.name] = settings_of(given[source])
        else:
            out[role.name] = {"same_as": source}
    return out


@asynccontextmanager
async def opened(
    roles: Sequence[Role], given: Mapping[str, Given], wanted: Sequence[str] | None = None
) -> AsyncIterator[dict[str, Model]]:
    """Role -> `Model` for the roles in `wanted` (default: all the track's); models built
    from specs are opened here and closed on leaving, given ones are left open."""
    plays = resolve(roles, given)
    names = [r.name for r in roles if r.name in plays and (wanted is None or r.name in wanted)]
    async with AsyncExitStack() as stack:
        models: dict[str, Model] = {}
        built: dict[str, Model] = {}
        for name in names:
            source = plays[name]
            if source not in built:
                g = given[source]
                if not isinstance(g, Model):
                    g = await stack.enter_async_context(aclosing(g.open()))
                built[source] = g
            models[name] = built[source].as_role(name)
        yield models
