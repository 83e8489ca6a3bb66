"""LoCoMo's official QA scorer: hand-worked cases per rule, quirks, set F1, and the real golds."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dialogbench.data.locomo import CATEGORIES, load_locomo
from dialogbench.scoring import (
    ABSTENTION_PHRASES,
    CATEGORY_NAMES,
    answer_tokens,
    exact_match,
    f1_score,
    is_abstention,
    locomo_exact_match,
    locomo_score,
    multi_hop_f1,
    normalize_answer,
    official_round,
    open_domain_gold,
    score_many,
    set_f1,
    stem,
)

ANSWERABLE = ("multi-hop", "temporal", "open-domain", "single-hop")


def test_category_names_are_the_loaders() -> None:
    assert set(CATEGORY_NAMES) == set(CATEGORIES.values())


# --- normalisation -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # commas go, lowercase, '!' goes, a/the/and become spaces, whitespace collapses
        ("The cat, and A dog!", "cat dog"),
        # punctuation is deleted, not replaced by a space
        ("Self-care; 3.5", "selfcare 35"),
        ("1,000", "1000"),
        ("don't", "dont"),
        # punctuation goes before articles, so a hyphenated article is glued on and kept
        ("the-end", "theend"),
        ("a.", ""),
        # whole words only: Andrew, Anna, another, theatre survive
        ("Andrew and Anna saw another theatre", "andrew anna saw another theatre"),
        ("an", ""),
        ("...", ""),
        ("", ""),
        # only ASCII punctuation goes: the curly apostrophe and the em dash stay
        ("Melanie\u2019s  \u2014 the BEST", "melanie\u2019s \u2014 best"),
        ("  two\tspaces\n ", "two spaces"),
    ],
)
def test_normalize_answer(text: str, expected: str) -> None:
    assert normalize_answer(text) == expected


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("caresses", "caress"),  # Porter's paper, step 1a: SSES -> SS
        ("ponies", "poni"),  # IES -> I
        ("running", "run"),  # step 1b: ING goes, double consonant undoubled
        ("was", "wa"),  # step 1a: S goes (length 3 > 2, so it is stemmed)
        ("as", "as"),  # NLTK: words of <= 2 letters are left alone
        ("skies", "sky"),  # NLTK irregular-forms table
        ("dying", "die"),  # NLTK irregular-forms table
        ("hiking", "hike"),  # (m=1 and *o) -> E
        ("generously", "gener"),
    ],
)
def test_stem_is_nltk_default_porter(word: str, expected: str) -> None:
    assert stem(word) == expected


def test_answer_tokens() -> None:
    assert answer_tokens("She went to the beach with her kids") == [
        "she",
        "went",
        "to",
        "beach",
        "with",
        "her",
        "kid",
    ]


# --- token F1 (categories 2, 3, 4) -----------------------------------------------------------


def test_single_hop_partial_overlap() -> None:
    # pred tokens [she went to beach with her kid] (7), gold [beach] (1), overlap 1
    # P = 1/7, R = 1/1, F1 = 2*(1/7)*1 / (1/7 + 1) = (2/7)/(8/7) = 0.25
    got = locomo_score("She went to the beach with her kids", "the beach", "single-hop")
    assert got == pytest.approx(0.25, abs=1e-12)


def test_temporal_is_plain_f1() -> None:
    # "7 May, 2023" -> [7 may 2023]: identical token bags
    assert locomo_score("7 May 2023", "7 May, 2023", "temporal") == 1.0
    # pred [may 2023] vs gold [7 may 2023]: overlap 2, P = 2/2, R = 2/3
    # F1 = 2*1*(2/3) / (1 + 2/3) = (4/3)/(5/3) = 0.8
    assert locomo_score("May 2023", "7 May 2023", "temporal") == pytest.approx(0.8, abs=1e-12)
    # no special case for dates: a differently written date scores 0
    assert locomo_score("2023-05-07", "7 May 2023", "temporal") == 0.0


def test_numbers_are_scored_as_strings() -> None:
    # the file holds the int 2022; the official code scores str(2022)
    # pred [in 2022] vs gold [2022]: P = 1/2, R = 1, F1 = 2*(1/2)/(3/2) = 2/3
    assert locomo_score("In 2022", str(2022), "temporal") == pytest.approx(2 / 3, abs=1e-12)
    assert locomo_score("2", str(2), "multi-hop") == 1.0
    # punctuation deletion makes these equal: "1,000" -> "1000", "3.5" -> "35"
    assert locomo_score("1000", "1,000", "single-hop") == 1.0
    assert locomo_score("35", "3.5", "single-hop") == 1.0
    assert locomo_score("three", "3", "single-hop") == 0.0


def test_articles_and_stemming() -> None:
    # "a dog" and "the dogs" both become [dog]
    assert locomo_score("a dog", "the dogs", "single-hop") == 1.0
    # "running" and "runs" both stem to "run"
    assert f1_score("running", "runs") == 1.0


def test_repeated_tokens_count_as_a_multiset() -> None:
    # pred [dog dog cat] (3), gold [dog] (1): Counter overlap min(2, 1) = 1
    # P = 1/3, R = 1, F1 = (2/3)/(4/3) = 0.5
    assert f1_score("dog dog cat", "dog") == pytest.approx(0.5, abs=1e-12)


@pytest.mark.parametrize("category", ANSWERABLE)
@pytest.mark.parametrize("prediction", ["", "   ", "?!", "...", "the", "a, an, and"])
def test_empty_or_punctuation_only_prediction_scores_zero(prediction: str, category: str) -> None:
    assert locomo_score(prediction, "Paris", category) == 0.0


def test_gold_that_normalises_to_nothing_scores_zero_even_against_itself() -> None:
    # official quirk: no overlapping tokens -> 0, including empty vs empty
    assert f1_score("The", "The") == 0.0
    assert f1_score("", "") == 0.0


def test_open_domain_cuts_the_gold_at_the_first_semicolon() -> None:
    gold = "Likely no; since this one went badly"
    assert open_domain_gold(gold) == "Likely no"
    assert open_domain_gold("a; b; c") == "a"
    assert open_domain_gold("no semicolon ") == "no semicolon"
    assert locomo_score("Likely no", gold, "open-domain") == 1.0
    # the prediction is not cut: pred [like no sinc thi on went badli] (7) vs gold [like no]
    # P = 2/7, R = 1, F1 = (4/7)/(9/7) = 4/9
    got = locomo_score("Likely no; since this one went badly", gold, "open-domain")
    assert got == pytest.approx(4 / 9, abs=1e-12)
    # other categories do not cut: gold [like no sinc thi on went badli] vs pred [like no]
    assert locomo_score("Likely no", gold, "single-hop") == pytest.approx(4 / 9, abs=1e-12)


# --- multi-hop (category 1) ------------------------------------------------------------------


def test_multi_hop_averages_over_gold_parts() -> None:
    # gold parts [hike] [paint] [swim]; the single pred part is [paint hike]
    # hike: P = 1/2, R = 1 -> 2/3; paint: 2/3; swim: 0  ->  mean (2/3 + 2/3 + 0)/3 = 4/9
    gold = "hiking, painting, swimming"
    assert locomo_score("painting and hiking", gold, "multi-hop") == pytest.approx(4 / 9)
    # unsplit F1 would differ: pred [paint hike] vs gold [hike paint swim]
    # P = 2/2, R = 2/3 -> 0.8
    assert f1_score("painting and hiking", gold) == pytest.approx(0.8, abs=1e-12)
    # split the prediction too and every gold part finds an exact match except swimming
    # (1 + 1 + 0)/3 = 2/3
    assert multi_hop_f1("painting, hiking", gold) == pytest.approx(2 / 3, abs=1e-12)


def test_multi_hop_direction_extra_prediction_parts_are_free() -> None:
    # mean is over GOLD parts, max over prediction parts: extra guesses cost nothing
    assert locomo_score("London, Paris, Rome", "Paris, London", "multi-hop") == 1.0
    assert locomo_score("Paris, London", "Paris", "multi-hop") == 1.0
    # ...but a missing gold part does: [paris]=1, [london]=0 -> 0.5
    assert locomo_score("Paris", "Paris, London", "multi-hop") == 0.5


def test_multi_hop_splits_on_commas_only() -> None:
    # gold "Paris and London" is one part [paris london]; pred parts [paris], [london]
    # each: P = 1, R = 1/2 -> 2/3; best is 2/3; mean over one gold part = 2/3
    got = locomo_score("Paris, London", "Paris and London", "multi-hop")
    assert got == pytest.approx(2 / 3, abs=1e-12)
    # an empty gold part (trailing comma) can never be matched: (1 + 0)/2
    assert locomo_score("Paris", "Paris,", "multi-hop") == 0.5


# --- adversarial (category 5) ----------------------------------------------------------------


def test_abstention_phrases() -> None:
    assert ABSTENTION_PHRASES == ("no information available", "not mentioned")


@pytest.mark.parametrize(
    ("prediction", "expected"),
    [
        ("Not mentioned in the conversation", 1.0),
        ("NO INFORMATION AVAILABLE.", 1.0),
        ("The answer is not mentioned anywhere", 1.0),
        ("not mentionedd", 1.0),  # plain substring match
        ("No information is available", 0.0),  # the exact phrase is needed
        ("not-mentioned", 0.0),  # no normalisation before matching
        ("not  mentioned", 0.0),  # two spaces
        ("It was never mentioned", 0.0),
        ("self-care is important", 0.0),
        ("", 0.0),
    ],
)
def test_adversarial(prediction: str, expected: float) -> None:
    assert locomo_score(prediction, "self-care is important", "adversarial") == expected
    assert locomo_score(prediction, None, "adversarial") == expected
    assert is_abstention(prediction) is (expected == 1.0)


# --- set F1 (not official) ---------------------------------------------------------------------


def test_set_f1_differs_from_official_f1_on_repeated_tokens() -> None:
    # pred [dog dog cat], gold [dog]
    # official multiset: overlap 1, P = 1/3, R = 1 -> (2/3)/(4/3) = 0.5
    # set: pred {dog cat}, gold {dog}: overlap 1, P = 1/2, R = 1 -> 1/(3/2) = 2/3
    assert f1_score("dog dog cat", "dog") == pytest.approx(0.5, abs=1e-12)
    assert set_f1("dog dog cat", "dog") == pytest.approx(2 / 3, abs=1e-12)
    # pred [dog], gold [dog dog]: official P = 1, R = 1/2 -> 2/3; set -> {dog} = {dog} -> 1
    assert f1_score("dog", "the dogs, and the dog") == pytest.approx(2 / 3, abs=1e-12)
    assert set_f1("dog", "the dogs, and the dog") == 1.0
    assert set_f1("", "dog") == 0.0


_WORDS = st.sampled_from(["paris", "dogs", "running", "the", "and", "2022", "hiking", "cat", "x"])


@settings(max_examples=200, deadline=None)
@given(pred=st.lists(_WORDS, max_size=6), gold=st.lists(_WORDS, max_size=6))
def test_f1_properties(pred: list[str], gold: list[str]) -> None:
    p, g = " ".join(pred), " ".join(gold)
    score = f1_score(p, g)
    assert 0.0 <= score <= 1.0
    assert score == f1_score(g, p)
    pt, gt = answer_tokens(p), answer_tokens(g)
    if len(set(pt)) == len(pt) and len(set(gt)) == len(gt):
        assert set_f1(p, g) == pytest.approx(score, abs=1e-12)


# --- API -------------------------------------------------------------------------------------


def test_score_many_matches_locomo_score() -> None:
    preds = ["a dog", "Paris", "Not mentioned", "Likely no"]
    golds: list[str | None] = ["the dogs", "Paris, London", None, "Likely no; because"]
    cats = ["single-hop", "multi-hop", "adversarial", "open-domain"]
    assert score_many(preds, golds, cats) == [1.0, 0.5, 1.0, 1.0]
    assert score_many([], [], []) == []
    with pytest.raises(ValueError, match="lengths differ"):
        score_many(preds, golds, cats[:2])


@pytest.mark.parametrize(
    ("prediction", "gold", "expected"),
    [
        ("Paris", "paris.", True),  # case and punctuation go
        ("7 May, 2023", "May 7 2023", True),  # compared as sets: order does not count
        ("dog dog", "the dog", True),  # repeats and articles do not count either
        ("dogs", "dog", False),  # no stemming (unlike the F1)
        ("a red car", "car", False),  # an extra word is no match
        ("2022", "2022", True),
        ("", "a", True),  # both normalise to nothing: equal empty sets, officially a match
    ],
)
def test_exact_match_is_the_official_set_comparison(
    prediction: str, gold: str, expected: bool
) -> None:
    assert exact_match(prediction, gold) is expected


def test_exact_match_per_category() -> None:
    # open-domain: the gold is cut at its first ';' first, as the QA evaluation does
    assert locomo_exact_match("Likely yes", "Likely yes; because she said so", "open-domain") == 1.0
    assert locomo_exact_match("Likely yes", "Likely yes; because", "single-hop") == 0.0
    # multi-hop: the whole strings, as sets (no per-part split as in its F1)
    assert locomo_exact_match("London, Paris", "Paris, London", "multi-hop") == 1.0
    assert locomo_exact_match("Paris", "Paris, London", "multi-hop") == 0.0
    assert locomo_exact_match("Not mentioned", None, "adversarial") is None  # no gold
    with pytest.raises(ValueError, match="needs a gold answer"):
        locomo_exact_match("x", None, "temporal")
    with pytest.raises(ValueError, match="unknown LoCoMo category"):
        locomo_exact_match("x", "x", "commonsense")


def test_bad_inputs_raise() -> None:
    with pytest.raises(ValueError, match="unknown LoCoMo category"):
        locomo_score("x", "x", "commonsense")
    with pytest.raises(ValueError, match="unknown LoCoMo category"):
        locomo_score("x", "x", "1")
    with pytest.raises(ValueError, match="needs a gold answer"):
        locomo_score("x", None, "single-hop")


def test_scores_are_python_floats() -> None:
    assert type(locomo_score("a", "b", "single-hop")) is float
    assert type(locomo_score("a", "a, b", "multi-hop")) is float
    assert type(locomo_score("x", None, "adversarial")) is float


def test_official_round() -> None:
    # evaluate_qa.py stores round(score, 3). 0.0375 is stored in binary as 0.03749999...:
    # Python rounds that correctly down to 0.037; numpy (multi-hop scores are numpy floats)
    # computes 0.0375 * 1000 = 37.5 exactly, rounds half to even -> 38 -> 0.038.
    assert official_round(0.0375, "single-hop") == 0.037
    assert official_round(0.0375, "multi-hop") == 0.038
    assert official_round(4 / 9, "temporal") == 0.444
    assert official_round(1.0, "adversarial") == 1.0


# --- the real LoCoMo file --------------------------------------------------------------------


def test_every_gold_scores_one_against_itself(locomo_dir: Path) -> None:
    questions = [q for s in load_locomo(locomo_dir).subjects for q in s.questions]
    answerable = [q for q in questions if q.category != "adversarial"]
    assert len(answerable) == 1540
    failures = []
    for q in answerable:
        assert q.answer is not None
        pred = open_domain_gold(q.answer) if q.category == "open-domain" else q.answer
        if locomo_score(pred, q.answer, q.category) != 1.0:
            failures.append((q.id, q.answer))
        if locomo_exact_match(pred, q.answer, q.category) != 1.0:
            failures.append((q.id, "exact match"))
    assert failures == []
    # open-domain golds carrying a '; rationale' do not score 1 when echoed whole (11 of them)
    with_rationale = [q for q in answerable if q.category == "open-domain" and ";" in str(q.answer)]
    assert len(with_rationale) == 11
    assert all(locomo_score(str(q.answer), q.answer, q.category) < 1.0 for q in with_rationale)


def test_adversarial_golds(locomo_dir: Path) -> None:
    adversarial = [
        q
        for s in load_locomo(locomo_dir).subjects
        for q in s.questions
        if q.category == "adversarial"
    ]
    assert len(adversarial) == 446
    scores = score_many(
        ["Not mentioned in the conversation"] * len(adversarial),
        [q.answer for q in adversarial],
        ["adversarial"] * len(adversarial),
    )
    assert scores == [1.0] * len(adversarial)
    # data quirk: two trap answers are themselves 'Not mentioned', so echoing them scores 1
    echoed = [q.id for q in adversarial if locomo_score(str(q.answer), q.answer, q.category)]
    assert echoed == ["conv-30-q79", "conv-30-q103"]
