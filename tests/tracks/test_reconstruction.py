"""The reconstruction track: matching, chunking, merging, run agreement, a scripted loopback
server (perfect replies, unusable replies, chunked histories, resume), MemoryBank gold, and a
short run of the real embedded model."""

from __future__ import annotations

import asyncio
import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from dialogbench.data.memorybank import load_memorybank
from dialogbench.data.model import Dataset, Message, Subject
from dialogbench.data.registry import load_dataset
from dialogbench.models import Model, ModelSpec
from dialogbench.models.embedded import unavailable
from dialogbench.runner import run_track
from dialogbench.runner.roles import RoleSpec
from dialogbench.testing import ChatServer
from dialogbench.tracks.realcompanion import reconstruction_match as rm
from dialogbench.tracks.realcompanion.reconstruction import (
    RECONSTRUCTION,
    CharCounter,
    ReconstructionConfig,
    chunk_spans,
    compare_runs,
    fit_history,
    gold_records,
    history_budget,
    make_counter,
    merge,
    prompt_tokens,
    score_row,
    select_subjects,
)
from dialogbench.tracks.realcompanion.reconstruction_prompts import (
    ClaimReply,
    PersonaReply,
    Reconstruction,
    reconstruction_messages,
)

# -- matching ---------------------------------------------------------------------------------


def test_fields_and_statements_normalise() -> None:
    assert rm.norm_field("Hobbies") == rm.norm_field("hobby") == "hobby"
    assert rm.norm_field("Job") == rm.norm_field("occupations") == "occupation"
    assert rm.norm_field("Living_Situation") == "living situation"
    assert rm.norm_field("business") == "business"
    assert rm.content_words("Bakes the breads") == {"bake", "bread"}
    # {bake, sourdough, bread} vs {bake, sourdough, starter, call, gerald}: 2*2 / (3+5)
    assert rm.similarity("Bakes sourdough bread", "Bakes sourdough; a starter calls Gerald") == 0.5
    assert rm.similarity("", "anything") == 0.0


def test_lexical_matching_is_one_to_one_with_exact_counts() -> None:
    gold = [
        ("occupation", "graphic designer at a studio"),
        ("hobbies", "bouldering with Leah"),
        ("hobbies", "bakes sourdough bread"),
        ("pets", "greyhound called Biscuit"),
    ]
    pred = [
        ("Job", "graphic designer"),  # alias; {graphic, designer} vs + studio: 2*2/(2+3)
        ("hobby", "bakes sourdough bread at weekends"),  # best for the sourdough claim
        ("hobby", "bakes sourdough bread"),  # same gold claim: taken first (sim 1.0)
        ("family", "greyhound called Biscuit"),  # wrong field: no match
        ("pets", "a cat"),  # same field, nothing shared: below threshold
    ]
    pairs = rm.match(pred, gold, 0.25)
    assert [(i, j) for i, j, _ in pairs] == [(0, 0), (2, 2)]
    assert pairs[0][2] == pytest.approx(0.8)
    c = rm.count(pred, gold, 0.25)
    assert (c.matched, c.predicted, c.reference) == (2, 5, 4)
    assert (c.precision, c.recall) == (0.4, 0.5) and c.f1 == pytest.approx(4 / 9)
    # threshold 0: field matching only; the cat now matches the greyhound
    assert rm.count(pred, gold, 0.0).matched == 4
    empty = rm.count([], [], 0.25)
    assert math.isnan(empty.precision) and math.isnan(empty.recall) and math.isnan(empty.f1)
    assert rm.count([], gold, 0.25).f1 == 0.0


def test_run_agreement_is_mean_pairwise_f1() -> None:
    a = {"profile": [("pets", "dog Biscuit"), ("hobbies", "climbing")], "persona": []}
    b = {"profile": [("pets", "dog Biscuit")], "persona": [("humour", "dry jokes")]}
    c = {"profile": [("pets", "dog Biscuit"), ("hobbies", "climbing")], "persona": []}
    # a-b: 1 matched of 2 + 2 -> 0.5; a-c: identical -> 1; b-c: like a-b -> 0.5
    assert rm.pairwise_f1([a, b, c], 0.25) == [0.5, 1.0, 0.5]
    assert rm.pairwise_f1([a], 0.25) == []


