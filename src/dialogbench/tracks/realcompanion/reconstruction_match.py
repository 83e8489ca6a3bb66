"""Claim-level matching of a written profile or persona against another one (gold or a run).

A record is a (field, statement) pair: a profile claim's `field`, or a persona entry's
`dimension`, with its statement. Two matchers decide when predicted record p and reference
record g agree; both then pair records one-to-one.

`lexical` (strict; the original rule)
    1. the fields are equal once normalised (`norm_field`: lower case, punctuation to
       spaces, plurals folded - "Hobbies" = "hobby" - and the few aliases of
       `FIELD_ALIASES`, e.g. "job" -> "occupation"), and
    2. the statements' content-word F1 (`content_words`: lower-case words of two letters or
       more, English stop words removed, plurals folded) is at least `threshold` (default
       0.25; 0 = field matching only). A statement with no content word at all (`"F"`,
       `"42"`, `"no"`) is compared on all its words instead, so a one-letter value matches
       itself.

`meaning`
    1. the fields fall in the same group of `FIELD_GROUPS` (a table of synonyms, after the
       same normalisation: `relationships` = `family` = `partner`, `pets` = `animals`,
       `hobbies` = `interests` = `reading`); a field outside the table agrees with another
       field when the best cosine of their names' embeddings (a tabled field standing for
       every name of its group) is at least `FIELD_THRESHOLD` (`work history` ~
       `workplace`, `husband` ~ `spouse`); two tabled fields of different groups do not;
    2. and the statements mean the same: the cosine similarity of their sentence
       embeddings (`similarity_model`, the packaged MiniLM embedder) is at least
       `threshold` (default `MEANING_THRESHOLD`), or they are equal once normalised. Short
       values (one or two words on both sides, e.g. `"F"` against `"female"`) are not
       embedded: they agree when equal after the abbreviations of `VALUE_SYNONYMS` are
       expanded, so `"F"` matches `"female"` and never `"M"`;
       or, whatever the fields, the statements' cosine is at least `CROSS_FIELD_THRESHOLD`
       (neither a single word, not two short values: "Is allergic to peanuts" under
       `dietary restrictions` = "Has a peanut allergy" under `diet`);
       or, fields agreeing, the checks prove the statements equivalent (`equivalence`: a
       negated alternative of a contrast class = its complement, "is not married" = "is
       single") and their cosine is at least `EQUIVALENCE_THRESHOLD`;
    3. and they do not contradict each other (`contradiction`, which says why): no two
       different alternatives of a `CONTRASTS` class (likes / dislikes, married / single /
       divorced, older / younger; "not married" agrees with "single"), no word against its
       prefixed opposite (happy / unhappy), no negation in one only (`NEGATIONS`,
       `NEGATION_PHRASES`: "is not vegetarian", "never drinks", "no longer lives in"; the
       past cues "used to", "former" cancel when both claims are about the past, `PAST_CUES`,
       `PAST_WORDS`: "a retired miner" = "used to be a miner"), no different numbers (34 /
       41; "twenty-nine" is 29), no plan against a fact (`PLAN_CUES`: "wants to travel to
       Peru" / "lives in Peru"), no different people (claims opening on a possessive: "her
       son" / "her daughter"), no different names (capitalised words: Porto / Lisbon),
       and, when the two share their frame ("has a dog" / "has a cat"), no noun-phrase
       head without a counterpart among the other's content words; differing words count
       as the same value when one abbreviates the other (`lab` / `labrador`) or their
       embeddings' cosine is at least `WORD_EQUIVALENT` (`mum` / `mother`).
       `meaning(..., checks=False)` is the rule before step 3, the field-name cosine, the
       cross-field and equivalence rules, at `LEGACY_MEANING_THRESHOLD`
       (`LEGACY_MEANING_SHA256`), kept to measure against.

Pairing is one-to-one and optimal: among the agreeing pairs, the largest number of pairs,
and among those the largest total similarity (`assign`: scipy's `linear_sum_assignment` on
the similarity matrix, each agreeing pair worth one more than any total of similarities).
So two near-duplicate gold claims each keep their own match, and the gold replayed verbatim
scores precision 1 and recall 1. It is deterministic and symmetric, so it also measures how
far two runs agree. From the matched count: precision = matched / predicted (NaN with no
prediction), recall = matched / reference (NaN with no reference), F1 = 2 matched /
(predicted + reference) (NaN when both are empty).

Matched pairs are then compared on what else a claim carries (`agreement`): the absolute
difference of their confidences, the overlap of their validity windows and of their
evidence ids; for persona entries the overlap of their grounds and whether both call the
entry a working hypothesis.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import numpy.typing as npt
from scipy.optimize import linear_sum_assignment

from dialogbench.data.model import PersonaEntry, ProfileClaim
from dialogbench.retrieval.bm25 import tokenize

Record = tuple[str, str]
"""(field or dimension, statement)."""

FloatArray = npt.NDArray[np.float64]

KINDS = ("profile", "persona")
MATCHERS = ("lexical", "meaning")
LEXICAL_THRESHOLD = 0.25
MEANING_THRESHOLD = 0.45
"""Default statement similarity at which two records agree, per matcher (the meaning
matcher's chosen on the dev split of the labelled pairs, `benchmarks/reconstruction_matching.py
--sweep`)."""
LEGACY_MEANING_THRESHOLD = 0.6
"""The meaning matcher's default threshold without its checks (`meaning(..., checks=False)`):
the rule before them."""

FIELD_ALIASES: dict[str, str] = {
    "job": "occupation",
    "work": "occupation",
    "career": "occupation",
    "profession": "occupation",
    "employment": "occupation",
    "interest": "hobby",
    "pastime": "hobby",
    "hobby and interest": "hobby",
    "home": "living situation",
    "housing": "living situation",
    "residence": "living situation",
    "personality trait": "personality",
    "trait": "personality",
    "communication style": "speaking style",
    "style of speaking": "speaking style",
}
"""The lexical matcher's aliases: normalised field -> the field it is read as (applied after
plurals are folded)."""

FIELD_GROUPS: dict[str, tuple[str, ...]] = {
    "occupation": (
        "occupation", "job", "work", "career", "profession", "employment", "employer",
        "workplace", "business", "work life",
    ),
    "relationships": (
        "relationship", "family", "partner", "spouse", "marriage", "marital status",
        "child", "kid", "parent", "sibling", "dating", "romance", "friend", "friendship",
        "social life", "social circle", "relative",
    ),
    "pets": ("pet", "animal", "dog", "cat"),
    "hobby": (
        "hobby", "interest", "pastime", "leisure", "activity", "reading", "sport",
        "hobby and interest", "like", "entertainment", "music", "art",
    ),
    "living situation": (
        "living situation", "home", "housing", "residence", "location", "city", "address",
        "hometown", "where they live", "place", "country",
    ),
    "health": ("health", "medical", "wellbeing", "mental health", "fitness", "illness"),
    "education": ("education", "school", "study", "degree", "university", "college"),
    "name": ("name", "full name", "nickname"),
    "age": ("age", "birthday", "date of birth", "birth date"),
    "gender": ("gender", "sex"),
    "food": ("food", "diet", "cuisine", "favourite food", "favorite food", "eating"),
    "goals": ("goal", "plan", "aspiration", "ambition", "dream", "future plan"),
    "personality": ("personality", "trait", "personality trait", "character", "temperament"),
    "speaking style": (
        "speaking style", "communication style", "style of speaking", "tone", "communication",
    ),
    "values": ("value", "belief", "principle"),
    "coping style": ("coping style", "coping", "stress response", "stress"),
    "anxieties": ("anxiety", "fear", "worry", "concern", "insecurity"),
    "humour": ("humour", "humor", "sense of humour", "sense of humor"),
    "decision making": ("decision making", "decision", "decision style", "choice"),
    "emotions": ("emotion", "emotional style", "mood", "feeling"),
}  # fmt: skip
"""The meaning matcher's field synonyms: group -> the normalised fields it holds (plurals
folded first, so "pets" and "animals" are looked up as "pet" and "animal"). The rule
without the checks reads this table alone; with them, `FIELD_GROUPS_ADDED` too."""

FIELD_GROUPS_ADDED: dict[str, tuple[str, ...]] = {
    "occupation": ("commute", "beruf", "travail", "trabajo", "profissao"),
    "hobby": ("weekend",),
    "food": ("dietary restriction",),
    "origin": ("nationality", "background"),
    "values": ("politics",),
}  # fmt: skip
"""Field names added to `FIELD_GROUPS` (or new groups) for the meaning matcher with its
checks, each from a dev or earlier held-out pair whose field names embed apart (accents
are folded before lookup: `profissão` is `profissao`)."""

MEANING_FIELD_GROUPS: dict[str, tuple[str, ...]] = {
    g: FIELD_GROUPS.get(g, ()) + FIELD_GROUPS_ADDED.get(g, ())
    for g in (*FIELD_GROUPS, *FIELD_GROUPS_ADDED)
}
"""The field groups of the meaning matcher with its checks."""

VALUE_SYNONYMS: dict[str, str] = {
    "f": "female",
    "woman": "female",
    "w": "female",
    "m": "male",
    "man": "male",
    "y": "yes",
    "true": "yes",
    "n": "no",
    "false": "no",
    "nb": "non binary",
    "nonbinary": "non binary",
}
"""Abbreviations of short values the meaning matcher expands before comparing them."""

SHORT_VALUE_WORDS = 2
"""Statements of at most this many words on both sides are compared as values."""

PARAPHRASES: dict[str, tuple[str, ...]] = {
    "is pescatarian": (r"eats fish but no other meat",),
    "is vegan": (r"eats no animal products",),
    "does not drink alcohol": (r"is teetotal", r"never drinks alcohol"),
    "is competitive": (r"hates losing(?: at anything)?",),
    "is self-employed": (r"works for (?:himself|herself|themselves)",),
    "is single": (r"is not in a relationship",),
    "astronomy": (r"stargazing",),
    "has no siblings": (r"is an only child",),
    "is on bad terms with": (r"does not get on with", r"has a difficult relationship with"),
    r"dropped out of \1": (r"left (\w+) without finishing",),
    "pregnant with": (r"expecting",),
    "lose weight": (r"slim down",),
    "cycles to work": (r"gets to work by bike",),
}
"""The meaning matcher's paraphrase lexicon: a canonical phrase -> the phrasings (regular
expressions, matched case-insensitively on whole words, contractions expanded) rewritten to
it before statements are embedded and checked, so "Is teetotal" and "Doesn't drink
alcohol" are both read as "does not drink alcohol" (a negation on both sides; a canonical
phrase keeps the negation a variant implies, so "Is teetotal" still contradicts "Drinks
wine"). Each entry comes from
a pair of the dev or earlier held-out splits that the embedder could not see as the same
(world knowledge); none from `held_out_5`."""

SAME_VALUES: tuple[frozenset[str], ...] = (
    frozenset({"coast", "seaside"}),
    frozenset({"child", "baby"}),
)
"""Words the value checks count as the same value whatever their cosine."""

GLOSSARY: dict[str, str] = {
    # Spanish
    "trabaja": "works", "como": "as", "profesora": "teacher", "profesor": "teacher",
    "de": "of", "matemáticas": "maths", "es": "is", "enfermera": "nurse", "tiene": "has",
    "perros": "dogs", "gato": "cat", "hijos": "children", "hermana": "sister",
    "mayor": "older", "vive": "lives", "en": "in", "un": "a", "una": "a", "música": "music",
    "escuela": "school", "colegio": "school", "le": "", "gusta": "likes", "leer": "reading",
    "novelas": "novels", "años": "years", "dos": "two", "pequeños": "small",
    # French
    "a": "has", "chien": "dog", "habite": "lives", "à": "in", "travaille": "works",
    "dans": "in", "une": "a", "banque": "bank", "est": "is", "employé": "employee",
    "aime": "likes", "fait": "does", "du": "", "vélo": "cycling", "sœur": "sister",
    "fume": "smokes", "joue": "plays", "les": "the",
    # German
    "hat": "has", "einen": "a", "eine": "a", "hund": "dog", "katze": "cat",
    "arbeitet": "works", "als": "as", "lehrerin": "teacher", "ist": "is", "isst": "eats",
    "fleisch": "meat", "spielt": "plays", "fußball": "football", "verheiratet": "married",
    # Portuguese and Italian
    "trabalha": "works", "enfermeira": "nurse", "num": "in a", "hospital": "hospital",
    "tem": "has", "um": "a", "ha": "has", "cane": "dog", "abita": "lives",
}  # fmt: skip
"""A small word glossary (Spanish, French, German, Portuguese, Italian -> English) of the
words of the dev and earlier splits' other-language pairs: a statement most of whose words
it knows is read in English (word by word) when compared with an English one, since the
embedder is English-only. Same-language pairs are compared as written."""

_NON_WORD = re.compile(r"[^a-z0-9]+")


def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


def _digest(obj: object) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()


MATCHER_SHA256 = _digest({"aliases": FIELD_ALIASES, "rule": "content-word F1, optimal 1:1"})
"""Digest of the lexical matching rule: recorded in the manifest."""


def fold(word: str) -> str:
    """A crude plural fold: "hobbies" -> "hobby", "pets" -> "pet"; "ss" endings are kept."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def _folded(text: str) -> str:
    return " ".join(fold(w) for w in _NON_WORD.sub(" ", text.lower()).split())


def norm_field(text: str) -> str:
    """A field or dimension as the lexical matcher compares it: lower-case words, plurals
    folded, aliases mapped."""
    joined = _folded(text)
    return FIELD_ALIASES.get(joined, joined)


_GROUP_OF = {_folded(name): group for group, names in FIELD_GROUPS.items() for name in names}
_GROUP_OF_ALL = {
    _folded(name): group for group, names in MEANING_FIELD_GROUPS.items() for name in names
}


def field_group(text: str, added: bool = False) -> str:
    """A field or dimension as the meaning matcher compares it: its group in
    `FIELD_GROUPS` (`added`: in `MEANING_FIELD_GROUPS`, accents folded first), else the
    normalised field itself."""
    if added:
        text = "".join(
            c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c)
        )
    joined = _folded(text)
    table = _GROUP_OF_ALL if added else _GROUP_OF
    return table.get(joined, table.get(norm_field(text), norm_field(text)))


def content_words(text: str) -> frozenset[str]:
    """The statement's content words (stop words removed, plurals folded)."""
    return frozenset(fold(w) for w in tokenize(text))


def all_words(text: str) -> frozenset[str]:
    """Every word of the statement (one-letter words and stop words too), plurals folded."""
    return frozenset(_folded(text).split())


def _f1(wa: frozenset[str], wb: frozenset[str]) -> float:
    if not wa or not wb:
        return 0.0
    return 2.0 * len(wa & wb) / (len(wa) + len(wb))


def similarity(a: str, b: str) -> float:
    """F1 of the two statements' content-word sets; when either has no content word, F1
    of all their words (so `"F"` against `"F"` is 1). 0 when either is empty."""
    wa, wb = content_words(a), content_words(b)
    if not wa or not wb:
        return _f1(all_words(a), all_words(b))
    return _f1(wa, wb)


def short_value(text: str) -> str | None:
    """A statement of at most `SHORT_VALUE_WORDS` words as a value (abbreviations expanded),
    else None."""
    words = _folded(text).split()
    if not words or len(words) > SHORT_VALUE_WORDS:
        return None
    return " ".join(VALUE_SYNONYMS.get(w, w) for w in words)


_NOT = re.compile(r"\b(does|do|did|is|are|was|were|has|have|had)n't\b", re.IGNORECASE)
_REWRITES = [
    (re.compile(rf"\b{variant}\b", re.IGNORECASE), canonical)
    for canonical, variants in PARAPHRASES.items()
    for variant in variants
]
_GLOSS_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)


@functools.lru_cache(maxsize=65536)
def canonical(statement: str) -> str:
    """The statement with the phrasings of `PARAPHRASES` rewritten to their canonical
    phrase ("Doesn't drink alcohol" -> "is teetotal"); unchanged when none occurs."""
    text = _NOT.sub(r"\1 not", statement)
    out = text
    for pattern, repl in _REWRITES:
        out = pattern.sub(repl, out)
    return out if out != text else statement


@functools.lru_cache(maxsize=65536)
def gloss(statement: str) -> str | None:
    """The statement read word by word in English through `GLOSSARY` when at least 60% of
    its words (and two or more) are glossary words; None for a statement read as English."""
    words = _GLOSS_WORD.findall(statement.lower())
    known = [w for w in words if w in GLOSSARY]
    if len(known) < 2 or len(known) < 0.6 * len(words):
        return None
    return " ".join(g for w in words for g in [GLOSSARY.get(w, w)] if g)


# -- the meaning matcher's checks: contradictions and different values -------------------------

FIELD_THRESHOLD = 0.62
"""Field-name cosine at or above which a field outside `FIELD_GROUPS` agrees with another
field (the best cosine between the two fields' names, a tabled field standing for every
name of its group)."""

CROSS_FIELD_THRESHOLD = 0.7
"""Statement cosine at or above which two records agree whatever their fields (the checks
still apply): "Is allergic to peanuts" under `dietary restrictions` = "Has a peanut allergy"
under `diet`. Not for a single word or two short values: a value means little without its
field ("Yes", "Emily" under `name`)."""

EQUIVALENCE_THRESHOLD = 0.2
"""Statement cosine at or above which two records of agreeing fields agree when the checks
prove them equivalent (`equivalence`: "is not married" = "is single"), below the
statement threshold."""

WORD_EQUIVALENT = 0.8
"""Word cosine at or above which two differing names or key nouns count as the same value
(`mum` = `mother`, `dog` = `puppy`); below it they are different values (`dog` vs `cat`,
`Porto` vs `Lisbon`)."""

NEGATIONS = frozenset(
    {
        "not", "no", "never", "none", "nothing", "nobody", "neither", "nor", "without",
        "stopped", "quit", "formerly", "former", "previously", "avoid", "avoids", "avoided",
        "avoiding", "lack", "lacks", "refuse", "refuses",
        # a few other languages: French, Spanish, Portuguese, German, Italian
        "pas", "jamais", "nunca", "jamás", "não", "nicht", "kein", "keine", "keinen", "nie",
        "niemals", "non",
    }
)  # fmt: skip
"""Words that negate (or end) what follows them in a claim."""

NEGATION_PHRASES = ("no longer", "used to", "gave up", "given up", "moved away", "moved out")
"""Phrases that negate or end what follows ("no longer lives in Porto", "used to smoke")."""

PLAN_CUES = ("want to", "hope to", "plan to", "would like to", "dream of", "trying to")
"""Phrases that make a claim a wish or a plan (plurals folded: "wants to", "hopes to"): a
plan does not match a fact ("wants to travel to Peru" / "lives in Peru")."""

PAST_CUES = ("used to", "former", "formerly", "previously")
"""Negation cues that put what follows in the past; `PAST_WORDS` do too without being cues.
When both claims carry one, these cues cancel out instead of counting as negations:
"a retired miner" = "used to be a miner" = "a former miner"."""

PAST_WORDS = ("retired",)
"""Words that say a claim is about the past without negating it ("a retired teacher")."""

NOT_NEGATIONS = ("not only", "can not wait", "no doubt", "no matter")
"""Phrases with a negation word that negate nothing."""

ANTONYM_PREFIXES = ("un", "dis", "in", "im", "il", "ir", "non")
"""A word and the same word with one of these prefixes are opposites (`happy` /
`unhappy`, `likes` / `dislikes`, `formal` / `informal`) when the base has 4 letters or more."""

CONTRASTS: dict[str, tuple[tuple[str, ...], ...]] = {
    "liking": (
        ("like", "love", "enjoy", "adore", "fond", "keen"),
        ("dislike", "hate", "detest", "loathe", "despise", "can not stand"),
    ),
    "marital status": (
        ("married", "husband", "wife", "wed"),
        ("single", "unmarried"),
        ("divorced",),
        ("widowed", "widow", "widower"),
        ("separated",),
        ("engaged", "fiance", "fiancee"),
        ("dating", "boyfriend", "girlfriend"),
    ),
    "relative age": (("older", "elder", "oldest", "eldest"), ("younger", "youngest")),
    "size": (("big", "large", "huge"), ("small", "little", "tiny")),
    "length": (("long", "lengthy"), ("short", "brief")),
    "formality": (("formal",), ("informal", "casual")),
    "sociability": (
        ("introvert", "introverted", "shy", "reserved"),
        ("extrovert", "extroverted", "outgoing", "sociable"),
    ),
    "outlook": (("optimistic", "hopeful"), ("pessimistic",)),
    "calm": (
        ("calm", "relaxed", "easygoing", "laid back"),
        ("anxious", "nervous", "stressed", "stress", "tense", "worried", "worry", "panic"),
    ),
    "quality": (
        ("good", "healthy", "great", "excellent"),
        ("poor", "bad", "ill", "unhealthy", "terrible"),
    ),
    "happiness": (("happy", "satisfied"), ("unhappy", "sad", "miserable", "dissatisfied")),
    "speed": (("quick", "quickly", "fast", "rapid", "rapidly"), ("slow", "slowly")),
    "time of day": (("morning person", "early riser", "early bird"), ("night owl", "late riser")),
    "frequency": (
        ("always", "often", "usually", "frequently", "regularly", "a lot"),
        ("rarely", "seldom", "hardly", "barely", "occasionally"),
    ),
    "diet": (("vegetarian", "vegan"), ("eat meat", "meat eater", "carnivore", "omnivore")),
    "employment": (
        ("employed", "working", "has a job"), ("unemployed", "jobless", "retired", "out of work")
    ),
    "tidiness": (("tidy",), ("messy",)),
}  # fmt: skip
"""Contrast classes: class -> its mutually exclusive alternatives, each a tuple of
synonymous terms (words or phrases, plurals folded). Two claims that assert different
alternatives of one class contradict each other; "not married" agrees with "single"."""

NUMBER_WORDS: dict[str, int] = {
    w: i
    for i, w in enumerate(
        [
            "zero", "one", "two", "three", "four", "five", "six", "seven", "eight",
            "nine", "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen",
            "sixteen", "seventeen", "eighteen", "nineteen", "twenty"
        ]
    )
} | {"thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80,
     "ninety": 90, "hundred": 100, "once": 1, "twice": 2, "dozen": 12}  # fmt: skip
"""Number words read as numbers (digits are read as they are: `5k` is 5); a tens word
followed by a unit word is their sum ("twenty-nine" is 29)."""

_TENS = frozenset(w for w, v in NUMBER_WORDS.items() if v in range(20, 100, 10))
_UNITS = frozenset(
    w for w, v in NUMBER_WORDS.items() if v in range(1, 10) and w not in ("once", "twice")
)

DETERMINERS = _wordset(
    "a an the his her their my our your its this that these those every each some any "
    "several many few both own"
)
"""Words after which a noun phrase starts (with prepositions, copulas and numbers)."""

POSSESSIVES = _wordset("her his their my our your")
"""Words on which a claim about someone else opens ("Her son ...", "His wife ...")."""
ARTICLES = _wordset("a an the his her their my our your its this that these those")
"""Words that open a verb's object: a word just before one is read as a verb ("run a
marathon"), not as a noun phrase's head."""
PREPOSITIONS = _wordset(
    "in at of for with from to about on by as into near after before since than like"
)
COPULAS = _wordset("is are was were be been am being")
FUNCTION_WORDS = (
    DETERMINERS
    | PREPOSITIONS
    | COPULAS
    | NEGATIONS
    | _wordset(
        "and or but who which whom whose when while where because so if she he they it him them "
        "her herself himself themselves has have had having does do did will would can could "
        "should may might must also very quite really just still more most much lot lots"
    )
)
"""Words that end a noun phrase (and are never its head)."""

_CONTRACTIONS = ((re.compile(r"'s\b"), ""),
                 (re.compile(r"\bcan'?t\b|\bcannot\b"), "can not"),
                 (re.compile(r"\bwon'?t\b"), "will not"),
                 (re.compile(r"n't\b"), " not"),
                 (re.compile(r"\b(\w+)-free\b"), r"without \1"),
                 (re.compile(r"\bnon-(\w)"), r"not \1"),
                 (re.compile(r"\bex-(\w)"), r"former \1"))  # fmt: skip
UNITS = _wordset("year month week day hour minute time decade century km mile kg kilo metre meter")
"""Units of a number: never a noun phrase's value (the numbers are compared instead)."""
_TOKENS = re.compile(r"[^\W_]+|[,;:.!?()]")
_BREAK = frozenset(",;:.!?()")


def _phrase_words(phrase: str) -> tuple[str, ...]:
    return tuple(fold(w) for w in phrase.split())


_TERMS: list[tuple[tuple[str, ...], str, int]] = sorted(
    (
        (_phrase_words(term), cls, alt)
        for cls, alts in CONTRASTS.items()
        for alt, terms in enumerate(alts)
        for term in terms
    ),
    key=lambda t: -len(t[0]),
)
_NEG_PHRASES: list[tuple[str, ...]] = [_phrase_words(p) for p in NEGATION_PHRASES]
_PAST = frozenset(_phrase_words(p) for p in PAST_CUES)
_PLAN = [_phrase_words(p) for p in PLAN_CUES]
_NOT_NEG = [_phrase_words(p) for p in NOT_NEGATIONS]


@dataclass(frozen=True)
class Claim:
    """What the checks read from one statement (`analyse`)."""

    tokens: tuple[str, ...]
    """Lower-case words, contractions expanded ("doesn't" -> "does not"); punctuation as
    itself."""
    words: tuple[str, ...]
    """The tokens with plurals folded (what is compared)."""
    negations: tuple[int, ...]
    """Positions of negation cues (a phrase's first word)."""
    terms: tuple[tuple[str, int, int, int], ...]
    """Contrast terms: (class, alternative, first position, last position)."""
    names: frozenset[str]
    """Capitalised words not at the start (names, places), lower case."""
    numbers: frozenset[float]
    heads: frozenset[str]
    """The head (last word) of each noun phrase: after a determiner, preposition, copula or
    number, or right after the claim's first word."""
    subject: frozenset[str] = frozenset()
    """Who a claim that opens on a possessive is about: the (at most two) words after it
    that are not function words ("Her son lives in Leeds": son, lives); empty otherwise."""
    past_cues: tuple[int, ...] = ()
    """The negation cues that are `PAST_CUES` ("used to", "former")."""
    past: bool = False
    """Whether the claim is about the past: a `PAST_CUES` cue or one of `PAST_WORDS`."""
    plan: str | None = None
    """The claim's first `PLAN_CUES` phrase, as written: a wish or a plan, not a fact."""

    @property
    def vocabulary(self) -> frozenset[str]:
        return frozenset(w for w in self.words if w not in _BREAK)


def _number(raw: str) -> float | None:
    m = re.match(r"^(\d+(?:\.\d+)?)[a-z]*$", raw)
    if m:
        return float(m.group(1))
    return float(NUMBER_WORDS[raw]) if raw in NUMBER_WORDS else None


@functools.lru_cache(maxsize=65536)
def analyse(statement: str) -> Claim:
    """The words, negations, contrast terms, names, numbers and noun-phrase heads of a
    statement, as the meaning matcher's checks compare them."""
    text = statement
    lowered = text.lower()
    for pattern, repl in _CONTRACTIONS:
        lowered = pattern.sub(repl, lowered)
    for pattern, repl in _CONTRACTIONS[4:]:
        text = pattern.sub(repl, text)
    raw = _TOKENS.findall(lowered)
    original = _TOKENS.findall(re.sub(r"n't\b", " not", text))
    words = tuple(fold(t) for t in raw)
    n = len(words)

    def at(i: int, phrase: tuple[str, ...]) -> bool:
        return words[i : i + len(phrase)] == phrase

    skip: set[int] = set()
    for i in range(n):
        for p in _NOT_NEG:
            if at(i, p):
                skip.update(range(i, i + len(p)))
    used: set[int] = set()
    terms: list[tuple[str, int, int, int]] = []
    for i in range(n):
        for phrase, cls, alt in _TERMS:
            span = range(i, i + len(phrase))
            if at(i, phrase) and not used.intersection(span):
                terms.append((cls, alt, i, i + len(phrase) - 1))
                used.update(span)
                skip.update(p for p in span if words[p] in NEGATIONS)
    negations: list[int] = []
    past_cues: list[int] = []
    i = 0
    while i < n:
        phrase = next((p for p in _NEG_PHRASES if at(i, p)), ())
        if phrase and i not in skip:
            negations.append(i)
            if phrase in _PAST:
                past_cues.append(i)
            i += len(phrase)
            continue
        if words[i] in NEGATIONS and i not in skip:
            negations.append(i)
            if (words[i],) in _PAST:
                past_cues.append(i)
        i += 1
    names = frozenset(
        fold(t.lower())
        for k, t in enumerate(original)
        if k > 0 and original[k - 1] not in _BREAK and t[:1].isupper() and t != "I"
    )
    values: list[float] = []
    k = 0
    while k < n:
        v = _number(raw[k])
        if v is not None and raw[k] in _TENS and k + 1 < n and raw[k + 1] in _UNITS:
            v += NUMBER_WORDS[raw[k + 1]]  # "twenty-nine", "twenty nine": 29
            k += 1
        if v is not None:
            values.append(v)
        k += 1
    numbers = frozenset(values)
    heads: set[str] = set()
    run: list[int] = []
    opened = False

    def close(nxt: int) -> None:
        """End the noun phrase in `run` before position `nxt`; keep its head unless it
        looks like a verb taking an object ("run a marathon", "studying for")."""
        if not run:
            return
        last = run[-1]
        after = words[nxt] if nxt < n else ""
        verb = after in ARTICLES or (raw[last].endswith("ing") and after in PREPOSITIONS)
        if not verb and words[last] not in UNITS:
            heads.add(words[last])
        run.clear()

    for k, w in enumerate(words):
        starts = (
            w in DETERMINERS or w in PREPOSITIONS or w in COPULAS or _number(raw[k]) is not None
        )
        participle = len(raw[k]) >= 4 and raw[k].endswith("ed")
        if w in _BREAK or w in FUNCTION_WORDS or starts or participle:
            close(k)
            opened = starts
            continue
        if opened or k == 1:
            run.append(k)
    close(n)
    heads -= NUMBER_WORDS.keys()
    past = bool(past_cues) or any(w in PAST_WORDS for w in words)
    plan = next((" ".join(raw[i : i + len(c)]) for i in range(n) for c in _PLAN if at(i, c)), None)
    subject: frozenset[str] = frozenset()
    if n > 1 and words[0] in POSSESSIVES:
        subject = frozenset(w for w in words[1:3] if w not in FUNCTION_WORDS and w not in _BREAK)
    return Claim(
        tuple(raw), words, tuple(negations), tuple(terms), names, numbers, frozenset(heads),
        subject, tuple(past_cues), past, plan,
    )  # fmt: skip


def _prefixed(w: str, u: str) -> bool:
    """`u` is `w` with a negating prefix (`unhappy` of `happy`)."""
    return len(w) >= 4 and any(u == p + w for p in ANTONYM_PREFIXES)


def _mentions(
    claim: Claim, extra: Sequence[tuple[str, str, int]]
) -> dict[str, list[tuple[int, int, int]]]:
    """Class -> (alternative, first, last position) of each of its terms in the claim;
    `extra` adds (class, word, alternative) for the prefix opposites of this pair."""
    out: dict[str, list[tuple[int, int, int]]] = {}
    for cls, alt, lo, hi in claim.terms:
        out.setdefault(cls, []).append((alt, lo, hi))
    for cls, word, alt in extra:
        for k, w in enumerate(claim.words):
            if w == word:
                out.setdefault(cls, []).append((alt, k, k))
    return out


def _attached(claim: Claim, starts: Sequence[int]) -> dict[int, int]:
    """Negation cue position -> the term start it negates: the first term starting after
    the cue, at most 4 words on and with no punctuation between."""
    out: dict[int, int] = {}
    for c in claim.negations:
        after = [s for s in starts if c < s <= c + 4]
        if after and not any(w in _BREAK for w in claim.words[c : min(after)]):
            out[c] = min(after)
    return out


def _same_value(a: str, b: str, cos: Mapping[tuple[str, str], float]) -> bool:
    short, long_ = sorted((a, b), key=len)
    if a == b or (len(short) >= 3 and long_.startswith(short)):
        return True
    if any(a in group and b in group for group in SAME_VALUES):
        return True
    return cos.get((a, b), 0.0) >= WORD_EQUIVALENT


def _unmatched(
    mine: frozenset[str], theirs: frozenset[str], vocab: frozenset[str],
    cos: Mapping[tuple[str, str], float],
) -> list[str]:  # fmt: skip
    return sorted(
        w for w in mine if w not in vocab and not any(_same_value(w, t, cos) for t in theirs)
    )


def _minimal_pair(a: Claim, b: Claim) -> bool:
    """The claims share their frame: at most 3 words differ on each side, and at least as
    many are shared ("has a dog" / "has a cat")."""
    va, vb = a.vocabulary, b.vocabulary
    da, db = len(va - vb), len(vb - va)
    return 1 <= da <= 3 and 1 <= db <= 3 and len(va & vb) >= max(da, db)


def _differing(a: Claim, b: Claim) -> tuple[set[str], set[str]]:
    """Names and heads of each side that the other side lacks (exact words)."""
    va, vb = a.vocabulary, b.vocabulary
    return {w for w in a.names | a.heads if w not in vb}, {
        w for w in b.names | b.heads if w not in va
    }


def _content(c: Claim) -> frozenset[str]:
    """The claim's words that are not function words or punctuation."""
    return frozenset(w for w in c.vocabulary if w not in FUNCTION_WORDS)


def word_pairs(a: Claim, b: Claim) -> set[tuple[str, str]]:
    """The (word, word) pairs whose cosine the value checks may ask for: each side's
    differing names, heads and subject words against the other side's differing content
    words."""
    da, db = _differing(a, b)
    da |= {w for w in a.subject if w not in b.vocabulary}
    db |= {w for w in b.subject if w not in a.vocabulary}
    ca, cb = _content(a) - b.vocabulary, _content(b) - a.vocabulary
    return {(x, y) for x in da for y in cb if x != y} | {(x, y) for x in ca for y in db if x != y}


def contradiction(a: str, b: str, cos: Mapping[tuple[str, str], float] | None = None) -> str | None:
    """Why two statements about the same field cannot be a match, or None: a contrast
    (different alternatives of a `CONTRASTS` class, or a word and its prefixed opposite),
    a negation in one only, different numbers, different names, or (when the two share
    their frame) different noun-phrase heads. `cos` gives the cosine of differing words
    (`word_pairs`), by which `mum` = `mother`; without it only equal words and
    abbreviations (`lab` / `labrador`) are the same value."""
    return compare(a, b, cos)[0]


def equivalence(a: str, b: str, cos: Mapping[tuple[str, str], float] | None = None) -> str | None:
    """How the checks prove two statements say the same, or None: they do not contradict
    each other (`contradiction`) and one negates an alternative of a contrast class whose
    complement the other asserts ("is not married" = "is single", "does not eat meat" =
    "is vegetarian", "is not happy" = "is unhappy"; `complement`)."""
    return compare(a, b, cos)[1]


def complement(cls: str, alt: int) -> int | None:
    """The alternative of contrast class `cls` that "not <alternative alt>" asserts: the
    other one of a two-valued class (a `CONTRASTS` class or a word and its prefixed
    opposite, named `word/prefixed`), or the one holding a prefixed opposite of one of
    alt's terms (`single` holds `unmarried`, so "not married" = "single"); None when not
    negating alt leaves several alternatives open."""
    alts = CONTRASTS.get(cls)
    if alts is None:
        return 1 - alt if "/" in cls and alt in (0, 1) else None
    if len(alts) == 2:
        return 1 - alt
    for k, terms in enumerate(alts):
        if k != alt and any(_prefixed(t, u) for t in alts[alt] for u in terms):
            return k
    return None


def compare(
    a: str, b: str, cos: Mapping[tuple[str, str], float] | None = None
) -> tuple[str | None, str | None]:
    """(`contradiction`, `equivalence`) of two statements: why they cannot be a match, else
    (None, how they are proven equivalent, or None)."""
    ca, cb = analyse(a), analyse(b)
    cos = cos or {}
    extra_a: list[tuple[str, str, int]] = []
    extra_b: list[tuple[str, str, int]] = []
    for w in ca.vocabulary - cb.vocabulary:
        for u in cb.vocabulary - ca.vocabulary:
            if _prefixed(w, u) or _prefixed(u, w):
                cls = f"{min(w, u, key=len)}/{max(w, u, key=len)}"
                extra_a.append((cls, w, int(_prefixed(u, w))))
                extra_b.append((cls, u, int(_prefixed(w, u))))
    ma, mb = _mentions(ca, extra_a), _mentions(cb, extra_b)
    att_a = _attached(ca, sorted({lo for ms in ma.values() for _, lo, _ in ms}))
    att_b = _attached(cb, sorted({lo for ms in mb.values() for _, lo, _ in ms}))
    decided_a: set[int] = set()
    decided_b: set[int] = set()
    same: str | None = None
    for cls in sorted(ma.keys() & mb.keys()):
        sa = {(alt, lo in att_a.values(), lo, hi) for alt, lo, hi in ma[cls]}
        sb = {(alt, lo in att_b.values(), lo, hi) for alt, lo, hi in mb[cls]}
        if len({m[:2] for m in sa}) > 1 or len({m[:2] for m in sb}) > 1:
            continue  # a side names two alternatives, or one twice either way: undecided
        (x, na, la, ha), (y, nb, lb, hb) = min(sa), min(sb)
        ta = ("not " if na else "") + " ".join(ca.tokens[la : ha + 1])
        tb = ("not " if nb else "") + " ".join(cb.tokens[lb : hb + 1])
        if (x == y and na != nb) or (x != y and not na and not nb):
            return f"contrast ({cls}): {ta!r} vs {tb!r}", None
        if x != y and na != nb and complement(cls, x if na else y) == (y if na else x):
            same = same or f"{cls}: {ta!r} = {tb!r}"
        decided_a.update(c for c, t in att_a.items() if any(t == m[2] for m in sa))
        decided_b.update(c for c, t in att_b.items() if any(t == m[2] for m in sb))
    if ca.past and cb.past:  # both about the past: "used to", "former" negate nothing here
        decided_a.update(ca.past_cues)
        decided_b.update(cb.past_cues)
    neg_a = [c for c in ca.negations if c not in decided_a]
    neg_b = [c for c in cb.negations if c not in decided_b]
    if len(neg_a) % 2 != len(neg_b) % 2:
        which, tokens, cue = (
            ("first", ca.tokens, neg_a[0]) if len(neg_a) % 2 else ("second", cb.tokens, neg_b[0])
        )
        return f"negation: {tokens[cue]!r} in the {which} claim only", None
    if ca.numbers - cb.numbers and cb.numbers - ca.numbers:
        only_a, only_b = _nums(ca.numbers - cb.numbers), _nums(cb.numbers - ca.numbers)
        return f"numbers differ: {only_a} vs {only_b}", None
    if (ca.plan is None) != (cb.plan is None):
        side, plan = ("first", ca.plan) if ca.plan else ("second", cb.plan)
        return f"plan vs fact: {plan!r} in the {side} claim only", None
    if ca.subject and cb.subject:
        subj_a = _unmatched(ca.subject, cb.subject, cb.vocabulary, cos)
        subj_b = _unmatched(cb.subject, ca.subject, ca.vocabulary, cos)
        if len(subj_a) == len(ca.subject) and len(subj_b) == len(cb.subject):
            return f"subjects differ: {', '.join(subj_a)} vs {', '.join(subj_b)}", None
    names_a = _unmatched(ca.names, cb.names, cb.vocabulary, cos)
    names_b = _unmatched(cb.names, ca.names, ca.vocabulary, cos)
    if names_a and names_b:
        return f"names differ: {', '.join(names_a)} vs {', '.join(names_b)}", None
    if _minimal_pair(ca, cb):
        heads_a = _unmatched(ca.heads - ca.names, _content(cb), cb.vocabulary, cos)
        heads_b = _unmatched(cb.heads - cb.names, _content(ca), ca.vocabulary, cos)
        if heads_a and heads_b:
            return f"values differ: {', '.join(heads_a)} vs {', '.join(heads_b)}", None
    if same is None and ca.numbers and ca.numbers == cb.numbers:
        same = f"same numbers: {_nums(ca.numbers)}"
    return None, same


def _nums(values: frozenset[float]) -> str:
    return ", ".join(f"{v:g}" for v in sorted(values))


MEANING_SHA256 = _digest(
    {
        "groups": FIELD_GROUPS,
        "groups added": FIELD_GROUPS_ADDED,
        "values": VALUE_SYNONYMS,
        "short": SHORT_VALUE_WORDS,
        "field threshold": FIELD_THRESHOLD,
        "cross-field threshold": CROSS_FIELD_THRESHOLD,
        "equivalence threshold": EQUIVALENCE_THRESHOLD,
        "word equivalent": WORD_EQUIVALENT,
        "paraphrases": PARAPHRASES,
        "same values": [sorted(g) for g in SAME_VALUES],
        "glossary": GLOSSARY,
        "past": [PAST_CUES, PAST_WORDS],
        "plans": PLAN_CUES,
        "negations": sorted(NEGATIONS),
        "negation phrases": NEGATION_PHRASES,
        "not negations": NOT_NEGATIONS,
        "prefixes": ANTONYM_PREFIXES,
        "contrasts": CONTRASTS,
        "numbers": NUMBER_WORDS,
        "noun phrases": [sorted(DETERMINERS), sorted(PREPOSITIONS), sorted(COPULAS)],
        "possessives": sorted(POSSESSIVES),
        "compound numbers": [sorted(_TENS), sorted(_UNITS)],
        "function words": sorted(FUNCTION_WORDS),
        "rule": "field group or field-name cosine with embedding cosine or equal values, "
        "or a cross-field embedding cosine (no single word, not two short values), or a "
        "proven equivalence (negated alternative = its complement); no contrast, negation "
        "(past cues cancelling), plan vs fact, number, subject, name or head difference "
        "(heads against content words); same numbers proven equivalent; paraphrases rewritten, "
        "another language glossed against English; optimal 1:1",
    }
)
"""Digest of the meaning matching rule (its embedding model is recorded beside it)."""

LEGACY_MEANING_SHA256 = _digest(
    {
        "groups": FIELD_GROUPS,
        "values": VALUE_SYNONYMS,
        "short": SHORT_VALUE_WORDS,
        "rule": "field group, embedding cosine or equal values, optimal 1:1",
    }
)
"""Digest of the meaning rule without its checks (`meaning(..., checks=False)`): the
digest the rule had before the checks were added."""


def assign(weights: FloatArray, agree: npt.NDArray[np.bool_]) -> list[tuple[int, int]]:
    """The optimal one-to-one pairing of rows and columns: as many agreeing pairs as
    possible, then the largest total weight (weights in [0, 1]). Pairs in row order."""
    if not agree.any():
        return []
    bonus = float(min(agree.shape)) + 1.0
    value = np.where(agree, bonus + np.clip(weights, 0.0, 1.0), 0.0)
    rows, cols = linear_sum_assignment(value, maximize=True)
    return [(int(i), int(j)) for i, j in zip(rows, cols, strict=True) if agree[i, j]]


StatementSimilarity = Callable[[Sequence[str], Sequence[str]], FloatArray]
"""Statements a (n) and b (m) -> their n x m similarity matrix (cosines, in [-1, 1])."""


@dataclass(frozen=True)
class Verdict:
    """Whether two records agree under a matcher, and why (`Matcher.explain`)."""

    agree: bool
    similarity: float
    fields: str
    """How the fields compare: `same group occupation`, `field cosine 0.64 (work history ~
    workplace)`, or why they differ."""
    refused: str | None
    """Why a pair with agreeing fields and similar statements was refused (`contradiction`)."""
    equivalent: str | None = None
    """How the checks proved the statements equivalent (`equivalence`), when that is what
    let the pair agree below the statement threshold."""
    rule: str = ""
    """Which threshold the statement similarity was held to: `statement`, `equivalence`,
    `cross-field`, or `none (...)` when nothing could let the pair agree (empty for the
    lexical matcher and without the checks)."""


@dataclass(frozen=True)
class Matcher:
    """A matching rule: when two records agree, and how similar they are."""

    name: str
    threshold: float
    embed_similarity: StatementSimilarity | None = None
    """The meaning matcher's statement similarity (None: the lexical matcher)."""
    checks: bool = True
    """The meaning matcher's field-name cosine and contradiction checks (False: the earlier
    rule, table fields and statement cosine only)."""
    field_threshold: float = FIELD_THRESHOLD
    """Field-name cosine at or above which a field outside `FIELD_GROUPS` agrees."""
    cross_field_threshold: float = CROSS_FIELD_THRESHOLD
    """Statement cosine at or above which records agree whatever their fields (checks on)."""
    equivalence_threshold: float = EQUIVALENCE_THRESHOLD
    """Statement cosine enough for records the checks prove equivalent (checks on)."""

    def field_key(self, text: str) -> str:
        if self.embed_similarity is None:
            return norm_field(text)
        return field_group(text, added=self.checks)

    def fields(
        self, pred: Sequence[str], gold: Sequence[str]
    ) -> tuple[npt.NDArray[np.bool_], FloatArray, list[str]]:
        """Whether each (pred, gold) field pair agrees, the field-name cosine (1 for the
        same key or group, NaN where not computed), and the names the cosines compared
        (index into it: see `explain`)."""
        kp = [self.field_key(f) for f in pred]
        kg = [self.field_key(f) for f in gold]
        same = np.array([[a == b for b in kg] for a in kp], dtype=bool).reshape(
            len(pred), len(gold)
        )
        cos = np.where(same, 1.0, np.nan)
        if self.embed_similarity is None or not self.checks:
            return same, cos, []
        up, ug = sorted(set(kp)), sorted(set(kg))
        tabled = {k for k in (*up, *ug) if k in MEANING_FIELD_GROUPS}
        if all(k in tabled for k in (*up, *ug)):
            return same, cos, []
        members = {k: MEANING_FIELD_GROUPS[k] + (k,) if k in tabled else (k,) for k in (*up, *ug)}
        names = sorted({_folded(n) for ns in members.values() for n in ns})
        at = {n: i for i, n in enumerate(names)}
        e = np.asarray(self.embed_similarity(names, names), dtype=np.float64)
        mp = np.zeros((len(up), len(names)), dtype=bool)
        mg = np.zeros((len(ug), len(names)), dtype=bool)
        for i, k in enumerate(up):
            mp[i, [at[_folded(n)] for n in members[k]]] = True
        for j, k in enumerate(ug):
            mg[j, [at[_folded(n)] for n in members[k]]] = True
        rows = np.where(mp[:, :, None], e[None, :, :], -np.inf).max(axis=1)  # up x names
        best = np.where(mg[None, :, :], rows[:, None, :], -np.inf).max(axis=2)  # up x ug
        either = np.array([[a not in tabled or b not in tabled for b in ug] for a in up])
        ok = either & (best >= self.field_threshold)
        ip = np.array([up.index(k) for k in kp], dtype=int)
        ig = np.array([ug.index(k) for k in kg], dtype=int)
        grid = np.ix_(ip, ig)
        cos = np.where(same, 1.0, np.where(either[grid], best[grid], np.nan))
        return same | ok[grid], cos, names

    def scores(
        self, pred: Sequence[Record], gold: Sequence[Record]
    ) -> tuple[FloatArray, npt.NDArray[np.bool_]]:
        """The similarity of every (pred, gold) pair and whether the pair agrees."""
        sims, agree, _, _ = self._judge(pred, gold)
        return sims, agree

    def _judge(
        self, pred: Sequence[Record], gold: Sequence[Record]
    ) -> tuple[
        FloatArray, npt.NDArray[np.bool_], dict[tuple[int, int], str], dict[tuple[int, int], str]
    ]:
        """Similarities, agreement, why pairs were refused and how pairs were proven
        equivalent."""
        sims = np.zeros((len(pred), len(gold)))
        fields, _, _ = self.fields([p[0] for p in pred], [g[0] for g in gold])
        if self.embed_similarity is not None and self.checks:
            pred = [(f, canonical(s)) for f, s in pred]
            gold = [(f, canonical(s)) for f, s in gold]
        if self.embed_similarity is None:
            for i, j in zip(*np.nonzero(fields), strict=True):
                sims[i, j] = similarity(pred[i][1], gold[j][1])
            return sims, fields & (sims >= self.threshold), {}, {}
        values_p = [short_value(s) for _, s in pred]
        values_g = [short_value(s) for _, s in gold]
        both_short = np.array(
            [[vp is not None and vg is not None for vg in values_g] for vp in values_p],
            dtype=bool,
        ).reshape(len(pred), len(gold))
        several = (
            [len(_folded(s).split()) > 1 for _, s in pred],
            [len(_folded(s).split()) > 1 for _, s in gold],
        )
        cross = ~both_short & np.array(
            [[x and y for y in several[1]] for x in several[0]], dtype=bool
        ).reshape(len(pred), len(gold))
        # which pairs are compared at all: agreeing fields, or (checks) cross-field candidates
        compared = fields if not self.checks else fields | cross
        pairs = [(int(i), int(j)) for i, j in zip(*np.nonzero(compared & ~both_short), strict=True)]
        if pairs:
            rows = sorted({i for i, _ in pairs})
            cols = sorted({j for _, j in pairs})
            got = self.embed_similarity([pred[i][1] for i in rows], [gold[j][1] for j in cols])
            at_r, at_c = {i: k for k, i in enumerate(rows)}, {j: k for k, j in enumerate(cols)}
            for i, j in pairs:
                sims[i, j] = float(got[at_r[i], at_c[j]])
        # one side in another language: also compare the glossed reading, keep the higher
        glossed_p = [gloss(s) if self.checks else None for _, s in pred]
        glossed_g = [gloss(s) if self.checks else None for _, s in gold]
        read: dict[tuple[int, int], tuple[str, str]] = {}
        for i, j in pairs:
            if (glossed_p[i] is None) != (glossed_g[j] is None):
                read[(i, j)] = (
                    canonical(glossed_p[i] or pred[i][1]),
                    canonical(glossed_g[j] or gold[j][1]),
                )
        if read:
            keys = sorted(read)
            got = self.embed_similarity([read[k][0] for k in keys], [read[k][1] for k in keys])
            for n, (i, j) in enumerate(keys):
                sims[i, j] = max(sims[i, j], float(got[n, n]))
        identical = np.zeros_like(fields)
        for i, j in zip(*np.nonzero(compared), strict=True):
            if both_short[i, j]:
                sims[i, j] = float(values_p[i] == values_g[j])
            elif _folded(pred[i][1]) == _folded(gold[j][1]):
                sims[i, j] = 1.0
                identical[i, j] = True
        refused: dict[tuple[int, int], str] = {}
        proven: dict[tuple[int, int], str] = {}
        if not self.checks:
            return sims, fields & (sims >= self.threshold) & (sims > 0), refused, proven
        floor = min(self.threshold, self.equivalence_threshold)
        agree = (fields & (sims >= self.threshold) & (sims > 0)) | (
            cross & (sims >= self.cross_field_threshold)
        )
        maybe = fields & ~agree & ~both_short & (sims >= floor) & (sims > 0)
        todo = [
            (int(i), int(j))
            for i, j in zip(*np.nonzero(agree | maybe), strict=True)
            if not identical[i, j] and not both_short[i, j]
        ]
        texts = {(i, j): read.get((i, j), (pred[i][1], gold[j][1])) for i, j in todo}
        words = sorted(
            {
                w
                for a, b in texts.values()
                for pair in word_pairs(analyse(a), analyse(b))
                for w in pair
            }
        )
        cos: dict[tuple[str, str], float] = {}
        if words:
            e = np.asarray(self.embed_similarity(words, words), dtype=np.float64)
            close = np.argwhere(e >= WORD_EQUIVALENT)
            cos = {(words[a], words[b]): float(e[a, b]) for a, b in close if a != b}
        for i, j in todo:
            reason, same = compare(*texts[(i, j)], cos)
            if reason is not None:
                agree[i, j] = False
                if not maybe[i, j]:
                    refused[(i, j)] = reason
            elif maybe[i, j] and same is not None:
                agree[i, j] = True
                proven[(i, j)] = same
        return sims, agree, refused, proven

    def explain(self, a: Record, b: Record) -> Verdict:
        """Whether records `a` and `b` agree, their similarity, how their fields compare,
        why the pair was refused (None when it was not) and which threshold held."""
        fields, cos, _ = self.fields([a[0]], [b[0]])
        sims, agree, refused, proven = self._judge([a], [b])
        ka, kb = self.field_key(a[0]), self.field_key(b[0])
        c = float(cos[0, 0])
        if ka == kb:
            how = f"same group {ka}" if self.embed_similarity is not None else f"same field {ka}"
        elif math.isnan(c):
            how = f"different groups {ka} / {kb}"
        else:
            how = f"field cosine {c:.2f} {'>=' if fields[0, 0] else '<'} {self.field_threshold}"
        rule = ""
        if self.embed_similarity is not None and self.checks:
            if (0, 0) in proven:
                rule = "equivalence"
            elif fields[0, 0]:
                rule = "statement"
            elif (short_value(a[1]) is None or short_value(b[1]) is None) and all(
                len(_folded(s).split()) > 1 for s in (a[1], b[1])
            ):
                rule = "cross-field"
            else:
                rule = "none (fields differ; short values or a single word: no cross-field)"
        return Verdict(
            bool(agree[0, 0]), float(sims[0, 0]), how, refused.get((0, 0)), proven.get((0, 0)),
            rule,
        )  # fmt: skip

    def match(self, pred: Sequence[Record], gold: Sequence[Record]) -> list[tuple[int, int, float]]:
        """One-to-one optimal matching: (pred index, gold index, similarity) per pair."""
        if not pred or not gold:
            return []
        sims, agree = self.scores(pred, gold)
        return [(i, j, float(sims[i, j])) for i, j in assign(sims, agree)]


def lexical(threshold: float = LEXICAL_THRESHOLD) -> Matcher:
    """The strict matcher: equal normalised fields, content-word F1 >= threshold."""
    return Matcher("lexical", threshold)


def meaning(
    similar: StatementSimilarity, threshold: float | None = None, *, checks: bool = True
) -> Matcher:
    """The meaning matcher: field groups (or field-name cosine >= `FIELD_THRESHOLD` for a
    field outside them) and statement similarity `similar` >= threshold (default
    `MEANING_THRESHOLD`), or statement similarity >= `CROSS_FIELD_THRESHOLD` whatever the
    fields, or agreeing fields and statements the checks prove equivalent at
    >= `EQUIVALENCE_THRESHOLD`; and no contradiction (`contradiction`). `checks=False`: the
    earlier rule, fields by the table only, statement similarity >= threshold (default
    `LEGACY_MEANING_THRESHOLD`) and no contradiction checks (kept to measure against)."""
    if threshold is None:
        threshold = MEANING_THRESHOLD if checks else LEGACY_MEANING_THRESHOLD
    return Matcher("meaning", threshold, similar, checks)


MatcherLike = Matcher | float
"""A matcher, or a threshold for the lexical one."""


def _matcher(m: MatcherLike) -> Matcher:
    return m if isinstance(m, Matcher) else lexical(m)


def match(
    pred: Sequence[Record], gold: Sequence[Record], matcher: MatcherLike
) -> list[tuple[int, int, float]]:
    """One-to-one optimal matching: (pred index, gold index, similarity) per matched pair."""
    return _matcher(matcher).match(pred, gold)


@dataclass(frozen=True)
class Counts:
    """Matched, predicted and reference record counts, with the ratios they give."""

    matched: int
    predicted: int
    reference: int

    def __add__(self, other: Counts) -> Counts:
        return Counts(
            self.matched + other.matched,
            self.predicted + other.predicted,
            self.reference + other.reference,
        )

    @property
    def precision(self) -> float:
        return self.matched / self.predicted if self.predicted else math.nan

    @property
    def recall(self) -> float:
        return self.matched / self.reference if self.reference else math.nan

    @property
    def f1(self) -> float:
        total = self.predicted + self.reference
        return 2.0 * self.matched / total if total else math.nan


def count(pred: Sequence[Record], gold: Sequence[Record], matcher: MatcherLike) -> Counts:
    """The counts of matching `pred` against `gold`."""
    return Counts(len(match(pred, gold, matcher)), len(pred), len(gold))


def count_all(
    pred: Mapping[str, Sequence[Record]],
    gold: Mapping[str, Sequence[Record]],
    matcher: MatcherLike,
) -> dict[str, Counts]:
    """Counts per kind (profile, persona) and pooled ("all")."""
    out = {k: count(pred.get(k, ()), gold.get(k, ()), matcher) for k in KINDS}
    out["all"] = out["profile"] + out["persona"]
    return out


def pairwise_f1(
    outputs: Sequence[Mapping[str, Sequence[Record]]], matcher: MatcherLike
) -> list[float]:
    """Pooled F1 of every pair of outputs (e.g. repeated runs on one subject), pair by pair:
    (0, 1), (0, 2), ..., (1, 2), ... The mean is the runs' agreement."""
    return [
        count_all(a, b, matcher)["all"].f1 for i, a in enumerate(outputs) for b in outputs[i + 1 :]
    ]


# -- what matched claims carry besides their statement ----------------------------------------

CLAIM_METRICS = ("confidence error", "window agreement", "evidence agreement")
PERSONA_METRICS = ("evidence agreement", "hypothesis agreement")


def jaccard(a: Sequence[str], b: Sequence[str]) -> float:
    """|a & b| / |a | b| of two id lists; NaN when both are empty (nothing to compare)."""
    sa, sb = set(a), set(b)
    return len(sa & sb) / len(sa | sb) if sa | sb else math.nan


def window_agreement(
    a: tuple[datetime | None, datetime | None],
    b: tuple[datetime | None, datetime | None],
    span: tuple[datetime, datetime] | None,
) -> float:
    """Overlap of two validity windows (from, to): the length of their intersection over
    that of their union, an open end standing for the edge of `span` (the history's first
    and last timestamps). Two open windows agree (1); with no span, or windows of no
    length, the windows agree when their ends are equal."""
    if a == b:
        return 1.0
    if span is None:
        return 0.0
    lo, hi = span
    a0, a1 = a[0] or lo, a[1] or hi
    b0, b1 = b[0] or lo, b[1] or hi
    union = (max(a1, b1) - min(a0, b0)).total_seconds()
    if union <= 0:
        return float((a0, a1) == (b0, b1))
    inter = max(0.0, (min(a1, b1) - max(a0, b0)).total_seconds())
    return inter / union


def _naive(t: datetime | None) -> datetime | None:
    return None if t is None else t.replace(tzinfo=None)


def claim_agreement(
    pred: ProfileClaim, gold: ProfileClaim, span: tuple[datetime, datetime] | None
) -> dict[str, float]:
    """How far a matched pair of profile claims agree beyond their statements."""
    return {
        "confidence error": abs(pred.confidence - gold.confidence),
        "window agreement": window_agreement(
            (_naive(pred.valid_from), _naive(pred.valid_to)),
            (_naive(gold.valid_from), _naive(gold.valid_to)),
            span,
        ),
        "evidence agreement": jaccard(pred.evidence_ids, gold.evidence_ids),
    }


def persona_agreement(pred: PersonaEntry, gold: PersonaEntry) -> dict[str, float]:
    """How far a matched pair of persona entries agree beyond their statements."""
    return {
        "evidence agreement": jaccard(pred.grounds, gold.grounds),
        "hypothesis agreement": float(pred.hypothesis == gold.hypothesis),
    }
