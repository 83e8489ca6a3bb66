"""The HTML report of finished runs: one self-contained page (inline CSS, SVG and a few lines
of script; nothing fetched), readable offline and attachable to a pull request.

The page is generic over run folders, so a new track renders without new code:

- every `{value, ci_low, ci_high, n}` in summary.json (and in the other result files) is a
  figure; a figure's path of keys is split into table, row and column (`arrange`; a track
  may name its own layout in `VIEWS`);
- plots come from what the figures and items hold (`plots`): hit@k and AUROC bars with
  interval whiskers, coverage against token budget, paired gains, ROC curves from items'
  `score` and `label`, judge score distributions from `judge_scores`, latency boxes from any
  numeric `latency*` field;
- items.jsonl is the drill-down: rows grouped by probe (or question, item, episode), one
  column per system, the evidence marked.

Every piece of text from a run is escaped (`html.escape`); nothing from a run reaches the
page's script.
"""

from __future__ import annotations

import gzip
import json
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from html import escape
from importlib.resources import files
from pathlib import Path
from typing import Any

from dialogbench.data.errors import DataError
from dialogbench.data.io import source_from_record
from dialogbench.report.svg import Bar, bar_chart, bar_range, box_chart, line_chart
from dialogbench.report.table import FLAG

Path_ = tuple[str, ...]
RUN_FILES = frozenset({"manifest.json", "summary.json", "usage.json", "warnings.json"})
SYSTEM_FIELDS = ("retriever", "detector", "system", "memory", "condition", "model")
"""Item fields naming the system a row belongs to, first found wins."""
ITEM_KEYS = ("probe", "question", "id", "item", "episode")
"""Item fields naming what rows are grouped by in the drill-down, first found wins."""
EVIDENCE_FIELDS = ("references", "reference_ids", "evidence", "evidence_ids")
MAX_GROUPS = 200
"""Drill-down groups shown per run (the page says how many were left out)."""
MAX_CELL = 4000
MAX_TIP = 300
"""Characters of a message shown when its id is hovered."""


@dataclass(frozen=True)
class Figure:
    """One figure of a run: `{value, ci_low, ci_high, n}` (null where there was nothing)."""

    value: float | None
    ci_low: float | None
    ci_high: float | None
    n: int

    def bar(self) -> Bar | None:
        if self.value is None or not math.isfinite(self.value):
            return None
        return Bar(self.value, self.ci_low, self.ci_high, self.n)


@dataclass(frozen=True)
class TrackView:
    """How a track's figure paths are laid out; the default suits most tracks.

    `layout` names the role of each key of a figure's path: "table" (part of the table's
    title), "row", "col" or "break" (a breakdown: "all" is the headline; any other value goes
    to a breakdown table). None: all but the last two keys are the table, then row, column.
    """

    layout: tuple[str, ...] | None = None
    system_fields: tuple[str, ...] = SYSTEM_FIELDS


VIEWS: dict[str, TrackView] = {
    "questions": TrackView(layout=("row", "break", "col")),
    "chat": TrackView(system_fields=("condition",)),
}


def is_figure(obj: Any) -> bool:
    return isinstance(obj, dict) and {"value", "ci_low", "ci_high", "n"} <= obj.keys()


def figures(obj: Any, path: Path_ = ()) -> Iterator[tuple[Path_, Figure]]:
    """Every figure in a JSON value, with its path of keys."""
    if is_figure(obj):
        yield path, Figure(obj["value"], obj["ci_low"], obj["ci_high"], int(obj["n"] or 0))
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from figures(v, (*path, str(k)))


def scalars(obj: Any, path: Path_ = ()) -> Iterator[tuple[Path_, Any]]:
    """Every number, string and boolean in a JSON value (lists of scalars kept whole)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from scalars(v, (*path, str(k)))
    elif isinstance(obj, list) and any(isinstance(v, dict | list) for v in obj):
        for i, v in enumerate(obj):
            yield from scalars(v, (*path, str(i)))
    else:
        yield path, obj


# -- reading run folders ------------------------------------------------------------------


@dataclass
class Run:
    """A finished run folder, as the report reads it."""

    path: Path
    label: str
    manifest: dict[str, Any]
    summary: Any
    items: list[dict[str, Any]]
    warnings: dict[str, Any]
    usage: dict[str, Any]
    files: dict[str, Any] = field(default_factory=dict)
    """Other result files by name (parsed JSON)."""
    torn: int = 0
    """items.jsonl lines that could not be read."""
    texts: dict[tuple[str, str], str] = field(default_factory=dict)
    """(subject, message id) -> text, from the run's dataset when it is on this machine."""
    evidence: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    """(subject, probe or question id) -> its evidence message ids, from the dataset."""
    judges: dict[str, Any] = field(default_factory=dict)
    """judges/judges.json, when `dialogbench score` re-judged the run with a panel."""

    @property
    def track(self) -> str:
        return str(self.manifest.get("track", "?"))


