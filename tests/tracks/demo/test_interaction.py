"""DEMO dialogue agent interaction: the familiarity rule, the agent and judge prompts, turn
parsing, full runs against scripted loopback servers (end marker, a fixed malformed turn,
a failed episode, the turn cap, an unscored verdict, resume, a fixed partner), and short
runs of the real embedded model and on SOTOPIA episodes."""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from dialogbench.data.demo.model import DemoSet, Episode, Persona, Scene
from dialogbench.judging.prompts import FRAMINGS, single_messages
from dialogbench.models import Model, ModelSpec
from dialogbench.models.embedded import unavailable
from dialogbench.models.model import RETRY_SEED_STEP
from dialogbench.runner import RoleSpec, run_track
from dialogbench.testing import ChatServer, UnusableFirst
from dialogbench.testing.chatserver import Fault, status
from dialogbench.tracks.demo import interaction_prompts as ip
from dialogbench.tracks.demo.interaction import (
    INTERACTION,
    InteractionConfig,
    InteractionResult,
    as_demo_set,
    parse_turn,
    plan_runs,
)
from tests_support_unusable import run_twice


def episode(
    eid: str,
    names: tuple[str, str],
    lang: str = "en",
    familiarity: int | None = 5,
    goals: tuple[str, str] = ("get a loan of 200", "keep the savings intact"),
) -> Episode:
    return Episode.model_validate(
        {
            "id": eid,
            "lang": lang,
            "scene": Scene(
                time="Saturday evening",
                location="a noisy cafe",
                medium="face-to-face",
                topic="money",
                relationship="old classmates",
                familiarity=familiarity,
            ),
            "participants": (
                Persona(name=names[0], gender="female", background=f"{names[0]} BACKGROUND-ONE"),
                Persona(
                    name=names[1],
                    occupation="pilot",
                    big_five={"openness": "high"},
                    background=f"{names[1]} BACKGROUND-TWO",
                ),
            ),
            "goals": goals,
            "source": "test",
        }
    )


# -- the familiarity rule and the prompts ---------------------------------------------------


def test_partner_profile_needs_familiarity_four() -> None:
    assert ip.knows_partner(Scene(familiarity=10))  # DEMO's first-digit parse would read 1
    assert ip.knows_partner(Scene(familiarity=4))
    assert not ip.knows_partner(Scene(familiarity=3))
    assert not ip.knows_partner(Scene(familiarity=0))
    assert not ip.knows_partner(Scene())  # unstated: hidden


def _user(messages: list[Any]) -> str:
    assert messages[0]["role"] == "system" and messages[1]["role"] == "user"
    return str(messages[1]["content"])


def judge_prompt(e: Episode, turns: list[tuple[str, str]]) -> list[Any]:
    """What `judge_episode`'s `Judge` sends: the transcript judged in the background's context."""
    rubric = ip.JUDGE_RUBRICS[e.lang]
    return single_messages(rubric, ip.transcript(e, turns), None, ip.judge_context(e))


def test_agent_prompt_shows_own_goal_only_and_partner_background_by_familiarity() -> None:
    goals = ("GOAL-OF-ANA", "GOAL-OF-BO")
    close = episode("e", ("Ana", "Bo"), familiarity=10, goals=goals)
    far = episode("e", ("Ana", "Bo"), familiarity=3, goals=goals)
    history = [("Ana", "Hi Bo, got a minute?")]
    for side in (0, 1):
        mine, theirs = goals[side], goals[1 - side]
        text = _user(ip.agent_messages(close, side, history))
        assert mine in text and theirs not in text  # the partner's goal is never shown
        assert ip.EN.partner_goal in text
        other = close.participants[1 - side]
        assert f"{other.name} BACKGROUND" in text  # familiarity 10: known
        hidden = _user(ip.agent_messages(far, side, history))
        assert f"{other.name} BACKGROUND" not in hidden and ip.EN.partner_unknown in hidden
        assert f"{close.participants[side].name} BACKGROUND" in hidden  # its own profile
        assert theirs not in hidden
    text = _user(ip.agent_messages(close, 1, history))
    assert "Turn 1 - Ana: Hi Bo, got a minute?" in text
    assert "Write turn 2, as Bo" in text
    assert '{"person": "Bo", "end": true}' in text
    assert "10 out of 10" in text and "face-to-face" in text and "old classmates" in text
    assert "Occupation: pilot" in text and "openness high" in text
    first = _user(ip.agent_messages(close, 0, []))
    assert ip.EN.no_history in first and "Write turn 1, as Ana" in first


