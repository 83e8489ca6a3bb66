"""A worked example of plugging a memory system into the retrieval track.

Run it with:

    dialogbench run retrieval --dataset sample \
        --retrievers bm25,examples.keyword_memory:KeywordMemory

(from the repository root, so that `examples` is importable). A real memory layer would
index each subject's messages once (in `retrieve`, on the first call for a new subject, or
ahead of time) and answer from its own store; here a word-overlap count stands in.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from dialogbench.data.model import Message
from dialogbench.retrieval.base import Probe

_WORD = re.compile(r"\w{3,}")


class KeywordMemory:
    """Ranks earlier messages by how many of the probe's words they share."""

    name = "keyword-memory"

    def retrieve(self, history: Sequence[Message], probe: Probe, k: int) -> list[str]:
        """Return up to k message ids from `history`, best first."""
        words = set(_WORD.findall(probe.text.lower()))
        scored = [
            (len(words & set(_WORD.findall(m.text.lower()))), m.position, m.id) for m in history
        ]
        scored.sort(reverse=True)
        return [mid for overlap, _, mid in scored[:k] if overlap > 0]
