"""Answers produced elsewhere, re-judged: a file in our schema and one in mem0's shape,
matched to the dataset's questions and judged by a scripted loopback judge under the
lenient and strict rubrics, with LoCoMo's official F1 and the judge's calibration; the
category map; unmatched, ambiguous and repeated records; bad input."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from dialogbench.cli import app
from dialogbench.data.errors import DataError
from dialogbench.data.model import Dataset
from dialogbench.data.registry import load_dataset
from dialogbench.runner import RoleSpec, run_track
from dialogbench.scoring.locomo import locomo_score
from dialogbench.testing import ChatServer
from dialogbench.tracks.realcompanion import questions_prompts as qp
from dialogbench.tracks.realcompanion.answers import ANSWERS, AnswersConfig
from dialogbench.tracks.realcompanion.answers_file import (
    FIXES,
    AnswerRecord,
    Given,
    detect_category_map,
    match_answers,
    read_answers,
)
from tracks.answers_support import NUMBERS, answer_for, judge_reply, lenient, our_file, strict

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def expected(ds: Dataset, rule: Any) -> tuple[float, float]:
    """The judge score over the answerable questions, and the official F1 over the
    questions it applies to, computed here from the rules."""
    judged, f1 = [], []
    for s in ds.subjects:
        for i, q in enumerate(s.questions):
            a = answer_for(i, q.answer, q.answerable)
            if q.answerable:
                judged.append(float(rule(a, q.answer or "")))
            if q.category in NUMBERS and (q.category == "adversarial") != q.answerable:
                f1.append(locomo_score(a, q.answer, q.category))
    return float(np.mean(judged)), float(np.mean(f1))


def test_our_schema_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    ds = load_dataset("sample")
    file = tmp_path / "answers.jsonl"
    our_file(ds, file)
    out = tmp_path / "run"
    # the official F1 on: the sample holds categories of its own besides LoCoMo's
    config = AnswersConfig(answers=str(file), calibration=5, n_boot=200, official=True)
    with ChatServer(reply=judge_reply) as srv:
        judge = RoleSpec("openai-compatible/judge", base_url=srv.base_url)
        result = run_track(ANSWERS, ds, out, config, {"judge": judge}).result()
        asked = srv.request_count
        again = run_track(ANSWERS, ds, out, config, {"judge": judge}).result()
        assert srv.request_count == asked  # resumed: nothing judged twice
    assert again.summary.keys() == result.summary.keys()
    n = sum(len(s.questions) for s in ds.subjects)
    usage = json.loads((out / "usage.json").read_text())["stages"]["score"]["judge"]
    assert usage["calls"] == 2 * n + 2 * 2 * 5  # two rubrics per answer, 5 + 5 probes each
    assert asked == usage["calls"] - usage["cached_calls"]  # the same prompt is asked once

    s = result.summary
    for name, rule in (("lenient", lenient), ("strict", strict)):
        judge_mean, f1_mean = expected(ds, rule)
        assert s[name]["answerable"]["judge"].value == pytest.approx(judge_mean)
        assert s[name]["unanswerable"]["judge"].value == 1.0  # all declined
        assert s[name]["all"]["official_f1"].value == pytest.approx(f1_mean)
        assert s[name]["all"]["judge"].ci_low <= s[name]["all"]["judge"].value
    assert s["lenient"]["answerable"]["judge"].value > s["strict"]["answerable"]["judge"].value
    assert {"category=temporal", "category=single-hop"} <= set(s["strict"])

    rows = [json.loads(x) for x in (out / "items.jsonl").read_text().splitlines()]
    probes = [r for r in rows if "calibration" in r]
    for name, rule in (("lenient", lenient), ("strict", strict)):
        wrong = [r for r in probes if r["calibration"] == name and r["expected"] == "wrong"]
        assert len(wrong) == 5 and all(r["accepted"] is not None for r in wrong)
        want = np.mean([rule(r["candidate"], r["reference"]) for r in wrong])
        assert s["calibration"][name]["false_accept"].value == pytest.approx(want)
        assert s["calibration"][name]["false_reject"].value == 0.0  # the gold is accepted

    matching = json.loads((out / "matching.json").read_text())
    by_id, by_text = (len(s.questions) for s in ds.subjects)  # see our_file
    assert matching["matched"] == n and matching["matched_by"] == {"id": by_id, "text": by_text}
    assert len(matching["unmatched"]) == 1 and "1930" in matching["unmatched"][0]["why"]
    assert matching["unmatched"][0]["where"] == f"line {n + 1}"
    assert matching["ambiguous"][0]["where"] == f"line {n + 2}"
    assert len(matching["ambiguous"][0]["candidates"]) == 2
    assert matching["repeated"] == [{"where": f"line {n + 3}", "first": "line 1"}]
    assert matching["category_map"]["status"] == "ours"
    warned = " ".join(result.warnings)
    assert "fit no question" in warned and "several different questions" in warned

    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["track"] == "answers"
    assert manifest["config"]["answers_sha256"] == read_answers(file, "dialogbench").sha256
    assert manifest["resolved"]["answer systems"] == ["acme-memory"]
    assert manifest["resolved"]["answer models"] == ["acme/model-1"]
    counts = json.loads((out / "counts.json").read_text())
    assert counts["file"]["latency_s"]["n"] == n and counts["file"]["tokens"]["p50"] > 100


def test_score_cli_judges_a_file_and_rejudges_its_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    ds = load_dataset("sample")
    file = tmp_path / "answers.jsonl"
    our_file(ds, file)
    cli, run = CliRunner(), tmp_path / "run"
    with ChatServer(reply=judge_reply) as srv:
        judge = ["--judge-base-url", srv.base_url]
        args = [
            "score",
            "questions",
            "--answers",
            str(file),
            "--dataset",
            "sample",
            "--judge-model",
            "openai-compatible/j",
            *judge,
            "--calibration",
            "3",
            "--n-boot",
            "100",
            "--out",
            str(run),
        ]
        got = cli.invoke(app, args, terminal_width=200)
        assert got.exit_code == 0, got.output
        assert "judge lenient" in got.output and "false-accept" in got.output
        assert "unmatched 1, ambiguous 1, repeated 1" in got.output
        assert "fit no question of the dataset" in got.output  # the warnings are printed
        srv.reset()
        again = cli.invoke(
            app,
            [
                "score",
                str(run),
                "--judge-model",
                "openai-compatible/k",
                *judge,
                "--out",
                str(tmp_path / "k"),
            ],
        )
        assert again.exit_code == 0, again.output
        assert {b["model"] for b in srv.requests} == {"k"}
        panel = cli.invoke(
            app, [*args[:-1], str(tmp_path / "panel"), "--judge-model", "openai-compatible/k"]
        )
        assert panel.exit_code == 0, panel.output
    judges = json.loads((tmp_path / "panel" / "judges.json").read_text())
    assert judges["agreement"]["judges"] == ["openai-compatible_j", "openai-compatible_k"]
    assert judges["agreement"]["krippendorff_alpha"] == pytest.approx(1.0)  # same rules
    file.write_text(file.read_text() + "\n")
    with ChatServer(reply=judge_reply) as srv:
        changed = cli.invoke(
            app,
            [
                "score",
                str(run),
                "--judge-model",
                "openai-compatible/k",
                "--judge-base-url",
                srv.base_url,
                "--out",
                str(tmp_path / "k2"),
            ],
        )
    assert changed.exit_code == 2 and "has changed" in changed.output, changed.output
    helped = cli.invoke(app, ["score", "--help"], terminal_width=200).output
    assert "questions" in helped and "RUN_DIR" in helped and "Exit status" in helped


def test_mem0_shaped_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fixture is written by hand in the shape mem0's search script documents: the
    conversation's index -> results with question, answer (gold), category, evidence,
    response, memories and times; its evals script adds llm_score."""
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    ds = load_dataset("sample")
    file = FIXTURES / "mem0_results_sample.json"
    read = read_answers(file, "mem0")
    assert len(read.records) == 6 and read.records[0].where == "conversation '0', item 0"
    first = read.records[0].record
    assert first.subject == "0" and first.latency_s == pytest.approx(0.42 + 0.38 + 1.1)
    assert first.grade == 1
    with ChatServer(reply=judge_reply) as srv:
        judge = RoleSpec("openai-compatible/judge", base_url=srv.base_url)
        config = AnswersConfig(answers=str(file), format="mem0", calibration=2, n_boot=100)
        result = run_track(ANSWERS, ds, tmp_path / "run", config, {"judge": judge}).result()
    m = result.matching
    assert m["matched"] == 5 and m["matched_by"]["text"] == 5
    assert len(m["unmatched"]) == 1 and "conversation '1'" in m["unmatched"][0]["where"]
    assert m["category_map"]["status"] == "ours"
    assert "mem0's scripts name these numbers" in result.categories.message
    assert any("categories:" in w for w in result.warnings)
    reported = result.summary["reported"]["all"]["file_grade"]
    assert reported.value == pytest.approx(4 / 5) and reported.n == 5  # its own judge: 4 of 5
    assert result.summary["strict"]["answerable"]["judge"].value < reported.value
    # 5 answers of one subject: known-wrong answers come from any of its questions
    assert result.summary["calibration"]["strict"]["false_accept"].n == 2


