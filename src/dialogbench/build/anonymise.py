"""Anonymisation for `build realcompanion`: identifiers replaced by consistent surrogates.

    find        person names and places: the model's identify pass (one call per chunk of
                messages, `realcompanion_prompts.IDENTIFY_TASK`), plus every speaker of a
                person's message; contact details: the regexes below (emails, URLs, phone
                numbers, handles)
    surrogates  per subject, seeded by the build's seed and the subject id: each original
                gets one surrogate of its kind, in order of first appearance, from a pool
                shuffled by that seed, never a word already in the subject's text; each
                word of a person's full name is an original too ("Leah Park" -> "Nora
                Varga", "Leah" -> "Nora", "Park" -> "Varga")
    replace     every text field of the subject (messages' text and speaker, the speakers,
                profile, persona, questions, chat items' reference replies and traces) and
                the subject id when it is a found name; a name matches whole words, in any
                letter case, and keeps the case it was written in (maya -> nora, MAYA ->
                NORA); longer originals first, so "Leah Park" is replaced before "Leah"

The mapping (original -> surrogate) is never written: a build recomputes it from the
identify stage's rows, which are kept in the run record only (`.build/parts/identify.jsonl`,
private). Shared files report counts by kind, never an original.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dialogbench.data.model import Subject

CONTACT_PATTERNS: dict[str, re.Pattern[str]] = {
    "email": re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"),
    "url": re.compile(r"\b(?:https?://|www\.)[^\s<>\"')\]]+", re.IGNORECASE),
    "phone": re.compile(r"(?<![\w+])\+?\d[\d ().-]{5,}\d(?!\w)"),
    "handle": re.compile(r"(?<![\w@])@[A-Za-z_][\w.]{1,30}\w"),
}
"""Contact details found without the model, in this order (an email is not a handle)."""
PHONE_DIGITS = 7
"""A phone number has at least this many digits (so a date or a price is not one)."""
DATE = re.compile(r"\d{1,4}([-/.])\d{1,2}\1\d{1,4}(?:[ T]\d{1,2}:\d{2}(?::\d{2})?)?")
"""A date (or a date and time) the phone pattern would otherwise take."""
KINDS = ("person", "place", "email", "url", "phone", "handle")

PERSON_POOL = (
    "Nora", "Elias", "Ines", "Milo", "Petra", "Jonas", "Wren", "Anouk", "Felix", "Talia",
    "Otto", "Liesel", "Ravi", "Sunniva", "Bram", "Odile", "Kasimir", "Yara", "Idris", "Marit",
    "Lorcan", "Esme", "Teodor", "Saskia", "Aurelio", "Hedda", "Caspian", "Minna", "Zoltan",
    "Brielle", "Anselm", "Ottilie", "Leander", "Rosalind", "Evander", "Ilse", "Tobiah",
    "Mireille", "Cyprian", "Solveig",
)  # fmt: skip
SURNAME_POOL = (
    "Varga", "Lindqvist", "Okafor", "Brennan", "Castell", "Moreau", "Halloran", "Sato",
    "Ferreira", "Novak", "Achterberg", "Dunmore", "Ilves", "Quaranta", "Rowntree", "Tamsin",
)  # fmt: skip
PLACE_POOL = (
    "Eastbrook", "Holloway Vale", "Marrowick", "Fennmouth", "Larkspur", "Stonebridge",
    "Westmere", "Corrin Bay", "Ashdown", "Thornby", "Millhaven", "Redwater", "Glenmoor",
    "Kestrel Point", "Oakhurst", "Brightwell",
)  # fmt: skip
TEXT_KEYS = frozenset(
    {"text", "speaker", "speakers", "statement", "name", "answer", "output", "reference_reply"}
)
"""The fields of a subject's records that hold free text (ids and labels are left alone)."""


def contacts(text: str) -> list[tuple[str, str]]:
    """(kind, text) of each contact detail in `text`, by the regexes, in order of kind."""
    found: list[tuple[str, str]] = []
    rest = text
    for kind, pattern in CONTACT_PATTERNS.items():
        for m in pattern.finditer(rest):
            got = m.group(0).rstrip(".,;:!?")
            if kind == "phone" and (
                sum(c.isdigit() for c in got) < PHONE_DIGITS or DATE.fullmatch(got)
            ):
                continue
            found.append((kind, got))
        rest = pattern.sub(" ", rest)
    return found


