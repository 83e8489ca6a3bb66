"""Stage C's fixed rule set: nineteen numbered rules that decide an item's tier, locus and
both readings from what the earlier stages established.

Each rule is a small pure function of a `Case`: the verified references (how many messages
back each lies, whether it lies in an earlier session), the session structure (is the probe
the first message, a session opener), stage A's answers (how the probe points back, how
many referents it proposed) and stage C's answer (which verified messages a correct reply
needs). The rules are tried in order and the first that applies decides; the item records
its id (`R01` ... `R19`). The table in docs/build.md is generated from `RULES`' texts.

Where the references sit (`locus`):

    none      nothing verified
    recent    every verified reference lies within RECENT_WINDOW messages of the probe
    session   one lies further back, all of those in the probe's own session
    distant   one lies further back in an earlier session

The readings: *recorded* memory need (a verified reference lies outside the recent
thread: locus session or distant) and *strict* (a reference outside the recent thread is
one the reply needs). `dependent`: the reply needs some verified message.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from dialogbench.data.model import RECENT_WINDOW, Locus

Kind = Literal["none", "answer", "continuation", "back-reference", "update", "correction", "absent"]
"""Stage A's answer to "how does the probe point back?":

    none            it does not: the probe is complete on its own
    answer          it answers or reacts to the other party's last turn
    continuation    it carries on a topic already under way
    back-reference  it recalls a particular earlier event, statement or plan
    update          it changes or follows up on something stated earlier (a plan, a fact)
    correction      it corrects something said earlier
    absent          it points at something that is not in the record
"""
KINDS: tuple[Kind, ...] = (
    "none",
    "answer",
    "continuation",
    "back-reference",
    "update",
    "correction",
    "absent",
)


@dataclass(frozen=True)
class Case:
    """What the rules read about one probe."""

    first: bool
    """The probe is the first message of the conversation: nothing lies before it."""
    opener: bool
    """The probe is the person's first message of its session."""
    kind: Kind
    """Stage A: how the probe points back."""
    proposed: int
    """Stage A: referents proposed that exist before the probe."""
    distances: tuple[int, ...] = ()
    """Each verified reference: how many messages before the probe it lies (1 = the last)."""
    earlier_session: tuple[bool, ...] = ()
    """Each verified reference: it lies in an earlier session than the probe."""
    needed: tuple[bool, ...] = ()
    """Stage C, for each verified reference: a correct reply needs it."""

    def __post_init__(self) -> None:
        n = len(self.distances)
        if len(self.earlier_session) != n or len(self.needed) != n:
            raise ValueError("distances, earlier_session and needed must be of one length")
        if any(d < 1 for d in self.distances):
            raise ValueError("a reference lies at least 1 message before the probe")

    @property
    def verified(self) -> int:
        return len(self.distances)

    def far(self, i: int) -> bool:
        """Reference `i` lies outside the recent thread."""
        return self.distances[i] > RECENT_WINDOW

    @property
    def locus(self) -> Locus:
        if not self.distances:
            return "none"
        far = [i for i in range(self.verified) if self.far(i)]
        if not far:
            return "recent"
        return "distant" if any(self.earlier_session[i] for i in far) else "session"

    @property
    def mixed(self) -> bool:
        """Verified references both within and outside the recent thread."""
        return self.locus in ("session", "distant") and min(self.distances) <= RECENT_WINDOW

    @property
    def needs_any(self) -> bool:
        """The reply needs some verified message."""
        return any(self.needed)

    @property
    def needs_far(self) -> bool:
        """The reply needs a verified message outside the recent thread."""
        return any(n and self.far(i) for i, n in enumerate(self.needed))


@dataclass(frozen=True)
class Decision:
    """What a rule decides."""

    tier: str
    locus: Locus
    needs_memory: bool
    """The recorded reading."""
    needs_memory_strict: bool
    """The strict reading (true only where `needs_memory` is)."""
    dependent: bool


@dataclass(frozen=True)
class Rule:
    """One numbered rule: when it applies and what it decides."""

    id: str
    name: str
    when: str
    """When it applies, in words (docs/build.md's table)."""
    decides: str
    """What it decides, in words."""
    applies: Callable[[Case], bool]
    decide: Callable[[Case], Decision]


def _none(c: Case) -> Decision:
    return Decision("none", "none", False, False, False)


def _recent(dependent: bool | None) -> Callable[[Case], Decision]:
    def decide(c: Case) -> Decision:
        dep = c.needs_any if dependent is None else dependent
        return Decision("recent", "recent", False, False, dep)

    return decide


def _memory(strict: bool | None) -> Callable[[Case], Decision]:
    """Locus session or distant: the recorded reading holds; strict as given, or (None)
    whenever the reply needs a reference outside the recent thread."""

    def decide(c: Case) -> Decision:
        s = c.needs_far if strict is None else strict
        return Decision(c.locus, c.locus, True, s, c.needs_any)

    return decide


def _at(locus: Locus) -> Callable[[Case], bool]:
    return lambda c: c.locus == locus