def _json(path: Path, *, required: bool = True) -> Any:
    if not path.exists():
        if required:
            raise DataError(
                path.parent,
                f"no {path.name}: not a finished run folder",
                fix="finish the run first",
            )
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DataError(path, f"cannot be read as JSON: {e}", fix="rerun the run") from None


def _items(folder: Path) -> tuple[list[dict[str, Any]], int]:
    for name, opener in (("items.jsonl", open), ("items.jsonl.gz", gzip.open)):
        path = folder / name
        if path.exists():
            rows: list[dict[str, Any]] = []
            torn = 0
            with opener(path, "rt", encoding="utf-8") as f:
                for line in f:
                    if not line.strip():
                        continue
                    try:
                        row = json.loads(line)
                    except json.JSONDecodeError:
                        torn += 1
                        continue
                    if isinstance(row, dict):
                        rows.append(row)
            return rows, torn
    return [], 0


Keyed = dict[tuple[str, str], Any]


def dataset_context(manifest: Mapping[str, Any], run: Path) -> tuple[Keyed, Keyed]:
    """From the dataset of the run in `run`, when its source is on this machine and loads:
    (subject, message id) -> text, and (subject, probe or question id) -> its evidence ids
    (the drill-down then shows what each id says and marks the evidence); ({}, {})
    otherwise."""
    recorded = str((manifest.get("dataset") or {}).get("source", ""))
    source = source_from_record(recorded, run) if recorded else ""
    if not source or not Path(source).exists():
        return {}, {}
    try:
        from dialogbench.data.registry import load_dataset

        ds = load_dataset(source)
    except Exception:  # a DEMO corpus, a moved file: ids are shown without their text
        return {}, {}
    texts: Keyed = {(s.id, m.id): m.text for s in ds.subjects for m in s.messages}
    evidence: Keyed = {}
    for s in ds.subjects:
        evidence.update({(s.id, c.probe_id): list(c.reference_ids) for c in s.chat_items})
        evidence.update({(s.id, q.id): list(q.evidence_ids) for q in s.questions})
    return texts, evidence


def read_run(path: Path, label: str | None = None, *, texts: bool = True) -> Run:
    """Read a finished run folder; a `DataError` naming the file when it is not one."""
    if not path.is_dir():
        raise DataError(path, "not a folder", fix="give a run folder (the --out of a run)")
    manifest = _json(path / "manifest.json")
    summary = _json(path / "summary.json")
    items, torn = _items(path)
    other: dict[str, Any] = {}
    for f in sorted(path.glob("*.json")):
        if f.name not in RUN_FILES:
            other[f.name] = _json(f)
    run = Run(
        path=path,
        label=label or path.name,
        manifest=manifest if isinstance(manifest, dict) else {},
        summary=summary,
        items=items,
        warnings=_json(path / "warnings.json", required=False),
        usage=_json(path / "usage.json", required=False),
        files=other,
        torn=torn,
        judges=_json(path / "judges" / "judges.json", required=False),
    )
    if texts:
        run.texts, run.evidence = dataset_context(run.manifest, path)
    return run


def read_runs(paths: Sequence[Path], *, texts: bool = True) -> list[Run]:
    """Read several run folders, each with a label unique on the page."""
    labels: list[str] = []
    for p in paths:
        label = p.name or str(p)
        if label in labels:
            label = f"{p.parent.name}/{p.name}"
        while label in labels:
            label += "'"
        labels.append(label)
    return [read_run(p, label, texts=texts) for p, label in zip(paths, labels, strict=True)]


# -- comparability ------------------------------------------------------------------------


def _role_model(manifest: Mapping[str, Any], role: str) -> str | None:
    roles = manifest.get("roles") or {}
    got = roles.get(role)
    seen: set[str] = set()
    while isinstance(got, dict) and "same_as" in got and got["same_as"] not in seen:
        seen.add(got["same_as"])
        got = roles.get(got["same_as"])
    return str(got.get("model")) if isinstance(got, dict) and got.get("model") else None


