"""Injected faults: a judged run with 20% of its requests faulted, against the fault-free run.

    python benchmarks/reliability_faults.py [--items 600] [--rate 0.2] [--dataset locomo]
        [--latency 0.02] [--timeout 30] [--resumes 3] [--seed 0] [--kinds 429,hang,...]

One loopback server (`golden_reply`, a pure function of the request) answers two runs of
`dialogbench run questions` (full and retrieval, so items = 2 x questions), each with its
own response cache: first fault-free (the answer key), then with `--rate` of the requests
faulted (seeded draws), the kinds in turn: 429 and 503 with Retry-After, 500, a dropped
connection, a hang (a reply 3 s later than `--timeout`, by default the CLI's own 30 s;
only where the CLI has `--timeout`), truncated JSON, HTTP 200 with an HTML page, and an
empty completion (`--kinds` injects only some of them, to see what each costs). Every unit of the
answer key must come back equal, or be counted by the run as failed with its cause; none
lost, none wrong. The faulted run's cache must hold no entry the fault-free run would not
have stored. Then the faulted command is rerun (faults still on) until it exits 0, at most
`--resumes` times, and its items.jsonl and summary.json must be the answer key's bytes.
Wall time of the first faulted pass against the fault-free run: target at most 2x. The
hedged duplicate requests the faulted run sent (usage.json's `hedged_requests`) are shown.

Exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.reliability_common import (
    BenchServer,
    Check,
    Ran,
    Workload,
    cached_errors,
    child_env,
    compare,
    html,
    reply_function,
    report,
    run_cli,
)

from dialogbench.models.spec import DEFAULT_TIMEOUT_S
from dialogbench.testing.chatserver import Body, Fault, delay, drop, empty, malformed, status

EMPTY_RETRY = "an empty completion retried, not accepted and cached"
KINDS = ("429", "503", "500", "drop", "hang", "truncated", "html", "empty")


@dataclass
class FaultPlan:
    """The server's `rules`: while `active`, each request is faulted with probability
    `rate` (seeded; requests are numbered in order of arrival, so a retry draws afresh),
    the faults taking the `kinds` in turn."""

    rate: float
    kinds: tuple[str, ...]
    hang_s: float
    retry_after: float = 1.0
    seed: int = 0
    active: bool = False
    injected: Counter[str] = field(default_factory=Counter)
    requests: int = 0

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self._lock = threading.Lock()

    def __call__(self, number: int, body: Body) -> Fault | None:
        with self._lock:
            if not self.active:
                return None
            self.requests += 1
            if self._rng.random() >= self.rate:
                return None
            kind = self.kinds[sum(self.injected.values()) % len(self.kinds)]
            self.injected[kind] += 1
        return self.fault(kind)

    def fault(self, kind: str) -> Fault:
        return {
            "429": lambda: status(429, retry_after=self.retry_after),
            "503": lambda: status(503, retry_after=self.retry_after),
            "500": lambda: status(500),
            "drop": drop,
            "hang": lambda: delay(self.hang_s),
            "truncated": lambda: malformed("not_json"),
            "html": html,
            "empty": empty,
        }[kind]()


def measure(
    work: Workload,
    *,
    rate: float = 0.2,
    latency: float = 0.02,
    timeout: float = DEFAULT_TIMEOUT_S,
    resumes: int = 3,
    seed: int = 0,
    min_items: int = 500,
    max_ratio: float = 2.0,
    folder: Path | None = None,
    only: tuple[str, ...] = KINDS,
) -> list[Check]:
    """Run the benchmark; the checks it prints (`only`: the fault kinds injected)."""
    hangs = work.supports_timeout()
    kinds = tuple(k for k in only if hangs or k != "hang")
    plan = FaultPlan(rate, kinds, hang_s=timeout + 3, seed=seed)
    with (
        tempfile.TemporaryDirectory(dir=folder) as tmp,
        BenchServer(reply=reply_function(), latency=latency, rules=plan) as srv,
    ):
        base = Path(tmp)
        ref_out, out = base / "ref", base / "faulted"
        ref_env = child_env(base / "ref.sqlite")
        env = child_env(base / "faulted.sqlite")
        ref = run_cli(work.args(srv.base_url, ref_out, timeout=timeout), ref_env)
        if ref.rc != 0:
            raise RuntimeError(f"the fault-free run exited {ref.rc}:\n{ref.stderr[-3000:]}")
        plan.active = True
        args = work.args(srv.base_url, out, timeout=timeout)
        first = run_cli(args, env)
        requests, injected = plan.requests, Counter(plan.injected)
        hedged = hedged_requests(out)
        cmp = compare(ref_out, out, first)
        differ, extra = cached_errors(base / "ref.sqlite", base / "faulted.sqlite")
        runs: list[Ran] = [first]
        while runs[-1].rc != 0 and len(runs) <= resumes:
            runs.append(run_cli(args, env))
        final = compare(ref_out, out, runs[-1])
        differ2, extra2 = cached_errors(base / "ref.sqlite", base / "faulted.sqlite")

    failed_lines = "; ".join(first.failure_lines) or "none"
    expected_rc = 3 if (cmp.failed_total or first.failure_lines) else 0
    ratio = first.wall_s / ref.wall_s
    by_kind = ", ".join(f"{k} {injected[k]}" for k in kinds)
    checks = [
        Check(
            "items (rows) in the run",
            f"{cmp.rows} ({cmp.units} units)",
            f">= {min_items}",
            cmp.rows >= min_items,
        ),
        Check("requests while faulted", str(requests)),
        Check(
            "hedged requests (usage.json)",
            str(hedged),
            "",
            None,
            f"{hedged / max(1, requests):.1%} of the requests",
        ),
        Check(
            "faults injected",
            f"{sum(injected.values())} ({sum(injected.values()) / max(1, requests):.1%})",
            f"~{rate:.0%}",
            None,
            by_kind,
        ),
        Check(
            "every fault kind injected",
            f"{sum(1 for k in kinds if injected[k])}/{len(only)}",
            f"{len(only)}/{len(only)}",
            len(kinds) == len(only) and all(injected[k] for k in kinds),
            "" if hangs or "hang" not in only else "no hangs: this CLI has no --timeout",
            needs="" if hangs else "--timeout",
        ),
        Check("units equal to the fault-free run", str(cmp.scored)),
        Check(
            "units failed, with cause",
            str(cmp.failed_total),
            "",
            None,
            ", ".join(f"{k}: {v}" for k, v in cmp.failed.items()) or "-",
        ),
        Check("units lost", str(cmp.lost), "0", cmp.lost == 0),
        Check(
            "units wrong (differ, no failure)",
            str(cmp.wrong),
            "0",
            cmp.wrong == 0,
            ", ".join(cmp.wrong_examples),
            needs=EMPTY_RETRY,
        ),
        Check(
            "exit code (failures printed)",
            str(first.rc),
            str(expected_rc),
            first.rc == expected_rc,
            failed_lines,
        ),
        Check(
            "cache entries unlike the fault-free run's",
            str(differ),
            "0",
            differ == 0,
            needs=EMPTY_RETRY,
        ),
        Check(
            "cache entries the fault-free run never made",
            str(extra),
            "0",
            extra == 0,
            needs=EMPTY_RETRY,
        ),
        Check("wall: fault-free / faulted (s)", f"{ref.wall_s:.1f} / {first.wall_s:.1f}"),
        Check("wall ratio", f"{ratio:.2f}x", f"<= {max_ratio:g}x", ratio <= max_ratio, timed=True),
        Check(
            "reruns to exit 0",
            str(len(runs) - 1),
            f"<= {resumes}",
            runs[-1].rc == 0,
            f"last exit {runs[-1].rc}",
        ),
        Check(
            "after reruns: items, summary identical",
            ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in final.identical.items()),
            "yes",
            all(final.identical.values()),
            needs=EMPTY_RETRY,
        ),
        Check("after reruns: cache unlike / never made", f"{differ2} / {extra2}"),
    ]
    return checks


def hedged_requests(out: Path) -> int:
    """usage.json's `hedged_requests` in all (0 when the run wrote none)."""
    try:
        total = json.loads((out / "usage.json").read_text(encoding="utf-8"))["total"]
    except (OSError, ValueError, KeyError):
        return 0
    return int(total.get("hedged_requests", 0))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--items", type=int, default=600, help="rows (2 per question)")
    ap.add_argument("--dataset", default="locomo")
    ap.add_argument("--rate", type=float, default=0.2)
    ap.add_argument("--latency", type=float, default=0.02, help="server seconds per request")
    ap.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        help="per-request timeout passed on (default: the CLI's own); hangs last 3 s longer",
    )
    ap.add_argument(
        "--kinds", default=",".join(KINDS), help=f"fault kinds injected (of {','.join(KINDS)})"
    )
    ap.add_argument("--resumes", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--min-items", type=int, default=500)
    a = ap.parse_args(argv)
    only = tuple(k for k in KINDS if k in a.kinds.split(","))
    if not only or set(a.kinds.split(",")) - set(KINDS):
        ap.error(f"--kinds: a comma-separated list of {','.join(KINDS)}")
    work = Workload(dataset=a.dataset, items=a.items)
    checks = measure(
        work,
        rate=a.rate,
        latency=a.latency,
        timeout=a.timeout,
        resumes=a.resumes,
        seed=a.seed,
        min_items=a.min_items,
        only=only,
    )
    return report(f"faults: {a.rate:.0%} of requests on {work.track} {work.dataset}", checks)


if __name__ == "__main__":
    sys.exit(main())