RULES: tuple[Rule, ...] = (
    Rule(
        "R01",
        "first message",
        "the probe is the first message of the conversation",
        "none: nothing earlier exists",
        lambda c: c.first,
        _none,
    ),
    Rule(
        "R02",
        "cold open",
        "the probe opens a session and nothing was verified",
        "none: a session opener needs nothing earlier",
        lambda c: c.opener and c.verified == 0,
        _none,
    ),
    Rule(
        "R03",
        "self-contained",
        "stage A found no pointer back and proposed nothing",
        "none",
        lambda c: c.kind == "none" and c.proposed == 0,
        _none,
    ),
    Rule(
        "R04",
        "referent absent",
        "stage A found a pointer back but no message of the record it points at",
        "none: what it points at was never recorded",
        lambda c: c.proposed == 0,
        _none,
    ),
    Rule(
        "R05",
        "nothing verified",
        "stage A proposed referents and stage B removed every one",
        "none: verification can only lower demand",
        lambda c: c.verified == 0,
        _none,
    ),
    Rule(
        "R06",
        "answer in the thread",
        "every verified reference is recent and the probe answers the last turn",
        "recent, dependent: an answer cannot be read without its question",
        lambda c: c.locus == "recent" and c.kind == "answer",
        _recent(True),
    ),
    Rule(
        "R07",
        "correction in the thread",
        "every verified reference is recent and the probe corrects something said",
        "recent, dependent",
        lambda c: c.locus == "recent" and c.kind == "correction",
        _recent(True),
    ),
    Rule(
        "R08",
        "recent, needed",
        "every verified reference is recent and the reply needs one of them",
        "recent, dependent",
        lambda c: c.locus == "recent" and c.needs_any,
        _recent(True),
    ),
    Rule(
        "R09",
        "recent, background",
        "every verified reference is recent and the reply needs none of them",
        "recent, not dependent",
        _at("recent"),
        _recent(False),
    ),
    Rule(
        "R10",
        "earlier in the session, needed",
        "a verified reference lies outside the recent thread in the probe's session and "
        "the reply needs such a reference",
        "session; recorded and strict",
        lambda c: c.locus == "session" and c.needs_far,
        _memory(True),
    ),
    Rule(
        "R11",
        "earlier in the session, background",
        "a verified reference lies outside the recent thread in the probe's session and "
        "the reply needs none outside it",
        "session; recorded, not strict",
        _at("session"),
        _memory(False),
    ),
    Rule(
        "R12",
        "opener resumes a thread",
        "the probe opens a session and a verified reference lies in an earlier session",
        "distant; recorded; strict when the reply needs a reference outside the thread",
        lambda c: c.locus == "distant" and c.opener,
        _memory(None),
    ),
    Rule(
        "R13",
        "distant context, recent need",
        "a verified reference lies in an earlier session, but the reply needs only "
        "references within the recent thread",
        "distant; recorded, not strict, dependent",
        lambda c: c.locus == "distant" and c.mixed and c.needs_any and not c.needs_far,
        _memory(False),
    ),
    Rule(
        "R14",
        "update of an earlier statement",
        "a verified reference lies in an earlier session and the probe updates or follows "
        "up on something stated there",
        "distant; recorded; strict when the reply needs a reference outside the thread",
        lambda c: c.locus == "distant" and c.kind == "update",
        _memory(None),
    ),
    Rule(
        "R15",
        "correction of an earlier statement",
        "a verified reference lies in an earlier session and the probe corrects something "
        "said there",
        "distant; recorded; strict when the reply needs a reference outside the thread",
        lambda c: c.locus == "distant" and c.kind == "correction",
        _memory(None),
    ),
    Rule(
        "R16",
        "recall, needed",
        "the probe recalls an event of an earlier session and the reply needs it",
        "distant; recorded and strict",
        lambda c: c.locus == "distant" and c.kind == "back-reference" and c.needs_far,
        _memory(True),
    ),
    Rule(
        "R17",
        "recall, background",
        "the probe recalls an event of an earlier session but the reply needs no "
        "reference outside the thread",
        "distant; recorded, not strict",
        lambda c: c.locus == "distant" and c.kind == "back-reference",
        _memory(False),
    ),
    Rule(
        "R18",
        "distant, needed",
        "any other probe with a verified reference in an earlier session that the reply needs",
        "distant; recorded and strict",
        lambda c: c.locus == "distant" and c.needs_far,
        _memory(True),
    ),
    Rule(
        "R19",
        "distant, background",
        "any other probe with a verified reference in an earlier session",
        "distant; recorded, not strict",
        _at("distant"),
        _memory(False),
    ),
)
RULE_IDS = tuple(r.id for r in RULES)
BY_ID = {r.id: r for r in RULES}


def classify(case: Case) -> tuple[Rule, Decision]:
    """The first rule that applies to `case`, and its decision."""
    for rule in RULES:
        if rule.applies(case):
            decision = rule.decide(case)
            if decision.needs_memory_strict and not decision.needs_memory:  # pragma: no cover
                raise AssertionError(f"{rule.id} decided strict without recorded")
            return rule, decision
    raise AssertionError("R19 or an earlier rule always applies")  # pragma: no cover


def explain(rule: Rule, case: Case) -> str:
    """One line for the classify stage's trace: the rule, its name and the facts it read."""
    if case.distances:
        where = ", ".join(
            f"{d} back{' (earlier session)' if e else ''}{' needed' if n else ''}"
            for d, e, n in zip(case.distances, case.earlier_session, case.needed, strict=True)
        )
        facts = f"verified references: {where}"
    else:
        facts = f"no verified reference ({case.proposed} proposed)"
    return f"rule {rule.id} ({rule.name}): {rule.when}; {facts}; decides {rule.decides}"
