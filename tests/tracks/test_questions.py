"""The question track: contexts (full, retrieval, fallback), answering and judging against a
scripted loopback server, LoCoMo's official scores per category, and a short run of the real
embedded model."""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from dialogbench.cli import app
from dialogbench.data.locomo import load_locomo
from dialogbench.data.model import Dataset, Message, Question, Role, Subject
from dialogbench.data.registry import load_dataset
from dialogbench.judging.prompts import JUDGE_SYSTEM
from dialogbench.models import Model, ModelSpec
from dialogbench.models.embedded import unavailable
from dialogbench.runner import OptionError, Outcome, RoleSpec, check, run_track
from dialogbench.scoring.locomo import CATEGORY_NAMES, open_domain_gold
from dialogbench.testing import ChatServer
from dialogbench.tracks.realcompanion import questions_prompts as qp
from dialogbench.tracks.realcompanion.questions import (
    QUESTIONS,
    QuestionsConfig,
    QuestionsTrack,
    build_asked,
    limit_asked,
    shown,
    uses_official,
)
from tracks.memory_support import FLAKY_SPEC, NOTES_SPEC, Flaky


class Words:
    """A deterministic token counter: one token per whitespace-separated word."""

    name = "words"

    def count(self, texts: Sequence[str]) -> np.ndarray:
        return np.array([len(t.split()) for t in texts], dtype=np.int64)

    def overhead(self, role: Role) -> int:
        return 5


def tiny_subject() -> Subject:
    texts = [
        "my dog Biscuit loves the beach",
        "what breed is Biscuit",
        "a greyhound, retired from racing",
        "lovely",
        "work was long today",
        "Biscuit stole a sandwich at the beach",
    ]
    start = datetime(2024, 3, 1, 9, 0)
    messages = [
        Message(
            id=f"m{i}",
            position=i,
            speaker="Ana" if i % 2 == 0 else "Bo",
            text=t,
            timestamp=start + timedelta(days=i),
        )
        for i, t in enumerate(texts)
    ]
    questions = [
        Question(id="q1", category="facts", text="What breed is Biscuit?", answer="greyhound"),
        Question(
            id="q2",
            category="facts",
            text="Where does Biscuit love to go?",
            answer="the beach",
            after_id="m2",
        ),
    ]
    return Subject(id="s", messages=messages, questions=questions)


# -- contexts ------------------------------------------------------------------------------


def test_retrieval_is_chronological_and_before_the_question() -> None:
    s = tiny_subject()
    q1, q2 = build_asked(s, 3, Words(), max_tokens=10)
    assert q1.cutoff == 6 and q2.cutoff == 3
    assert list(q1.retrieved) == sorted(q1.retrieved) and 5 in q1.retrieved
    assert all(p < 3 for p in q2.retrieved) and q2.retrieved == (0, 1)  # m2 has no "beach"
    assert build_asked(s, 3, None, 10)[0].full_tokens is None  # no counter: not estimated


def test_full_context_and_its_fallback() -> None:
    s = tiny_subject()
    q1, q2 = build_asked(s, 2, Words(), max_tokens=10)
    assert q1.full_tokens is not None and q2.full_tokens is not None
    lines = sum(len(qp.render(m).split()) + 1 for m in s.messages)
    assert q1.full_tokens > lines + 10  # history, fixed prompt, overheads, the answer
    assert shown(q1, "full", 10_000) == ("full", tuple(range(6)))
    assert shown(q1, "full", q1.full_tokens) == ("full", tuple(range(6)))
    assert shown(q1, "full", q1.full_tokens - 1) == ("retrieval", q1.retrieved)  # fell back
    assert shown(q2, "full", q1.full_tokens - 1) == ("full", (0, 1, 2))  # shorter history
    assert shown(q1, "retrieval", 10_000) == ("retrieval", q1.retrieved)


def test_prompt_shows_date_speaker_and_the_way_out() -> None:
    s = tiny_subject()
    msgs = qp.answer_messages([qp.render(s.messages[2])], "retrieval", "What breed?")
    user = msgs[1]["content"]
    assert "2024-03-03 Ana: a greyhound, retired from racing" in user
    assert qp.HEADINGS["retrieval"] in user and qp.NOT_AVAILABLE in user
    assert "(no messages)" in qp.answer_messages([], "full", "x")[1]["content"]
    assert len(qp.PROMPT_SHA256) == 64


