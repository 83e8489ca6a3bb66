"""The memory-need detection track: populations, detectors, run files, resume, model detectors
against a scripted loopback server, and a short run of the real embedded model."""

from __future__ import annotations

import asyncio
import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dialogbench.data.locomo import load_locomo
from dialogbench.data.model import ChatItem, Message, Reading, Subject
from dialogbench.data.registry import load_dataset
from dialogbench.models import Model, ModelSpec
from dialogbench.models.embedded import unavailable
from dialogbench.retrieval.base import Probe
from dialogbench.retrieval.bm25 import STOPWORDS, tokenize
from dialogbench.runner import run_track
from dialogbench.runner.record import to_json
from dialogbench.runner.roles import RoleSpec
from dialogbench.stats.roc import auroc, auroc_replicates, bootstrap_auroc
from dialogbench.testing import ChatServer
from dialogbench.tracks.realcompanion import detectors as det
from dialogbench.tracks.realcompanion.detection import (
    ABSENT,
    ALL_DETECTORS,
    CHAT_CONTRASTS,
    COLD,
    CONTRASTS,
    DETECTION,
    LEAKAGE,
    MODEL_DETECTORS,
    NEEDS,
    OPENER,
    PROPORTIONAL,
    QUESTION,
    QUESTION_CONTRAST,
    RECENT,
    DetectionConfig,
    build_units,
    chat_group,
    limit_units,
)
from dialogbench.tracks.realcompanion.detection_prompts import (
    MEMORY_PROMPT_SHA256,
    PROMPT_SHA256,
    memory_messages,
)
from dialogbench.tracks.realcompanion.memory import MemoryLabels, memory_labels, session_openers
from tracks.memory_support import NOTES_SPEC

FAST = DetectionConfig(n_boot=200)
PROPORTIONAL_FIGURES = {f"{k}{PROPORTIONAL}" for k in CHAT_CONTRASTS}
ALL_FIGURES = set(CONTRASTS) | PROPORTIONAL_FIGURES | {LEAKAGE}


def subject(texts: list[str], sessions: list[str] | None = None) -> Subject:
    messages = [
        Message(
            id=f"m{i}",
            position=i,
            speaker="Ana" if i % 2 == 0 else "bot",
            role="user" if i % 2 == 0 else "assistant",
            text=t,
            session=sessions[i] if sessions else None,
        )
        for i, t in enumerate(texts)
    ]
    return Subject(id="s", messages=messages)


def probe(text: str, cutoff: int, refs: tuple[int, ...] = (), stratum: str = "x") -> Probe:
    return Probe("p", "s", "chat", text, cutoff, refs, ("Ana",), {"stratum": stratum})


# -- populations -----------------------------------------------------------------------------


def labels(refs: tuple[int, ...] = (), cutoff: int = 10, **item: Any) -> MemoryLabels:
    return memory_labels(ChatItem(probe_id="p", **item), cutoff, list(refs))


def test_chat_groups_follow_the_labels_and_the_reading() -> None:
    def group(p: Probe, opener: bool = False, reading: Reading = "recorded", **item: Any) -> str:
        return chat_group(p, opener, labels(p.reference_positions, p.cutoff, **item), reading)

    assert group(probe("t", 20, (6,))) == NEEDS  # unlabelled: 14 back, past the 8 of the thread
    assert group(probe("t", 20, (12, 19))) == RECENT  # 8 and 1 back: the recent thread
    assert group(probe("t", 20, (2, 19))) == NEEDS  # any old reference
    assert group(probe("t", 20, (6,)), reading="strict") == RECENT  # not marked dependent
    assert group(probe("t", 20, (6,)), reading="strict", dependent=True) == NEEDS
    assert group(probe("t", 20, (6,)), needs_memory=False) == RECENT  # the label decides
    assert group(probe("t", 20, (18,)), needs_memory=True) == NEEDS
    assert group(probe("t", 10)) == ABSENT
    assert group(probe("t", 10), True) == COLD
    assert group(probe("t", 10, stratum="abstention")) == COLD
    assert group(probe("t", 20, (1,)), True) == NEEDS  # needing memory wins
    assert group(probe("t", 20, (1,)), True, "strict") == COLD


