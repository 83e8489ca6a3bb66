"""Fast versions of the reliability benchmarks (benchmarks/reliability_*.py).

Each test drives the real CLI in subprocesses against the loopback server on the built-in
`sample` dataset with small sizes (40 rows, 2 kills) and prints the benchmark's table
(`pytest -s` shows it). A test fails when a target is missed, except targets that wait on
work outside these benchmarks (a check's `needs`: the run-folder lock, the SIGINT resume
message, ...); set DIALOGBENCH_RELIABILITY_STRICT=1 to hold those too. Wall-clock targets
(the faulted run within 2x) are left to the benchmarks.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

pytest.importorskip("aiohttp")  # the loopback server's

from benchmarks import (  # noqa: E402
    reliability_concurrency,
    reliability_faults,
    reliability_kills,
    reliability_secrets,
)
from benchmarks.reliability_common import Check, Workload, encodings, table  # noqa: E402

SMALL = Workload(dataset="sample", items=40, n_boot=50)
STRICT = os.environ.get("DIALOGBENCH_RELIABILITY_STRICT") == "1"


def held(title: str, checks: list[Check]) -> None:
    """Print the table; fail on a missed target this suite holds."""
    print("\n" + table(title, checks))
    bad = [c for c in checks if c.met is False and not c.timed and (STRICT or not c.needs)]
    assert not bad, "missed: " + "; ".join(f"{c.what} = {c.value} ({c.note})" for c in bad)


def test_faults_every_unit_scored_or_failed_with_cause(tmp_path: Path) -> None:
    checks = reliability_faults.measure(SMALL, min_items=40, folder=tmp_path)
    held("faults (fast)", checks)
    by = {c.what: c for c in checks}
    assert by["units lost"].met


def test_kills_resume_to_identical_results(tmp_path: Path) -> None:
    checks = reliability_kills.measure(SMALL, kills=2, folder=tmp_path)
    held("kills (fast)", checks)
    by = {c.what: c for c in checks}
    assert by["after kills: items, summary identical"].met


def test_concurrency_two_processes(tmp_path: Path) -> None:
    checks = reliability_concurrency.measure(SMALL, folder=tmp_path)
    held("concurrency (fast)", checks)
    by = {c.what: c for c in checks}
    assert by["one cache, two folders: A identical"].met
    assert by["one cache, two folders: B identical"].met


def test_secrets_scan_finds_what_it_plants(tmp_path: Path) -> None:
    """The scan itself: planted forms are found, each counted once per occurrence."""
    key = reliability_secrets.KEY
    raw, escaped, url = encodings(key)
    blobs = {"a": f"x {raw} y {url}".encode(), "b": escaped.encode(), "c": b"nothing"}
    hits = reliability_secrets.scan(blobs, key)
    assert hits == {"a": {"raw": 1, "URL-encoded": 1}, "b": {"JSON-escaped": 1}}


def test_secrets_run_writes_no_key(tmp_path: Path) -> None:
    checks = reliability_secrets.measure(SMALL, folder=tmp_path)
    held("secrets (fast)", checks)
    by = {c.what: c for c in checks}
    assert by["requests (each sent the key)"].value.split()[0] != "0"
