"""The chat track: the five conditions' contexts, the framing switch, paired gains, a run
against a scripted loopback server (blinded judge, one unscored verdict), and a short run
of the real embedded model."""

from __future__ import annotations

import asyncio
import json
import math
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from dialogbench.cli import app
from dialogbench.data.model import ChatItem, Message, Reading, Subject
from dialogbench.data.registry import load_dataset
from dialogbench.judging.prompts import JUDGE_SYSTEM
from dialogbench.models import Model, ModelSpec
from dialogbench.models.embedded import unavailable
from dialogbench.models.model import RETRY_SEED_STEP
from dialogbench.runner import Outcome, RoleSpec, run_track
from dialogbench.runner.record import to_json
from dialogbench.stats.bootstrap import resample_counts
from dialogbench.testing import ChatServer, UnusableFirst
from dialogbench.tracks.realcompanion import chat_prompts as cp
from dialogbench.tracks.realcompanion import recall as rc
from dialogbench.tracks.realcompanion.chat import (
    CHAT,
    COLD,
    CONDITIONS,
    LOCUS_NONE,
    NEEDS,
    NO_NEED,
    ChatConfig,
    build_chat_probes,
    gain_split,
    limit_probes,
    paired_gain,
    share_outside,
    summarise,
)
from dialogbench.tracks.realcompanion.detection import build_units
from dialogbench.tracks.realcompanion.memory import cold_open
from tests_support_unusable import run_twice
from tracks.memory_support import FLAKY_SPEC, NOTES_SPEC, Flaky

FAST = ChatConfig(n_boot=200)

# -- contexts ---------------------------------------------------------------------------------

TEXTS = [f"lorem ipsum {i}" for i in range(20)]
TEXTS[2] = "my sister Jo asked me to give the wedding speech"
TEXTS[7] = "the wedding venue is by the lake"
TEXTS[15] = "I am so nervous about the wedding speech"  # the probe
TEXTS[17] = "wedding speech wedding speech"  # after the probe: must never be supplied


def hand_made() -> Subject:
    messages = [
        Message(
            id=f"m{i}",
            position=i,
            speaker="Ana" if i % 2 == 0 else "bot",
            role="user" if i % 2 == 0 else "assistant",
            text=t,
        )
        for i, t in enumerate(TEXTS)
    ]
    item = ChatItem(
        probe_id="m15",
        stratum="enriched",
        tier="distant",
        reference_ids=["m2", "m13", "m17"],
        reference_reply="Jo chose you for a reason; want to draft it together?",
    )
    return Subject(id="s", messages=messages, chat_items=[item])


def test_five_conditions_supply_exactly_their_messages() -> None:
    (p,), warnings = build_chat_probes(hand_made())
    ids = {c: [m.id for m in msgs] for c, msgs in p.contexts.items()}
    assert ids["C0"] == []
    assert ids["C1"] == ["m12", "m13", "m14"]
    assert ids["C2"] == ["m2", "m13"]  # m17 lies after the probe: dropped, with a warning
    assert ids["C3"] == ["m2", "m7"]  # the earlier messages sharing words, in order
    assert ids["C4"] == [f"m{i}" for i in range(5, 15)]
    assert "m15" in warnings[0]
    assert all(m.position < 15 for msgs in p.contexts.values() for m in msgs)
    assert p.needs_memory and not p.opens_session and not p.locus_none
    for c in CONDITIONS:
        prompt = cp.reply_messages(p.contexts[c], p.probe, "turns")[1]["content"]
        assert "I am so nervous" in prompt and "wedding speech wedding speech" not in prompt
        assert prompt.count("\nbot: ") + prompt.count("\nAna: ") == len(p.contexts[c]) + 1


def test_framing_changes_only_the_label() -> None:
    (p,), _ = build_chat_probes(hand_made())
    for c in CONDITIONS:
        turns = cp.reply_messages(p.contexts[c], p.probe, "turns")
        memories = cp.reply_messages(p.contexts[c], p.probe, "memories")
        assert turns[0] == memories[0]
        swapped = turns[1]["content"].replace(cp.FRAMINGS["turns"], cp.FRAMINGS["memories"])
        assert swapped == memories[1]["content"]
        assert (turns != memories) == bool(p.contexts[c])  # C0 shows no block at all


