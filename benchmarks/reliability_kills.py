"""Kills: `--kills` SIGKILLs at random moments, each run resumed; then one SIGINT.

    python benchmarks/reliability_kills.py [--kills 10] [--items 600] [--dataset locomo]
        [--latency 0.02] [--seed 0]

An uninterrupted run of `dialogbench run questions` against the loopback server is the
answer key. A second run into its own folder (and its own cache) is killed with SIGKILL at
a random moment, rerun with the same command, killed again, `--kills` times; each moment is
drawn uniformly from 30% of the start-up (to the first saved unit) to the start-up plus the
share of the answer key's work still to do, so kills land in start-up, mid-solve and
mid-score; a run that finishes before its kill starts the chain again from an empty
folder and cache, with a narrower window. The last rerun is left to finish: its
items.jsonl and summary.json must be the answer key's bytes. Then SIGINT: a fresh run is
interrupted once it has saved a quarter of its units; it must exit within 15 s, without a
traceback, with a one-line message on how to resume, and resuming it must again give the
answer key's bytes.

Exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import random
import shutil
import signal
import subprocess
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


def startup_s(work: Workload, url: str, out: Path, cache: Path) -> tuple[float, float, int]:
    """(seconds to the first saved unit, wall seconds, units) of an uninterrupted run."""
    started = time.perf_counter()
    proc = start_cli(work.args(url, out), child_env(cache))
    wait_for(lambda: saved_units(out) > 0 or proc.poll() is not None, 600)
    first = time.perf_counter() - started
    ran = finish(proc, started)
    if ran.rc != 0:
        raise RuntimeError(f"the uninterrupted run exited {ran.rc}:\n{ran.stderr[-3000:]}")
    return first, ran.wall_s, saved_units(out, "scored")


def resume_hint(stderr: str) -> list[str]:
    """The lines of stderr that say how to resume (name a rerun or resume)."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    return [ln for ln in lines if "resume" in ln.lower() or "rerun" in ln.lower()]


def measure(
    work: Workload,
    *,
    kills: int = 10,
    latency: float = 0.02,
    seed: int = 0,
    folder: Path | None = None,
) -> list[Check]:
    rng = random.Random(seed)
    with (
        tempfile.TemporaryDirectory(dir=folder) as tmp,
        BenchServer(reply=reply_function(), latency=latency) as srv,
    ):
        base = Path(tmp)
        ref = base / "ref"
        first_s, wall_s, units = startup_s(work, srv.base_url, ref, base / "ref.sqlite")
        out, env = base / "killed", child_env(base / "killed.sqlite")
        args = work.args(srv.base_url, out)
        landed: list[str] = []
        finished_early = 0
        shrink = 1.0  # narrows the window each time a run beats its kill
        while len(landed) < kills and finished_early < kills * 2:
            left = 1 - min(saved_units(out), units) / max(1, units) / 2
            left -= min(saved_units(out, "scored"), units) / max(1, units) / 2
            span = first_s + (wall_s - first_s) * max(left, 0.05)
            moment = rng.uniform(0.3 * first_s, span) * shrink
            started = time.perf_counter()
            proc = start_cli(args, env)
            if wait_for(lambda: proc.poll() is not None, moment):  # noqa: B023
                # it finished first: start the chain again from an empty folder and cache
                finished_early += 1
                shrink *= 0.7
                finish(proc, started)
                shutil.rmtree(out, ignore_errors=True)
                Path(env["DIALOGBENCH_CACHE"]).unlink(missing_ok=True)
                continue
            before = saved_units(out), saved_units(out, "scored")
            proc.send_signal(signal.SIGKILL)
            finish(proc, started)
            landed.append(f"{moment:.2f}s@{before[0]}/{before[1]}")
        last = run_cli(args, env)
        killed = compare(ref, out, last)

        # SIGINT: interrupt once some units are saved, then resume
        out2, env2 = base / "interrupted", child_env(base / "interrupted.sqlite")
        args2 = work.args(srv.base_url, out2)
        started = time.perf_counter()
        proc = start_cli(args2, env2)
        wait_for(lambda: saved_units(out2) >= max(1, units // 4) or proc.poll() is not None, 600)
        was_running = proc.poll() is None
        sent = time.perf_counter()
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(15)
            exited = True
        except subprocess.TimeoutExpired:
            exited = False
        exit_s = time.perf_counter() - sent
        ran = finish(proc, started, timeout_s=5)
        resumed = run_cli(args2, env2)
        after_int = compare(ref, out2, resumed)

    hints = resume_hint(ran.stderr)
    traceback = "Traceback" in ran.stderr or "Traceback" in ran.stdout
    tail = ran.stderr.strip().splitlines()[-1:] if ran.stderr.strip() else ["(nothing)"]
    return [
        Check("units (rows) in the answer key", f"{killed.units} ({killed.rows} rows)"),
        Check("answer key: to first saved unit / wall (s)", f"{first_s:.1f} / {wall_s:.1f}"),
        Check(
            "SIGKILLs landed",
            str(len(landed)),
            str(kills),
            len(landed) >= kills,
            " ".join(landed[:12]) + (" ..." if len(landed) > 12 else ""),
        ),
        Check("runs that finished before their kill (chain restarted)", str(finished_early)),
        Check("final rerun exit code", str(last.rc), "0", last.rc == 0),
        Check(
            "after kills: items, summary identical",
            identical(killed),
            "yes",
            all(killed.identical.values()),
        ),
        Check(
            "after kills: units lost / wrong",
            f"{killed.lost} / {killed.wrong}",
            "0 / 0",
            killed.lost == 0 and killed.wrong == 0,
        ),
        Check(
            "SIGINT: run was mid-work when sent", "yes" if was_running else "no", "yes", was_running
        ),
        Check("SIGINT: exited within 15 s", f"{exit_s:.1f}s (exit {ran.rc})", "yes", exited),
        Check(
            "SIGINT: no traceback", "none" if not traceback else "traceback", "none", not traceback
        ),
        Check(
            "SIGINT: one line saying how to resume",
            str(len(hints)),
            "1",
            len(hints) == 1,
            (hints[0] if hints else tail[0])[:100],
            needs="the SIGINT resume message",
        ),
        Check(
            "SIGINT then resume: items, summary identical",
            identical(after_int),
            "yes",
            all(after_int.identical.values()) and resumed.rc == 0,
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--items", type=int, default=600, help="rows (2 per question)")
    ap.add_argument("--dataset", default="locomo")
    ap.add_argument("--latency", type=float, default=0.02, help="server seconds per request")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    work = Workload(dataset=a.dataset, items=a.items)
    checks = measure(work, kills=a.kills, latency=a.latency, seed=a.seed)
    return report(f"kills: {a.kills} SIGKILLs, then SIGINT, on {work.track} {work.dataset}", checks)


if __name__ == "__main__":
    sys.exit(main())
