"""The builder against a scripted loopback model: every stage, B never adds, E marks an
unsupported reply, each of the 19 rules fires end to end, failures are counted and redone
on a rerun (only the missing stages are sent), and the release validates and loads into
the chat and detection tracks."""

from __future__ import annotations

import asyncio
import json
import random
import shutil
from pathlib import Path
from typing import Any

import pytest

import dialogbench.data
from dialogbench.build import BUILD, RULE_IDS, BuildConfig, build_realcompanion
from dialogbench.build.realcompanion import Context, build_probe, shown_history
from dialogbench.build.sampling import Pick, session_openers
from dialogbench.cli import validation_report
from dialogbench.data.model import Dataset, Message, Subject
from dialogbench.data.registry import load_dataset
from dialogbench.data.release import load_release
from dialogbench.models import Model, ModelSpec
from dialogbench.retrieval.bm25 import BM25Index
from dialogbench.runner import RoleSpec
from dialogbench.testing import ChatServer
from dialogbench.testing.chatserver import Fault, status
from dialogbench.tracks.realcompanion.chat import CHAT, ChatConfig
from dialogbench.tracks.realcompanion.detection import DETECTION, DetectionConfig
from tests_support_unusable import build_twice

from .scripted import Script, Scripted

SMALL = BuildConfig(
    proportional=8, enriched=4, abstention=3, profile_window=60, questions="keep", anonymise=False
)
"""The source's questions kept and no anonymisation (the tests of those passes say so)."""


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))


def designed() -> Subject:
    """100 messages in five sessions of 20; the person speaks at even positions."""
    msgs = [
        Message(
            id=f"m{i}",
            position=i,
            speaker="Ana" if i % 2 == 0 else "bot",
            role="user" if i % 2 == 0 else "assistant",
            text=f"message {i} about topic{i % 7}",
            session=f"s{i // 20 + 1}",
        )
        for i in range(100)
    ]
    return Subject(id="ana", messages=msgs, speakers=["Ana"])


# probe position -> (the rule it must fire, its script)
DESIGN: dict[int, tuple[str, Script]] = {
    0: ("R01", Script()),
    20: ("R02", Script()),
    22: ("R03", Script()),
    24: ("R04", Script("back-reference")),
    26: ("R05", Script("back-reference", ["m10"], keep=[])),
    28: ("R06", Script("answer", ["m27"], needed=[])),
    30: ("R07", Script("correction", ["m29"], needed=[])),
    32: ("R08", Script("continuation", ["m31"])),
    34: ("R09", Script("continuation", ["m33"], needed=[])),
    52: ("R10", Script("continuation", ["m42"])),
    54: ("R11", Script("continuation", ["m44"], needed=[])),
    40: ("R12", Script("back-reference", ["m2"])),
    56: ("R13", Script("continuation", ["m4", "m55"], needed=["m55"])),
    58: ("R14", Script("update", ["m6"])),
    62: ("R15", Script("correction", ["m8"])),
    64: ("R16", Script("back-reference", ["m12"])),
    66: ("R17", Script("back-reference", ["m14"], needed=[])),
    68: ("R18", Script("continuation", ["m16"])),
    70: ("R19", Script("continuation", ["m18"], needed=[])),
}


def context_of(subject: Subject) -> Context:
    ds = Dataset(name="designed", subjects=[subject], sha256="0" * 64, source="test")
    index = BM25Index.from_texts([m.text for m in subject.messages])
    return Context({subject.id: subject}, {subject.id: index}, ds, [])


def pick(subject: Subject, p: int) -> Pick:
    return Pick(subject.id, p, "proportional", "none", 0.0, p in session_openers(subject))


def run_probes(
    subject: Subject, scripted: Scripted, positions: list[int], config: BuildConfig = SMALL
) -> list[dict[str, Any]]:
    async def go(url: str) -> list[dict[str, Any]]:
        spec = ModelSpec.parse("openai-compatible/scripted", base_url=url)
        model = Model.from_spec(spec, cache=None)
        try:
            ctx = context_of(subject)
            models = {"model": model, "judge": model.as_role("judge")}
            return list(
                await asyncio.gather(
                    *(build_probe(ctx, pick(subject, p), models, config) for p in positions)
                )
            )
        finally:
            await model.aclose()

    with ChatServer(reply=scripted) as srv:
        return asyncio.run(go(srv.base_url))


