"""`dialogbench export conflicts BUILD_DIR`: the conflict step's verdicts, for people to check.

The paper has two people and the LLM judge the same combinations (scene, two personas,
two goals) by the same criteria, reasonable or not, and reports Cohen's kappa between
each pair (0.85 between the people; 0.65 and 0.79 between each person and the LLM). This
writes a `build demo` folder's verdicts as a ratings file (`judging.ratings`): per
combination, the build's model as a judge (1: reasonable, 0: not) and a blank line per
person, dimension `conflict`; and beside it what each combination showed the model (the
same question, so people follow the same procedure). Fill in the blanks, then
`dialogbench agreement FILE` prints the kappas (Table 2's shape). A combination whose
verdict never came (a failed or unusable call, or one still waiting on its goal or
personas) has nothing to compare and is left out, counted.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dialogbench.build.demo import DemoBuild, conflict_prompt
from dialogbench.data.errors import DataError
from dialogbench.judging.ratings import Rating
from dialogbench.lang import Lang
from dialogbench.runner.record import RunFolder

DIMENSION = "conflict"


def _values(folder: RunFolder, stage: str) -> dict[str, dict[str, Any]]:
    """A stage's saved units whose reply was usable: key -> value."""
    return {
        key: record.rows[0]["value"]
        for key, record in folder.read(stage).items()
        if record.rows and record.rows[0].get("status") in ("ok", "rejected")
    }


def conflict_ratings(
    build: Path, humans: Sequence[str]
) -> tuple[list[Rating], list[dict[str, Any]], Counter[str]]:
    """(ratings, what each combination showed, the verdicts left out by status)."""
    folder = RunFolder(build)
    manifest = folder.manifest()
    if (
        manifest is None
        or manifest.track != DemoBuild.name
        or not (folder.parts / "conflict.jsonl").exists()
    ):
        raise DataError(
            build,
            "no conflict verdicts here",
            fix="give the folder `dialogbench build demo --out` wrote, once its conflict step ran",
        )
    judge = str(manifest.roles.get("model", {}).get("name") or "model")
    if judge in humans or len(set(humans)) != len(humans):
        raise ValueError(f"the people's names must differ from each other and from {judge!r}")
    goals, personas = _values(folder, "distill"), _values(folder, "persona")
    ratings: list[Rating] = []
    shown: list[dict[str, Any]] = []
    left_out: Counter[str] = Counter()
    for key, record in sorted(folder.read("conflict").items()):
        entry: dict[str, Any] = record.rows[0] if record.rows else {"status": "failed"}
        if entry["status"] not in ("ok", "rejected"):
            left_out[entry["status"]] += 1
            continue
        value = entry["value"]
        a, b = (personas[k] for k in value["personas"])
        lang: Lang = "zh" if value["lang"] == "zh" else "en"
        messages = conflict_prompt(lang, goals[value["goal"]], (a, b))
        ratings.append(Rating(key, judge, DIMENSION, 1.0 if value["reasonable"] else 0.0, "judge"))
        ratings += [Rating(key, h, DIMENSION, None, "human") for h in humans]
        shown.append(
            {
                "item": key,
                "lang": value["lang"],
                "question": messages[-1]["content"],
                "verdict": {"reasonable": value["reasonable"], "reason": value["reason"]},
            }
        )
    return ratings, shown, left_out


def write_shown(path: Path, shown: Sequence[dict[str, Any]]) -> None:
    """What each combination showed, one JSON object a line (UTF-8, unescaped)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(s, ensure_ascii=False) + "\n" for s in shown), "utf-8")
