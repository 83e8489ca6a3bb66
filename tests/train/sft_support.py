"""Finished DEMO runs (awareness and interaction, against the golden loopback model) on a
small hand-written DEMO release, shared by the export and LoRA tests."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from dialogbench.data.demo.release import load_release
from dialogbench.judging.prompts import FRAMINGS
from dialogbench.judging.rubric_files import load_rubric_file
from dialogbench.runner import run_track
from dialogbench.runner.roles import RoleSpec
from dialogbench.testing.chatserver import ChatServer
from dialogbench.tracks.demo.awareness import AWARENESS, AwarenessConfig
from dialogbench.tracks.demo.interaction import (
    INTERACTION,
    InteractionConfig,
)
from golden.cases import _PERSON, golden_reply

PEOPLE = [("Ann", "Ben"), ("Cleo", "Dev"), ("Eli", "Fay"), ("Gus", "Hana")]
SECRET = "keep the old bike without telling anyone"


def write_release(folder: Path) -> Path:
    """A small DEMO release by hand: four dialogues' items and episodes (English)."""
    folder.mkdir(parents=True)
    items, episodes = [], []
    for n, (a, b) in enumerate(PEOPLE):
        did = f"d{n}"
        transcript = f"{a}: Shall we trade?\n{b}: Only if the price is right.\n{a}: Deal."
        answers = {
            "goal": {
                "goal1": "sell the bike",
                "goal2": "buy cheaply",
                "goal_completion": 7,
                "reason": "they agreed",
            },
            "persona": {
                "participant1": {"name": a, "gender": "female"},
                "participant2": {"name": b, "gender": "male"},
            },
            "scene": {"topic": "a bike", "familiarity": 3, "talkway": "face-to-face"},
            "utterance": {
                "person": b,
                "content": "Only if the price is right.",
                "sentiment": "neutral",
                "emotion": "calm",
            },
        }
        for task, answer in answers.items():
            items.append(
                {
                    "type": task,
                    "dialogue_hs": transcript,
                    "instruction": "x",
                    "answer": answer,
                    "dataset_id": did,
                }
            )
        episodes.append(
            {
                "uuid": f"e{n}",
                "topic": "a bike",
                "goal": ["sell the bike", SECRET],
                "person1": {"name": a, "background": f"{a} repairs bikes."},
                "person2": {"name": b, "background": f"{b} is a student."},
                "combine": {
                    "time": "noon",
                    "location": "a market",
                    "talkway": "face-to-face",
                    "relationship": "strangers",
                    "familiarity": "1",
                },
            }
        )
    (folder / "element_awareness_en.json").write_text(json.dumps(items))
    (folder / "dialogue_agent_interaction_en.jsonl").write_text(
        "".join(json.dumps(e) + "\n" for e in episodes)
    )
    return folder


def finished_runs(tmp_path: Path) -> tuple[Path, Path, list[Any]]:
    """Awareness and interaction runs in `tmp_path` (and every request they sent); set
    DIALOGBENCH_CACHE first."""
    data = load_release(write_release(tmp_path / "demo"))
    with ChatServer(reply=golden_reply) as srv:
        spec = RoleSpec("openai-compatible/golden", srv.base_url)
        run_track(AWARENESS, data, tmp_path / "aw", AwarenessConfig(n_boot=20), {"model": spec})
        run_track(
            INTERACTION,
            data,
            tmp_path / "int",
            InteractionConfig(n_boot=20, max_turns=4),
            {"model": spec},
        )
        requests = srv.requests
    return tmp_path / "aw", tmp_path / "int", requests


ZH_PEOPLE = [("小明", "王芳"), ("小红", "李雷")]
SOTOPIA_RANGES = {d.name: (d.low, d.high) for d in load_rubric_file("sotopia").dimensions}
_TURN = re.compile(r"^Turn \d+ - |^第 \d+ 轮 - ", re.MULTILINE)


def write_zh_episodes(folder: Path) -> None:
    """Two Chinese episodes beside a release's English ones."""
    episodes = [
        {
            "uuid": f"z{n}",
            "topic": "一辆自行车",
            "goal": ["卖掉自行车", "便宜买下"],
            "person1": {"name": a, "background": f"{a}修自行车。"},
            "person2": {"name": b, "background": f"{b}是一个学生。"},
            "combine": {
                "time": "中午",
                "location": "市场",
                "talkway": "面对面",
                "relationship": "陌生人",
                "familiarity": "1",
            },
        }
        for n, (a, b) in enumerate(ZH_PEOPLE)
    ]
    (folder / "dialogue_agent_interaction_zh.jsonl").write_text(
        "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in episodes), encoding="utf-8"
    )


def sotopia_reply(body: dict[str, Any]) -> str:
    """Agents: participant 1 speaks, participant 2 answers, participant 1 ends (the end
    marker). Judge (SOTOPIA, per agent): participant 1 the top of every range, 2 the bottom."""
    messages = body["messages"]
    if messages[0]["content"] in {f.system for f in FRAMINGS.values()}:
        scores: dict[str, Any] = {"reason": "r"}
        for dim, (low, high) in SOTOPIA_RANGES.items():
            scores[f"p1_{dim}"], scores[f"p2_{dim}"] = high, low
        return json.dumps(scores)
    user = messages[-1]["content"]
    person = _PERSON.search(user)
    assert person is not None
    name = json.loads(person.group(1))
    if len(_TURN.findall(user)) >= 2:
        return json.dumps({"person": name, "end": True}, ensure_ascii=False)
    said = "这辆自行车多少钱？" if "轮" in user else f"hello from {name}"
    return json.dumps({"person": name, "content": said}, ensure_ascii=False)


def sotopia_run(tmp_path: Path) -> Path:
    """A self-play demo-interaction run judged with the SOTOPIA rubric on the release's four
    English and two Chinese episodes; set DIALOGBENCH_CACHE first."""
    folder = write_release(tmp_path / "demo")
    write_zh_episodes(folder)
    data = load_release(folder)
    with ChatServer(reply=sotopia_reply) as srv:
        spec = RoleSpec("openai-compatible/scripted", srv.base_url)
        config = InteractionConfig(n_boot=20, max_turns=6, rubric="sotopia")
        run_track(INTERACTION, data, tmp_path / "sotopia", config, {"model": spec})
    return tmp_path / "sotopia"
