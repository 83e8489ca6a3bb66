"""Secrets: the API key in any file a run writes, its stdout or its stderr.

    python benchmarks/reliability_secrets.py [--items 100] [--dataset locomo]
        [--key 'sk-test/ab+c=d%ef']

The key is put in the variable `--api-key-env` names (both roles). The loopback server
echoes the Authorization header's value into every reply and every error message, raw,
JSON-escaped (`\\/` for `/`) and URL-encoded, as a misbehaving server or proxy might, and
answers a share of the requests with an HTTP 500 or 400 carrying it, so that it reaches the
error paths (retries, failed calls, warnings) as well as the answers. Then every file under
the run folder (parts/ included), the response cache file (and its -wal / -shm), stdout and
stderr are searched for the three forms. Target: 0 hits.

Exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import threading
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.reliability_common import (
    KEY_ENV,
    BenchServer,
    Check,
    Workload,
    child_env,
    encodings,
    reply_function,
    report,
    run_cli,
)

from dialogbench.testing.chatserver import Body, Fault, status

KEY = "sk-test/ab+c=d%ef"
REDACT = "the key redacted from replies and error messages, in every form"
FORMS = ("raw", "JSON-escaped", "URL-encoded")


class ErrorRules:
    """A 500 (retried) for 10% of requests and a 400 (not retried) for 1%, seeded."""

    def __init__(self, seed: int = 0) -> None:
        self._rng = random.Random(seed)
        self._lock = threading.Lock()

    def __call__(self, number: int, body: Body) -> Fault | None:
        with self._lock:
            x = self._rng.random()
        if x < 0.01:
            return status(400, message="bad request")
        return status(500, message="upstream failed") if x < 0.11 else None


def scan(blobs: dict[str, bytes], key: str) -> dict[str, dict[str, int]]:
    """Place -> {form: occurrences} for every place holding one of the key's forms."""
    forms = dict(zip(FORMS, (f.encode() for f in encodings(key)), strict=True))
    hits: dict[str, dict[str, int]] = {}
    for place, data in blobs.items():
        found = {name: data.count(form) for name, form in forms.items() if form in data}
        if found:
            hits[place] = found
    return hits


def measure(
    work: Workload, *, key: str = KEY, seed: int = 0, folder: Path | None = None
) -> list[Check]:
    with (
        tempfile.TemporaryDirectory(dir=folder) as tmp,
        BenchServer(reply=reply_function(), echo_auth=True, rules=ErrorRules(seed)) as srv,
    ):
        base = Path(tmp)
        out, cache = base / "run", base / "cache.sqlite"
        ran = run_cli(work.args(srv.base_url, out), child_env(cache, {KEY_ENV: key}))
        requests = srv.request_count
        seen = srv.keys_seen.get(key, 0)
        blobs: dict[str, bytes] = {"stdout": ran.stdout.encode(), "stderr": ran.stderr.encode()}
        files = sorted(p for p in out.rglob("*") if p.is_file())
        files += sorted(p for p in base.glob("cache.sqlite*") if p.is_file())
        for p in files:
            blobs[str(p.relative_to(base))] = p.read_bytes()
        hits = scan(blobs, key)
    total = sum(sum(v.values()) for v in hits.values())
    by_form = {f: sum(v.get(f, 0) for v in hits.values()) for f in FORMS}
    where = "; ".join(
        f"{place}: " + ", ".join(f"{f} {n}" for f, n in found.items())
        for place, found in hits.items()
    )
    return [
        Check("run exit code", str(ran.rc), "", None, "3 expected: some calls get a 400"),
        Check("requests (each sent the key)", f"{requests} ({seen})"),
        Check("places scanned", f"{len(blobs)} ({len(files)} files, stdout, stderr)"),
        Check("key forms searched", ", ".join(FORMS)),
        *(Check(f"hits: {f}", str(n), "0", n == 0, needs=REDACT) for f, n in by_form.items()),
        Check("places with a hit", str(len(hits)), "0", not hits, where[:300], needs=REDACT),
        Check("hits in all", str(total), "0", total == 0, needs=REDACT),
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--items", type=int, default=100, help="rows (2 per question)")
    ap.add_argument("--dataset", default="locomo")
    ap.add_argument("--key", default=KEY)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    work = Workload(dataset=a.dataset, items=a.items)
    return report(
        f"secrets: key {a.key!r} on {work.track} {work.dataset}", measure(work, key=a.key)
    )


if __name__ == "__main__":
    sys.exit(main())
