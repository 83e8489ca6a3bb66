"""The census and the re-reading (issue 24.5) against the scripted loopback model: `build
realcompanion --census --reread` labels every person message outside the proportional
sample (stages A to C, census.jsonl) and re-reads each under the verification instruction
(one judge call, reread.jsonl); the demand track's census and re-reading rates are what a
plain count over the written files gives; a failed re-reading is redone alone; a rerun
sends nothing. (The sample's build turns neither on: test_sample_build.py.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dialogbench.build import BuildConfig, build_realcompanion
from dialogbench.cli import validation_report
from dialogbench.data.model import Dataset, Message, Subject
from dialogbench.data.registry import load_dataset
from dialogbench.runner import RoleSpec, run_track
from dialogbench.testing import ChatServer
from dialogbench.testing.chatserver import Fault, status
from dialogbench.tracks.realcompanion.demand import DEMAND, DemandConfig
from tests_support_unusable import build_twice

from .scripted import Script, Scripted

CONFIG = BuildConfig(
    proportional=6,
    enriched=2,
    abstention=1,
    profile=False,
    questions="keep",
    anonymise=False,
    census=True,
    reread=True,
)

# what the scripted model reads into some messages (ids are unique over both subjects)
SCRIPTS = {
    "a40": Script("back-reference", ["a2"], reread=["a2"]),  # R12: distant, needed: strict
    "a52": Script("continuation", ["a10"], needed=[], reread=["a51"]),  # R19: not strict;
    # the re-reading keeps only a recent message: dropped, no memory
    "a44": Script(reread=["a2"]),  # the re-reading alone finds a distant referent
    "b30": Script("back-reference", ["b4"], keep=[], reread=["b4"]),  # R05: B removes it
}
RECORDED = {"a40", "a52"}
STRICT = {"a40"}
REREAD = {"a40", "a44", "b30"}


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))


def two_subjects() -> Dataset:
    """ana: 60 messages in three sessions, ben: 40 in two; the person speaks at even
    positions."""
    subjects = []
    for sid, n in (("ana", 60), ("ben", 40)):
        messages = [
            Message(
                id=f"{sid[0]}{i}",
                position=i,
                speaker=sid if i % 2 == 0 else "bot",
                role="user" if i % 2 == 0 else "assistant",
                text=f"message {i} about topic{i % 5}",
                session=f"s{i // 20 + 1}",
            )
            for i in range(n)
        ]
        subjects.append(Subject(id=sid, messages=messages, speakers=[sid]))
    return Dataset(name="two", subjects=subjects, sha256="0" * 64, source="two")


def lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def population(out: Path) -> dict[str, dict[str, Any]]:
    """Plain loops over the written files: every person message outside the proportional
    items, with the label that covers it (chat item or census line) and its re-reading."""
    got: dict[str, dict[str, Any]] = {}
    for folder in sorted(p for p in out.iterdir() if (p / "conversation.jsonl").exists()):
        person = [
            m["id"] for m in lines(folder / "conversation.jsonl") if m.get("role", "user") == "user"
        ]
        chat = {c["probe_id"]: c for c in lines(folder / "chat.jsonl")}
        census = {c["probe_id"]: c for c in lines(folder / "census.jsonl")}
        reread = {r["probe_id"]: r for r in lines(folder / "reread.jsonl")}
        assert not set(chat) & set(census)  # a message is labelled once
        for mid in person:
            if mid in chat and chat[mid].get("stratum", "proportional") == "proportional":
                continue
            got[mid] = {"label": chat.get(mid) or census.get(mid), "reread": reread.get(mid)}
    return got


def test_census_and_rereading_build_and_their_rates(tmp_path: Path) -> None:
    out = tmp_path / "built"
    data = two_subjects()
    scripted = Scripted(dict(SCRIPTS))
    failing = {"on": True}

    def rules(number: int, body: dict[str, Any]) -> Fault | None:
        name = body["response_format"]["json_schema"]["name"]
        user = body["messages"][-1]["content"]
        if failing["on"] and name == "RereadReply" and "[a40]" in user.split("new message")[-1]:
            return status(400, message="scripted refusal")
        return None

    with ChatServer(reply=scripted, rules=rules) as srv:
        spec = RoleSpec("openai-compatible/scripted", base_url=srv.base_url)
        judge = RoleSpec("openai-compatible/scripted-judge", base_url=srv.base_url)
        _, first = build_realcompanion(data, out, CONFIG, spec, judge)
        assert first.exit_code == 3  # a40's re-reading was refused
        pop = population(out)
        assert "a40" in pop and pop["a40"]["reread"] is None
        report = json.loads((out / "build.json").read_text())
        assert report["reread"]["failed"] == 1 and report["reread"]["read"] == len(pop) - 1
        # the judge made stage B's and E's checks and every re-reading (one call each)
        usage = json.loads((out / ".build" / "usage.json").read_text())["roles"]["judge"]
        judged = [c for c in scripted.calls if c[0] in ("VerifyReply", "ValidateReply")]
        # (none for a message with nothing more than 8 back: none can be verified)
        asked = [m for m in pop if int(m[1:]) > 8]
        assert usage["calls"] == len(judged) + len(asked)
        assert usage["failed_calls"] == 1 and sum(usage["failed_by_kind"].values()) == 1

        failing["on"] = False
        scripted.calls.clear()
        _, second = build_realcompanion(data, out, CONFIG, spec, judge)
        assert second.exit_code == 0
        assert scripted.calls == [("RereadReply", "a40")]  # only the failed call is sent again
        n = srv.request_count
        _, third = build_realcompanion(data, out, CONFIG, spec, judge)
        assert srv.request_count == n and third.solved_now == 0  # a rerun sends nothing

    pop = population(out)
    # the population: every person message (50 of 100) but the 6 proportional ones
    assert len(pop) == 50 - 6
    assert all(v["label"] is not None and v["reread"] is not None for v in pop.values())
    census_lines = [v["label"] for v in pop.values() if v["label"].get("stratum") == "census"]
    sampled = [v for v in pop.values() if v["label"].get("stratum") in ("enriched", "abstention")]
    assert sampled and len(census_lines) == len(pop) - len(sampled)  # those carry chat items
    for line in census_lines:
        assert line.get("reference_reply", "") == "" and line.get("supported") is None
        assert [t["stage"] for t in line["trace"]] == ["resolve", "verify", "classify"]
    recorded = {m for m, v in pop.items() if v["label"]["needs_memory"]}
    strict = {m for m, v in pop.items() if v["label"]["needs_memory_strict"]}
    reread = {m for m, v in pop.items() if v["reread"]["needs_memory"]}
    assert recorded == RECORDED & set(pop) and strict == STRICT & set(pop)
    assert reread == REREAD & set(pop)
    assert "referent_ids" not in pop.get("a52", {"reread": {}})["reread"]  # none kept

    report = json.loads((out / "build.json").read_text())
    assert report["census"]["messages"] == len(pop) == report["census"]["labelled"]
    assert report["census"]["labelled_by_census"] == len(census_lines)
    assert report["census"]["recorded"] == len(recorded)
    assert report["reread"] == {
        "messages": len(pop),
        "read": len(pop),
        "failed": 0,
        "needs_memory": len(reread),
        "ids_dropped": int("a52" in pop),
    }

    line, _ = validation_report(str(out))
    assert f", {len(census_lines)} census labels, {len(pop)} re-readings;" in line
    built = load_dataset(str(out))
    run = run_track(DEMAND, built, tmp_path / "demand", DemandConfig(n_boot=100))
    summary = json.loads((tmp_path / "demand" / "summary.json").read_text())
    rec, st = summary["readings"]["recorded"], summary["readings"]["strict"]
    assert rec["census rate"]["value"] == pytest.approx(len(recorded) / len(pop))
    assert rec["census rate"]["n"] == len(pop) == st["census rate"]["n"]
    assert st["census rate"]["value"] == pytest.approx(len(strict) / len(pop))
    assert rec["re-reading rate"]["value"] == pytest.approx(len(reread) / len(pop))
    assert rec["re-reading rate"]["n"] == len(pop)
    assert summary["census"]["subjects"] == ["ana", "ben"]
    assert not any("census" in w or "re-reading" in w for w in run.warnings)


def test_an_unusable_rereading_is_a_failed_call_asked_again(tmp_path: Path) -> None:
    """Each re-reading's first answer is no JSON (and so are its corrections): the build
    exits 3 counting them `unparseable` under the judge; the rerun asks exactly those
    again, every other reply from the cache, and writes every re-reading."""
    out = tmp_path / "built"
    config = BuildConfig(**{**CONFIG.__dict__, "census": False})
    got = build_twice(Scripted(dict(SCRIPTS)), "RereadReply", two_subjects(), out, config)
    pop = population(out)
    assert got.exit_codes == (3, 0)
    asked = [m for m in pop if int(m[1:]) > 8]  # the others make no call
    assert got.failed_calls_by_kind == {"judge": {"unparseable": len(asked)}}
    assert len(got.failed) == len(asked) and got.asked_again == got.failed
    assert all(v["reread"] is not None for v in pop.values())
    assert not any(v["label"] and v["label"].get("stratum") == "census" for v in pop.values())


def test_both_passes_read_and_write_the_anonymised_subject(tmp_path: Path) -> None:
    """With anonymisation, the census and re-reading units wait for their subject's
    identify stage, are shown the surrogates, and their lines are written under the
    renamed subject; no request after identify names the person."""
    out = tmp_path / "built"
    scripted = Scripted(dict(SCRIPTS))
    config = BuildConfig(**{**CONFIG.__dict__, "anonymise": True})
    with ChatServer(reply=scripted) as srv:
        spec = RoleSpec("openai-compatible/scripted", base_url=srv.base_url)
        result, finished = build_realcompanion(two_subjects(), out, config, spec)
        bodies = [b["messages"][-1]["content"] for b in srv.requests]
    assert finished.exit_code == 0
    renamed = {s.id for s in result.dataset.subjects}
    assert renamed.isdisjoint({"ana", "ben"})
    asked = [b for b in bodies if "new message" in b]
    assert asked and not any(f"{who}'s" in b for b in asked for who in ("ana", "ben"))
    pop = population(out)
    assert len(pop) == 50 - 6 and all(v["label"] and v["reread"] for v in pop.values())