def test_limit_draws_from_every_group() -> None:
    ds = load_dataset("sample")
    probes = [p for s in ds.subjects for p in build_chat_probes(s)[0]]
    assert len(probes) == sum(len(s.chat_items) for s in ds.subjects)  # every item a probe
    few = limit_probes(probes, 4, seed=0)
    assert len({(p.item.stratum, p.needs_memory) for p in few}) == 4
    assert few == limit_probes(probes, 4, seed=0)


# -- paired gains -----------------------------------------------------------------------------


def test_paired_gain_and_its_split() -> None:
    nan = math.nan
    assert paired_gain([3, 2, 1, nan], [1, 2, 3, 1], n_boot=100).value == 0.0
    e = paired_gain([3, 3, 1, 2], [1, 2, 1, 2], n_boot=100)
    assert e.value == 0.75 and e.n == 4
    split = gain_split([3, 3, 1, 2], [1, 2, 1, 2], [True, False, False, True], n_boot=100)
    assert split[NEEDS].value == 0.5 and split[NO_NEED].value == 0.25  # (2+0)/4, (1+0)/4


def _row(probe: str, cond: str, score: int | None, flag: bool | None, **kw: Any) -> dict[str, Any]:
    return {
        "subject": "s",
        "probe": probe,
        "condition": cond,
        "stratum": kw.get("stratum", "proportional"),
        "needs_memory": kw.get("needs", False),
        "needs_memory_strict": kw.get("strict", False),
        "dependent": kw.get("dependent", False),
        "depends_past_last_three": kw.get("dependent", False),
        "framing": kw.get("framing", "turns"),
        "opens_session": kw.get("cold", False),
        "locus_none": kw.get("none", False),
        "reply": "r",
        "judged": score is not None,
        "judge_model": "j",
        "judge_scores": None if score is None else {"content_match": score},
        "judge_flags": None if flag is None else {"uses_earlier_context": flag},
    }


def test_summary_pairs_probes_and_counts_unscored() -> None:
    rows = []
    table = {"p1": (0, 1, 3, 2, 1), "p2": (1, 1, 1, 1, 3), "p3": (0, 0, 2, 0, 0)}
    for probe, scores in table.items():
        needs = probe == "p1"
        for c, s in zip(CONDITIONS, scores, strict=True):
            rows.append(_row(probe, c, s, s > 0, needs=needs, none=not needs, cold=probe == "p3"))
    rows += [_row("p4", c, None, None) for c in CONDITIONS]  # unscored verdict
    r = summarise(rows, FAST)
    assert r.probes == 4 and r.unscored["judge"] == 1
    assert r.content_match["C2"]["all"].value == 2.0 and r.content_match["C2"]["all"].n == 3
    assert r.gains["C2-C1"]["all"].value == pytest.approx((2 + 0 + 2) / 3)
    assert r.gains["C2-C1"][f"need={NEEDS}"].value == 2.0
    split = r.gain_split["C2-C1"]["all"]
    assert split[NEEDS].value == pytest.approx(2 / 3) and split[NO_NEED].value == pytest.approx(
        2 / 3
    )
    assert r.gains["C3-C4"]["all"].value == pytest.approx((1 - 2 + 0) / 3)
    assert r.misfire["C0"][COLD].value == 0.0 and r.misfire["C2"][COLD].value == 1.0
    assert r.misfire["C1"][LOCUS_NONE].value == 0.5  # p2 yes, p3 no
    assert "unscored" in r.warnings[0]


def test_an_opener_that_needs_memory_is_no_cold_open() -> None:
    """Issue 24.3: misfire counts openers that need no memory only; one labelled as needing
    memory is a positive (as in the detection track), and using context there is no
    misfire."""
    rows = []
    for probe, needs, flag in (("a", True, True), ("b", False, False), ("c", False, True)):
        rows += [
            _row(probe, c, 1, flag, needs=needs, cold=True, stratum="abstention")
            for c in CONDITIONS
        ]
    r = summarise(rows, FAST)
    assert r.misfire["C2"][COLD].value == 0.5 and r.misfire["C2"][COLD].n == 2  # b, c
    strict = summarise(rows, replace(FAST, reading="strict"))  # a is not strict-needing
    assert strict.misfire["C2"][COLD].n == 3


