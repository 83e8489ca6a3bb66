"""Normalising DEMO label values: gender, age band, Big Five trait and level, sentiment.

DEMO's released answers (and models answering DEMO-style prompts) write labels in
several forms: `"M"`, `"Male"`, `"男"`; `"Adulthood: 25-40 years old"`, `"成年期"`;
`["Openness", "High"]`, `["开放性", "高"]`; `"Positive"`, `"正向"`. These functions map
each to the model's canonical value, or return None when the value says "unknown" or is
not recognised (callers decide whether that is an error).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import get_args

from dialogbench.data.demo.model import AGE_BANDS, TRAITS, Gender, Level

SENTIMENTS = ("positive", "negative", "neutral")
GENDERS: tuple[Gender, ...] = get_args(Gender)
LEVELS: tuple[Level, ...] = get_args(Level)

UNKNOWN_WORDS = frozenset({"", "unknown", "n/a", "na", "none", "null", "未知", "不详", "无"})
"""Values that mean "not known": such a field is left out of the gold."""

_GENDER = {
    "m": "male",
    "male": "male",
    "man": "male",
    "men": "male",
    "boy": "male",
    "男": "male",
    "男性": "male",
    "f": "female",
    "female": "female",
    "woman": "female",
    "women": "female",
    "girl": "female",
    "女": "female",
    "女性": "female",
}

_AGE_WORDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # checked in this order, so "advanced age" wins over "age" words and 高龄 over 老年
    ("advanced age", ("advanced age", "高龄")),
    ("old age", ("old age", "老年")),
    ("middle age", ("middle age", "middle-age", "中年")),
    ("adulthood", ("adulthood", "成年", "壮年")),
    ("youth", ("youth", "青年")),
    ("adolescence", ("adolescence", "少年")),
    ("childhood", ("childhood", "童年")),
)

_TRAIT = {
    "openness": "openness",
    "openness to experience": "openness",
    "openness to experiences": "openness",
    "开放性": "openness",
    "conscientiousness": "conscientiousness",
    "尽责性": "conscientiousness",
    "责任心": "conscientiousness",
    "严谨性": "conscientiousness",
    "extraversion": "extraversion",
    "extroversion": "extraversion",
    "外向性": "extraversion",
    "agreeableness": "agreeableness",
    "谦逊性": "agreeableness",
    "宜人性": "agreeableness",
    "亲和性": "agreeableness",
    "neuroticism": "neuroticism",
    "神经质": "neuroticism",
    "神经质性": "neuroticism",
}

_LEVEL = {"high": "high", "高": "high", "low": "low", "低": "low"}

_SENTIMENT = {
    "positive": "positive",
    "pos": "positive",
    "正向": "positive",
    "积极": "positive",
    "正面": "positive",
    "negative": "negative",
    "neg": "negative",
    "负向": "negative",
    "消极": "negative",
    "负面": "negative",
    "neutral": "neutral",
    "中性": "neutral",
    "中立": "neutral",
}


_TO = "\N{FULLWIDTH TILDE}"  # between the years of DEMO's Chinese age bands

WRITTEN: dict[str, dict[str, str]] = {
    "en": {
        "male": "Male",
        "female": "Female",
        "high": "High",
        "low": "Low",
        "positive": "Positive",
        "negative": "Negative",
        "neutral": "Neutral",
        "openness": "Openness",
        "conscientiousness": "Conscientiousness",
        "extraversion": "Extraversion",
        "agreeableness": "Agreeableness",
        "neuroticism": "Neuroticism",
        "childhood": "Childhood: 6-11 years old",
        "adolescence": "Adolescence: 12-15 years old",
        "youth": "Youth: 15-24 years old",
        "adulthood": "Adulthood: 25-40 years old",
        "middle age": "Middle age: 40-60 years old",
        "old age": "Old age: over 60 years old",
        "advanced age": "Advanced age: over 70 years old",
    },
    "zh": {
        "male": "男",
        "female": "女",
        "high": "高",
        "low": "低",
        "positive": "正向",
        "negative": "负向",
        "neutral": "中性",
        "openness": "开放性",
        "conscientiousness": "尽责性",
        "extraversion": "外向性",
        "agreeableness": "谦逊性",
        "neuroticism": "神经质",
        "childhood": f"童年期：6{_TO}11岁",
        "adolescence": f"少年期：12{_TO}15岁",
        "youth": f"青年期：15{_TO}24岁",
        "adulthood": f"成年期：25{_TO}40岁",
        "middle age": f"中年期：40{_TO}60岁",
        "old age": "老年期：60岁以上",
        "advanced age": "高龄期：70岁以上",
    },
}
"""A canonical label as DEMO's released answers write it in each language (the
normalisers below read each of these back to its canonical value)."""


def written(value: str, lang: str) -> str:
    """`value` (a canonical gender, level, sentiment, trait or age band) as DEMO writes it
    in `lang`; any other value as given."""
    return WRITTEN.get(lang, {}).get(value, value)


def _key(value: str) -> str:
    return " ".join(value.strip().lower().replace("_", " ").split())


def is_unknown(value: object) -> bool:
    """True for None and for words such as "Unknown" / "未知" that say nothing."""
    return value is None or (isinstance(value, str) and _key(value) in UNKNOWN_WORDS)


def normalise_gender(value: str) -> str | None:
    """`"M"`, `"Male"`, `"woman"`, `"男"` -> `"male"` / `"female"`; None otherwise."""
    return _GENDER.get(_key(value))


def age_band(years: int) -> str | None:
    """The DEMO age band of an age in years; None under 6 (no band covers it).

    DEMO's bands overlap at their edges (15-24 and 25-40, 40-60, 60+ and 70+); an age on
    an edge goes to the older band: 6-11 childhood, 12-14 adolescence, 15-24 youth,
    25-39 adulthood, 40-59 middle age, 60-69 old age, 70+ advanced age.
    """
    bounds = ((70, 6), (60, 5), (40, 4), (25, 3), (15, 2), (12, 1), (6, 0))
    for lower, index in bounds:
        if years >= lower:
            return AGE_BANDS[index]
    return None


def normalise_age(value: str) -> str | None:
    """A DEMO age band from its English or Chinese wording, with or without the years."""
    key = _key(value)
    for band, words in _AGE_WORDS:
        if any(word in key for word in words):
            return band
    return None


def normalise_trait(value: str) -> str | None:
    """`"Openness"`, `"Openness to Experience"`, `"开放性"` -> `"openness"`; None otherwise."""
    return _TRAIT.get(_key(value).replace("-", " "))


def normalise_level(value: str) -> str | None:
    """`"High"` / `"高"` -> `"high"`, `"Low"` / `"低"` -> `"low"`; None otherwise."""
    return _LEVEL.get(_key(value).strip("\"'"))


def normalise_sentiment(value: str) -> str | None:
    """`"Positive"`, `"正向"`, `"积极"` -> `"positive"` (likewise negative, neutral)."""
    return _SENTIMENT.get(_key(value))


def parse_big_five(value: object) -> tuple[dict[str, str], list[str]]:
    """DEMO's `[[trait, level], ...]` (or a `{trait: level}` object) -> `{trait: level}`.

    Returns the parsed traits and the entries it could not read (unknown trait or level,
    or a malformed pair); entries whose level is "unknown" are left out silently.
    """
    pairs: list[tuple[object, object]]
    if isinstance(value, dict):
        pairs = list(value.items())
    elif isinstance(value, list):
        pairs = []
        for entry in value:
            if isinstance(entry, list | tuple) and len(entry) == 2:
                pairs.append((entry[0], entry[1]))
            else:
                pairs.append((entry, None))
    else:
        return {}, [repr(value)]
    traits: dict[str, str] = {}
    bad: list[str] = []
    for name, level in pairs:
        if isinstance(level, str) and is_unknown(level):
            continue
        trait = normalise_trait(name) if isinstance(name, str) else None
        norm = normalise_level(level) if isinstance(level, str) else None
        if trait is None or norm is None:
            bad.append(f"{name!r}: {level!r}")
        else:
            traits[trait] = norm
    return {t: traits[t] for t in TRAITS if t in traits}, bad


_INT = re.compile(r"-?\d+(?:\.\d+)?")


def as_number(value: object) -> float | None:
    """A number given as one (`7`, `7.5`) or in text (`"8分"`, via `first_number`); None
    for anything else, booleans included."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    return first_number(value) if isinstance(value, str) else None