def test_session_openers_are_first_user_messages() -> None:
    s = subject(["a", "b", "c", "d", "e", "f"], ["1", "1", "1", "2", "2", "3"])
    assert session_openers(s) == [0, 4]  # session 2 opens with the assistant; 3 has no user
    assert session_openers(subject(["a", "b", "c"])) == [0]  # no sessions: the first one


def hand_groups(reading: Reading = "recorded", stratum: str | None = None) -> dict[str, int]:
    """The sample's detection populations counted by hand from its labels: memory-needing
    items; else cold opens (abstention stratum or the person's first message of a session);
    else recent thread (it has references) or referent absent; and every question and every
    session opener."""
    ds = load_dataset("sample")
    out = dict.fromkeys((NEEDS, RECENT, COLD, ABSENT, QUESTION, OPENER), 0)
    for s in ds.subjects:
        sessions: set[str | None] = set()
        openers = set()
        for m in s.messages:
            if m.role == "user" and m.session not in sessions:
                sessions.add(m.session)
                openers.add(m.id)
        out[OPENER] += len(openers)
        out[QUESTION] += len(s.questions)
        for i in s.chat_items:
            if stratum is not None and i.stratum != stratum:
                continue
            needs = i.needs_memory if reading == "recorded" else i.needs_memory_strict
            if needs:
                out[NEEDS] += 1
            elif i.stratum == "abstention" or i.probe_id in openers:
                out[COLD] += 1
            else:
                out[RECENT if i.reference_ids else ABSENT] += 1
    return out


def test_sample_populations_and_limit() -> None:
    units = build_units(load_dataset("sample"))
    counts = {g: sum(u.group == g for u in units) for g in {u.group for u in units}}
    assert counts == hand_groups()
    few = limit_units(units, 8, seed=0)
    assert len(few) == 8 and len({u.group for u in few}) == 6  # every population in turn
    assert few == limit_units(units, 8, seed=0)
    assert [units.index(u) for u in few] == sorted(units.index(u) for u in few)


# -- the text detectors ----------------------------------------------------------------------


def test_lexical_cues() -> None:
    s = subject(["I adopted a dog called Biscuit", "lovely", "work was long today"])
    texts = {
        "do you remember what I said about it?": ["recall"],
        "how did the interview go": ["outcome", "past question"],
        "it went well!": ["outcome"],
        "still can't sleep": ["continuation"],
        "yesterday was rough": ["temporal"],
        "What did she adopt?": ["past question"],
        "walked Biscuit again": ["continuation", "known name"],
        "Biscuit is asleep": [],  # sentence start: not taken as a name
        "I met Zoe": [],  # a name never seen before
        "The dog ate Ana's sock": [],  # stop words and the speaker's own name are not names
        "just sitting on the sofa": [],
    }
    probes = [probe(t, 3) for t in texts]
    for (text, cues), got in zip(texts.items(), det.lexical_scores(s, probes), strict=True):
        assert got.detail["cues"] == sorted(cues), text
        expected = 1.0 - math.prod(1.0 - weight(c) for c in cues)
        assert got.score == pytest.approx(expected), text
    both = det.lexical_scores(s, [probe("you said yesterday", 3)])[0].score
    assert both == pytest.approx(1 - 0.4 * 0.7)
    assert det.lexical_scores(s, [probe("walked Biscuit", 0)])[0].score == 0.0  # not yet said


def weight(cue: str) -> float:
    return (
        det.NAME_WEIGHT
        if cue == "known name"
        else next(c.weight for c in det.CUES if c.name == cue)
    )