def test_chat_and_detection_agree_on_the_cold_opens_of_the_sample() -> None:
    ds = load_dataset("sample")
    probes = [p for s in ds.subjects for p in build_chat_probes(s)[0]]
    every = {(p.subject_id, p.item.probe_id) for p in probes}
    chat = {
        (p.subject_id, p.item.probe_id)
        for p in probes
        if cold_open(p.labels.recorded, p.item.stratum, p.opens_session)
    }
    units = [u for u in build_units(ds) if u.labels is not None]  # the chat items
    detection = {(u.probe.subject_id, u.probe.id) for u in units if u.group == "cold open"}
    assert chat and chat == detection & every
    needing = [p for p in probes if p.item.stratum == "abstention" and p.labels.recorded]
    assert needing and not chat & {(p.subject_id, p.item.probe_id) for p in needing}


# -- against a scripted server ----------------------------------------------------------------

_SHOWN = re.compile(r"<context>\n(.*?)\n</context>", re.DOTALL)
_CANDIDATE = re.compile(r'<candidate label="([A-Z]+)">\n(.*?)\n</candidate>', re.DOTALL)


class Scripted:
    """Replies say how many messages they were shown; the judge scores min(3, that number)
    and flags any number above 0, except for the `broken` probe, whose verdict is no JSON."""

    def __init__(self, broken: str) -> None:
        self.broken = broken

    def __call__(self, body: dict[str, Any]) -> str:
        system = body["messages"][0]["content"]
        prompt = next(m["content"] for m in body["messages"] if m["role"] == "user")
        if system == cp.REPLY_SYSTEM:
            shown = _SHOWN.search(prompt)
            return f"shown {len(shown.group(1).splitlines()) if shown else 0}"
        assert system == JUDGE_SYSTEM
        if self.broken in prompt:
            return "They all seem fine to me."
        items = []
        for label, text in _CANDIDATE.findall(prompt):
            n = int(text.split()[-1])
            items.append(
                {
                    "label": label,
                    "reason": "-",
                    "content_match": min(3, n),
                    "uses_earlier_context": n > 0,
                }
            )
        return json.dumps({"candidates": items})


def test_run_against_a_scripted_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    ds = load_dataset("sample")
    probes = [p for s in ds.subjects for p in build_chat_probes(s)[0]]
    n = len(probes)
    assert n == sum(len(s.chat_items) for s in ds.subjects)
    broken = probes[5].probe.text.strip()
    assert sum(p.probe.text.strip() == broken for p in probes) == 1
    with ChatServer(reply=Scripted(broken)) as srv:
        model = RoleSpec("openai-compatible/scripted", base_url=srv.base_url)
        config = ChatConfig(n_boot=200, framing="memories")
        out = tmp_path / "run"
        result = run_track(CHAT, ds, out, config, {"model": model}).result()
        asked = srv.request_count
        assert asked == n * 5 + n + 2  # replies, one judge call per probe, 2 corrections
        again = run_track(CHAT, ds, out, config, {"model": model}).result()  # resume
        assert to_json(again.summary()) == to_json(result.summary())
        # only the unusable verdict, a failed judge call, is asked again (3 tries: this
        # server answers it the same way)
        assert srv.request_count == asked + 3
        # an aggregation setting re-aggregates the saved probes: no other call
        fewer = run_track(CHAT, ds, out, replace(config, n_boot=100), {"model": model}).result()
        assert srv.request_count == asked + 6 and fewer.probes == n

    rows = [json.loads(x) for x in (out / "items.jsonl").read_text().splitlines()]
    assert len(rows) == n * 5 and result.unscored["judge"] == 1 and result.probes == n
    bad = [r for r in rows if not r["judged"]]
    assert len(bad) == 5 and all(
        r["judge_raw"].startswith("They") and r["judge_error"] for r in bad
    )
    assert all(r["content_match"] is None and r["judge_scores"] is None for r in bad)
    assert all(r["judge_model"] == "openai-compatible/scripted" for r in rows)
    by = {(r["probe"], r["subject"], r["condition"]): r for r in rows}
    for p in probes:
        for c in CONDITIONS:
            r = by[(p.item.probe_id, p.subject_id, c)]
            assert r["supplied"] == [m.id for m in p.contexts[c]]
            assert r["reply"] == f"shown {len(p.contexts[c])}"
            assert r["judge_labels"][r["judge_label"]] == c  # blinded, mapped back
            if r["judged"]:
                assert r["content_match"] == min(3, len(p.contexts[c]))
                assert r["judge_scores"] == {"content_match": r["content_match"]}
                assert r["judge_flags"] == {"uses_earlier_context": r["uses_earlier_context"]}
                assert r["judge_rubric"] == cp.CHAT_RUBRIC.name
    orders = {tuple(r["judge_labels"].values()) for r in rows}
    assert len(orders) > 1  # each probe has its own shuffled order
    assert result.content_match["C0"]["all"].value == 0.0
    assert result.content_match["C0"]["all"].n == n - 1
    assert result.misfire["C0"][COLD].value == 0.0 and result.misfire["C0"][LOCUS_NONE].value == 0
    scored = [p for p in probes if p.probe.text.strip() != broken]
    c2_c1 = sum(min(3, len(p.contexts["C2"])) - min(3, len(p.contexts["C1"])) for p in scored)
    assert result.gains["C2-C1"]["all"].value == pytest.approx(c2_c1 / (n - 1))
    split = result.gain_split["C2-C1"]["stratum=enriched"]
    assert split[NEEDS].value + split[NO_NEED].value == pytest.approx(
        result.gains["C2-C1"]["stratum=enriched"].value
    )
    summary = json.loads((out / "summary.json").read_text())
    assert summary["unscored"]["judge"] == 1
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["framing"] == "memories"
    assert manifest["resolved"]["prompt_sha256"] == cp.PROMPT_SHA256
    assert manifest["roles"]["judge"] == {"same_as": "model"}
    usage = json.loads((out / "usage.json").read_text())
    assert usage["roles"]["model"]["calls"] == 5 * n and usage["roles"]["judge"]["calls"] == n + 2
    assert usage["stages"]["solve"]["model"]["calls"] == 5 * n
    assert usage["stages"]["score"]["judge"]["calls"] == n + 2
    assert usage["roles"]["judge"]["failed_by_kind"] == {"unparseable": 1}
    solved = [json.loads(x) for x in (out / "parts" / "solved.jsonl").read_text().splitlines()]
    assert sorted(u["unit"] for u in solved) == sorted(
        f"{p.subject_id}/{p.item.probe_id}" for p in probes
    )  # one line per probe, in the order they finished
    assert all(len(u["rows"]) == 5 for u in solved)
    assert CHAT.judgments(rows) == {
        f"{r['subject']}/{r['probe']}/{r['condition']}": r["content_match"]
        for r in rows
        if r["judged"]
    }


