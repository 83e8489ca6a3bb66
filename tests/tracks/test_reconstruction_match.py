"""Reconstruction matching: the lexical and meaning matchers, optimal one-to-one pairing
(checked against brute force), the one-letter and near-duplicate cases, the gold replayed
verbatim, and the agreement of matched claims beyond their statements."""

from __future__ import annotations

import itertools
import json
import math
from datetime import datetime
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from dialogbench.data.model import Message, PersonaEntry, ProfileClaim, Subject
from dialogbench.tracks.realcompanion import reconstruction_match as rm
from dialogbench.tracks.realcompanion.reconstruction import (
    embedding_similarity,
    merge,
    score_row,
)
from dialogbench.tracks.realcompanion.reconstruction_prompts import (
    ClaimReply,
    PersonaReply,
    Reconstruction,
)


def _embedder_missing() -> str | None:
    try:
        embedding_similarity()
    except ValueError as e:
        return str(e)
    return None


needs_embedder = pytest.mark.skipif(
    _embedder_missing() is not None, reason=_embedder_missing() or ""
)


def _meaning() -> rm.Matcher:
    return rm.meaning(embedding_similarity())


# -- optimal one-to-one pairing ---------------------------------------------------------------


def brute_force(
    weights: npt.NDArray[np.float64], agree: npt.NDArray[np.bool_]
) -> tuple[int, float]:
    """The best (pairs, total weight) over every one-to-one set of agreeing pairs."""
    n, m = agree.shape
    best = (0, 0.0)
    cells = [(i, j) for i in range(n) for j in range(m) if agree[i, j]]
    for k in range(1, min(n, m) + 1):
        for chosen in itertools.combinations(cells, k):
            rows, cols = {i for i, _ in chosen}, {j for _, j in chosen}
            if len(rows) == k and len(cols) == k:
                total = sum(weights[i, j] for i, j in chosen)
                if (k, total) > (best[0], best[1] + 1e-12):
                    best = (k, total)
    return best


def test_assignment_matches_brute_force() -> None:
    rng = np.random.default_rng(7)
    for _ in range(300):
        n, m = rng.integers(1, 5, size=2)
        weights = rng.random((n, m)).round(2)
        agree = rng.random((n, m)) < 0.5
        pairs = rm.assign(weights, agree)
        assert len({i for i, _ in pairs}) == len({j for _, j in pairs}) == len(pairs)
        assert all(agree[i, j] for i, j in pairs)
        k, total = brute_force(weights, agree)
        assert len(pairs) == k
        assert sum(weights[i, j] for i, j in pairs) == pytest.approx(total)


def test_optimal_pairing_beats_greedy() -> None:
    # greedy takes (p0, g1) first (the most similar pair) and leaves p1 and g0 unmatched
    weights = np.array([[0.9, 0.95], [0.0, 0.5]])
    assert rm.assign(weights, weights >= 0.4) == [(0, 0), (1, 1)]


# -- the lexical matcher's fixed cases --------------------------------------------------------


def test_one_letter_value_matches_itself_lexically() -> None:
    assert rm.similarity("F", "F") == 1.0
    assert rm.similarity("F", "M") == 0.0
    gold = [("gender", "F"), ("age", "42")]
    assert rm.count(gold, gold, rm.lexical()).recall == 1.0
    assert rm.count([("gender", "M"), ("age", "43")], gold, rm.lexical()).matched == 0


NEAR_DUPLICATES = [
    ("hobbies", "Bakes sourdough bread"),
    ("hobbies", "Bakes sourdough bread at weekends"),
    ("relationships", "Has a sister, Ana"),
    ("gender", "F"),
    ("pets", "A greyhound called Biscuit"),
]


def _subject(profile: list[tuple[str, str]], persona: list[tuple[str, str]]) -> Subject:
    return Subject(
        id="s",
        speakers=["Ana"],
        messages=[Message(id="m1", position=0, speaker="Ana", text="hello")],
        profile=[ProfileClaim(field=f, statement=s) for f, s in profile],
        persona=[PersonaEntry(dimension=d, statement=s) for d, s in persona],
    )