def brute_bm25_confidence(
    history: list[str], query: str, k1: float = 1.5, b: float = 0.75
) -> float:
    docs = [tokenize(t) for t in history]
    words = tokenize(query)
    if not docs or not words:
        return 0.0
    n, avgdl = len(docs), sum(map(len, docs)) / len(docs)

    def idf(t: str) -> float:
        df = sum(t in d for d in docs)
        return math.log1p((n - df + 0.5) / (df + 0.5))

    def score(d: list[str]) -> float:
        return sum(
            idf(t) * d.count(t) * (k1 + 1) / (d.count(t) + k1 * (1 - b + b * len(d) / avgdl))
            for t in words
        )

    return min(1.0, max(score(d) for d in docs) / sum(idf(t) for t in words))


def test_bm25_confidence_is_the_formula() -> None:
    texts = [
        "my sister Jo is getting married in June",
        "congratulations! are you in the wedding party",
        "maid of honour, I have to give a speech at the wedding",
        "that's a big honour",
        "the cat knocked a plant over",
        "wedding speech draft is going nowhere, Jo keeps texting",
        "unrelated words entirely",
    ]
    s = subject(texts)
    probes = [probe(texts[c], c) for c in range(len(texts))] + [probe("wedding wedding zebra", 5)]
    confidence, top = det.bm25_evidence(s, probes, 3)
    for p, got in zip(probes, confidence, strict=True):
        assert got == pytest.approx(brute_bm25_confidence(texts[: p.cutoff], p.text)), p.text
    assert confidence[0] == 0.0  # no history
    assert set(top[7][top[7] >= 0]) <= {1, 2}  # only messages before the cutoff that match
    assert "the" in STOPWORDS and det.bm25_evidence(s, [probe("the and", 4)], 3)[0][0] == 0.0


# -- end to end without a model ---------------------------------------------------------------


def test_sample_end_to_end_and_resume(tmp_path: Path) -> None:
    ds = load_dataset("sample")
    result = run_track(DETECTION, ds, tmp_path, FAST).result()
    assert set(result.summary) == {"lexical", "bm25"}
    for name in ("lexical", "bm25"):
        assert set(result.summary[name]) == ALL_FIGURES
        for contrast in CONTRASTS:
            e = result.summary[name][contrast]
            assert 0.0 <= e.ci_low <= e.value <= e.ci_high <= 1.0, (name, contrast)
        leak = result.summary[name][LEAKAGE]
        assert -1.0 <= leak.ci_low <= leak.value <= leak.ci_high <= 1.0
        op = result.contrasts[name]["auroc vs own target"].threshold
        hand = hand_groups()
        negatives = hand[COLD] + hand[RECENT] + hand[ABSENT]
        assert (op.n_pos, op.n_neg) == (hand[NEEDS], negatives)
        assert op.caught + op.missed == hand[NEEDS]
    assert result.empty == {}
    assert result.usage["roles"] == {} and result.usage["total"]["calls"] == 0

    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["track"] == "detection"
    assert manifest["config"]["detectors"] == ["lexical", "bm25"]  # the default, as run
    assert manifest["roles"] == {}
    assert manifest["resolved"]["prompt_sha256"] == PROMPT_SHA256
    assert manifest["resolved"]["cues_sha256"] == det.CUES_SHA256
    items = [json.loads(x) for x in (tmp_path / "items.jsonl").read_text().splitlines()]
    assert len(items) == 2 * sum(hand_groups().values())  # each probe, by both detectors
    assert {"detector", "probe", "population", "label", "score", "track"} <= set(items[0])
    assert {r["population"] for r in items if r["label"]} == {NEEDS, QUESTION}
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert set(summary["bm25"]["auroc vs cold opens"]) == {"value", "ci_low", "ci_high", "n"}
    pops = json.loads((tmp_path / "populations.json").read_text())
    assert pops["populations"][NEEDS] == hand_groups()[NEEDS] and pops["empty"] == {}
    contrasts = json.loads((tmp_path / "contrasts.json").read_text())
    absent = contrasts["lexical"]["auroc vs referent absent"]["threshold"]["n_neg"]
    assert absent == hand_groups()[ABSENT]

    part = tmp_path / "parts" / "solved.jsonl"
    units = [json.loads(x) for x in part.read_text().splitlines()]
    assert [u["unit"] for u in units] == ["lexical", "bm25"]  # one unit per detector
    part.write_text(json.dumps(units[0]) + "\n")  # as if stopped before bm25 finished
    again = run_track(DETECTION, ds, tmp_path, FAST).result()
    lines = [json.loads(x) for x in part.read_text().splitlines()]
    assert lines[0] == units[0] and [u["unit"] for u in lines] == ["lexical", "bm25"]
    assert to_json(again.summary) == to_json(result.summary)