def test_chinese_episode_gets_chinese_prompts() -> None:
    e = episode("z", ("李雷", "韩梅梅"), lang="zh", familiarity=2, goals=("借到钱", "不借钱"))
    text = _user(ip.agent_messages(e, 0, [("李雷", "你好")]))
    assert ip.ZH.agent_system == ip.agent_messages(e, 0, [])[0]["content"]
    assert "第 1 轮 - 李雷：你好" in text and "借到钱" in text and "不借钱" not in text
    assert ip.ZH.partner_unknown in text and "韩梅梅 BACKGROUND" not in text
    assert "性别：女" in text
    judge = judge_prompt(e, [("李雷", "你好")])
    assert judge[0]["content"] == FRAMINGS["zh"].system
    assert ip.JUDGE_RUBRICS["zh"].instructions in judge[1]["content"]
    assert "第 1 轮 - 李雷：你好" in judge[1]["content"] and "不借钱" in judge[1]["content"]
    assert not re.search(r"Score these|Reply with|The candidate", judge[1]["content"])


def test_judge_sees_both_goals_and_profiles_and_names_the_four_criteria() -> None:
    goals = ("GOAL-OF-ANA", "GOAL-OF-BO")
    e = episode("e", ("Ana", "Bo"), familiarity=0, goals=goals)
    text = _user(judge_prompt(e, [("Ana", "Hello."), ("Bo", "Hi.")]))
    assert all(g in text for g in goals)
    assert "Ana BACKGROUND-ONE" in text and "Bo BACKGROUND-TWO" in text
    assert "Turn 2 - Bo: Hi." in text
    for name in ("goal", "believability", "skillfulness", "realism"):
        assert f'"{name}"' in text
    assert not re.search(r"naturalness|coherence|smoothness", text)
    dims = {lang: [d.name for d in r.dimensions] for lang, r in ip.JUDGE_RUBRICS.items()}
    assert dims == {"en": list(ip.DIMENSIONS), "zh": list(ip.DIMENSIONS)}
    assert len(ip.PROMPT_SHA256) == 64


def test_parse_turn() -> None:
    said = parse_turn('Here:\n```json\n{"person": "bo ", "content": " Hi! "}\n```', "Bo")
    assert said.content == "Hi!" and not said.end
    assert parse_turn('{"end": true}', "Bo").end
    last = parse_turn('{"person": "Bo", "content": "Bye.", "end": true}', "Bo")
    assert last.end and last.content == "Bye."
    for bad, why in [
        ("Sure, I will say hello.", "no JSON"),
        ('{"person": "Ana", "content": "Hi"}', "this turn is Bo's"),
        ('{"person": "Bo"}', "content"),
        ('{"content": "Hi"}', "person"),
        ('{"person": "Bo", "end": "yes"}', "content"),
        ("[1, 2]", "not an object"),
    ]:
        with pytest.raises(ValueError, match=why):
            parse_turn(bad, "Bo")


def test_turns_are_constrained_by_default_only_for_the_embedded_model() -> None:
    def constrained(embedded_plays: bool, **kw: Any) -> bool:
        schema = InteractionConfig(**kw).agent_config(embedded_plays).json_schema
        return schema is not None

    assert constrained(True) is True  # unset: on when the embedded model plays a side
    assert constrained(False) is False
    assert constrained(True, constrain_turns=False) is False
    assert constrained(False, constrain_turns=True) is True


def test_runs_and_part_names() -> None:
    es = [episode("a", ("Ana", "Bo")), episode("b/1", ("Cy", "Di"))]
    assert [r.under_test for r in plan_runs(es, False, "both")] == ["both", "both"]
    assert [r.id for r in plan_runs(es, True, "p2")] == ["a", "b/1"]
    assert [r.id for r in plan_runs(es, True, "both")] == ["a@p1", "a@p2", "b/1@p1", "b/1@p2"]


def test_bad_configurations_fail_early(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="sides"):
        InteractionConfig(sides="both sides")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max-turns"):
        InteractionConfig(max_turns=0)
    e = episode("a", ("Ana", "Bo"))
    with pytest.raises(ValueError, match="needs a model"):
        run_track(INTERACTION, as_demo_set([e]), tmp_path, InteractionConfig())
    model = RoleSpec("openai-compatible/x")
    with pytest.raises(ValueError, match="unique"):
        run_track(INTERACTION, as_demo_set([e, e]), tmp_path, InteractionConfig(), {"model": model})
    with pytest.raises(ValueError, match="self-play"):
        run_track(
            INTERACTION,
            as_demo_set([e]),
            tmp_path,
            InteractionConfig(sides="self"),
            {"model": model, "partner": model},
        )
    assert not (tmp_path / "manifest.json").exists()


# -- against scripted servers ---------------------------------------------------------------

AGENT_SYSTEMS = {ip.EN.agent_system, ip.ZH.agent_system}
JUDGE_SYSTEMS = {f.system for f in FRAMINGS.values()}


def say(name: str, text: str, **extra: Any) -> str:
    return json.dumps({"person": name, "content": text, **extra}, ensure_ascii=False)


END = json.dumps({"end": True})

# speaker -> (turn number, is a retry) -> reply
Script = dict[str, Callable[[int, bool], str]]

