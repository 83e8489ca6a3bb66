"""`--memory` on the retrieval track: id memories scored as retrievers are, text memories by
the evidence they cite (apart), costs written, and a failing system counted, not a crash."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from dialogbench.cli import app
from dialogbench.data.model import Message
from dialogbench.data.registry import load_dataset
from dialogbench.memory import Budget, Memory, Query, Recall, query_of, replay, replay_costs
from dialogbench.memory.costs import approx_tokens
from dialogbench.memory.registry import resolve_memory
from dialogbench.report.html import write_report
from dialogbench.retrieval.base import scoreable_probes
from dialogbench.runner import run_track
from dialogbench.stats.metrics import metric_table
from dialogbench.testing.memoryserver import MemoryServer
from dialogbench.tracks.realcompanion.retrieval import (
    CHAT,
    CITED,
    POOLED,
    QUESTIONS,
    RETRIEVAL,
    RetrievalConfig,
)

runner = CliRunner()


class Notes:
    """A stateful text memory: one note per ingested message ("speaker said ..."), citing it;
    recalls the notes sharing most words with the query, then the newest message by id."""

    name = "notes"

    def __init__(self) -> None:
        self.notes: dict[str, list[tuple[set[str], Memory]]] = {}
        self.last: dict[str, str] = {}

    def reset(self, subject: str) -> None:
        self.notes.pop(subject, None)

    def ingest(self, subject: str, messages: Sequence[Message]) -> None:
        for m in messages:
            note = Memory(text=f"{m.speaker} said: {m.text}", cites=(m.id,))
            self.notes.setdefault(subject, []).append((set(m.text.lower().split()), note))
            self.last[subject] = m.id

    def recall(self, subject: str, query: Query, budget: Budget) -> Recall:
        words = set(query.text.lower().split())
        held = self.notes.get(subject, [])
        ranked = sorted(
            range(len(held)), key=lambda i: (-len(words & held[i][0]), -i)
        )  # most shared words, then newest
        picked = [held[i][1] for i in ranked[:3]]
        return Recall((*picked, Memory(message_id=self.last[subject])))


class Failing:
    name = "failing"

    def ingest(self, subject: str, messages: Sequence[Message]) -> None:
        pass

    def recall(self, subject: str, query: Query, budget: Budget) -> Recall:
        raise RuntimeError("the store went away")


def test_memory_bm25_gives_the_figures_of_retriever_bm25(tmp_path: Path) -> None:
    config = RetrievalConfig(retrievers=("bm25",), memory=("bm25",), n_boot=200)
    result = run_track(RETRIEVAL, load_dataset("sample"), tmp_path, config).result()
    for population, table in result.headline().items():
        got, want = table["memory:bm25"], table["bm25"]
        for metric, e in want.items():
            expected = want["mrr@10"] if metric == "mrr" else e  # a memory returns k, so mrr@K
            np.testing.assert_equal(vars(got[metric]), vars(expected), f"{population} {metric}")
    rows = [json.loads(x) for x in (tmp_path / "items.jsonl").read_text().splitlines()]
    by = {(r["retriever"], r["probe"]): r for r in rows}
    for (name, probe), row in by.items():
        if name == "bm25":
            assert by["memory:bm25", probe]["top"] == row["top"]
    assert set(result.breakdown) == {"bm25", "memory:bm25"}
    costs = json.loads((tmp_path / "memory_costs.json").read_text())
    assert set(costs["systems"]) == {"memory:bm25"} and costs["definitions"]
    assert costs["budget"] == {"k": 10, "tokens": None}
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["config"]["memory"] == ["bm25"]
    assert manifest["config"]["memory_tokens"] is None


def test_text_memories_are_scored_by_what_they_cite_and_apart(tmp_path: Path) -> None:
    data = load_dataset("sample")
    config = RetrievalConfig(retrievers=("bm25",), memory=(f"{__name__}:Notes",), n_boot=200)
    result = run_track(RETRIEVAL, data, tmp_path, config).result()
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert {CITED + CHAT, CITED + QUESTIONS, CITED + POOLED} <= set(summary)
    cited = summary[CITED + POOLED]["memory:notes"]
    assert set(cited) == {
        *(f"cite-{m}@{k}" for m in ("hit", "recall") for k in (1, 5, 10)),
        "cite-mrr@10",
    }
    for population in (CHAT, QUESTIONS, POOLED):  # no cite-metric among the id figures
        assert all(not m.startswith("cite-") for m in summary[population]["memory:notes"])
    # brute force: cite ranks from a direct replay of the same system
    probes, _ = scoreable_probes(data)
    system = resolve_memory(f"{__name__}:Notes")
    ranks = np.full((len(probes), max(len(p.reference_positions) for p in probes)), np.nan)
    id_hits = []
    by_subject = {s.id: s for s in data.subjects}
    for sid in dict.fromkeys(p.subject_id for p in probes):
        at = [i for i, p in enumerate(probes) if p.subject_id == sid]
        queries = [query_of(probes[i]) for i in at]
        rep = replay(system, sid, by_subject[sid].messages, queries, Budget())
        for i, r in zip(at, rep.recalled, strict=True):
            refs = probes[i].reference_positions
            for j, ref in enumerate(refs):
                found = list(r.cited_positions)
                ranks[i, j] = found.index(ref) + 1 if ref in found else np.inf
            id_hits.append(any(ref in r.positions for ref in refs))
    want = metric_table(ranks, config.ks)
    assert cited["cite-hit@5"]["value"] == pytest.approx(float(np.nanmean(want["hit@5"])))
    assert cited["cite-recall@10"]["value"] == pytest.approx(float(np.nanmean(want["recall@10"])))
    # the id figures count only the one id memory (the newest message), never the citations
    ids = summary[POOLED]["memory:notes"]["hit@10"]["value"]
    assert ids == pytest.approx(float(np.mean(id_hits)))
    costs = result.costs["memory:notes"]
    assert costs["memories_per_query"] == 4.0 and costs["invalid_ids"] == 0


def test_costs_are_those_of_replay_costs(tmp_path: Path) -> None:
    data = load_dataset("sample")
    config = RetrievalConfig(retrievers=("bm25",), memory=("full-context",), n_boot=50)
    result = run_track(RETRIEVAL, data, tmp_path, config).result()
    probes, _ = scoreable_probes(data)
    system = resolve_memory("full-context")
    replays = []
    for s in data.subjects:
        group = [query_of(p) for p in probes if p.subject_id == s.id]
        if group:
            replays.append(replay(system, s.id, s.messages, group, Budget()))
    want = replay_costs(replays)
    got = result.costs["memory:full-context"]
    for key in ("messages_ingested", "memories_per_query", "context_tokens_per_query"):
        assert got[key] == pytest.approx(want[key]), key
    assert got["recall_ms"]["n"] == want["recall_ms"]["n"] == len(probes)
    assert got["invalid_ids"] == want["invalid_ids"] == 0
    assert got["ingest_ms_per_message"] is not None


def test_a_failing_memory_system_is_counted_not_a_crash(tmp_path: Path) -> None:
    args = [
        "run",
        "retrieval",
        "--dataset",
        "sample",
        "--retrievers",
        "bm25",
        "--memory",
        f"bm25,{__name__}:Failing",
        "--n-boot",
        "50",
        "--out",
        str(tmp_path),
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 3, result.output
    said = " ".join(result.output.split())  # the terminal wraps long lines
    assert "Traceback" not in said
    assert "memory system 'failing' failed in recall" in said
    assert "RuntimeError: the store went away" in said
    warnings = json.loads((tmp_path / "warnings.json").read_text())
    # both subjects' recalls failed (2 failed memory calls), so did the unit scoring them
    assert warnings["failures"] == {
        "failed memory calls": 2,
        "units not finished (a call failed)": 3,
    }
    assert warnings["failed_calls_by_kind"] == {"memory": {"other": 2}}
    costs = json.loads((tmp_path / "memory_costs.json").read_text())
    assert "memory:failing" in costs["failed"] and "memory:bm25" in costs["systems"]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert "memory:failing" not in summary[POOLED] and "memory:bm25" in summary[POOLED]
    again = runner.invoke(app, args)  # the failed unit is done again, the others kept
    assert again.exit_code == 3 and "failed in recall" in " ".join(again.output.split())


def test_an_unknown_memory_spec_is_a_usage_error(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["run", "retrieval", "--memory", "bm25,nope", "--out", str(tmp_path)]
    )
    assert result.exit_code == 2 and "unknown memory system 'nope'" in result.output
    assert "Traceback" not in result.output


def test_a_memory_url_with_credentials_is_refused_before_any_record_is_written(
    tmp_path: Path,
) -> None:
    out = tmp_path / "run"
    url = "http://alice:s3cr3t-pw@127.0.0.1:9/mem"
    result = runner.invoke(app, ["run", "retrieval", "--memory", url, "--out", str(out)])
    assert result.exit_code == 2 and "DIALOGBENCH_MEMORY_BASIC_AUTH" in result.output
    assert "s3cr3t-pw" not in result.output
    assert not out.exists() or not [p for p in out.rglob("*") if p.name != ".lock"]


REPO = Path(__file__).resolve().parents[2]


def test_the_session_memory_example_end_to_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)  # as the example says: run from the repository root
    for name in [m for m in sys.modules if m == "examples" or m.startswith("examples.")]:
        monkeypatch.delitem(sys.modules, name)
    out = tmp_path / "m"
    result = runner.invoke(
        app,
        [
            "run",
            "retrieval",
            "--dataset",
            "sample",
            "--memory",
            "bm25,examples.session_memory:SessionMemory",
            "--n-boot",
            "100",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "cited evidence: chat probes" in said and "recall ms p50" in said
    summary = json.loads((out / "summary.json").read_text())
    ids = summary[POOLED]["memory:session-memory"]
    cited = summary[CITED + POOLED]["memory:session-memory"]
    assert 0.0 < ids["hit@10"]["value"] <= 1.0 and 0.0 < cited["cite-hit@10"]["value"] <= 1.0
    rows = [json.loads(x) for x in (out / "items.jsonl").read_text().splitlines()]
    mine = [r for r in rows if r["retriever"] == "memory:session-memory"]
    assert mine and all(r["invalid_ids"] == [] for r in mine)  # it was never shown the future
    assert any(r["text_memories"] for r in mine) and any(r["id_memories"] for r in mine)
    costs = json.loads((out / "memory_costs.json").read_text())["systems"]
    assert costs["memory:session-memory"]["messages_ingested"] > 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["memory"] == ["bm25", "examples.session_memory:SessionMemory"]


def test_a_memory_service_over_http_end_to_end_through_the_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DIALOGBENCH_MEMORY_API_KEY", "sk-test-4b3a2c1d0e9f")
    with MemoryServer(require_auth="Bearer sk-test-4b3a2c1d0e9f") as srv:
        args = ["run", "retrieval", "--retrievers", "bm25", "--memory", srv.base_url]
        result = runner.invoke(app, [*args, "--n-boot", "50", "--out", str(tmp_path)])
        assert result.exit_code == 0, result.output
        asked = srv.count("recall")
        assert {r.authorization for r in srv.requests} == {"Bearer sk-test-4b3a2c1d0e9f"}
    probes, _ = scoreable_probes(load_dataset("sample"))
    assert asked == len(probes)  # one recall per probe
    costs = json.loads((tmp_path / "memory_costs.json").read_text())["systems"]
    (name,) = costs
    assert costs[name]["invalid_ids"] == 0 and costs[name]["recall_ms"]["n"] == len(probes)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert 0 < summary[POOLED][name]["hit@10"]["value"] <= 1
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert "sk-test-4b3a2c1d0e9f" not in path.read_text(errors="replace"), path


def test_memories_cut_by_the_budget_are_flagged_with_their_count(tmp_path: Path) -> None:
    """Issue 28.4: a system whose memories the budget cut (here to nothing, for the notes
    longer than the budget) is flagged, with the count, in warnings.json, in the printed
    table and in the HTML report, never silently scored as if it had recalled nothing."""
    data = load_dataset("sample")
    spec, tokens = f"{__name__}:Notes", 6
    out = tmp_path / "run"
    argv = ["run", "retrieval", "--dataset", "sample", "--retrievers", "bm25", "--memory", spec]
    argv += ["--memory-tokens", str(tokens), "--n-boot", "50", "--out", str(out)]
    got = runner.invoke(app, argv, env={"COLUMNS": "200"})
    assert got.exit_code == 0, got.output
    # brute force: replay without a cap, then apply the token budget by hand, memory by memory
    probes, _ = scoreable_probes(data)
    by_subject = {s.id: s for s in data.subjects}
    cut = emptied = recalls = 0
    for sid in dict.fromkeys(p.subject_id for p in probes):
        queries = [query_of(p) for p in probes if p.subject_id == sid]
        rep = replay(resolve_memory(spec), sid, by_subject[sid].messages, queries, Budget())
        lines = {m.id: f"{m.speaker}: {m.text}" for m in by_subject[sid].messages}
        for r in rep.recalled:
            recalls += 1
            used, kept = 0, 0
            for m in r.memories[:10]:
                used += approx_tokens(m.text if m.text is not None else lines[m.message_id or ""])
                if used > tokens:
                    break
                kept += 1
            cut += kept < len(r.memories)
            emptied += kept == 0 and len(r.memories) > 0
    assert 0 < emptied <= cut <= recalls
    said = f"the memory budget cut {cut} of {recalls} recalls, {emptied} to nothing"
    flagged = json.loads((out / "warnings.json").read_text())["flagged"]
    assert set(flagged) == {"memory:notes"} and flagged["memory:notes"].startswith(said)
    printed = " ".join(got.output.split())
    assert "memory:notes ⚑" in printed and said in printed
    costs = json.loads((out / "memory_costs.json").read_text())["systems"]["memory:notes"]
    assert (costs["budget_cut"], costs["cut_to_nothing"]) == (cut, emptied)
    page = write_report([out], tmp_path / "report.html").read_text()
    assert "Context cut or fell back" in page and said in page and 'class="flagmark"' in page
