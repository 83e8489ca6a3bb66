"""Supervised fine-tuning data from finished DEMO runs (`dialogbench export sft`).

The DEMO agent (Wang et al., 2024, sec. 3.3) imitates an expert: its single-turn element
analyses and its turns in goal-directed conversations. Here the expert is whatever model a
finished run had under test, and its trajectories are:

- **awareness**: one example per item whose answer parsed and was judged: the exact prompt
  the track sent (system + user) and the answer as JSON;
- **interaction**: one example per side the model under test played, from that side's own
  view only: the prompt the track sent before the side's first turn (its persona and goal,
  never the partner's goal), then the partner's turns as user messages (`Name: words`) and
  the side's own turns as assistant messages in the track's turn format
  (`{"person": ..., "content": ...}`, and the end marker when the side ended it).

A judged score filters them (`--min-score`: an awareness item's `score`, 0-10; an
episode's overall score under the rubric it was judged with, the row's `judge_overall`
field: DEMO's `average`, 0-10, or a rubric file's overall, e.g. SOTOPIA's `overall`, the
mean of its seven dimensions on their own ranges; a per-agent rubric scores each side on
its own agent's dimensions); rows that were never parsed, judged or finished are left out
and counted, never exported. Without `--min-score` every judged row is kept. Files are
UTF-8 with every character as itself (no `\\u` escapes). Examples are split into train
and validation by dialogue (or episode), so both sides of an episode and every task of a
dialogue fall on the same side. Formats: OpenAI-style `{"messages": [...]}` lines, or ShareGPT
`{"conversations": [{"from": "system"|"human"|"gpt", "value": ...}]}`.

The prompts are rebuilt from the run's dataset, found by the manifest's name or source and
checked against its sha256 (`--dataset` points to it when it has moved).
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NamedTuple

from dialogbench.data.demo.model import AwarenessItem, DemoSet
from dialogbench.data.demo.registry import load_demo
from dialogbench.data.errors import DataError
from dialogbench.data.io import json_lines, source_from_record
from dialogbench.models.types import ChatMessage

Format = Literal["openai", "sharegpt"]
FORMATS: tuple[Format, ...] = ("openai", "sharegpt")
SHAREGPT_ROLES = {"system": "system", "user": "human", "assistant": "gpt"}
TEXT: dict[str, Any] = {"ensure_ascii": False}  # every json.dumps: characters as themselves
PARTICIPANTS = ("p1", "p2")  # a per-agent rubric's keys under a row's `agents`


@dataclass
class Example:
    """One chat to learn from, and the group (dialogue or episode) it belongs to."""

    messages: list[ChatMessage]
    group: str
    kind: Literal["awareness", "interaction"]
    run: str
    score: float


@dataclass
class RunCounts:
    """What one run gave: rows read, examples kept, and why the rest were left out."""

    run: str
    track: str
    model: str
    rows: int = 0
    examples: int = 0
    left_out: Counter[str] = field(default_factory=Counter)


class RunRows(NamedTuple):
    """One finished run as an example builder reads it: its folder, rows, dataset, the
    score a row must reach (None: any judged row) and the counts it adds to."""

    run: Path
    rows: list[dict[str, Any]]
    data: DemoSet
    min_score: float | None
    counts: RunCounts


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(path, "file not found", fix="give a finished run folder") from None
    except json.JSONDecodeError as e:
        raise DataError(path, f"not valid JSON: {e.msg}", fix="rerun the run") from None


def _rows(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        raise DataError(path, "file not found", fix="give a finished run folder")
    return [row for _, row in json_lines(path, path.read_text(encoding="utf-8"), "rerun the run")]


def run_dataset(run: Path, manifest: dict[str, Any], dataset: str | None = None) -> DemoSet:
    """The DEMO set the run read, checked against the manifest's sha256."""
    info = manifest.get("dataset") or {}
    want, seed = info.get("sha256"), int(manifest.get("seed", 0))
    source = info.get("source")
    recorded = source_from_record(str(source), run) if source else None
    tried = [dataset] if dataset else [info.get("name"), recorded]
    for name in (t for t in tried if t):
        try:
            data = load_demo(str(name), seed=seed)
        except DataError:
            continue
        if data.sha256 == want:
            return data
    raise DataError(
        run / "manifest.json",
        f"the run's dataset ({info.get('name')!r}, sha256 {str(want)[:12]}...) is not found "
        f"as {' or '.join(repr(t) for t in tried if t)}",
        field="dataset",
        fix="pass --dataset with the corpus name or path the run used (the same files)",
    )


