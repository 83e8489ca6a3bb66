"""Finished DEMO runs (awareness and interaction, against the golden loopback model) on a
small hand-written DEMO release, shared by the export and LoRA tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dialogbench.data.demo.release import load_release
from dialogbench.runner import run_track
from dialogbench.runner.roles import RoleSpec
from dialogbench.testing.chatserver import ChatServer
from dialogbench.tracks.demo.awareness import AWARENESS, AwarenessConfig
from dialogbench.tracks.demo.interaction import (
    INTERACTION,
    InteractionConfig,
)
from golden.cases import golden_reply

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
