"""The model-free token counter: its fast path for ASCII text counts as the general one."""

from __future__ import annotations

import random
import string

from dialogbench.memory import costs


def general(text: str) -> int:
    return sum(len(t) if costs._HAN.match(t) else 1 for t in costs._TOKEN.findall(text))


def test_ascii_fast_path_equals_the_general_count() -> None:
    rng = random.Random(0)
    texts = ["Hello, world 42!", "it's 3:30pm -- ok?", "", "   ", "a\tb\nc"]
    texts += ["".join(rng.choice(string.printable) for _ in range(80)) for _ in range(500)]
    for text in texts:
        assert costs.approx_tokens(text) == general(text), text


def test_ideographs_count_per_character() -> None:
    assert costs.approx_tokens("我喜欢猫 and dogs") == 4 + 2
    assert costs.approx_tokens("Café au lait, 2 €") == general("Café au lait, 2 €") == 6