@dataclass
class Surrogates:
    """One subject's mapping: original -> (kind, surrogate), and how often each kind was
    replaced."""

    mapping: dict[str, tuple[str, str]]
    replaced: Counter[str] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        names = [o for o, (k, _) in self.mapping.items() if k in ("person", "place")]
        other = [o for o, (k, _) in self.mapping.items() if k not in ("person", "place")]
        self._lower = {o.lower(): o for o in names}
        parts = [re.escape(o) for o in sorted(other, key=len, reverse=True)]
        parts += [
            r"(?<!\w)" + re.escape(o) + r"(?!\w)" for o in sorted(names, key=len, reverse=True)
        ]
        self._pattern = re.compile("|".join(parts), re.IGNORECASE) if parts else None

    def kinds(self) -> dict[str, int]:
        """How many distinct originals of each kind."""
        got = Counter(k for k, _ in self.mapping.values())
        return {k: got[k] for k in KINDS if got[k]}

    def text(self, text: str) -> str:
        if self._pattern is None or not text:
            return text
        return self._pattern.sub(self._one, text)

    def _one(self, m: re.Match[str]) -> str:
        seen = m.group(0)
        original = self._lower.get(seen.lower(), seen)
        if original not in self.mapping:
            original = next((o for o in self.mapping if o.lower() == seen.lower()), seen)
        if original not in self.mapping:
            return seen
        kind, surrogate = self.mapping[original]
        self.replaced[kind] += 1
        if seen.islower():
            return surrogate.lower()
        if seen.isupper() and len(seen) > 1:
            return surrogate.upper()
        return surrogate

    def value(self, value: Any, key: str | None = None) -> Any:
        """`value` (a record's JSON form) with every text field replaced."""
        if isinstance(value, dict):
            return {k: self.value(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v, key) for v in value]
        if isinstance(value, str) and key in TEXT_KEYS:
            return self.text(value)
        return value

    def subject_id(self, sid: str) -> str:
        """The subject id, replaced when it is (in any case) a found person name."""
        original = self._lower.get(sid.lower())
        if original is None or self.mapping[original][0] != "person":
            return sid
        return re.sub(r"[^a-z0-9_-]+", "-", self.mapping[original][1].lower())

    def subject(self, subject: Subject, rename: bool = True) -> Subject:
        """The whole subject with every text field replaced (ids kept; with `rename`, the
        subject id replaced when it is a found name)."""
        data = self.value(subject.model_dump(mode="json"))
        if rename:
            data["id"] = self.subject_id(subject.id)
        return Subject.model_validate(data)


def make_surrogates(subject: Subject, found: Iterable[tuple[str, str]], seed: int) -> Surrogates:
    """The subject's surrogates for `found` ((kind, original) pairs, person and place from
    the model) plus its speakers and the contact details the regexes find; deterministic
    for a subject, a seed and what was found."""
    order: dict[str, str] = {}
    for kind, text in _all_found(subject, found):
        text = text.strip()
        if len(text) < 2 or text.lower() in {o.lower() for o in order}:
            continue
        order[text] = kind
    words = {w.lower() for m in subject.messages for w in re.findall(r"\w+", m.text)}
    words |= {o.lower() for o in order}
    rng = random.Random(f"{seed}:anonymise:{subject.id}")
    pools: dict[str, list[str]] = {}
    for kind, pool in (("person", PERSON_POOL), ("surname", SURNAME_POOL), ("place", PLACE_POOL)):
        shuffled = list(pool)
        rng.shuffle(shuffled)
        pools[kind] = [p for p in shuffled if not set(re.findall(r"\w+", p.lower())) & words]
    counts: Counter[str] = Counter()
    mapping: dict[str, tuple[str, str]] = {}
    lower: dict[str, str] = {}  # a part of a name, lower-case -> its surrogate

    def part(word: str, pool: str) -> str:
        if word.lower() not in lower:
            counts[pool] += 1
            lower[word.lower()] = _surrogate(pool, counts[pool], pools)
            mapping.setdefault(word, ("person", lower[word.lower()]))
        return lower[word.lower()]

    for original, kind in order.items():
        tokens = original.split()
        if kind == "person" and len(tokens) > 1:  # each part stands alone too, consistently
            got = [
                part(w, "person" if i == 0 else "surname") if _namelike(w) else w
                for i, w in enumerate(tokens)
            ]
            mapping[original] = (kind, " ".join(got))
        elif kind == "person":
            mapping[original] = (kind, part(original, "person"))
        else:
            counts[kind] += 1
            mapping[original] = (kind, _surrogate(kind, counts[kind], pools))
    return Surrogates(mapping)


def _namelike(word: str) -> bool:
    """A word of a full name that is a name on its own (not "de", "van", "al")."""
    return len(word) >= 3 and word[0].isupper()


def _surrogate(kind: str, n: int, pools: Mapping[str, list[str]]) -> str:
    if kind in pools:
        pool = pools[kind]
        base = pool[(n - 1) % len(pool)] if pool else f"{kind.title()}"
        return base if n <= len(pool) else f"{base} {n}"
    return {
        "email": f"contact{n}@example.org",
        "url": f"https://example.org/link{n}",
        "phone": f"+00 000 000 {n:04d}",
        "handle": f"@handle{n}",
    }[kind]


def _all_found(subject: Subject, found: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """Every identifier in order of first appearance: contact details, the person's
    speaker names, then what the model found (placed by where it first occurs)."""
    out: list[tuple[str, str]] = []
    for m in subject.messages:
        out += contacts(m.text)
    people = list(subject.speakers) + [m.speaker for m in subject.messages if m.role == "user"]
    out += [("person", p) for p in dict.fromkeys(people)]
    text = "\n".join(m.text for m in subject.messages).lower()
    model = sorted(
        dict.fromkeys(found),
        key=lambda kt: (text.find(kt[1].lower()) % (len(text) + 1), kt[1]),
    )
    return out + [kt for kt in model if kt[0] in ("person", "place")]


def chunks(subject: Subject, size: int) -> list[list[Any]]:
    """The subject's messages in chunks of `size` (the identify pass's calls)."""
    msgs = subject.messages
    return [list(msgs[i : i + size]) for i in range(0, len(msgs), size)]


__all__ = ["CONTACT_PATTERNS", "KINDS", "Surrogates", "chunks", "contacts", "make_surrogates"]
