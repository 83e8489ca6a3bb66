"""The built-in sample's chat ground truth, profile and persona are the builder's own output:
rebuilding them with `make_sample.py`'s scripted model reproduces the committed files."""

from __future__ import annotations

from pathlib import Path

import pytest

from dialogbench.build import RULE_IDS

from .make_sample import SAMPLE, WRITTEN, build_sample


def test_the_committed_sample_is_what_the_builder_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    report = build_sample(tmp_path / "built")
    subjects = sorted(p.name for p in SAMPLE.iterdir() if p.is_dir())
    assert subjects == ["maya", "tomas"]
    for sid in subjects:
        for name in WRITTEN:
            built = (tmp_path / "built" / sid / name).read_bytes()
            assert built == (SAMPLE / sid / name).read_bytes(), (
                f"{sid}/{name} differs from the builder's output: rerun tests/build/make_sample.py"
            )
    assert set(report["rules"]) == set(RULE_IDS) and all(report["rules"].values())
    assert "census" not in report and "reread" not in report  # neither pass is on
    prop = report["readings"]["proportional"]
    assert 0 < prop["strict"] < prop["recorded"] < prop["items"] / 10  # memory is rare