def test_limit_draws_across_categories() -> None:
    asked = [a for s in load_dataset("sample").subjects for a in build_asked(s, 5, None, 10)]
    few = limit_asked(asked, 5, seed=0)
    assert len(few) == 5 and len({a.question.category for a in few}) == 5
    assert few == limit_asked(asked, 5, seed=0)


def test_bad_configurations_fail_early(tmp_path: Path) -> None:
    with pytest.raises(OptionError, match="--systems"):
        check(QuestionsConfig(systems=("oracle",)))
    with pytest.raises(OptionError, match="--k"):
        check(QuestionsConfig(k=0))
    with pytest.raises(ValueError, match="needs a model"):
        run_track(QUESTIONS, load_dataset("sample"), tmp_path, QuestionsConfig())
    embedded = RoleSpec("embedded")
    with pytest.raises(OptionError, match="twice"):
        config = QuestionsConfig(systems=("retrieval", "retrieval"))
        run_track(QUESTIONS, load_dataset("sample"), tmp_path, config, {"model": embedded})
    assert not (tmp_path / "manifest.json").exists()


# -- against a scripted server -------------------------------------------------------------

_TAG = {
    name: re.compile(rf"<{name}>\n(.*?)\n</{name}>", re.DOTALL)
    for name in ("question", "candidate", "reference", "context")
}


def _tag(name: str, text: str) -> str | None:
    found = _TAG[name].search(text)
    return found.group(1) if found else None


class Scripted:
    """Answers from `answers` (question text -> answer); judges by exact match, and abstention
    by the phrase; replies without JSON when judging a candidate in `broken`."""

    def __init__(self, answers: dict[str, str], broken: frozenset[str] = frozenset()) -> None:
        self.answers, self.broken = answers, broken

    def __call__(self, body: dict[str, Any]) -> str:
        system = body["messages"][0]["content"]
        prompt = body["messages"][1]["content"]
        if system == qp.ANSWER_SYSTEM:
            question = _tag("question", prompt)
            assert question is not None
            return self.answers.get(question, "I don't know.")
        assert system == JUDGE_SYSTEM
        candidate = _tag("candidate", prompt) or ""
        if candidate in self.broken:
            return "It looks right to me."
        reference = _tag("reference", prompt)
        if reference is None:  # the abstention rubric
            declined = "no information available" in candidate.lower()
            return json.dumps({"reason": "checked", "abstains": int(declined)})
        right = candidate.lower() == reference.lower()
        return json.dumps({"reason": "compared", "correct": 2 if right else 0})


def sample_answers(ds: Dataset) -> tuple[dict[str, str], list[Question]]:
    """Right answers to half the answerable questions, wrong ones to the rest, and the
    abstention phrase for the unanswerable ones."""
    answers: dict[str, str] = {}
    questions = [q for s in ds.subjects for q in s.questions]
    for i, q in enumerate(questions):
        if not q.answerable:
            answers[q.text.strip()] = qp.NOT_AVAILABLE
        else:
            answers[q.text.strip()] = (q.answer or "") if i % 2 == 0 else "Something else."
    return answers, questions


