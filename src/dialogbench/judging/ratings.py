"""Ratings files: one score per line, in long format, from judges and from people.

    item,rater,dimension,score,kind
    goal-en:d1:goal,openai-compatible/gpt-4o,goal,7.5,judge
    goal-en:d1:goal,alice,goal,8,human
    goal-en:d1:goal,bob,goal,,human        <- blank: not rated (yet); left out, counted

`item`, `rater`, `dimension` and `score` are required columns (any order, header first);
`kind` (`human` or `judge`) is optional and says which comparisons a pair belongs to
(between humans, between judges, a judge against humans). Without it every rater's kind is
unknown. A score is a number; an (item, rater, dimension) may appear once.

`ratings_from_run` turns a finished run's items.jsonl into such rows: the judge's scores,
plus one blank row per human rater for them to fill. Which scores a row gives:

    demo-awareness     dimension = the task (goal, persona, scene, utterance), score = the
                       item's score (the mean of accuracy and hallucination), the one 0-10
                       figure per answer that the paper's raters gave (Table 6)
    other tracks       one row per judge dimension (demo-interaction: goal, believability,
                       skillfulness, realism)

An item is named as the track names its rows (`task-lang:id` for awareness, the run id
for interaction, else the row's `id`, else `row N` of items.jsonl), so a people's file and
a judge's file of the same run line up.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from dialogbench.data.errors import DataError
from dialogbench.data.io import json_lines

Kind = Literal["human", "judge", "unknown"]
COLUMNS = ("item", "rater", "dimension", "score")
KINDS: tuple[str, ...] = ("human", "judge")


@dataclass(frozen=True)
class Rating:
    """One line of a ratings file; `score` None when left blank."""

    item: str
    rater: str
    dimension: str
    score: float | None
    kind: Kind = "unknown"


@dataclass
class Ratings:
    """A ratings file as read: the scored lines, and how many were left blank."""

    path: str
    ratings: list[Rating]
    blank: int = 0

    def raters(self) -> dict[str, Kind]:
        """Rater -> kind, in first-seen order."""
        return {r.rater: r.kind for r in self.ratings}

    def dimensions(self) -> list[str]:
        return list(dict.fromkeys(r.dimension for r in self.ratings))

    def table(self, dimension: str | None = None) -> dict[str, dict[str, float]]:
        """Rater -> {item: score} on one dimension (all of them, items as `dim|item`, if None)."""
        out: dict[str, dict[str, float]] = {}
        for r in self.ratings:
            if r.score is None or (dimension is not None and r.dimension != dimension):
                continue
            key = r.item if dimension is not None else f"{r.dimension}|{r.item}"
            out.setdefault(r.rater, {})[key] = r.score
        return out


def read_ratings(path: Path) -> Ratings:
    """Read a ratings CSV; `DataError` naming the file, line, field and fix on bad input."""
    fix_header = "the first line must name the columns: item,rater,dimension,score[,kind]"
    try:
        handle = path.open(newline="", encoding="utf-8-sig")
    except OSError as e:
        raise DataError(path, f"cannot read the file: {e.strerror}", fix="check the path") from None
    with handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None:
            raise DataError(path, "the file is empty", record="line 1", fix=fix_header)
        names = [h.strip().lower() for h in header]
        missing = [c for c in COLUMNS if c not in names]
        if missing:
            raise DataError(
                path,
                f"no column {missing[0]!r} (columns found: {names})",
                record="line 1",
                field=missing[0],
                fix=fix_header,
            )
        at = {name: names.index(name) for name in (*COLUMNS, "kind") if name in names}
        ratings: list[Rating] = []
        seen: dict[tuple[str, str, str], int] = {}
        kinds: dict[str, tuple[str, int]] = {}
        blank = 0
        for lineno, row in enumerate(reader, start=2):
            if not any(cell.strip() for cell in row):
                continue
            record = f"line {lineno}"
            if len(row) < len(names):
                raise DataError(
                    path,
                    f"{len(row)} fields, the header has {len(names)}",
                    record=record,
                    field=names[len(row)],
                    fix="give every column on every line (an empty score is allowed)",
                )
            cell = {name: row[i].strip() for name, i in at.items()}
            for name in ("item", "rater", "dimension"):
                if not cell[name]:
                    raise DataError(
                        path, f"{name} is empty", record=record, field=name, fix=f"name the {name}"
                    )
            kind = cell.get("kind", "") or "unknown"
            if kind not in (*KINDS, "unknown"):
                raise DataError(
                    path,
                    f"kind {kind!r} is neither human nor judge",
                    record=record,
                    field="kind",
                    fix="write human or judge (or leave it empty)",
                )
            earlier = kinds.setdefault(cell["rater"], (kind, lineno))
            if earlier[0] != kind:
                raise DataError(
                    path,
                    f"rater {cell['rater']!r} is {kind} here but {earlier[0]} on line {earlier[1]}",
                    record=record,
                    field="kind",
                    fix="give each rater one kind",
                )
            key = (cell["item"], cell["rater"], cell["dimension"])
            if key in seen:
                raise DataError(
                    path,
                    f"item {key[0]!r} has a second {key[2]!r} score from {key[1]!r} "
                    f"(the first is on line {seen[key]})",
                    record=record,
                    field="score",
                    fix="keep one score per item, rater and dimension",
                )
            seen[key] = lineno
            score = _score(cell["score"], path, record)
            if score is None:
                blank += 1
                continue
            ratings.append(Rating(*key, score=score, kind=kind))  # type: ignore[arg-type]
    if not ratings:
        raise DataError(
            path, "no line has a score", fix="fill in the score column (blank lines are skipped)"
        )
    return Ratings(path=str(path), ratings=ratings, blank=blank)


def _score(text: str, path: Path, record: str) -> float | None:
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise DataError(
            path,
            f"score {text!r} is not a number",
            record=record,
            field="score",
            fix="write the score as a number (e.g. 7 or 7.5), or leave it empty",
        )
    return value


def write_ratings(path: Path, ratings: Iterable[Rating]) -> int:
    """Write `ratings` as a ratings CSV (blank scores as empty cells); how many lines."""
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow((*COLUMNS, "kind"))
        for r in ratings:
            score = "" if r.score is None else _number(r.score)
            writer.writerow((r.item, r.rater, r.dimension, score, r.kind))
            n += 1
    return n


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def row_item(track: str, row: dict[str, Any], index: int) -> str:
    """How a ratings file names the item of one items.jsonl row (module docstring)."""
    if track == "demo-awareness":
        return f"{row['task']}-{row['lang']}:{row['id']}"
    if "id" in row:
        return str(row["id"])
    return f"row {index}"


def ratings_from_run(run: Path, humans: Sequence[str] = ("human1", "human2")) -> list[Rating]:
    """A finished run's judged rows as ratings: the judge's scores and a blank row per
    human rater (rows the judge did not score are left out)."""
    manifest, items = run / "manifest.json", run / "items.jsonl"
    if not manifest.exists() or not items.exists():
        raise DataError(
            run, "no finished run here", fix="give the folder a `dialogbench run` wrote"
        )
    track = str(json.loads(manifest.read_text(encoding="utf-8")).get("track", ""))
    repeated = sorted({h for h in humans if list(humans).count(h) > 1})
    if repeated:
        raise ValueError(f"human rater names must differ; repeated: {repeated}")
    out: list[Rating] = []
    for index, row in json_lines(items, items.read_text(encoding="utf-8"), "rerun the track"):
        scores = row.get("judge_scores")
        if not row.get("judged") or not isinstance(scores, dict):
            continue
        item, judge = row_item(track, row, index), str(row.get("judge_model") or "judge")
        if judge in humans:
            raise ValueError(f"a human rater is called {judge!r}, like the judge; rename them")
        if track == "demo-awareness":
            if row.get("score") is None:
                continue
            figures = {str(row["task"]): float(row["score"])}
        else:
            figures = {str(k): float(v) for k, v in scores.items()}
        for dimension, score in figures.items():
            out.append(Rating(item, judge, dimension, score, "judge"))
            out += [Rating(item, h, dimension, None, "human") for h in humans]
    return out


def merge_ratings(parts: Sequence[Sequence[Rating]], sources: Sequence[Path]) -> list[Rating]:
    """Several runs' ratings as one file: each judge's scores once, each human's blank row
    once per item and dimension; the same judge scoring an item twice is an error."""
    out: list[Rating] = []
    seen: dict[tuple[str, str, str], Path] = {}
    for ratings, source in zip(parts, sources, strict=True):
        for r in ratings:
            key = (r.item, r.rater, r.dimension)
            if key in seen:
                if r.kind == "human":
                    continue
                raise ValueError(
                    f"{source}: judge {r.rater!r} already scored {r.item!r} ({r.dimension}) "
                    f"in {seen[key]}; give each judge's run once"
                )
            seen[key] = source
            out.append(r)
    return out
