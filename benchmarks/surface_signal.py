"""How well the builder's cheap surface signal finds messages that reach outside the recent
thread, on the built-in sample, where every person message has a reading.

The readings are `tests/build/make_sample.py`'s: a message reaches back (is "positive") when
a reference its label keeps lies more than RECENT_WINDOW messages before it; the everyday
sessions and unlabelled messages reach back nowhere. The script prints, for the builder's
signal (`build.sampling.surface`) and two variants computed in the same run,

    auroc       against the readings (sklearn's roc_auc_score); 0.5 is a random order
    marked      messages the builder's surface tier marks `session` or `distant`, and how
                many positives they hold (the enriched stratum's pool)
    enrichment  the positive rate among the marked over the base rate
    top 100     positives among the 100 highest-scoring messages

Variants: `novel` scores only the probe's words that are absent from its recent thread
(a back-reference should bring back a topic not under way); `far - near` prefers a far
match to a near one. Run from the repository root:

    PYTHONPATH=.:src python benchmarks/surface_signal.py
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
from sklearn.metrics import roc_auc_score  # type: ignore[import-untyped]

from dialogbench.build.sampling import CUE_WEIGHT, CUES, best_matches, person_positions, surface
from dialogbench.data.model import RECENT_WINDOW, Subject
from dialogbench.data.registry import load_dataset
from dialogbench.retrieval.bm25 import BM25Index

Array = npt.NDArray[np.float64]
_SAMPLE = importlib.import_module("tests.build.make_sample")  # the readings (not a package)
LABELS: dict[str, Any] = _SAMPLE.LABELS


def reaches_back(subject: Subject, position: int) -> bool:
    """Our reading of the message: a kept reference lies outside the recent thread."""
    label = LABELS.get(f"{subject.id}/{subject.messages[position].id}")
    if label is None:
        return False
    at = subject.position_of()
    kept = label.refs if label.keep is None else label.keep
    return any(r != "@p" and position - at[r] > RECENT_WINDOW for r in kept)


def variants(subject: Subject) -> dict[str, Array]:
    """Every message's score under each variant."""
    texts = [m.text for m in subject.messages]
    n = len(texts)
    index = BM25Index.from_texts(texts)
    queries = index.text_queries(texts).tocsr()
    band = sp.diags(
        [np.ones(n - k) for k in range(1, RECENT_WINDOW + 1)],
        [-k for k in range(1, RECENT_WINDOW + 1)],
        shape=(n, n),
        format="csr",
    )
    in_recent = (band @ (queries > 0).astype(np.float64)) > 0
    novel = sp.csr_matrix(queries - queries.multiply(in_recent))
    novel.eliminate_zeros()
    words = np.maximum(np.diff(queries.indptr), 1).astype(np.float64)
    novel_far, _, _ = best_matches(index, novel)
    cue = CUE_WEIGHT * np.array([1.0 if CUES.search(t) else 0.0 for t in texts])
    builder = surface(subject)  # far and near per content word
    return {
        "builder's signal": builder.signal,
        "novel": novel_far / words + cue,
        "far - near": builder.far - builder.near + cue,
    }


def main() -> None:
    data = load_dataset(str(_SAMPLE.SAMPLE))
    y: list[bool] = []
    marked: list[bool] = []
    scores: dict[str, list[float]] = {}
    for subject in data.subjects:
        tiers = surface(subject).tier
        got = variants(subject)
        for p in person_positions(subject):
            y.append(reaches_back(subject, p))
            marked.append(tiers[p] in ("session", "distant"))
            for name, values in got.items():
                scores.setdefault(name, []).append(float(values[p]))
    truth, mark = np.array(y), np.array(marked)
    base = truth.mean()
    print(f"{len(truth)} person messages, {truth.sum()} reach outside the recent thread")
    print(
        f"marked session/distant: {mark.sum()}, holding {truth[mark].sum()} of them; "
        f"enrichment {truth[mark].mean() / base:.2f}x over the base rate {base:.3f}"
    )
    for name, listed in scores.items():
        v = np.array(listed)
        top = np.argsort(-v, kind="stable")[:100]
        print(f"{name:17s} auroc {roc_auc_score(truth, v):.3f}   top 100: {truth[top].sum()}")
    print("random order      auroc 0.500")


if __name__ == "__main__":
    main()
