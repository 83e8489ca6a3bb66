"""BM25 over each probe's own past, vectorised with numpy and scipy.sparse.

For probe i with history of `N_i = cutoff_i` messages, the score of message d < N_i is

    score(i, d) = sum over query terms t of  c_it * idf_i(t) * tf(t, d) * (k1 + 1)
                                             / (tf(t, d) + k1 * (1 - b + b * |d| / avgdl_i))

where c_it counts t in the query (as rank_bm25 does), `df_i(t)` counts history messages
containing t, `avgdl_i` is the mean length of the history, and

    idf = "lucene":  ln(1 + (N_i - df + 0.5) / (df + 0.5))          (always positive; default)
    idf = "okapi":   max(0, ln((N_i - df + 0.5) / (df + 0.5)))

The statistics are those of the history alone, so nothing after the probe shapes its
ranking. "okapi" equals rank_bm25's BM25Okapi wherever a term occurs in fewer than half
the documents; for commoner terms BM25Okapi substitutes `epsilon * mean idf` for the
negative value and we use 0. Messages with score 0 (no query term) are not retrieved.

The whole computation is one gather over the postings of each (probe, term) pair,
truncated at the probe's cutoff by a binary search, a sum per (probe, message) in
query-term order, and a ranking that sorts only each probe's best few candidates: no loop
over probes or documents, and memory bounded by blocks of `_MAX_ENTRIES` entries.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain, count, repeat
from typing import Literal

import numpy as np
import scipy.sparse as sp
from bm25s.stopwords import STOPWORDS_EN

from dialogbench.data.model import Subject
from dialogbench.retrieval.analyzers import WORDS, Analyzer, analyzer_for, checked
from dialogbench.retrieval.base import (
    FloatArray,
    IntArray,
    Probe,
    Rankings,
    concat_rankings,
    reference_matrix,
)

# Maximal runs of two or more word characters: the same tokens as bm25s' and
# scikit-learn's r"(?u)\b\w\w+\b" (a greedy run always ends at a boundary and no
# boundary lies inside a run), found about a quarter faster without the \b tests.
_TOKEN = re.compile(r"\w\w+")
STOPWORDS = frozenset(STOPWORDS_EN)
_MAX_ENTRIES = 1 << 22  # (probe, posting) pairs expanded per block


def tokenize(text: str, stopwords: frozenset[str] = STOPWORDS) -> list[str]:
    """Lower-case words of two or more characters, English stop words removed (bm25s' list)."""
    return [t for t in _TOKEN.findall(text.lower()) if t not in stopwords]


def _term_ids(docs: Sequence[Sequence[str]]) -> tuple[dict[str, int], IntArray, IntArray]:
    """The vocabulary (ids in order of first occurrence), every token's id (documents in
    order) and each document's length."""
    flat = list(chain.from_iterable(docs))
    vocab: dict[str, int] = dict(zip(dict.fromkeys(flat), count()))
    terms = np.fromiter(map(vocab.__getitem__, flat), dtype=np.int64, count=len(flat))
    lengths = np.fromiter(map(len, docs), dtype=np.int64, count=len(docs))
    return vocab, terms, lengths


@dataclass(frozen=True)
class BM25Params:
    """BM25's free parameters."""

    k1: float = 1.5
    b: float = 0.75
    idf: Literal["lucene", "okapi"] = "lucene"


class BM25Index:
    """Postings of one document collection, sorted by (term, document)."""

    analyzer: Analyzer = WORDS
    """How `from_texts` and `text_queries` cut text into terms."""

    def __init__(self, docs: Sequence[Sequence[str]], params: BM25Params = BM25Params()) -> None:
        vocab, terms, lengths = _term_ids(docs)
        self._build(vocab, len(vocab), terms, lengths, params)

    @classmethod
    def from_texts(
        cls,
        texts: Sequence[str],
        params: BM25Params = BM25Params(),
        stopwords: frozenset[str] = STOPWORDS,
        analyzer: Analyzer = WORDS,
    ) -> BM25Index:
        """The index of `[tokenize(t) for t in texts]` (with the default `words` analyzer),
        built faster: stop words are dropped by term id after one vocabulary pass instead of
        word by word."""
        words = analyzer.terms(texts)
        vocab, terms, lengths = _term_ids(words)
        n_ids = len(vocab)
        stop_ids = [vocab.pop(w) for w in stopwords.intersection(vocab)]
        if stop_ids:
            is_stop = np.zeros(n_ids, dtype=bool)
            is_stop[stop_ids] = True
            stopped = is_stop[terms]
            doc_of = np.repeat(np.arange(len(words), dtype=np.int64), lengths)
            lengths -= np.bincount(doc_of[stopped], minlength=len(words))
            terms = terms[~stopped]
        index = cls.__new__(cls)
        index.analyzer = analyzer
        index._build(vocab, n_ids, terms, lengths, params)
        return index

    def _build(
        self,
        vocab: dict[str, int],
        n_ids: int,
        terms: IntArray,
        lengths: IntArray,
        params: BM25Params,
    ) -> None:
        """Postings from the term id of every kept token (documents in order) and each
        document's kept length; ids run below `n_ids` (ids not in `vocab` have no postings)."""
        self.params = params
        self.vocab = vocab
        self.n_docs = n = len(lengths)
        doc_of = np.repeat(np.arange(n, dtype=np.int64), lengths)
        keys, tf = np.unique(terms * n + doc_of, return_counts=True)
        self.post_key = keys  # term * n + doc, ascending
        self.post_doc = keys % max(n, 1)
        self.post_tf = tf.astype(np.float64)
        self.indptr = np.searchsorted(keys // max(n, 1), np.arange(n_ids + 1))
        self.doc_len = lengths.astype(np.float64)
        self.cum_len = np.concatenate([[0.0], np.cumsum(self.doc_len)])

    def query_matrix(self, queries: Sequence[Sequence[str]]) -> sp.csr_matrix:
        """Queries as a (queries x term ids) matrix of term counts; unknown terms dropped."""
        flat = list(chain.from_iterable(queries))
        ids = np.fromiter(map(self.vocab.get, flat, repeat(-1)), dtype=np.int64, count=len(flat))
        lengths = np.fromiter(map(len, queries), dtype=np.int64, count=len(queries))
        rows = np.repeat(np.arange(len(queries), dtype=np.int64), lengths)
        known = ids >= 0
        m = sp.csr_matrix(
            (np.ones(int(known.sum())), (rows[known], ids[known])),
            shape=(len(queries), max(len(self.indptr) - 1, 1)),
        )
        m.sum_duplicates()
        return m

    def text_queries(self, texts: Sequence[str]) -> sp.csr_matrix:
        """`query_matrix` of the texts cut by the index's analyzer (stop words are not in the
        vocabulary of an index built by `from_texts`, so they drop out with the unknown
        words)."""
        return self.query_matrix(self.analyzer.terms(texts))

    def _pairs(self, q: sp.csr_matrix, cutoffs: IntArray) -> tuple[IntArray, ...]:
        """(probe, term, count, posting start, document frequency) for every query term."""
        coo = q.tocoo()
        qi, qt = coo.row.astype(np.int64), coo.col.astype(np.int64)
        start = self.indptr[qt]
        end = np.searchsorted(self.post_key, qt * self.n_docs + cutoffs[qi])
        return qi, qt, coo.data, start, end - start

    def score(self, queries: sp.csr_matrix, cutoffs: IntArray) -> sp.csr_matrix:
        """Scores of each query against the documents before its cutoff, as a sparse matrix."""
        if len(cutoffs) > 1 and (cutoffs == cutoffs[0]).all():
            return self._score_shared_history(queries, int(cutoffs[0]))
        k1, b = self.params.k1, self.params.b
        qi, _, qc, start, df = self._pairs(queries, cutoffs)
        keep = df > 0
        qi, qc, start, df = qi[keep], qc[keep], start[keep], df[keep]
        n_i = cutoffs[qi].astype(np.float64)
        ratio = (n_i - df + 0.5) / (df + 0.5)
        idf = np.log1p(ratio) if self.params.idf == "lucene" else np.maximum(0.0, np.log(ratio))
        avgdl = self.cum_len[cutoffs[qi]] / n_i
        # One entry per (probe, term, posting); evaluated in place, in the order of the
        # formula  qc * idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * |d| / avgdl)).
        post = np.repeat(start - (np.cumsum(df) - df), df)
        post += np.arange(len(post))
        tf = self.post_tf[post]
        docs = self.post_doc[post]
        norm = self.doc_len[docs]
        norm *= b
        norm /= np.repeat(np.where(avgdl > 0, avgdl, 1.0), df)
        norm += 1.0 - b
        norm *= k1
        norm += tf
        contrib = np.repeat(idf * qc, df).astype(np.float64, copy=False)
        contrib *= tf
        contrib *= k1 + 1.0
        contrib /= norm
        return _sum_entries(
            np.repeat(qi, df), docs, contrib, cutoffs, (queries.shape[0], max(self.n_docs, 1))
        )

    def _score_shared_history(self, queries: sp.csr_matrix, cutoff: int) -> sp.csr_matrix:
        """All queries see the same history (e.g. questions after the last message): one
        weight matrix for that history and one sparse product, same formula as `score`."""
        k1, b = self.params.k1, self.params.b
        n_terms = len(self.indptr) - 1
        inside = self.post_doc < cutoff
        docs, tf = self.post_doc[inside], self.post_tf[inside]
        term = np.repeat(np.arange(n_terms), np.diff(self.indptr))[inside]
        df = np.bincount(term, minlength=n_terms).astype(np.float64)
        ratio = (cutoff - df + 0.5) / (df + 0.5)
        idf = np.log1p(ratio) if self.params.idf == "lucene" else np.maximum(0.0, np.log(ratio))
        avgdl = self.cum_len[cutoff] / cutoff if cutoff else 1.0
        norm = k1 * (1.0 - b + b * self.doc_len[docs] / (avgdl or 1.0)) + tf
        rows = queries.shape[1]  # the vocabulary, or 1 when it is empty
        indptr = np.zeros(rows + 1, dtype=np.int64)
        indptr[1 : n_terms + 1] = np.cumsum(df, dtype=np.int64)
        indptr[n_terms + 1 :] = indptr[n_terms]
        weights = sp.csr_matrix(
            (idf[term] * tf * (k1 + 1.0) / norm, docs, indptr),
            shape=(rows, max(self.n_docs, 1)),
        )
        out = sp.csr_matrix(queries @ weights)
        out.eliminate_zeros()
        # Columns come out of the product unsorted; two O(nnz) transposes sort them faster
        # than a sort within each row.
        return sp.csr_matrix(out.tocsc().tocsr())

    def work(self, queries: sp.csr_matrix, cutoffs: IntArray) -> IntArray:
        """Postings each query touches: what a block of queries costs to score."""
        qi, _, _, _, df = self._pairs(queries, cutoffs)
        return np.bincount(qi, weights=df, minlength=queries.shape[0]).astype(np.int64)


def _sum_entries(
    rows: IntArray,
    cols: IntArray,
    vals: FloatArray,
    cutoffs: IntArray,
    shape: tuple[int, int],
) -> sp.csr_matrix:
    """Sum values per (row, col) into a canonical csr matrix, exact zeros dropped.

    `rows` must be ascending and `cols[i] < cutoffs[rows[i]]`. Each cell's values are
    added in input order (query-term order), so equal terms give bitwise-equal scores and
    ties really go to recency. Rows are taken in blocks of at most `_MAX_ENTRIES` cells
    (their cutoffs); a block is summed with np.bincount over its cells, or over the cells
    it touches (found by a stable sort) when it touches few of them.
    """
    n_rows, n_cols = shape
    offsets = np.concatenate([[0], np.cumsum(cutoffs, dtype=np.int64)])
    row_start = np.searchsorted(rows, np.arange(n_rows + 1))
    counts = np.zeros(n_rows, dtype=np.int64)
    out_cols: list[IntArray] = []
    out_vals: list[FloatArray] = []
    r0 = 0
    while r0 < n_rows:
        r1 = int(np.searchsorted(offsets, offsets[r0] + _MAX_ENTRIES, side="right")) - 1
        r1 = min(max(r1, r0 + 1), n_rows)
        e0, e1 = row_start[r0], row_start[r1]
        cells = int(offsets[r1] - offsets[r0])
        r, c, v = rows[e0:e1], cols[e0:e1], vals[e0:e1]
        if 4 * (e1 - e0) >= cells:  # dense enough: one bincount over the block's cells
            sums = np.bincount(offsets[r] - offsets[r0] + c, weights=v, minlength=cells)
            acc = sums.astype(np.float64, copy=False)  # float64 already; for the type checker
            nz = np.flatnonzero(acc)
            per_row = np.diff(np.searchsorted(nz, offsets[r0 : r1 + 1] - offsets[r0]))
            out_cols.append(nz - np.repeat(offsets[r0:r1] - offsets[r0], per_row))
            out_vals.append(acc[nz])
        else:
            key = r * n_cols + c
            order = np.argsort(key, kind="stable")
            key = key[order]
            new_cell = np.ones(len(key), dtype=bool)
            new_cell[1:] = key[1:] != key[:-1]
            summed = np.bincount(np.cumsum(new_cell) - 1, weights=v[order])
            key = key[new_cell]
            nonzero = summed != 0
            key, summed = key[nonzero], summed[nonzero]
            per_row = np.bincount(key // n_cols - r0, minlength=r1 - r0)
            out_cols.append(key % n_cols)
            out_vals.append(summed)
        counts[r0:r1] = per_row
        r0 = r1
    indptr = np.concatenate([[0], np.cumsum(counts)])
    data = np.concatenate(out_vals) if out_vals else np.zeros(0)
    indices = np.concatenate(out_cols) if out_cols else np.zeros(0, dtype=np.int64)
    return sp.csr_matrix((data, indices, indptr), shape=shape)


def rank_sparse(scores: sp.csr_matrix, probes: Sequence[Probe], depth: int) -> Rankings:
    """`Rankings` from sparse scores: absent entries are not retrieved, ties go to recency.

    Within a row, entries rank by (score descending, column descending). Nothing is fully
    sorted: only entries at or above a cheap per-row bound on the depth-th best score are
    sorted for the top `depth`, and a reference's rank is one plus the entries that beat it.
    """
    n_rows, n_cols = scores.shape
    indptr = scores.indptr.astype(np.int64)
    cols, data = scores.indices.astype(np.int64), scores.data
    lengths = np.diff(indptr)
    rows = np.repeat(np.arange(n_rows), lengths)
    top = _top_rows(rows, cols, data, indptr, depth)
    refs = reference_matrix(probes)
    ranks: FloatArray = np.full(refs.shape, np.inf)
    if len(cols):
        keys = rows * n_cols + cols  # ascending: csr rows in order, columns sorted
        want = np.arange(n_rows)[:, None] * n_cols + np.maximum(refs, 0)
        at = np.minimum(np.searchsorted(keys, want), len(keys) - 1)
        pi, pj = np.nonzero((keys[at] == want) & (refs >= 0))  # retrieved references
        ranks[pi, pj] = 1 + _count_beating(indptr, cols, data, pi, at[pi, pj], refs[pi, pj])
    ranks[refs < 0] = np.nan
    return Rankings(top=top, ref_ranks=ranks)


def _count_beating(
    indptr: IntArray,
    cols: IntArray,
    data: FloatArray,
    rows: IntArray,
    entry: IntArray,
    col: IntArray,
) -> FloatArray:
    """For each (row, entry): how many entries of the row rank above it (higher score, or
    equal score and later column). Rows are expanded in chunks of bounded size."""
    out = np.empty(len(rows))
    lengths = indptr[rows + 1] - indptr[rows]
    ends = np.cumsum(lengths)
    lo = 0
    while lo < len(rows):
        hi = int(np.searchsorted(ends, ends[lo] - lengths[lo] + _MAX_ENTRIES, side="right"))
        hi = max(hi, lo + 1)
        idx, local = _row_entries(indptr, rows[lo:hi])
        score, c = data[entry[lo:hi]][local], col[lo:hi][local]
        beat = (data[idx] > score) | ((data[idx] == score) & (cols[idx] > c))
        out[lo:hi] = np.bincount(local, weights=beat, minlength=hi - lo)
        lo = hi
    return out


def _row_entries(indptr: IntArray, rows: IntArray) -> tuple[IntArray, IntArray]:
    """Entry indices of the given csr rows, and which of `rows` each belongs to."""
    lengths = indptr[rows + 1] - indptr[rows]
    local = np.repeat(np.arange(len(rows)), lengths)
    first = np.cumsum(lengths) - lengths
    return indptr[rows][local] + np.arange(int(lengths.sum())) - first[local], local


def _top_rows(
    rows: IntArray, cols: IntArray, data: FloatArray, indptr: IntArray, depth: int
) -> IntArray:
    """Columns of each row's best `depth` entries by (score desc, column desc); -1 pads."""
    n_rows = len(indptr) - 1
    top = np.full((n_rows, depth), -1, dtype=np.int64)
    if len(cols) == 0 or depth <= 0:
        return top
    lengths = np.diff(indptr)
    # A lower bound on each long row's depth-th largest score: split the row into `depth`
    # strided groups (position mod depth); their maxima are `depth` distinct entries, so
    # the smallest of them is at most the depth-th largest. Rows of similar length are
    # padded into blocks of bounded size for this. Short rows keep -inf (all candidates).
    threshold = np.full(n_rows, -np.inf)
    long = np.flatnonzero(lengths > depth)
    long = long[np.argsort(lengths[long], kind="stable")]
    widths = -(-lengths[long] // depth) * depth  # rounded up to a multiple of depth
    lo = 0
    while lo < len(long):
        # rows lo..hi-1 pad to widths[hi - 1]; keep (hi - lo) * widths[hi - 1] bounded
        ahead = widths[lo : lo + _MAX_ENTRIES // int(widths[lo]) + 1]
        fits = np.arange(1, len(ahead) + 1) * ahead <= _MAX_ENTRIES
        hi = lo + max(1, int(np.argmin(fits)) if not fits.all() else len(ahead))
        block = long[lo:hi]
        w = int(widths[hi - 1])
        idx, local = _row_entries(indptr, block)
        pos = idx - indptr[block][local]
        groups = np.full(len(block) * w, -np.inf)  # (row, group, position in group)
        groups[local * w + (pos % depth) * (w // depth) + pos // depth] = data[idx]
        threshold[block] = groups.reshape(len(block), depth, -1).max(axis=2).min(axis=1)
        lo = hi
    # Sort the candidates by (row, score desc, column desc): reversed, columns run
    # descending within a row; two stable sorts follow (rows last, by radix when small).
    cand = np.flatnonzero(data >= threshold[rows])[::-1]
    if n_rows <= 1 << 16:
        by_score = cand[np.argsort(-data[cand], kind="stable")]
        order = by_score[np.argsort(rows[by_score].astype(np.uint16), kind="stable")]
    else:
        order = cand[np.lexsort((-data[cand], rows[cand]))]
    r = rows[order]
    pos = np.arange(len(order)) - np.searchsorted(r, r)
    keep = pos < depth
    top[r[keep], pos[keep]] = cols[order[keep]]
    return top


class BM25Retriever:
    """BM25 over the history before each probe (see the module docstring for the formula).

    `analyzer`: a name in `analyzers.ANALYZERS`, or `auto` (by each subject's script)."""

    name = "bm25"

    def __init__(self, params: BM25Params = BM25Params(), analyzer: str = "auto") -> None:
        self.params = params
        self.analyzer = checked(analyzer)

    def rank(self, subject: Subject, probes: Sequence[Probe], depth: int) -> Rankings:
        texts = [m.text for m in subject.messages]
        analyzer = analyzer_for(self.analyzer, texts)
        index = BM25Index.from_texts(texts, self.params, analyzer=analyzer)
        queries = index.text_queries([p.text for p in probes])
        cutoffs = np.array([p.cutoff for p in probes], dtype=np.int64)
        return rank_blocks(index, queries, cutoffs, probes, depth)


def rank_blocks(
    index: BM25Index,
    queries: sp.csr_matrix,
    cutoffs: IntArray,
    probes: Sequence[Probe],
    depth: int,
) -> Rankings:
    """Score and rank in blocks of probes whose expanded postings stay under a fixed bound."""
    work = np.cumsum(index.work(queries, cutoffs))
    parts: list[Rankings] = []
    lo = 0
    while lo < len(probes):
        base = work[lo - 1] if lo else 0
        hi = max(lo + 1, int(np.searchsorted(work, base + _MAX_ENTRIES, side="right")))
        parts.append(rank_sparse(index.score(queries[lo:hi], cutoffs[lo:hi]), probes[lo:hi], depth))
        lo = hi
    return concat_rankings(parts, depth)
