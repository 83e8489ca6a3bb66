"""The shared evidence repair: LoCoMo D-ids and other exports' ids, repairs and drops."""

from __future__ import annotations

import pytest

from dialogbench.data.evidence import repair_evidence

D_IDS = {f"D{s}:{t}" for s in (1, 5, 12, 30) for t in range(1, 8)}
T_IDS = {"t0", "t1", "t2", "t12", "msg 1"}


@pytest.mark.parametrize(
    ("items", "ids", "expected"),
    [
        (["D12:3-D12:5"], D_IDS, ["D12:3", "D12:4", "D12:5"]),
        (["D12:3 - 5"], D_IDS, ["D12:3", "D12:4", "D12:5"]),
        (["D5:3."], D_IDS, ["D5:3"]),
        (["D30:05"], D_IDS, ["D30:5"]),
        (["D1:1; D1:2", "D1:3,D1:4 D1:5"], D_IDS, ["D1:1", "D1:2", "D1:3", "D1:4", "D1:5"]),
        (["t12."], T_IDS, ["t12"]),
        (["t1; t2"], T_IDS, ["t1", "t2"]),
        (["t0-t2"], T_IDS, ["t0", "t1", "t2"]),
        (["(t1)", "t01"], T_IDS, ["t1"]),
    ],
)
def test_repairs_unambiguous_forms(items: list[str], ids: set[str], expected: list[str]) -> None:
    evidence = repair_evidence(items, ids)
    assert evidence.ids == expected and evidence.dropped == []
    assert all("repaired to" in note for note in evidence.notes)


def test_exact_ids_are_kept_as_they_are() -> None:
    evidence = repair_evidence(["msg 1", "t1", "t1"], T_IDS)
    assert evidence.ids == ["msg 1", "t1"] and evidence.notes == []


def test_drops_are_named() -> None:
    evidence = repair_evidence(["D1:1", "D9:9", "D", "", "D12:3-D12:9", "D1:2 D:4"], D_IDS)
    assert evidence.ids == ["D1:1", "D1:2"]
    assert evidence.dropped == ["D9:9", "D", "", "D12:3-D12:9", "D:4"]
    assert evidence.notes == [
        "evidence id 'D9:9' names no message; dropped",
        "evidence id 'D' is malformed; dropped",
        "evidence id '' is empty; dropped",
        "evidence range 'D12:3-D12:9' names missing messages; dropped",
        "evidence id 'D:4' is malformed; dropped",
        "evidence id 'D1:2 D:4' repaired to ['D1:2']",
    ]


def test_other_ids_are_never_malformed() -> None:
    evidence = repair_evidence(["t9"], T_IDS)
    assert evidence.ids == [] and evidence.dropped == ["t9"]
    assert evidence.warnings("q1") == [
        "q1: evidence id 't9' names no message; dropped",
        "q1: no usable evidence; the question cannot be a retrieval probe",
    ]


def test_ambiguous_leading_zeros_are_not_repaired() -> None:
    assert repair_evidence(["t01"], {"t1", "t001"}).ids == []
