"""Prefix BM25 at scale: ours against rank_bm25 on synthetic histories of 10k-100k messages.

A seeded synthetic conversation (made-up words drawn from a Zipf-Mandelbrot law over a
30k vocabulary, mixed with common English words, about 5-40 words a message, median 12)
and 5,000 probes at uniformly random cutoffs, each with 1-3 reference messages before
its cutoff and a query sharing some words with them. Every probe searches only the
messages before its cutoff, with the statistics (N, df, avgdl) of that prefix: the
retrieval track's setting.

Measured per size, each in a fresh subprocess so that the RSS figures mean something:

  ours       `BM25Retriever().rank(subject, probes, 10)`: tokenising, indexing, scoring
             and ranking (top-10 and reference ranks) of all probes. Wall time (best and
             median of --repeats), tracemalloc peak (a separate run, as tracing slows
             Python allocations) and max-RSS growth over the resident size before the run.
  rank_bm25  the same work done plainly: per probe `BM25Okapi` over the prefix corpus,
             `get_scores`, a full argsort. Timed on --sample probes at evenly spaced
             cutoff quantiles and scaled to all probes, plus one tokenisation of the
             history (tokens are reused across probes, which favours rank_bm25).

On the sampled probes the script also checks ours with idf="okapi" against rank_bm25
with its negative-idf floor set to 0: the scores must match (prefix statistics exact).

    .venv/bin/python benchmarks/bench_bm25_scaling.py                 # 10k, 30k, 100k
    .venv/bin/python benchmarks/bench_bm25_scaling.py --sizes 100000 --repeats 1
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
from rank_bm25 import BM25Okapi

from dialogbench.data.model import Message, Subject
from dialogbench.retrieval.base import Probe
from dialogbench.retrieval.bm25 import (
    STOPWORDS,
    BM25Index,
    BM25Params,
    BM25Retriever,
    tokenize,
)

DEPTH = 10
FUNCTION_WORDS = (
    "i",
    "you",
    "it",
    "the",
    "a",
    "and",
    "to",
    "of",
    "in",
    "is",
    "that",
    "was",
    "for",
    "on",
    "with",
    "my",
    "me",
    "but",
    "so",
    "just",
    "have",
    "be",
    "are",
    "we",
    "they",
    "this",
    "what",
    "at",
    "not",
    "do",
    "if",
    "or",
    "all",
    "about",
    "can",
    "no",
    "like",
    "as",
    "he",
    "she",
)
SYLLABLES = [c + v for c in "bcdfghjklmnprstvwyz" for v in "aeiou"] + ["an", "er", "on", "ith"]


# --- synthetic data -------------------------------------------------------------------------


def make_vocabulary(rng: np.random.Generator, size: int) -> list[str]:
    """`size` distinct made-up words of 2-4 syllables, none of them a stop word."""
    words: dict[str, None] = {}
    while len(words) < size:
        n_syl = rng.choice([2, 3, 4], p=[0.35, 0.45, 0.2])
        w = "".join(SYLLABLES[i] for i in rng.integers(len(SYLLABLES), size=n_syl))
        if w not in STOPWORDS:
            words[w] = None
    return list(words)


class Generator:
    """Zipf-Mandelbrot word draws, message lengths in 5-40, a share of function words."""

    def __init__(self, seed: int, vocab_size: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.vocab = np.array(make_vocabulary(self.rng, vocab_size), dtype=object)
        ranks = np.arange(1, vocab_size + 1)
        p = 1.0 / (ranks + 2.7) ** 1.05
        self.cdf = np.cumsum(p / p.sum())

    def words(self, n: int) -> np.ndarray:
        at = np.searchsorted(self.cdf, self.rng.random(n), side="right")
        return self.vocab[np.minimum(at, len(self.vocab) - 1)]

    def sentence(self, content: Sequence[str] | np.ndarray) -> str:
        """Content words with function words mixed in, as a capitalised sentence."""
        out: list[str] = []
        for w in content:
            while self.rng.random() < 0.4:
                out.append(FUNCTION_WORDS[self.rng.integers(len(FUNCTION_WORDS))])
            out.append(str(w))
        text = " ".join(out)
        return text[:1].upper() + text[1:] + str(self.rng.choice([".", "!", "?", "..."]))

    def messages(self, n: int) -> list[str]:
        lengths = np.clip(np.rint(self.rng.lognormal(np.log(12), 0.55, size=n)), 5, 40)
        content = np.rint(lengths * 0.6).astype(int)  # ~40% of tokens are function words
        words = self.words(int(content.sum()))
        bounds = np.concatenate([[0], np.cumsum(content)])
        return [self.sentence(words[bounds[i] : bounds[i + 1]]) for i in range(n)]

    def probes(self, texts: Sequence[str], n: int) -> list[Probe]:
        """Probes at uniform cutoffs; the query shares 1-3 words with each reference."""
        cutoffs = np.sort(self.rng.integers(10, len(texts) + 1, size=n))
        out = []
        for i, cutoff in enumerate(cutoffs):
            n_refs = int(self.rng.integers(1, 4))
            refs = sorted(self.rng.choice(int(cutoff), size=n_refs, replace=False).tolist())
            shared: list[str] = []
            for r in refs:
                toks = tokenize(texts[r])
                take = min(len(toks), int(self.rng.integers(1, 4)))
                shared += self.rng.choice(toks, size=take, replace=False).tolist()
            noise = self.words(int(self.rng.integers(1, 5))).tolist()
            query = self.rng.permutation(np.array(shared + noise, dtype=object)).tolist()
            out.append(
                Probe(
                    id=f"p{i}",
                    subject_id="synthetic",
                    kind="question",
                    text="What about " + self.sentence(query),
                    cutoff=int(cutoff),
                    reference_positions=tuple(refs),
                    speakers=("A",),
                )
            )
        return [out[i] for i in self.rng.permutation(n)]  # not in cutoff order


def make_subject(texts: Sequence[str]) -> Subject:
    messages = [
        Message(id=f"m{i}", position=i, speaker="AB"[i % 2], text=t) for i, t in enumerate(texts)
    ]
    return Subject(id="synthetic", messages=messages, speakers=["A"])


# --- memory ---------------------------------------------------------------------------------


def resident_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def max_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def reset_peak_rss() -> bool:
    """Reset the kernel's RSS high-water mark (Linux >= 4.0), so the peak is the run's own."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return False
    return True