def _merge(messages: list[ChatMessage]) -> list[ChatMessage]:
    """Consecutive messages of one role joined (a chat alternates)."""
    out: list[ChatMessage] = []
    for m in messages:
        if out and out[-1]["role"] == m["role"]:
            out[-1] = {"role": m["role"], "content": out[-1]["content"] + "\n\n" + m["content"]}
        else:
            out.append(dict(m))  # type: ignore[arg-type]
    return out


def awareness_examples(read: RunRows) -> list[Example]:
    run, rows, data, min_score, counts = read
    from dialogbench.tracks.demo import awareness_prompts as ap
    from dialogbench.tracks.demo.awareness import _names, participant_names

    items: dict[str, AwarenessItem] = {}
    for item in data.items:
        items.setdefault(item.id, item)
    names = participant_names(data)
    out = []
    for row in rows:
        answer = (row.get("prediction") or {}).get("parsed")
        score = row.get("score")
        if answer is None:
            counts.left_out["answer never parsed"] += 1
        elif score is None:
            counts.left_out["not judged"] += 1
        elif min_score is not None and score < min_score:
            counts.left_out[f"score below {min_score:g}"] += 1
        elif row["id"] not in items:
            counts.left_out["item not in the dataset"] += 1
        else:
            item = items[row["id"]]
            messages = ap.prediction_messages(item, _names(item, names))
            reply = json.dumps(answer, **TEXT)
            messages = [*messages, {"role": "assistant", "content": reply}]
            out.append(
                Example(
                    messages, f"dialogue:{item.dialogue_id}", "awareness", str(run), float(score)
                )
            )
    return out


def interaction_examples(read: RunRows) -> list[Example]:
    run, rows, data, min_score, counts = read
    from dialogbench.tracks.demo import interaction_prompts as ip

    episodes = {e.id: e for e in data.episodes}
    out = []
    for row in rows:
        score = row.get(row.get("judge_overall") or "average")
        if row.get("failure") is not None or row.get("ending") == "failed":
            counts.left_out["episode failed"] += 1
            continue
        if score is None:
            counts.left_out["not judged"] += 1
            continue
        per_side = isinstance(row.get("agents"), dict)
        if min_score is not None and not per_side and score < min_score:
            counts.left_out[f"score below {min_score:g}"] += 1
            continue
        episode = episodes.get(row["episode"])
        if episode is None:
            counts.left_out["episode not in the dataset"] += 1
            continue
        turns = row["turns"]
        for side, person in enumerate(episode.participants):
            own = [t for t in turns if t["person"] == person.name]
            if not own or any(t["played_by"] != "under_test" for t in own):
                continue  # a side the partner model played, or that never spoke
            first = next(i for i, t in enumerate(turns) if t["person"] == person.name)
            before = [(t["person"], t["content"]) for t in turns[:first]]
            messages: list[ChatMessage] = list(ip.agent_messages(episode, side, before))
            for t in turns[first:]:
                if t["person"] == person.name:
                    turn = {"person": person.name, "content": t["content"]}
                    messages.append({"role": "assistant", "content": json.dumps(turn, **TEXT)})
                else:
                    messages.append({"role": "user", "content": f"{t['person']}: {t['content']}"})
            if row.get("ended_by") == person.name:
                end = {"person": person.name, ip.END_KEY: True}
                messages.append({"role": "assistant", "content": json.dumps(end, **TEXT)})
            while messages[-1]["role"] != "assistant":
                messages.pop()  # learn nothing from the partner's last words
            mine = side_score(row, side, float(score))
            if min_score is not None and mine < min_score:
                counts.left_out[f"side's score below {min_score:g}"] += 1  # a per-agent rubric
                continue
            out.append(
                Example(_merge(messages), f"episode:{episode.id}", "interaction", str(run), mine)
            )
    return out


