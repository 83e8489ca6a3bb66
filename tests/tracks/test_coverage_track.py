"""The context-coverage track: hand-computed windows, run files, the real tokenizer, LoCoMo."""

from __future__ import annotations

import csv
import importlib.util
import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from dialogbench.data.locomo import load_locomo
from dialogbench.data.model import ChatItem, Dataset, Message, Question, Role, Subject
from dialogbench.data.registry import load_dataset
from dialogbench.models.embedded import GGUFUnavailable, default_gguf
from dialogbench.runner import OptionError, check, run_track
from dialogbench.tracks.realcompanion.coverage import (
    COVERAGE,
    CoverageConfig,
    CoverageTrack,
    budget_label,
    parse_tokens,
)


def _why_no_tokenizer() -> str | None:
    if importlib.util.find_spec("cyllama") is None:
        return "cyllama is not installed (pip install cyllama==0.2.18)"
    try:
        default_gguf()
    except GGUFUnavailable as e:
        return str(e)
    return None


needs_tokenizer = pytest.mark.skipif(_why_no_tokenizer() is not None, reason="no tokenizer")


class WordCounter:
    """One token per word; 2 tokens of overhead for user messages, 3 for the others."""

    name = "words"

    def count(self, texts: Sequence[str]) -> np.ndarray:
        return np.array([len(t.split()) for t in texts], dtype=np.int64)

    def overhead(self, role: Role) -> int:
        return 2 if role == "user" else 3


def tiny_subject(sid: str = "s") -> Subject:
    texts = ["a b c", "a b c d e", "a", "a b", "a b c d", "a b c"]
    roles: list[Role] = ["user", "assistant"] * 3
    # tokens with overhead: 5 8 3 5 6 6; message i starts at 0 5 13 16 21 27 (end 33)
    messages = [
        Message(id=f"{sid}{i}", position=i, speaker="P" if r == "user" else "AI", role=r, text=t)
        for i, (t, r) in enumerate(zip(texts, roles, strict=True))
    ]
    return Subject(
        id=sid,
        messages=messages,
        speakers=["P"],
        chat_items=[
            ChatItem(
                probe_id=f"{sid}4",
                stratum="enriched",
                tier="distant",
                reference_ids=[f"{sid}0", f"{sid}3"],
            ),
            ChatItem(probe_id=f"{sid}5", stratum="abstention"),  # no references: left out
        ],
        questions=[
            Question(id=f"{sid}q1", category="single-hop", text="?", evidence_ids=[f"{sid}2"]),
            Question(
                id=f"{sid}q2",
                category="temporal",
                text="?",
                evidence_ids=[f"{sid}1", f"{sid}2"],
                after_id=f"{sid}2",
            ),
        ],
    )


def tiny_dataset(*subjects: Subject) -> Dataset:
    return Dataset(name="tiny", subjects=list(subjects), sha256="0" * 64, source="test")


BUDGETS = (5, 11, 20, 21)


def test_hand_computed_coverage(tmp_path: Path) -> None:
    config = CoverageConfig(budgets=BUDGETS, n_boot=200)
    result = run_track(
        CoverageTrack(WordCounter()), tiny_dataset(tiny_subject()), tmp_path, config
    ).result()
    # tokens back (furthest, nearest): chat item (21, 5); q1 (20, 20); q2 asked after s2 (11, 3)
    all_refs = {k: e.value for k, e in result.summary["all references"].items()}
    nearest = {k: e.value for k, e in result.summary["nearest reference"].items()}
    assert all_refs == {
        "coverage@5": 0,
        "coverage@11": 1 / 3,
        "coverage@20": 2 / 3,
        "coverage@21": 1,
    }
    assert nearest == {
        "coverage@5": 2 / 3,
        "coverage@11": 2 / 3,
        "coverage@20": 1,
        "coverage@21": 1,
    }
    assert result.summary["all references"]["coverage@5"].n == 3
    assert result.skipped == {"chat probes without references": 1}
    assert result.history == {"s": {"messages": 6, "tokens": 33, "text tokens": 18, "probes": 3}}
    chat = result.breakdown["all references"]["kind"]["chat"]
    assert chat["coverage@20"].value == 0 and chat["coverage@21"].value == 1
    assert result.breakdown["nearest reference"]["category"]["temporal"]["coverage@5"].value == 1

    rows = [json.loads(x) for x in (tmp_path / "items.jsonl").read_text().splitlines()]
    by_probe = {r["probe"]: r for r in rows}
    assert by_probe["s4"]["tokens to furthest"] == 21 and by_probe["s4"]["tokens to nearest"] == 5
    assert by_probe["sq2"]["tokens to furthest"] == 11 and by_probe["sq2"]["tokens to nearest"] == 3
    # a window holds whole messages: before s4 (21 tokens back to s0) 5 tokens hold s3 only
    assert [by_probe["s4"][f"window@{b}"] for b in BUDGETS] == [1, 2, 3, 4]
    with (tmp_path / "coverage.csv").open() as f:
        table = list(csv.DictReader(f))
    assert len(table) == 2 * len(BUDGETS)
    assert table[1] == {
        "budget": "11",
        "scope": "all references",
        "value": str(1 / 3),
        "ci_low": table[1]["ci_low"],
        "ci_high": table[1]["ci_high"],
        "n": "3",
    }
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["track"] == "coverage" and manifest["config"]["tokenizer"] == "embedded"
    assert manifest["resolved"] == {
        "tokenizer name": "words",
        "overhead": {"user": 2, "assistant": 3, "system": 3},
    }
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["tokenizer"]["name"] == "words"
    assert summary["tokenizer"]["overhead per message"] == {"user": 2, "assistant": 3, "system": 3}


