"""demo-interaction --rubric: SOTOPIA's seven dimensions per agent (rubric as data), out of
range replies counted unscored, bad rubric files named; against a scripted loopback server."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from dialogbench.data.demo.model import Episode, Persona, Scene
from dialogbench.data.errors import DataError
from dialogbench.judging.prompts import FRAMINGS
from dialogbench.judging.rubric_files import built_in, load_rubric_file
from dialogbench.runner import RoleSpec, run_track
from dialogbench.testing import ChatServer
from dialogbench.tracks.demo.interaction import (
    INTERACTION,
    InteractionConfig,
    as_demo_set,
)

JUDGE_SYSTEMS = {f.system for f in FRAMINGS.values()}
SOTOPIA = load_rubric_file("sotopia")
RANGES = {d.name: (d.low, d.high) for d in SOTOPIA.dimensions}


def episode(eid: str) -> Episode:
    return Episode(
        id=eid,
        lang="en",
        scene=Scene(topic="sharing a blanket", relationship="friends", familiarity=6),
        participants=(
            Persona(name="Ana", secret="ANA-SECRET", values="ANA-VALUES"),
            Persona(name="Bo", secret="BO-SECRET"),
        ),
        goals=("keep the blanket", "get the blanket"),
    )


class Scripted:
    """Agents: one turn each, then the end marker. Judge: p1 gets the top of every range,
    p2 the bottom; for episode "bad" the secret score is out of range every time."""

    def __init__(self) -> None:
        self.judge_prompts: list[str] = []

    def __call__(self, body: dict[str, Any]) -> str:
        system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
        if system in JUDGE_SYSTEMS:
            prompt = body["messages"][1]["content"]
            self.judge_prompts.append(prompt)
            scores: dict[str, Any] = {"reason": "r"}
            for dim, (low, high) in RANGES.items():
                scores[f"p1_{dim}"], scores[f"p2_{dim}"] = high, low
            if "BAD-EPISODE" in prompt:
                scores["p1_secret"] = 3  # SOTOPIA's secret is -10..0
            return json.dumps(scores)
        name = re.search(r'\{"person": "(\w+)", "content"', user)
        assert name is not None
        turns = re.findall(r"^Turn \d+ - ", user, re.MULTILINE)
        if len(turns) >= 2:
            return json.dumps({"person": name.group(1), "content": "*ENDING*"})  # DEMO's marker
        return json.dumps({"person": name.group(1), "content": f"hello from {name.group(1)}"})


def test_sotopia_rubric_scores_each_agent(tmp_path: Path) -> None:
    good, bad = episode("ok"), episode("bad")
    bad = bad.model_copy(update={"goals": ("keep the blanket BAD-EPISODE", "get the blanket")})
    script = Scripted()
    with ChatServer(reply=script) as srv:
        model = RoleSpec("openai-compatible/scripted", srv.base_url)
        config = InteractionConfig(rubric="sotopia", n_boot=100, max_fixes=1, max_turns=6)
        result = run_track(
            INTERACTION, as_demo_set([good, bad]), tmp_path / "run", config, {"model": model}
        ).result()
    assert "ANA-SECRET" in script.judge_prompts[0] and "BO-SECRET" in script.judge_prompts[0]
    rows = {
        r["id"]: r
        for r in map(json.loads, (tmp_path / "run" / "items.jsonl").read_text().splitlines())
    }
    ok = rows["ok"]
    assert ok["ending"] == "end_marker" and ok["n_turns"] == 2
    assert ok["agents"]["p1"]["secret"] == 0 and ok["agents"]["p2"]["secret"] == -10
    assert ok["agents_counted"] == ["p1", "p2"]  # self-play: both agents are the model
    assert ok["secret"] == -5.0 and ok["goal"] == 5.0 and ok["relationship"] == 0.0
    means = [(RANGES[d][0] + RANGES[d][1]) / 2 for d in SOTOPIA.names]
    assert ok["overall"] == pytest.approx(sum(means) / 7)
    # out of range twice (the reply and its one fix): unscored and counted, never clipped
    assert rows["bad"]["judged"] is False and rows["bad"]["overall"] is None
    assert "secret" in rows["bad"]["judge_error"]
    assert result.counts["all"]["judge_unscored"] == 1
    en = result.summary["en"]
    assert list(en) == [*SOTOPIA.names, "overall"]
    assert en["secret"].value == -5.0 and en["secret"].n == 1
    assert math.isclose(en["overall"].value, sum(means) / 7)


def test_rubric_files_are_checked(tmp_path: Path) -> None:
    assert "sotopia" in built_in()
    assert [d.short for d in SOTOPIA.dimensions] == [
        "SOC",
        "SEC",
        "FIN",
        "REL",
        "KNO",
        "GOA",
        "BEL",
    ]
    assert [(d.low, d.high) for d in SOTOPIA.dimensions] == [
        (-10, 0),
        (-10, 0),
        (-5, 5),
        (-5, 5),
        (0, 10),
        (0, 10),
        (0, 10),
    ]
    bad = tmp_path / "mine.json"
    bad.write_text(
        json.dumps(
            {
                "name": "mine",
                "instructions": {"en": "x"},
                "dimensions": [
                    {"name": "warmth", "low": 5, "high": 1, "criteria": {"en": "how warm"}}
                ],
            }
        )
    )
    with pytest.raises(DataError, match="low"):
        load_rubric_file(str(bad))
    bad.write_text("{")
    with pytest.raises(DataError, match="not JSON"):
        load_rubric_file(str(bad))
    with pytest.raises(DataError, match="no such rubric"):
        load_rubric_file(str(tmp_path / "absent.json"))
    with pytest.raises(DataError, match="no such rubric"):
        InteractionConfig(rubric="nope").rubric_file()


def test_own_rubric_file(tmp_path: Path) -> None:
    mine = tmp_path / "warmth.json"
    mine.write_text(
        json.dumps(
            {
                "name": "warmth",
                "overall": "mean",
                "instructions": {"en": "Judge the warmth."},
                "dimensions": [
                    {"name": "warmth", "low": 1, "high": 5, "criteria": {"en": "how warm"}}
                ],
            }
        )
    )
    spec = load_rubric_file(str(mine))
    rubric = spec.rubric("zh")  # no Chinese text: English is used
    assert spec.fell_back("zh") and rubric.lang == "en"
    assert [(d.name, d.low, d.high) for d in rubric.dimensions] == [("warmth", 1, 5)]