def _replayed(subject: Subject) -> Reconstruction:
    """The gold as one reply, through the track's merge as solving does it."""
    reply = Reconstruction(
        profile=[ClaimReply(field=c.field, statement=c.statement) for c in subject.profile],
        persona=[
            PersonaReply(dimension=e.dimension, statement=e.statement) for e in subject.persona
        ],
    )
    return merge([reply])


PERSONA = [("humour", "Dry, self-deprecating humour"), ("humour", "Dry humour about work")]


def test_gold_replayed_verbatim_scores_one_lexically() -> None:
    subject = _subject(NEAR_DUPLICATES, PERSONA)
    row = score_row(0, subject, _replayed(subject), rm.lexical())
    assert row["counts"]["all"] == {"matched": 7, "predicted": 7, "reference": 7}
    assert row["precision"]["all"] == row["recall"]["all"] == 1.0


@needs_embedder
def test_gold_replayed_verbatim_scores_one_on_meaning() -> None:
    subject = _subject(NEAR_DUPLICATES, PERSONA)
    for threshold in (0.0, rm.MEANING_THRESHOLD, 1.0):
        row = score_row(
            0, subject, _replayed(subject), rm.meaning(embedding_similarity(), threshold)
        )
        assert row["precision"]["all"] == row["recall"]["all"] == 1.0, threshold


def test_merge_keeps_a_replys_near_duplicates_and_drops_restatements() -> None:
    first = Reconstruction(profile=[ClaimReply(field=f, statement=s) for f, s in NEAR_DUPLICATES])
    again = Reconstruction(
        profile=[
            ClaimReply(field="Hobbies", statement="bakes sourdough bread."),
            ClaimReply(field="hobbies", statement="Bakes sourdough bread at weekends"),
            ClaimReply(field="hobbies", statement="Bakes sourdough bread every day"),  # a third
        ]
    )
    merged = merge([first, again])
    assert [c.statement for c in merged.profile] == [
        *(s for _, s in NEAR_DUPLICATES),
        "Bakes sourdough bread every day",
    ]


# -- the meaning matcher --------------------------------------------------------------------


def test_field_groups_are_all_in_the_docs() -> None:
    docs = (Path(__file__).parents[2] / "docs" / "tracks.md").read_text()
    table = docs[docs.index("| group | fields read as it |") :]
    for group, names in rm.FIELD_GROUPS.items():
        assert group in table, group
        for name in names:
            assert name in table, (group, name)


def test_field_groups() -> None:
    assert rm.field_group("Relationships") == rm.field_group("family") == "relationships"
    assert rm.field_group("pets") == rm.field_group("Animals") == "pets"
    assert rm.field_group("hobbies") == rm.field_group("interests") == rm.field_group("reading")
    assert rm.field_group("job") == rm.field_group("Occupation") == "occupation"
    assert rm.field_group("favourite colour") == "favourite colour"  # its own group
    assert rm.short_value("F") == rm.short_value("female") == rm.short_value("Woman") == "female"
    assert rm.short_value("she is a woman") is None


@needs_embedder
def test_meaning_matches_synonyms_that_lexical_misses() -> None:
    gold = [
        ("relationships", "Has a younger sister called Ana"),
        ("pets", "Owns a greyhound named Biscuit"),
        ("hobbies", "reading"),
        ("gender", "F"),
        ("occupation", "Works as a nurse at the city hospital"),
    ]
    pred = [
        ("family", "Her younger sister is Ana"),
        ("animals", "Has a greyhound called Biscuit"),
        ("hobbies", "likes to read"),
        ("gender", "female"),
        ("occupation", "Graphic designer"),  # a different job: no match
    ]
    assert rm.count(pred, gold, rm.lexical()).matched == 0
    pairs = _meaning().match(pred, gold)
    assert [(i, j) for i, j, _ in pairs] == [(0, 0), (1, 1), (2, 2), (3, 3)]
    assert all(rm.MEANING_THRESHOLD <= s <= 1.0 for _, _, s in pairs)
    assert _meaning().match([("gender", "M")], [("gender", "F")]) == []
    assert _meaning().match([("gender", "F")], [("gender", "F")]) == [(0, 0, 1.0)]


