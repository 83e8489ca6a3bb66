"""Label normalisers: gender, age bands (years and wording), Big Five, sentiment."""

from __future__ import annotations

import pytest

from dialogbench.data.demo.labels import (
    age_band,
    normalise_age,
    normalise_gender,
    normalise_sentiment,
    parse_big_five,
)
from dialogbench.data.demo.model import AGE_BANDS


@pytest.mark.parametrize(
    ("years", "band"),
    [
        (5, None),
        (6, "childhood"),
        (11, "childhood"),
        (12, "adolescence"),
        (14, "adolescence"),
        (15, "youth"),
        (24, "youth"),
        (25, "adulthood"),
        (39, "adulthood"),
        (40, "middle age"),
        (59, "middle age"),
        (60, "old age"),
        (69, "old age"),
        (70, "advanced age"),
        (95, "advanced age"),
    ],
)
def test_age_band_edges_go_to_the_older_band(years: int, band: str | None) -> None:
    assert age_band(years) == band


@pytest.mark.parametrize(
    ("text", "band"),
    [
        ("Childhood: 6-11 years old", "childhood"),
        ("Adolescence", "adolescence"),
        ("Youth: 15-24 years old", "youth"),
        ("Adulthood: 25-40 years old", "adulthood"),
        ("Middle age: 40-60 years old", "middle age"),
        ("Old age: 60 years and above", "old age"),
        ("Advanced age: 70 years and above", "advanced age"),
        ("成年期／壮年期：25～40岁", "adulthood"),  # noqa: RUF001 (DEMO writes full-width forms)
        ("中年期：40～60岁", "middle age"),  # noqa: RUF001 (DEMO writes full-width forms)
        ("高龄期：70岁以后", "advanced age"),
        ("老年期", "old age"),
        ("少年期：12～15岁", "adolescence"),  # noqa: RUF001 (DEMO writes full-width forms)
        ("about thirty", None),
    ],
)
def test_age_wording(text: str, band: str | None) -> None:
    assert normalise_age(text) == band
    assert band is None or band in AGE_BANDS


def test_gender_and_sentiment_words() -> None:
    assert [normalise_gender(g) for g in ("M", "Male", "男", "F", "woman", "女")] == [
        "male",
        "male",
        "male",
        "female",
        "female",
        "female",
    ]
    assert normalise_gender("Unknown") is None
    assert [normalise_sentiment(s) for s in ("Positive", "负向", "中性", "积极")] == [
        "positive",
        "negative",
        "neutral",
        "positive",
    ]


def test_big_five_pairs_english_chinese_and_dict() -> None:
    traits, bad = parse_big_five([["Openness", "High"], ["神经质", "低"], ["谦逊性", "高"]])
    assert traits == {"openness": "high", "agreeableness": "high", "neuroticism": "low"}
    assert bad == []
    traits, bad = parse_big_five({"Extraversion": "Low", "Charm": "High", "Openness": "Unknown"})
    assert traits == {"extraversion": "low"}
    assert bad == ["'Charm': 'High'"]
