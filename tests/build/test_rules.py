"""Stage C's rules: each of the nineteen fires on a case made for it, the first that applies
decides, and every decision keeps the readings consistent (strict implies recorded)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dialogbench.build.rules import KINDS, RULE_IDS, RULES, Case, classify, explain
from dialogbench.data.model import RECENT_WINDOW

FAR, NEAR = RECENT_WINDOW + 5, 2


def case(
    kind: str = "continuation",
    refs: tuple[tuple[int, bool, bool], ...] = (),
    *,
    first: bool = False,
    opener: bool = False,
    proposed: int | None = None,
) -> Case:
    """refs: (messages back, in an earlier session, needed) per verified reference."""
    return Case(
        first=first,
        opener=opener,
        kind=kind,  # type: ignore[arg-type]
        proposed=len(refs) if proposed is None else proposed,
        distances=tuple(r[0] for r in refs),
        earlier_session=tuple(r[1] for r in refs),
        needed=tuple(r[2] for r in refs),
    )


# One case per rule: (rule, case, tier, recorded, strict, dependent)
CASES = [
    ("R01", case("none", first=True, opener=True), "none", False, False, False),
    ("R02", case("back-reference", opener=True, proposed=2), "none", False, False, False),
    ("R03", case("none"), "none", False, False, False),
    ("R04", case("back-reference"), "none", False, False, False),
    ("R05", case("back-reference", proposed=3), "none", False, False, False),
    ("R06", case("answer", ((1, False, False),)), "recent", False, False, True),
    ("R07", case("correction", ((NEAR, False, False),)), "recent", False, False, True),
    ("R08", case("continuation", ((NEAR, False, True),)), "recent", False, False, True),
    ("R09", case("continuation", ((NEAR, False, False),)), "recent", False, False, False),
    ("R10", case("continuation", ((FAR, False, True),)), "session", True, True, True),
    ("R11", case("continuation", ((FAR, False, False),)), "session", True, False, False),
    ("R12", case("back-reference", ((FAR, True, True),), opener=True), "distant", True, True, True),
    (
        "R13",
        case("continuation", ((FAR, True, False), (1, False, True))),
        "distant",
        True,
        False,
        True,
    ),
    ("R14", case("update", ((FAR, True, True),)), "distant", True, True, True),
    ("R15", case("correction", ((FAR, True, False),)), "distant", True, False, False),
    ("R16", case("back-reference", ((FAR, True, True),)), "distant", True, True, True),
    ("R17", case("back-reference", ((FAR, True, False),)), "distant", True, False, False),
    ("R18", case("continuation", ((FAR, True, True),)), "distant", True, True, True),
    ("R19", case("answer", ((FAR, True, False),)), "distant", True, False, False),
]


def test_nineteen_numbered_rules() -> None:
    assert tuple(f"R{i:02d}" for i in range(1, 20)) == RULE_IDS
    assert [c[0] for c in CASES] == list(RULE_IDS)
    assert len({r.name for r in RULES}) == 19


@pytest.mark.parametrize(("rule_id", "c", "tier", "recorded", "strict", "dependent"), CASES)
def test_each_rule_fires_on_its_case(
    rule_id: str, c: Case, tier: str, recorded: bool, strict: bool, dependent: bool
) -> None:
    rule, d = classify(c)
    assert rule.id == rule_id
    assert (d.tier, d.needs_memory, d.needs_memory_strict, d.dependent) == (
        tier,
        recorded,
        strict,
        dependent,
    )
    assert d.locus == c.locus
    assert rule_id in explain(rule, c)


def test_locus_follows_the_recent_window_and_sessions() -> None:
    assert case("none").locus == "none"
    assert case(refs=((RECENT_WINDOW, True, False),)).locus == "recent"  # 8 back: recent
    assert case(refs=((RECENT_WINDOW + 1, False, False),)).locus == "session"
    assert case(refs=((RECENT_WINDOW + 1, True, False),)).locus == "distant"
    with pytest.raises(ValueError, match="one length"):
        Case(False, False, "none", 1, (3,), (), ())


refs = st.lists(st.tuples(st.integers(1, 40), st.booleans(), st.booleans()), min_size=0, max_size=4)


@given(
    kind=st.sampled_from(KINDS),
    found=refs,
    first=st.booleans(),
    opener=st.booleans(),
    extra=st.integers(0, 3),
)
def test_every_case_gets_one_consistent_decision(
    kind: str, found: list[tuple[int, bool, bool]], first: bool, opener: bool, extra: int
) -> None:
    c = case(kind, tuple(found), first=first, opener=opener, proposed=len(found) + extra)
    rule, d = classify(c)
    applying = [r.id for r in RULES if r.applies(c)]
    assert applying[0] == rule.id  # the first rule that applies decides
    assert not d.needs_memory_strict or d.needs_memory
    if not first:
        assert d.locus == c.locus
        assert d.needs_memory == (c.locus in ("session", "distant"))
    if d.needs_memory_strict:
        assert c.needs_far


def test_docs_table_lists_the_rules_as_written() -> None:
    doc = (Path(__file__).parents[2] / "docs" / "build.md").read_text(encoding="utf-8")
    for r in RULES:
        assert f"| {r.id} | {r.name} | {r.when} | {r.decides} |" in doc