# --- one size (child process) ---------------------------------------------------------------


@dataclass
class SizeResult:
    messages: int
    probes: int
    tokens: int
    best_s: float
    median_s: float
    tracemalloc_peak_mb: float
    rss_growth_mb: float
    rss_exact: bool
    rss_before_mb: float
    postings_scored: int
    rank_bm25_est_s: float
    rank_bm25_sample: int
    rank_bm25_per_probe_ms: float
    max_score_diff: float
    okapi_top1_agree: float


def rank_bm25_one(docs: Sequence[list[str]], probe: Probe) -> tuple[np.ndarray, BM25Okapi]:
    """rank_bm25 doing one probe's work: index the prefix, score, full argsort."""
    bm = BM25Okapi(docs[: probe.cutoff])
    scores = bm.get_scores(tokenize(probe.text))
    order = np.argsort(-scores, kind="stable")
    rank_of = np.empty(len(order), dtype=np.int64)
    rank_of[order] = np.arange(1, len(order) + 1)
    _top, _ref_ranks = order[:DEPTH], rank_of[list(probe.reference_positions)]
    return scores, bm


def run_size(
    n_messages: int, n_probes: int, vocab: int, seed: int, repeats: int, sample: int
) -> SizeResult:
    gen = Generator(seed, vocab)
    texts = gen.messages(n_messages)
    probes = gen.probes(texts, n_probes)
    subject = make_subject(texts)
    retriever = BM25Retriever()

    gc.collect()
    rss_before = resident_mb()
    exact = reset_peak_rss()
    peak_before = max_rss_mb()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        rankings = retriever.rank(subject, probes, DEPTH)
        times.append(time.perf_counter() - t0)
        if len(times) == 1:
            rss_growth = max_rss_mb() - (rss_before if exact else peak_before)
        del rankings
        gc.collect()

    tracemalloc.start()
    retriever.rank(subject, probes, DEPTH)
    _, traced_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    # rank_bm25 on a sample of probes spread over the cutoffs.
    t0 = time.perf_counter()
    docs = [tokenize(t) for t in texts]
    tokenise_s = time.perf_counter() - t0
    by_cutoff = sorted(probes, key=lambda p: p.cutoff)
    picks = [by_cutoff[int(i)] for i in np.linspace(0, len(probes) - 1, sample).round()]
    per_probe = []
    plain: list[BM25Okapi] = []
    for p in picks:
        t0 = time.perf_counter()
        _, bm = rank_bm25_one(docs, p)
        per_probe.append(time.perf_counter() - t0)
        plain.append(bm)

    # Correctness on the sample: ours (okapi) == rank_bm25 with its floor set to 0.
    index = BM25Index(docs, BM25Params(idf="okapi"))
    queries = index.query_matrix([tokenize(p.text) for p in picks])
    cutoffs = np.array([p.cutoff for p in picks], dtype=np.int64)
    ours = index.score(queries, cutoffs).toarray()
    max_diff, agree = 0.0, 0
    for i, (p, bm) in enumerate(zip(picks, plain, strict=True)):
        df = Counter(t for d in bm.doc_freqs for t in d)
        for t, d in df.items():
            if d > bm.corpus_size - d:  # negative okapi idf: rank_bm25 floors it
                bm.idf[t] = 0.0
        exact_scores = bm.get_scores(tokenize(p.text))
        mine = ours[i, : p.cutoff]
        max_diff = max(max_diff, float(np.abs(mine - exact_scores).max()))
        best = exact_scores.max()
        agree += bool(best > 0 and np.isclose(exact_scores[np.argmax(mine)], best, rtol=1e-12))

    index = BM25Index(docs)
    q_all = index.query_matrix([tokenize(p.text) for p in probes])
    postings = int(index.work(q_all, np.array([p.cutoff for p in probes])).sum())
    return SizeResult(
        messages=n_messages,
        probes=n_probes,
        tokens=sum(len(d) for d in docs),
        best_s=min(times),
        median_s=statistics.median(times),
        tracemalloc_peak_mb=traced_peak / 2**20,
        rss_growth_mb=rss_growth,
        rss_exact=exact,
        rss_before_mb=rss_before,
        postings_scored=postings,
        rank_bm25_est_s=tokenise_s + statistics.mean(per_probe) * n_probes,
        rank_bm25_sample=sample,
        rank_bm25_per_probe_ms=1e3 * statistics.mean(per_probe),
        max_score_diff=max_diff,
        okapi_top1_agree=agree / sample,
    )


