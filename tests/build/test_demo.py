"""`build demo` driven end to end by a scripted loopback model: the five steps (stages on
the runner), their counts, resume, the run folder, the majority vote and its audit log,
rejected combinations, and output that loads into both DEMO tracks."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from dialogbench.build.demo import (
    BUDGET_FACTOR,
    BUDGETS,
    STEPS,
    BuildConfig,
    build_demo,
    call_config,
    load_seeds,
    read_passages,
    vote,
)
from dialogbench.build.demo_prompts import GOAL_TYPES
from dialogbench.cli import app
from dialogbench.data.demo.release import load_release
from dialogbench.data.errors import DataError
from dialogbench.models.model import RETRY_SEED_STEP
from dialogbench.runner import Finished, run_track
from dialogbench.runner.roles import RoleSpec
from dialogbench.runner.status import ExitCode
from dialogbench.testing import UnusableFirst
from dialogbench.testing.chatserver import ChatServer, Fault, delay, status
from dialogbench.testing.unusable import conversation
from dialogbench.tracks.demo.awareness import AWARENESS, AwarenessConfig
from dialogbench.tracks.demo.interaction import INTERACTION, InteractionConfig
from tests_support_unusable import run_twice

Body = dict[str, Any]
RELEASE = (
    "element_awareness_en.json",
    "dialogue_agent_interaction_en.jsonl",
    "dialogues.jsonl",
    "audit.jsonl",
)
CLI = "import sys; from dialogbench.cli import main; sys.argv[0] = 'dialogbench'; main()"


def _env(tmp_path: Path) -> dict[str, str]:
    """A child process's environment: this checkout, the test's cache, no hedging."""
    src = str(Path(__file__).resolve().parents[2] / "src")
    return {**os.environ, "PYTHONPATH": src, "DIALOGBENCH_CACHE": str(tmp_path / "cache.sqlite")}


def _schema(body: Body) -> tuple[str, dict[str, Any]]:
    fmt = body["response_format"]["json_schema"]
    return fmt["name"], fmt["schema"]


def _prompt(body: Body) -> str:
    return "\n".join(str(m["content"]) for m in body["messages"])


class Scripted:
    """Answers each step's schema; counts what it was asked, by schema name."""

    def __init__(self, end_at: int = 99, reject: bool = True) -> None:
        self.asked: Counter[str] = Counter()
        self.distilled = 0
        self.reject = reject
        """Whether the second seed distilled gets goals the conflict step rejects."""
        self.end_at = end_at
        """A turn at or past this index (from `min_turns` on) ends the dialogue."""
        self.turns: list[int] = []
        """The index of every turn asked for, in order."""
        self.budgets: dict[str, set[int]] = {}
        """Schema name -> the `max_tokens` its requests carried."""

    def __call__(self, body: Body) -> str:
        name, schema = _schema(body)
        self.asked[name] += 1
        self.budgets.setdefault(name, set()).add(body["max_tokens"])
        prompt = _prompt(body)
        if name == "Distilled":
            kind = GOAL_TYPES[self.distilled % 3]
            self.distilled += 1
            reject = self.reject and self.distilled == 2  # an unreasonable pairing
            return json.dumps(
                {
                    "goal1": "sell the item" + (" (reject me)" if reject else ""),
                    "goal2": "buy it cheaply",
                    "goal_type": kind,
                    "topic": "a second-hand bicycle",
                    "domain": "shopping",
                    "time": "Saturday morning",
                    "location": "a market",
                    "atmosphere": "friendly haggling",
                }
            )
        if name == "PersonaDetails":
            return json.dumps(
                {
                    "background": "Grew up by the sea.",
                    "hobby": "cycling",
                    "education": "college",
                    "occupation": "teacher",
                    "culture": "British",
                    "speaking_style": "warm and direct",
                }
            )
        if name == "Assessment":
            bad = "reject me" in prompt
            return json.dumps(
                {
                    "reasonable": not bad,
                    "reason": "the seller's goal contradicts the persona" if bad else "fits",
                    "relationship": "strangers",
                    "familiarity": 1,
                    "medium": "face-to-face",
                }
            )
        if name in ("Turn", "LastTurn"):
            found = re.search(r"utterance (\d+) \(|第 (\d+) 句", prompt)
            assert found is not None
            index = int(found.group(1) or found.group(2))
            self.turns.append(index)
            reply: dict[str, Any] = {"content": f"line {index}"}
            if name == "LastTurn":
                reply["end"] = index >= self.end_at
            return json.dumps(reply)
        n = schema["properties"]["utterances"]["minItems"]
        note = {
            "intent": "make an offer",
            "sentiment": "neutral",
            "emotion": "calm",
            "stance": [{"aspect": "price", "viewpoint": "too high"}],
            "strategy": {"description": "anchor low", "type": "bargaining"},
        }
        annotation: dict[str, Any] = {
            "utterances": [dict(note) for _ in range(n)],
            "epilogue": {
                "goal_completion": 7,
                "completion_reason": "they met halfway",
                "workflow": ["greeting", "offer", "deal"],
                "summary1": "I sold it.",
                "summary2": "I bought it.",
            },
        }
        if name == "Annotation":
            return json.dumps(annotation)
        # a review: checker-a and checker-b agree on one edit, and differ on another
        checker = body["model"]
        annotation["utterances"][0]["emotion"] = "annoyed"
        annotation["utterances"][1]["emotion"] = "happy" if checker == "checker-a" else "sad"
        if checker == "checker-a":
            annotation["utterances"][2]["sentiment"] = "negative"
        annotation["reasons"] = [{"label": "utterances[0].emotion", "reason": "they complain"}]
        return json.dumps(annotation)