def test_each_of_the_19_rules_fires_end_to_end() -> None:
    subject = designed()
    scripted = Scripted({f"m{p}": s for p, (_, s) in DESIGN.items()})
    rows = run_probes(subject, scripted, sorted(DESIGN))
    fired = {}
    for row in rows:
        assert row["status"] == "ok", row
        item = row["item"]
        assert isinstance(item, dict)
        fired[item["probe_id"]] = item["rule"]
        assert [t["stage"] for t in item["trace"]] == [
            "resolve",
            "verify",
            "classify",
            "reply",
            "validate",
        ]
        assert item["rule"] in item["trace"][2]["output"]
    assert fired == {f"m{p}": rule for p, (rule, _) in DESIGN.items()}
    assert sorted(fired.values()) == list(RULE_IDS)


def test_stages_read_only_what_they_may_and_skip_empty_work() -> None:
    subject = designed()
    scripted = Scripted(
        {"m22": Script(), "m64": Script("back-reference", ["m12", "m99", "m64", "nope"])}
    )
    rows = {r["probe"]: r for r in run_probes(subject, scripted, [22, 64])}
    asked = [stage for stage, probe in scripted.calls if probe == "m22"]
    assert asked == ["ResolveReply", "ReplyReply", "ValidateReply"]  # nothing to verify
    item = rows["m64"]["item"]
    assert isinstance(item, dict)
    assert item["reference_ids"] == ["m12"]  # m99, m64 (not before the probe), nope dropped
    assert rows["m64"]["proposed_dropped"] == 3
    assert "dropped m99, m64, nope" in item["trace"][0]["output"]
    seen = {stage: ids for stage, probe, ids in scripted.shown if probe == "m64"}
    assert seen["VerifyReply"] == ["m12", "m64"]  # the proposals that exist, and the probe
    assert seen["ClassifyReply"] == ["m12", "m64"]
    assert seen["ReplyReply"] == ["m12", "m64"]  # D: the recorded context alone
    assert seen["ValidateReply"] == ["m12", "m64"]
    assert len(seen["ResolveReply"]) > 2  # A: the history shown before the probe
    assert [t["reads"] for t in item["trace"]] == [
        [],
        ["resolve"],
        ["resolve", "verify"],
        ["verify", "classify"],
        ["verify", "reply"],
    ]


def test_stage_a_sees_the_recent_thread_and_the_best_earlier_messages() -> None:
    subject = designed()
    ctx = context_of(subject)
    short = shown_history(ctx, subject, 20, SMALL)
    assert [m.position for m in short] == list(range(12))  # whole history when short
    config = BuildConfig(candidates=5, show_all=10)
    far = shown_history(ctx, subject, 90, config)
    assert len(far) == 5
    assert all(m.position < 90 - 8 for m in far)
    assert all(m.text.endswith("topic6") for m in far)  # 90 % 7 == 6: the shared word


def test_verify_never_adds(tmp_path: Path) -> None:
    """Random proposals and random B replies (with ids B was never shown): what comes out is
    always a subset of what A proposed, and exactly what B kept of it."""
    subject = designed()
    rng = random.Random(5)
    scripts, expect = {}, {}
    positions = list(range(10, 100, 2))
    for p in positions:
        proposed = rng.sample([f"m{i}" for i in range(p)], k=rng.randint(1, 5))
        keep = rng.sample([f"m{i}" for i in range(100)] + proposed, k=rng.randint(0, 8))
        scripts[f"m{p}"] = Script("back-reference", proposed, keep=keep)
        expect[f"m{p}"] = (set(proposed), set(proposed) & set(keep))
    rows = run_probes(subject, Scripted(scripts), positions)
    for row in rows:
        item = row["item"]
        assert isinstance(item, dict)
        was_proposed, was_kept = expect[str(row["probe"])]
        assert set(item["reference_ids"]) <= was_proposed
        assert set(item["reference_ids"]) == was_kept


def test_unsupported_reply_is_marked_not_dropped() -> None:
    subject = designed()
    scripted = Scripted({"m64": Script("back-reference", ["m12"], supported=False)})
    (row,) = run_probes(subject, scripted, [64])
    item = row["item"]
    assert isinstance(item, dict)
    assert item["supported"] is False
    assert item["reference_reply"]
    assert "NOT supported" in item["trace"][4]["output"]