def comparison_keys(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """What must agree for two runs of one track to be compared: the dataset's sha256, the
    answer model, the judge and any budget (config fields named *budget* or *max_tokens*)."""
    keys: dict[str, Any] = {
        "dataset sha256": (manifest.get("dataset") or {}).get("sha256"),
        "answer model": _role_model(manifest, "model"),
        "judge": _role_model(manifest, "judge"),
    }
    for name, value in sorted((manifest.get("config") or {}).items()):
        if "budget" in name or "max_tokens" in name:
            keys[f"budget ({name})"] = value
    return keys


def not_comparable(runs: Sequence[Run]) -> list[str]:
    """One line per key on which runs of one track differ, naming each run's value."""
    out = []
    keys = [comparison_keys(r.manifest) for r in runs]
    for name in dict.fromkeys(k for ks in keys for k in ks):
        values = [ks.get(name) for ks in keys]
        if len({json.dumps(v, sort_keys=True) for v in values}) > 1:
            each = ", ".join(f"{r.label}: {_short(v)}" for r, v in zip(runs, values, strict=True))
            out.append(f"{name} differs ({each})")
    return out


def _short(value: Any) -> str:
    text = "none" if value is None else str(value)
    return text[:12] + "…" if len(text) == 64 and re.fullmatch(r"[0-9a-f]+", text) else text


# -- tables -------------------------------------------------------------------------------


@dataclass
class FigureTable:
    """Figures laid out as rows x columns; a row is (run label, row name)."""

    title: str
    columns: list[str] = field(default_factory=list)
    cells: dict[tuple[str, str], dict[str, Figure]] = field(default_factory=dict)

    def add(self, run: str, row: str, col: str, fig: Figure) -> None:
        if col not in self.columns:
            self.columns.append(col)
        self.cells.setdefault((run, row), {})[col] = fig

    def rows(self) -> list[str]:
        return list(dict.fromkeys(row for _, row in self.cells))


def arrange(path: Path_, layout: tuple[str, ...] | None) -> tuple[str, str, str, str | None]:
    """(table, row, column, breakdown) of a figure's path; breakdown None is the headline."""
    if layout is None or len(layout) != len(path):
        if len(path) == 1:
            return "", "", path[0], None
        return " · ".join(path[:-2]), path[-2], path[-1], None
    table: list[str] = []
    row: list[str] = []
    col: list[str] = []
    brk: str | None = None
    for role, key in zip(layout, path, strict=True):
        {"table": table, "row": row, "col": col}.get(role, []).append(key)
        if role == "break" and key != "all":
            brk = key
    return " · ".join(table), " · ".join(row), " · ".join(col), brk


def figure_tables(
    runs: Sequence[Run], source: str = "summary.json", layout: tuple[str, ...] | None = None
) -> list[FigureTable]:
    """The figures of one file of every run (`source`), merged table by table, so several
    runs of one track sit side by side (each row once per run)."""
    tables: dict[str, FigureTable] = {}
    for run in runs:
        content = run.summary if source == "summary.json" else run.files.get(source)
        for path, fig in figures(content):
            table, row, col, brk = arrange(path, layout)
            if brk is not None:
                key = brk.split("=")[0]
                table, row = f"{table} by {key}".strip(), f"{row} · {brk}".strip(" ·")
            tables.setdefault(table, FigureTable(table)).add(run.label, row, col, fig)
    return list(tables.values())


def _fmt(x: float | None) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x:.3f}"


def _cell(fig: Figure | None) -> str:
    if fig is None:
        return "<td></td>"
    if fig.value is None:
        return f'<td class="fig empty" title="n={fig.n}">- <span class="n">n={fig.n}</span></td>'
    return (
        f'<td class="fig" data-value="{_fmt(fig.value)}"><b>{_fmt(fig.value)}</b> '
        f'<span class="ci">[{_fmt(fig.ci_low)}, {_fmt(fig.ci_high)}]</span> '
        f'<span class="n">n={fig.n}</span></td>'
    )


def flagged(run: Run) -> dict[str, str]:
    """System -> how its context was cut or fell back (warnings.json `flagged`)."""
    flags = run.warnings.get("flagged")
    return {str(k): str(v) for k, v in flags.items()} if isinstance(flags, dict) else {}


def flags_html(runs: Sequence[Run]) -> str:
    """The systems whose context was cut or fell back, run by run, above the figures."""
    items = [
        f"<li>{escape(r.label) + ': ' if len(runs) > 1 else ''}<b>{escape(name)}</b> {FLAG} "
        f"{escape(what)}</li>"
        for r in runs
        for name, what in flagged(r).items()
    ]
    if not items:
        return ""
    return (
        '<div class="flag"><b>Context cut or fell back</b> (these figures are not of the full '
        f"context they name):<ul>{''.join(items)}</ul></div>"
    )


