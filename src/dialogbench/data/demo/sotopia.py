"""SOTOPIA (Zhou, Zhu et al., ICLR 2024) profiles as DEMO interaction episodes.

`env_agent_combo_storages.jsonl` pairs an environment with two agents (450 combos: the
SOTOPIA benchmark's 90 scenarios x 5 agent pairs); each becomes one `Episode` (lang "en",
id = combo_id):

- scene: `topic` is the environment's `scenario`; `relationship` and `familiarity` come
  from the environment's relationship type (the one SOTOPIA plays the episode with), by
  `RELATIONSHIPS`; time, location and medium are not given.
- goals: the environment's `agent_goals`, with SOTOPIA's markup tags (`<extra_info>`,
  `<strategy_hint>`, `<clarification_hint>`) removed and their text kept.
- participants: the two agent profiles: full name, gender (Man/Woman -> male/female;
  Nonbinary is left out of `gender` and kept in the background), age -> AGE_BANDS,
  occupation, Big Five (high/low) and a `background` composed from the public profile:
  age, gender, occupation, pronouns and `public_info`. Personality, values and secrets
  are not in the background (SOTOPIA never shows secrets, and shows personality only to
  friends and closer): they go to `values` (personality_and_values, moral values,
  Schwartz values, decision-making style) and `secret`, which each agent is shown about
  itself only (as SOTOPIA shows an agent its own full profile) and the judge about both.

Subsets (`sotopia:hard`): `hard` is SOTOPIA-hard, the 14 scenarios SOTOPIA's benchmark runs
with `--task hard` (its EnvironmentList 01HAK34YPB1H1RWXQDASDKHSNS, read by
`sotopia/cli/benchmark/benchmark.py`; the DEMO paper's out-of-domain test, section 4.3),
each with its 5 agent pairs of the benchmark set: 70 episodes. `all` (the default) is the
450. The list lives in SOTOPIA's database dump, not in its profile files, so its ids are
written out here (`HARD_ENVIRONMENTS`).

Familiarity: DEMO shows a participant the partner's background when familiarity >= 4.
SOTOPIA shows strangers nothing of the partner, people who know each other by name only
the name, and acquaintances and closer the public profile (what our background holds).
The table sends stranger and know-by-name below 4 and acquaintance and closer to 4 or more,
so both rules reveal the same; the values follow DEMO's scale descriptions.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

from dialogbench.data.demo import labels
from dialogbench.data.demo.labels import age_band, parse_big_five
from dialogbench.data.demo.model import DemoSet, Episode, Persona, Scene
from dialogbench.data.errors import DataError
from dialogbench.data.io import read_jsonl, require_fields, sha256_files

LICENCE = "CC BY-SA 4.0 (SOTOPIA, github.com/sotopia-lab)"
FILES = {
    "agents": "agent_profiles.jsonl",
    "environments": "environment_profiles.jsonl",
    "relationships": "relationship_profiles.jsonl",
    "combos": "env_agent_combo_storages.jsonl",
}

RELATIONSHIPS: dict[int, tuple[str, str, int]] = {
    0: ("stranger", "strangers", 0),
    1: ("know_by_name", "know each other by name", 2),
    2: ("acquaintance", "acquaintances", 4),
    3: ("friend", "friends", 6),
    4: ("romantic_relationship", "romantic partners", 8),
    5: ("family_member", "family members", 10),
}
"""SOTOPIA relationship code -> (its name, the relationship text, DEMO familiarity 0-10).

0 strangers; 2 "heard of each other but don't know each other"; 4 "met multiple times,
slightly familiar"; 6 "know each other's background"; 8 "stay together"; 10 "close, for
many years" (DEMO's scale)."""

GENDER_WORDS = {"man": "male", "woman": "female", "nonbinary": "nonbinary"}
"""How the background describes each SOTOPIA gender (as SOTOPIA's own bios do)."""
GENDERS = {word: g for word, g in GENDER_WORDS.items() if g in labels.GENDERS}
"""The SOTOPIA genders that have a DEMO gender label."""
_TAG = re.compile(r"</?[a-z_]+>")

