"""BM25 analyzers on Korean, Chinese and Japanese: words, character bigrams and segmenters.

The data are our own (benchmarks/data/cjk_retrieval/, CC0): in each language, three
multi-session chats between two people, written for this benchmark, in which later
messages (the probes) refer back to earlier ones; each probe names the messages it refers
to. Every probe ranks the messages before it with BM25 (`BM25Retriever`) under each
analyzer, the same retriever and parameters, only the terms differ:

  words     runs of word characters (what BM25 did before, and still does for English)
  bigrams   character bigrams of Hangul, kana and Han (built in)
  jieba / janome / sudachi / kiwi
            the segmenters of that language whose package is installed (the `cjk` extra)

For each language and analyzer: hit@5 and MRR with 95% bootstrap intervals (probes
resampled, 2,000 draws), the paired difference against `words` with its interval, chance
hit@5 (random ranking), and the probes with no reference ranked at all. It checks that
what `--analyzer auto` picks for each language is the best measured on hit@5 (exit 1 if
not) and prints what it picks.

    .venv/bin/python benchmarks/bench_cjk_retrieval.py [--n-boot 2000] [--export DIR]

`--export DIR` also writes each language as a release folder (DIR/ko, DIR/zh, DIR/ja), so
`dialogbench run retrieval --dataset DIR/ko --analyzer bigrams` runs the same probes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

import numpy as np

from dialogbench.data.io import write_jsonl
from dialogbench.data.model import ChatItem, Dataset, Message, Subject
from dialogbench.lang import cjk_language
from dialogbench.retrieval.analyzers import (
    ANALYZERS,
    SEGMENTERS,
    AnalyzerUnavailable,
    analyzer_for,
)
from dialogbench.retrieval.base import Probe, build_probes
from dialogbench.retrieval.bm25 import BM25Retriever
from dialogbench.stats.bootstrap import Estimate, bootstrap_means
from dialogbench.stats.metrics import hit_at, random_hit_expectation, reciprocal_rank

DATA = Path(__file__).parent / "data" / "cjk_retrieval"
LANGUAGES = ("ko", "zh", "ja")
K = 5
_LINE = re.compile(
    r"(?:@(?P<tag>\w+) )?(?P<probe>\? )?(?P<speaker>[^:]+): (?P<text>.+?)(?: > (?P<refs>[\w ]+))?"
)


def parse(path: Path) -> Dataset:
    """A language file: `== ID A B` starts a conversation, `-- DATE` a session; a message
    is `SPEAKER: text`, `@tag SPEAKER: text` when a probe refers to it, and a probe is
    `? SPEAKER: text > tag tag` (a message too). Message ids run m001, m002, ... per
    conversation; a probe's references are the ids of its tags."""
    subjects: list[Subject] = []
    messages: list[Message] = []
    items: list[ChatItem] = []
    tags: dict[str, str] = {}
    sid, speakers, date, session = "", [""], "", 0

    def close() -> None:
        if sid:
            subjects.append(
                Subject(id=sid, messages=list(messages), chat_items=list(items), speakers=speakers)
            )
        messages.clear()
        items.clear()
        tags.clear()

    for n, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("== "):
            close()
            sid, *speakers = line[3:].split()
            session = 0
            continue
        if line.startswith("-- "):
            date, session = line[3:], session + 1
            continue
        m = _LINE.fullmatch(line)
        if m is None or not sid or not session:
            raise SystemExit(f"{path}:{n}: cannot read {line!r}")
        mid = f"m{len(messages) + 1:03d}"
        if m["tag"]:
            if m["tag"] in tags:
                raise SystemExit(f"{path}:{n}: tag {m['tag']!r} used twice")
            tags[m["tag"]] = mid
        if m["probe"]:
            try:
                refs = [tags[t] for t in (m["refs"] or "").split()]
            except KeyError as e:
                raise SystemExit(f"{path}:{n}: no earlier message tagged {e}") from None
            if not refs:
                raise SystemExit(f"{path}:{n}: a probe names no reference")
            items.append(ChatItem(probe_id=mid, reference_ids=refs, tier="callback"))
        messages.append(
            Message(
                id=mid,
                position=len(messages),
                speaker=m["speaker"],
                text=m["text"],
                timestamp=datetime.fromisoformat(date),
                session=f"s{session:02d}",
            )
        )
    close()
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return Dataset(
        name=f"cjk-{path.stem}",
        subjects=subjects,
        sha256=digest,
        source=str(path),
        licence="CC0-1.0 (written for dialogbench)",
    )


def export(data: Dataset, folder: Path) -> None:
    """`data` as a release folder (conversation.jsonl and chat.jsonl per subject)."""
    for s in data.subjects:
        (folder / s.id).mkdir(parents=True, exist_ok=True)
        write_jsonl(folder / s.id / "conversation.jsonl", s.messages)
        write_jsonl(folder / s.id / "chat.jsonl", s.chat_items)
    meta = {"name": data.name, "licence": data.licence}
    text = json.dumps(meta, ensure_ascii=False, indent=2) + "\n"
    (folder / "dataset.json").write_text(text, encoding="utf-8")


