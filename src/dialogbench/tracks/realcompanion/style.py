"""Content-free style features for authorship attribution (the privacy track).

Only the *form* of a text is read, never its topic:

- function-word rates: a fixed list of English function words and discourse particles
  (`FUNCTION_WORDS`, per word); every other word is a content word and is never counted;
- punctuation rates (per non-space character), ASCII casing rates, digits and emoji;
- message length: mean and spread of words per message, letters per word;
- character n-grams over a content-masked text: each content word becomes its shape
  (`Xx` capitalised, `XX` all capitals, `x` lower case, `d` a number; clitics such as
  `'s` stay), every emoji becomes one placeholder, function words and punctuation stay.
  "I saw Caroline's painting!!" reads as "I x Xx's x!!".

Counting is done once per message into additive columns (`StyleCounts`), so the features
of any group of messages come from a sum of rows: profiles and held-out samples cost one
sparse matrix product each.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import sparse

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

_FUNCTION_TEXT = """
    a an the this that these those some any no every each either neither all both
    much many more most less least few fewer several such what which whose whatever
    i me my mine myself you your yours yourself yourselves he him his himself she her
    hers herself it its itself we us our ours ourselves they them their theirs
    themselves one ones someone something anyone anything everyone everything nobody
    nothing somebody anybody everybody who whom whoever
    about above across after against along among around as at before behind below
    beneath beside besides between beyond by despite down during except for from in
    inside into like near of off on onto out outside over past per since than through
    throughout till to toward towards under underneath until unlike up upon via with
    within without
    and but or nor so yet because although though while whereas if unless whether
    once whenever wherever when where why how then else also too either
    be am is are was were been being have has had having do does did doing done
    will would shall should can could may might must ought
    not never very really quite rather just only even still already always often
    sometimes usually ever again here there now soon maybe perhaps almost enough
    indeed instead anyway anyhow however therefore thus hence otherwise
    i'm i've i'll i'd you're you've you'll you'd he's he'll he'd she's she'll she'd
    it's it'll it'd we're we've we'll we'd they're they've they'll they'd that's
    that'll there's here's what's who's where's how's let's
    don't doesn't didn't isn't aren't wasn't weren't haven't hasn't hadn't won't
    wouldn't can't cannot couldn't shouldn't mustn't mightn't needn't ain't
    gonna wanna gotta y'all
    oh ah aw hey hi hello yes yeah yep no nope ok okay well wow lol haha hmm um uh
    thanks please sure