def test_locomo_questions_against_session_openers(locomo_dir: Path, tmp_path: Path) -> None:
    ds = load_locomo(locomo_dir)
    result = run_track(DETECTION, ds, tmp_path, DetectionConfig(n_boot=500)).result()
    sessions = sum(len({m.session for m in s.messages}) for s in ds.subjects)
    assert result.populations[QUESTION] == 1986
    assert result.populations[OPENER] == sessions
    key = "question auroc vs session openers"
    for name in ("lexical", "bm25"):
        e = result.summary[name][key]
        assert e.n == 1986 + sessions
        assert e.ci_low < e.value < e.ci_high and e.ci_high - e.ci_low < 0.12
    assert result.summary["bm25"][key].value > 0.75  # authored questions share words with the past
    # LoCoMo has no chat items: each chat contrast is there, null, and says why
    assert set(result.empty) == ALL_FIGURES - {key}
    assert "needs memory" in result.empty["auroc vs cold opens"]
    assert math.isnan(result.summary["lexical"]["auroc vs cold opens"].value)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["bm25"]["auroc vs referent absent"]["value"] is None
    assert any("auroc vs cold opens" in w for w in result.warnings)


def test_bad_configurations_fail_before_any_work(tmp_path: Path) -> None:
    ds = load_dataset("sample")
    with pytest.raises(ValueError, match="unknown detector"):
        run_track(DETECTION, ds, tmp_path, DetectionConfig(detectors=("lexical", "psychic")))
    with pytest.raises(ValueError, match="need a model"):
        run_track(DETECTION, ds, tmp_path, DetectionConfig(detectors=("model-context",)))
    with pytest.raises(ValueError, match="threshold"):
        run_track(DETECTION, ds, tmp_path, DetectionConfig(threshold=1.5))
    with pytest.raises(ValueError, match="limit"):
        run_track(DETECTION, ds, tmp_path, DetectionConfig(limit=0))
    assert not (tmp_path / "manifest.json").exists()


# -- model detectors against a scripted server ------------------------------------------------

_NEW = re.compile(r"<new_message>\n(.*?)\n</new_message>", re.DOTALL)


class Scripted:
    """Answers like a perfect detector, except for `broken` probes, which get no JSON."""

    def __init__(self, positives: set[str], broken: set[str]) -> None:
        self.positives, self.broken = positives, broken

    def __call__(self, body: dict[str, Any]) -> str:
        prompt = next(m["content"] for m in body["messages"] if m["role"] == "user")
        shown = _NEW.search(prompt)
        assert shown is not None
        text = shown.group(1)
        if any(text.endswith(b) for b in self.broken):
            return "I think it probably does need memory."
        yes = any(text.endswith(p) for p in self.positives)
        return json.dumps({"needs_memory": yes, "likelihood": 9 if yes else 1})


