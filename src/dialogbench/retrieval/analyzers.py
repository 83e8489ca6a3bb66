"""How BM25 cuts text into terms: words, character bigrams, or a segmenter's words.

words     lower-case runs of two or more word characters (English, and every language that
          spaces its words); stop words are dropped by the index (bm25s' English list)
bigrams   the same words for every script but Hangul, kana and Han, whose runs become their
          overlapping character bigrams (a run of one character stays a unigram): no
          dictionary, no download, and a particle or ending glued to a word no longer hides it
jieba     Chinese words (jieba's bundled dictionary); punctuation dropped
janome    Japanese morphemes (Janome's bundled IPADIC) as base forms; particles (助詞),
          auxiliaries (助動詞) and symbols dropped
sudachi   Japanese morphemes (SudachiPy with sudachidict-core, split mode C) as normalised
          forms; particles, auxiliaries, symbols and spaces dropped
kiwi      Korean morphemes (kiwipiepy with its model package) as forms; particles (J*),
          endings (E*) and punctuation dropped

`--analyzer auto` (the default) picks by the script of each subject's messages
(`lang.cjk_language`): `AUTO[language]`, and `words` for every other language, so an English
run is exactly what it was. The segmenters are packages installed apart, none a dependency.
`benchmarks/bench_cjk_retrieval.py` measured each on our labelled Korean, Chinese and
Japanese conversations (docs/retrievers.md): character bigrams were the best or level with
the best (within the paired intervals) on every language, so `auto` chooses them.
"""

from __future__ import annotations

import importlib.metadata
import logging
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import import_module
from typing import Any

from dialogbench.data.model import Subject
from dialogbench.lang import Cjk, cjk_language

Terms = Callable[[Sequence[str]], list[list[str]]]
"""Lower-cased texts -> each text's terms (stop words kept)."""

_WORDS = re.compile(r"\w\w+")
_ASCII_WORDS = re.compile(r"\w\w+", re.ASCII)  # the same tokens on ASCII text, found faster
_CJK = (  # Hangul jamo and syllables, kana, Han (the ranges of `lang.cjk_language`)
    "\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\ua960-\ua97f\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f"
)
_OTHER_WORDS = re.compile(rf"[^\W{_CJK}]{{2,}}")
# At each character: the bigram starting there, or the character alone when it is a run of
# one; a zero-width match, so the bigrams overlap and one findall finds them all.
_GRAMS = re.compile(rf"(?=([{_CJK}]{{2}}|(?<![{_CJK}])[{_CJK}](?![{_CJK}])))")
_WORDLIKE = re.compile(r"\w")


def find_words(text: str) -> list[str]:
    """Runs of two or more word characters in a lower-cased text (the `words` terms)."""
    return (_ASCII_WORDS if text.isascii() else _WORDS).findall(text)


def find_bigrams(text: str) -> list[str]:
    """Words outside Hangul, kana and Han, then those scripts' character bigrams."""
    if text.isascii():
        return _ASCII_WORDS.findall(text)
    return _OTHER_WORDS.findall(text) + _GRAMS.findall(text)


def _each(split: Callable[[str], list[str]]) -> Terms:
    return lambda texts: list(map(split, texts))


@dataclass(frozen=True)
class Analyzer:
    """One way of cutting text into BM25 terms."""

    name: str
    load: Callable[[], Terms]
    """Returns the splitter (a segmenter is imported and its dictionary read only here)."""
    package: str | None = None
    """The PyPI package a segmenter needs (None: built in)."""

    def terms(self, texts: Sequence[str]) -> list[list[str]]:
        """Each text's terms, lower-cased, stop words kept."""
        return self.load()(list(map(str.lower, texts)))

    def version(self) -> str | None:
        """The segmenter package's version (recorded with a run), None when built in."""
        return None if self.package is None else importlib.metadata.version(self.package)


class AnalyzerUnavailable(ValueError):
    """A segmenter whose package is not installed; the message says how to install it."""


def _needs(package: str, module: str) -> Any:
    try:
        return import_module(module)
    except ImportError:
        raise AnalyzerUnavailable(
            f"the {package} segmenter is not installed: pip install {package} "
            "(--analyzer bigrams, auto's choice for Korean, Chinese and Japanese, needs nothing)"
        ) from None


def _kept(surfaces: Iterable[str]) -> list[str]:
    return [s for s in surfaces if _WORDLIKE.search(s)]