def test_an_unusable_verdict_is_a_failed_call_asked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through `dialogbench run chat`: the judge's first answer to each blinded call is no
    JSON, as are its corrections; the first run exits 3 counting them (`unparseable`), the
    rerun sends exactly those judge calls again (once each; the replies kept) and exits 0."""
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    flaky = UnusableFirst(
        Scripted("<never>"), applies=lambda body: body["messages"][0]["content"] == JUDGE_SYSTEM
    )
    out = tmp_path / "run"
    with ChatServer(reply=flaky) as srv:
        argv = [
            "run", "chat", "--dataset", "sample", "--limit", "4", "--model",
            "openai-compatible/s", "--base-url", srv.base_url, "--n-boot", "50", "--out", str(out),
        ]  # fmt: skip
        outputs: list[str] = []

        def run() -> int:
            got = CliRunner().invoke(app, argv)
            outputs.append(got.output)
            return got.exit_code

        got = run_twice(srv, flaky, out, run)
    assert got.exit_codes == (3, 0), outputs
    assert got.failed_calls_by_kind == {"judge": {"unparseable": 4}}
    assert got.failures["failed judge calls"] == 4
    assert "unparseable" in outputs[0] and "Traceback" not in outputs[0]
    assert len(got.failed) == 4 and got.asked_again == got.failed
    assert got.rerun_requests == 4  # the 20 replies came from the saved units
    assert got.seeds == [(0, RETRY_SEED_STEP)] * 4
    rows = [json.loads(x) for x in (out / "items.jsonl").read_text().splitlines()]
    assert len(rows) == 4 * 5 and all(r["judged"] and r["judge_retry"] == 1 for r in rows)


def test_another_judge_rejudges_without_the_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    ds = load_dataset("sample")
    config = ChatConfig(n_boot=100, limit=4)
    out = tmp_path / "run"
    with (
        ChatServer(reply=Scripted("<never>")) as answerer,
        ChatServer(reply=Scripted("<never>")) as judge,
    ):
        model = RoleSpec("openai-compatible/scripted", base_url=answerer.base_url)
        first = run_track(CHAT, ds, out, config, {"model": model}).result()
        replies = answerer.request_count
        assert replies == 4 * 5 + 4  # the model judged its own replies
        other = RoleSpec("openai-compatible/judge", base_url=judge.base_url)
        again = run_track(CHAT, ds, out, config, {"model": model, "judge": other}).result()
        assert answerer.request_count == replies  # the replies were kept
        assert judge.request_count == 4  # one blinded call per probe
    assert to_json(again.summary()) == to_json(first.summary())  # the same scripted verdicts
    assert again.usage["roles"]["judge"]["model"] == "openai-compatible/judge"
    assert set(CHAT.headline(Outcome(summary=None, result=again))) >= {
        "content_match C0",
        "gain C2-C1",
    }


def test_bad_configuration_fails_first(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="needs a model"):
        run_track(CHAT, load_dataset("sample"), tmp_path, ChatConfig())
    embedded = RoleSpec("embedded")
    with pytest.raises(ValueError, match="framing"):
        bad = ChatConfig(framing="x")  # type: ignore[arg-type]
        run_track(CHAT, load_dataset("sample"), tmp_path, bad, {"model": embedded})
    with pytest.raises(ValueError, match="--limit"):
        run_track(CHAT, load_dataset("sample"), tmp_path, ChatConfig(limit=0), {"model": embedded})
    assert not (tmp_path / "manifest.json").exists()


# -- the real embedded model ------------------------------------------------------------------


@pytest.mark.skipif(unavailable() is not None, reason=unavailable() or "")
def test_embedded_model_short_run(tmp_path: Path) -> None:
    model = Model.from_spec(ModelSpec.parse("embedded"), cache=None)
    config = ChatConfig(limit=1, max_tokens=16, judge_max_tokens=96, max_fixes=0, n_boot=100)
    try:
        result = run_track(
            CHAT, load_dataset("sample"), tmp_path, config, {"model": model}
        ).result()
    finally:
        asyncio.run(model.aclose())
    rows = [json.loads(x) for x in (tmp_path / "items.jsonl").read_text().splitlines()]
    assert len(rows) == 1 * 5 and result.probes == 1
    assert all(r["reply"] for r in rows)
    assert all(r["judge_raw"] for r in rows if not r["judged"])
    scored = [r for r in rows if r["judged"]]
    assert all(0 <= r["content_match"] <= 3 for r in scored)
    assert len(scored) + 5 * result.unscored["judge"] == 5
    assert result.usage["roles"]["model"]["completion_tokens"] > 0


# -- the labels, the readings, dependent items and the framing contrast -----------------------


def labelled(**labels: Any) -> Subject:
    """The hand-made subject with its item's labels replaced."""
    s = hand_made()
    item = s.chat_items[0].model_copy(update=labels)
    return s.model_copy(update={"chat_items": [item]})