def sample_script() -> Scripted:
    """Every probe points at the message before it and at the first one shown (often far
    back); two probes have scripts of their own."""
    return Scripted(
        {
            "m0003": Script("continuation", ["m0002"]),
            "t0005": Script("back-reference", ["t0001"], supported=False),
        },
        claims=[
            {"field": "pets", "statement": "has a dog", "evidence_ids": ["m0003"]},
            {"field": "work", "statement": "works nights", "evidence_ids": ["m0005"]},
            {"field": "ghost", "statement": "cites nothing real", "evidence_ids": ["x1"]},
        ],
        unsupported_claims={"works nights"},
        default=Script("continuation", ["@first", "@previous"]),
        persona={
            "reasoning": "r",
            "entries": [
                {"dimension": "values", "statement": "cares", "grounds": ["m0003"]},
                {"dimension": "humour", "statement": "dry", "grounds": ["zz"]},
            ],
            "hypotheses": [
                {"name": "avoids conflict", "statement": "steers away", "grounds": ["m0005"]}
            ],
        },
    )


def test_release_validates_and_loads_into_the_chat_and_detection_tracks(tmp_path: Path) -> None:
    out = tmp_path / "built"
    data = load_dataset("sample")
    with ChatServer(reply=sample_script()) as srv:
        spec = RoleSpec("openai-compatible/scripted", base_url=srv.base_url)
        _, finished = build_realcompanion(data, out, SMALL, spec)
    assert finished.exit_code == 0, finished.failures
    summary, _ = validation_report(str(out))
    assert "valid. 2 subjects" in summary
    built = load_release(out)
    items = [i for s in built.subjects for i in s.chat_items]
    assert len(items) == 15
    assert all(i.rule in RULE_IDS and i.surface_tier and i.supported is not None for i in items)
    kept = [q for s in built.subjects for q in s.questions]
    assert kept == [q for s in data.subjects for q in s.questions]  # kept from the source
    chat = CHAT.plan(built, ChatConfig())
    assert len(chat.units) == 15
    detection = DETECTION.plan(built, DetectionConfig())
    assert detection.units
    report = json.loads((out / "build.json").read_text())
    assert sum(report["rules"].values()) == 15
    assert report["provenance"]["dataset"]["sha256"] == data.sha256
    assert report["provenance"]["prompts_sha256"]
    assert report["provenance"]["models"]["judge"] == {"same_as": "model"}
    assert report["surface"]["items"] == 15
    assert any(s.startswith("The tier differs from the surface") for s in report["sentences"])
    # the profile pass: 3 proposed per maya part, 2 matched (x1 is no message), 1 kept
    maya = next(s for s in built.subjects if s.id == "maya")
    assert [c.statement for c in maya.profile] == ["has a dog"]
    assert maya.profile[0].valid_from is not None  # from its evidence's timestamp
    assert report["profile"]["matched"] >= 2 and report["profile"]["kept"] >= 1
    names = [e.name for e in maya.persona if e.hypothesis]
    assert names == ["avoids conflict"]
    assert all(e.grounds for e in maya.persona)


def test_failed_calls_are_counted_and_only_they_are_redone(tmp_path: Path) -> None:
    out = tmp_path / "built"
    data = load_dataset("sample")
    scripted = sample_script()
    failing = {"on": True}

    def rules(number: int, body: dict[str, object]) -> Fault | None:
        fmt = body.get("response_format")
        name = fmt["json_schema"]["name"] if isinstance(fmt, dict) else ""
        if failing["on"] and name == "ClassifyReply":
            return status(400, message="scripted refusal")
        return None

    config = BuildConfig(proportional=8, enriched=4, abstention=3, profile=False)
    with ChatServer(reply=scripted, rules=rules) as srv:
        spec = RoleSpec("openai-compatible/scripted", base_url=srv.base_url)
        _, first = build_realcompanion(data, out, config, spec)
        assert first.exit_code == 3
        probes = [r for r in first.rows if r["kind"] == "probe"]
        failed = {r["probe"] for r in probes if r["status"] != "ok" and r.get("call_failed")}
        assert failed
        assert all(r["failed_stage"] == "classify" for r in probes if r["probe"] in failed)
        assert first.failures["failed model calls"] == len(failed)
        report = json.loads((out / "build.json").read_text())
        assert report["stages"]["failed"]["classify"] == len(failed)
        assert report["failures"]
        failing["on"] = False
        scripted.calls.clear()
        result, second = build_realcompanion(data, out, config, spec)
    assert second.exit_code == 0
    sent = {(stage, probe) for stage, probe in scripted.calls}
    assert {p for _, p in sent} == failed  # finished probes are kept
    assert {s for s, _ in sent} == {"ClassifyReply", "ReplyReply", "ValidateReply"}  # A, B cached
    assert sum(len(s.chat_items) for s in result.dataset.subjects) == 15