def table_html(
    table: FigureTable,
    multi: bool,
    css: str = "figures",
    flags: Mapping[str, Mapping[str, str]] | None = None,
) -> str:
    """`flags`: run label -> system -> its flag; a row or table naming the system is marked."""
    head = ("<th>run</th>" if multi else "") + "<th></th>"
    head += "".join(f"<th>{escape(c)}</th>" for c in table.columns)
    body = []
    runs = list(dict.fromkeys(run for run, _ in table.cells))
    for row in table.rows():
        for run in runs:
            cells = table.cells.get((run, row))
            if cells is None:
                continue
            first = f'<td class="run">{escape(run)}</td>' if multi else ""
            mine = (flags or {}).get(run, {})
            said = [w for name, w in mine.items() if name in (row, *table.title.split(" · "))]
            mark = (
                f' <span class="flagmark" title="{escape(said[0])}">{FLAG}</span>' if said else ""
            )
            body.append(
                f"<tr>{first}<th>{escape(row)}{mark}</th>"
                + "".join(_cell(cells.get(c)) for c in table.columns)
                + "</tr>"
            )
    caption = f"<caption>{escape(table.title)}</caption>" if table.title else ""
    return (
        f'<div class="scroll"><table class="{css}">{caption}<thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def scalar_table(content: Any) -> str:
    """A plain two-column table of a JSON file's values (counts, populations, ...)."""
    rows = [
        f"<tr><th>{escape(' · '.join(p))}</th><td>{escape(_text(v))}</td></tr>"
        for p, v in scalars(content)
    ]
    return f'<div class="scroll"><table class="plain"><tbody>{"".join(rows)}</tbody></table></div>'


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, float):
        return f"{value:g}"
    return json.dumps(value, ensure_ascii=False)


# -- plots --------------------------------------------------------------------------------

BUDGET = re.compile(r"^coverage@(\d+(?:\.\d+)?)([kKmM]?)$")


def _budget(col: str) -> float | None:
    m = BUDGET.match(col)
    if not m:
        return None
    return float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6}[m.group(2).lower()]


def _bars_of(
    cols: Sequence[str], table: FigureTable, run: str | None = None
) -> dict[tuple[str, str], Bar]:
    """(row, column) -> bar of `table`'s figures in `cols`, of one run (None: every run)."""
    bars: dict[tuple[str, str], Bar] = {}
    for (who, row), cells in table.cells.items():
        if run is not None and who != run:
            continue
        for c in cols:
            fig = cells.get(c)
            bar = fig.bar() if fig else None
            if bar is not None:
                bars[(row, c)] = bar
    return bars


def _groups(bars: Mapping[tuple[str, str], Bar]) -> list[str]:
    return list(dict.fromkeys(g for g, _ in bars))


def _bar_plots(title: str, cols: Sequence[str], table: FigureTable, label: str) -> list[str]:
    """Bars of `cols` per row; with several runs, small multiples: one chart per run, under
    its full name, on one shared value axis (the rows keep their own names on the axis)."""
    runs = list(dict.fromkeys(run for run, _ in table.cells))
    if len(runs) == 1:
        bars = _bars_of(cols, table)
        return [bar_chart(title, _groups(bars), cols, bars, label=label)] if bars else []
    scale = bar_range(_bars_of(cols, table).values())
    out = []
    for run in runs:
        bars = _bars_of(cols, table, run)
        if bars:
            out.append(
                bar_chart(
                    f"{title} — run {run}", _groups(bars), cols, bars, label=label, y_range=scale
                )
            )
    return out


def _coverage_plot(title: str, budgets: Mapping[str, float], table: FigureTable) -> str:
    """Coverage against token budget: a line per (run and) system, its interval shaded."""
    lines: dict[str, list[tuple[float, float]]] = {}
    bands: dict[str, list[tuple[float, float, float]]] = {}
    multi = len({run for run, _ in table.cells}) > 1
    for (run, row), cells in table.cells.items():
        name = f"{run}: {row}" if multi else row
        got = [(b, f) for c, b in budgets.items() if (f := cells.get(c)) is not None]
        lines[name] = sorted((b, f.value) for b, f in got if f.value is not None)
        bands[name] = sorted(
            (b, f.ci_low, f.ci_high)
            for b, f in got
            if f.ci_low is not None and f.ci_high is not None
        )
    return line_chart(
        f"coverage against token budget{title}",
        lines,
        x_label="token budget",
        y_label="coverage (shaded: 95% interval)",
        x_log=True,
        x_names={b: c.split("@", 1)[1] for c, b in budgets.items()},
        bands=bands,
    )


