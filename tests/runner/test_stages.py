"""Earlier stages in general, on a toy track: a model role first called at an earlier
stage (part of that stage's identity, opened whenever the stage has units to do), and a
kept unit that needs a unit done again is done again too (through every stage)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel

from dialogbench.models.types import ChatMessage
from dialogbench.runner import Outcome, Plan, Role, RoleSpec, TrackBase, run_track
from dialogbench.runner.status import ExitCode
from dialogbench.runner.track import Models, Rows, Stage
from dialogbench.testing import ChatServer
from dialogbench.testing.chatserver import Fault, status


class Word(BaseModel):
    word: str


@dataclass(frozen=True)
class ToyConfig:
    pass


class Data:
    name, source, sha256, subjects = "toy", "toy", "0" * 64, ["x"]


class Toy(TrackBase[ToyConfig, str]):
    """Stage `ask` (the model: units x, y and z, which nothing needs), stage `join` (xy,
    needing x and y, no call), and a solve unit needing xy."""

    name: ClassVar[str] = "toy-stages"
    summary: ClassVar[str] = "stages"
    config_type = ToyConfig
    roles: ClassVar[tuple[Role, ...]] = (Role("model", "ask", "the asked model"),)
    stages: ClassVar[tuple[Stage, ...]] = (
        Stage("ask", "model", "one call per unit"),
        Stage("join", "model", "the asked units' words together"),
    )

    def __init__(self) -> None:
        self.ran: Counter[str] = Counter()

    def plan(self, data: Any, config: ToyConfig) -> Plan[str]:
        return Plan(
            {"s": "s"},
            stages={"ask": {k: k for k in "xyz"}, "join": {"xy": "xy"}},
            needs={("join", "xy"): [("ask", "x"), ("ask", "y")], ("solve", "s"): [("join", "xy")]},
        )

    async def run_stage(
        self, stage: str, unit: Any, models: Models, config: ToyConfig, plan: Plan[str]
    ) -> Rows:
        self.ran[f"{stage} {unit}"] += 1
        if stage == "ask":
            msgs: list[ChatMessage] = [{"role": "user", "content": f"unit {unit}"}]
            got = await models["model"].generate_structured(msgs, Word, max_fixes=0)
            return [{"unit": unit, "ok": got.value is not None}]
        rows = plan.upstream(unit, stage).values()
        return [{"unit": unit, "ok": all(r[0]["ok"] for r in rows)}]

    async def solve(self, unit: str, models: Models, config: ToyConfig, plan: Plan[str]) -> Rows:
        self.ran[f"solve {unit}"] += 1
        return [{"unit": unit, "ok": plan.upstream(unit)[("join", "xy")][0]["ok"]}]

    def aggregate(self, plan: Plan[str], rows: Rows, config: ToyConfig) -> Outcome:
        return Outcome(summary={"ok": rows[0]["ok"]})


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))


def test_a_unit_made_from_a_redone_unit_is_redone(tmp_path: Path) -> None:
    def x_fails(n: int, body: dict[str, Any]) -> Fault | None:
        return status(400, message="no") if "unit x" in json.dumps(body["messages"]) else None

    toy, out = Toy(), tmp_path / "run"
    with ChatServer(rules=x_fails) as srv:
        roles = {"model": RoleSpec("openai-compatible/m", srv.base_url)}
        first = run_track(toy, Data(), out, ToyConfig(), roles)
        assert first.exit_code == ExitCode.FAILURES and first.outcome.summary == {"ok": False}
        assert first.failed_by_kind == {"model": {"rejected": 1}}
        srv.rules = None
        toy.ran.clear()
        before = srv.request_count
        again = run_track(toy, Data(), out, ToyConfig(), roles)
        # x failed: asked again; xy and s were made from it: done again (no call of their
        # own); y and z are kept
        assert set(toy.ran) == {"ask x", "join xy", "solve s"}
        assert srv.request_count - before == 1
        assert again.exit_code == ExitCode.OK and again.outcome.summary == {"ok": True}
        assert again.retried == 3

        # a unit that nothing needs, lost from its part: the role is opened to redo it
        # even though nothing is left to solve
        part = out / "parts" / "ask.jsonl"
        part.write_text("".join(x + "\n" for x in part.read_text().splitlines() if '"z"' not in x))
        toy.ran.clear()
        assert run_track(toy, Data(), out, ToyConfig(), roles).exit_code == ExitCode.OK
        assert set(toy.ran) == {"ask z"}

        # the role is part of the identity of the stage that first calls it (and so of
        # every later one): another model redoes everything
        toy.ran.clear()
        other = {"model": RoleSpec("openai-compatible/n", srv.base_url)}
        manifest = json.loads((out / "manifest.json").read_text())
        run_track(toy, Data(), out, ToyConfig(), other)
        changed = json.loads((out / "manifest.json").read_text())["identity"]
        assert all(changed[k] != v for k, v in manifest["identity"].items())
        assert len(toy.ran) == 5