@needs_embedder
def test_meaning_is_symmetric() -> None:
    a = [("family", "Her younger sister is Ana"), ("hobbies", "likes to read")]
    b = [("relationships", "Has a younger sister called Ana"), ("interests", "reading")]
    m = _meaning()
    assert rm.count(a, b, m).matched == rm.count(b, a, m).matched == 2
    assert rm.pairwise_f1([{"profile": a}, {"profile": b}], m) == [1.0]


# -- agreement beyond the statement ----------------------------------------------------------


def test_claim_agreement_hand_computed() -> None:
    day = datetime.fromisoformat
    span = (day("2024-01-01"), day("2024-01-31"))
    pred = ProfileClaim(
        field="job",
        statement="x",
        confidence=0.7,
        valid_from=day("2024-01-11"),
        evidence_ids=["m1", "m2"],
    )
    gold = ProfileClaim(
        field="job",
        statement="x",
        confidence=0.9,
        valid_from=day("2024-01-01"),
        valid_to=day("2024-01-21"),
        evidence_ids=["m2", "m3", "m4"],
    )
    got = rm.claim_agreement(pred, gold, span)
    assert got["confidence error"] == pytest.approx(0.2)
    # [11, 31] against [1, 21]: 10 days in common of 30
    assert got["window agreement"] == pytest.approx(10 / 30)
    assert got["evidence agreement"] == pytest.approx(1 / 4)
    both_open = ProfileClaim(field="job", statement="x")
    assert rm.claim_agreement(both_open, both_open, None)["window agreement"] == 1.0
    assert math.isnan(rm.claim_agreement(both_open, both_open, None)["evidence agreement"])
    assert rm.window_agreement((None, day("2024-01-05")), (None, None), None) == 0.0
    entry = PersonaEntry(dimension="humour", statement="x", grounds=["m1"], hypothesis=True)
    other = PersonaEntry(dimension="humour", statement="x", grounds=["m1"])
    assert rm.persona_agreement(entry, other) == {
        "evidence agreement": 1.0,
        "hypothesis agreement": 0.0,
    }


def test_score_row_carries_agreement_of_matched_pairs() -> None:
    subject = _subject([("gender", "F"), ("pets", "A greyhound called Biscuit")], [])
    subject.profile[1].evidence_ids.append("m1")
    written = Reconstruction(
        profile=[
            ClaimReply(field="pets", statement="a greyhound called Biscuit", confidence=0.5),
            ClaimReply(field="gender", statement="F", evidence_ids=["m1", "m404"]),
        ]
    )
    row = score_row(0, subject, written, rm.lexical())
    assert [(i, j) for i, j, _ in row["matched"]["profile"]] == [(0, 1), (1, 0)]
    first, second = row["agreement"]["profile"]
    assert first == {"confidence error": 0.5, "window agreement": 1.0, "evidence agreement": 0.0}
    # unknown ids are dropped (as the release files do) before comparing
    assert second["evidence agreement"] == 0.0 and second["confidence error"] == 0.0


# -- the meaning matcher's checks: contradictions, values, fields outside the table -----------