def test_needs_memory_comes_from_the_labels() -> None:
    (p,), _ = build_chat_probes(hand_made())  # unlabelled: m2 lies 13 back, past 8
    assert p.labels.recorded and not p.labels.strict
    (p,), _ = build_chat_probes(labelled(needs_memory=False, locus="recent"))
    assert not p.needs_memory and not p.labels.strict and not p.locus_none
    (p,), _ = build_chat_probes(labelled(needs_memory=True, needs_memory_strict=True))
    assert p.labels.strict
    (p,), _ = build_chat_probes(labelled(reference_ids=["m10"]))  # 5 back: recent thread
    assert not p.needs_memory  # the old rule (more than 3 back) called it memory
    (p,), _ = build_chat_probes(labelled(dependent=True, locus="none"))
    assert p.labels.strict and p.labels.dependent and p.locus_none


def test_reading_dependent_and_no_need_share() -> None:
    # (C1, C2) per probe, with (recorded, strict, dependent)
    table = {
        "p1": ((0, 3), (True, True, True)),
        "p2": ((1, 2), (True, False, False)),
        "p3": ((1, 3), (False, False, True)),
        "p4": ((2, 2), (False, False, False)),
        "p5": ((0, 1), (False, False, False)),
    }
    rows = []
    for probe, ((c1, c2), (rec, strict, dep)) in table.items():
        for c in CONDITIONS:
            s = {"C1": c1, "C2": c2}.get(c, 0)
            rows.append(_row(probe, c, s, False, needs=rec, strict=strict, dependent=dep))
    diff = {p: c2 - c1 for p, ((c1, c2), _) in table.items()}  # 3, 1, 2, 0, 1: total 7
    cases: tuple[tuple[Reading, set[str]], ...] = (("recorded", {"p1", "p2"}), ("strict", {"p1"}))
    for reading, needs in cases:
        r = summarise(rows, replace(FAST, reading=reading))
        assert r.reading == reading
        assert r.gains["C2-C1"][f"need={NEEDS}"].value == pytest.approx(
            sum(diff[p] for p in needs) / len(needs)
        )
        outside = sum(d for p, d in diff.items() if p not in needs)
        share = r.no_need_share["C2-C1"]["all"]
        assert share.value == pytest.approx(outside / 7) and share.ci_low <= share.value
        split = r.gain_split["C2-C1"]["all"]
        assert split[NO_NEED].value / r.gains["C2-C1"]["all"].value == pytest.approx(share.value)
    r = summarise(rows, FAST)
    assert r.gains["C2-C1"]["dependent"].value == pytest.approx((3 + 2) / 2)
    assert r.gains["C2-C1"]["dependent"].n == 2
    assert r.content_match["C2"]["dependent"].value == 3.0
    assert r.framing_difference == {} and list(r.memory_use) == ["turns"]