def test_model_detectors_against_a_scripted_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    ds = load_dataset("sample")
    units = build_units(ds)
    positives = {u.probe.text.strip() for u in units if u.positive}
    absent = [u.probe.text.strip() for u in units if u.group == ABSENT][-2:]  # BM25 finds some
    question = next(u.probe.text.strip() for u in units if u.group == QUESTION)
    script = Scripted(positives, set(absent) | {question})
    with ChatServer(reply=script) as srv:
        config = DetectionConfig(n_boot=200)  # every detector: the default with a model
        model = RoleSpec("openai-compatible/scripted", base_url=srv.base_url)
        out = tmp_path / "run"
        result = run_track(DETECTION, ds, out, config, {"model": model}).result()
        asked = srv.request_count
        for name in MODEL_DETECTORS:
            # 2 referent-absent probes and 1 question unscored: counted, left out, not 0
            assert result.unscored[name][ABSENT] == 2 and result.unscored[name][QUESTION] == 1
            assert sum(result.unscored[name].values()) == 3
            absent_contrast = result.contrasts[name]["auroc vs referent absent"]
            hand = hand_groups()
            assert absent_contrast.unscored_neg == 2
            assert absent_contrast.auroc.n == hand[NEEDS] + hand[ABSENT] - 2
            assert result.contrasts[name]["auroc vs own target"].own_decision is not None
        # a session opener that needs memory is a positive chat probe and, as the same
        # message, a negative of the question contrast: the perfect need detector flags it
        openers = [u.probe.text.strip() for u in units if u.group == OPENER]
        flagged = sum(t in positives for t in openers)
        question_auroc = (len(openers) - flagged + 0.5 * flagged) / len(openers)
        assert 0 < flagged < len(openers)
        for contrast, e in result.summary["model-context"].items():
            if contrast == LEAKAGE:  # the question contrast minus a perfect own target
                assert e.value == pytest.approx(question_auroc - 1.0)
                continue
            if contrast == QUESTION_CONTRAST:
                assert e.value == pytest.approx(question_auroc)
                continue
            assert e.value == 1.0, contrast  # the script is a perfect need detector
            op = result.contrasts["model-context"][contrast]
            assert op.threshold.false_alarms == 0 and op.threshold.missed == 0
        assert result.summary["model-retrieved"]["auroc vs own target"].value > 0.9
        assert "unscored" in " ".join(result.warnings)

        rows = [json.loads(x) for x in (out / "items.jsonl").read_text().splitlines()]
        broken = [r for r in rows if r["detector"] == "model-context" and r["score"] is None]
        assert len(broken) == 3
        assert all(r["raw"].startswith("I think") and r["attempts"] == 2 for r in broken)
        assert all(r["error"] for r in broken)
        assert [r["detector"] for r in rows[:: len(units)]] == list(ALL_DETECTORS)
        parts = [json.loads(x) for x in (out / "parts" / "solved.jsonl").read_text().splitlines()]
        spent = {p["unit"]: p["usage"] for p in parts}
        assert spent["lexical"] == {} and spent["bm25"] == {}
        probes = sum(hand_groups().values())
        assert spent["model-context"]["model"]["calls"] == probes + 3  # a fix per broken reply
        assert spent["model-context"]["model"]["model"] == "openai-compatible/scripted"
        usage = json.loads((out / "usage.json").read_text())
        assert usage["roles"]["model"]["calls"] == asked
        assert usage["stages"]["solve"]["model"]["tokens_processed"] > 0

        # resume: the baselines are kept; each model detector had failed calls (its 3
        # unusable replies), so it is done again: its usable replies from the cache, the
        # unusable ones asked afresh (this script answers them the same way, 2 tries each)
        failed_again = len(MODEL_DETECTORS) * 3 * 2
        again = run_track(DETECTION, ds, out, config, {"model": model}).result()
        assert to_json(again.summary) == to_json(result.summary)
        assert srv.request_count == asked + failed_again
        fewer = run_track(
            DETECTION, ds, out, DetectionConfig(n_boot=100), {"model": model}
        ).result()
        assert srv.request_count == asked + 2 * failed_again
        assert fewer.usage["total"]["calls"] == asked
        # every call but the failed askings came from the cache
        assert fewer.usage["total"]["cached_calls"] == asked - failed_again
        assert fewer.usage["roles"]["model"]["failed_by_kind"] == {"unparseable": 6}
        # a new threshold moves the operating points only
        high = run_track(
            DETECTION, ds, out, DetectionConfig(n_boot=200, threshold=0.95), {"model": model}
        ).result()
        assert srv.request_count == asked + 3 * failed_again
        assert to_json(high.summary) == to_json(result.summary)
        # a fresh folder is answered from the cache: every usable reply was cached, and
        # no unusable one
        run_track(DETECTION, ds, tmp_path / "again", config, {"model": model})
        assert srv.request_count == asked + 4 * failed_again

    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["roles"]["model"]["model"] == "openai-compatible/scripted"
    assert manifest["resolved"]["prompt_sha256"] == PROMPT_SHA256


