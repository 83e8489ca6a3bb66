"""Regenerate the golden fixtures: `python -m tests.golden.regen [CASE ...]` from the repo root
(or `python tests/golden/regen.py`), with DIALOGBENCH_DATA pointing at the public corpora.

Each case runs twice, each time into a fresh folder with a fresh response cache; the two
runs must write byte-identical result files, or nothing is stored for that case. Then
`tests/golden/fixtures/<case>/` is replaced by the result files (manifest.json, usage.json
and parts/ left out; files over 64 KiB gzipped). A case whose corpus is missing is skipped
and its old fixture kept. Run it only after a change that is meant to move the figures, and
review the fixture diff (`git diff --stat tests/golden/fixtures`) before committing.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `golden` as the test sees it

from golden.cases import BY_NAME, CASES, FIXTURES, Case, missing, result_files, run_case, store


def _run(case: Case, tmp: Path, n: int) -> dict[str, bytes]:
    code, output = run_case(case, tmp / f"out{n}", tmp / f"cache{n}.sqlite")
    if code != 0:
        raise SystemExit(f"{case.name}: exit code {code}\n{output}")
    return result_files(tmp / f"out{n}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", help=f"case names (default: all): {', '.join(BY_NAME)}")
    parser.add_argument("--once", action="store_true", help="skip the second, checking run")
    args = parser.parse_args(argv)
    unknown = [c for c in args.cases if c not in BY_NAME]
    if unknown:
        parser.error(f"unknown cases {unknown}; known: {', '.join(BY_NAME)}")
    chosen = [BY_NAME[c] for c in args.cases] if args.cases else list(CASES)
    unstable = []
    for case in chosen:
        why = missing(case)
        if why is not None:
            print(f"{case.name}: skipped ({why}); its fixture is kept")
            continue
        with tempfile.TemporaryDirectory(prefix=f"golden-{case.name}-") as tmp:
            start = time.perf_counter()
            first = _run(case, Path(tmp), 1)
            took = time.perf_counter() - start
            if not args.once:
                second = _run(case, Path(tmp), 2)
                differ = sorted(
                    k for k in first.keys() | second.keys() if first.get(k) != second.get(k)
                )
                if differ:
                    print(f"{case.name}: NOT STORED, two runs differ in {differ}")
                    unstable.append(case.name)
                    continue
        size = store(case, first)
        print(f"{case.name}: {len(first)} files, {size / 1024:.0f} KiB stored, {took:.1f} s")
    total = sum(p.stat().st_size for p in FIXTURES.rglob("*") if p.is_file())
    print(f"fixtures: {total / 1024:.0f} KiB in {FIXTURES}")
    return 1 if unstable else 0


if __name__ == "__main__":
    raise SystemExit(main())