def test_cluster_by_subject_and_resume(tmp_path: Path) -> None:
    ds = tiny_dataset(tiny_subject("a"), tiny_subject("b"))
    config = CoverageConfig(budgets=BUDGETS, n_boot=200, cluster="subject")
    result = run_track(CoverageTrack(WordCounter()), ds, tmp_path, config).result()
    assert result.summary["all references"]["coverage@11"].value == pytest.approx(1 / 3)
    assert result.summary["all references"]["coverage@11"].n == 6
    solved = tmp_path / "parts" / "solved.jsonl"
    units = [json.loads(line)["unit"] for line in solved.read_text().splitlines()]
    assert units == ["subject-0000", "subject-0001"]
    stamp = solved.stat().st_mtime_ns
    again = run_track(
        CoverageTrack(WordCounter()), ds, tmp_path, replace(config, n_boot=300)
    ).result()
    assert solved.stat().st_mtime_ns == stamp  # a new n_boot keeps every solved subject
    assert again.summary["all references"]["coverage@11"].value == pytest.approx(1 / 3)
    run_track(CoverageTrack(WordCounter()), ds, tmp_path, replace(config, budgets=(5, 11)))
    rows = [json.loads(x) for x in (tmp_path / "items.jsonl").read_text().splitlines()]
    assert "window@11" in rows[0] and "window@20" not in rows[0]  # new budgets: solved again


def test_no_references_is_a_clear_error(tmp_path: Path) -> None:
    bare = tiny_subject().model_copy(update={"chat_items": [], "questions": []})
    with pytest.raises(ValueError, match="reference_ids or questions with evidence_ids"):
        run_track(CoverageTrack(WordCounter()), tiny_dataset(bare), tmp_path)


def test_budget_validation_and_labels() -> None:
    with pytest.raises(OptionError, match="--budgets: 0 is below the minimum 1"):
        check(CoverageConfig(budgets=(0,)))
    with pytest.raises(ValueError, match="repeat"):
        CoverageConfig(budgets=(8, 8))
    assert [parse_tokens(t) for t in ("8k", "1M", "5000", " 1.5k")] == [8192, 2**20, 5000, 1536]
    with pytest.raises(ValueError, match="not a number"):
        parse_tokens("8x")
    assert [budget_label(b) for b in CoverageConfig().budgets] == [
        "8k",
        "16k",
        "32k",
        "64k",
        "128k",
        "1M",
    ]


