"""Two runs against a backend whose first answer to each request is unusable
(`testing.UnusableFirst`): what the first run counted, and what the rerun sent.

    flaky = UnusableFirst(good, applies=...)
    with ChatServer(reply=flaky) as srv:
        got = run_twice(srv, flaky, out, lambda: run_track(...).exit_code)
    assert got.exit_codes == (3, 0) and got.asked_again == got.failed
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dialogbench.build import BuildConfig, build_realcompanion
from dialogbench.data.model import Dataset
from dialogbench.runner import RoleSpec
from dialogbench.testing import ChatServer, UnusableFirst
from dialogbench.testing.unusable import conversation


@dataclass(frozen=True)
class TwoRuns:
    """What two runs of the same command into one folder did."""

    exit_codes: tuple[int, int]
    failed_calls_by_kind: dict[str, dict[str, int]]
    """warnings.json's `failed_calls_by_kind` after the first run (role -> kind -> n)."""
    usage_by_kind: dict[str, dict[str, int]]
    """usage.json's `failed_by_kind` of each role after the first run."""
    failures: dict[str, int]
    """warnings.json's `failures` after the first run."""
    failed: list[str]
    """The conversations of the first run's failed askings (corrections left out), sorted."""
    asked_again: list[str]
    """The conversations the rerun sent of those the backend spoils, sorted."""
    seeds: list[tuple[Any, Any]]
    """(the first asking's seed, the rerun's) for each request asked again."""
    rerun_requests: int
    """Every request the rerun sent (of any role)."""


def run_twice(srv: ChatServer, flaky: UnusableFirst, out: Path, run: Callable[[], int]) -> TwoRuns:
    """Run the command (`run` gives its exit status) twice into `out`, on `srv`."""
    first = run()
    notes = json.loads((out / "warnings.json").read_text())
    usage = json.loads((out / "usage.json").read_text())
    failed = flaky.failed_askings()
    before = srv.request_count
    second = run()
    rerun = srv.requests[before:]
    again = [b for b in rerun if flaky.picks(b)]
    seed_of = {conversation(b): b.get("seed") for b in failed}
    return TwoRuns(
        exit_codes=(first, second),
        failed_calls_by_kind=notes.get("failed_calls_by_kind", {}),
        usage_by_kind={
            role: u["failed_by_kind"] for role, u in usage["roles"].items() if u["failed_by_kind"]
        },
        failures=notes.get("failures", {}),
        failed=sorted(map(conversation, failed)),
        asked_again=sorted(map(conversation, again)),
        seeds=[(seed_of.get(conversation(b)), b.get("seed")) for b in again],
        rerun_requests=len(rerun),
    )


def build_twice(reply: Any, schema: str, data: Dataset, out: Path, config: BuildConfig) -> TwoRuns:
    """`build realcompanion` twice into `out` against `reply`, whose first answer to each
    request of reply schema `schema` is made unusable: what each run did."""
    flaky = UnusableFirst(
        reply, applies=lambda body: body["response_format"]["json_schema"]["name"] == schema
    )
    with ChatServer(reply=flaky) as srv:
        spec = RoleSpec("openai-compatible/scripted", base_url=srv.base_url)
        return run_twice(
            srv,
            flaky,
            out / ".build",
            lambda: build_realcompanion(data, out, config, spec)[1].exit_code,
        )
