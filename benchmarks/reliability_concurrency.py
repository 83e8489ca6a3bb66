"""Concurrency: two CLI processes on one response cache, and on one run folder.

    python benchmarks/reliability_concurrency.py [--items 600] [--dataset locomo] [--latency 0.02]

The answer key is an uninterrupted run of `dialogbench run questions` with its own cache.
Then, against the same loopback server:

1. one cache, two folders: two processes started together, sharing `DIALOGBENCH_CACHE`;
   both must exit 0 with the answer key's items.jsonl and summary.json (SQLite contention
   must cost time, never a result);
2. one cache, one folder: a second process is started on the folder once the first has
   saved a unit; it must be refused (exit 2, a message naming the folder's lock or the
   other process) while the first finishes with the answer key's bytes; a rerun afterwards
   must exit 0 and leave them as they are.

Exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.reliability_common import (
    BenchServer,
    Check,
    Workload,
    child_env,
    compare,
    finish,
    identical,
    reply_function,
    report,
    run_cli,
    saved_units,
    start_cli,
    wait_for,
)

LOCK_WORDS = ("lock", "another", "in use", "already running", "busy")


def measure(work: Workload, *, latency: float = 0.02, folder: Path | None = None) -> list[Check]:
    with (
        tempfile.TemporaryDirectory(dir=folder) as tmp,
        BenchServer(reply=reply_function(), latency=latency) as srv,
    ):
        base = Path(tmp)
        ref_out = base / "ref"
        ref = run_cli(work.args(srv.base_url, ref_out), child_env(base / "ref.sqlite"))
        if ref.rc != 0:
            raise RuntimeError(f"the answer-key run exited {ref.rc}:\n{ref.stderr[-3000:]}")

        # 1. one cache, two folders
        shared = child_env(base / "shared.sqlite")
        started = time.perf_counter()
        a = start_cli(work.args(srv.base_url, base / "a"), shared)
        b = start_cli(work.args(srv.base_url, base / "b"), shared)
        ran_a, ran_b = finish(a, started), finish(b, started)
        cmp_a, cmp_b = compare(ref_out, base / "a"), compare(ref_out, base / "b")

        # 2. one cache, one folder: the server holds the first run's requests while the
        # second starts; any request arriving after that comes from the second
        one = base / "one"
        env = child_env(base / "one.sqlite")
        started = time.perf_counter()
        first = start_cli(work.args(srv.base_url, one), env)
        wait_for(lambda: saved_units(one) > 0 or first.poll() is not None, 600)
        srv.paused.set()
        time.sleep(0.5)  # the first run's requests in flight reach the server
        settled = srv.arrived
        first_alive = first.poll() is None
        t2 = time.perf_counter()
        second_proc = start_cli(work.args(srv.base_url, one), env)
        wait_for(lambda: second_proc.poll() is not None or srv.arrived > settled, 120)
        second_called = srv.arrived > settled
        first_alive_after = first.poll() is None
        srv.paused.clear()
        second = finish(second_proc, t2)
        ran_first = finish(first, started)
        cmp_one = compare(ref_out, one)
        again = run_cli(work.args(srv.base_url, one), env)
        cmp_again = compare(ref_out, one)

    said = second.stderr.strip().splitlines()
    refused = second.rc == 2 and any(w in second.stderr.lower() for w in LOCK_WORDS)
    return [
        Check("units (rows) in the answer key", f"{cmp_a.units} ({cmp_a.rows} rows)"),
        Check(
            "one cache, two folders: exit codes",
            f"{ran_a.rc} / {ran_b.rc}",
            "0 / 0",
            ran_a.rc == 0 and ran_b.rc == 0,
            (ran_a.stderr + ran_b.stderr).strip()[-100:],
        ),
        Check(
            "one cache, two folders: A identical",
            identical(cmp_a),
            "yes",
            all(cmp_a.identical.values()),
        ),
        Check(
            "one cache, two folders: B identical",
            identical(cmp_b),
            "yes",
            all(cmp_b.identical.values()),
        ),
        Check(
            "one cache, two folders: wall A / B / alone (s)",
            f"{ran_a.wall_s:.1f} / {ran_b.wall_s:.1f} / {ref.wall_s:.1f}",
        ),
        Check(
            "one folder: second started while first ran",
            "yes" if first_alive and first_alive_after else "no",
            "yes",
            first_alive and first_alive_after,
            f"second took {second.wall_s:.1f}s",
        ),
        Check(
            "one folder: requests from the second",
            "some" if second_called else "none",
            "none",
            not second_called,
            needs="the run-folder lock",
        ),
        Check(
            "one folder: second refused (exit 2, names the lock)",
            f"exit {second.rc}",
            "exit 2",
            refused,
            (said[-1] if said else "(no message)")[:100],
            needs="the run-folder lock",
        ),
        Check("one folder: first exit code", str(ran_first.rc), "0", ran_first.rc == 0),
        Check(
            "one folder: items, summary identical",
            identical(cmp_one),
            "yes",
            all(cmp_one.identical.values()),
        ),
        Check(
            "one folder: rerun afterwards",
            f"exit {again.rc}, {identical(cmp_again)}",
            "exit 0, yes",
            again.rc == 0 and all(cmp_again.identical.values()),
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--items", type=int, default=600, help="rows (2 per question)")
    ap.add_argument("--dataset", default="locomo")
    ap.add_argument("--latency", type=float, default=0.02, help="server seconds per request")
    a = ap.parse_args(argv)
    work = Workload(dataset=a.dataset, items=a.items)
    checks = measure(work, latency=a.latency)
    return report(f"concurrency: two processes on {work.track} {work.dataset}", checks)


if __name__ == "__main__":
    sys.exit(main())