def _roles(url: str) -> tuple[RoleSpec, tuple[RoleSpec, RoleSpec]]:
    def one(name: str) -> RoleSpec:
        return RoleSpec(f"openai-compatible/{name}", base_url=url)

    return one("writer"), (one("checker-a"), one("checker-b"))


def _run(config: BuildConfig, out: Path, url: str) -> tuple[dict[str, Any], Finished]:
    model, checkers = _roles(url)
    return build_demo(config, out, model, checkers)


def _build(config: BuildConfig, out: Path, url: str) -> dict[str, Any]:
    return _run(config, out, url)[0]


def _entries(out: Path, stage: str) -> list[dict[str, Any]]:
    """Every saved unit of a stage, one line each (the runner's `parts/<stage>.jsonl`)."""
    lines = (out / "parts" / f"{stage}.jsonl").read_text().splitlines()
    return [json.loads(x)["rows"][0] for x in lines]


CONFIG = BuildConfig(seed_dataset="sample", limit=4, min_turns=4, max_turns=6, sotopia_pool=False)


def _bilingual_seeds(tmp_path: Path) -> BuildConfig:
    """A build seeded in both languages from DEMO's own files (the test fixtures), the
    Chinese one's speaker lines with DEMO's full-width "：" as they are."""
    fixtures = Path(__file__).resolve().parents[1] / "data" / "demo" / "fixtures"
    seeds = tmp_path / "seeds"
    seeds.mkdir()
    for lang in ("en", "zh"):
        name = f"element_awareness_{lang}.json"
        (seeds / name).write_bytes((fixtures / name).read_bytes())
    return BuildConfig(seed_dataset=str(seeds), min_turns=4, max_turns=6, sotopia_pool=False)


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))


def test_five_steps_counts_vote_audit_and_output(tmp_path: Path) -> None:
    script = Scripted()
    out = tmp_path / "build"
    with ChatServer(reply=script) as srv:
        summary = _build(CONFIG, out, srv.base_url)
    steps = summary["steps"]
    assert summary["complete"] and summary["seed"]["dialogues"] == 4
    assert steps["distill"]["ok"] == 4 and steps["persona"]["ok"] == 8
    assert steps["conflict"]["units"] == 4
    rejected = steps["conflict"]["rejected"]
    assert steps["conflict"]["ok"] + rejected == 4
    assert len(steps["conflict"]["rejections"]) == rejected
    kept = steps["conflict"]["ok"]
    assert steps["generate"]["ok"] == kept == steps["quality"]["ok"]
    assert summary["output"]["dialogues"] == kept
    # the vote: utterance 0's emotion (both checkers) adopted; utterance 1's emotion split
    # three ways (no majority, the writer's stays); utterance 2's sentiment (one checker) not
    audit = [json.loads(x) for x in (out / "audit.jsonl").read_text().splitlines()]
    assert len(audit) == 5 * kept and steps["quality"]["edits_proposed"] == 5 * kept
    adopted = {(a["label"], a["checker"]) for a in audit if a["adopted"]}
    assert adopted == {("utterances[0].emotion", "checker1"), ("utterances[0].emotion", "checker2")}
    assert steps["quality"]["no_majority"] == kept and steps["quality"]["edits_adopted"] == 2 * kept
    first = next(a for a in audit if a["label"] == "utterances[0].emotion")
    assert first["before"] == "calm" and first["after"] == "annoyed"
    assert (
        first["reason"] == "they complain"
        and first["checker_model"] == "openai-compatible/checker-a"
    )
    dialogues = [json.loads(x) for x in (out / "dialogues.jsonl").read_text().splitlines()]
    labels = [u["labels"] for u in dialogues[0]["utterances"]]
    assert [x["emotion"] for x in labels[:3]] == ["annoyed", "calm", "calm"]
    assert labels[2]["sentiment"] == "neutral"
    # the release loads, and both tracks plan it
    demo = load_release(out)
    assert len(demo.items) == 4 * kept and len(demo.episodes) == kept
    assert {i.task for i in demo.items} == {"goal", "persona", "scene", "utterance"}
    assert all(i.target is not None for i in demo.items if i.task == "utterance")
    scene = next(i for i in demo.items if i.task == "scene").gold
    assert scene["familiarity"] == 1 and scene["talkway"] == "face-to-face"
    plan = INTERACTION.plan(demo, InteractionConfig())
    assert len(plan.units) == kept
    with ChatServer() as srv:  # a schema-following default reply: the run completes
        result = run_track(
            AWARENESS,
            demo,
            tmp_path / "aw",
            AwarenessConfig(n_boot=50),
            {"model": RoleSpec("openai-compatible/x", srv.base_url)},
        ).result()
    got = [c for lang in result.counts.values() for c in lang.values()]
    assert sum(c["items"] for c in got) == 4 * kept
    assert sum(c["scored"] for c in got) == 4 * kept


def test_balanced_over_goal_types_and_limited(tmp_path: Path) -> None:
    script = Scripted()
    with ChatServer(reply=script) as srv:
        summary = _build(
            BuildConfig(**{**CONFIG.__dict__, "limit": 6, "dialogues": 3}),
            tmp_path / "b",
            srv.base_url,
        )
    by_type = summary["steps"]["generate"]["by_goal_type"]
    assert summary["steps"]["generate"]["units"] == 3 and len(by_type) == 3
    assert set(by_type.values()) == {1}