def first_number(text: str) -> float | None:
    """The first whole number in `text` (`"10 (very close)"` -> 10.0), or None."""
    match = _INT.search(text)
    return float(match.group()) if match else None


# -- one label set ----------------------------------------------------------------------

_SEPARATORS = re.compile(r"[\s_\-]+")


def label_key(text: str) -> str:
    """Lower case, `_`/`-`/spaces as one space, no surrounding quotes or final full stop."""
    text = text.strip().strip("\"'\u201c\u201d\u2018\u2019").strip().rstrip(".。").strip()
    return _SEPARATORS.sub(" ", text.lower()).strip()


_NORMALISERS: tuple[Callable[[str], str | None], ...] = (
    normalise_gender,
    normalise_level,
    normalise_sentiment,
    normalise_age,
)
"""The ways of writing a label this module knows (`"boy"` -> male, `"高"` -> high, ...)."""


def match_label(value: object, labels: Sequence[str]) -> str | None:
    """The label of `labels` that `value` names, or None: the same reading for a gold label
    and for a model's answer. A value matches a label equal to it after `label_key`, else
    the label one of this module's normalisers (gender, level, sentiment, age band) maps that
    to, when that label is in the set."""
    if not isinstance(value, str):
        return None
    by_key = {label_key(label): label for label in labels}
    key = label_key(value)
    if key in by_key:
        return by_key[key]
    for normalise in _NORMALISERS:
        canonical = normalise(key)
        if canonical is not None and label_key(canonical) in by_key:
            return by_key[label_key(canonical)]
    return None