def figure_plots(tables: Sequence[FigureTable]) -> list[str]:
    """Plots of the summary's figures: hit@k and AUROC bars with whiskers, coverage against
    budget, paired gains; else the first table's first columns as bars."""
    out: list[str] = []
    for table in tables:
        title = f" ({table.title})" if table.title else ""
        hits = [c for c in table.columns if re.fullmatch(r"hit@\d+", c)]
        aurocs = [c for c in table.columns if "auroc" in c]
        budgets = {c: b for c in table.columns if (b := _budget(c)) is not None}
        for cols, name, label in ((hits, "hit@k", "hit rate"), (aurocs, "AUROC", "AUROC")):
            if cols:
                out.extend(_bar_plots(f"{name} per system{title}", cols, table, label))
        if budgets:
            out.append(_coverage_plot(title, budgets, table))
        if "gain" in table.title.split(" by ")[0] and "all" in table.columns:
            out.extend(_bar_plots(f"paired gains per condition{title}", ["all"], table, "gain"))
    if not out and tables:
        table = tables[0]
        out.extend(_bar_plots(table.title or "headline", table.columns[:4], table, ""))
    return out


def system_of(row: Mapping[str, Any], fields: Sequence[str]) -> str:
    for f in fields:
        if f in row and isinstance(row[f], str | int):
            return str(row[f])
    return "all"


def roc_points(scores: Sequence[tuple[float, bool]]) -> list[tuple[float, float]]:
    """The ROC curve (false-positive rate, true-positive rate) of scored labels, one point
    per distinct score, ties taken together."""
    pos = sum(1 for _, y in scores if y)
    neg = len(scores) - pos
    if not pos or not neg:
        return []
    pts = [(0.0, 0.0)]
    tp = fp = 0
    ordered = sorted(scores, key=lambda t: -t[0])
    for i, (s, y) in enumerate(ordered):
        tp += y
        fp += not y
        if i + 1 == len(ordered) or ordered[i + 1][0] != s:
            pts.append((fp / neg, tp / pos))
    return pts


def item_plots(runs: Sequence[Run], view: TrackView) -> list[str]:
    """Plots of the items: ROC curves (score and label), judge score distributions (one per
    dimension) and latency boxes (numeric `latency*` fields), per system."""
    out: list[str] = []
    multi = len(runs) > 1

    def name(run: Run, row: Mapping[str, Any]) -> str:
        system = system_of(row, view.system_fields)
        return f"{run.label}: {system}" if multi else system

    roc: dict[str, list[tuple[float, bool]]] = {}
    judged: dict[str, dict[str, dict[int, int]]] = {}
    latency: dict[str, dict[str, list[float]]] = {}
    for run in runs:
        for row in run.items:
            who = name(run, row)
            score, label = row.get("score"), row.get("label")
            if (
                isinstance(label, bool)
                and isinstance(score, int | float)
                and not isinstance(score, bool)
            ):
                roc.setdefault(who, []).append((float(score), label))
            for dim, v in (row.get("judge_scores") or {}).items():
                if isinstance(v, int | float):
                    counts = judged.setdefault(str(dim), {}).setdefault(who, {})
                    counts[int(v)] = counts.get(int(v), 0) + 1
            for k, v in row.items():
                if "latency" in k and isinstance(v, int | float) and not isinstance(v, bool):
                    latency.setdefault(k, {}).setdefault(who, []).append(float(v))
    curves = {k: p for k, v in roc.items() if (p := roc_points(v))}
    if curves:
        out.append(
            line_chart(
                "ROC: needs memory (label) against each system's score",
                curves,
                x_label="false-positive rate",
                y_label="true-positive rate",
                diagonal=True,
            )
        )
    for dim, by_system in judged.items():
        levels = sorted({lvl for c in by_system.values() for lvl in c})
        bars = {
            (str(lvl), who): Bar(c.get(lvl, 0) / max(1, sum(c.values())), n=c.get(lvl, 0))
            for who, c in by_system.items()
            for lvl in levels
        }
        out.append(
            bar_chart(
                f"judge scores: {dim} (share of rows per score)",
                [str(lvl) for lvl in levels],
                list(by_system),
                bars,
                label="share",
            )
        )
    for key, samples in latency.items():
        out.append(box_chart(f"{key} per system", samples, label=key))
    return out


# -- drill-down ---------------------------------------------------------------------------


def _key_of(rows: Sequence[Mapping[str, Any]]) -> str | None:
    for k in ITEM_KEYS:
        if any(k in r for r in rows[:50]):
            return k
    return None


def _ids_cell(
    values: Sequence[Any], marked: set[str], texts: Mapping[str, str], used: set[str]
) -> str:
    """Message ids, each an `<i>` (a `<mark>` when it is evidence) in a `.ids` run; hovering
    one whose text is known shows it (the text is stored once per page, in `.texts`)."""
    parts = []
    for v in values:
        s = str(v)
        if s in texts:
            used.add(s)
        tag = "mark" if s in marked else "i"
        parts.append(f"<{tag}>{escape(s)}</{tag}>")
    return f'<span class="ids">{" ".join(parts)}</span>'


