"""BM25 with per-probe prefix statistics against rank_bm25, bm25s and the documented formula."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import bm25s
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rank_bm25 import BM25Okapi

from dialogbench.data.model import Message, Subject
from dialogbench.retrieval import bm25 as bm25_module
from dialogbench.retrieval.base import Probe
from dialogbench.retrieval.baselines import rank_scores
from dialogbench.retrieval.bm25 import (
    STOPWORDS,
    BM25Index,
    BM25Params,
    BM25Retriever,
    rank_sparse,
    tokenize,
)

Doc = list[str]


def dense_scores(index: BM25Index, queries: Sequence[Doc], cutoffs: Sequence[int]) -> np.ndarray:
    q = index.query_matrix(queries)
    scores: np.ndarray = index.score(q, np.array(cutoffs, dtype=np.int64)).toarray()
    return scores[:, : index.n_docs]


def brute_bm25(
    corpus: Sequence[Doc], query: Doc, cutoff: int, k1: float, b: float, idf: str
) -> list[float]:
    """The module docstring's formula, term by term, over corpus[:cutoff]."""
    history = corpus[:cutoff]
    n = len(history)
    if n == 0:
        return []
    avgdl = sum(len(d) for d in history) / n
    out = []
    for d in history:
        tfs = Counter(d)
        total = 0.0
        for t, c in Counter(query).items():
            df = sum(t in h for h in history)
            tf = tfs[t]
            if df == 0 or tf == 0:
                continue
            ratio = (n - df + 0.5) / (df + 0.5)
            w = math.log(1 + ratio) if idf == "lucene" else max(0.0, math.log(ratio))
            total += c * w * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(d) / avgdl))
        out.append(total)
    return out


def random_corpus(rng: np.random.Generator, n_docs: int, vocab: Sequence[str]) -> list[Doc]:
    """Documents of 1-12 tokens, words drawn with Zipf-like weights."""
    p = 1.0 / np.arange(1, len(vocab) + 1)
    p /= p.sum()
    sizes = rng.integers(1, 13, size=n_docs)
    return [[str(t) for t in rng.choice(vocab, size=s, p=p)] for s in sizes]


VOCAB = [f"w{i}" for i in range(40)]


# (1) okapi idf equals rank_bm25's BM25Okapi on the prefix, for terms in < half the docs


@pytest.mark.parametrize("seed", range(8))
def test_okapi_equals_rank_bm25_on_each_prefix(seed: int) -> None:
    rng = np.random.default_rng(seed)
    corpus = random_corpus(rng, 30, VOCAB)
    k1, b = float(rng.uniform(0.5, 2.0)), float(rng.uniform(0.1, 1.0))
    index = BM25Index(corpus, BM25Params(k1=k1, b=b, idf="okapi"))
    checked = 0
    for cutoff in (1, 2, 5, 11, 20, 30):
        prefix = corpus[:cutoff]
        df = Counter(t for d in prefix for t in set(d))
        rare = sorted(t for t in VOCAB if df[t] < cutoff / 2)  # includes unseen terms
        for _ in range(3):
            query = [str(t) for t in rng.choice(rare, size=rng.integers(1, 6))]  # repeats too
            ours = dense_scores(index, [query], [cutoff])[0]
            ref = BM25Okapi(prefix, k1=k1, b=b).get_scores(query)
            np.testing.assert_allclose(ours[:cutoff], ref, rtol=0, atol=1e-9)
            assert (ours[cutoff:] == 0).all()  # the future is never scored
            checked += int(ref.any())
    assert checked > 0


def test_prefix_statistics_differ_from_whole_corpus_statistics() -> None:
    """Scores depend on the history only: a later document changes nothing before it."""
    corpus = [["apple", "pie"], ["apple"], ["banana", "split"], ["apple", "apple", "tart"]]
    index = BM25Index(corpus)
    early = dense_scores(index, [["apple"]], [2])[0]
    alone = dense_scores(BM25Index(corpus[:2]), [["apple"]], [2])[0]
    np.testing.assert_allclose(early[:2], alone, rtol=0, atol=1e-12)
    late = dense_scores(index, [["apple"]], [4])[0]
    assert not np.allclose(late[:2], early[:2])


# (2) where rank_bm25 floors a negative idf at epsilon * mean idf, we use 0