def test_an_unusable_reply_is_a_failed_call_asked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stage C's first answer to each probe is no JSON (and so are its corrections): the
    build exits 3 counting them `unparseable`; the rerun sends exactly those askings again
    and exits 0, every other stage's reply from the cache."""
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    out = tmp_path / "built"
    data = load_dataset("sample")
    config = BuildConfig(proportional=8, enriched=4, abstention=3, profile=False)
    got = build_twice(sample_script(), "ClassifyReply", data, out, config)
    assert got.exit_codes == (3, 0)
    assert got.failed_calls_by_kind == {"model": {"unparseable": 15}}
    assert len(got.failed) == 15 and got.asked_again == got.failed
    assert sum(len(s.chat_items) for s in load_release(out).subjects) == 15


def test_build_record_sits_inside_and_resumes(tmp_path: Path) -> None:
    out = tmp_path / "built"
    data = load_dataset("sample")
    with ChatServer(reply=sample_script()) as srv:
        spec = RoleSpec("openai-compatible/scripted", base_url=srv.base_url)
        build_realcompanion(data, out, SMALL, spec)
        n = srv.request_count
        _, again = build_realcompanion(data, out, SMALL, spec)
        assert srv.request_count == n  # nothing redone
    assert again.solved_now == 0
    assert (out / ".build" / "manifest.json").exists()
    assert (out / ".build" / "parts" / "solved.jsonl").exists()


def test_out_may_not_be_someone_elses_release(tmp_path: Path) -> None:
    from dialogbench.data.errors import DataError
    from dialogbench.data.release import write_release

    data = load_dataset("sample")
    write_release(data, tmp_path / "theirs")
    with pytest.raises(DataError, match="no build wrote"):
        build_realcompanion(data, tmp_path / "theirs", SMALL, RoleSpec("embedded"))
    assert BUILD.roles[1].fallback == "model"


