"""`UnusableFirst`: the first answer to each conversation it picks is bad, later ones good."""

from __future__ import annotations

import json

from dialogbench.testing import UnusableFirst
from dialogbench.testing.unusable import NOT_JSON


def _body(text: str, seed: int = 0, model: str = "m") -> dict[str, object]:
    return {"model": model, "seed": seed, "messages": [{"role": "user", "content": text}]}


def test_first_answer_per_conversation_is_bad_whatever_the_seed() -> None:
    flaky = UnusableFirst(lambda body: "good")
    assert flaky(_body("a")) == NOT_JSON
    assert flaky(_body("a", seed=1_000_000)) == "good"  # the same conversation, asked again
    assert flaky(_body("b")) == NOT_JSON and flaky(_body("b")) == "good"
    assert [b["messages"] for b in flaky.spoiled] == [
        _body("a")["messages"],
        _body("b")["messages"],
    ]


def test_applies_picks_the_requests_and_bad_may_be_computed() -> None:
    flaky = UnusableFirst(
        lambda body: "good",
        bad=lambda body: json.dumps({"echo": body["model"]}),
        applies=lambda body: body["model"] == "judge",
    )
    assert flaky(_body("a")) == "good"
    assert flaky(_body("a", model="judge")) == '{"echo": "judge"}'
    assert len(flaky.spoiled) == 1


def test_the_default_good_answer_is_the_servers_own() -> None:
    flaky = UnusableFirst()
    flaky(_body("hello"))
    assert flaky(_body("hello")) == "hello"