def test_mem0_file_on_locomo(tmp_path: Path, locomo_dir: Path) -> None:
    """A mem0-shaped file for two LoCoMo conversations, scored through the CLI."""
    ds = load_dataset("locomo")
    data: dict[str, list[dict[str, Any]]] = {}
    for index in (0, 1):
        s = ds.subjects[index]
        data[str(index)] = [
            {
                "question": q.text,
                "answer": q.answer,
                "category": NUMBERS[q.category],
                "evidence": q.evidence_ids,
                "response": answer_for(i, q.answer, q.answerable),
                "speaker_1_memory_time": 0.2,
                "speaker_2_memory_time": 0.3,
                "response_time": 0.9,
            }
            for i, q in enumerate(s.questions[:12])
        ]
    file = tmp_path / "mem0.json"
    file.write_text(json.dumps(data, indent=2))
    with ChatServer(reply=judge_reply) as srv:
        got = CliRunner().invoke(
            app,
            [
                "score",
                "questions",
                "--answers",
                str(file),
                "--format",
                "mem0",
                "--dataset",
                "locomo",
                "--judge-model",
                "openai-compatible/j",
                "--judge-base-url",
                srv.base_url,
                "--n-boot",
                "100",
                "--out",
                str(tmp_path / "run"),
            ],
            env={"DIALOGBENCH_CACHE": str(tmp_path / "c.sqlite")},
            terminal_width=200,
        )
    assert got.exit_code == 0, got.output
    matching = json.loads((tmp_path / "run" / "matching.json").read_text())
    assert matching["matched"] == 24 and not matching["unmatched"] and not matching["ambiguous"]
    assert matching["category_map"]["status"] == "ours"
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert 0 < summary["strict"]["all"]["official_f1"]["value"] < 1


