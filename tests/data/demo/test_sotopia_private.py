"""SOTOPIA: each agent's values and secret (shown to itself, never to the partner), DEMO's
end marker, and SOTOPIA-hard by name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dialogbench.data.demo.registry import load_demo
from dialogbench.data.demo.sotopia import HARD_ENVIRONMENTS, load_sotopia
from dialogbench.data.errors import DataError
from dialogbench.tracks.demo import interaction_prompts as ip
from dialogbench.tracks.demo.interaction import parse_turn

FIXTURES = Path(__file__).parent / "fixtures"


def test_each_agent_sees_its_own_secret_only() -> None:
    episode = load_sotopia(FIXTURES / "sotopia").episodes[0]
    rosa, kai = episode.participants
    assert rosa.secret and "licensing exam" in rosa.secret
    me = ip.agent_messages(episode, 0, [])[1]["content"]
    other = ip.agent_messages(episode, 1, [])[1]["content"]
    assert rosa.secret in me and rosa.secret not in other
    if kai.secret:
        assert kai.secret in other and kai.secret not in me
    judge = ip.judge_context(episode)
    assert rosa.secret in judge  # the judge scores secret keeping, so it knows them all
    assert "Your secret (the other person does not know it): " in me


def test_demo_end_marker_is_recognised() -> None:
    assert parse_turn('{"person": "Ana", "content": "*ENDING*"}', "Ana") == (
        parse_turn('{"person": "Ana", "end": true}', "Ana")
    )
    last = parse_turn('{"person": "Ana", "content": "Bye then. *ENDING*"}', "Ana")
    assert last.end and last.content == "Bye then."
    assert parse_turn("We are done here. *ENDING*", "Ana").end  # as DEMO's code reads it
    with pytest.raises(ValueError, match="person"):
        parse_turn('{"person": "Bo", "content": "*ENDING*"}', "Ana")


def test_unknown_subset_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="subset"):
        load_sotopia(FIXTURES / "sotopia", "easy")


def test_real_secrets_and_the_hard_subset(sotopia_dir: Path) -> None:
    everything = load_sotopia(sotopia_dir)
    agents = [
        json.loads(x) for x in (sotopia_dir / "agent_profiles.jsonl").read_text().splitlines()
    ]
    assert sum(1 for a in agents if a.get("secret")) == 40  # every SOTOPIA agent has one
    people = {p.name: p for e in everything.episodes for p in e.participants}
    assert all(p.secret and p.values for p in people.values())
    envs = [
        json.loads(x) for x in (sotopia_dir / "environment_profiles.jsonl").read_text().splitlines()
    ]
    secret_goals = [g for e in envs for g in e["agent_goals"] if "secret" in g.lower()]
    secret_envs = {
        e["env_id"] for e in envs if any("secret" in g.lower() for g in e["agent_goals"])
    }
    assert (len(secret_goals), len(secret_envs)) == (5, 4)
    assert sum(1 for e in everything.episodes if "secret" in " ".join(e.goals).lower()) == 20
    hard = load_demo("sotopia:hard")
    assert hard.name == "sotopia:hard" and len(hard.episodes) == 70  # 14 scenarios x 5 pairs
    assert {e.source.rsplit("(env ", 1)[1].rstrip(")") for e in hard.episodes} == set(
        HARD_ENVIRONMENTS.values()
    )
    with pytest.raises(DataError, match="split"):
        load_demo("sotopia:medium")