def test_merge_drops_near_duplicates_across_chunks() -> None:
    first = Reconstruction(
        profile=[ClaimReply(field="pets", statement="Has a greyhound called Biscuit")],
        persona=[PersonaReply(dimension="humour", statement="Dry humour")],
    )
    second = Reconstruction(
        profile=[
            ClaimReply(field="Pets", statement="has a greyhound called Biscuit."),
            ClaimReply(field="family", statement="Has a greyhound called Biscuit"),
            ClaimReply(field="pets", statement="Walks the dog twice a day"),
        ],
        persona=[PersonaReply(dimension="humour", statement="Dry humour", hypothesis=True)],
    )
    merged = merge([first, second])
    assert [(c.field, c.statement) for c in merged.profile] == [
        ("pets", "Has a greyhound called Biscuit"),
        ("family", "Has a greyhound called Biscuit"),
        ("pets", "Walks the dog twice a day"),
    ]
    assert merged.persona == first.persona


# -- chunking ---------------------------------------------------------------------------------


def test_chunk_spans_boundaries() -> None:
    # each line costs its tokens + 1: 4, 4, 4, 4 -> two per chunk of 8
    assert chunk_spans([3, 3, 3, 3], 8) == [(0, 2), (2, 4)]
    assert chunk_spans([3, 3, 3, 3], 7) == [(0, 1), (1, 2), (2, 3), (3, 4)]
    assert chunk_spans([7, 0, 6], 8) == [(0, 1), (1, 3)]  # 8 exactly fills a chunk
    assert chunk_spans([], 8) == []
    with pytest.raises(ValueError, match="over the budget"):
        chunk_spans([3, 8], 8)


def long_subject(n: int) -> Subject:
    messages = [
        Message(
            id=f"m{i}",
            position=i,
            speaker="Ana" if i % 2 == 0 else "bot",
            role="user" if i % 2 == 0 else "assistant",
            text=("x" * 2000) if i == 7 else f"message number {i} about day {i // 4}",
        )
        for i in range(n)
    ]
    return Subject(id="ana", messages=messages, speakers=["Ana"])


def test_long_history_is_chunked_to_fit_the_context_budget() -> None:
    subject = long_subject(60)
    counter = CharCounter()
    config = ReconstructionConfig(context_tokens=700, max_tokens=100, max_fixes=0)
    budget = history_budget(counter, "Ana", config)
    assert 16 < budget < 400
    h = fit_history(subject, counter, budget)
    assert len(h.spans) > 3
    # contiguous, in order, every message once
    assert h.spans[0][0] == 0 and h.spans[-1][1] == 60
    assert all(a[1] == b[0] for a, b in zip(h.spans, h.spans[1:], strict=False))
    assert h.cut == ("m7",) and h.lines[7].endswith("[...]")
    for part, (a, b) in enumerate(h.spans, 1):
        prompt = reconstruction_messages("Ana", h.lines[a:b], part, len(h.spans))
        used = prompt_tokens(counter, prompt)
        assert used + config.max_tokens <= config.context_tokens
        costs = [int(x) + 1 for x in counter.count(h.lines[a : b + 1])]
        assert sum(costs[: b - a]) <= budget
        if b < 60:  # the next message would not have fitted
            assert sum(costs) > budget
    with pytest.raises(ValueError, match="raise context_tokens"):
        tight = ReconstructionConfig(context_tokens=400, max_tokens=100, max_fixes=0)
        fit_history(subject, counter, history_budget(counter, "Ana", tight))


# -- a scripted server ------------------------------------------------------------------------


def gold_reply(subject: Subject) -> str:
    return json.dumps(
        {
            "profile": [{"field": c.field, "statement": c.statement} for c in subject.profile],
            "persona": [
                {"dimension": e.dimension, "statement": e.statement, "hypothesis": e.hypothesis}
                for e in subject.persona
            ],
        }
    )


class Scripted:
    """Answers with a subject's released profile and persona, or prose for `broken` ones."""

    def __init__(self, dataset: Dataset, broken: set[str]) -> None:
        self.by_person = {s.speakers[0]: s for s in dataset.subjects}
        self.broken = broken

    def __call__(self, body: dict[str, Any]) -> str:
        text = "\n".join(m["content"] for m in body["messages"])
        person = next(p for p in self.by_person if f"Write {p}'s profile" in text)
        if person in self.broken:
            return "She seems lovely and works in design, I think."
        return gold_reply(self.by_person[person])