SCRIPT: Script = {
    # e-end: three turns, the third is the end marker
    "Ana": lambda t, retry: END if t == 3 else say("Ana", f"Ana speaks at turn {t}."),
    "Bo": lambda t, retry: say("Bo", "I am not sure about that."),
    # e-fix: the first turn is prose, fixed on the retry; the second ends with last words
    "Cleo": lambda t, retry: say("Cleo", "Hello Dan.") if retry else "Sure! Hello Dan.",
    "Dan": lambda t, retry: say("Dan", "Bye then.", end=True),
    # e-broken (zh): always speaks for the other participant
    "李雷": lambda t, retry: say("韩梅梅", "你好"),
    "韩梅梅": lambda t, retry: say("韩梅梅", "你好"),
    # e-long (zh): never ends
    "王芳": lambda t, retry: say("王芳", f"第{t}句"),
    "张伟": lambda t, retry: say("张伟", f"第{t}句"),
    # e-zh: two turns, then the end
    "刘洋": lambda t, retry: END if t == 3 else say("刘洋", "我们聊聊吧"),
    "陈静": lambda t, retry: say("陈静", "好啊"),
}

Verdicts = dict[str, tuple[int, int, int, int] | None]
"""First participant's name -> the judge's four scores (None: no usable verdict)."""

VERDICTS: Verdicts = {
    "Ana": (8, 6, 7, 5),
    "Cleo": (4, 4, 4, 4),
    "王芳": None,  # no usable verdict, even after the corrections
    "刘洋": (6, 8, 6, 8),
}

_SPEAKER = re.compile(r"^## (?:You are |你是)(.+)$", re.MULTILINE)
_TURN_LINE = re.compile(r"^(?:Turn \d+ - |第 \d+ 轮 - )", re.MULTILINE)
_FIRST_PERSON = re.compile(r"^### (.+)$", re.MULTILINE)


class Scripted:
    """Agents answer from a script keyed by speaker; the judge from `VERDICTS`."""

    def __init__(
        self,
        script: Script = SCRIPT,
        verdicts: Verdicts = VERDICTS,
    ) -> None:
        self.script, self.verdicts = script, verdicts
        self.judged: list[str] = []

    def __call__(self, body: dict[str, Any]) -> str:
        messages = body["messages"]
        system, user = messages[0]["content"], messages[1]["content"]
        if system in AGENT_SYSTEMS:
            found = _SPEAKER.search(user)
            assert found is not None
            turn = len(_TURN_LINE.findall(user)) + 1
            return self.script[found.group(1)](turn, len(messages) > 2)
        assert system in JUDGE_SYSTEMS
        found = _FIRST_PERSON.search(user)
        assert found is not None
        first = found.group(1)
        self.judged.append(first)
        scores = self.verdicts[first]
        if scores is None:
            return "Looks fine to me."
        return json.dumps({"reason": "read it", **dict(zip(ip.DIMENSIONS, scores, strict=True))})


def five_episodes() -> list[Episode]:
    return [
        episode("e-end", ("Ana", "Bo")),
        episode("e-fix", ("Cleo", "Dan"), familiarity=10),
        episode("e-broken", ("李雷", "韩梅梅"), lang="zh"),
        episode("e-long", ("王芳", "张伟"), lang="zh", familiarity=1),
        episode("e-zh", ("刘洋", "陈静"), lang="zh"),
    ]


def scripted_model(srv: ChatServer, name: str = "scripted") -> Model:
    """A model on the server without the response cache (so every call reaches it)."""
    spec = ModelSpec.parse(f"openai-compatible/{name}", base_url=srv.base_url)
    return Model.from_spec(spec, cache=None, backoff_s=0.01)


def items(out: Path) -> dict[str, dict[str, Any]]:
    rows = [json.loads(x) for x in (out / "items.jsonl").read_text().splitlines()]
    return {r["id"]: r for r in rows}


CONFIG = InteractionConfig(max_turns=4, n_boot=200)
AGENT_CALLS = 3 + 3 + 3 + 4 + 3  # e-end, e-fix (one retry), e-broken (3 tries), e-long, e-zh
JUDGE_CALLS = 1 + 1 + 3 + 1  # e-long's verdict: the first reply and two corrections
FAILED_CALLS = 3 + 3  # e-broken's turn and e-long's verdict, each with its two corrections