def test_common_terms_get_zero_okapi_idf_unlike_rank_bm25() -> None:
    corpus = [["common", "x1"], ["common", "x2"], ["common"], ["rare", "common"], ["x3"]]
    k1, b = 1.5, 0.75
    okapi = BM25Okapi(corpus, k1=k1, b=b)
    index = BM25Index(corpus, BM25Params(k1=k1, b=b, idf="okapi"))
    # 'common' is in 4 of 5 documents: ln((5 - 4 + .5) / (4 + .5)) < 0
    assert math.log((5 - 4 + 0.5) / (4 + 0.5)) < 0
    avgdl = sum(map(len, corpus)) / len(corpus)
    tf = np.array([float("common" in d) for d in corpus])
    dl = np.array([len(d) for d in corpus], dtype=float)
    tfc = tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))

    ours = dense_scores(index, [["common"]], [5])[0]
    assert (ours == 0.0).all()
    assert index.score(index.query_matrix([["common"]]), np.array([5])).nnz == 0
    theirs = okapi.get_scores(["common"])
    assert okapi.idf["common"] == okapi.epsilon * okapi.average_idf > 0
    np.testing.assert_allclose(theirs, okapi.epsilon * okapi.average_idf * tfc, rtol=1e-12)

    # with a rare term added, the difference is exactly the common term's floored part
    mixed = ["rare", "common"]
    np.testing.assert_allclose(
        dense_scores(index, [mixed], [5])[0],
        okapi.get_scores(mixed) - okapi.epsilon * okapi.average_idf * tfc,
        rtol=0,
        atol=1e-12,
    )


def test_term_in_exactly_half_the_documents_has_zero_okapi_idf_in_both() -> None:
    corpus = [["half", "a1"], ["half"], ["b1"], ["b2", "b3"]]
    okapi = BM25Okapi(corpus)
    assert okapi.idf["half"] == 0.0
    index = BM25Index(corpus, BM25Params(idf="okapi"))
    assert (dense_scores(index, [["half"]], [4])[0] == 0).all()
    assert (okapi.get_scores(["half"]) == 0).all()


# (3) against the documented formula, pure Python


@st.composite
def corpora(draw: st.DrawFn) -> tuple[list[Doc], list[Doc], list[int]]:
    vocab = ["a", "b", "c", "d", "e", "f", "g"]
    docs = draw(st.lists(st.lists(st.sampled_from(vocab), max_size=6), min_size=1, max_size=10))
    n_q = draw(st.integers(1, 4))
    queries = [
        draw(st.lists(st.sampled_from([*vocab, "zz"]), min_size=0, max_size=6)) for _ in range(n_q)
    ]
    cutoffs = [draw(st.integers(0, len(docs))) for _ in range(n_q)]
    return docs, queries, cutoffs


@settings(max_examples=100, deadline=None)
@given(
    case=corpora(),
    k1=st.floats(0.1, 3.0),
    b=st.floats(0.0, 1.0),
    idf=st.sampled_from(["lucene", "okapi"]),
)
def test_scores_match_the_documented_formula(
    case: tuple[list[Doc], list[Doc], list[int]], k1: float, b: float, idf: str
) -> None:
    docs, queries, cutoffs = case
    index = BM25Index(docs, BM25Params(k1=k1, b=b, idf=idf))  # type: ignore[arg-type]
    got = dense_scores(index, queries, cutoffs)
    for i, (q, c) in enumerate(zip(queries, cutoffs, strict=True)):
        np.testing.assert_allclose(
            got[i, :c], brute_bm25(docs, q, c, k1, b, idf), rtol=1e-12, atol=1e-12
        )
        assert (got[i, c:] == 0).all()
    if idf == "lucene":  # lucene idf is positive: a document with a query term always scores
        for i, (q, c) in enumerate(zip(queries, cutoffs, strict=True)):
            has = [bool(set(q) & set(d)) for d in docs[:c]]
            assert ((got[i, :c] > 0) == np.array(has, dtype=bool)).all()


def test_default_params_are_lucene_k1_1_5_b_0_75() -> None:
    p = BM25Params()
    assert (p.k1, p.b, p.idf) == (1.5, 0.75, "lucene")


def test_repeated_query_terms_count() -> None:
    docs = [["cat", "dog"], ["cat"], ["fish"], ["bird", "fish"]]
    index = BM25Index(docs)
    once = dense_scores(index, [["cat"]], [4])[0]
    thrice = dense_scores(index, [["cat", "cat", "cat"]], [4])[0]
    np.testing.assert_allclose(thrice, 3 * once, rtol=1e-12)


# (4) against bm25s' lucene scores on the whole corpus


