"""Whether a chat item's labels agree with each other and with where its references sit.

A chat item may carry the derivation's labels (docs/build.md): the `rule` that decided it,
its `locus` and `tier`, and the two readings. Each has a definition in terms of the
references (`reference_ids`, the verified messages) and the probe:

    a reference is far        it lies more than RECENT_WINDOW messages before the probe
    locus none                no reference
    locus recent              references, none far
    locus session             a far one, every far one in the probe's session
    locus distant             a far one in an earlier session
    needs_memory              a far reference (locus session or distant)
    needs_memory_strict       implies needs_memory and dependent

A tier named like a locus (none, recent, session, distant) must be that locus; other tiers
are the data's own words and are not checked. Where messages carry no session, session
and distant cannot be told apart and either is accepted. `check_labels` returns the first
disagreement as (field, what is wrong, how to fix it), for the loader to raise.
"""

from __future__ import annotations

from collections.abc import Mapping

from dialogbench.data.model import RECENT_WINDOW, ChatItem, Locus

RULE_IDS: tuple[str, ...] = tuple(f"R{n:02d}" for n in range(1, 20))
"""The numbered rules of the derivation (`dialogbench.build.rules.RULES` holds each)."""

LOCI: tuple[Locus, ...] = ("none", "recent", "session", "distant")

Problem = tuple[str, str, str]
"""(field, what is wrong, how to fix it)."""


def loci_of(
    item: ChatItem,
    probe_at: int,
    positions: Mapping[str, int],
    sessions: Mapping[str, str | None],
) -> set[Locus]:
    """The loci the item's references allow: one, or {session, distant} when a far
    reference has no session to compare."""
    far = [r for r in item.reference_ids if probe_at - positions[r] > RECENT_WINDOW]
    if not item.reference_ids:
        return {"none"}
    if not far:
        return {"recent"}
    here = sessions.get(item.probe_id)
    if here is None or any(sessions.get(r) is None for r in far):
        return {"session", "distant"}
    return {"distant"} if any(sessions[r] != here for r in far) else {"session"}


def check_labels(
    item: ChatItem,
    probe_at: int,
    positions: Mapping[str, int],
    sessions: Mapping[str, str | None],
) -> Problem | None:
    """The first of the item's labels that contradicts the definitions above, or None.
    Every reference id must already be known to lie before the probe."""
    if item.rule is not None and item.rule not in RULE_IDS:
        return (
            "rule",
            f"'{item.rule}' is not a rule of the derivation ({RULE_IDS[0]}..{RULE_IDS[-1]})",
            "give the id of the rule that decided the item, or leave 'rule' out",
        )
    allowed = loci_of(item, probe_at, positions, sessions)
    where = " or ".join(sorted(allowed))
    refs = f"its references ({len(item.reference_ids)}) put it at {where}"
    if item.locus is not None and item.locus not in allowed:
        return ("locus", f"is '{item.locus}', but {refs}", f"set 'locus' to {where}")
    if item.tier in LOCI and item.tier not in allowed:
        return ("tier", f"is '{item.tier}', but {refs}", f"set 'tier' to {where}")
    far = bool(allowed & {"session", "distant"})
    if item.needs_memory is not None and item.needs_memory != far:
        says = "no reference lies" if not far else "a reference lies"
        return (
            "needs_memory",
            f"is {str(item.needs_memory).lower()}, but {says} more than {RECENT_WINDOW} "
            "messages before the probe",
            f"set 'needs_memory' to {str(far).lower()}, or correct 'reference_ids'",
        )
    if item.needs_memory_strict and item.dependent is False:
        return (
            "needs_memory_strict",
            "is true while dependent is false; the strict reading needs a reply that "
            "depends on its references",
            "set 'dependent' to true or 'needs_memory_strict' to false",
        )
    return None
