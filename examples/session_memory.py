"""A worked example of a *stateful* memory system, written against the protocol in
`dialogbench.memory` (docs/memory.md).

Run it beside BM25 from the repository root (so that `examples` is importable):

    dialogbench run retrieval --dataset sample \
        --memory bm25,examples.session_memory:SessionMemory --out runs/m

It ingests messages as they arrive and keeps, per subject, one note per session (what each
person talked about: their most frequent content words, and which messages said them).
Asked a query, it returns

- up to two text memories: the notes sharing most words with the query, each citing the
  messages of that session that hold those words (scored by `cite-hit@k`), then
- id memories: the stored messages sharing most words with the query, best first (scored by
  hit@k and MRR, exactly as a retriever's ranking).

It never sees a message before the harness hands it over, so it needs no masking: the
harness replays each subject in time order, calling `reset` first. A real memory layer
would extract facts with a model and report what that cost in `Recall.cost`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from dialogbench.data.model import Message
from dialogbench.memory import Budget, Memory, Query, Recall

_WORD = re.compile(r"[a-z]{3,}")
_STOP_WORDS = (
    "the and you that have for not with this but are was what your just about like "
    "they there their them his her she him its our out get got really think know "
    "been some would could should will can did does had has how when where who why "
    "which than then also very too much more all any one yes yeah okay well from "
    "into over"
)
_STOP = frozenset(_STOP_WORDS.split())
NOTES_PER_RECALL = 2
WORDS_PER_NOTE = 8


def words(text: str) -> set[str]:
    """The content words of a text (lower case, three letters or more, no stop words)."""
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


@dataclass
class Session:
    """What the memory holds about one session: its messages and word counts per speaker."""

    name: str
    messages: list[Message] = field(default_factory=list)
    counts: dict[str, Counter[str]] = field(default_factory=dict)

    def note(self) -> str:
        parts = [
            f"{speaker} talked about {', '.join(w for w, _ in c.most_common(WORDS_PER_NOTE))}"
            for speaker, c in self.counts.items()
        ]
        return f"session {self.name}: " + "; ".join(parts)

    def topics(self) -> set[str]:
        return {w for c in self.counts.values() for w, _ in c.most_common(WORDS_PER_NOTE)}


class SessionMemory:
    """Session notes (text memories that cite messages) and keyword-matched messages."""

    name = "session-memory"

    def __init__(self) -> None:
        self._sessions: dict[str, dict[str, Session]] = {}
        self._messages: dict[str, list[tuple[set[str], Message]]] = {}

    def reset(self, subject: str) -> None:
        self._sessions.pop(subject, None)
        self._messages.pop(subject, None)

    def ingest(self, subject: str, messages: Sequence[Message]) -> None:
        sessions = self._sessions.setdefault(subject, {})
        stored = self._messages.setdefault(subject, [])
        for m in messages:
            key = m.session or f"{m.position // 20 + 1}"  # no sessions: blocks of 20 messages
            session = sessions.setdefault(key, Session(key))
            session.messages.append(m)
            found = words(m.text)
            session.counts.setdefault(m.speaker, Counter()).update(found)
            stored.append((found, m))

    def recall(self, subject: str, query: Query, budget: Budget) -> Recall:
        wanted = words(query.text)
        notes: list[tuple[int, int, Memory]] = []
        for i, session in enumerate(self._sessions.get(subject, {}).values()):
            shared = wanted & session.topics()
            if shared:
                cites = tuple(m.id for m in session.messages if shared & words(m.text))
                notes.append((len(shared), i, Memory(text=session.note(), cites=cites)))
        notes.sort(key=lambda n: (-n[0], -n[1]))  # most shared words, then the later session
        scored = [
            (len(wanted & found), m.position, m.id)
            for found, m in self._messages.get(subject, [])
            if wanted & found
        ]
        scored.sort(reverse=True)  # most shared words, then the more recent message
        k = budget.k if budget.k is not None else len(notes) + len(scored)
        memories = [n[2] for n in notes[:NOTES_PER_RECALL]]
        memories += [Memory(message_id=mid) for _, _, mid in scored[: max(0, k - len(memories))]]
        return Recall(tuple(memories))

    def dump(self, subject: str) -> list[Memory]:
        """Every note and message held for `subject`."""
        notes = [
            Memory(text=s.note(), cites=tuple(m.id for m in s.messages))
            for s in self._sessions.get(subject, {}).values()
        ]
        return notes + [Memory(message_id=m.id) for _, m in self._messages.get(subject, [])]
