"""One evidence repair for every loader: the message ids a question cites, made usable.

`repair_evidence(items, ids)` reads each cited item as follows; the first rule that names
existing ids wins:

1. the item itself is an id;
2. the item without surrounding whitespace, quotes and brackets, and trailing punctuation
   (`'D5:3.'`, `'t12.'`) is an id;
3. numbers are compared without leading zeros (`'D30:05'` -> `D30:5`) when exactly one id
   matches that way;
4. a range `A-B` of ids that differ only in their last number (`'D12:3-D12:5'`,
   `'D12:3-5'`, `'t3-t5'`) stands for every id from A to B, when all of them exist;
5. otherwise the item is a list joined by `;`, `,` or whitespace (`'D8:6; D9:17'`,
   `'t1; t2'`), and each piece is read by rules 1 to 4.

What names no message is dropped, and said: an empty item, a piece that is no id
(`malformed` when the ids are LoCoMo's `D<session>:<turn>` and the piece is not of that
form), a range with missing ids. A question left with no evidence cannot be a retrieval
probe, and that is said too. `Evidence.notes` holds these remarks in order;
`Evidence.dropped` the items or pieces dropped.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

_DIA_ID = re.compile(r"D\d+:\d+")
_EDGES = " \t\r\n\"'`()[]{}<>"
_TRAILING = ".,;:!?"
_SEPARATORS = re.compile(r"[;,\s]+")
_DASH = re.compile(r"\s*[-\u2013\u2014]\s*")
_RANGE = re.compile(r"(?P<p>.*?)(?P<a>\d+)-(?P<q>.*?)(?P<b>\d+)")
_NUMBER = re.compile(r"\d+")


@dataclass
class Evidence:
    """The usable ids of one question's evidence, with what was repaired or dropped."""

    ids: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)

    def warnings(self, qid: str) -> list[str]:
        """The notes as dataset warnings about question `qid`."""
        return [f"{qid}: {note}" for note in self.notes]


class _Ids:
    """The ids of one conversation, with the lookups the repair rules use."""

    def __init__(self, ids: Collection[str]) -> None:
        self.ids = ids
        self.dia_ids = any(_DIA_ID.fullmatch(i) for i in ids)
        self.unpadded: dict[str, str | None] = {}
        for i in ids:
            key = _unpad(i)
            self.unpadded[key] = None if key in self.unpadded else i

    def one(self, text: str) -> str | None:
        """The id `text` names by rules 1 to 3, or None."""
        if text in self.ids:
            return text
        cleaned = _strip(text)
        if cleaned in self.ids:
            return cleaned
        return self.unpadded.get(_unpad(cleaned))

    def range(self, text: str) -> list[str] | None:
        """The ids of a range (rule 4), or None when `text` is no range of existing ids."""
        m = _range(text)
        if m is None:
            return None
        first, last = int(m["a"]), int(m["b"])
        if not first < last <= first + len(self.ids):
            return None
        found = [self.one(f"{m['p']}{n}") for n in range(first, last + 1)]
        return [f for f in found if f is not None] if all(found) else None


def _range(text: str) -> re.Match[str] | None:
    m = _RANGE.fullmatch(_DASH.sub("-", _strip(text)))
    return m if m is not None and m["q"] in ("", m["p"]) else None


def _strip(text: str) -> str:
    return text.strip(_EDGES).rstrip(_TRAILING).strip(_EDGES)


def _unpad(text: str) -> str:
    return _NUMBER.sub(lambda m: m.group().lstrip("0") or "0", text)


def repair_evidence(items: Sequence[str], ids: Collection[str]) -> Evidence:
    """Read the cited `items` against the conversation's message `ids`, as the module says."""
    known = _Ids(ids)
    out = Evidence()
    for item in items:
        whole = known.one(item)
        found = [whole] if whole else known.range(item)
        if found is None:
            found = []
            if not _strip(item):
                out.notes.append(f"evidence id {item!r} is empty; dropped")
                out.dropped.append(item)
            pieces = [p for p in _SEPARATORS.split(_DASH.sub("-", item)) if _strip(p)]
            for piece in pieces:
                got = known.one(piece)
                more = [got] if got else known.range(piece)
                if more is not None:
                    found += more
                    continue
                out.dropped.append(piece)
                if _range(piece):
                    out.notes.append(f"evidence range {piece!r} names missing messages; dropped")
                elif known.dia_ids and not _DIA_ID.fullmatch(_unpad(_strip(piece))):
                    out.notes.append(f"evidence id {piece!r} is malformed; dropped")
                else:
                    out.notes.append(f"evidence id {piece!r} names no message; dropped")
        if found and found != [item]:
            out.notes.append(f"evidence id {item!r} repaired to {found}")
        for f in found:
            if f not in out.ids:
                out.ids.append(f)
    if not out.ids:
        out.notes.append("no usable evidence; the question cannot be a retrieval probe")
    return out