def _scalar(v: Any) -> bool:
    return v is None or isinstance(v, str | int | float | bool)


def _value_cell(value: Any, marked: set[str], texts: Mapping[str, str], used: set[str]) -> str:
    if isinstance(value, list) and value and all(_scalar(v) for v in value):
        return _ids_cell(["null" if v is None else v for v in value], marked, texts, used)
    if (
        isinstance(value, dict)
        and value
        and len(value) <= 12
        and all(_scalar(v) for v in value.values())
    ):
        return "".join(
            f'<div class="kv">{escape(str(k))}: <b>{escape(_text(v))}</b></div>'
            for k, v in value.items()
        )
    if (
        isinstance(value, list)
        and value
        and all(isinstance(v, dict) and "content" in v for v in value)
    ):
        lines = "".join(
            f'<div class="turn"><b>{escape(str(v.get("person", v.get("role", ""))))}</b>: '
            f"{escape(str(v.get('content', '')))}</div>"
            for v in value[:200]
        )
        return f'<div class="long">{lines}</div>'
    if isinstance(value, dict | list):
        text = json.dumps(value, ensure_ascii=False, indent=1)
        return f'<pre class="long">{escape(text[:MAX_CELL])}</pre>'
    text = _text(value)
    cls = "long" if len(text) > 120 else "val"
    return f'<div class="{cls}">{escape(text[:MAX_CELL])}</div>'


Member = tuple[Run, dict[str, Any]]


def _grouped(runs: Sequence[Run]) -> tuple[dict[str, list[Member]], list[str | None]]:
    """Item rows of every run grouped by (subject and) probe, question, item or episode,
    so runs of one track line up group by group; and each run's grouping field."""
    groups: dict[str, list[Member]] = {}
    keys: list[str | None] = []
    for run in runs:
        key = _key_of(run.items) if run.items else None
        keys.append(key)
        for i, row in enumerate(run.items):
            label = str(row.get(key, i)) if key else str(i)
            subject = row.get("subject")
            gkey = f"{subject} / {label}" if isinstance(subject, str) else label
            groups.setdefault(gkey, []).append((run, row))
    return groups, keys


def _field_row(name: str, members: Sequence[Member], cell: Callable[[Any], str]) -> str:
    """One field across the columns: one cell when every column holds the same value."""
    values = [row.get(name, _MISSING) for _, row in members]
    if len(values) > 1 and _MISSING not in values:
        first = json.dumps(values[0], sort_keys=True, default=str)
        if all(json.dumps(v, sort_keys=True, default=str) == first for v in values[1:]):
            return (
                f'<tr><th>{escape(name)}</th><td class="same" colspan="{len(values)}">'
                f"{cell(values[0])}</td></tr>"
            )
    cells = "".join(f"<td>{cell(v) if v is not _MISSING else ''}</td>" for v in values)
    return f"<tr><th>{escape(name)}</th>{cells}</tr>"


_MISSING: Any = object()


