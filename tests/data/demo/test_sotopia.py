"""SOTOPIA adapter: episodes from combos, familiarity table, background, real counts."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from dialogbench.data.demo.sotopia import RELATIONSHIPS, load_sotopia, strip_tags
from dialogbench.data.errors import DataError

FIXTURES = Path(__file__).parent / "fixtures"


def test_fixture_episodes() -> None:
    demo = load_sotopia(FIXTURES / "sotopia")
    vet, bus = demo.episodes
    assert vet.id == "C1" and vet.lang == "en"
    assert vet.scene.relationship == "acquaintances" and vet.scene.familiarity == 4
    assert vet.goals[0] == (
        "Make sure the dog goes to a responsible home "
        "(Extra information: the dog needs daily walks)"
    )
    rosa, kai = vet.participants
    assert (rosa.name, rosa.gender, rosa.age, rosa.occupation) == (
        "Rosa Lindqvist",
        "female",
        "adulthood",
        "Veterinarian",
    )
    assert rosa.background == (
        "Rosa Lindqvist is a 38-year-old female veterinarian. She/her pronouns. "
        "Rosa runs a small animal clinic and volunteers at the local shelter."
    )
    assert "licensing exam" not in (rosa.background or "")  # secrets stay out
    assert kai.gender is None and "nonbinary" in (kai.background or "")
    assert rosa.big_five["extraversion"] == "low"
    assert bus.scene.familiarity == 0 and bus.participants[0].name == "Kai Brennan"
    assert len(demo.warnings) == 1 and "stranger vs acquaintance" in demo.warnings[0]


def test_familiarity_table_matches_visibility() -> None:
    # DEMO shows the partner's background from 4; SOTOPIA shows the public profile from
    # acquaintance (code 2) on.
    for code, (_, _, familiarity) in RELATIONSHIPS.items():
        assert (familiarity >= 4) == (code >= 2)


def test_strip_tags_keeps_text() -> None:
    assert strip_tags("Win (<strategy_hint>Hint: be kind</strategy_hint>)") == "Win (Hint: be kind)"


def test_unknown_agent_is_an_error(tmp_path: Path) -> None:
    for file in (FIXTURES / "sotopia").iterdir():
        (tmp_path / file.name).write_text(file.read_text("utf-8"), "utf-8")
    combos = tmp_path / "env_agent_combo_storages.jsonl"
    combos.write_text(json.dumps({"combo_id": "C9", "env_id": "E1", "agent_ids": ["A1", "ZZ"]}))
    with pytest.raises(DataError) as err:
        load_sotopia(tmp_path)
    assert err.value.field == "agent_ids" and "ZZ" in err.value.problem


def test_real_episodes(sotopia_dir: Path) -> None:
    demo = load_sotopia(sotopia_dir)
    assert len(demo.episodes) == 450
    agents = {
        f"{a['first_name']} {a['last_name']}"
        for a in map(json.loads, (sotopia_dir / "agent_profiles.jsonl").read_text().splitlines())
    }
    assert len(agents) == 40
    assert all({p.name for p in e.participants} <= agents for e in demo.episodes)
    assert len({e.id for e in demo.episodes}) == 450
    assert Counter(e.scene.relationship for e in demo.episodes) == {
        "friends": 230,
        "strangers": 125,
        "acquaintances": 50,
        "romantic partners": 25,
        "know each other by name": 20,
    }
    assert not any("<" in g for e in demo.episodes for g in e.goals)
    assert any("10 episodes" in w for w in demo.warnings)