def test_share_outside_against_brute_force() -> None:
    a, b = [3.0, 2.0, 1.0, 2.0, math.nan, 0.0], [1.0, 1.0, 1.0, 0.0, 1.0, 1.0]
    group = [True, False, False, True, True, False]
    e = share_outside(a, b, group, n_boot=300, seed=5)
    d = np.array([2.0, 1.0, 0.0, 2.0, -1.0])  # the NaN pair left out
    g = np.array([True, False, False, True, False])
    assert e.value == pytest.approx(d[~g].sum() / d.sum()) and e.n == 5
    reps = []
    for w in resample_counts(5, 300, np.random.default_rng(5)):
        total = (w * d).sum()
        reps.append((w * d * ~g).sum() / total if total else math.nan)
    lo, hi = np.nanpercentile(reps, [2.5, 97.5])
    assert (e.ci_low, e.ci_high) == pytest.approx((lo, hi))
    assert math.isnan(share_outside([1.0, 2.0], [1.0, 2.0], [True, False]).value)  # no gain


def test_memory_use_per_framing_and_the_paired_difference() -> None:
    flags = {  # probe -> (turns, memories) flag on C4, and (needs, cold)
        "p1": ((False, True), (True, False)),
        "p2": ((True, True), (False, False)),
        "p3": ((False, False), (False, True)),
        "p4": ((False, True), (False, True)),
    }
    rows = []
    for probe, ((t, m), (needs, cold)) in flags.items():
        for framing, flag in (("turns", t), ("memories", m)):
            for c in CONDITIONS:
                f = flag if c == "C4" else False
                rows.append(_row(probe, c, 1, f, needs=needs, cold=cold, framing=framing))
    r = summarise(rows, FAST)
    assert list(r.memory_use) == ["turns", "memories"]
    assert r.memory_use["turns"]["C4"]["all"].value == 0.25
    assert r.memory_use["memories"]["C4"]["all"].value == 0.75
    assert r.memory_use["memories"]["C4"][COLD].value == 0.5
    assert r.framing_difference["C4"]["all"].value == pytest.approx(0.5)
    assert r.framing_difference["C4"][f"need={NO_NEED}"].value == pytest.approx(1 / 3)
    assert r.framing_difference["C0"]["all"].value == 0.0
    assert r.misfire["C4"][COLD].value == 0.0  # the first framing's (turns) flags


def test_both_framings_make_the_one_framing_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    ds = load_dataset("sample")
    config = ChatConfig(n_boot=100, limit=6, framing="both")
    with ChatServer(reply=Scripted("<never>")) as srv:
        model = RoleSpec("openai-compatible/scripted", base_url=srv.base_url)
        both = run_track(CHAT, ds, tmp_path / "both", config, {"model": model}).result()
        asked = srv.request_count
        for framing in ("turns", "memories"):
            one = run_track(
                CHAT, ds, tmp_path / framing, replace(config, framing=framing), {"model": model}
            ).result()
            assert srv.request_count == asked  # every call was made by the run of both
            assert to_json(one.memory_use[framing]) == to_json(both.memory_use[framing])
    turns = run_track(
        CHAT, ds, tmp_path / "turns", replace(config, framing="turns"), {"model": model}
    ).result()
    assert to_json(turns.gains) == to_json(both.gains)  # the first framing gives the figures
    rows = [json.loads(x) for x in (tmp_path / "both" / "items.jsonl").read_text().splitlines()]
    assert len(rows) == 6 * 5 * 2 and {r["framing"] for r in rows} == {"turns", "memories"}
    assert set(both.framing_difference["C4"]) == {
        "all",
        f"need={NEEDS}",
        f"need={NO_NEED}",
        COLD,
        LOCUS_NONE,
    }
    summary = json.loads((tmp_path / "both" / "summary.json").read_text())
    assert {"memory_use", "framing_difference", "no_need_share", "reading"} <= set(summary)