@needs_tokenizer
def test_sample_with_smollm2_tokenizer(tmp_path: Path) -> None:
    config = CoverageConfig(budgets=(256, 1024, 4096, 32768), n_boot=200)
    result = run_track(COVERAGE, load_dataset("sample"), tmp_path, config).result()
    assert result.tokenizer == {
        "name": "SmolLM2-135M-Instruct.Q4_1.gguf",
        "overhead per message": {"user": 5, "assistant": 6, "system": 5},
    }
    maya = result.history["maya"]  # per message: 5 tokens for Maya's, 6 for the companion's
    msgs = next(s for s in load_dataset("sample").subjects if s.id == "maya").messages
    users = sum(m.role == "user" for m in msgs)
    assert maya["tokens"] - maya["text tokens"] == 5 * users + 6 * (len(msgs) - users)
    assert all(8192 < h["tokens"] < 32768 for h in result.history.values())
    values = [e.value for e in result.summary["all references"].values()]
    assert values == sorted(values) and values[-1] == 1.0  # every sample history fits in 32k
    for b in config.budgets:
        key = f"coverage@{budget_label(b)}"
        assert (
            result.summary["nearest reference"][key].value
            >= result.summary["all references"][key].value
        )
    assert {"kind", "stratum", "tier", "category"} <= set(result.breakdown["all references"])


@needs_tokenizer
def test_locomo(locomo_dir: Path, tmp_path: Path) -> None:
    result = run_track(
        COVERAGE, load_locomo(locomo_dir), tmp_path, CoverageConfig(n_boot=200)
    ).result()
    all_refs, nearest = result.summary["all references"], result.summary["nearest reference"]
    assert all_refs["coverage@8k"].n == 1982
    assert result.skipped == {"question probes without references": 4}
    assert 0.2 < all_refs["coverage@8k"].value < nearest["coverage@8k"].value < 0.6
    assert all_refs["coverage@16k"].value < 1.0
    assert all_refs["coverage@32k"].value == 1.0  # the longest history is ~26k tokens
    assert max(h["tokens"] for h in result.history.values()) < 2**15
    assert len(result.history) == 10
    assert set(result.breakdown["all references"]["category"]) == {
        "adversarial",
        "multi-hop",
        "open-domain",
        "single-hop",
        "temporal",
    }
    tokens = json.loads((tmp_path / "tokens.json").read_text())
    assert tokens["tokens back"]["nearest"]["median"] <= tokens["tokens back"]["furthest"]["median"]


def test_cli_options(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from dialogbench.cli import app

    runner = CliRunner()
    bad = runner.invoke(app, ["run", "coverage", "--out", str(tmp_path), "--cluster", "subjcet"])
    assert bad.exit_code == 2 and "--cluster" in bad.output and "subject" in bad.output
    assert not (tmp_path / "manifest.json").exists()
    bad = runner.invoke(app, ["run", "coverage", "--out", str(tmp_path), "--budgets", "8x"])
    assert bad.exit_code == 2 and "--budgets" in bad.output
    shown = runner.invoke(app, ["run", "coverage", "--help"], env={"COLUMNS": "200"})
    for name in ("--budgets", "--tokenizer", "--seed", "--n-boot", "--cluster", "--dataset"):
        assert name in shown.output


def test_the_required_message_of_a_memory_item(tmp_path: Path) -> None:
    """Issue 24: coverage of the required message counts the reference that makes an item
    need memory (12 back), not its reference in the recent thread (1 back)."""
    texts = ["w"] * 20  # one word each: 3 tokens a user message, 4 the others
    roles: list[Role] = ["user", "assistant"] * 10
    messages = [
        Message(id=f"m{i}", position=i, speaker="P" if r == "user" else "AI", role=r, text=t)
        for i, (t, r) in enumerate(zip(texts, roles, strict=True))
    ]
    item = ChatItem(probe_id="m18", reference_ids=["m6", "m17"], needs_memory=True)
    subject = Subject(id="s", messages=messages, speakers=["P"], chat_items=[item])
    config = CoverageConfig(budgets=(4, 40, 41, 42), n_boot=100)
    result = run_track(
        CoverageTrack(WordCounter()), tiny_dataset(subject), tmp_path, config
    ).result()
    # tokens back from m18 to m6: messages m6..m17, 6 user (3) + 6 other (4) = 42
    required = {k: e.value for k, e in result.summary["required message (needs memory)"].items()}
    assert required == {"coverage@4": 0, "coverage@40": 0, "coverage@41": 0, "coverage@42": 1}
    nearest = result.summary["nearest reference"]["coverage@4"]
    assert nearest.value == 1 and nearest.n == 1  # m17, 4 tokens back: no memory needed
    row = json.loads((tmp_path / "items.jsonl").read_text().splitlines()[0])
    assert row["tokens to required"] == 42 == row["tokens to furthest"]