@pytest.mark.parametrize("seed", range(5))
def test_lucene_equals_bm25s_times_k1_plus_one(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    corpus = random_corpus(rng, 40, VOCAB)
    k1, b = float(rng.uniform(0.5, 2.0)), float(rng.uniform(0.1, 1.0))
    ref = bm25s.BM25(method="lucene", k1=k1, b=b, dtype="float64")
    ref.index(corpus, show_progress=False)  # a list of token lists is indexed as is
    index = BM25Index(corpus, BM25Params(k1=k1, b=b, idf="lucene"))
    vocab = sorted({t for d in corpus for t in d})
    for _ in range(5):
        query = [str(t) for t in rng.choice(vocab, size=rng.integers(1, 6))]
        ours = dense_scores(index, [query], [len(corpus)])[0]
        # bm25s leaves out BM25's constant (k1 + 1) numerator factor
        np.testing.assert_allclose(ours, (k1 + 1) * ref.get_scores(query), rtol=1e-9, atol=1e-12)


# the retriever end to end: tokenised texts, per-probe cutoffs, blocks


def make_subject(texts: Sequence[str]) -> Subject:
    return Subject(
        id="bm",
        messages=[
            Message(id=f"m{i}", position=i, speaker="ann", text=t) for i, t in enumerate(texts)
        ],
    )


def make_probe(pid: str, text: str, cutoff: int, refs: Sequence[int]) -> Probe:
    return Probe(
        id=pid,
        subject_id="bm",
        kind="question",
        text=text,
        cutoff=cutoff,
        reference_positions=tuple(refs),
        speakers=("ann",),
    )


def test_retriever_ranks_by_history_scores() -> None:
    rng = np.random.default_rng(5)
    words = ["garden", "tomato", "piano", "lesson", "sister", "wedding", "hiking", "trip"]
    texts = [" ".join(rng.choice(words, size=rng.integers(2, 8))) for _ in range(30)]
    subject = make_subject(texts)
    probes = [
        make_probe(f"p{c}", " ".join(rng.choice(words, size=3)), c, (max(c - 3, 0), c // 2))
        for c in range(1, 30, 2)
    ]
    depth = 6
    got = BM25Retriever().rank(subject, probes, depth)

    index = BM25Index([tokenize(t) for t in texts])
    dense = dense_scores(index, [tokenize(p.text) for p in probes], [p.cutoff for p in probes])
    want = rank_scores(np.where(dense > 0, dense, -np.inf), probes, depth)
    np.testing.assert_array_equal(got.top, want.top)
    np.testing.assert_array_equal(got.ref_ranks, want.ref_ranks)
    for i, p in enumerate(probes):
        assert (got.top[i] < p.cutoff).all()

    old = bm25_module._MAX_ENTRIES
    bm25_module._MAX_ENTRIES = 1  # one probe per block
    try:
        blocked = BM25Retriever().rank(subject, probes, depth)
    finally:
        bm25_module._MAX_ENTRIES = old
    np.testing.assert_array_equal(blocked.top, got.top)
    np.testing.assert_array_equal(blocked.ref_ranks, got.ref_ranks)


def test_retriever_finds_the_matching_message_and_leaves_others_out() -> None:
    subject = make_subject(
        [
            "I adopted a puppy named Biscuit",
            "The weather was lovely today",
            "Work was stressful again",
            "Biscuit chewed my shoes",
            "Biscuit is at the vet tomorrow",
        ]
    )
    probes = [
        make_probe("q", "How is Biscuit doing?", 4, (0, 3)),
        make_probe("none", "Quantum chromodynamics", 5, (1,)),
    ]
    got = BM25Retriever().rank(subject, probes, depth=4)
    # both Biscuit messages tie on tf and length; the later one wins; message 4 is the future
    assert got.top[0].tolist() == [3, 0, -1, -1]
    assert got.ref_ranks[0].tolist() == [2.0, 1.0]
    assert got.top[1].tolist() == [-1, -1, -1, -1]
    assert got.ref_ranks[1, 0] == np.inf


def test_empty_history_and_empty_subject() -> None:
    subject = make_subject(["alpha beta", "beta gamma"])
    got = BM25Retriever().rank(subject, [make_probe("a", "beta", 0, ())], depth=2)
    assert got.top.tolist() == [[-1, -1]]
    empty = BM25Retriever().rank(make_subject([]), [make_probe("a", "beta", 0, ())], depth=2)
    assert empty.top.tolist() == [[-1, -1]]


def test_rank_sparse_on_index_scores_is_consistent() -> None:
    docs = [["x", "y"], ["y"], ["x", "x", "z"], ["z"]]
    index = BM25Index(docs)
    probes = [make_probe("a", "x y", 4, (0, 3))]
    scores = index.score(index.query_matrix([["x", "y"]]), np.array([4]))
    got = rank_sparse(scores, probes, 4)
    assert got.ref_ranks[0, 1] == np.inf  # doc 3 shares no term with the query
    assert sorted(got.top[0][got.top[0] >= 0].tolist()) == [0, 1, 2]
    assert got.top[0, 0] == 0  # two query terms


# (5) tokenize


def test_tokenize_lower_cases_and_drops_short_tokens_and_stop_words() -> None:
    assert tokenize("The Cat and I went to Paris, it WAS fun!") == ["cat", "went", "paris", "fun"]
    assert tokenize("I'm a b c d ok") == ["ok"]  # 'i', 'm', 'a', 'b', ... are one character
    assert tokenize("Café 42 x_y 3") == ["café", "42", "x_y"]
    assert tokenize("") == []


def test_tokenize_uses_the_bm25s_english_stop_words() -> None:
    assert {"the", "and", "is", "of", "to", "with"} <= STOPWORDS
    assert "cat" not in STOPWORDS
    assert tokenize("the and is", stopwords=frozenset()) == ["the", "and", "is"]
    assert tokenize("dog cat", stopwords=frozenset({"dog"})) == ["cat"]
    assert all(t not in STOPWORDS for t in tokenize(" ".join(sorted(STOPWORDS)) + " keep"))