CONTRADICTIONS = [
    (("pets", "Has a dog"), ("pets", "Has a cat"), "values differ"),
    (("food", "Is vegetarian"), ("diet", "Is not vegetarian"), "contrast (diet)"),
    (("living situation", "Lives in Porto"), ("home", "Lives in Lisbon"), "names differ"),
    (("health", "Never drinks alcohol"), ("health", "Drinks alcohol"), "negation"),
    (("living situation", "No longer lives in Porto"), ("city", "Lives in Porto"), "negation"),
    (("hobbies", "Likes jazz"), ("interests", "Dislikes jazz"), "contrast"),
    (("hobbies", "Loves horror films"), ("hobbies", "Hates horror films"), "contrast (liking)"),
    (("relationships", "Is married"), ("relationships", "Is divorced"), "contrast (marital"),
    (("relationships", "Is married to Tom"), ("partner", "Is single"), "contrast (marital"),
    (("family", "Has an older sister"), ("family", "Has a younger sister"), "contrast (relative"),
    (("age", "Is 34 years old"), ("age", "Is 41 years old"), "numbers differ: 34 vs 41"),
]


@pytest.mark.parametrize(("a", "b", "why"), CONTRADICTIONS)
def test_contradictions_are_refused_without_an_embedder(
    a: tuple[str, str], b: tuple[str, str], why: str
) -> None:
    # the checks themselves need no model: equal words and abbreviations only
    got = rm.contradiction(a[1], b[1])
    assert got is not None and got.startswith(why), got
    assert rm.contradiction(b[1], a[1]) is not None  # either way round


@needs_embedder
@pytest.mark.parametrize(("a", "b", "why"), CONTRADICTIONS)
def test_contradictions_never_match_on_meaning(
    a: tuple[str, str], b: tuple[str, str], why: str
) -> None:
    for threshold in (0.0, rm.MEANING_THRESHOLD):
        assert rm.meaning(embedding_similarity(), threshold).match([a], [b]) == []
        assert rm.meaning(embedding_similarity(), threshold).match([b], [a]) == []
    # at threshold 0 only the checks stand between them (short values such as "Is
    # married" / "Is divorced" are compared as values and are simply unequal)
    verdict = rm.meaning(embedding_similarity(), 0.0).explain(a, b)
    assert not verdict.agree
    if rm.short_value(a[1]) is None or rm.short_value(b[1]) is None:
        assert verdict.refused is not None and verdict.refused.startswith(why), verdict


PARAPHRASES = [
    ("Is not married", "Is single"),  # a negation the contrast class explains
    ("Doesn't like horror films", "Dislikes horror movies"),
    ("Is vegetarian", "Does not eat meat"),
    ("Avoids gluten", "Eats a gluten-free diet"),
    ("Owns a greyhound named Biscuit", "Has a greyhound called Biscuit"),
    ("Has a black labrador", "Owns a black lab"),  # an abbreviation is the same value
    ("Has been a lawyer for ten years", "Has worked as a lawyer for a decade"),
    ("Wants to run a marathon next year", "Hopes to complete a marathon next year"),
    ("Her younger sister is Ana", "Has a younger sister called Ana"),
]


@pytest.mark.parametrize(("a", "b"), PARAPHRASES)
def test_paraphrases_are_not_refused(a: str, b: str) -> None:
    assert rm.contradiction(a, b) is None
    assert rm.contradiction(b, a) is None


@pytest.mark.parametrize(
    ("a", "b", "proof"),
    [
        ("Is not married", "Is single", "marital status: 'not married' = 'single'"),
        ("Doesn't eat meat", "Is vegetarian", "diet: 'not eat meat' = 'vegetarian'"),
        ("Is not happy at work", "Is unhappy at work", "happiness: 'not happy' = 'unhappy'"),
        ("Is not patient", "Is impatient", "patient/impatient: 'not patient' = 'impatient'"),
    ],
)
def test_a_negated_alternative_equals_its_complement(a: str, b: str, proof: str) -> None:
    assert rm.equivalence(a, b) == proof
    assert rm.equivalence(b, a) is not None
    assert rm.complement("marital status", 0) == 1  # `single` holds `unmarried`
    assert rm.complement("marital status", 2) is None  # not divorced: several remain