def examples_of(
    run: Path, min_score: float | None, dataset: str | None = None, model: str | None = None
) -> tuple[list[Example], RunCounts]:
    """The examples of one finished run, and its counts."""
    manifest = _read_json(run / "manifest.json")
    track = str(manifest.get("track"))
    under_test = str((manifest.get("roles") or {}).get("model", {}).get("model", "?"))
    counts = RunCounts(str(run), track, under_test)
    if track not in ("demo-awareness", "demo-interaction"):
        raise DataError(
            run / "manifest.json",
            f"track {track!r} has no expert trajectories to export",
            field="track",
            fix="give demo-awareness or demo-interaction run folders",
        )
    rows = _rows(run / "items.jsonl")
    counts.rows = len(rows)
    if model is not None and under_test != model:
        counts.left_out[f"model under test is {under_test}, not {model}"] += len(rows)
        return [], counts
    data = run_dataset(run, manifest, dataset)
    make = awareness_examples if track == "demo-awareness" else interaction_examples
    examples = make(RunRows(run, rows, data, min_score, counts))
    counts.examples = len(examples)
    return examples, counts


def side_score(row: dict[str, Any], side: int, overall: float) -> float:
    """The score of one side of an episode: under a per-agent rubric (SOTOPIA's), the mean
    of that participant's own dimensions (the row's `agents`); otherwise the episode's
    overall score."""
    agents = row.get("agents")
    if isinstance(agents, dict) and isinstance(agents.get(PARTICIPANTS[side]), dict):
        mine = agents[PARTICIPANTS[side]]
        if mine:
            return float(sum(mine.values()) / len(mine))
    return overall


def split(
    examples: Sequence[Example], val_fraction: float, seed: int
) -> tuple[list[Example], list[Example]]:
    """Train and validation examples, split by group (a seeded shuffle of the groups; the
    validation side gets round(fraction x groups), at least one when the fraction is above 0
    and there are two groups or more)."""
    if not 0 <= val_fraction < 1:
        raise ValueError(f"--val-fraction: {val_fraction} must be at least 0 and below 1")
    groups = sorted({e.group for e in examples})
    random.Random(seed).shuffle(groups)
    n = round(val_fraction * len(groups))
    if val_fraction > 0 and n == 0 and len(groups) >= 2:
        n = 1
    val = set(groups[:n])
    return [e for e in examples if e.group not in val], [e for e in examples if e.group in val]


def record(example: Example, fmt: Format) -> dict[str, Any]:
    """One JSONL line in the chosen format."""
    if fmt == "openai":
        return {"messages": example.messages}
    turns = [{"from": SHAREGPT_ROLES[m["role"]], "value": m["content"]} for m in example.messages]
    return {"conversations": turns}


def export_sft(
    runs: Sequence[Path],
    out: Path,
    *,
    min_score: float | None = None,
    val_fraction: float = 0.1,
    seed: int = 0,
    fmt: Format = "openai",
    dataset: str | None = None,
    model: str | None = None,
) -> dict[str, Any]:
    """Write `train.jsonl`, `val.jsonl` and `export.json` (the counts) to `out`."""
    if fmt not in FORMATS:
        raise ValueError(f"--format: {fmt!r} is not one of {', '.join(FORMATS)}")
    examples: list[Example] = []
    per_run = []
    for run in runs:
        got, counts = examples_of(run, min_score, dataset, model)
        examples += got
        per_run.append(counts)
    train, val = split(examples, val_fraction, seed)
    out.mkdir(parents=True, exist_ok=True)
    for name, part in (("train", train), ("val", val)):
        text = "".join(json.dumps(record(e, fmt), **TEXT) + "\n" for e in part)
        (out / f"{name}.jsonl").write_text(text, encoding="utf-8")
    summary = {
        "format": fmt,
        "min_score": min_score,
        "val_fraction": val_fraction,
        "seed": seed,
        "train": len(train),
        "val": len(val),
        "by_kind": dict(sorted(Counter(e.kind for e in examples).items())),
        "runs": [
            {
                "run": c.run,
                "track": c.track,
                "model": c.model,
                "rows": c.rows,
                "examples": c.examples,
                "left_out": dict(sorted(c.left_out.items())),
            }
            for c in per_run
        ],
    }
    (out / "export.json").write_text(json.dumps(summary, indent=1, **TEXT) + "\n", encoding="utf-8")
    return summary