@cache
def _jieba() -> Terms:
    jieba = _needs("jieba", "jieba")
    jieba.setLogLevel(logging.WARNING)
    tokenizer = jieba.Tokenizer()
    return _each(lambda text: _kept(tokenizer.lcut(text)))


_JA_DROPPED = frozenset({"助詞", "助動詞", "記号", "補助記号", "空白"})


@cache
def _janome() -> Terms:
    tokenizer = _needs("janome", "janome.tokenizer").Tokenizer()

    def split(text: str) -> list[str]:
        return _kept(
            t.surface if t.base_form == "*" else t.base_form
            for t in tokenizer.tokenize(text)
            if t.part_of_speech.split(",")[0] not in _JA_DROPPED
        )

    return _each(split)


@cache
def _sudachi() -> Terms:
    sudachi = _needs("sudachipy", "sudachipy")
    _needs("sudachidict-core", "sudachidict_core")
    tokenizer = sudachi.Dictionary(dict="core").tokenizer(mode=sudachi.SplitMode.C)

    def split(text: str) -> list[str]:
        morphemes = tokenizer.tokenize(text)
        return _kept(
            m.normalized_form().lower()
            for m in morphemes
            if m.part_of_speech()[0] not in _JA_DROPPED
        )

    return _each(split)


@cache
def _kiwi() -> Terms:
    kiwi = _needs("kiwipiepy", "kiwipiepy").Kiwi()

    def keep(tag: str) -> bool:
        return not tag.startswith(("J", "E", "S")) or tag in ("SL", "SN", "SH")

    def split(texts: Sequence[str]) -> list[list[str]]:
        return [_kept(t.form for t in tokens if keep(t.tag)) for tokens in kiwi.tokenize(texts)]

    return split


WORDS = Analyzer("words", lambda: _each(find_words))
BIGRAMS = Analyzer("bigrams", lambda: _each(find_bigrams))
ANALYZERS: dict[str, Analyzer] = {
    a.name: a
    for a in (
        WORDS,
        BIGRAMS,
        Analyzer("jieba", _jieba, "jieba"),
        Analyzer("janome", _janome, "janome"),
        Analyzer("sudachi", _sudachi, "sudachipy"),
        Analyzer("kiwi", _kiwi, "kiwipiepy"),
    )
}
SEGMENTERS: dict[str, Cjk] = {"jieba": "zh", "janome": "ja", "sudachi": "ja", "kiwi": "ko"}
"""Each segmenter's language."""
AUTO: dict[Cjk, str] = {"ko": "bigrams", "ja": "bigrams", "zh": "bigrams"}
"""What `auto` picks for each CJK language (the best measured; every other language: words)."""
CHOICES = ("auto", *ANALYZERS)
ANALYZER_HELP = (
    "how BM25 cuts text into terms: auto (by each subject's script: character bigrams for "
    "Korean, Chinese and Japanese, words otherwise), words, bigrams, or a segmenter "
    "installed apart (jieba, janome, sudachi, kiwi)"
)


def checked(option: str) -> str:
    """`option` when it names an analyzer or `auto`; a `ValueError` naming them otherwise."""
    if option not in CHOICES:
        raise ValueError(f"unknown analyzer {option!r}; use one of {', '.join(CHOICES)}")
    return option


def analyzer_for(option: str, texts: Sequence[str]) -> Analyzer:
    """The analyzer `option` names; for `auto`, the one for the language of `texts`."""
    if option != "auto":
        return ANALYZERS[option]
    language = cjk_language(texts)
    return WORDS if language is None else ANALYZERS[AUTO[language]]


def analyzer_record(option: str, subjects: Iterable[Subject]) -> dict[str, Any]:
    """What a run records (manifest, resume identity): the option, how many subjects each
    analyzer got, the table `auto` follows, and each segmenter's package version. A
    segmenter that is not installed raises `AnalyzerUnavailable`, before any work."""
    used: dict[str, int] = {}
    for subject in subjects:
        name = analyzer_for(option, [m.text for m in subject.messages]).name
        used[name] = used.get(name, 0) + 1
    for name in used:
        ANALYZERS[name].load()
    record: dict[str, Any] = {"option": option, "subjects": dict(sorted(used.items()))}
    if option == "auto":
        record["auto"] = dict(AUTO)
    versions = {n: ANALYZERS[n].version() for n in sorted(used) if ANALYZERS[n].package}
    if versions:
        record["versions"] = versions
    return record