def test_equivalence_needs_a_negation_and_no_contradiction() -> None:
    assert rm.equivalence("Is single", "Is single and happy") is None  # nothing proven
    assert rm.equivalence("Is not married", "Is divorced") is None  # not divorced is open
    assert rm.equivalence("Is not married", "Is married") is None  # a contradiction
    assert rm.contradiction("Is not married", "Is married") is not None


@needs_embedder
def test_a_proven_equivalence_agrees_below_the_statement_threshold() -> None:
    m = _meaning()
    a, b = ("relationships", "Is not married"), ("relationships", "Is single")
    verdict = m.explain(a, b)
    assert verdict.similarity < rm.MEANING_THRESHOLD  # MiniLM: 0.41
    assert verdict.agree and verdict.rule == "equivalence", verdict
    assert verdict.equivalent is not None
    assert not rm.meaning(embedding_similarity(), checks=False).explain(a, b).agree


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Is a retired teacher", "Used to be a teacher"),
        ("Is a former nurse", "Used to work as a nurse"),
        ("Retired from the police last year", "Is a former police officer"),
    ],
)
def test_past_cues_on_both_sides_cancel(a: str, b: str) -> None:
    assert rm.contradiction(a, b) is None
    assert rm.contradiction(b, a) is None


def test_a_past_cue_on_one_side_still_negates() -> None:
    assert rm.contradiction("Used to smoke", "Smokes every day") is not None
    assert rm.contradiction("Is a former nurse", "Is a nurse") is not None
    assert rm.contradiction("Used to smoke", "Doesn't smoke") is None  # both end it


def test_compound_number_words_are_one_number() -> None:
    assert rm.analyse("Is twenty-nine").numbers == {29.0}
    assert rm.analyse("Has lived here for thirty five years").numbers == {35.0}
    assert rm.contradiction("Is twenty-nine", "Is 29") is None
    assert rm.contradiction("Is twenty-nine", "Is 92") is not None
    assert rm.analyse("Has twenty cats and one dog").numbers == {20.0, 1.0}


def test_claims_about_different_people_contradict() -> None:
    assert rm.analyse("Her son lives in Leeds").subject == {"son", "live"}
    got = rm.contradiction("Her son lives in Leeds", "Her daughter is a teacher in Leeds")
    assert got is not None and got.startswith("subjects differ"), got
    # one subject word in common, or an equivalent word, is the same person
    assert rm.contradiction("Her best friend is Chloe", "Her closest friend is Chloe") is None
    assert (
        rm.contradiction("Her mum is a nurse", "Her mother is a nurse", {("mum", "mother"): 0.9})
        is None
    )
    assert rm.analyse("Has a son").subject == frozenset()  # no possessive: no subject


def test_a_plan_does_not_match_a_fact() -> None:
    got = rm.contradiction("Wants to move to Peru", "Lives in Peru")
    assert got is not None and got.startswith("plan vs fact"), got
    assert rm.contradiction("Wants to learn Japanese", "Hopes to study Japanese") is None


def test_a_differing_head_may_match_any_content_word_of_the_other() -> None:
    # "mother" is no head of the second claim ("works" is), yet it is the same value
    cos = {("mum", "mother"): 0.9, ("mother", "mum"): 0.9}
    assert rm.contradiction("Her mum is a nurse", "Her mother works as a nurse", cos) is None
    assert rm.contradiction("Her mum is a nurse", "Her mother works as a nurse") is not None
    assert ("mum", "mother") in rm.word_pairs(
        rm.analyse("Her mum is a nurse"), rm.analyse("Her mother works as a nurse")
    )


def test_italian_non_negates() -> None:
    assert rm.contradiction("Ha un cane", "Non ha un cane") is not None


@needs_embedder
def test_no_cross_field_match_for_a_single_word() -> None:
    m = _meaning()
    verdict = m.explain(("name", "Emily"), ("family", "Emily's sister is called Ana"))
    assert not verdict.agree and verdict.rule.startswith("none"), verdict