# --- driver ---------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 30_000, 100_000])
    parser.add_argument("--probes", type=int, default=5_000)
    parser.add_argument("--vocab", type=int, default=30_000, help="made-up words")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of ours per size")
    parser.add_argument("--sample", type=int, default=30, help="probes timed with rank_bm25")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.sample < 1:
        parser.error("--repeats and --sample must be at least 1")

    if args.child is not None:  # one size, in a fresh process; result as JSON on stdout
        res = run_size(args.child, args.probes, args.vocab, args.seed, args.repeats, args.sample)
        print(json.dumps(asdict(res)))
        return 0

    results: list[SizeResult] = []
    for n in args.sizes:
        cmd = [sys.executable, __file__, "--child", str(n)]
        cmd += ["--probes", str(args.probes), "--vocab", str(args.vocab)]
        cmd += ["--repeats", str(args.repeats), "--sample", str(args.sample)]
        cmd += ["--seed", str(args.seed)]
        print(f"{n:>7} messages ...", end=" ", flush=True)
        out = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if out.returncode:
            print(out.stderr, file=sys.stderr)
            return out.returncode
        r = SizeResult(**json.loads(out.stdout.strip().splitlines()[-1]))
        results.append(r)
        print(
            f"best {r.best_s:.2f} s, median {r.median_s:.2f} s, "
            f"{1e3 * r.best_s / r.probes:.2f} ms/probe, tracemalloc peak "
            f"{r.tracemalloc_peak_mb:.0f} MB, max RSS +{r.rss_growth_mb:.0f} MB"
            f"{'' if r.rss_exact else ' (lower bound)'}; rank_bm25 ~{r.rank_bm25_est_s:.0f} s "
            f"({r.rank_bm25_per_probe_ms:.1f} ms/probe on {r.rank_bm25_sample} probes); "
            f"okapi scores max |diff| {r.max_score_diff:.1e}, top-1 {r.okapi_top1_agree:.0%}"
        )

    print(
        f"\n{args.probes} probes, vocabulary {args.vocab}, seed {args.seed}, "
        f"best of {args.repeats}\n"
    )
    head = (
        f"{'messages':>9} {'tokens':>9} {'postings':>11} {'ours s':>7} {'ms/probe':>9} "
        f"{'traced MB':>9} {'RSS+ MB':>8} {'rank_bm25 s':>11} {'speed-up':>8}"
    )
    print(head)
    print("-" * len(head))
    for r in results:
        print(
            f"{r.messages:>9} {r.tokens:>9} {r.postings_scored:>11} {r.best_s:>7.2f} "
            f"{1e3 * r.best_s / r.probes:>9.2f} {r.tracemalloc_peak_mb:>9.0f} "
            f"{r.rss_growth_mb:>8.0f} {r.rank_bm25_est_s:>11.0f} "
            f"{r.rank_bm25_est_s / r.best_s:>7.0f}x"
        )
    if len(results) > 1:
        a, b = results[0], results[-1]
        growth = np.log(b.best_s / a.best_s) / np.log(b.messages / a.messages)
        print(f"\ntime grows as messages^{growth:.2f} from {a.messages} to {b.messages}")
    bad = [r for r in results if r.max_score_diff > 1e-9]
    for r in bad:
        print(
            f"FAILED: {r.messages}: okapi scores differ by {r.max_score_diff:.1e}", file=sys.stderr
        )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
