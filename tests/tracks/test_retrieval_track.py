"""The retrieval track end to end: figures, controls, run files, resume and plug-ins."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dialogbench.data.locomo import load_locomo
from dialogbench.data.model import Dataset
from dialogbench.data.registry import load_dataset
from dialogbench.retrieval import registry
from dialogbench.retrieval.baselines import OracleRetriever
from dialogbench.runner import run_track
from dialogbench.tracks.realcompanion.retrieval import (
    POOLED,
    RETRIEVAL,
    RetrievalConfig,
)

FAST = RetrievalConfig(n_boot=200)
REPO = Path(__file__).resolve().parents[2]


def test_locomo_all_questions(locomo_dir: Path, tmp_path: Path) -> None:
    ds = load_locomo(locomo_dir)
    result = run_track(RETRIEVAL, ds, tmp_path, FAST).result()
    s = result.summary
    assert s["oracle"]["hit@5"].value == 1.0
    assert s["oracle"]["hit@1"].n == 1982
    for k in (1, 5, 10):
        assert s["broken-oracle"][f"hit@{k}"].value == 0.0
    random, expected = s["random"]["hit@10"], s["random"]["expected hit@10"]
    assert random.ci_low <= expected.value <= random.ci_high
    assert 0.3 < s["bm25"]["hit@5"].value < 0.7
    assert s["bm25"]["hit@5"].ci_low < s["bm25"]["hit@5"].value < s["bm25"]["hit@5"].ci_high
    assert result.skipped == {"question probes without references": 4}
    assert not [w for w in result.warnings if w.startswith("CONTROL FAILED")]

    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["dataset"]["sha256"] == ds.sha256
    assert manifest["seed"] == 0 and manifest["package_version"]
    assert manifest["config"]["retrievers"] == list(FAST.retrievers)
    items = (tmp_path / "items.jsonl").read_text().splitlines()
    assert len(items) == 1982 * len(FAST.retrievers)
    row = json.loads(items[0])
    assert {"retriever", "probe", "ranks", "top", "nearest", "furthest", "category"} <= set(row)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert set(summary[POOLED]["bm25"]["mrr"]) == {"value", "ci_low", "ci_high", "n"}
    assert list(summary) == ["question probes", POOLED]  # LoCoMo has no chat items
    breakdown = json.loads((tmp_path / "breakdown.json").read_text())
    assert set(breakdown["bm25"]["category"]) == {
        "adversarial",
        "multi-hop",
        "open-domain",
        "single-hop",
        "temporal",
    }
    distance = json.loads((tmp_path / "distance.json").read_text())
    assert distance["all"]["nearest median"] <= distance["all"]["furthest median"]


def test_sample_with_strata_and_cluster_bootstrap(tmp_path: Path) -> None:
    ds = load_dataset("sample")
    config = RetrievalConfig(n_boot=200, cluster="subject")
    result = run_track(RETRIEVAL, ds, tmp_path, config).result()
    assert result.summary["oracle"]["hit@1"].value == 1.0
    assert result.summary["broken-oracle"]["hit@10"].value == 0.0
    assert {"stratum", "tier", "kind", "nearest distance"} <= set(result.breakdown["bm25"])


def _units(path: Path) -> list[str]:
    return [json.loads(line)["unit"] for line in path.read_text().splitlines()]


def test_interrupted_run_resumes_with_finished_parts(tmp_path: Path) -> None:
    ds = load_dataset("sample")
    run_track(RETRIEVAL, ds, tmp_path, FAST)
    solved = tmp_path / "parts" / "solved.jsonl"
    lines = solved.read_text().splitlines()
    assert _units(solved) == list(FAST.retrievers)
    kept = [line for line in lines if json.loads(line)["unit"] != "bm25"]
    solved.write_text("\n".join(kept) + "\n")  # as if killed before bm25 finished
    (tmp_path / "summary.json").unlink()
    run_track(RETRIEVAL, ds, tmp_path, FAST)
    assert _units(solved) == [u for u in FAST.retrievers if u != "bm25"] + ["bm25"]
    assert (tmp_path / "summary.json").exists()
    # an aggregation setting re-aggregates the saved units
    run_track(RETRIEVAL, ds, tmp_path, RetrievalConfig(n_boot=100))
    assert len(_units(solved)) == len(FAST.retrievers)
    # a setting that changes the rankings starts afresh
    run_track(RETRIEVAL, ds, tmp_path, RetrievalConfig(n_boot=200, seed=1))
    assert _units(solved) == list(FAST.retrievers)


def test_failed_control_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    oracle = lambda seed, offset, analyzer: OracleRetriever()  # noqa: E731
    monkeypatch.setitem(registry.BUILTINS, "broken-oracle", oracle)
    result = run_track(RETRIEVAL, load_dataset("sample"), tmp_path, FAST).result()
    assert any(w.startswith("CONTROL FAILED: broken-oracle hit@1") for w in result.warnings)


def test_plugin_by_class_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(REPO))
    config = RetrievalConfig(
        retrievers=("examples.keyword_memory:KeywordMemory", "bm25"), n_boot=100
    )
    result = run_track(RETRIEVAL, load_dataset("sample"), tmp_path, config).result()
    plugin = result.summary["examples.keyword_memory:KeywordMemory"]
    assert 0.0 < plugin["hit@10"].value <= 1.0


def test_unknown_retriever_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown retriever 'nope'"):
        registry.resolve("nope")


def _with_dependent(every: int) -> Dataset:
    """The sample with every `every`-th chat item marked dependent."""
    ds = load_dataset("sample")
    subjects = []
    for s in ds.subjects:
        items = [
            item.model_copy(update={"dependent": True}) if i % every == 0 else item
            for i, item in enumerate(s.chat_items)
        ]
        subjects.append(s.model_copy(update={"chat_items": items}))
    return ds.model_copy(update={"subjects": subjects})


def _hit(row: dict[str, Any], k: int) -> float:
    ranks = [r for r in row["ranks"] if r is not None]
    return float(bool(ranks) and min(ranks) <= k)


def test_populations_apart_against_the_items(tmp_path: Path) -> None:
    ds = _with_dependent(3)
    result = run_track(RETRIEVAL, ds, tmp_path, FAST).result()
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert list(summary) == [
        "chat probes",
        "question probes",
        "dependent chat probes",
        "distant chat probes",
        POOLED,
    ]
    rows = [json.loads(x) for x in (tmp_path / "items.jsonl").read_text().splitlines()]
    # the paper's dependent items: marked so, with a reference beyond the last three messages
    dependent = set()
    for s in ds.subjects:
        at = {m.id: m.position for m in s.messages}
        for i in s.chat_items:
            if i.dependent and any(at[i.probe_id] - at[r] > 3 for r in i.reference_ids):
                dependent.add((s.id, i.probe_id))
    for name in ("bm25", "recency"):
        mine = [r for r in rows if r["retriever"] == name]
        for population, keep in (
            ("chat probes", lambda r: r["kind"] == "chat"),
            ("question probes", lambda r: r["kind"] == "question"),
            ("dependent chat probes", lambda r: (r["subject"], r["probe"]) in dependent),
        ):
            chosen = [r for r in mine if r["kind"] == "chat" or population == "question probes"]
            chosen = [r for r in chosen if keep(r)]
            e = result.populations[population][name]["hit@5"]
            assert e.n == len(chosen) > 0
            assert e.value == pytest.approx(sum(_hit(r, 5) for r in chosen) / len(chosen))
        assert summary[POOLED][name]["hit@5"]["n"] == len(mine)
    need = result.breakdown["bm25"]["need"]
    with_refs = sum(bool(i.reference_ids) for s in ds.subjects for i in s.chat_items)
    assert need["needs memory"]["hit@1"].n + need["no memory need"]["hit@1"].n == with_refs
    strict = run_track(
        RETRIEVAL, ds, tmp_path, RetrievalConfig(n_boot=200, reading="strict")
    ).result()
    need = strict.breakdown["bm25"]["need"]  # strict: memory needed and dependent
    assert (
        need["needs memory"]["hit@1"].n
        < result.breakdown["bm25"]["need"]["needs memory"]["hit@1"].n
    )
    assert set(strict.breakdown["bm25"]["dependent"]) == {"dependent", "not dependent"}


def test_locomo_has_no_chat_population(locomo_dir: Path, tmp_path: Path) -> None:
    result = run_track(
        RETRIEVAL, load_locomo(locomo_dir), tmp_path, RetrievalConfig(n_boot=50)
    ).result()
    assert list(result.populations) == ["question probes"]
    assert result.populations["question probes"]["bm25"]["hit@5"].value == pytest.approx(
        result.summary["bm25"]["hit@5"].value
    )


def _release_with_distant(root: Path) -> Path:
    """30 messages in two sessions; three chat items, worked out by hand below."""
    folder = root / "ana"
    folder.mkdir(parents=True)
    lines = [
        {
            "id": f"m{i}",
            "speaker": "Ana" if i % 2 == 0 else "bot",
            "role": "user" if i % 2 == 0 else "assistant",
            "text": f"message {i} about topic {i % 7}",
            "session": "s1" if i < 12 else "s2",
        }
        for i in range(30)
    ]
    chat = [
        # distant: a reference 1 back (recent thread) and one 24 back (session s1)
        {"probe_id": "m28", "reference_ids": ["m27", "m4"], "locus": "distant",
         "needs_memory": True, "reference_reply": "ok"},
        # distant, its only reference 20 back
        {"probe_id": "m26", "reference_ids": ["m6"], "locus": "distant",
         "needs_memory": True, "reference_reply": "ok"},
        # recent
        {"probe_id": "m24", "reference_ids": ["m23"], "locus": "recent",
         "needs_memory": False, "reference_reply": "ok"},
    ]  # fmt: skip
    (folder / "conversation.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (folder / "chat.jsonl").write_text("".join(json.dumps(x) + "\n" for x in chat))
    return root


def test_distant_items_are_scored_on_their_required_references(tmp_path: Path) -> None:
    """Issue 24.1: recency's top 5 holds m28's reference 1 back, which is no find of its
    distant evidence (24 back); on every chat probe it counts, on the distant ones not."""
    ds = load_dataset(str(_release_with_distant(tmp_path / "rel")))
    result = run_track(RETRIEVAL, ds, tmp_path / "run", FAST).result()
    chat, distant = result.populations["chat probes"], result.populations["distant chat probes"]
    assert chat["recency"]["hit@5"].value == pytest.approx(2 / 3)  # m28, m24
    assert distant["recency"]["hit@5"].value == 0.0 and distant["recency"]["hit@5"].n == 2
    assert distant["oracle"]["hit@5"].value == 1.0
    # one required reference among the 28 (m28) or 26 (m26) earlier messages: 5/N each
    assert distant["random"]["expected hit@5"].value == pytest.approx((5 / 28 + 5 / 26) / 2)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert "distant chat probes" in summary