HARD_ENVIRONMENTS: dict[str, str] = {
    "01H7VFHNV13MHN97GAH73E3KM8": "revenge_plot",
    "01H7VFHN5WVC5HKKVBHZBA553R": "game_winning",
    "01H7VFHN9W0WAFZCBT09PKJJNK": "share_stuff",
    "01H7VFHPDZVVCDZR3AARA547CY": "donate_funds",
    "01H7VFHPQQQY6H4DNC6NBQ8XTG": "craigslist_bargains_00000",
    "01H7VFHN7WJK7VWVRZZTQ6DX9T": "join_trip",
    "01H7VFHPS5WJW2694R1MNC8JFY": "craigslist_bargains_00002",
    "01H7VFHNN7XTR99319DS8KZCQM": "share_blanket",
    "01H7VFHQ11NAMZS4A2RDGDB01V": "craigslist_bargains_00007",
    "01H7VFHPSWGDGEYRP63H2DJKV0": "craigslist_bargains_00003",
    "01H7VFHNF4G18PC9JHGRC8A1R6": "unwelcome_guest",
    "01H7VFHNNYH3W0VRWVY178K2TK": "sleep_arrangement",
    "01H7VFHP8AN5643B0NR0NP00VE": "divide_items",
    "01H7VFHN7A1ZX5KSMT2YN9RXC4": "sell_item",
}
"""SOTOPIA-hard: environment id -> codename (module docstring)."""
SUBSETS = ("all", "hard")


def load_sotopia(folder: Path, subset: str = "all") -> DemoSet:
    """SOTOPIA's benchmark combos in `folder` as interaction episodes (`subset` "hard":
    SOTOPIA-hard's 70 only)."""
    if subset not in SUBSETS:
        raise DataError(folder, f"unknown SOTOPIA subset {subset!r}", fix=f"use one of {SUBSETS}")
    paths = {key: folder / name for key, name in FILES.items()}
    for path in paths.values():
        if not path.exists():
            raise DataError(
                path, "file not found", fix="the SOTOPIA folder needs " + ", ".join(FILES.values())
            )
    agents = _by_id(paths["agents"], "agent_id")
    environments = _by_id(paths["environments"], "env_id")
    pairs = {
        frozenset((r["agent1_id"], r["agent2_id"])): r
        for r in _by_id(paths["relationships"], "relationship_id").values()
    }
    episodes: list[Episode] = []
    differ: Counter[str] = Counter()
    for lineno, combo in read_jsonl(paths["combos"]):
        record = f"line {lineno}"
        require_fields(combo, ("combo_id", "env_id", "agent_ids"), paths["combos"], record)
        record = f"line {lineno} (combo_id {combo['combo_id']})"
        env = environments.get(combo["env_id"])
        if env is None:
            named = f"environment {combo['env_id']!r}"
            raise _unknown(paths["combos"], record, "env_id", named, "environments")
        ids = combo["agent_ids"]
        if not (isinstance(ids, list) and len(ids) == 2):
            raise DataError(
                paths["combos"],
                "expected two agent ids",
                record=record,
                field="agent_ids",
                fix="give [agent1_id, agent2_id]",
            )
        for agent_id in ids:
            if agent_id not in agents:
                raise _unknown(
                    paths["combos"], record, "agent_ids", f"agent {agent_id!r}", "agents"
                )
        if subset == "hard" and combo["env_id"] not in HARD_ENVIRONMENTS:
            continue
        code = _relationship(env, paths["environments"])
        pair = pairs.get(frozenset(ids))
        if pair is not None and _relationship(pair, paths["relationships"]) != code:
            differ[
                f"{RELATIONSHIPS[code][0]} vs {RELATIONSHIPS[int(pair['relationship'])][0]}"
            ] += 1
        episodes.append(_episode(combo, env, [agents[i] for i in ids], code))
    warnings = [
        f"SOTOPIA: {n} episodes whose environment relationship differs from the agents' "
        f"relationship profile ({what}); the environment's is used, as SOTOPIA does"
        for what, n in sorted(differ.items())
    ]
    if subset == "hard" and not episodes:
        raise DataError(
            paths["combos"],
            "none of SOTOPIA-hard's 14 environments is in the benchmark combos",
            fix="use SOTOPIA's own env_agent_combo_storages.jsonl",
        )
    return DemoSet(
        name="sotopia" if subset == "all" else f"sotopia:{subset}",
        episodes=episodes,
        sha256=sha256_files(paths.values(), root=folder),
        source=f"SOTOPIA profiles ({folder})",
        warnings=warnings,
        licence=LICENCE,
    )