def analyzers_for(language: str) -> list[str]:
    """words, bigrams, and the installed segmenters of `language`."""
    out = ["words", "bigrams"]
    for name, lang in SEGMENTERS.items():
        if lang == language:
            try:
                ANALYZERS[name].load()
            except AnalyzerUnavailable:
                continue
            out.append(name)
    return out


def ranks_of(data: Dataset, analyzer: str) -> tuple[list[Probe], np.ndarray]:
    """Every probe and its references' ranks (inf: not retrieved) under `analyzer`."""
    probes: list[Probe] = []
    parts: list[np.ndarray] = []
    retriever = BM25Retriever(analyzer=analyzer)
    for s in data.subjects:
        got = [p for p in build_probes(s) if p.reference_positions]
        depth = max(p.cutoff for p in got)
        parts.append(retriever.rank(s, got, depth).ref_ranks)
        probes += got
    width = max(p.shape[1] for p in parts)
    ranks = np.concatenate(
        [np.pad(p, ((0, 0), (0, width - p.shape[1])), constant_values=np.nan) for p in parts]
    )
    return probes, ranks


def show(e: Estimate, signed: bool = False) -> str:
    sign = "+" if signed else ""
    return f"{e.value:{sign}.3f} [{e.ci_low:{sign}.3f}, {e.ci_high:{sign}.3f}]"


def measure(language: str, n_boot: int, seed: int) -> list[str]:
    """Print one language's table; return why `auto`'s choice is not the best (if it is not):
    another analyzer better on hit@5 or MRR with the paired interval above 0."""
    data = parse(DATA / f"{language}.txt")
    texts = [m.text for s in data.subjects for m in s.messages]
    auto = analyzer_for("auto", texts).name
    names = analyzers_for(language)
    metrics: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    none: dict[str, int] = {}
    seconds: dict[str, float] = {}
    probes: list[Probe] = []
    for name in names:
        ANALYZERS[name].terms(["準備 준비 准备"])  # a segmenter loads its dictionary untimed
        t0 = time.perf_counter()
        probes, ranks = ranks_of(data, name)
        seconds[name] = time.perf_counter() - t0
        metrics[name] = (hit_at(ranks, K), reciprocal_rank(ranks))
        none[name] = int(np.all(~(ranks < np.inf), axis=1).sum())
    others = [n for n in names if n != auto]
    columns = [v for n in names for v in metrics[n]]
    columns += [a - b for n in others for a, b in zip(metrics[n], metrics[auto], strict=True)]
    cand = np.array([p.cutoff for p in probes], dtype=float)
    refs = np.array([len(p.reference_positions) for p in probes], dtype=float)
    columns.append(random_hit_expectation(cand, refs, K))
    est = bootstrap_means(np.column_stack(columns), n_boot=n_boot, seed=seed)
    n_msgs = sum(len(s.messages) for s in data.subjects)
    print(
        f"\n{language} (detected: {cjk_language(texts)}): {len(data.subjects)} conversations, "
        f"{n_msgs} messages, {len(probes)} probes; chance hit@{K} {show(est[-1])}; "
        f"auto picks {auto}"
    )
    print(
        f"  {'analyzer':<9} {'hit@5':>22} {'MRR':>22} {'none ranked':>12} {'seconds':>8}"
        f"  minus {auto} (hit@5, MRR)"
    )
    failed: list[str] = []
    for j, name in enumerate(names):
        hit, mrr = est[2 * j], est[2 * j + 1]
        diff = ""
        if name != auto:
            at = 2 * len(names) + 2 * others.index(name)
            d_hit, d_mrr = est[at], est[at + 1]
            diff = f"{show(d_hit, True)}  {show(d_mrr, True)}"
            if d_hit.ci_low > 0 or d_mrr.ci_low > 0:
                failed.append(f"{language}: {name} beats auto's {auto}: {diff}")
        print(
            f"  {name:<9} {show(hit):>22} {show(mrr):>22} {none[name]:>6} of {len(probes):<3} "
            f"{seconds[name]:8.3f}  {diff}"
        )
    return failed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n-boot", type=int, default=2000, help="bootstrap draws")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    parser.add_argument("--export", type=Path, help="also write each language as a release")
    args = parser.parse_args(argv)
    print(
        "BM25 (k1 1.5, b 0.75, lucene idf) over each probe's earlier messages, by analyzer; "
        f"hit@{K} and MRR with 95% bootstrap intervals over probes"
    )
    failed: list[str] = []
    for language in LANGUAGES:
        failed += measure(language, args.n_boot, args.seed)
        if args.export:
            export(parse(DATA / f"{language}.txt"), args.export / language)
    for f in failed:
        print(f"FAILED: {f}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