# -- the real embedded model ------------------------------------------------------------------


@pytest.mark.skipif(unavailable() is not None, reason=unavailable() or "")
def test_embedded_model_short_run(tmp_path: Path) -> None:
    ds = load_dataset("sample")
    model = Model.from_spec(ModelSpec.parse("embedded"), cache=None)
    config = DetectionConfig(detectors=ALL_DETECTORS, limit=3, max_tokens=24, n_boot=100)
    try:
        result = run_track(DETECTION, ds, tmp_path, config, {"model": model}).result()
    finally:
        asyncio.run(model.aclose())
    rows = [json.loads(x) for x in (tmp_path / "items.jsonl").read_text().splitlines()]
    assert len(rows) == 4 * 3
    for name in MODEL_DETECTORS:
        mine = [r for r in rows if r["detector"] == name]
        scored = [r for r in mine if r["score"] is not None]
        assert len(scored) + sum(result.unscored[name].values()) == 3
        assert all(0.0 <= r["score"] <= 1.0 for r in scored)
        assert all(r["raw"] for r in mine if r["score"] is None)
    assert result.usage["roles"]["model"]["model"] == "embedded"
    assert result.usage["roles"]["model"]["completion_tokens"] > 0
    e = result.summary["model-context"]["auroc vs own target"]
    assert np.isnan(e.value) or 0.0 <= e.value <= 1.0


# -- the proportional stratum, the reading and the cue-leakage contrast ----------------------


def test_proportional_contrasts_and_leakage_against_brute_force(tmp_path: Path) -> None:
    ds = load_dataset("sample")
    result = run_track(DETECTION, ds, tmp_path, FAST).result()
    units = build_units(ds)
    rows = [json.loads(x) for x in (tmp_path / "items.jsonl").read_text().splitlines()]
    for name in ("lexical", "bm25"):
        score = {(r["subject"], r["probe"], r["population"]): r["score"] for r in rows}
        by: dict[str, list[float]] = {}
        for u in units:
            s = score[(u.probe.subject_id, u.probe.id, u.group)]
            prop = u.probe.labels.get("stratum") == "proportional"
            by.setdefault(u.group + (" p" if prop else ""), []).append(s)
        del score
        mine = [r for r in rows if r["detector"] == name]
        assert len(mine) == len(units)
        got = {u_key(r): r["score"] for r in mine}
        pos_p = [got[k] for k in got if k[2] == NEEDS and k[3] == "proportional"]
        neg_p = [got[k] for k in got if k[2] in (ABSENT, RECENT, COLD) and k[3] == "proportional"]
        cold = [got[k] for k in got if k[2] == COLD]
        e = result.summary[name][f"auroc vs own target{PROPORTIONAL}"]
        assert e.value == pytest.approx(auroc(pos_p, neg_p)) and e.n == len(pos_p) + len(neg_p)
        op = result.contrasts[name][f"auroc vs own target{PROPORTIONAL}"].threshold
        assert op.caught == sum(x >= 0.5 for x in pos_p)
        assert op.false_alarms == sum(x >= 0.5 for x in neg_p)
        assert op.describe().startswith(f"{op.caught} of {len(pos_p)} caught, ")
        e = result.summary[name][f"auroc vs cold opens{PROPORTIONAL}"]
        assert e.value == pytest.approx(auroc(pos_p, cold))  # every cold open
        # leakage: question vs openers minus needs memory vs every other chat probe
        q = [got[k] for k in got if k[2] == QUESTION]
        o = [got[k] for k in got if k[2] == OPENER]
        pos = [got[k] for k in got if k[2] == NEEDS]
        neg = [got[k] for k in got if k[2] in (ABSENT, RECENT, COLD)]
        leak = result.summary[name][LEAKAGE]
        assert leak.value == pytest.approx(auroc(q, o) - auroc(pos, neg))
        assert leak.value == pytest.approx(
            result.summary[name]["question auroc vs session openers"].value
            - result.summary[name]["auroc vs own target"].value
        )
        q_seed, c_seed = np.random.SeedSequence([FAST.seed, 13]).generate_state(2)
        reps = auroc_replicates(q, o, n_boot=200, seed=int(q_seed)) - auroc_replicates(
            pos, neg, n_boot=200, seed=int(c_seed)
        )
        assert (leak.ci_low, leak.ci_high) == pytest.approx(tuple(np.percentile(reps, [2.5, 97.5])))
    assert (
        result.populations[f"{NEEDS}{PROPORTIONAL}"] == hand_groups(stratum="proportional")[NEEDS]
    )
    pops = json.loads((tmp_path / "populations.json").read_text())
    assert pops["reading"] == "recorded" and LEAKAGE in pops["contrasts"]


