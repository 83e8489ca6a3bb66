"""Token counts from a real tokenizer, offline: a GGUF model's own vocabulary.

`GGUFTokenizer()` is the embedded SmolLM2-135M-Instruct's tokenizer (read from the GGUF
file through cyllama; nothing is downloaded). Besides the tokens of a text it gives the
*per-message overhead*: what the model's chat template adds around one message of a role.
It is measured, not assumed: a message is appended to a rendered conversation and the
growth in tokens, less the tokens of its text, is the overhead. For SmolLM2's ChatML
template (`<|im_start|>ROLE\\nTEXT<|im_end|>\\n`) that is 5 tokens for `user` and `system`
and 6 for `assistant` (`assistant` is two tokens).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from dialogbench.data.model import Role
from dialogbench.models.embedded import default_gguf, load_gguf, render_chat

IntArray = npt.NDArray[np.int64]
ROLES: tuple[Role, ...] = ("user", "assistant", "system")
_PROBE_TEXT = "See you tomorrow then."  # any plain text; the overhead does not depend on it
_OPENING: list[dict[str, str]] = [{"role": "user", "content": "Hello there."}]


@runtime_checkable
class TokenCounter(Protocol):
    """Counts the tokens a model would read for message texts."""

    name: str

    def count(self, texts: Sequence[str]) -> IntArray:
        """Tokens of each text alone (no special tokens)."""
        ...

    def overhead(self, role: Role) -> int:
        """Tokens the chat template adds around one message of `role`."""
        ...


class GGUFTokenizer:
    """The tokenizer and chat template of a GGUF model (default: the embedded SmolLM2)."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else default_gguf()
        self.name = self.path.name
        self._model: Any = load_gguf(self.path)
        self._vocab: Any = self._model.get_vocab()
        self._overhead = {role: self._measure_overhead(role) for role in ROLES}

    def count(self, texts: Sequence[str]) -> IntArray:
        tokenize = self._vocab.tokenize
        return np.fromiter(
            (len(tokenize(t, add_special=False, parse_special=False)) for t in texts),
            dtype=np.int64,
            count=len(texts),
        )

    def overhead(self, role: Role) -> int:
        return self._overhead[role]

    def close(self) -> None:
        """Free the model (the tokenizer is unusable afterwards)."""
        if self._model is not None:
            self._model.close()
            self._model = self._vocab = None

    def _templated(self, turns: list[dict[str, str]]) -> int:
        prompt = render_chat(self._model, turns)
        return len(self._vocab.tokenize(prompt, add_special=False, parse_special=True))

    def _measure_overhead(self, role: Role) -> int:
        added = [*_OPENING, {"role": role, "content": _PROBE_TEXT}]
        grown = self._templated(added) - self._templated(_OPENING)
        return grown - int(self.count([_PROBE_TEXT])[0])
