"""Fuzz every loader, the importer (as configured, and as `--dry-run` proposes) and
`data validate` with mutated copies of small seeds.

Each target runs `DIALOGBENCH_FUZZ_EXAMPLES` inputs (default 40: 600 in all, about fifteen
seconds); benchmarks/fuzz_loaders.py runs as many as asked and counts the outcomes.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from dialogbench.testing.fuzz import Target, encode, mutated, outcome, targets, write

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
EXAMPLES = int(os.environ.get("DIALOGBENCH_FUZZ_EXAMPLES", "40"))


@pytest.mark.parametrize("target", targets(FIXTURES), ids=lambda t: t.name)
def test_mutated_input_is_data_or_a_clean_error(target: Target) -> None:
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,  # the same inputs every run; benchmarks/fuzz_loaders.py explores
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(files=mutated(target))
    def check(files: dict[str, bytes]) -> None:
        root = Path(tempfile.mkdtemp(prefix=f"fuzz-{target.name}-"))
        try:
            write(root, files)
            outcome(target, root)
        finally:
            shutil.rmtree(root, ignore_errors=True)

    check()


def test_every_seed_is_accepted_unmutated(tmp_path: Path) -> None:
    for target in targets(FIXTURES):
        write(tmp_path / target.name, encode(target.files))
        assert outcome(target, tmp_path / target.name) == "accepted", target.name
