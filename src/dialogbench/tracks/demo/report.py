"""The paper's Table 3 across runs: one row per model, English and Chinese apart and pooled.

`paper_rows(runs)` reads finished demo-awareness and demo-interaction runs (any number, in
any order; a model's two halves are matched by the model under test named in each
manifest) and recomputes every figure from their items.jsonl:

- awareness: per task the mean item score over the judged items (unparsed answers as the
  judge scored them), and the average of the task means (`aggregate.awareness_table`);
- interaction (DEMO's rubric): per dimension the mean over judged episodes, and their
  per-episode average, with intervals resampling episodes;
- overall: DEMO's, (2 x awareness average + interaction average) / 3 (`aggregate.combine`;
  every row of the paper's Table 3 satisfies it, e.g. GPT-4o (2 x 5.875 + 8.631) / 3 =
  6.793; its DEMO-Llama3.1-8B row prints an interaction average of 7.707 where its four
  dimensions average 7.006, and its Overall 6.341 is (2 x 6.008 + 7.006) / 3, so the 7.707
  is a typo in the table, not another formula).

"pooled" puts both languages' items together, as DEMO's own script does (it reads every
result file it finds): each task's mean is then over its English and Chinese items, each
task still weighing the same in the average (DEMO weights tasks by their item counts,
which is the same when, as in DEMO's release, every task has as many items).

Runs judged by different judges (a run and its re-judgings by `dialogbench score`, under
`RUN/judges/<judge>/`) are never mixed: `by_judge` groups them, one table per judge, the
shape of the paper's Tables 3 (GPT-4o), 8 (DeepSeek-V3) and its Gemini table.

Interaction runs judged with another rubric (`--rubric sotopia`) are not DEMO's Table 3;
`sotopia_rows` gives them in the shape of the paper's Table 4 (one row per model, SOTOPIA's
seven dimensions and their overall), from their summary.json.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dialogbench.data.errors import DataError
from dialogbench.stats.bootstrap import Estimate, bootstrap_means
from dialogbench.tracks.demo.aggregate import TableRow, awareness_table, combine
from dialogbench.tracks.demo.interaction_prompts import DIMENSIONS

POOLED = "pooled"
LANGS = ("en", "zh")
TRACKS = ("demo-awareness", "demo-interaction")


@dataclass
class RunInfo:
    """One finished run: its folder, track, model under test, rubric and rows."""

    path: Path
    track: str
    model: str
    rubric: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    judge: str = ""
    """The model that judged it (a run re-judged by `dialogbench score` names its new judge)."""


def read_run(path: Path) -> RunInfo:
    """A finished DEMO run; `DataError` when the folder is not one."""
    manifest, items = path / "manifest.json", path / "items.jsonl"
    if not manifest.exists() or not items.exists():
        raise DataError(path, "no finished run here", fix="run `dialogbench run demo-...` first")
    meta = json.loads(manifest.read_text(encoding="utf-8"))
    track = meta.get("track")
    if track not in TRACKS:
        raise DataError(
            manifest, f"written by {track!r}, not a DEMO track", field="track", fix="give DEMO runs"
        )
    roles = meta.get("roles") or {}
    role = roles.get("model") or {}
    model = str(role.get("model") or path.name)
    judge_role = roles.get("judge") or {}
    if "same_as" in judge_role:  # the judge fell back to another role's model
        judge_role = roles.get(str(judge_role["same_as"])) or {}
    judge = str(judge_role.get("model") or "")
    rubric = str((meta.get("config") or {}).get("rubric", "demo"))
    rows = [json.loads(x) for x in items.read_text(encoding="utf-8").splitlines() if x.strip()]
    summary_path = path / "summary.json"
    summary = json.loads(summary_path.read_text(encoding="utf-8")) if summary_path.exists() else {}
    return RunInfo(path, str(track), model, rubric, rows, summary, judge)


def by_judge(runs: Sequence[RunInfo]) -> dict[str, list[RunInfo]]:
    """The runs grouped by their judge, in the order first given: one table per judge (the
    paper's Table 3 judged by GPT-4o, its Table 8 the same shape judged by DeepSeek-V3)."""
    groups: dict[str, list[RunInfo]] = {}
    for run in runs:
        groups.setdefault(run.judge, []).append(run)
    return groups


def _awareness(rows: Sequence[dict[str, Any]], n_boot: int, seed: int) -> Any:
    by_task: dict[str, list[float | None]] = {}
    for r in rows:
        by_task.setdefault(r["task"], []).append(r["score"])
    return awareness_table(by_task, n_boot=n_boot, seed=seed) if by_task else None


def _interaction(rows: Sequence[dict[str, Any]], n_boot: int, seed: int) -> dict[str, Estimate]:
    if not rows:
        return {}
    names = [*DIMENSIONS, "average"]
    values = np.array(
        [[np.nan if r.get(f) is None else r[f] for f in names] for r in rows], dtype=np.float64
    )
    clusters = np.array([r["episode"] for r in rows], dtype=str)
    return dict(
        zip(names, bootstrap_means(values, clusters, n_boot=n_boot, seed=seed), strict=True)
    )


def paper_rows(
    runs: Sequence[RunInfo], *, n_boot: int = 2000, seed: int = 0
) -> dict[str, dict[str, TableRow]]:
    """Model -> {"en", "zh", "pooled"} -> its row of Table 3 (languages it has rows for)."""
    models: dict[str, dict[str, list[RunInfo]]] = {}
    for run in runs:
        if run.track == "demo-interaction" and run.rubric != "demo":
            continue
        models.setdefault(run.model, {}).setdefault(run.track, []).append(run)
    out: dict[str, dict[str, TableRow]] = {}
    for model, by_track in models.items():
        for track, found in by_track.items():
            if len(found) > 1:
                raise DataError(
                    found[1].path,
                    f"a second {track} run of {model} (the first is {found[0].path})",
                    fix="give one run per model and track",
                )
        aware = by_track.get("demo-awareness", [None])[0]
        inter = by_track.get("demo-interaction", [None])[0]
        rows: dict[str, TableRow] = {}
        for lang in (*LANGS, POOLED):
            langs = LANGS if lang == POOLED else (lang,)
            a_rows = [r for r in aware.rows if r["lang"] in langs] if aware else []
            i_rows = [r for r in inter.rows if r["lang"] in langs] if inter else []
            if not a_rows and not i_rows:
                continue
            table = _awareness(a_rows, n_boot, seed)
            figures = _interaction(i_rows, n_boot, seed)
            average = figures.pop("average", None)
            row = combine(
                table.tasks if table is not None else {},
                figures,
                awareness_average=table.average if table is not None else None,
                interaction_average=average,
            )
            if table is not None and table.missing:
                row.notes.append(f"awareness average without {table.missing}")
            rows[lang] = row
        out[model] = rows
    return out


def sotopia_rows(runs: Sequence[RunInfo]) -> dict[str, dict[str, Estimate]]:
    """Model -> the seven SOTOPIA dimensions and overall (English), from interaction runs
    judged with `--rubric sotopia`: the paper's Table 4 shape. A second such run of one
    model is a `DataError` naming both folders (as a second Table 3 run is)."""
    out: dict[str, dict[str, Estimate]] = {}
    first: dict[str, RunInfo] = {}
    for run in runs:
        if run.track != "demo-interaction" or run.rubric == "demo":
            continue
        if run.model in first:
            raise DataError(
                run.path,
                f"a second SOTOPIA-judged demo-interaction run of {run.model} "
                f"(the first is {first[run.model].path})",
                fix="give one SOTOPIA run per model",
            )
        first[run.model] = run
        for lang, figures in run.summary.items():
            name = run.model if lang == "en" else f"{run.model} ({lang})"
            out[name] = {k: Estimate.model_validate(v) for k, v in figures.items()}
    return out


def played_sides(runs: Sequence[RunInfo]) -> dict[str, str]:
    """Model -> which participant it played in its SOTOPIA-judged runs ("p1", "p2", "both
    (self-play)", or a mix with counts): SOTOPIA-hard's figures are those of one side."""
    out: dict[str, str] = {}
    for run in runs:
        if run.track != "demo-interaction" or run.rubric == "demo":
            continue
        sides = Counter(str(r.get("under_test", "?")) for r in run.rows)
        named = {"both": "both (self-play)"}
        if len(sides) == 1:
            out[run.model] = named.get(next(iter(sides)), next(iter(sides)))
        else:
            out[run.model] = ", ".join(f"{named.get(k, k)} x{n}" for k, n in sorted(sides.items()))
    return out