def test_scripted_server_perfect_and_unscored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    ds = load_dataset("sample")
    broken = ds.subjects[1].speakers[0]
    with ChatServer(reply=Scripted(ds, {broken})) as srv:
        config = ReconstructionConfig(
            runs=2,
            context_tokens=200_000,
            tokenizer="chars",
            n_boot=200,
        )
        model = RoleSpec("openai-compatible/scripted", base_url=srv.base_url)
        out = tmp_path / "run"
        result = run_track(RECONSTRUCTION, ds, out, config, {"model": model}).result()
        asked = srv.request_count
        assert asked == 2 * (1 + 2)  # per run: one call each, one correction for the broken
        for kind in ("profile", "persona", "all"):
            assert {m: e.value for m, e in result.summary[kind].items()} == {
                "precision": 1.0,
                "recall": 1.0,
                "f1": 1.0,
            }
            assert result.summary[kind]["f1"].n == 2  # the good subject's two runs
        assert result.summary["run agreement"]["f1"].value == 1.0
        assert result.unscored == {"pairs": 2, "of": 4, "by_subject": {ds.subjects[1].id: 2}}
        assert result.subjects[ds.subjects[1].id]["unscored runs"] == 2
        assert "unscored" in " ".join(result.warnings)
        rows = [json.loads(x) for x in (out / "items.jsonl").read_text().splitlines()]
        bad = [r for r in rows if not r["scored"]]
        assert len(bad) == 2 and all(r["attempts"] == [2] for r in bad)
        assert all(r["failed"][0]["raw"].startswith("She seems") for r in bad)
        usage = json.loads((out / "usage.json").read_text())
        assert usage["total"]["calls"] == 6 and usage["total"]["tokens_processed"] > 0
        assert usage["roles"]["model"]["model"] == "openai-compatible/scripted"
        assert set(usage["stages"]) == {"solve"}  # matching calls no model
        parts = [json.loads(x) for x in (out / "parts" / "solved.jsonl").read_text().splitlines()]
        assert sorted(p["unit"] for p in parts) == sorted(
            f"run-{r}/{s.id}" for r in range(2) for s in ds.subjects
        )
        assert compare_runs(out, out, n_boot=100).value == 1.0

        assert usage["roles"]["model"]["failed_by_kind"] == {"unparseable": 2}
        # resume: the good subject's runs are kept; the broken subject's two runs had a
        # failed call (the unusable reply) and are done again, each asked afresh (this
        # script answers the same way: 2 tries each); a new n_boot or threshold reuses the
        # saved outputs of the others
        failed_again = 2 * 2
        assert (
            run_track(RECONSTRUCTION, ds, out, config, {"model": model}).result().summary
            == result.summary
        )
        assert srv.request_count == asked + failed_again
        fewer = run_track(
            RECONSTRUCTION, ds, out, replace(config, n_boot=100), {"model": model}
        ).result()
        assert fewer.usage["total"]["cached_calls"] == 0
        strict = run_track(
            RECONSTRUCTION, ds, out, replace(config, threshold=1.0), {"model": model}
        ).result()
        assert strict.usage["total"]["cached_calls"] == 0
        assert srv.request_count == asked + 3 * failed_again
        assert json.loads((out / "manifest.json").read_text())["config"]["threshold"] == 1.0
        lexical = run_track(
            RECONSTRUCTION, ds, out, replace(config, matcher="lexical"), {"model": model}
        ).result()
        assert srv.request_count == asked + 4 * failed_again
        assert lexical.summary["all"]["f1"].value == 1.0
        assert json.loads((out / "manifest.json").read_text())["config"]["matcher"] == "lexical"
        run_track(RECONSTRUCTION, ds, out, config, {"model": model})
        # a fresh folder is answered from the cache, but for the unusable replies
        run_track(RECONSTRUCTION, ds, tmp_path / "again", config, {"model": model})
        asked += 6 * failed_again
        assert srv.request_count == asked

        # a tiny context budget: map over chunks, merge back to the released records
        chunked = ReconstructionConfig(
            context_tokens=3000,
            tokenizer="chars",
            n_boot=100,
            limit=1,
        )
        small = run_track(
            RECONSTRUCTION, ds, tmp_path / "chunked", chunked, {"model": model}
        ).result()
        row = json.loads((tmp_path / "chunked" / "items.jsonl").read_text())
        assert row["chunks"] > 1 and srv.request_count == asked + row["chunks"]
        assert small.summary["all"]["f1"].value == 1.0  # duplicates across chunks dropped
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["resolved"]["counter"] == "chars/4"
    # what the model wrote is kept in the release format, readable by the release loader
    good = ds.subjects[0]
    written = out / "written" / "run-0" / good.id
    assert (written / "profile.json").exists() and (written / "persona.json").exists()
    claims = json.loads((written / "profile.json").read_text())["claims"]
    assert len(claims) == len(good.profile)