def _unknown(path: Path, record: str, field: str, named: str, file: str) -> DataError:
    """A combo naming an id (`named`: "agent 'a1'") that `FILES[file]` does not hold."""
    return DataError(
        path, f"no {named}", record=record, field=field, fix=f"the id must be in {FILES[file]}"
    )


def strip_tags(text: str) -> str:
    """SOTOPIA's `<extra_info>`-style tags removed, their text kept."""
    return " ".join(_TAG.sub("", text).split())


def _episode(
    combo: dict[str, Any], env: dict[str, Any], people: list[dict[str, Any]], code: int
) -> Episode:
    _, relationship, familiarity = RELATIONSHIPS[code]
    goals = env.get("agent_goals")
    if not (isinstance(goals, list) and len(goals) == 2):
        raise DataError(
            FILES["environments"],
            "expected two agent goals",
            record=f"env_id {env['env_id']}",
            field="agent_goals",
            fix="give one goal per agent",
        )
    return Episode(
        id=str(combo["combo_id"]),
        lang="en",
        scene=Scene(
            topic=strip_tags(str(env["scenario"])),
            relationship=relationship,
            familiarity=familiarity,
        ),
        participants=(_persona(people[0]), _persona(people[1])),
        goals=(strip_tags(str(goals[0])), strip_tags(str(goals[1]))),
        source=f"SOTOPIA combo {combo['combo_id']} (env {env.get('codename', env['env_id'])})",
    )


def _persona(agent: dict[str, Any]) -> Persona:
    require_fields(agent, ["first_name"], Path(FILES["agents"]), f"agent_id {agent['agent_id']}")
    name = f"{agent['first_name']} {agent.get('last_name', '')}".strip()
    gender_word = str(agent.get("gender") or "").strip().lower()
    age = agent.get("age") if isinstance(agent.get("age"), int) else None
    occupation = str(agent.get("occupation") or "").strip() or None
    traits, _ = parse_big_five(_big_five_pairs(str(agent.get("big_five") or "")))
    words = [f"{age}-year-old" if age is not None else "", GENDER_WORDS.get(gender_word, "")]
    words.append(occupation.lower() if occupation else "person")
    sentences = [f"{name} is a {' '.join(w for w in words if w)}."]
    if agent.get("gender_pronoun"):
        sentences.append(f"{agent['gender_pronoun']} pronouns.")
    if agent.get("public_info"):
        sentences.append(str(agent["public_info"]))
    return Persona(
        name=name,
        gender=GENDERS.get(gender_word),
        age=age_band(age) if age is not None else None,
        occupation=occupation,
        big_five=traits,  # type: ignore[arg-type]
        background=" ".join(" ".join(sentences).split()),
        values=_values(agent),
        secret=str(agent.get("secret") or "").strip() or None,
    )


def _values(agent: dict[str, Any]) -> str | None:
    """An agent's personality and values as one text (SOTOPIA's own fields, kept)."""
    parts = []
    for key, label in (
        ("moral_values", "Moral values"),
        ("schwartz_personal_values", "Schwartz values"),
    ):
        value = agent.get(key)
        if isinstance(value, list) and value:
            parts.append(f"{label}: {', '.join(str(v).strip() for v in value)}.")
    style = str(agent.get("decision_making_style") or "").strip()
    if style:
        parts.append(f"Decision-making style: {style}.")
    about = str(agent.get("personality_and_values") or "").strip()
    if about:
        parts.append(about)
    return " ".join(parts) or None


def _big_five_pairs(text: str) -> list[list[str]]:
    """`"Openness to Experience - High; ..."` -> `[["Openness to Experience", "High"], ...]`."""
    pairs = []
    for part in text.split(";"):
        if " - " in part:
            trait, level = part.rsplit(" - ", 1)
            pairs.append([trait.strip(), level.strip()])
    return pairs


def _relationship(obj: dict[str, Any], path: Path) -> int:
    value = obj.get("relationship")
    try:
        code = int(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        code = -1
    if code not in RELATIONSHIPS:
        raise DataError(
            path,
            f"unknown relationship {value!r}",
            record=str(obj.get("env_id") or obj.get("relationship_id")),
            field="relationship",
            fix="use SOTOPIA's codes 0 (stranger) to 5 (family member)",
        )
    return code


def _by_id(path: Path, key: str) -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    for lineno, obj in read_jsonl(path):
        require_fields(obj, [key], path, f"line {lineno}")
        rows[str(obj[key])] = obj
    return rows