@needs_embedder
def test_the_rule_without_checks_keeps_its_threshold() -> None:
    assert rm.meaning(embedding_similarity(), checks=False).threshold == (
        rm.LEGACY_MEANING_THRESHOLD
    )
    assert rm.meaning(embedding_similarity()).threshold == rm.MEANING_THRESHOLD


def test_claim_analysis() -> None:
    c = rm.analyse("Doesn't have a dog called Biscuit in Porto since 2019, nor two cats")
    assert c.tokens[:3] == ("does", "not", "have")
    assert {c.tokens[i] for i in c.negations} == {"not", "nor"}
    assert c.names == {"biscuit", "porto"}
    assert c.numbers == {2019.0, 2.0}
    assert {"dog", "cat"} <= c.heads
    assert rm.analyse("Can't stand spicy food").terms[0][:2] == ("liking", 1)
    assert rm.analyse("Can't stand spicy food").negations == ()  # "not" is the term's


@needs_embedder
def test_fields_outside_the_table_match_by_field_name_cosine() -> None:
    m = _meaning()
    pairs = [
        (
            ("work history", "Worked as a waiter before becoming a chef"),
            ("occupation", "Was a waiter before she trained as a chef"),
        ),
        (
            ("husband", "Her husband Mark is a firefighter"),
            ("relationships", "Is married to Mark, a firefighter"),
        ),
        (("husband", "Her husband is called Mark"), ("spouse", "Her husband is called Mark")),
    ]
    for a, b in pairs:
        verdict = m.explain(a, b)
        assert verdict.agree, verdict
        assert verdict.fields.startswith("field cosine"), verdict
        assert rm.meaning(embedding_similarity(), checks=False).match([a], [b]) == []  # before
    fields, cos, _ = m.fields(["work history", "husband"], ["occupation", "relationships"])
    assert fields.tolist() == [[True, False], [False, True]]
    assert cos[0, 0] >= rm.FIELD_THRESHOLD and cos[1, 1] >= rm.FIELD_THRESHOLD
    # a field in the table still uses the table: a related statement under another group
    # does not agree, but the same claim filed under another group does (cross-field)
    same = "Has a greyhound called Biscuit"
    assert m.match([("pets", same)], [("occupation", "Walks dogs for a living")]) == []
    verdict = m.explain(("pets", same), ("occupation", same))
    assert verdict.agree and verdict.rule == "cross-field", verdict
    assert m.match([("pets", "Yes")], [("occupation", "Yes")]) == []  # short values: no
    # outside the table, but not close enough to any name of the group
    assert not m.explain(
        ("favourite colour", "Her favourite colour is green"), ("food", "Likes green curry")
    ).agree


@needs_embedder
def test_without_checks_the_earlier_rule_matches_the_contradictions() -> None:
    before = rm.meaning(embedding_similarity(), checks=False)
    # the rule before the checks: these all matched (statement cosine >= 0.6, same group)
    for a, b in [
        (("pets", "Has a dog"), ("pets", "Has a cat")),
        (("food", "Is vegetarian"), ("food", "Is not vegetarian")),
        (("living situation", "Lives in Porto"), ("living situation", "Lives in Lisbon")),
    ]:
        assert before.match([a], [b]) != []
        assert _meaning().match([a], [b]) == []


def test_meaning_digest_covers_the_checks() -> None:
    # the digest recorded in run manifests changed with the checks (issue 24); the rule
    # without them keeps the digest the meaning matcher had before
    assert rm.LEGACY_MEANING_SHA256 == (
        "90d543aefc1ee4119880d7f995482f993c58802c311b6a5f7d3c8ccb8f5fecd5"
    )
    assert rm.MEANING_SHA256 == ("29b9e100ca44c695c6788622a38e51868cc5da61b5a93fd928d35d86ee275469")


CLAIM_PAIRS = Path(__file__).parents[2] / "benchmarks" / "data" / "claim_pairs.jsonl"