def test_scripted_run_on_the_sample(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    ds = load_dataset("sample")
    answers, questions = sample_answers(ds)
    broken_q = next(q for i, q in enumerate(questions) if q.answerable and i % 2 == 0)
    broken = frozenset({broken_q.answer or ""})
    asked = [a for s in ds.subjects for a in build_asked(s, 10, Words(), 64)]
    sizes = sorted(a.full_tokens or 0 for a in asked)
    budget = sizes[len(sizes) // 4]  # about a quarter fit the budget; the rest fall back
    with ChatServer(reply=Scripted(answers, broken)) as srv:
        model = RoleSpec("openai-compatible/scripted", base_url=srv.base_url)
        # the official scorer on: the sample holds categories of its own besides LoCoMo's
        config = QuestionsConfig(context_tokens=budget, n_boot=200, official=True)
        out = tmp_path / "run"
        result = run_track(QuestionsTrack(Words()), ds, out, config, {"model": model}).result()
        asked_requests = srv.request_count
        again = run_track(QuestionsTrack(Words()), ds, out, config, {"model": model}).result()
        assert again.summary.keys() == {"full", "retrieval"}
        # resumed: only the two unusable verdicts (failed judge calls) are asked again,
        # 3 tries each (this script answers them the same way)
        failed_again = 2 * 3
        assert srv.request_count == asked_requests + failed_again
        fewer = replace(config, n_boot=100)  # an aggregation setting: no other call
        run_track(QuestionsTrack(Words()), ds, out, fewer, {"model": model})
        assert srv.request_count == asked_requests + 2 * failed_again

    n = len(questions)
    assert result.official and not uses_official(ds, QuestionsConfig())  # forced on
    locomo = {"single-hop", "multi-hop", "temporal", "open-domain", "adversarial"}
    # our own categories, and the answerable "adversarial" ones (a false premise)
    not_locomo = sum(q.category not in locomo for q in questions)
    false_premise = sum(q.category == "adversarial" and q.answerable for q in questions)
    assert not_locomo > 0 and false_premise == 2
    for system in ("full", "retrieval"):
        c = result.counts[system]
        assert c["questions"] == n and c["answer_failed"] == 0
        assert c["judge_unscored"] == 1  # the invalid verdict: counted, not 0
        assert c["official_not_applicable"] == not_locomo + false_premise
    fit = sum(1 for s in sizes if s <= budget)
    assert result.counts["full"]["fell_back"] == n - fit > 0
    assert result.counts["retrieval"]["fell_back"] == 0

    rows = [json.loads(x) for x in (out / "items.jsonl").read_text().splitlines()]
    assert len(rows) == 2 * n
    unscored = [r for r in rows if r["judge_model"] and not r["judged"]]
    assert len(unscored) == 2 and all(r["judge_raw"].startswith("It looks") for r in unscored)
    assert all(r["judge"] is None and r["judge_error"] for r in unscored)
    assert all(r["judge_scores"] is None for r in unscored)
    assert all(r["judge_attempts"] == 3 for r in unscored)  # two corrections, then given up
    for r in rows:  # the figure `judge` is the rubric's one score scaled to [0, 1]
        if r["judged"]:
            (dimension,) = r["judge_scores"]
            rubric = qp.CORRECTNESS_RUBRIC if r["answerable"] else qp.ABSTENTION_RUBRIC
            assert r["judge_rubric"] == rubric.name and dimension == rubric.dimensions[0].name
            dim = rubric.dimensions[0]
            assert r["judge"] == (r["judge_scores"][dim.name] - dim.low) / (dim.high - dim.low)
    full_rows = [r for r in rows if r["system"] == "full"]
    assert {r["shown"] for r in full_rows} == {"full", "retrieval"}
    assert all(len(r["context_ids"]) <= 10 for r in full_rows if r["shown"] == "retrieval")

    s = result.summary["retrieval"]
    right = sum(1 for i, q in enumerate(questions) if q.answerable and i % 2 == 0 and q != broken_q)
    scored = sum(1 for q in questions if q.answerable) - 1
    assert s["answerable"]["judge"].value == pytest.approx(right / scored)
    assert s["answerable"]["judge"].n == scored
    assert s["unanswerable"]["judge"].value == 1.0 and s["unanswerable"]["judge"].n == 6
    assert s["unanswerable"]["abstention_rule"].value == 1.0
    assert s["category=adversarial"]["official_f1"].value == 1.0  # only the unanswerable ones
    assert s["category=adversarial"]["official_f1"].n == 6
    assert math.isnan(s["category=adversarial"]["set_f1"].value)
    assert 0.0 < s["all"]["official_f1"].value < 1.0
    assert set(s) >= {"all", "answerable", "unanswerable", "category=temporal"}

    usage = json.loads((out / "usage.json").read_text())
    assert usage["stages"]["solve"]["model"]["calls"] == 2 * n
    assert usage["stages"]["score"]["judge"]["calls"] == 2 * (n + 2)  # 2 corrections each
    assert usage["total"]["tokens_processed"] > 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["resolved"]["prompt_sha256"] == qp.PROMPT_SHA256
    assert manifest["roles"]["model"]["model"] == "openai-compatible/scripted"
    assert manifest["roles"]["judge"] == {"same_as": "model"}
    assert manifest["resolved"]["tokenizer name"] == "words"
    solved = [json.loads(x) for x in (out / "parts" / "solved.jsonl").read_text().splitlines()]
    assert len(solved) == 2 * n and all(len(u["rows"]) == 1 for u in solved)
    assert QUESTIONS.judgments(rows) == {
        f"{r['system']}/{r['subject']}/{r['question']}": r["judge"]
        for r in rows
        if r["judge"] is not None
    }
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["full"]["all"]["judge"]) == {"value", "ci_low", "ci_high", "n"}
    assert json.loads((out / "counts.json").read_text())["counts"]["full"]["judge_unscored"] == 1


def test_a_separate_judge_and_no_official_scorer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    monkeypatch.setenv("JUDGE_KEY", "sk-judge-secret")
    ds = Dataset(name="tiny", subjects=[tiny_subject()], sha256="x", source="test")
    assert not uses_official(ds, QuestionsConfig())
    answers = {"What breed is Biscuit?": "greyhound"}
    with ChatServer(reply=Scripted(answers)) as answerer, ChatServer(reply=Scripted({})) as judge:
        config = QuestionsConfig(systems=("retrieval",), n_boot=100)
        model = RoleSpec("openai-compatible/answerer", base_url=answerer.base_url)
        judge_spec = RoleSpec("openai-compatible/judge", judge.base_url, "JUDGE_KEY")
        out = tmp_path / "run"
        itself = run_track(
            QUESTIONS, ds, out, config, {"model": model}
        ).result()  # the model judges itself
        assert answerer.request_count == 4 and judge.request_count == 0
        result = run_track(
            QUESTIONS, ds, out, config, {"model": model, "judge": judge_spec}
        ).result()
        assert answerer.request_count == 4  # the answers were kept: only re-judged
        assert judge.request_count == 2
    assert itself.summary["retrieval"]["all"]["judge"].value == 0.5
    assert set(result.summary["retrieval"]["all"]) == {"judge", "abstention_rule"}
    assert result.summary["retrieval"]["all"]["judge"].value == 0.5  # one right, one "I don't know"
    assert result.usage["roles"]["judge"]["model"] == "openai-compatible/judge"
    assert QUESTIONS.headline(Outcome(summary=None, result=result)) == {
        "retrieval judge all": 0.5,
        "retrieval judge answerable": 0.5,
        "retrieval judge unanswerable": pytest.approx(math.nan, nan_ok=True),
    }
    text = (out / "manifest.json").read_text()
    assert "sk-judge-secret" not in text  # only the variable's name is recorded
    recorded = json.loads(text)["roles"]
    assert recorded["judge"]["api_key_env"] == "JUDGE_KEY"
    assert recorded["judge"]["model"] == "openai-compatible/judge"
    assert recorded["judge"]["base_url"] == judge_spec.base_url


# -- LoCoMo: the official scorer per category ------------------------------------------------


def test_locomo_official_scores_per_category(
    locomo_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    ds = load_locomo(locomo_dir)
    ds = ds.model_copy(update={"subjects": ds.subjects[:1]})
    answers: dict[str, str] = {}
    for q in ds.subjects[0].questions:
        gold = q.answer or ""
        right = open_domain_gold(gold) if q.category == "open-domain" else gold
        answers[q.text.strip()] = qp.NOT_AVAILABLE if not q.answerable else right
    with ChatServer(reply=Scripted(answers)) as srv:
        config = QuestionsConfig(systems=("retrieval",), limit=10, n_boot=100)
        model = RoleSpec("openai-compatible/scripted", base_url=srv.base_url)
        result = run_track(QUESTIONS, ds, tmp_path / "run", config, {"model": model}).result()
    s = result.summary["retrieval"]
    cats = {k for k in s if k.startswith("category=")}
    assert cats == {f"category={c}" for c in CATEGORY_NAMES}  # 2 of each of the 5
    for cat in cats:
        assert s[cat]["official_f1"].value == pytest.approx(1.0), cat
        assert s[cat]["official_f1"].n == 2
    assert s["all"]["official_f1"].value == pytest.approx(1.0)
    assert s["answerable"]["set_f1"].value == pytest.approx(1.0)
    assert result.counts["retrieval"]["official_not_applicable"] == 0


# -- the real embedded model ----------------------------------------------------------------


@pytest.mark.skipif(unavailable() is not None, reason=unavailable() or "")
def test_embedded_model_short_run(tmp_path: Path) -> None:
    ds = load_dataset("sample")
    model = Model.from_spec(ModelSpec.parse("embedded"), cache=None)
    config = QuestionsConfig(
        systems=("full",), k=3, limit=2, max_tokens=12, judge_max_tokens=48, max_fixes=0
    )
    try:
        result = run_track(
            QUESTIONS, ds, tmp_path, replace(config, n_boot=100), {"model": model}
        ).result()
    finally:
        asyncio.run(model.aclose())
    rows = [json.loads(x) for x in (tmp_path / "items.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(r["answer"] is not None for r in rows)
    # the sample's histories exceed the 4k budget (real SmolLM2 token counts): BM25 instead
    assert result.counts["full"]["fell_back"] == 2
    assert all(r["full_tokens_est"] > 4096 and len(r["context_ids"]) <= 3 for r in rows)
    judged = sum(1 for r in rows if r["judged"])
    assert judged + result.counts["full"]["judge_unscored"] == 2
    assert all(r["judge_raw"] for r in rows if not r["judged"])
    assert result.usage["roles"]["model"]["completion_tokens"] > 0
    assert result.usage["roles"]["judge"]["model"] == "embedded"


# -- memory systems (--memory) ---------------------------------------------------------------


def _bodies(srv: ChatServer) -> list[list[dict[str, str]]]:
    return [b["messages"] for b in srv.requests]


def test_memory_systems_answer_from_what_they_recall(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    ds = load_dataset("sample")
    answers, questions = sample_answers(ds)
    n = len(questions)
    specs = ("bm25", "full-context", NOTES_SPEC)
    config = QuestionsConfig(systems=("full",), memory=specs, context_tokens=100_000, n_boot=50)
    out = tmp_path / "run"
    with ChatServer(reply=Scripted(answers)) as srv:
        model = RoleSpec("openai-compatible/scripted", base_url=srv.base_url)
        result = run_track(QuestionsTrack(Words()), ds, out, config, {"model": model}).result()
        bodies = _bodies(srv)
        asked = srv.request_count
        run_track(QuestionsTrack(Words()), ds, out, config, {"model": model})
        assert srv.request_count == asked  # resumed: the memory units too
    systems = ["full", "memory:bm25", "memory:full-context", "memory:notes"]
    assert list(result.summary) == systems
    assert result.summary["memory:notes"]["all"]["evidence_cited"].n > 0
    assert "evidence_cited" not in result.summary["full"]["all"]
    rows = [json.loads(x) for x in (out / "items.jsonl").read_text().splitlines()]
    assert len(rows) == 4 * n
    by = {(r["system"], r["subject"], r["question"]): r for r in rows}
    subjects = {s.id: s for s in ds.subjects}
    for r in rows:
        if r["system"] == "full":
            assert "memory_ids" not in r  # the other systems' rows are as before
            continue
        assert r["shown"] == "memory" and r["memory_error"] is None
        assert r["memory_latency_ms"] >= 0 and r["memory_invalid_ids"] == []
        s = subjects[r["subject"]]
        q = next(q for q in s.questions if q.id == r["question"])
        pos = s.position_of()
        lines = [qp.render(s.messages[pos[i]]) for i in r["context_ids"]]
        assert [pos[i] for i in r["context_ids"]] == sorted(pos[i] for i in r["context_ids"])
        notes = [t["text"] for t in r["memory_texts"]]
        expected = qp.memory_answer_messages(lines, notes, q.text, q.asked_at)
        assert expected in bodies  # the model was shown exactly what the memory recalled
        full = by[("full", r["subject"], r["question"])]
        if r["system"] == "memory:full-context":  # the whole history fits: same as `full`
            assert full["shown"] == "full" and r["context_ids"] == full["context_ids"]
            assert r["evidence_cited"] in (True, None)
        if r["system"] == "memory:notes":  # text memories only, citing the last two messages
            assert r["context_ids"] == [] and r["memory_ids"] == []
            cutoff = len(full["context_ids"])
            last = [m.text for m in s.messages[max(0, cutoff - 2) : cutoff]][::-1]
            assert notes == [f"noted: {t}" for t in last]
            assert f"\n- noted: {last[0]}\n" in expected[1]["content"]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["memory"] == list(specs)
    assert manifest["config"]["memory_k"] is None and manifest["config"]["memory_tokens"] is None
    budget = manifest["resolved"]["memory budget"]
    assert budget["k"] is None and 0 < budget["tokens"] < 100_000
    assert manifest["resolved"]["memory systems"]["memory:notes"] == NOTES_SPEC
    assert manifest["resolved"]["memory prompt_sha256"] == qp.MEMORY_PROMPT_SHA256
    assert manifest["roles"]["model"]["model"] == "openai-compatible/scripted"
    costs = json.loads((out / "memory_costs.json").read_text())
    assert costs["budget"] == budget and set(costs["definitions"]) >= {"recall_ms"}
    assert list(costs["systems"]) == ["bm25", "full-context", "notes"]
    cutoffs: dict[str, int] = {}
    for r in by.values():
        if r["system"] == "full":
            cutoffs[r["subject"]] = max(cutoffs.get(r["subject"], 0), len(r["context_ids"]))
    for name, c in costs["systems"].items():
        assert c["recall_ms"]["n"] == n and c["recall_ms"]["p50"] >= 0
        assert c["messages_ingested"] == sum(cutoffs.values())  # fed once, up to the last
        assert c["invalid_ids"] == 0 and c["subjects_failed"] == {}
        mine = [r for r in rows if r["system"] == f"memory:{name}"]
        assert c["memories_per_query"] == pytest.approx(
            np.mean([len(r["memory_ids"]) + len(r["memory_texts"]) for r in mine])
        )
        assert c["context_tokens_per_query"] > 0
    assert costs["systems"]["notes"]["memories_per_query"] == 2
    counts = json.loads((out / "counts.json").read_text())["counts"]
    assert counts["memory:notes"]["memory_failed"] == 0 and "memory_failed" not in counts["full"]


def test_a_memory_budget_cuts_every_system_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    ds = load_dataset("sample")
    answers, _ = sample_answers(ds)
    config = QuestionsConfig(
        systems=("retrieval",), memory=("bm25", "full-context"), memory_k=3, n_boot=50
    )
    with ChatServer(reply=Scripted(answers)) as srv:
        model = RoleSpec("openai-compatible/scripted", base_url=srv.base_url)
        run_track(QuestionsTrack(Words()), ds, tmp_path / "k", config, {"model": model})
        tight = replace(config, memory_k=None, memory_tokens=25)
        run_track(QuestionsTrack(Words()), ds, tmp_path / "t", tight, {"model": model})
    for r in map(json.loads, (tmp_path / "k" / "items.jsonl").read_text().splitlines()):
        if r["system"] == "memory:full-context":  # the newest three, in conversation order
            assert len(r["context_ids"]) == 3
        if r["system"].startswith("memory:"):
            assert len(r["memory_ids"]) <= 3
    subjects = {s.id: s for s in ds.subjects}
    shown = []
    for r in map(json.loads, (tmp_path / "t" / "items.jsonl").read_text().splitlines()):
        if r["system"].startswith("memory:"):
            s = subjects[r["subject"]]
            pos = s.position_of()
            used = sum(len(qp.render(s.messages[pos[i]]).split()) + 1 for i in r["context_ids"])
            assert used <= 25  # each line with its break, by the run's counter
            shown.append(used)
    assert max(shown) > 15  # the budget is used, not merely respected
    costs = json.loads((tmp_path / "t" / "memory_costs.json").read_text())
    assert costs["budget"] == {"k": None, "tokens": 25}
    assert all(c["context_tokens_per_query"] <= 25 for c in costs["systems"].values())


def test_a_failing_memory_system_fails_its_units_and_a_rerun_retries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    ds = load_dataset("sample")
    answers, _ = sample_answers(ds)
    down = ds.subjects[0].id
    monkeypatch.setattr(Flaky, "fail_on", {down})
    out = tmp_path / "run"
    argv = [
        "run", "questions", "--dataset", "sample", "--systems", "retrieval", "--memory",
        f"{FLAKY_SPEC},bm25", "--n-boot", "50", "--out", str(out),
    ]  # fmt: skip
    with ChatServer(reply=Scripted(answers)) as srv:
        url = ["--model", "openai-compatible/scripted", "--base-url", srv.base_url]
        got = CliRunner().invoke(app, [*argv, *url])
        assert got.exit_code == 3, got.output
        assert "Traceback" not in got.output
        rows = [json.loads(x) for x in (out / "items.jsonl").read_text().splitlines()]
        mine = len(ds.subjects[0].questions)
        flaky = {r["subject"] for r in rows if r["system"] == "memory:flaky"}
        assert rows and down not in flaky  # never scored 0
        warned = json.loads((out / "warnings.json").read_text())
        assert warned["failures"] == {  # its replay; its questions and its recall unit
            "failed memory calls": 1,
            "units not finished (a call failed)": mine + 1,
        }
        assert any("memory service is down" in w for w in warned["warnings"])
        counts = json.loads((out / "counts.json").read_text())["counts"]
        assert counts["memory:flaky"]["answer_failed"] == 0
        costs = json.loads((out / "memory_costs.json").read_text())["systems"]
        assert list(costs["flaky"]["subjects_failed"]) == [down]
        usage = json.loads((out / "usage.json").read_text())["roles"]["memory"]
        assert usage["failed_calls"] == 1 and usage["failed_by_kind"] == {"other": 1}
        assert usage["latency_ms"]["timed_calls"] > 0
        before = srv.request_count
        monkeypatch.setattr(Flaky, "fail_on", set())
        again = CliRunner().invoke(app, [*argv, *url])
        assert again.exit_code == 0, again.output
        # only the failed units are done again: their answers (their verdicts, on answers
        # another system gave word for word, come from the response cache)
        assert srv.request_count == before + mine
    rows = [json.loads(x) for x in (out / "items.jsonl").read_text().splitlines()]
    assert not any(r.get("memory_error") for r in rows)


def test_a_bad_memory_spec_is_a_usage_error(tmp_path: Path) -> None:
    got = CliRunner().invoke(
        app,
        ["run", "questions", "--dataset", "sample", "--model", "embedded", "--memory",
         "bm25,nosuch", "--out", str(tmp_path / "x")],
    )  # fmt: skip
    assert got.exit_code == 2 and "--memory" in got.output and "nosuch" in got.output
    twice = CliRunner().invoke(
        app,
        ["run", "questions", "--dataset", "sample", "--model", "embedded", "--memory",
         "bm25,bm25", "--out", str(tmp_path / "y")],
    )  # fmt: skip
    assert twice.exit_code == 2 and "named 'bm25'" in " ".join(twice.output.split())


def test_a_full_context_that_fell_back_is_flagged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 28.4: `full` answering from retrieval because the history did not fit is flagged
    with its count (here every question: it silently equalled `retrieval` before) in
    warnings.json, in the printed table's title and in the HTML report."""
    from rich.console import Console

    from dialogbench.report.html import write_report

    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    ds = load_dataset("sample")
    answers, _ = sample_answers(ds)
    asked = [a for s in ds.subjects for a in build_asked(s, 10, Words(), 64)]
    smallest = min(a.full_tokens or 0 for a in asked)
    config = QuestionsConfig(context_tokens=smallest - 1, n_boot=50, limit=6)
    out = tmp_path / "run"
    with ChatServer(reply=Scripted(answers)) as srv:
        model = RoleSpec("openai-compatible/scripted", base_url=srv.base_url)
        finished = run_track(QuestionsTrack(Words()), ds, out, config, {"model": model})
    rows = [json.loads(x) for x in (out / "items.jsonl").read_text().splitlines()]
    full = [r for r in rows if r["system"] == "full"]
    assert full and all(r["fell_back"] for r in full)  # none fits a budget below the smallest
    said = f"fell back to retrieval on {len(full)} of {len(full)} questions (all of them"
    assert finished.outcome.flags["full"].startswith(said)
    assert "retrieval" not in finished.outcome.flags
    flagged = json.loads((out / "warnings.json").read_text())["flagged"]
    assert flagged == finished.outcome.flags
    console = Console(record=True, width=200)
    for shown_item in QuestionsTrack(Words()).show(finished.outcome, config):
        console.print(shown_item)
    printed = " ".join(console.export_text().split())
    assert f"context 'full' (95% bootstrap intervals) ⚑ full: {said}" in printed
    page = write_report([out], tmp_path / "report.html").read_text()
    assert "Context cut or fell back" in page and said in page