def test_scripted_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    out = tmp_path / "run"
    reply = Scripted()
    seen: list[tuple[str, int, int]] = []
    with ChatServer(reply=reply) as srv:
        config = InteractionConfig(max_turns=4, n_boot=200)
        result = run_track(
            INTERACTION,
            DemoSet(name="hand", episodes=five_episodes(), sha256="abc", source="test"),
            out,
            config,
            {"model": RoleSpec("openai-compatible/scripted", srv.base_url)},
            progress=lambda what, done, total: seen.append((what, done, total)),
        ).result()
        assert srv.request_count == AGENT_CALLS + JUDGE_CALLS
        agent_bodies = [b for b in srv.requests if b["messages"][0]["content"] in AGENT_SYSTEMS]
        assert all(b["temperature"] == 1.0 and b["seed"] == 0 for b in agent_bodies)
    assert seen[0] == ("solve", 0, 10) and seen[-1][1:] == (10, 10)
    assert sorted(reply.judged) == sorted(["Ana", "Cleo", "王芳", "王芳", "王芳", "刘洋"])

    rows = items(out)
    assert list(rows) == ["e-end", "e-fix", "e-broken", "e-long", "e-zh"]
    end = rows["e-end"]
    assert end["ending"] == "end_marker" and end["ended_by"] == "Ana" and end["n_turns"] == 2
    assert [t["person"] for t in end["turns"]] == ["Ana", "Bo"]
    assert (end["goal"], end["realism"], end["average"]) == (8.0, 5.0, 6.5)
    assert end["judge_scores"] == {d: int(end[d]) for d in ip.DIMENSIONS}  # figures from these
    assert end["judge_model"] == "openai-compatible/scripted" and end["judge_rubric"]
    assert end["under_test"] == "both" and end["models"] == {
        "Ana": "openai-compatible/scripted",
        "Bo": "openai-compatible/scripted",
    }
    fix = rows["e-fix"]
    assert fix["ending"] == "end_marker" and fix["ended_by"] == "Dan"
    assert [t["content"] for t in fix["turns"]] == ["Hello Dan.", "Bye then."]
    assert fix["turns"][0]["attempts"] == 2 and fix["turns_fixed"] == 1
    broken = rows["e-broken"]
    assert broken["ending"] == "failed" and not broken["judged"] and broken["goal"] is None
    assert broken["failure"]["kind"] == "malformed" and broken["failure"]["turn"] == 1
    assert broken["failure"]["attempts"] == 3 and "韩梅梅" in broken["failure"]["raw"]
    assert "this turn is 李雷's" in broken["failure"]["error"]
    assert broken["judge_skipped"] == "episode failed" and broken["judge_model"] is None
    long = rows["e-long"]
    assert long["ending"] == "max_turns" and long["n_turns"] == 4
    assert not long["judged"] and long["judge_raw"] == "Looks fine to me."
    assert long["judge_error"] and long["judge_attempts"] == 3 and long["average"] is None
    assert long["judge_scores"] is None and long["judge_model"] == "openai-compatible/scripted"
    assert rows["e-zh"]["judged"] and rows["e-zh"]["goal"] == 6.0

    en, zh = result.summary["en"], result.summary["zh"]
    assert (en["goal"].value, en["goal"].n) == (6.0, 2)
    assert en["believability"].value == 5.0 and en["skillfulness"].value == 5.5
    assert en["realism"].value == 4.5 and en["average"].value == pytest.approx(5.25)
    assert en["goal"].ci_low <= 6.0 <= en["goal"].ci_high
    assert (zh["goal"].value, zh["goal"].n, zh["average"].value) == (6.0, 1, 7.0)
    assert set(en) == {"goal", "believability", "skillfulness", "realism", "average"}

    c = result.counts
    assert c["all"] == {
        "episodes": 5,
        "runs": 5,
        "played": 4,
        "ended_by_marker": 3,
        "ended_early": 3,
        "hit_max_turns": 1,
        "goal_failed": 0,
        "failed": 1,
        "judge_scored": 3,
        "judge_unscored": 1,
        "turns": 2 + 2 + 0 + 4 + 2,
        "turns_fixed": 1,
        "played_as_p1": 0,
        "played_as_p2": 0,
        "self_play": 5,  # no partner: the model under test plays both sides of each run
    }
    assert c["zh"]["failed"] == 1 and c["en"]["runs"] == 2
    assert any("e-broken: failed at turn 1" in w for w in result.warnings)
    assert any("e-long: verdict unscored" in w for w in result.warnings)

    summary = json.loads((out / "summary.json").read_text())
    assert summary["en"]["goal"] == {"value": 6.0, "ci_low": 4.0, "ci_high": 8.0, "n": 2}
    assert json.loads((out / "counts.json").read_text()) == c
    usage = json.loads((out / "usage.json").read_text())
    assert usage["roles"]["model"]["calls"] == AGENT_CALLS and "partner" not in usage["roles"]
    assert usage["roles"]["judge"]["calls"] == JUDGE_CALLS
    assert usage["stages"]["score"]["judge"]["calls"] == JUDGE_CALLS
    # the malformed turn (the wrong speaker) and the unusable verdict are failed calls
    assert usage["roles"]["model"]["failed_by_kind"] == {"schema": 1}
    assert usage["roles"]["judge"]["failed_by_kind"] == {"unparseable": 1}
    assert usage["total"]["tokens_processed"] > 0
    solved = [
        json.loads(line) for line in (out / "parts" / "solved.jsonl").read_text().splitlines()
    ]
    spent = {r["unit"]: r["usage"] for r in solved}
    assert spent["e-end"]["model"]["calls"] == 3  # each unit: what it spent, per role
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["track"] == "demo-interaction" and manifest["seed"] == 0
    assert manifest["dataset"] == {"name": "hand", "source": "test", "sha256": "abc", "subjects": 5}
    assert manifest["resolved"]["prompt_sha256"] == ip.PROMPT_SHA256
    assert "partner" not in manifest["roles"] and manifest["config"]["sides"] == "self"
    assert manifest["roles"]["judge"] == {"same_as": "model"}
    assert manifest["roles"]["model"]["model"] == "openai-compatible/scripted"
    assert manifest["package_version"]
    warnings = json.loads((out / "warnings.json").read_text())["warnings"]
    assert warnings == result.warnings
    assert set(units(out, "solved")) == set(rows) == set(units(out, "scored"))
    assert units(out, "scored")["e-broken"][0]["judge_skipped"] == "episode failed"


