"""Judge.score and Judge.score_blind against a real loopback chat server."""

from __future__ import annotations

import json
import random
import re
from typing import Any

import pytest

from dialogbench.judging import BlindVerdict, Dimension, Rubric, Verdict
from dialogbench.testing import ok, status
from judging.judging_support import Body, Harness, first_prompt, shown_candidates


def verdict_json(accuracy: Any = 7, clarity: Any = 4, uses_context: bool = False) -> str:
    return json.dumps(
        {
            "reason": "checked",
            "accuracy": accuracy,
            "clarity": clarity,
            "uses_context": uses_context,
        }
    )


def test_score_parses_a_valid_verdict(harness: Harness) -> None:
    srv = harness.server(reply=lambda body: verdict_json(8, 5, True))
    judge = harness.judge(srv)
    v = harness.run(judge.score("Paris.", reference="Paris", context="Capital of France?"))
    assert v.scores == {"accuracy": 8, "clarity": 5}
    assert v.flags == {"uses_context": True}
    assert (v.reason, v.error, v.attempts) == ("checked", None, 1)
    assert v.judge == "openai-compatible/judge" and v.rubric == "qa"
    assert srv.request_count == 1
    body = srv.requests[0]
    assert (body["temperature"], body["seed"]) == (0.0, 0)
    schema = body["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["accuracy"]["maximum"] == 10
    prompt = first_prompt(body)
    for text in ("Paris.", "Capital of France?", "accuracy (0 to 10)", "uses_context"):
        assert text in prompt


def test_out_of_range_is_corrected(harness: Harness) -> None:
    srv = harness.server(script=(ok(verdict_json(accuracy=12)), ok(verdict_json(accuracy=9))))
    judge = harness.judge(srv)
    v = harness.run(judge.score("Paris.", reference="Paris"))
    assert v.scores == {"accuracy": 9, "clarity": 4}
    assert v.attempts == 2 and v.error is None
    second = srv.requests[1]["messages"]
    assert second[-2] == {"role": "assistant", "content": verdict_json(accuracy=12)}
    assert "accuracy" in second[-1]["content"] and "10" in second[-1]["content"]


@pytest.mark.parametrize("reply", [verdict_json(accuracy=12), "I would give it a seven."])
def test_never_valid_is_unscored_with_its_raw_text(harness: Harness, reply: str) -> None:
    srv = harness.server(reply=lambda body: reply)
    judge = harness.judge(srv)
    v = harness.run(judge.score("Paris.", reference="Paris"))
    assert v.scores is None and v.flags is None and not v.scored
    assert v.raw == reply and v.error
    assert v.attempts == 3 and srv.request_count == 3


def test_an_empty_reply_is_a_failed_call(harness: Harness) -> None:
    """An empty reply is no verdict to correct: the call fails (after its quick retries)."""
    srv = harness.server(reply=lambda body: "")
    v = harness.run(harness.judge(srv).score("Paris.", reference="Paris"))
    assert v.scores is None and not v.scored and v.raw == ""
    assert v.error is not None and "call failed" in v.error and "empty reply" in v.error
    assert v.attempts == 1 and srv.request_count == 3


def test_a_failed_call_is_unscored(harness: Harness) -> None:
    srv = harness.server(script=(status(401, message="bad key"),))
    v = harness.run(harness.judge(srv).score("Paris.", reference="Paris"))
    assert v.scores is None and v.error is not None and "call failed" in v.error


def test_verdicts_round_trip_through_json(harness: Harness) -> None:
    srv = harness.server(reply=lambda body: verdict_json())
    v = harness.run(harness.judge(srv).score("Paris.", reference="Paris"))
    assert Verdict.model_validate_json(v.model_dump_json()) == v


def test_missing_reference_is_refused_before_any_call(harness: Harness, rubric: Rubric) -> None:
    srv = harness.server()
    judge = harness.judge(srv)
    with pytest.raises(ValueError, match="reference"):
        harness.run(judge.score("Paris."))
    loose = Rubric("loose", "Rate it.", (Dimension("fluency", 1, 3, "Reads well?"),), "none")
    srv2 = harness.server(reply=lambda body: '{"reason": "ok", "fluency": 2}')
    v = harness.run(harness.judge(srv2, loose).score("Paris."))
    assert v.scores == {"fluency": 2} and v.flags is None
    assert srv.request_count == 0


# -- blinded -------------------------------------------------------------------------------------

CANDIDATES = {
    "system_alpha": "the answer worth 3",
    "system_beta": "the answer worth 8",
    "system_gamma": "the answer worth 5",
    "system_delta": "the answer worth 10",
}


def worth(text: str) -> int:
    found = re.search(r"worth (\d+)", text)
    assert found is not None
    return int(found.group(1))


def blind_reply(body: Body) -> str:
    """Scores each shown candidate by the number in its text, listing them in reverse order."""
    entries = [
        {
            "label": label,
            "reason": f"looks like {worth(text)}",
            "accuracy": worth(text),
            "clarity": 2,
            "uses_context": worth(text) > 5,
        }
        for label, text in reversed(shown_candidates(body))
    ]
    return json.dumps({"candidates": entries})


def test_blind_scores_map_back_to_the_original_names(harness: Harness) -> None:
    srv = harness.server(reply=blind_reply)
    judge = harness.judge(srv)
    b = harness.run(judge.score_blind(CANDIDATES, reference="anything", seed=3))
    assert b.scored and b.attempts == 1
    assert b.scores is not None and b.flags is not None
    for name, text in CANDIDATES.items():
        assert b.scores[name] == {"accuracy": worth(text), "clarity": 2}
        assert b.flags[name] == {"uses_context": worth(text) > 5}
        assert b.reasons[name] == f"looks like {worth(text)}"
    # the prompt shows labels A, B, C, D in order, each with the text of the recorded name
    shown = shown_candidates(srv.requests[0])
    assert [label for label, _ in shown] == ["A", "B", "C", "D"]
    assert list(b.labels) == ["A", "B", "C", "D"]
    assert [CANDIDATES[b.labels[label]] for label, _ in shown] == [text for _, text in shown]
    assert b.order == [b.labels[label] for label in "ABCD"]
    assert sorted(b.order) == sorted(CANDIDATES)


def test_blind_prompt_never_names_the_candidates(harness: Harness) -> None:
    srv = harness.server(reply=blind_reply)
    judge = harness.judge(srv)
    harness.run(judge.score_blind(CANDIDATES, reference="anything", seed=1))
    sent = json.dumps(srv.requests[0])
    assert "system_" not in sent
    assert "worth 3" in sent


def test_different_seeds_give_different_orders(harness: Harness) -> None:
    srv = harness.server(reply=blind_reply)
    judge = harness.judge(srv)

    async def many() -> list[BlindVerdict]:
        return [await judge.score_blind(CANDIDATES, "ref", seed=s) for s in range(12)]

    verdicts = harness.run(many())
    orders = {tuple(v.order) for v in verdicts}
    assert len(orders) > 3
    assert all(v.scored for v in verdicts)
    for v in verdicts:  # whatever the order, the scores land on the right names
        assert v.scores is not None
        assert {n: s["accuracy"] for n, s in v.scores.items()} == {
            n: worth(t) for n, t in CANDIDATES.items()
        }
    firsts = {tuple(label for label, _ in shown_candidates(body)) for body in srv.requests}
    assert firsts == {("A", "B", "C", "D")}
    shown_texts = {tuple(t for _, t in shown_candidates(body)) for body in srv.requests}
    assert len(shown_texts) == len(orders)


def test_orders_are_reproducible(harness: Harness) -> None:
    srv = harness.server(reply=blind_reply)
    judge = harness.judge(srv)
    reversed_input = dict(reversed(list(CANDIDATES.items())))

    async def pairs() -> list[BlindVerdict]:
        return [
            await judge.score_blind(CANDIDATES, "ref", seed=7),
            await judge.score_blind(reversed_input, "ref", seed=7),
            await judge.score_blind(CANDIDATES, "ref"),
            await judge.score_blind(reversed_input, "ref"),
            await judge.score_blind(CANDIDATES, "ref", rng=random.Random(7)),
        ]

    a, b, c, d, e = harness.run(pairs())
    assert a.labels == b.labels and a.seed == 7
    assert c.labels == d.labels and c.seed is not None and c.seed == d.seed
    assert e.seed is None


def test_blind_with_a_repeated_label_is_corrected(harness: Harness) -> None:
    two = {"x": "the answer worth 1", "y": "the answer worth 2"}
    dup = {"candidates": [{**json.loads(verdict_json()), "label": "A"}] * 2}
    srv = harness.server(reply=blind_reply, script=(ok(json.dumps(dup)),))
    b = harness.run(harness.judge(srv).score_blind(two, reference="r", seed=0))
    assert b.attempts == 2 and b.scores is not None
    assert {n: s["accuracy"] for n, s in b.scores.items()} == {"x": 1, "y": 2}


def test_blind_never_valid_is_unscored_but_keeps_the_mapping(harness: Harness) -> None:
    srv = harness.server(reply=lambda body: "A is better than B.")
    b = harness.run(harness.judge(srv).score_blind(CANDIDATES, reference="r", seed=0))
    assert b.scores is None and b.flags is None and b.reasons == {}
    assert b.raw == "A is better than B." and b.error and b.attempts == 3
    assert sorted(b.labels.values()) == sorted(CANDIDATES)
    one = b.verdict("system_beta")
    assert one.scores is None and one.raw == b.raw
    assert BlindVerdict.model_validate_json(b.model_dump_json()) == b


def test_blind_verdict_splits_per_candidate(harness: Harness) -> None:
    srv = harness.server(reply=blind_reply)
    b = harness.run(harness.judge(srv).score_blind(CANDIDATES, reference="r"))
    v = b.verdict("system_beta")
    assert v.scores == {"accuracy": 8, "clarity": 2} and v.flags == {"uses_context": True}
    with pytest.raises(KeyError):
        b.verdict("system_omega")


def test_blind_argument_checks(harness: Harness) -> None:
    judge = harness.judge(harness.server())
    with pytest.raises(ValueError, match="at least one"):
        harness.run(judge.score_blind({}, reference="r"))
    with pytest.raises(ValueError, match="not both"):
        harness.run(judge.score_blind(CANDIDATES, "r", seed=1, rng=random.Random(1)))