def test_resume_retries_failed_units_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = Scripted()
    out = tmp_path / "build"

    def persona_fails(n: int, body: Body) -> Fault | None:
        name = body.get("response_format", {}).get("json_schema", {}).get("name")
        if name == "PersonaDetails" and n % 5 == 0:
            return status(400, message="rejected")  # not retried: the unit fails
        return None

    with ChatServer(reply=script, rules=persona_fails) as srv:  # one server: one --base-url
        first, finished = _run(CONFIG, out, srv.base_url)
        assert not first["complete"] and first["steps"]["persona"]["failed"] > 0
        assert first["steps"]["conflict"]["waiting"] + first["steps"]["conflict"]["units"] >= 1
        assert finished.exit_code == ExitCode.FAILURES
        failed = first["steps"]["persona"]["failed"]
        assert finished.failed_by_kind == {"model": {"rejected": failed}}
        with (out / "parts" / "persona.jsonl").open("a") as f:
            f.write('{"unit": "en-p0001", "ro')  # a line torn by a kill
        monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "fresh.sqlite"))
        srv.rules = None
        script.asked.clear()
        second, finished = _run(CONFIG, out, srv.base_url)
        assert second["complete"] and finished.exit_code == ExitCode.OK
        assert script.asked["Distilled"] == 0  # finished in the first run: kept, not asked
        # only the failed personas are asked again (the torn line is dropped; the unit's
        # earlier good line still counts)
        assert script.asked["PersonaDetails"] == first["steps"]["persona"]["failed"]
        assert any("dropped 1 damaged line" in w for w in finished.warnings)
        script.asked.clear()
        third = _build(CONFIG, out, srv.base_url)  # all done: nothing asked
        assert sum(script.asked.values()) == 0 and third["output"] == second["output"]


def test_the_dialogue_is_written_turn_by_turn(tmp_path: Path) -> None:
    """One call per utterance, the speakers alternating from the first; from `min_turns`
    on a reply may end the dialogue, and `max_turns` ends it in any case."""
    config = BuildConfig(**{**CONFIG.__dict__, "limit": 1, "min_turns": 3, "max_turns": 6})
    script = Scripted(end_at=4)
    out = tmp_path / "b"
    with ChatServer(reply=script) as srv:
        summary = _build(config, out, srv.base_url)
    assert summary["complete"] and summary["steps"]["generate"]["ok"] == 1
    assert script.turns == [1, 2, 3, 4]  # the 4th says it ends
    assert script.asked["Turn"] == 2 and script.asked["LastTurn"] == 2
    made = json.loads((out / "dialogues.jsonl").read_text().splitlines()[0])
    speakers = [u["speaker"] for u in made["utterances"]]
    first, second = (p["name"] for p in made["participants"])
    assert speakers == [first, second, first, second]
    assert [u["text"] for u in made["utterances"]] == ["line 1", "line 2", "line 3", "line 4"]
    capped = Scripted()  # never ends by itself
    with ChatServer(reply=capped) as srv:
        _build(config, tmp_path / "c", srv.base_url)
    assert capped.turns == [1, 2, 3, 4, 5, 6]


def test_each_step_asks_for_its_own_token_budget(tmp_path: Path) -> None:
    script = Scripted()
    with ChatServer(reply=script) as srv:
        _build(BuildConfig(**{**CONFIG.__dict__, "limit": 1}), tmp_path / "b", srv.base_url)
    n = CONFIG.max_turns
    assert script.budgets["Distilled"] == {BUDGETS["distill"]}
    assert script.budgets["Turn"] == script.budgets["LastTurn"] == {BUDGETS["turn"]}
    assert script.budgets["Annotation"] == {
        BUDGETS["annotate"] + n * BUDGETS["annotate_per_utterance"]
    }
    assert script.budgets["Review"] == {BUDGETS["review"] + n * BUDGETS["review_per_utterance"]}
    capped = Scripted()  # --max-tokens caps every step
    with ChatServer(reply=capped) as srv:
        _build(
            BuildConfig(**{**CONFIG.__dict__, "limit": 1, "max_tokens": 250}),
            tmp_path / "c",
            srv.base_url,
        )
    assert set().union(*capped.budgets.values()) == {250, BUDGETS["turn"]}
    for step in ("distill", "turn"):  # Chinese replies get more tokens (a byte-level tokenizer)
        assert call_config(CONFIG, step, "zh").max_tokens == BUDGET_FACTOR["zh"] * BUDGETS[step]
        assert call_config(CONFIG, step, "en").max_tokens == BUDGETS[step]
    assert BUDGET_FACTOR["zh"] > 1


def test_an_unreadable_verdict_is_unparsed_not_a_rejection(tmp_path: Path) -> None:
    """A conflict answer that never fits its schema is counted `unparsed` (and asked again
    on a rerun), never taken for a rejection; a turn that never fits fails its dialogue."""
    script = Scripted()

    def garbled(body: Body) -> str:
        name, _ = _schema(body)
        if name == "Assessment":
            script.asked[name] += 1
            return '{"reason": "a tiny model rambles", "reasonable": "perhaps"'
        return script(body)

    out = tmp_path / "b"
    config = BuildConfig(**{**CONFIG.__dict__, "limit": 2})
    with ChatServer(reply=garbled) as srv:
        first = _build(config, out, srv.base_url)
    conflict = first["steps"]["conflict"]
    assert conflict["unparsed"] == 2 and conflict["rejected"] == 0 and conflict["ok"] == 0
    assert conflict["rejections"] == [] and not first["complete"]
    assert first["steps"]["generate"]["units"] == 0 and first["output"]["dialogues"] == 0
    entries = _entries(out, "conflict")
    assert {e["status"] for e in entries} == {"unparsed"} and all(e["raw"] for e in entries)
    assert script.asked["Assessment"] == 2 * (1 + config.max_fixes)  # corrections were asked

    def turn_garbled(body: Body) -> str:
        name, _ = _schema(body)
        return '{"content": ""}' if name == "LastTurn" else script(body)

    with ChatServer(reply=turn_garbled) as srv:  # the conflict step is asked again
        second = _build(config, out, srv.base_url)
    steps = second["steps"]
    assert steps["conflict"]["unparsed"] == 0
    kept = steps["conflict"]["ok"]
    assert kept >= 1 and steps["generate"]["unparsed"] == kept and not second["complete"]
    entries = [e for e in _entries(out, "generate") if e["status"] != "skipped"]
    assert len(entries) == kept
    assert all(e["stage"] == "dialogue" and e["turn"] == config.min_turns for e in entries)