def u_key(r: dict[str, Any]) -> tuple[str, str, str, str]:
    return (r["subject"], r["probe"], r["population"], r.get("stratum", ""))


def test_strict_reading_moves_the_populations(tmp_path: Path) -> None:
    ds = load_dataset("sample")
    result = run_track(
        DETECTION, ds, tmp_path, DetectionConfig(n_boot=50, reading="strict")
    ).result()
    strict, recorded = hand_groups("strict"), hand_groups("recorded")
    assert {g: result.populations[g] for g in strict} == strict
    assert 0 < strict[NEEDS] < recorded[NEEDS]  # strict is the narrower reading
    assert sum(strict.values()) == sum(recorded.values())  # the others move, none is lost
    assert not math.isnan(result.summary["bm25"][LEAKAGE].value)
    e = bootstrap_auroc([0.9], [0.1], n_boot=10)
    assert e.value == 1.0  # the helper the track calls, on a trivially separable case


# -- memory systems (--memory) ---------------------------------------------------------------


def test_memory_detectors_read_what_the_system_recalled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    ds = load_dataset("sample")
    units = build_units(ds)
    positives = {u.probe.text.strip() for u in units if u.positive}
    specs = ("bm25", "full-context", NOTES_SPEC)
    config = DetectionConfig(detectors=("model-retrieved",), memory=specs, n_boot=100)
    out = tmp_path / "run"
    with ChatServer(reply=Scripted(positives, set())) as srv:
        model = RoleSpec("openai-compatible/scripted", base_url=srv.base_url)
        result = run_track(DETECTION, ds, out, config, {"model": model}).result()
        bodies = [b["messages"] for b in srv.requests]
        asked = srv.request_count
        run_track(DETECTION, ds, out, config, {"model": model})
        assert srv.request_count == asked  # resumed
    names = ["model-memory:bm25", "model-memory:full-context", "model-memory:notes"]
    assert list(result.summary) == ["model-retrieved", *names]
    for name in names:  # a perfect scripted reader of every probe it is shown
        assert result.summary[name]["auroc vs own target"].value > 0.9
        assert result.contrasts[name]["auroc vs own target"].own_decision is not None
    rows = [json.loads(x) for x in (out / "items.jsonl").read_text().splitlines()]
    assert [r["detector"] for r in rows[:: len(units)]] == ["model-retrieved", *names]
    subjects = {s.id: s for s in ds.subjects}
    sent = 0
    for k, name in enumerate(names):
        for u, r in zip(units, rows[(k + 1) * len(units) :], strict=False):
            assert r["detector"] == name and r["probe"] == u.probe.id
            s = subjects[u.probe.subject_id]
            pos = s.position_of()
            found = sorted(pos[i] for i in r["memory_ids"])
            assert all(p < u.probe.cutoff for p in found) and len(r["memory_ids"]) <= 3
            notes = [t["text"] for t in r["memory_texts"]]
            if name.endswith("full-context"):  # the last window of three, newest first
                cut = u.probe.cutoff
                assert found == list(range(max(0, cut - 3), cut))
            if name.endswith("notes"):
                assert r["memory_ids"] == [] and len(notes) == min(2, u.probe.cutoff)
            if not found and not notes:
                assert r["score"] == 0.0 and "recalled nothing" in r["note"]
                continue
            speaker = u.probe.speakers[0] if u.probe.kind == "chat" else None
            shown = [s.messages[p] for p in found]
            expected = memory_messages(shown, notes, u.probe.text, speaker)
            assert expected in bodies  # the model read exactly what was recalled
            sent += 1
    assert sent > 2 * len(units)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["memory"] == list(specs)
    assert manifest["resolved"]["memory budget"] == {"k": 3, "tokens": None}
    assert manifest["resolved"]["memory systems"]["model-memory:notes"] == NOTES_SPEC
    assert manifest["resolved"]["memory prompt_sha256"] == MEMORY_PROMPT_SHA256
    costs = json.loads((out / "memory_costs.json").read_text())
    assert list(costs["systems"]) == ["bm25", "full-context", "notes"]
    assert all(c["recall_ms"]["n"] == len(units) for c in costs["systems"].values())