@pytest.mark.parametrize("corpus", ["locomo", "memorybank"])
def test_builds_from_the_public_corpora(
    corpus: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A few probes of one subject of LoCoMo and of MemoryBank: the release validates."""
    request.getfixturevalue(f"{corpus}_dir")  # skips without DIALOGBENCH_DATA
    data = load_dataset(corpus)
    first = data.subjects[0].id
    config = BuildConfig(
        proportional=4,
        enriched=2,
        abstention=2,
        subjects=(first,),
        profile_parts=2,
        questions="keep",
        anonymise=False,  # the messages stay the source's, to compare
    )
    out = tmp_path / corpus
    with ChatServer(reply=sample_script()) as srv:
        spec = RoleSpec("openai-compatible/scripted", base_url=srv.base_url)
        result, finished = build_realcompanion(data, out, config, spec)
    assert finished.exit_code == 0, finished.failures
    assert [s.id for s in result.dataset.subjects] == [first]
    built = load_release(out)
    assert len(built.subjects[0].chat_items) == 8
    assert built.subjects[0].messages == data.subjects[0].messages
    assert result.report["strata"]["proportional"]["built"] == 4


def test_a_killed_build_resumes_where_it_stopped(tmp_path: Path) -> None:
    """kill -9 mid-build (a subprocess of the CLI); the rerun keeps every saved probe and
    sends no call the killed build had answered (they come from the response cache)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from dialogbench.testing.chatserver import delay

    out = tmp_path / "built"
    scripted = sample_script()
    stall = {"after": 25}

    def rules(number: int, body: dict[str, object]) -> Fault | None:
        return delay(5) if number > stall["after"] else None

    args = ["build", "realcompanion", "--from", "sample", "--out", str(out), "--no-profile"]
    args += ["--proportional", "8", "--enriched", "4", "--abstention", "3"]
    args += ["--max-connections", "1", "--questions", "keep", "--no-anonymise"]
    saved = out / ".build" / "parts" / "solved.jsonl"
    with ChatServer(reply=scripted, rules=rules) as srv:
        base = ["--model", "openai-compatible/scripted", "--base-url", srv.base_url]
        code = "from dialogbench.cli import app; app()"
        proc = subprocess.Popen([sys.executable, "-c", code, *args, *base], env=os.environ)
        try:
            for _ in range(600):  # until the first requests are answered and saved
                if srv.request_count > stall["after"] and saved.exists():
                    break
                time.sleep(0.1)
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        first = [json.loads(line)["unit"] for line in saved.read_text().splitlines()]
        answered = set(scripted.calls)
        assert 0 < len(first) < 15
        stall["after"] = 10**9
        scripted.calls.clear()
        config = BuildConfig(
            proportional=8,
            enriched=4,
            abstention=3,
            profile=False,
            questions="keep",
            anonymise=False,
        )
        spec = RoleSpec("openai-compatible/scripted", base_url=srv.base_url)
        result, finished = build_realcompanion(load_dataset("sample"), out, config, spec)
    assert finished.exit_code == 0
    assert finished.solved_now == 15 - len(first)
    redone = {probe for _, probe in scripted.calls}
    assert not redone & {u.split("/")[1] for u in first}
    # no call the killed build had answered is sent again, but the one whose reply was
    # arriving at the kill (answered, not yet cached)
    assert len(answered & set(scripted.calls)) <= 1
    assert sum(len(s.chat_items) for s in result.dataset.subjects) == 15


def test_reply_schemas_bound_every_id_list() -> None:
    """An id and a list of ids are bounded in the schemas (so a grammar-constrained small
    model cannot run on inside one until its token budget is spent, as SmolLM2 did)."""
    from pydantic import ValidationError

    from dialogbench.build import realcompanion_prompts as bp

    ok = {"reasoning": "r", "kind": "answer", "reading": "x"}
    assert bp.ResolveReply.model_validate({**ok, "referent_ids": ["D1:3"]}).referent_ids
    with pytest.raises(ValidationError):
        bp.ResolveReply.model_validate({**ok, "referent_ids": ["id_" * 30]})
    with pytest.raises(ValidationError):
        bp.ResolveReply.model_validate({**ok, "referent_ids": [f"m{i}" for i in range(11)]})
    for schema in bp.SCHEMAS:
        text = json.dumps(schema.model_json_schema())
        assert '"items": {"type": "string"}' not in text, schema.__name__  # every id bounded


def _mentions(folder: Path, text: str) -> list[str]:
    """The files under `folder` whose bytes hold `text` (plain, or JSON-escaped)."""
    forms = {text.encode(), json.dumps(text)[1:-1].encode()}
    return [
        str(p.relative_to(folder))
        for p in sorted(folder.rglob("*"))
        if p.is_file() and any(f in p.read_bytes() for f in forms)
    ]


def test_a_release_built_from_a_folder_never_records_its_path(tmp_path: Path) -> None:
    """Issue 24.8: the source's absolute path is no one else's business; the release
    records its name, and the run record inside a path relative to itself."""
    source = tmp_path / "home" / "ana" / "private-logs"
    shutil.copytree(Path(dialogbench.data.__file__).parent / "sample", source)
    data = load_dataset(str(source))
    out = tmp_path / "built"
    with ChatServer(reply=sample_script()) as srv:
        spec = RoleSpec("openai-compatible/scripted", base_url=srv.base_url)
        _, finished = build_realcompanion(data, out, SMALL, spec)
    assert finished.exit_code == 0, finished.failures
    for text in (str(source), str(source.resolve()), str(tmp_path / "home")):
        assert _mentions(out, text) == []
    meta = json.loads((out / "dataset.json").read_text())
    report = json.loads((out / "build.json").read_text())
    assert meta["converted_from"] == report["provenance"]["dataset"]["source"] == "private-logs"
    assert load_release(out).sha256  # and it still loads