def test_a_rerun_asks_the_unparsed_units_afresh(tmp_path: Path) -> None:
    """Issue 23's `build demo` rerun that sent nothing: a distill reply that never parses
    is not cached, so the rerun asks exactly those requests again (as retry 1) and the
    build completes."""
    flaky = UnusableFirst(Scripted(), applies=lambda body: _schema(body)[0] == "Distilled")
    out = tmp_path / "b"
    with ChatServer(reply=flaky) as srv:
        first = _build(CONFIG, out, srv.base_url)
        assert first["steps"]["distill"]["unparsed"] == 4 and not first["complete"]
        seeds = {conversation(b): b["seed"] for b in flaky.failed_askings()}
        before = srv.request_count
        second = _build(CONFIG, out, srv.base_url)
        again = [b for b in srv.requests[before:] if flaky.picks(b)]
    assert len(seeds) == 4 and sorted(map(conversation, again)) == sorted(seeds)
    assert all(b["seed"] == seeds[conversation(b)] + RETRY_SEED_STEP for b in again)
    assert second["steps"]["distill"]["ok"] == 4 and second["complete"]
    entries = _entries(out, "distill")
    assert {e["retry"] for e in entries if e["status"] == "ok"} == {1}


def test_the_run_folder_and_a_rerun_that_sends_nothing(tmp_path: Path) -> None:
    """The build folder is a run folder: manifest, usage per stage and role, one part per
    stage; a rerun of a finished build sends no request and writes the same files."""
    out = tmp_path / "b"
    with ChatServer(reply=Scripted()) as srv:
        summary, finished = _run(CONFIG, out, srv.base_url)
        sent = srv.request_count
        files = {f: (out / f).read_bytes() for f in RELEASE}
        again, rerun = _run(CONFIG, out, srv.base_url)
        assert srv.request_count == sent  # every unit kept: nothing asked
    assert finished.exit_code == rerun.exit_code == ExitCode.OK and again == summary
    assert {f: (out / f).read_bytes() for f in RELEASE} == files
    assert sorted(p.name for p in (out / "parts").iterdir()) == sorted(
        f"{s}.jsonl" for s in (*STEPS, "solved")
    )
    assert not (out / ".lock").exists() and not (out / "steps").exists()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["track"] == "build-demo" and set(STEPS) <= set(manifest["identity"])
    assert manifest["roles"]["checker1"]["model"] == "openai-compatible/checker-a"
    usage = json.loads((out / "usage.json").read_text())
    assert list(usage["stages"])[:5] == list(STEPS)
    assert set(usage["stages"]["quality"]) == {"checker1", "checker2"}
    assert all(set(usage["stages"][s]) == {"model"} for s in STEPS[:4])
    kept = summary["steps"]["conflict"]["ok"]
    assert usage["stages"]["quality"]["checker2"]["calls"] == kept
    assert usage["stages"]["distill"]["model"]["calls"] == 4


def test_unusable_reviews_exit_3_and_a_rerun_sends_exactly_them(tmp_path: Path) -> None:
    """A review still unusable after its corrections is a failed call of its kind: the
    build exits 3 with the counts by kind; the rerun sends exactly those requests (every
    other call is kept or cached) and exits 0."""
    flaky = UnusableFirst(Scripted(), applies=lambda body: _schema(body)[0] == "Review")
    out = tmp_path / "b"
    with ChatServer(reply=flaky) as srv:
        got = run_twice(srv, flaky, out, lambda: _run(CONFIG, out, srv.base_url)[1].exit_code)
    assert got.exit_codes == (ExitCode.FAILURES, ExitCode.OK)
    n = len(got.failed)
    assert n >= 1 and got.asked_again == got.failed and got.rerun_requests == n
    by_kind = {role: {"unparseable": k["unparseable"]} for role, k in got.usage_by_kind.items()}
    assert got.failed_calls_by_kind == got.usage_by_kind == by_kind
    assert sum(k["unparseable"] for k in by_kind.values()) == n
    assert set(by_kind) <= {"checker1", "checker2"}
    assert sum(v for k, v in got.failures.items() if k.startswith("failed ")) == n
    assert all(seed[1] == seed[0] + RETRY_SEED_STEP for seed in got.seeds)
    build = json.loads((out / "build.json").read_text())
    assert build["complete"] and build["steps"]["quality"]["ok"] == build["output"]["dialogues"]


def _cli(out: Path, url: str) -> list[str]:
    return [
        "build", "demo", "--seed", "sample", "--out", str(out),
        "--model", "openai-compatible/writer", "--base-url", url,
        "--checker-model", "openai-compatible/checker-a",
        "--checker-model", "openai-compatible/checker-b", "--checker-base-url", url,
        "--limit", "4", "--min-turns", "4", "--max-turns", "6", "--no-sotopia-pool",
    ]  # fmt: skip