def drilldown_html(runs: Sequence[Run], view: TrackView) -> str:
    """The runs' items grouped by probe (question, item, episode): one column per system
    (per run and system when several runs are compared), one line per field, a field with
    one value across the columns in one cell; evidence ids marked wherever they appear;
    each message's text once on the page (hover an id to read it)."""
    if not any(r.items for r in runs):
        return "<p>No items.jsonl rows in this run.</p>"
    multi = len(runs) > 1
    groups, keys = _grouped(runs)
    key = next((k for k in keys if k), None)
    texts: dict[tuple[str, str], str] = {k: v for r in runs for k, v in r.texts.items()}
    evidence: dict[tuple[str, str], list[str]] = {k: v for r in runs for k, v in r.evidence.items()}
    shown = list(groups.items())[:MAX_GROUPS]
    out: list[str] = []
    stored: dict[tuple[str, str], str] = {}
    skip = {*(k for k in keys if k), "subject"}
    for gkey, members in shown:
        subject = str(members[0][1].get("subject", ""))
        mine = {mid: t for (s, mid), t in texts.items() if s == subject}
        probe = str(members[0][1].get(key or "", ""))
        marked = {
            str(v) for _, r in members for f in EVIDENCE_FIELDS for v in (r.get(f) or []) if v
        }
        marked |= set(evidence.get((subject, probe), []))
        probe_text = mine.get(probe) or members[0][1].get("text")
        head = f'<span class="gkey">{escape(gkey)}</span>'
        if isinstance(probe_text, str):
            head += f' <span class="probe">{escape(probe_text[:200])}</span>'
        verdicts = [r.get("judged") for _, r in members if "judged" in r]
        if verdicts:
            head += (
                f' <span class="n">{sum(bool(v) for v in verdicts)}/{len(verdicts)} judged</span>'
            )
        systems = [
            f"{run.label}: {system_of(r, view.system_fields)}"
            if multi
            else system_of(r, view.system_fields)
            for run, r in members
        ]
        fields = [f for f in dict.fromkeys(k for _, r in members for k in r) if f not in skip]
        shown_as_header = next((f for f in view.system_fields if f in fields), None)
        fields = [f for f in fields if f != shown_as_header]
        used: set[str] = set()

        cell = partial(_value_cell, marked=marked, texts=mine, used=used)
        lines = [_field_row(f, members, cell) for f in fields]
        stored.update({(subject, m): mine[m] for m in used})
        evidence_li = "".join(
            f'<li><mark class="id">{escape(m)}</mark> {escape(mine[m][:300])}</li>'
            for m in sorted(marked)
            if m in mine
        )
        ev = f'<div class="evidence">evidence:<ul>{evidence_li}</ul></div>' if evidence_li else ""
        heads = "".join(f"<th>{escape(s)}</th>" for s in systems)
        out.append(
            f'<details class="item" data-subject="{escape(subject)}"><summary>{head}</summary>'
            f'{ev}<div class="scroll"><table class="drill"><thead><tr><th></th>{heads}</tr>'
            f"</thead><tbody>{''.join(lines)}</tbody></table></div></details>"
        )
    rows = sum(len(r.items) for r in runs)
    more = len(groups) - len(shown)
    note = f'<p class="note">{more} more groups are not shown (items.jsonl has them all).</p>'
    store = "".join(
        f'<p data-s="{escape(s)}" data-m="{escape(m)}">{escape(t[:MAX_TIP])}</p>'
        for (s, m), t in stored.items()
    )
    return (
        f'<p class="note">{rows} rows in {len(groups)} groups by '
        f"{escape(key or 'row')}; evidence ids are <mark>marked</mark>; hover an id to read "
        "its message.</p>"
        + "".join(out)
        + (note if more > 0 else "")
        + (f'<div class="texts" hidden>{store}</div>' if store else "")
    )


# -- run facts ----------------------------------------------------------------------------


def unscored(rows: Sequence[Mapping[str, Any]]) -> int:
    """Rows a judge was asked about that got no usable verdict (counted, never scored 0)."""
    return sum(1 for r in rows if r.get("judge_model") and r.get("judged") is False)


def facts_html(run: Run) -> str:
    m = run.manifest
    ds = m.get("dataset") or {}
    roles = {r: _role_model(m, r) for r in (m.get("roles") or {})}
    failures = run.warnings.get("failures") or {}
    failed_calls = sum(
        int(u.get("failed_calls", 0)) for u in (run.usage.get("roles") or {}).values()
    )
    facts = [
        ("track", m.get("track")),
        ("dataset", f"{ds.get('name')} (sha256 {ds.get('sha256')})"),
        ("roles", ", ".join(f"{r}: {v}" for r, v in roles.items()) or "none (no model)"),
        ("rows", len(run.items)),
        ("unscored rows", unscored(run.items)),
        ("failed calls", failed_calls),
        ("failures", ", ".join(f"{k}: {v}" for k, v in failures.items()) or "none"),
        ("started", m.get("started")),
        ("package", f"{m.get('package_version')} (git {m.get('git_revision')})"),
        ("folder", str(run.path)),
    ]
    if run.torn:
        facts.append(("unreadable item lines", run.torn))
    body = "".join(f"<tr><th>{escape(k)}</th><td>{escape(_text(v))}</td></tr>" for k, v in facts)
    warnings = run.warnings.get("warnings") or []
    warned = "".join(f"<li>{escape(str(w))}</li>" for w in warnings)
    others = {k: v for k, v in run.warnings.items() if k != "warnings"}
    return (
        f'<table class="plain facts">{body}</table>'
        f"<details><summary>warnings ({len(warnings)})</summary><ul>{warned}</ul>"
        + (scalar_table(others) if others else "")
        + "</details>"
        f"<details><summary>manifest.json</summary><pre>"
        f"{escape(json.dumps(m, indent=2, ensure_ascii=False))}</pre></details>"
    )