def units(out: Path, stage: str) -> dict[str, list[dict[str, Any]]]:
    """The rows of each unit stored in parts/<stage>.jsonl (the last line wins)."""
    lines = (out / "parts" / f"{stage}.jsonl").read_text().splitlines()
    return {u["unit"]: u["rows"] for u in map(json.loads, lines)}


def drop_units(out: Path, stage: str, drop: set[str]) -> None:
    """Remove units from a stored stage, as if the run was killed before they finished."""
    part = out / "parts" / f"{stage}.jsonl"
    kept = [x for x in part.read_text().splitlines() if json.loads(x)["unit"] not in drop]
    part.write_text("".join(x + "\n" for x in kept))


def run_scripted(
    srv: ChatServer,
    data: list[Episode] | DemoSet,
    out: Path,
    config: InteractionConfig,
    judge: Model | None = None,
) -> InteractionResult:
    """A run with a fresh cache-less model on `srv`, closed afterwards."""
    model = scripted_model(srv)
    try:
        roles = {"model": model} if judge is None else {"model": model, "judge": judge}
        finished = run_track(INTERACTION, as_demo_set(data), out, config, roles)
        result: InteractionResult = finished.result()
        return result
    finally:
        asyncio.run(model.aclose())


def test_resume_keeps_finished_episodes_and_verdicts(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with ChatServer(reply=Scripted()) as srv:
        first = run_scripted(srv, five_episodes(), out, CONFIG)
        assert srv.request_count == AGENT_CALLS + JUDGE_CALLS
        # a kill before e-long finished and before e-zh was judged
        drop_units(out, "solved", {"e-long"})
        drop_units(out, "scored", {"e-long", "e-zh"})
        (out / "items.jsonl").unlink()
        srv.reset()
        again = run_scripted(srv, five_episodes(), out, CONFIG)
        # e-long played and judged, e-zh judged; and the failed calls asked again (this
        # script answers them the same way): e-broken's malformed turn (3 tries) and
        # e-long's unusable verdict (counted in e-long's)
        assert srv.request_count == 4 + 3 + 1 + 3
        assert again.counts == first.counts
        assert again.summary == first.summary
        assert len(items(out)) == 5
        srv.reset()
        run_scripted(srv, five_episodes(), out, CONFIG)  # only the failed calls are asked
        assert srv.request_count == FAILED_CALLS
        srv.reset()
        run_scripted(srv, five_episodes(), out, replace(CONFIG, n_boot=100))
        assert srv.request_count == FAILED_CALLS
        srv.reset()
        with ChatServer(reply=Scripted()) as judging:  # a new judge: transcripts kept
            judge = scripted_model(judging, "judge")
            try:
                rejudged = run_scripted(srv, five_episodes(), out, CONFIG, judge)
            finally:
                asyncio.run(judge.aclose())
            # the model under test plays only the failed episode again
            assert srv.request_count == 3 and judging.request_count == JUDGE_CALLS
        assert rejudged.counts == first.counts
        srv.reset()
        run_scripted(srv, five_episodes(), out, replace(CONFIG, max_turns=3))  # afresh
        assert srv.request_count == AGENT_CALLS - 1 + JUDGE_CALLS  # e-long: 3 turns


def test_an_episode_whose_call_failed_is_played_again(tmp_path: Path) -> None:
    out = tmp_path / "run"
    e = episode("e-end", ("Ana", "Bo"))
    refused = True

    def refuse_bo(number: int, body: dict[str, Any]) -> Fault | None:
        user = body["messages"][1]["content"]
        return status(400, message="no") if refused and "## You are Bo" in user else None

    with ChatServer(reply=Scripted(), rules=refuse_bo) as srv:
        failed = run_scripted(srv, [e], out, CONFIG)
        (row,) = items(out).values()
        assert row["ending"] == "failed" and row["failure"]["kind"] == "call"
        assert row["failure"]["turn"] == 2 and "call failed" in row["failure"]["error"]
        assert failed.counts["all"]["failed"] == 1
        assert math.isnan(failed.summary["en"]["goal"].value)
        assert failed.usage["roles"]["model"]["failed_calls"] == 1
        refused = False
        srv.reset()
        again = run_scripted(srv, [e], out, CONFIG)  # a failed unit is not finished
        assert srv.request_count == 3 + 1
    assert again.counts["all"]["ended_by_marker"] == 1 and again.summary["en"]["goal"].n == 1


def test_early_ended_and_goal_failed_episodes_are_judged_and_counted(tmp_path: Path) -> None:
    """DEMO judges every played episode: one that ends early (the end marker after two of
    four turns) and one that plays to the limit and fails its goal (goal 0) are both sent
    to the judge and both count in the means; only the run that could not be played (a
    turn still malformed after the corrections: a failed call) is kept apart."""
    script: Script = {
        "Ana": SCRIPT["Ana"],  # e-early: two turns, then the end marker at turn 3
        "Bo": SCRIPT["Bo"],
        "Eve": lambda t, retry: say("Eve", f"Eve insists at turn {t}."),  # e-goal: 4 turns
        "Finn": lambda t, retry: say("Finn", f"Finn refuses at turn {t}."),
        "Gus": lambda t, retry: say("Hal", "hi"),  # e-call: always the wrong speaker
    }
    verdicts: Verdicts = {"Ana": (8, 6, 7, 5), "Eve": (0, 5, 3, 4)}
    episodes = [
        episode("e-early", ("Ana", "Bo")),
        episode("e-goal", ("Eve", "Finn")),
        episode("e-call", ("Gus", "Hal")),
    ]
    reply = Scripted(script, verdicts)
    with ChatServer(reply=reply) as srv:
        result = run_scripted(srv, episodes, tmp_path / "run", CONFIG)
        judge_users = [b["messages"][1]["content"] for b in srv.requests if _judging(b)]
        assert srv.request_count == (3 + 4 + 3) + 2  # agents (e-call: 3 tries), judge
    assert sorted(reply.judged) == ["Ana", "Eve"]  # both reach the judge, e-call does not
    assert len(judge_users) == 2
    (early,) = [u for u in judge_users if "Ana speaks at turn 1." in u]
    assert "Ana speaks at turn 2." not in early and "I am not sure about that." in early
    (goal,) = [u for u in judge_users if "Eve insists at turn 1." in u]
    assert "Finn refuses at turn 4." in goal  # the whole transcript, to the turn limit

    rows = items(tmp_path / "run")
    assert rows["e-early"]["ending"] == "end_marker" and rows["e-early"]["n_turns"] == 2
    assert rows["e-goal"]["ending"] == "max_turns" and rows["e-goal"]["goal"] == 0.0
    assert (rows["e-goal"]["average"], rows["e-early"]["average"]) == (3.0, 6.5)
    assert rows["e-call"]["ending"] == "failed" and not rows["e-call"]["judged"]
    assert rows["e-call"]["goal"] is None  # kept apart, never scored 0

    en = result.summary["en"]
    # by hand: e-early (8, 6, 7, 5; average 6.5) and e-goal (0, 5, 3, 4; average 3)
    assert (en["goal"].value, en["goal"].n) == (4.0, 2)
    assert en["believability"].value == 5.5 and en["skillfulness"].value == 5.0
    assert en["realism"].value == 4.5 and en["average"].value == pytest.approx(4.75)
    assert result.counts["all"] == result.counts["en"]
    assert result.counts["all"] == {
        "episodes": 3,
        "runs": 3,
        "played": 2,
        "ended_by_marker": 1,
        "ended_early": 1,
        "hit_max_turns": 1,
        "goal_failed": 1,
        "failed": 1,
        "judge_scored": 2,
        "judge_unscored": 0,
        "turns": 2 + 4 + 0,
        "turns_fixed": 0,
        "played_as_p1": 0,
        "played_as_p2": 0,
        "self_play": 3,
    }
    assert result.usage["roles"]["model"]["failed_by_kind"] == {"schema": 1}
    assert any("1 of 3 episodes could not be played" in w for w in result.warnings)


def _judging(body: dict[str, Any]) -> bool:
    return bool(body["messages"][0]["content"] in JUDGE_SYSTEMS)


OUT_OF_RANGE = json.dumps({"reason": "superb", **dict.fromkeys(ip.DIMENSIONS, 11)})


def test_an_unusable_verdict_is_a_failed_call_asked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The judge answers each verdict first with scores out of 0-10: the first run exits 3
    counting them (`range`), the rerun judges exactly those again (the transcripts kept,
    one request per verdict) and exits 0 (the "4 unscored verdicts kept" of issue 23)."""
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    episodes = [
        episode("e-end", ("Ana", "Bo")),
        episode("e-fix", ("Cleo", "Dan"), familiarity=10),
        episode("e-zh", ("刘洋", "陈静"), lang="zh"),
    ]
    data = DemoSet(name="hand", episodes=episodes, sha256="abc", source="test")
    flaky = UnusableFirst(Scripted(), bad=OUT_OF_RANGE, applies=_judging)
    out = tmp_path / "run"
    config = InteractionConfig(max_turns=4, n_boot=50, max_fixes=1)
    with ChatServer(reply=flaky) as srv:
        roles = {"model": RoleSpec("openai-compatible/scripted", srv.base_url)}
        got = run_twice(
            srv, flaky, out, lambda: run_track(INTERACTION, data, out, config, roles).exit_code
        )
    assert got.exit_codes == (3, 0)
    assert got.failed_calls_by_kind == {"judge": {"range": 3}}
    assert got.usage_by_kind == {"judge": {"range": 3}}
    assert got.failures["verdicts unscored"] == 3
    assert len(got.failed) == 3 and got.asked_again == got.failed
    assert got.rerun_requests == 3  # nothing else: the played episodes were kept
    assert got.seeds == [(0, RETRY_SEED_STEP)] * 3
    rows = items(out)
    assert all(r["judged"] for r in rows.values()) and rows["e-end"]["goal"] == 8.0
    assert all(r["judge_retry"] == 1 for r in rows.values())  # the second asking's verdict


def test_a_malformed_turn_is_a_failed_call_played_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model under test (p1, beside a fixed partner) first answers each turn with
    prose: the episode fails, counted `unparseable`; the rerun asks exactly that turn again
    and plays the episode to its end."""
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    episodes = [episode("e-end", ("Ana", "Bo")), episode("e-zh", ("刘洋", "陈静"), lang="zh")]
    data = DemoSet(name="hand", episodes=episodes, sha256="abc", source="test")
    flaky = UnusableFirst(Scripted(), applies=lambda body: body["model"] == "tested")
    out = tmp_path / "run"
    config = InteractionConfig(max_turns=2, n_boot=50, max_fixes=0)
    with ChatServer(reply=flaky) as srv:
        roles = {
            "model": RoleSpec("openai-compatible/tested", srv.base_url),
            "partner": RoleSpec("openai-compatible/partner", srv.base_url),
            "judge": RoleSpec("openai-compatible/judge", srv.base_url),
        }
        got = run_twice(
            srv, flaky, out, lambda: run_track(INTERACTION, data, out, config, roles).exit_code
        )
    assert got.exit_codes == (3, 0)
    assert got.failed_calls_by_kind == {"model": {"unparseable": 2}}
    assert got.failures["failed episodes"] == 2
    assert len(got.failed) == 2 and got.asked_again == got.failed
    assert got.seeds == [(0, RETRY_SEED_STEP)] * 2
    rows = items(out)
    assert all(r["ending"] == "max_turns" and r["judged"] for r in rows.values())
    assert all(r["turns"][0]["retry"] == 1 and "retry" not in r["turns"][1] for r in rows.values())


def test_a_fixed_partner_on_both_sides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    out = tmp_path / "run"
    e = episode("e-end", ("Ana", "Bo"))
    with (
        ChatServer(reply=Scripted()) as srv,
        ChatServer(reply=Scripted()) as partner,
        ChatServer(reply=Scripted()) as judging,
    ):
        config = InteractionConfig(max_turns=4, n_boot=200, sides="both", constrain_turns=True)
        tested = RoleSpec("openai-compatible/tested", srv.base_url)
        fixed = RoleSpec("openai-compatible/partner", partner.base_url)
        judge = scripted_model(judging, "judge")  # no cache: the two transcripts are equal
        try:
            result = run_track(
                INTERACTION,
                as_demo_set([e]),
                out,
                config,
                {"model": tested, "partner": fixed, "judge": judge},
            ).result()
        finally:
            asyncio.run(judge.aclose())
        # as p1 the model says turns 1 and 3 (the end), as p2 turn 2
        assert srv.request_count == 2 + 1
        assert partner.request_count == 1 + 2
        assert judging.request_count == 2
        bodies = [b for b in srv.requests if b["messages"][0]["content"] in AGENT_SYSTEMS]
        assert all(b["model"] == "tested" for b in bodies)
        turn_format = bodies[0]["response_format"]["json_schema"]["schema"]
        assert turn_format == ip.TURN_SCHEMA
    rows = items(out)
    assert list(rows) == ["e-end@p1", "e-end@p2"]
    p1, p2 = rows["e-end@p1"], rows["e-end@p2"]
    assert p1["under_test"] == "p1" and p2["under_test"] == "p2"
    assert p1["models"] == {"Ana": "openai-compatible/tested", "Bo": "openai-compatible/partner"}
    assert p2["models"] == {"Ana": "openai-compatible/partner", "Bo": "openai-compatible/tested"}
    assert [t["played_by"] for t in p1["turns"]] == ["under_test", "partner"]
    assert [t["played_by"] for t in p2["turns"]] == ["partner", "under_test"]
    assert result.counts["all"]["episodes"] == 1 and result.counts["all"]["runs"] == 2
    sides = {k: result.counts["all"][k] for k in ("played_as_p1", "played_as_p2", "self_play")}
    assert sides == {"played_as_p1": 1, "played_as_p2": 1, "self_play": 0}  # issue 25.8
    assert result.summary["en"]["goal"].value == 8.0 and result.summary["en"]["goal"].n == 2
    roles = result.usage["roles"]
    assert roles["partner"]["calls"] == 3 and roles["model"]["calls"] == 3
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["roles"]["partner"]["model"] == "openai-compatible/partner"
    assert manifest["roles"]["judge"]["model"] == "openai-compatible/judge"
    assert manifest["config"]["sides"] == "both" and manifest["resolved"]["runs"] == 2


# -- the real embedded model ----------------------------------------------------------------


@pytest.mark.skipif(unavailable() is not None, reason=unavailable() or "")
def test_embedded_model_short_run(tmp_path: Path) -> None:
    model = Model.from_spec(ModelSpec.parse("embedded"), cache=None)
    config = InteractionConfig(
        max_turns=2,
        temperature=0.0,
        max_tokens=48,
        constrain_turns=True,  # a 135M model writes JSON only under a grammar
        judge_max_tokens=64,
        max_fixes=0,
        n_boot=100,
    )
    try:
        finished = run_track(
            INTERACTION,
            as_demo_set([episode("e", ("Ana", "Bo"))]),
            tmp_path,
            config,
            {"model": model},
        )
    finally:
        asyncio.run(model.aclose())
    result = finished.result()
    (row,) = items(tmp_path).values()
    c = result.counts["all"]
    assert c["ended_by_marker"] + c["hit_max_turns"] + c["failed"] == 1
    assert c["judge_scored"] + c["judge_unscored"] == 1 - c["failed"]
    assert row["n_turns"] <= 2 and all(t["content"] for t in row["turns"])
    if row["failure"]:
        # a 135M model may write JSON that is not a turn (malformed, its raw reply kept) or,
        # under the grammar, only whitespace: an empty reply, a failed call after its retries
        # (on a loaded machine, a timeout likewise); either is recorded with its error
        failure = row["failure"]
        assert failure["kind"] in ("malformed", "call") and failure["error"]
        assert failure["kind"] == "call" or failure["raw"]
        assert finished.exit_code != 0  # a failed episode is counted and said by the status
    elif not row["judged"]:
        assert row["judge_raw"] and row["judge_error"] and row["average"] is None
    assert result.usage["roles"]["model"]["completion_tokens"] > 0


# -- SOTOPIA episodes -----------------------------------------------------------------------


@pytest.mark.usefixtures("sotopia_dir")  # skipped when the corpus is absent
def test_sotopia_episodes_end_to_end(tmp_path: Path) -> None:
    from dialogbench.data.demo.registry import load_demo

    demo = load_demo("sotopia")
    strangers = next(e for e in demo.episodes if e.scene.familiarity == 0)
    names = {p.name for p in strangers.participants}
    friends = next(
        e
        for e in demo.episodes
        if (e.scene.familiarity or 0) >= 4 and not names & {p.name for p in e.participants}
    )
    chosen = [strangers, friends]

    def greets(name: str) -> Callable[[int, bool], str]:
        return lambda turn, retry: END if turn == 3 else say(name, "Hey.")

    speakers: Script = {p.name: greets(p.name) for e in chosen for p in e.participants}
    verdicts: Verdicts = {e.participants[0].name: (5, 6, 7, 8) for e in chosen}
    with ChatServer(reply=Scripted(speakers, verdicts)) as srv:
        result = run_scripted(srv, demo.model_copy(update={"episodes": chosen}), tmp_path, CONFIG)
        agent_prompts = [
            b["messages"][1]["content"]
            for b in srv.requests
            if b["messages"][0]["content"] in AGENT_SYSTEMS
        ]
    assert result.counts["all"]["ended_by_marker"] == 2
    assert result.summary["en"]["average"].value == 6.5 and result.summary["en"]["goal"].n == 2
    for e in chosen:
        for side in (0, 1):
            me, other = e.participants[side], e.participants[1 - side]
            mine = [t for t in agent_prompts if f"## You are {me.name}\n" in t]
            assert len(mine) == (2 if side == 0 else 1)
            assert all(e.goals[side] in t for t in mine)
            assert all((other.background or "") in t for t in mine) == (e is friends)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["dataset"]["name"] == "sotopia"
    assert manifest["dataset"]["sha256"] == demo.sha256