# -- memory systems (--memory) ---------------------------------------------------------------

_NOTES = re.compile(r"<notes>\n(.*?)\n</notes>", re.DOTALL)


class ScriptedMemory(Scripted):
    """`Scripted`, counting notes as shown too."""

    def __call__(self, body: dict[str, Any]) -> str:
        got = super().__call__(body)
        prompt = body["messages"][-1]["content"]
        notes = _NOTES.search(prompt)
        if body["messages"][0]["content"] == cp.REPLY_SYSTEM and notes:
            return f"shown {int(got.split()[-1]) + len(notes.group(1).splitlines())}"
        return got


def test_memory_conditions_are_judged_with_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    ds = load_dataset("sample")
    specs = ("bm25", "full-context", NOTES_SPEC)
    config = ChatConfig(n_boot=50, limit=8, memory=specs, memory_window=100_000)  # all of it
    out = tmp_path / "run"
    with ChatServer(reply=ScriptedMemory("<never>")) as srv:
        model = RoleSpec("openai-compatible/scripted", base_url=srv.base_url)
        result = run_track(CHAT, ds, out, config, {"model": model}).result()
        assert srv.request_count == 8 * 8 + 8  # eight replies and one judge call per probe
        bodies = [b["messages"] for b in srv.requests]
        again = run_track(CHAT, ds, out, config, {"model": model}).result()
        assert srv.request_count == 8 * 8 + 8 and to_json(again.summary()) == to_json(
            result.summary()
        )
    memory = ["M:bm25", "M:full-context", "M:notes"]
    rows = [json.loads(x) for x in (out / "items.jsonl").read_text().splitlines()]
    assert len(rows) == 8 * 8
    probes = {
        (p.subject_id, p.item.probe_id): p for s in ds.subjects for p in build_chat_probes(s)[0]
    }
    subjects = {s.id: s for s in ds.subjects}
    by = {(r["subject"], r["probe"], r["condition"]): r for r in rows}
    for r in rows:
        assert set(r["judge_labels"].values()) == {*CONDITIONS, *memory}  # one blinded call
        if r["condition"] in CONDITIONS:
            assert "memory_ids" not in r
            continue
        p, s = probes[(r["subject"], r["probe"])], subjects[r["subject"]]
        assert r["framing"] == "turns" and r["memory_error"] is None
        pos = s.position_of()
        shown = [s.messages[pos[i]] for i in r["supplied"]]
        notes = [t["text"] for t in r["memory_texts"]]
        assert cp.memory_reply_messages(shown, notes, p.probe) in bodies  # what was recalled
        assert r["reply"] == f"shown {len(shown) + len(notes)}"
        assert all(pos[i] < p.probe.position for i in r["supplied"])
        same = {"M:bm25": "C3", "M:full-context": "C4"}.get(r["condition"])
        if same:  # BM25's ten and the last ten, through the memory interface
            assert sorted(r["supplied"]) == sorted(by[(r["subject"], r["probe"], same)]["supplied"])
        if r["condition"] == "M:notes":
            assert r["supplied"] == [] and len(notes) == min(2, p.probe.position)
            assert all(t["cites"][0] in pos for t in r["memory_texts"])
    assert set(result.content_match) == {*CONDITIONS, *memory}
    assert {"M:bm25-C1", "M:bm25-C0", "M:notes-C1"} <= set(result.gains)
    noted = [min(2, len(r["memory_texts"])) for r in rows if r["condition"] == "M:notes"]
    assert result.content_match["M:notes"]["all"].value == pytest.approx(np.mean(noted))
    c4 = result.content_match["C4"]["all"].value
    assert result.content_match["M:full-context"]["all"].value == pytest.approx(c4)
    assert result.unscored["memory_failed"] == {c: 0 for c in memory}
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["memory"] == list(specs) and manifest["config"]["memory_k"] == 10
    assert manifest["resolved"]["memory budget"] == {"k": 10, "tokens": None}
    assert manifest["resolved"]["memory prompt_sha256"] == cp.MEMORY_PROMPT_SHA256
    costs = json.loads((out / "memory_costs.json").read_text())
    assert list(costs["systems"]) == ["bm25", "full-context", "notes"]
    assert all(c["recall_ms"]["n"] == 8 for c in costs["systems"].values())
    assert costs["systems"]["notes"]["system_tokens"] is None


