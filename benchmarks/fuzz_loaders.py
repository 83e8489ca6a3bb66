"""Fuzz every loader, the importer and `data validate` with mutated copies of small seeds.

    PYTHONPATH=src .venv/bin/python benchmarks/fuzz_loaders.py --examples 10000 [--seed 0]

Runs `--examples` generated inputs in all, shared evenly over the targets of
`dialogbench.testing.fuzz`, and prints per target how many were accepted as data, how
many were clean `DataError`s, how many of those name neither a record nor a field, and
how many raised anything else (each listed with its traceback's last line and the
mutated files kept under --keep). Exits 1 if any input was not read cleanly.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, seed, settings

from dialogbench.data.errors import DataError
from dialogbench.testing.fuzz import Target, mutated, outcome, targets, write

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures"


def fuzz(target: Target, examples: int, rng_seed: int, keep: Path, tally: Counter[str]) -> None:
    """Run `examples` mutated copies of `target`, counting outcomes into `tally`."""

    @seed(rng_seed)
    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        phases=(Phase.generate,),
        suppress_health_check=list(HealthCheck),
    )
    @given(files=mutated(target))
    def run(files: dict[str, bytes]) -> None:
        root = Path(tempfile.mkdtemp(prefix=f"fuzz-{target.name}-"))
        try:
            write(root, files)
            try:
                result = outcome(target, root)
            except DataError:  # pragma: no cover - outcome returns clean errors
                raise
            except Exception as e:
                tally["uncaught"] += 1
                where = keep / f"{target.name}-{tally['uncaught']}"
                shutil.copytree(root, where)
                last = traceback.format_exception(e)[-1].strip()
                print(f"  UNCAUGHT {target.name}: {last[:300]} (input kept in {where})")
                return
            tally[result] += 1
            if result == "error":
                try:
                    target.read(root)
                except DataError as e:
                    if e.record is None and e.field is None:
                        tally["error naming no record or field"] += 1
        finally:
            shutil.rmtree(root, ignore_errors=True)
            tally["inputs"] += 1

    run()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=10_000, help="inputs in all")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", type=Path, default=Path("fuzz-failures"))
    parser.add_argument("--only", default="", help="comma-separated target names")
    args = parser.parse_args()
    chosen = [t for t in targets(FIXTURES) if not args.only or t.name in args.only.split(",")]
    per = max(1, -(-args.examples // len(chosen)))
    total: Counter[str] = Counter()
    start = time.perf_counter()
    print(f"{per} inputs for each of {len(chosen)} targets")
    for target in chosen:
        tally: Counter[str] = Counter()
        t0 = time.perf_counter()
        fuzz(target, per, args.seed, args.keep, tally)
        total.update(tally)
        print(
            f"{target.name:22} {tally['inputs']:6} inputs: {tally['accepted']:5} accepted, "
            f"{tally['error']:5} clean errors ({tally['error naming no record or field']} "
            f"naming no record or field), {tally['uncaught']} uncaught "
            f"[{time.perf_counter() - t0:.0f} s]"
        )
    print(
        f"TOTAL {total['inputs']} inputs: {total['accepted']} accepted, {total['error']} clean "
        f"errors ({total['error naming no record or field']} naming no record or field), "
        f"{total['uncaught']} uncaught, in {time.perf_counter() - start:.0f} s"
    )
    return 1 if total["uncaught"] else 0


if __name__ == "__main__":
    sys.exit(main())
