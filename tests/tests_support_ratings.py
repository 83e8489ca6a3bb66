"""A hand-made ratings file shared by the agreement tests: a judge and two people."""

from __future__ import annotations

from pathlib import Path

SCORES: dict[str, dict[str, dict[str, float]]] = {
    "goal": {
        "judge": {"e1": 8, "e2": 3, "e3": 6, "e4": 9, "e5": 2, "e6": 7},
        "ann": {"e1": 8, "e2": 4, "e3": 6, "e4": 9, "e5": 2, "e6": 6},
        "bob": {"e1": 7, "e2": 3, "e3": 5, "e4": 9, "e5": 3},
    },
    "realism": {
        "judge": {"e1": 5, "e2": 5, "e3": 7, "e4": 8, "e5": 4, "e6": 6},
        "ann": {"e1": 6, "e2": 5, "e3": 7, "e4": 7, "e5": 4, "e6": 6},
        "bob": {"e1": 5, "e2": 4, "e3": 7, "e4": 8, "e5": 5, "e6": 5},
    },
}
KINDS = {"judge": "judge", "ann": "human", "bob": "human"}


def write_ratings_file(path: Path) -> Path:
    """`SCORES` as a ratings CSV, with bob's missing goal score as a blank line."""
    lines = ["item,rater,dimension,score,kind"]
    for dimension, by_rater in SCORES.items():
        for rater, scores in by_rater.items():
            for item in ("e1", "e2", "e3", "e4", "e5", "e6"):
                score = scores.get(item)
                cell = "" if score is None else f"{score:g}"
                lines.append(f"{item},{rater},{dimension},{cell},{KINDS[rater]}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