def judges_html(run: Run) -> str:
    """The judge panel's agreement (`dialogbench score` with several judges): Krippendorff's
    alpha over the rows every judge scored, and each headline figure per judge with its
    spread (max - min); empty when the run was not re-judged by a panel."""
    agreement = run.judges.get("agreement") or {}
    spread = run.judges.get("spread") or {}
    if not agreement and not spread:
        return ""
    judges = [str(j) for j in agreement.get("judges") or []]
    alpha = agreement.get("krippendorff_alpha")
    said = "undefined" if not isinstance(alpha, int | float) else f"{alpha:.3f}"
    head = "".join(f"<th>{escape(j)}</th>" for j in judges) + "<th>spread</th>"
    rows = "".join(
        f"<tr><th>{escape(str(fig))}</th>"
        + "".join(f'<td class="fig">{_fmt(_number(per.get(j)))}</td>' for j in [*judges, "spread"])
        + "</tr>"
        for fig, per in spread.items()
        if isinstance(per, dict)
    )
    return (
        f'<div class="judges"><h4>Judge agreement ({len(judges)} judges, dialogbench score)</h4>'
        f"<p>Krippendorff's alpha ({escape(str(agreement.get('level', '')))}): <b>{said}</b> "
        f"over {escape(str(agreement.get('rows', '?')))} rows every judge scored.</p>"
        f'<div class="scroll"><table class="plain judges"><thead><tr><th>headline figure</th>'
        f"{head}</tr></thead><tbody>{rows}</tbody></table></div></div>"
    )


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


# -- the page -----------------------------------------------------------------------------


def _asset(name: str) -> str:
    return files("dialogbench.report").joinpath("assets", name).read_text(encoding="utf-8")


def track_section(track: str, runs: Sequence[Run]) -> str:
    view = VIEWS.get(track, TrackView())
    multi = len(runs) > 1
    parts = [f'<section class="track" id="track-{escape(track)}"><h2>{escape(track)}</h2>']
    names = ", ".join(escape(r.label) for r in runs)
    parts.append(f"<p>{len(runs)} run{'s' if multi else ''}: {names}</p>")
    if multi:
        problems = not_comparable(runs)
        if problems:
            parts.append(
                '<div class="flag"><b>Not comparable:</b><ul>'
                + "".join(f"<li>{escape(p)}</li>" for p in problems)
                + "</ul></div>"
            )
        else:
            parts.append('<p class="ok">Comparable: same dataset, models, judge and budget.</p>')
    tables = figure_tables(runs, layout=view.layout)
    flags = {r.label: flagged(r) for r in runs}
    parts.append("<h3>Figures (95% bootstrap intervals)</h3>")
    parts.append(flags_html(runs))
    parts.extend(table_html(t, multi, flags=flags) for t in tables[:1])
    if len(tables) > 1:
        parts.append("<details><summary>more figures</summary>")
        parts.extend(table_html(t, multi, flags=flags) for t in tables[1:])
        parts.append("</details>")
    plots = figure_plots(tables) + item_plots(runs, view)
    if plots:
        parts.append('<h3>Plots</h3><div class="plots">' + "".join(plots) + "</div>")
    others = list(dict.fromkeys(n for r in runs for n in r.files))
    for fname in others:
        ftables = figure_tables(runs, fname)
        parts.append(f'<details class="file"><summary>{escape(fname)}</summary>')
        if ftables:
            parts.extend(table_html(t, multi) for t in ftables)
        for r in runs:
            if fname in r.files and not any(True for _ in figures(r.files[fname])):
                parts.append(
                    (f"<h4>{escape(r.label)}</h4>" if multi else "") + scalar_table(r.files[fname])
                )
        parts.append("</details>")
    for r in runs:
        parts.append(
            f'<div class="run"><h3>Run {escape(r.label)}</h3>{facts_html(r)}{judges_html(r)}</div>'
        )
    items = "Items, run by run side by side" if multi else "Items"
    parts.append(f"<h3>{items}</h3>{drilldown_html(runs, view)}")
    parts.append("</section>")
    return "".join(parts)


def render(runs: Sequence[Run], title: str = "dialogbench report") -> str:
    """The whole page for `runs`, grouped by track (runs of one track side by side)."""
    by_track: dict[str, list[Run]] = {}
    for r in runs:
        by_track.setdefault(r.track, []).append(r)
    nav = "".join(
        f'<a href="#track-{escape(t)}">{escape(t)} ({len(rs)})</a>' for t, rs in by_track.items()
    )
    sections = "".join(track_section(t, rs) for t, rs in by_track.items())
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{_asset('report.css')}</style></head><body>"
        f"<header><h1>{escape(title)}</h1><nav>{nav}</nav>"
        '<input id="filter" type="search" placeholder="filter items (probe, text, system)">'
        "</header><main>"
        f"{sections}</main><script>{_asset('report.js')}</script></body></html>"
    )


def write_report(paths: Sequence[Path], out: Path, *, texts: bool = True) -> Path:
    """Read the run folders, write the page to `out` and return its path."""
    runs = read_runs(paths, texts=texts)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(runs), encoding="utf-8")
    return out