def test_labelled_claim_pairs_are_well_formed() -> None:
    rows = [json.loads(line) for line in CLAIM_PAIRS.read_text(encoding="utf-8").splitlines()]
    assert len(rows) >= 100
    assert len({r["id"] for r in rows}) == len(rows)
    assert {r["label"] for r in rows} == {"match", "no_match", "contradiction"}
    assert {r["split"] for r in rows} == {
        "dev",
        "held_out",
        "held_out_2",
        "held_out_3",
        "held_out_4",
        "held_out_5",
    }
    assert {
        "paraphrase", "synonym_field", "out_of_table_field", "negation", "antonym", "entity",
        "number", "noun", "unrelated", "other_language",
    } <= {r["kind"] for r in rows}  # fmt: skip
    for r in rows:
        for side in ("a", "b"):
            assert r[side]["field"].strip() and r[side]["statement"].strip(), r
    keys = [(r["a"]["statement"], r["b"]["statement"], r["a"]["field"]) for r in rows]
    assert len(set(keys)) == len(keys)


# -- paraphrases, glossed other-language claims, same numbers (issue 24.7, fifth round) -------


def test_paraphrases_are_rewritten_to_one_phrase() -> None:
    assert rm.canonical("Is teetotal") == "does not drink alcohol"
    assert rm.canonical("Doesn't drink alcohol") == "Doesn't drink alcohol"  # canonical already
    assert rm.canonical("Works for herself") == "is self-employed"
    assert rm.canonical("Left university without finishing her degree") == (
        "dropped out of university her degree"
    )
    assert rm.canonical("Has a dog") == "Has a dog"  # nothing to rewrite: as written
    # the rewrite removes the negation that made a paraphrase read as a contradiction
    assert rm.contradiction("Has no siblings", rm.canonical("Is an only child")) is None
    assert rm.contradiction("Has no siblings", "Is an only child") is not None
    # and keeps the negation a variant implies
    assert rm.contradiction(rm.canonical("Is teetotal"), "Drinks wine") is not None


def test_other_language_claims_are_glossed_only_when_mostly_known() -> None:
    assert rm.gloss("A un chien") == "has a dog"
    assert rm.gloss("Trabaja como profesora de matemáticas") == "works as teacher of maths"
    assert rm.gloss("Has a dog") is None
    assert rm.gloss("Is a nurse") is None


def test_same_numbers_prove_equivalence_and_same_values_hold() -> None:
    assert rm.equivalence("Is 29 years old", "Is twenty-nine") == "same numbers: 29"
    assert rm.contradiction("Is 29 years old", "Is 31") is not None
    assert rm.contradiction("Paints the coast", "Paints the seaside") is None
    assert rm.contradiction("Has a job", "Is out of work") is not None
    assert rm.contradiction("Is very tidy", "Is very messy") is not None
    assert rm.contradiction("Wants to lose weight", "Is trying to lose weight") is None


@needs_embedder
def test_meaning_matcher_uses_paraphrases_and_glosses() -> None:
    m = _meaning()
    assert m.explain(("health", "Is teetotal"), ("health", "Doesn't drink alcohol")).agree
    assert m.explain(("pets", "A un chien"), ("pets", "Has a dog")).agree
    assert not m.explain(("pets", "A un chien"), ("pets", "Has a cat")).agree
    assert not m.explain(("personality", "Is very tidy"), ("personality", "Is very messy")).agree
    assert m.explain(("politics", "Votes Green"), ("values", "Supports the Green Party")).agree


def test_added_field_groups_are_in_the_docs_and_read_only_with_the_checks() -> None:
    docs = (Path(__file__).parents[2] / "docs" / "tracks.md").read_text()
    table = docs[docs.index("| group | fields added |") :]
    for names in rm.FIELD_GROUPS_ADDED.values():
        for name in names:
            assert name in table, name
    assert rm.field_group("Profissão", added=True) == rm.field_group("job") == "occupation"
    assert rm.field_group("nationality", added=True) == rm.field_group("background", added=True)
    assert rm.field_group("nationality") == "nationality"  # the earlier table alone