def test_a_memory_detector_needs_a_model(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="model-memory:bm25 need a model"):
        run_track(DETECTION, load_dataset("sample"), tmp_path, DetectionConfig(memory=("bm25",)))


def test_the_bm25_detector_cuts_chinese_by_its_analyzer(tmp_path: Path) -> None:
    """Issue 26.7 for detection: under `auto` the bm25 detector cuts a Chinese subject into
    character bigrams, so each probe finds an earlier message it refers to; under `words`
    a whole Chinese clause is one term and it finds none. The run records the choice."""
    from dialogbench.retrieval.analyzers import ANALYZERS
    from dialogbench.retrieval.base import build_probes

    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "cjk_release"
    ds = load_dataset(str(fixture))
    zh = next(s for s in ds.subjects if s.id == "zh-1")
    probes = [p for p in build_probes(zh) if p.kind == "chat"]
    assert [p.id for p in probes] == ["m07", "m08"]
    refs = {"m07": {"m01", "m03"}, "m08": {"m04", "m06"}}  # chat.jsonl, by hand
    words = det.bm25_scores(zh, probes, 1, ANALYZERS["words"])
    assert [s.score for s in words] == [0.0, 0.0]
    assert all(s.detail["retrieved"] == [] for s in words)
    grams = det.bm25_scores(zh, probes, 1, ANALYZERS["bigrams"])
    for p, s in zip(probes, grams, strict=True):
        assert s.score is not None and s.score > 0
        assert set(s.detail["retrieved"]) <= refs[p.id] and s.detail["retrieved"]
    config = DetectionConfig(detectors=("bm25",), n_boot=50)
    run_track(DETECTION, ds, tmp_path, config)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    used = manifest["resolved"]["bm25 analyzer"]
    assert used["option"] == "auto" and used["subjects"] == {"bigrams": 2, "words": 1}
    rows = [json.loads(x) for x in (tmp_path / "items.jsonl").read_text().splitlines()]
    got = {r["probe"]: r for r in rows if r["subject"] == "zh-1" and r["probe"] in refs}
    assert {k: set(r["retrieved"]) <= refs[k] and bool(r["retrieved"]) for k, r in got.items()} == {
        "m07": True,
        "m08": True,
    }