def test_replies_become_release_records() -> None:
    from dialogbench.tracks.realcompanion.reconstruction import to_release
    from dialogbench.tracks.realcompanion.reconstruction_prompts import (
        ClaimReply,
        PersonaReply,
        Reconstruction,
    )

    subject = Subject(
        id="s",
        messages=[Message(id="m1", position=0, speaker="Ana", text="I teach maths.")],
    )
    reply = Reconstruction(
        profile=[
            ClaimReply(
                field="occupation",
                statement="Ana teaches maths.",
                confidence=0.8,
                valid_from="2024-03-01",
                valid_to="not a date",
                evidence_ids=["m1", "m404"],
            ),
        ],
        persona=[PersonaReply(dimension="values", statement="Cares.", grounds=["m1", "x"])],
    )
    profile, persona, dropped = to_release(subject, reply)
    assert profile[0].evidence_ids == ["m1"] and profile[0].confidence == 0.8
    assert profile[0].valid_from is not None and profile[0].valid_to is None
    assert persona[0].grounds == ["m1"] and dropped == 2


def test_bad_configurations_fail_early(tmp_path: Path) -> None:
    ds = load_dataset("sample")
    with pytest.raises(ValueError, match="needs a model"):
        run_track(RECONSTRUCTION, ds, tmp_path, ReconstructionConfig())
    embedded = RoleSpec("embedded")
    bad = ReconstructionConfig(tokenizer="x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="--tokenizer"):
        run_track(RECONSTRUCTION, ds, tmp_path, bad, {"model": embedded})
    with pytest.raises(ValueError, match="--threshold"):
        run_track(
            RECONSTRUCTION, ds, tmp_path, ReconstructionConfig(threshold=2.0), {"model": embedded}
        )
    with pytest.raises(ValueError, match="--runs"):
        run_track(RECONSTRUCTION, ds, tmp_path, ReconstructionConfig(runs=0), {"model": embedded})
    with pytest.raises(ValueError, match="unknown tokenizer"):
        make_counter("x")
    assert not (tmp_path / "manifest.json").exists()


# -- MemoryBank gold --------------------------------------------------------------------------


def test_memorybank_meta_information_is_the_gold(memorybank_dir: Path) -> None:
    ds = load_memorybank(memorybank_dir)
    subjects, _ = select_subjects(ds, 2)
    assert len(subjects) == 2
    gold = gold_records(subjects[0])
    fields = {rm.norm_field(f) for f, _ in gold["profile"]}
    assert {"name", "hobby"} <= fields
    assert {d for d, _ in gold["persona"]} <= {"personality", "speaking style"}
    written = Reconstruction.model_validate_json(gold_reply(subjects[0]))
    row = score_row(0, subjects[0], written, 0.25)
    assert row["f1"] == {"profile": 1.0, "persona": 1.0, "all": 1.0}
    partial = Reconstruction(profile=written.profile[:1])
    row = score_row(0, subjects[0], partial, 0.25)
    n_gold = len(gold["profile"]) + len(gold["persona"])
    assert row["precision"]["all"] == 1.0 and row["recall"]["all"] == 1 / n_gold
    assert row["precision"]["persona"] is None  # nothing written: undefined, not 0


# -- the real embedded model ------------------------------------------------------------------


@pytest.mark.skipif(unavailable() is not None, reason=unavailable() or "")
def test_embedded_model_short_run(tmp_path: Path) -> None:
    ds = load_dataset("sample")
    first = ds.subjects[0]
    short = first.model_copy(update={"messages": first.messages[:4]})
    ds = ds.model_copy(update={"subjects": [short]})
    model = Model.from_spec(ModelSpec.parse("embedded"), cache=None)
    config = ReconstructionConfig(
        context_tokens=1400, max_tokens=80, tokenizer="gguf", n_boot=50, max_fixes=0
    )
    try:
        result = run_track(RECONSTRUCTION, ds, tmp_path, config, {"model": model}).result()
    finally:
        asyncio.run(model.aclose())
    row = json.loads((tmp_path / "items.jsonl").read_text())
    assert row["chunks"] >= 1 and row["subject"] == first.id
    assert row["scored"] or (row["failed"] and result.unscored["pairs"] == 1)
    assert result.usage["roles"]["model"]["model"] == "embedded"
    assert result.usage["roles"]["model"]["completion_tokens"] > 0
    f1 = result.summary["all"]["f1"].value
    assert math.isnan(f1) or 0.0 <= f1 <= 1.0