"""
FUNCTION_WORDS: tuple[str, ...] = tuple(sorted(set(_FUNCTION_TEXT.split())))
"""Function words and discourse particles: the only words whose identity is counted."""

_FUNCTION_SET = frozenset(FUNCTION_WORDS)
PUNCTUATION = ".,!?;:'\"()-…~*/&’‘“”–—"  # noqa: RUF001 (typographic marks are the point)
EMOJI = "\u263a"  # what every emoji and pictograph becomes in the masked text
CLITICS = frozenset({"s", "ll", "re", "ve", "d", "t", "m"})
_WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*|\d+")  # noqa: RUF001
_APOSTROPHES = str.maketrans({"’": "'"})  # noqa: RUF001
_FIRST_EMOJI = 0x2100  # letterlike symbols onwards: arrows, dingbats, emoji
_TERMINAL = frozenset(".!?…")
_LOWER_I = frozenset({"i", "i'm", "i've", "i'll", "i'd"})

DENSE = (
    "messages",
    "words",
    "words squared",
    "letters",
    "uppercase letters",
    "characters",
    "starts with a letter",
    "starts upper case",
    "ends with . ! ? or …",
    "all-caps words",
    "capitalised words",
    "lower-case i",
    "pronoun i",
    "line breaks",
    "digits",
    "emoji",
)
_COL = {name: j for j, name in enumerate(DENSE)}


def _shape(word: str) -> str:
    if word.isdigit():
        return "d"
    if len(word) > 1 and word.isupper():
        return "XX"
    return "Xx" if word[0].isupper() else "x"


def _mask_word(match: re.Match[str]) -> str:
    word = match.group(0)
    if word.translate(_APOSTROPHES).lower() in _FUNCTION_SET:
        return word
    head, sep, tail = word.translate(_APOSTROPHES).rpartition("'")
    if sep and tail.lower() in CLITICS:
        return _shape(head) + word[len(head)] + word[len(head) + 1 :]
    return _shape(word)


def mask_content(text: str) -> str:
    """The text with every content word replaced by its shape and emoji by one placeholder."""
    masked = _WORD.sub(_mask_word, text)
    return "".join(EMOJI if ord(c) >= _FIRST_EMOJI else c for c in masked)


@dataclass(frozen=True)
class StyleCounts:
    """Additive counts per message: dense columns, then character n-grams (sparse)."""

    dense: FloatArray
    """messages x (DENSE, then one column per function word, then per punctuation mark)."""
    ngrams: sparse.csr_matrix
    """messages x every masked n-gram seen (`ngram_names`)."""
    ngram_names: tuple[str, ...]


def _codepoints(texts: Sequence[str]) -> tuple[IntArray, IntArray]:
    """All characters as code points, and the message each belongs to."""
    joined = "".join(texts)
    cp = np.frombuffer(joined.encode("utf-32-le"), dtype=np.uint32).astype(np.int64)
    owner = np.repeat(np.arange(len(texts)), [len(t) for t in texts])
    return cp, owner


def count_style(texts: Sequence[str], ngram: int = 3) -> StyleCounts:
    """Count every style column of every message once."""
    n = len(texts)
    dense = np.zeros((n, len(DENSE) + len(FUNCTION_WORDS) + len(PUNCTUATION)))

    # characters: casing, digits, emoji and punctuation over all messages at once
    cp, owner = _codepoints(texts)
    upper = (cp >= 65) & (cp <= 90)
    lower = (cp >= 97) & (cp <= 122)
    per_message = {
        "uppercase letters": upper,
        "letters": upper | lower,
        "characters": ~np.isin(cp, (9, 10, 13, 32)),
        "line breaks": cp == 10,
        "digits": (cp >= 48) & (cp <= 57),
        "emoji": cp >= _FIRST_EMOJI,
    }
    for name, flags in per_message.items():
        dense[:, _COL[name]] = np.bincount(owner, weights=flags, minlength=n)
    marks = np.array([ord(c) for c in PUNCTUATION])
    order = np.argsort(marks)
    at = np.searchsorted(marks[order], cp).clip(0, len(marks) - 1)
    is_mark = marks[order][at] == cp
    mark_col = len(DENSE) + len(FUNCTION_WORDS) + order[at[is_mark]]
    np.add.at(dense, (owner[is_mark], mark_col), 1.0)

    # words: counts, casing, function words (looked up with searchsorted)
    words_per = [_WORD.findall(t) for t in texts]
    counts = np.array([len(w) for w in words_per])
    dense[:, _COL["messages"]] = 1.0
    dense[:, _COL["words"]] = counts
    dense[:, _COL["words squared"]] = counts.astype(np.float64) ** 2
    words = np.array([w for ws in words_per for w in ws] or [""], dtype=str)[: counts.sum()]
    word_owner = np.repeat(np.arange(n), counts)
    alpha = ~np.char.isdigit(words)
    firsts = words.astype("U1")
    flags = {
        "all-caps words": alpha & (np.char.str_len(words) > 1) & np.char.isupper(words),
        "capitalised words": alpha & np.char.isupper(firsts),
    }
    for name, f in flags.items():
        dense[:, _COL[name]] = np.bincount(word_owner, weights=f, minlength=n)
    folded = np.char.lower(np.char.replace(words, "’", "'"))  # noqa: RUF001
    fw = np.array(FUNCTION_WORDS)
    at = np.searchsorted(fw, folded).clip(0, len(fw) - 1)
    hit = fw[at] == folded
    np.add.at(dense, (word_owner[hit], len(DENSE) + at[hit]), 1.0)
    is_i = np.isin(folded, sorted(_LOWER_I))
    dense[:, _COL["pronoun i"]] = np.bincount(word_owner, weights=is_i, minlength=n)
    lower_i = is_i & np.char.islower(firsts)
    dense[:, _COL["lower-case i"]] = np.bincount(word_owner, weights=lower_i, minlength=n)

    # message edges
    stripped = [t.strip() for t in texts]
    dense[:, _COL["starts with a letter"]] = [s[:1].isalpha() for s in stripped]
    dense[:, _COL["starts upper case"]] = [s[:1].isupper() for s in stripped]
    dense[:, _COL["ends with . ! ? or …"]] = [s[-1:] in _TERMINAL for s in stripped]

    grams, names = _ngram_counts([mask_content(t) for t in texts], ngram)
    return StyleCounts(dense=dense, ngrams=grams, ngram_names=names)


def _ngram_counts(masked: Sequence[str], n: int) -> tuple[sparse.csr_matrix, tuple[str, ...]]:
    """Character n-grams of each text, with start (\\x02) and end (\\x03) markers."""
    framed = ["\x02" + t.replace("\x02", "").replace("\x03", "") + "\x03" for t in masked]
    cp, owner = _codepoints(framed)
    alphabet, code = np.unique(cp, return_inverse=True)
    base = len(alphabet)
    if len(cp) < n:
        return sparse.csr_matrix((len(masked), 0)), ()
    width = len(cp) - n + 1
    key = np.zeros(width, dtype=np.int64)
    for j in range(n):
        key = key * base + code[j : j + width]
    inside = owner[:width] == owner[n - 1 :]  # an n-gram may not span two messages
    key, rows = key[inside], owner[:width][inside]
    vocab, cols = np.unique(key, return_inverse=True)
    grams = sparse.csr_matrix((np.ones(len(cols)), (rows, cols)), shape=(len(masked), len(vocab)))
    names = []
    for k in vocab:
        chars = []
        for _ in range(n):
            k, c = divmod(int(k), base)
            chars.append(chr(int(alphabet[c])))
        names.append("".join(reversed(chars)))
    return grams, tuple(names)


def style_features(dense: FloatArray, grams: FloatArray) -> FloatArray:
    """Rates from summed counts of groups of messages (groups x features).

    `dense` holds summed `StyleCounts.dense` rows; `grams` summed counts of the chosen
    n-grams. A rate over nothing (no words, say) is 0.
    """

    def rate(num: FloatArray, den: FloatArray) -> FloatArray:
        den = np.broadcast_to(den, num.shape)
        return np.divide(num, den, out=np.zeros(num.shape), where=den > 0)

    def col(name: str) -> FloatArray:
        return dense[:, _COL[name] : _COL[name] + 1]

    fw_end = len(DENSE) + len(FUNCTION_WORDS)
    messages, words = col("messages"), col("words")
    mean_words = rate(words, messages)
    spread = np.sqrt(np.maximum(rate(col("words squared"), messages) - mean_words**2, 0.0))
    total_grams = grams.sum(axis=1, keepdims=True)
    return np.hstack(
        [
            rate(dense[:, len(DENSE) : fw_end], words),
            rate(dense[:, fw_end:], col("characters")),
            rate(col("uppercase letters"), col("letters")),
            rate(col("starts upper case"), col("starts with a letter")),
            rate(col("ends with . ! ? or …"), messages),
            rate(col("all-caps words"), words),
            rate(col("capitalised words"), words),
            rate(col("lower-case i"), col("pronoun i")),
            rate(col("line breaks"), messages),
            rate(col("digits"), col("characters")),
            rate(col("emoji"), col("characters")),
            mean_words,
            spread,
            rate(col("letters"), words),
            rate(grams, total_grams),
        ]
    )