def test_a_second_build_into_the_folder_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "b"
    out.mkdir()
    holder = subprocess.Popen(
        [sys.executable, "-c", "import time; from dialogbench.runner.record import RunLock; "
         f"RunLock({str(out)!r}).acquire(); print('held', flush=True); time.sleep(600)"],
        env=_env(tmp_path), stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with ChatServer(reply=Scripted()) as srv:
            got = CliRunner().invoke(app, _cli(out, srv.base_url))
            assert srv.request_count == 0
    finally:
        holder.kill()
        holder.wait()
    assert got.exit_code == ExitCode.USAGE, got.output
    assert f"in use by process {holder.pid}" in " ".join(got.output.split())


def test_a_killed_build_resumes_with_every_finished_unit(tmp_path: Path) -> None:
    """kill -9 while the reviews hang: the rerun (taking over the stale lock) asks only
    for the reviews, and the output is what an uninterrupted build writes."""
    out, whole = tmp_path / "b", tmp_path / "whole"

    def reviews_hang(n: int, body: Body) -> Fault | None:
        return delay(600) if _schema(body)[0] == "Review" else None

    script = Scripted()
    with ChatServer(reply=script, rules=reviews_hang) as srv:
        build = subprocess.Popen(
            [sys.executable, "-c", CLI, *_cli(out, srv.base_url)], env=_env(tmp_path),
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        generate = out / "parts" / "generate.jsonl"
        deadline = time.monotonic() + 120
        while not (generate.exists() and len(generate.read_text().splitlines()) == 4):
            assert build.poll() is None, build.communicate()
            assert time.monotonic() < deadline, "the build did not reach its reviews"
            time.sleep(0.05)
        build.kill()
        build.wait(timeout=60)
        assert (out / ".lock").exists() and not (out / "build.json").exists()
        srv.rules = None
        script.asked.clear()
        got = CliRunner().invoke(app, _cli(out, srv.base_url))
        assert got.exit_code == 0, got.output
        assert set(script.asked) == {"Review"}  # every finished unit was kept
        assert CliRunner().invoke(app, _cli(whole, srv.base_url)).exit_code == 0
    for f in RELEASE:
        assert (out / f).read_bytes() == (whole / f).read_bytes(), f
    assert not (out / ".lock").exists()


def test_other_settings_keep_the_stages_they_do_not_change(tmp_path: Path) -> None:
    """Each stage is kept under its own identity: a longer `max_turns` keeps every goal,
    persona and verdict, and writes (and reviews) the dialogues again."""
    script = Scripted()
    out = tmp_path / "b"
    with ChatServer(reply=script) as srv:
        first = _build(CONFIG, out, srv.base_url)
        script.asked.clear()
        second = _build(BuildConfig(**{**CONFIG.__dict__, "max_turns": 8}), out, srv.base_url)
    assert first["complete"] and second["complete"]
    assert not {"Distilled", "PersonaDetails", "Assessment"} & set(script.asked)
    kept = second["steps"]["conflict"]["ok"]
    assert script.asked["Annotation"] == kept and script.asked["Review"] == 2 * kept
    assert json.loads((out / "manifest.json").read_text())["config"]["max_turns"] == 8


def test_vote_by_hand() -> None:
    original = {
        "utterances": [
            {
                "intent": "a",
                "sentiment": "neutral",
                "emotion": "calm",
                "stance": [],
                "strategy": {"description": "d", "type": "t"},
            }
        ],
        "epilogue": {
            "goal_completion": 5,
            "completion_reason": "r",
            "workflow": ["x"],
            "summary1": "s1",
            "summary2": "s2",
        },
    }
    one = json.loads(json.dumps(original))
    two = json.loads(json.dumps(original))
    one["epilogue"]["goal_completion"] = two["epilogue"]["goal_completion"] = 8  # 2 of 3
    one["utterances"][0]["emotion"] = "Calm "  # the same label, spaced and cased
    two["utterances"][0]["intent"] = "b"  # 1 of 3: the original stays
    one["utterances"][0]["sentiment"], two["utterances"][0]["sentiment"] = "positive", "negative"
    final, edits, split = vote(original, [one, two])
    assert final["epilogue"]["goal_completion"] == 8
    assert final["utterances"][0]["intent"] == "a"
    assert final["utterances"][0]["sentiment"] == "neutral" and split == 1
    assert sorted((e["label"], e["checker"], e["adopted"]) for e in edits) == [
        ("epilogue.goal_completion", "checker1", True),
        ("epilogue.goal_completion", "checker2", True),
        ("utterances[0].intent", "checker2", False),
        ("utterances[0].sentiment", "checker1", False),
        ("utterances[0].sentiment", "checker2", False),
    ]


def test_cli_build_demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with ChatServer(reply=Scripted()) as srv:
        args = [
            "build",
            "demo",
            "--seed",
            "sample",
            "--out",
            str(tmp_path / "b"),
            "--model",
            "openai-compatible/writer",
            "--base-url",
            srv.base_url,
            "--limit",
            "2",
            "--min-turns",
            "4",
            "--max-turns",
            "4",
            "--no-sotopia-pool",
        ]
        got = CliRunner().invoke(app, args)
        assert got.exit_code == 0, got.output
        assert "distill" in got.output and "dialogues written" in got.output
        bad = CliRunner().invoke(app, [*args[:8], "--checker-model", "openai-compatible/a"])
        assert bad.exit_code == 2 and "give two checkers" in bad.output
    build = json.loads((tmp_path / "b" / "build.json").read_text())
    assert build["models"]["checkers"] == [{"same_as": "model"}] * 2


def test_data_validate_reads_the_build_output(tmp_path: Path) -> None:
    """`data validate` takes a `build demo` folder as DEMO's release (the summary of a
    named DEMO set), not as a memory dataset."""
    out = tmp_path / "built"
    with ChatServer(reply=Scripted()) as srv:
        summary = _build(CONFIG, out, srv.base_url)
    kept = summary["output"]["dialogues"]
    assert kept and (out / "parts").is_dir()
    result = CliRunner().invoke(app, ["data", "validate", str(out)])
    assert result.exit_code == 0, result.output
    assert " ".join(result.output.split()) == (
        f"built: valid. 0 dialogues, {4 * kept} awareness items (goal {kept}, persona {kept}, "
        f"scene {kept}, utterance {kept}), {kept} episodes; sha256 {load_release(out).sha256}"
    ), result.output


def test_paper_protocol_shows_each_built_item_its_dialogue(tmp_path: Path) -> None:
    """Issue 25.1: a built item's `instruction` holds its whole dialogue (and an utterance
    item's target), English and Chinese, so `demo-awareness --protocol paper`, which sends
    the instruction alone, shows the model the conversation."""

    class Distinct(Scripted):
        """Every utterance its own text: `line 3 of 17` (`第 3 句，共 17` in Chinese)."""

        def __call__(self, body: Body) -> str:
            reply = super().__call__(body)
            if _schema(body)[0] in ("Turn", "LastTurn"):
                turn = json.loads(reply)
                n = len(self.turns)
                zh = "第 " in _prompt(body)
                own = f"第 {self.turns[-1]} 句，共 {n}" if zh else f"{turn['content']} of {n}"
                turn["content"] = own
                reply = json.dumps(turn, ensure_ascii=False)
            return reply

    out, config = tmp_path / "build", _bilingual_seeds(tmp_path)
    with ChatServer(reply=Distinct(reject=False)) as srv:
        summary = _build(config, out, srv.base_url)
    assert summary["complete"]
    lines = (out / "dialogues.jsonl").read_text("utf-8").splitlines()
    built = {d["id"]: d for d in map(json.loads, lines)}
    demo = load_release(out)
    assert {i.lang for i in demo.items} == {"en", "zh"}
    with ChatServer() as srv:  # a logging loopback server; the judge's replies follow its schema
        model = RoleSpec("openai-compatible/x", srv.base_url)
        config_aw = AwarenessConfig(protocol="paper", n_boot=50)
        run_track(AWARENESS, demo, tmp_path / "aw", config_aw, {"model": model})
        requests = srv.requests
    asked = [r["messages"] for r in requests if [m["role"] for m in r["messages"]] == ["user"]]
    by_instruction = {i.instruction: i for i in demo.items}
    assert sorted(m[0]["content"] for m in asked) == sorted(map(str, by_instruction))  # one each
    for messages in asked:
        content = messages[0]["content"]
        item = by_instruction[content]
        utterances = built[item.dialogue_id]["utterances"]
        assert len(utterances) >= 4
        for u in utterances:
            assert f"{u['speaker']}: {u['text']}" in content, (item.id, u)
        heading = "对话历史：" if item.lang == "zh" else "Dialogue history:"
        assert content.startswith(heading + "\n" + item.transcript + "\n")
        if item.task == "utterance":
            assert item.target is not None
            line = item.transcript.splitlines()[item.target]
            label = "需要分析的对话：" if item.lang == "zh" else "Utterance to analyze:"
            assert f"\n{label}\n{line}\n" in content
    # issue 25.2: every judge request holds its item's gold as the build released it, verbatim,
    # its labels in the item's language (a Chinese persona's 男/女 and ["开放性", "高"])
    judged = [r["messages"][-1]["content"] for r in requests if len(r["messages"]) == 2]
    assert len(judged) == len(demo.items)
    released = {
        i["dataset_id"] + ":" + i["type"]: json.dumps(i["answer"], ensure_ascii=False)
        for name in ("element_awareness_en.json", "element_awareness_zh.json")
        for i in json.loads((out / name).read_text("utf-8"))
    }
    golds = Counter(released[f"{i.dialogue_id}:{i.task}"] for i in demo.items)
    for gold, n in golds.items():  # (a scripted build may give two dialogues one gold)
        assert sum(f"<reference>\n{gold}\n</reference>" in text for text in judged) == n, gold
    zh_personas = [
        released[k] for k in released if k.endswith(":persona") and "开放性" in released[k]
    ]
    assert zh_personas, "the Chinese items' Big Five are written in Chinese"
    for gold in zh_personas:
        answer = json.loads(gold)  # {participant1: ..., participant2: ...}
        for person in answer.values():
            assert person.get("gender", "男") in ("男", "女")
            assert all(level in ("高", "低") for _, level in person.get("big_five", []))
            assert "male" not in gold and "High" not in gold and "Low" not in gold


def test_chinese_demo_seed_lines_split_on_the_full_width_colon(tmp_path: Path) -> None:
    """Issue 25 (item 1): DEMO's Chinese `dialogue_hs` writes speaker lines as "名字：话"
    (full-width colon); each such dialogue becomes a seed, split at the first of ":" / "："."""
    lines = [
        "王建国：小李，报表怎么又晚交了？比例是 3:1 吗",
        "李晓雯：王经理，对不起：系统出了问题。",
        "王建国: 下不为例。",
        "旁白没有冒号的一行",
    ]
    items = [
        {
            "type": "scene",
            "dialogue_hs": "\n".join(lines),
            "instruction": "对话历史：\n...",
            "answer": {"scene": {"topic": "工作"}},
            "dataset_id": "zh-1",
        }
    ]
    (tmp_path / "element_awareness_zh.json").write_text(json.dumps(items, ensure_ascii=False))
    seeds = load_seeds(str(tmp_path), None).seeds
    assert [s.id for s in seeds] == ["zh-1"]
    seed = seeds[0]
    assert seed.lang == "zh"
    assert seed.speakers == ("王建国", "李晓雯")
    assert seed.lines == (
        ("王建国", "小李，报表怎么又晚交了？比例是 3:1 吗"),
        ("李晓雯", "王经理，对不起：系统出了问题。"),
        ("王建国", "下不为例。"),
    )
    fixtures = Path(__file__).resolve().parents[1] / "data" / "demo" / "fixtures"
    own = load_seeds(str(fixtures / "element_awareness_zh.json"), None).seeds
    assert own and all(s.lang == "zh" and len(s.speakers) == 2 for s in own)


def test_conflict_verdicts_export_for_a_human_kappa(tmp_path: Path) -> None:
    """Issue 25.8: `export conflicts` writes the conflict step's verdicts (1 reasonable, 0
    not) as a ratings file with blank rows for people, and the question each combination
    asked; filled in, `agreement` gives the people-vs-LLM kappa (the paper's 0.65/0.79)."""
    out = tmp_path / "built"
    with ChatServer(reply=Scripted()) as srv:
        _build(CONFIG, out, srv.base_url)
    verdicts = {
        e["key"]: int(e["value"]["reasonable"])
        for e in _entries(out, "conflict")
        if e["status"] in ("ok", "rejected")
    }
    assert set(verdicts.values()) == {0, 1}  # the script rejects one pairing
    csv_path = tmp_path / "conflicts.csv"
    result = CliRunner().invoke(
        app, ["export", "conflicts", str(out), "--out", str(csv_path), "--humans", "ann,bob"]
    )
    assert result.exit_code == 0, result.output
    lines = csv_path.read_text("utf-8").splitlines()
    assert lines[0] == "item,rater,dimension,score,kind"
    rows = [line.split(",") for line in lines[1:]]
    judged = {r[0]: int(r[3]) for r in rows if r[4] == "judge"}
    assert judged == verdicts
    assert sorted(r[0] for r in rows if r[4] == "human") == sorted([*verdicts] * 2)
    shown = [json.loads(x) for x in csv_path.with_suffix(".jsonl").read_text("utf-8").splitlines()]
    assert {s["item"] for s in shown} == set(verdicts)
    assert all("reject me" in s["question"] for s in shown if not verdicts[s["item"]])
    # ann agrees with the model everywhere; bob flips the first verdict
    first = sorted(verdicts)[0]
    filled = ["item,rater,dimension,score,kind"]
    for item, rater, dimension, score, kind in rows:
        if rater == "ann":
            score = str(verdicts[item])
        elif rater == "bob":
            score = str(1 - verdicts[item] if item == first else verdicts[item])
        filled.append(",".join((item, rater, dimension, score, kind)))
    csv_path.write_text("\n".join(filled) + "\n", "utf-8")
    agreement = tmp_path / "agreement.json"
    result = CliRunner().invoke(
        app, ["agreement", str(csv_path), "--n-boot", "50", "--out", str(agreement)]
    )
    assert result.exit_code == 0, result.output
    from sklearn.metrics import cohen_kappa_score  # type: ignore[import-untyped]

    pairs = {frozenset((p["a"], p["b"])): p for p in json.loads(agreement.read_text())["pairs"]}
    judge = next(rater for _, rater, _, _, kind in rows if kind == "judge")
    keys = sorted(verdicts)
    bob = [1 - verdicts[k] if k == first else verdicts[k] for k in keys]
    want = cohen_kappa_score([verdicts[k] for k in keys], bob)
    assert pairs[frozenset((judge, "bob"))]["cohen_kappa"]["value"] == pytest.approx(want)
    assert pairs[frozenset((judge, "ann"))]["cohen_kappa"]["value"] == pytest.approx(1.0)


def test_conflict_export_refuses_a_folder_that_is_no_build(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["export", "conflicts", str(tmp_path), "--out", str(tmp_path / "c.csv")]
    )
    assert result.exit_code == 2 and "no conflict verdicts here" in result.output
    assert "Traceback" not in result.output and not (tmp_path / "c.csv").exists()


def test_personas_are_designed_from_web_texts(tmp_path: Path) -> None:
    """Issue 25.8: with --persona-texts each persona's design prompt holds one web passage,
    drawn by the seed (the same on a rerun), recorded with the persona; without, none."""
    passages = ["A baker in Lyon writes about sourdough.", "A nurse on night shifts in Oslo."]
    texts = tmp_path / "web.jsonl"
    texts.write_text("".join(json.dumps({"text": p}) + "\n" for p in passages), "utf-8")

    class Logged(Scripted):
        def __init__(self) -> None:
            super().__init__()
            self.persona_prompts: list[str] = []

        def __call__(self, body: Body) -> str:
            if _schema(body)[0] == "PersonaDetails":
                self.persona_prompts.append(_prompt(body))
            return super().__call__(body)

    config = BuildConfig(
        seed_dataset="sample",
        limit=2,
        min_turns=4,
        max_turns=4,
        sotopia_pool=False,
        persona_texts=str(texts),
    )
    script = Logged()
    with ChatServer(reply=script) as srv:
        _build(config, tmp_path / "b", srv.base_url)
    assert script.persona_prompts
    for prompt in script.persona_prompts:
        assert sum(p in prompt for p in passages) == 1, prompt
    recorded = {e["key"]: e["inspiration"] for e in _entries(tmp_path / "b", "persona")}
    assert set(recorded.values()) <= set(passages)
    again = Logged()
    with ChatServer(reply=again) as srv:
        _build(config, tmp_path / "again", srv.base_url)
    assert {e["key"]: e["inspiration"] for e in _entries(tmp_path / "again", "persona")} == recorded
    plain = Logged()
    with ChatServer(reply=plain) as srv:
        _build(replace(config, persona_texts=None), tmp_path / "plain", srv.base_url)
    assert plain.persona_prompts and not any(
        p in x for p in passages for x in plain.persona_prompts
    )
    assert all("inspiration" not in e for e in _entries(tmp_path / "plain", "persona"))


def test_persona_texts_that_are_unusable_are_refused(tmp_path: Path) -> None:
    bad = tmp_path / "web.jsonl"
    bad.write_text('{"text": "fine"}\n{"body": "no text"}\n', "utf-8")
    with pytest.raises(DataError) as caught:
        read_passages(bad)
    assert caught.value.record == "line 2" and caught.value.field == "text"
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n", "utf-8")
    with pytest.raises(DataError, match="holds no passage"):
        read_passages(empty)


def test_scene_domain_and_atmosphere_reach_the_dialogue(tmp_path: Path) -> None:
    """Issue 25.8: distillation gives each scene its domain and atmosphere; they are shown
    to the conflict check and to every turn's writer, and kept in dialogues.jsonl."""

    class Logged(Scripted):
        def __init__(self) -> None:
            super().__init__(reject=False)
            self.prompts: dict[str, list[str]] = {}

        def __call__(self, body: Body) -> str:
            self.prompts.setdefault(_schema(body)[0], []).append(_prompt(body))
            return super().__call__(body)

    script = Logged()
    with ChatServer(reply=script) as srv:
        _build(CONFIG, tmp_path / "b", srv.base_url)
    distill = script.prompts["Distilled"][0]
    assert "domain" in distill and "atmosphere" in distill
    for name in ("Assessment", "Turn"):
        assert script.prompts[name]
        for prompt in script.prompts[name]:
            assert "domain shopping" in prompt and "atmosphere friendly haggling" in prompt
    lines = (tmp_path / "b" / "dialogues.jsonl").read_text("utf-8").splitlines()
    assert lines and all(
        (d["domain"], d["atmosphere"]) == ("shopping", "friendly haggling")
        for d in map(json.loads, lines)
    )


def test_the_papers_pipeline_end_to_end_on_a_built_set(tmp_path: Path) -> None:
    """Issue 25: build demo, then demo-awareness --protocol paper, then demo-interaction,
    then report demo, on the built set in English and Chinese: every item and episode of
    the build is answered and judged, and the report has a Table 3 row per language."""
    import re

    from dialogbench.judging.prompts import FRAMINGS
    from dialogbench.testing.chatserver import default_reply
    from dialogbench.tracks.demo import interaction_prompts as ip
    from dialogbench.tracks.demo.awareness import AWARENESS, AwarenessConfig
    from dialogbench.tracks.demo.interaction import INTERACTION, InteractionConfig

    out, config = tmp_path / "build", _bilingual_seeds(tmp_path)
    with ChatServer(reply=Scripted(reject=False)) as srv:
        assert _build(config, out, srv.base_url)["complete"]
    demo = load_release(out)
    assert {i.lang for i in demo.items} == {e.lang for e in demo.episodes} == {"en", "zh"}

    agents = {ip.EN.agent_system, ip.ZH.agent_system}
    speaker = re.compile(r"^## (?:You are |你是)(.+)$", re.MULTILINE)

    def reply(body: Body) -> str:
        messages = body["messages"]
        if messages[0]["role"] == "system" and messages[0]["content"] in agents:
            found = speaker.search(messages[1]["content"])
            assert found is not None
            return json.dumps({"person": found.group(1), "content": "I see your point."})
        return default_reply(body)  # the judges' replies follow their schemas

    with ChatServer(reply=reply) as srv:
        model = RoleSpec("openai-compatible/m", srv.base_url)
        aw = run_track(
            AWARENESS,
            demo,
            tmp_path / "aw",
            AwarenessConfig(protocol="paper", n_boot=50),
            {"model": model},
        )
        it = run_track(
            INTERACTION,
            demo,
            tmp_path / "int",
            InteractionConfig(max_turns=4, n_boot=50),
            {"model": model},
        )
    assert aw.exit_code == 0 and it.exit_code == 0
    aw_rows = (tmp_path / "aw" / "items.jsonl").read_text("utf-8").splitlines()
    int_rows = [
        json.loads(x) for x in (tmp_path / "int" / "items.jsonl").read_text("utf-8").splitlines()
    ]
    assert len(aw_rows) == len(demo.items) and len(int_rows) == len(demo.episodes)
    assert all(r["judged"] and r["n_turns"] == 4 for r in int_rows)
    assert not {f.system for f in FRAMINGS.values()} & agents
    result = CliRunner().invoke(
        app,
        ["report", "demo", str(tmp_path / "aw"), str(tmp_path / "int"), "--n-boot", "50"],
        terminal_width=250,
    )
    assert result.exit_code == 0, result.output
    table = result.output.split("Table 3 shape")[1]
    rows = [line.split("│")[1:3] for line in table.splitlines() if line.count("│") > 10]
    langs = [
        lang.strip() for model, lang in rows if "openai-compatible/m" in model or not model.strip()
    ]
    assert langs == ["en", "zh", "pooled"], table