def test_a_failing_memory_system_fails_its_probes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    ds = load_dataset("sample")
    drawn = limit_probes([p for s in ds.subjects for p in build_chat_probes(s)[0]], 8, 0)
    failing = drawn[0].subject_id
    assert {p.subject_id for p in drawn} != {failing}, "the draw should hold both subjects"
    monkeypatch.setattr(Flaky, "fail_on", {failing})
    out = tmp_path / "run"
    with ChatServer(reply=ScriptedMemory("<never>")) as srv:
        argv = [
            "run", "chat", "--dataset", "sample", "--limit", "8", "--memory", FLAKY_SPEC,
            "--model", "openai-compatible/s", "--base-url", srv.base_url, "--n-boot", "50",
            "--out", str(out),
        ]  # fmt: skip
        got = CliRunner().invoke(app, argv)
        assert got.exit_code == 3 and "Traceback" not in got.output, got.output
        rows = [json.loads(x) for x in (out / "items.jsonl").read_text().splitlines()]
        assert rows and failing not in {r["subject"] for r in rows}  # never scored 0
        lost = sum(p.subject_id == failing for p in drawn)
        warned = json.loads((out / "warnings.json").read_text())
        assert warned["failures"] == {
            "failed memory calls": 1,  # the failing subject's one replay
            "units not finished (a call failed)": lost + 1,  # its probes, and its recall
        }
        assert warned["failed_calls_by_kind"] == {"memory": {"other": 1}}
        monkeypatch.setattr(Flaky, "fail_on", set())
        assert CliRunner().invoke(app, argv).exit_code == 0
    rows = [json.loads(x) for x in (out / "items.jsonl").read_text().splitlines()]
    assert not any(r.get("memory_error") for r in rows) and len(rows) == 8 * 6


def test_limit_bounds_ingestion_and_the_run_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 28.3: under --limit a memory system ingests only the window before each probe
    (at most limit x window messages), the recall stage records it, and the run says so
    before it starts and with its results."""
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    ds = load_dataset("sample")
    assert rc.ingest_window(ChatConfig(limit=2)) == rc.LIMITED_WINDOW
    assert rc.ingest_window(ChatConfig()) is None
    assert rc.ingest_window(ChatConfig(limit=2, memory_window=7)) == 7
    drawn = limit_probes([p for s in ds.subjects for p in build_chat_probes(s)[0]], 2, 0)
    window = 20  # the sample's histories are short: a window well inside them
    expected = 0
    for sid in {p.subject_id for p in drawn}:  # brute force: the union of the windows
        seen: set[int] = set()
        for p in drawn:
            if p.subject_id == sid:
                seen |= set(range(max(0, p.probe.position - window), p.probe.position))
        expected += len(seen)
    whole = sum(
        max(p.probe.position for p in drawn if p.subject_id == sid)
        for sid in {p.subject_id for p in drawn}
    )
    assert expected <= 2 * window < whole, "the sample's probes should lie past the window"
    out = tmp_path / "run"
    with ChatServer(reply=ScriptedMemory("<never>")) as srv:
        argv = [
            "run", "chat", "--dataset", "sample", "--limit", "2", "--memory", NOTES_SPEC,
            "--memory-window", str(window), "--model", "openai-compatible/s",
            "--base-url", srv.base_url, "--n-boot", "50", "--out", str(out),
        ]  # fmt: skip
        got = CliRunner().invoke(app, argv)
    assert got.exit_code == 0, got.output
    said = " ".join(got.output.split())
    assert said.count("memory ingestion capped") == 2  # before the run, and with its results
    assert f"{expected:,} messages in all" in said
    costs = json.loads((out / "memory_costs.json").read_text())
    assert costs["systems"]["notes"]["messages_ingested"] == expected
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["stages"]["recall"]["memory window"] == window
    warned = json.loads((out / "warnings.json").read_text())["warnings"]
    assert any(w.startswith("memory ingestion capped") for w in warned)