# -- without a judge --------------------------------------------------------------------------


def hand_exact(answer: str, gold: str | None, category: str) -> float | None:
    """Exact match as worked out by hand for `answer_for`'s answers: the gold itself matches
    (unless it is an open-domain gold with a '; rationale', cut off before matching); the
    half-right and wrong answers never do; an adversarial question has no gold to match."""
    if category == "adversarial":
        return None
    assert gold is not None
    return float(answer == gold and not (category == "open-domain" and ";" in gold))


def test_without_a_judge_no_model_is_called(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No judge given: every matched answer scored by LoCoMo's official F1 and exact match
    alone, per category and overall, with intervals; nothing judged, nothing calibrated,
    no model call; fields the schema does not know counted in the warnings."""
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    ds = load_dataset("sample")
    file = tmp_path / "answers.jsonl"
    lines = our_file(ds, file)
    lines[0]["confidence"] = 0.9  # a field our schema does not know
    file.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    out = tmp_path / "run"
    config = AnswersConfig(answers=str(file), n_boot=200, official=True)
    result = run_track(ANSWERS, ds, out, config).result()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["judge"] is False and manifest["roles"] == {}
    usage = json.loads((out / "usage.json").read_text())
    assert usage["roles"] == {} and usage["total"]["calls"] == 0

    f1: dict[str, list[float]] = {}
    em: dict[str, list[float]] = {}
    for subject in ds.subjects:
        for i, q in enumerate(subject.questions):
            if q.category not in NUMBERS or (q.category == "adversarial") == q.answerable:
                continue  # LoCoMo's scorer does not apply
            a = answer_for(i, q.answer, q.answerable)
            for facet in ("all", f"category={q.category}"):
                f1.setdefault(facet, []).append(locomo_score(a, q.answer, q.category))
                exact = hand_exact(a, q.answer, q.category)
                if exact is not None:
                    em.setdefault(facet, []).append(exact)
    s = result.summary
    assert list(s) == ["official"]  # no judge, no calibration
    assert set(s["official"]["all"]) == {"official_f1", "exact_match"}
    for facet, values in f1.items():
        got = s["official"][facet]["official_f1"]
        assert got.value == pytest.approx(np.mean(values)) and got.n == len(values)
        assert got.ci_low <= got.value <= got.ci_high
    for facet, values in em.items():
        got = s["official"][facet]["exact_match"]
        assert got.value == pytest.approx(np.mean(values)) and got.n == len(values)
        assert got.ci_low <= got.value <= got.ci_high
    assert 0 < s["official"]["all"]["exact_match"].value < 1
    assert s["official"]["category=adversarial"]["exact_match"].n == 0  # no gold to match

    rows = [json.loads(x) for x in (out / "items.jsonl").read_text().splitlines()]
    n = sum(len(x.questions) for x in ds.subjects)
    assert len(rows) == n  # one row per answer, none dropped
    assert all(r["judge_model"] is None and r["judge_skipped"].startswith("no judge") for r in rows)
    left_out = n - len(f1["all"])  # categories that are not LoCoMo's: counted, not scored 0
    assert sum(r["official_f1"] is None for r in rows) == left_out
    counts = json.loads((out / "counts.json").read_text())
    assert counts["counts"]["official"]["official_not_applicable"] == left_out
    assert counts["file"]["unknown_fields"] == {"confidence": 1}
    warnings = json.loads((out / "warnings.json").read_text())["warnings"]
    assert any("'confidence' (1 records, e.g. line 1)" in w for w in warnings)
    assert any(f"{left_out} questions left out of official_f1" in w for w in warnings)
    with pytest.raises(DataError, match="field 'confidence'"):
        run_track(ANSWERS, ds, tmp_path / "strict", replace(config, strict=True))


def test_without_a_judge_on_the_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`score questions` with no --judge-model scores by the official rules and says so; a
    run scored so is judged later by `score RUN_DIR --judge-model ... --set judge=true`."""
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    ds = load_dataset("sample")
    file = tmp_path / "answers.jsonl"
    our_file(ds, file)
    cli, run = CliRunner(), tmp_path / "run"
    args = ["score", "questions", "--answers", str(file), "--dataset", "sample"]
    args += ["--n-boot", "100", "--out", str(run)]
    refused = cli.invoke(app, args, terminal_width=200)  # the sample's categories: not LoCoMo's
    assert refused.exit_code == 2 and "without a judge" in refused.output, refused.output
    assert "--official" in refused.output and "Traceback" not in refused.output
    got = cli.invoke(app, [*args, "--official"], terminal_width=200)
    assert got.exit_code == 0, got.output
    assert "scored without a judge" in got.output and "exact_match" in got.output
    assert "category=counting" not in got.output  # no figure covers it: not shown
    summary = json.loads((run / "summary.json").read_text())
    assert set(summary) == {"official"}
    both = cli.invoke(app, [*args, "--official", "--no-judge", "--judge-model", "embedded"])
    assert both.exit_code == 2 and "--no-judge" in both.output, both.output
    helped = cli.invoke(app, ["score", "questions", "--help"], terminal_width=200).output
    assert "Without --judge-model" in helped and "--no-judge" in helped
    with ChatServer(reply=judge_reply) as srv:
        judge = ["--judge-model", "openai-compatible/j", "--judge-base-url", srv.base_url]
        later = cli.invoke(
            app, ["score", str(run), *judge, "--set", "judge=true", "--out", str(tmp_path / "j")]
        )
        assert later.exit_code == 0, later.output
        assert srv.request_count > 0
    judged = json.loads((tmp_path / "j" / "summary.json").read_text())
    assert {"lenient", "strict"} <= set(judged) and "calibration" not in judged  # none asked
    usage = json.loads((tmp_path / "j" / "usage.json").read_text())["roles"]["judge"]
    assert usage["calls"] == 2 * sum(len(x.questions) for x in ds.subjects)  # two rubrics each


# -- category maps ----------------------------------------------------------------------------


def test_category_maps_are_detected() -> None:
    ours = [(1, "multi-hop"), (2, "temporal"), (3, "open-domain"), (4, "single-hop")]
    assert detect_category_map(ours).status == "ours"
    named = [("multi-hop", "multi-hop"), ("Single hop", "single-hop")]
    assert detect_category_map(named).status == "ours"
    mem0 = [
        ("single-hop", "multi-hop"),
        ("multi-hop", "open-domain"),
        ("temporal", "temporal"),
        ("open-domain", "single-hop"),
    ]
    got = detect_category_map(mem0)
    assert got.status == "mem0-names" and got.mapping["single-hop"] == "multi-hop"
    assert "as mem0 does" in got.message
    renumbered = [(4, "multi-hop"), (1, "single-hop"), (2, "temporal"), (1, "single-hop")]
    other = detect_category_map(renumbered)
    assert other.status == "another" and other.mapping == {
        "1": "single-hop",
        "2": "temporal",
        "4": "multi-hop",
    }
    mixed = [(1, "multi-hop"), (1, "temporal"), (1, "multi-hop"), (2, "temporal")]
    bad = detect_category_map(mixed)
    assert bad.status == "inconsistent" and (bad.agree, bad.compared) == (3, 4)
    assert "1 of 4" in bad.message
    assert detect_category_map([(None, "temporal")]).status == "none"


def test_a_renumbered_file_is_named_in_the_warnings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    ds = load_dataset("sample")
    swap = {1: 4, 4: 1, 2: 2, 3: 3, 5: 5}  # multi-hop and single-hop swapped
    s = ds.subjects[0]
    lines = [
        {
            "subject": s.id,
            "question_id": q.id,
            "answer": q.answer or qp.NOT_AVAILABLE,
            "category": swap[NUMBERS[q.category]],
        }
        for q in s.questions
        if q.category in NUMBERS  # LoCoMo's categories: the ones with a number
    ]
    file = tmp_path / "a.jsonl"
    file.write_text("\n".join(json.dumps(x) for x in lines))
    with ChatServer(reply=judge_reply) as srv:
        judge = RoleSpec("openai-compatible/judge", base_url=srv.base_url)
        result = run_track(
            ANSWERS,
            ds,
            tmp_path / "run",
            AnswersConfig(answers=str(file), calibration=0, n_boot=50),
            {"judge": judge},
        ).result()
    assert result.categories.status == "another"
    assert result.categories.mapping["4"] == "multi-hop"
    assert any("another category map" in w for w in result.warnings)
    assert "calibration" not in result.summary  # none asked for


# -- matching and bad input -------------------------------------------------------------------


def test_identical_questions_are_given_out_in_order() -> None:
    ds = load_dataset("sample")
    q = ds.subjects[0].questions[0]
    twin = q.model_copy(update={"id": "twin"})
    ds.subjects[0].questions.append(twin)
    recs = [Given(f"line {i}", AnswerRecord(question=q.text, answer="a")) for i in (1, 2, 3)]
    got = match_answers(ds, recs)
    assert [m.question.id for m in got.matched] == [q.id, "twin"] and got.in_order == 2
    assert got.repeated == [{"where": "line 3", "first": "line 1"}]


@pytest.mark.parametrize(
    ("fmt", "text", "where", "field", "fix"),
    [
        (
            "dialogbench",
            '{"question_id": "q01", "anser": "x", "answer": "y"}',
            "line 1",
            "anser",
            "move it under meta",
        ),
        ("dialogbench", '{"question_id": "q01"}', "line 1", "answer", "null, with `error`"),
        ("dialogbench", '\n{"answer": "y"}', "line 2", "question_id", "question (its text)"),
        (
            "dialogbench",
            '{"question": "q", "answer": "y", "latency_s": -1}',
            "line 1",
            "latency_s",
            "at least 0",
        ),
        (
            "dialogbench",
            '{"question": "q", "answer": "y"}\nnot json',
            "line 2",
            None,
            "one JSON object per line",
        ),
        (
            "mem0",
            '{"0": [{"question": "q"}]}',
            "conversation '0', item 0",
            "response",
            "the system's response",
        ),
        ("mem0", '[{"question": "q"}]', None, None, "mem0's search or evals script"),
        ("mem0", '{"0": {"question": "q"}}', "conversation '0'", None, "one per question"),
    ],
)
def test_bad_input_names_file_record_field_and_fix(
    tmp_path: Path, fmt: str, text: str, where: str | None, field: str | None, fix: str
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(text)
    with pytest.raises(DataError) as raised:
        read_answers(path, fmt, strict=True)  # strict: an unknown field is an error too
    e = raised.value
    assert e.path == str(path) and e.record == where and e.field == field
    assert e.fix is not None and fix in e.fix


def test_numbers_as_subject_and_gold(tmp_path: Path) -> None:
    """A subject given as its position (a number, as docs/answers.md allows) and a gold
    answer given as a number (LoCoMo has integer answers) are read as their text."""
    path = tmp_path / "numbers.jsonl"
    lines = [
        {"subject": 0, "question_id": "q01", "answer": "Biscuit", "gold": 7},
        {"subject": 1, "question_id": "q02", "answer": "a Vespa", "gold": 3.5},
        {"subject": "1", "question_id": "q05", "answer": "The Tin Man", "gold": "The Tin Man."},
    ]
    path.write_text("\n".join(json.dumps(x) for x in lines))
    read = read_answers(path, "dialogbench")
    assert [g.record.subject for g in read.records] == ["0", "1", "1"]
    assert [g.record.gold for g in read.records] == ["7", "3.5", "The Tin Man."]
    got = match_answers(load_dataset("sample"), read.records)
    assert [(m.subject_id, m.question.id) for m in got.matched] == [
        ("maya", "q01"),
        ("tomas", "q02"),
        ("tomas", "q05"),
    ]
    assert got.gold_differs == ["line 1", "line 2"]  # 7 and 3.5 are not the dataset's gold


def test_every_field_has_a_fix(tmp_path: Path) -> None:
    """A value of the wrong type in any field names the field and a fix (a boolean gold,
    subject or answer is no number or text)."""
    assert set(FIXES) == set(AnswerRecord.model_fields)
    path = tmp_path / "bad.jsonl"
    for name in AnswerRecord.model_fields:
        bad = [1] if name == "meta" else True if name in ("gold", "subject") else {"x": 1}
        record = {"question_id": "q01", "answer": "a", name: bad}
        path.write_text(json.dumps(record))
        with pytest.raises(DataError) as raised:
            read_answers(path, "dialogbench")
        e = raised.value
        assert e.field is not None and e.field.split(".")[0] == name, (name, str(e))
        assert e.fix == FIXES[name] and e.record == "line 1"


def test_unknown_fields_are_counted_unless_strict(tmp_path: Path) -> None:
    path = tmp_path / "extra.jsonl"
    lines = [
        {"question_id": "q01", "answer": "a", "anser": "b", "score": 1},
        {"question_id": "q02", "answer": "c", "score": 0},
        {"question_id": "q03", "answer": "d"},
    ]
    path.write_text("\n".join(json.dumps(x) for x in lines))
    read = read_answers(path, "dialogbench")
    assert [g.record.answer for g in read.records] == ["a", "c", "d"]  # the fields ignored
    assert read.unknown == {"anser": ["line 1"], "score": ["line 1", "line 2"]}
    warned = read.unknown_warning()
    assert warned is not None and warned.startswith("2 answer records give fields")
    assert "'anser' (1 records, e.g. line 1), 'score' (2 records, e.g. line 1)" in warned
    assert "--strict" in warned
    with pytest.raises(DataError) as raised:
        read_answers(path, "dialogbench", strict=True)
    e = raised.value
    assert (e.record, e.field) == ("line 1", "anser") and e.fix and "under meta" in e.fix
    clean = tmp_path / "clean.jsonl"
    clean.write_text(json.dumps(lines[2]))
    assert read_answers(clean, "dialogbench").unknown_warning() is None


def test_bad_input_on_the_cli(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"question_id": "q01", "answer": 3}\n')
    got = CliRunner().invoke(
        app,
        [
            "score",
            "questions",
            "--answers",
            str(path),
            "--dataset",
            "sample",
            "--judge-model",
            "embedded",
            "--out",
            str(tmp_path / "run"),
        ],
        terminal_width=200,
    )
    assert got.exit_code == 2 and "line 1" in got.output and "'answer'" in got.output
    assert "Traceback" not in got.output
    none = CliRunner().invoke(
        app, ["score", "questions", "--dataset", "sample", "--judge-model", "embedded"]
    )
    assert none.exit_code == 2 and "--answers" in none.output
    nothing = tmp_path / "other.jsonl"
    nothing.write_text('{"question": "Who won the 1930 world cup?", "answer": "Uruguay"}\n')
    got = CliRunner().invoke(
        app,
        [
            "score",
            "questions",
            "--answers",
            str(nothing),
            "--dataset",
            "sample",
            "--judge-model",
            "embedded",
            "--out",
            str(tmp_path / "r2"),
        ],
        terminal_width=200,
    )
    assert got.exit_code == 2 and "no answer matches" in got.output
