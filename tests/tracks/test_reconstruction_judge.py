"""`--matcher judge`: which pairs the judge is asked about (against a brute-force listing),
its verdicts deciding the matching, failed verdicts leaving a subject unscored and asked again
on a rerun, the options that must go together, and re-scoring a finished run with a judge;
every judge a scripted server on loopback."""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from dialogbench.cli import app
from dialogbench.data.model import Dataset, Subject
from dialogbench.data.registry import load_dataset
from dialogbench.models import Model, ModelSpec
from dialogbench.runner import run_track
from dialogbench.runner.options import OptionError
from dialogbench.runner.roles import RoleSpec
from dialogbench.testing import ChatServer
from dialogbench.tracks.realcompanion import reconstruction_judge as rj
from dialogbench.tracks.realcompanion import reconstruction_match as rm
from dialogbench.tracks.realcompanion.reconstruction import (
    RECONSTRUCTION,
    ReconstructionConfig,
)
from dialogbench.tracks.realcompanion.reconstruction_prompts import (
    MATCH_PROMPT_SHA256,
    match_messages,
)

PAIR = re.compile(r"^A\. (.*?): (.*)\nB\. (.*?): (.*)$", re.MULTILINE)
REWORDED = "In other words, "


def _vectors(texts: list[str]) -> np.ndarray[Any, Any]:
    """Unit vectors from a text's letters (a stand-in embedder whose cosines are exact)."""
    out = np.zeros((len(texts), 26))
    for i, t in enumerate(texts):
        for ch in t.lower():
            if "a" <= ch <= "z":
                out[i, ord(ch) - 97] += 1.0
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.where(norms == 0, 1.0, norms)


def letters(a: Any, b: Any) -> np.ndarray[Any, Any]:
    out: np.ndarray[Any, Any] = _vectors(list(a)) @ _vectors(list(b)).T
    return out


def test_candidates_are_agreeing_fields_and_each_side_s_nearest() -> None:
    rng = np.random.default_rng(7)
    fields = ["job", "occupation", "pets", "animals", "hobbies", "health", "sleep", "music"]
    words = ["dog", "cat", "runs", "reads", "nurse", "teacher", "guitar", "piano"]
    words += ["early", "late", "asthma", "tea"]
    base = rm.meaning(letters)
    for _ in range(30):
        n, m = int(rng.integers(1, 7)), int(rng.integers(1, 7))

        def pick() -> rm.Record:
            return str(rng.choice(fields)), " ".join(rng.choice(words, int(rng.integers(1, 4))))

        pred = [pick() for _ in range(n)]
        gold = [pick() for _ in range(m)]
        if rng.random() < 0.5:
            gold[0] = pred[0]  # an identical record
        k = int(rng.integers(1, 4))
        got = rj.candidates(pred, gold, base, k)
        sims = letters([s for _, s in pred], [s for _, s in gold])
        agree, _, _ = base.fields([f for f, _ in pred], [f for f, _ in gold])
        for i in range(n):
            for j in range(m):
                row_rank = sorted(range(m), key=lambda jj: (-sims[i, jj], jj)).index(j)
                col_rank = sorted(range(n), key=lambda ii: (-sims[ii, j], ii)).index(i)
                same = (
                    rm.norm_field(pred[i][0]) == rm.norm_field(gold[j][0])
                    and rm.canonical(pred[i][1]).casefold().strip()
                    == rm.canonical(gold[j][1]).casefold().strip()
                )
                assert bool(got.identical[i, j]) == same
                want = not same and (agree[i, j] or row_rank < k or col_rank < k)
                assert bool(got.asked[i, j]) == want, (pred[i], gold[j], k)
        assert np.allclose(got.sims, sims)


class Verdicts:
    """A judge on loopback: `same` when B is A reworded (or named in `same`), `contradicts`
    for the pairs named so, `different` otherwise; prose for the pairs in `broken`."""

    def __init__(
        self,
        same: set[tuple[str, str]] = frozenset(),  # type: ignore[assignment]
        contradicts: set[tuple[str, str]] = frozenset(),  # type: ignore[assignment]
        broken: frozenset[str] = frozenset(),
    ) -> None:
        self.same, self.contradicts, self.broken = same, contradicts, broken
        self.asked: list[tuple[str, str]] = []

    def __call__(self, body: dict[str, Any]) -> str:
        asked = [m["content"] for m in body["messages"] if m["role"] == "user"]
        (match,) = PAIR.findall(asked[0])  # a correction round repeats the first prompt
        a, b = match[1], match[3]
        self.asked.append((a, b))
        if a in self.broken or b in self.broken:
            return "I think they are probably about the same thing."
        plain = a.removeprefix(REWORDED)
        if plain == b or (a, b) in self.same:
            verdict = "same"
        elif (a, b) in self.contradicts:
            verdict = "contradicts"
        else:
            verdict = "different"
        return json.dumps({"reason": "scripted", "verdict": verdict})


def test_the_verdicts_decide_the_matching(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    pred = [
        ("job", "Is a GP"),
        ("pets", "Has a dog"),
        ("health", "Has hay fever"),
        ("music", "Plays the cello"),
    ]
    gold = [
        ("occupation", "Works as a family doctor"),
        ("pets", "Has a cat"),
        ("allergies", "Is allergic to pollen"),
        ("music", "Plays the cello"),
    ]
    judge = Verdicts(
        same={("Is a GP", "Works as a family doctor"), ("Has hay fever", "Is allergic to pollen")},
        contradicts={("Has a dog", "Has a cat")},
    )
    base = rm.meaning(letters)
    with ChatServer(reply=judge) as srv:

        async def go() -> rj.JudgedMatch:
            model = Model.from_spec(ModelSpec.parse("openai-compatible/j", base_url=srv.base_url))
            try:
                return await rj.judge_match(
                    model, pred, gold, base, ReconstructionConfig().verdict_config(),
                    max_fixes=1, tag="t", top_k=1,
                )  # fmt: skip
            finally:
                await model.aclose()

        got = asyncio.run(go())
        asked = rj.candidates(pred, gold, base, 1)
        assert got.asked == int(asked.asked.sum()) == srv.request_count == len(judge.asked)
        assert got.identical == 1  # the cello: same without a call
        assert sorted((i, j) for i, j, _ in got.matched) == [(0, 0), (2, 2), (3, 3)]
        assert not got.failed and got.verdicts["contradicts"] == 1
        assert sum(got.verdicts.values()) == got.asked


def test_prompt_names_both_records_and_its_digest_is_pinned() -> None:
    (system, user) = match_messages(("job", "Is a GP"), ("", "Works as a family doctor"))
    assert system["role"] == "system" and user["role"] == "user"
    assert "A. job: Is a GP\nB. (no heading): Works as a family doctor" in user["content"]
    assert '"verdict"' in user["content"] and len(MATCH_PROMPT_SHA256) == 64


def reworded_reply(subject: Subject) -> str:
    """The subject's released profile and persona, every statement reworded."""
    return json.dumps(
        {
            "profile": [
                {"field": c.field, "statement": REWORDED + c.statement} for c in subject.profile
            ],
            "persona": [
                {"dimension": e.dimension, "statement": REWORDED + e.statement}
                for e in subject.persona
            ],
        }
    )


class Writer:
    def __init__(self, dataset: Dataset) -> None:
        self.by_person = {s.speakers[0]: s for s in dataset.subjects}

    def __call__(self, body: dict[str, Any]) -> str:
        text = "\n".join(m["content"] for m in body["messages"])
        person = next(p for p in self.by_person if f"Write {p}'s profile" in text)
        return reworded_reply(self.by_person[person])


def test_track_scores_by_the_judge_and_asks_again_for_failed_verdicts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    ds = load_dataset("sample")
    first = ds.subjects[0]
    broken = frozenset({REWORDED + first.profile[0].statement})
    config = ReconstructionConfig(
        context_tokens=200_000, tokenizer="chars", n_boot=100, matcher="judge"
    )
    judge = Verdicts(broken=broken)
    with ChatServer(reply=Writer(ds)) as writer, ChatServer(reply=judge) as jsrv:
        roles = {
            "model": RoleSpec("openai-compatible/writer", base_url=writer.base_url),
            "judge": RoleSpec("openai-compatible/judge", base_url=jsrv.base_url),
        }
        out = tmp_path / "run"
        done = run_track(RECONSTRUCTION, ds, out, config, roles)
        result = done.result()
        assert done.exit_code != 0  # failed verdicts: the run says so
        rows = {r["subject"]: r for r in map(json.loads, (out / "items.jsonl").open())}
        bad = rows[first.id]
        assert not bad["scored"] and bad["failed_verdicts"] >= 1
        others = [r for sid, r in rows.items() if sid != first.id]
        assert others and all(r["scored"] for r in others)
        for r in others:
            assert r["precision"]["all"] == r["recall"]["all"] == 1.0
            asked = sum(j["asked"] for j in r["judged"].values())
            assert asked >= len(r["profile"]) + len(r["persona"])
        assert result.unscored["by_subject"] == {first.id: 1}
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["stages"]["score"] == {"match_prompt_sha256": MATCH_PROMPT_SHA256}
        assert manifest["roles"]["judge"]["model"] == "openai-compatible/judge"
        usage = json.loads((out / "usage.json").read_text())
        assert usage["roles"]["judge"]["failed_calls"] >= 1
        writes, verdicts = writer.request_count, jsrv.request_count

        # a rerun asks again only for what failed (the rest from the cache), never the writer
        again = run_track(RECONSTRUCTION, ds, out, config, roles)
        assert writer.request_count == writes
        failed = bad["failed_verdicts"]
        assert jsrv.request_count - verdicts == 2 * failed  # each asked, then corrected once
        assert again.exit_code != 0

        # the judge mended: the rerun scores every subject, still without the writer
        judge.broken = frozenset()
        verdicts = jsrv.request_count
        mended = run_track(RECONSTRUCTION, ds, out, config, roles)
        assert mended.exit_code == 0 and writer.request_count == writes
        assert jsrv.request_count - verdicts == failed  # only those verdicts asked again
        summary = mended.result().summary
        assert summary["all"]["f1"].value == 1.0
        assert "run agreement (meaning matcher)" in summary


def test_options_that_go_together(tmp_path: Path) -> None:
    ds = load_dataset("sample")
    model = RoleSpec("openai-compatible/m", base_url="http://127.0.0.1:9")
    with pytest.raises(OptionError, match="--matcher judge asks a judge model"):
        run_track(RECONSTRUCTION, ds, tmp_path / "a", ReconstructionConfig(matcher="judge"),
                  {"model": model})  # fmt: skip
    with pytest.raises(OptionError, match="read only by --matcher judge"):
        run_track(RECONSTRUCTION, ds, tmp_path / "b", ReconstructionConfig(),
                  {"model": model, "judge": model})  # fmt: skip


def test_a_finished_run_is_rematched_by_a_judge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`dialogbench score RUN --set matcher=judge --judge-model ...` re-matches the saved
    outputs with the judge, calling no writer."""
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    ds = load_dataset("sample")
    config = ReconstructionConfig(context_tokens=200_000, tokenizer="chars", n_boot=100)
    with ChatServer(reply=Writer(ds)) as writer, ChatServer(reply=Verdicts()) as jsrv:
        model = RoleSpec("openai-compatible/writer", base_url=writer.base_url)
        out = tmp_path / "run"
        first = run_track(RECONSTRUCTION, ds, out, config, {"model": model}).result()
        assert jsrv.request_count == 0
        writes = writer.request_count
        got = CliRunner().invoke(
            app,
            ["score", str(out), "--set", "matcher=judge", "--judge-model",
             "openai-compatible/judge", "--judge-base-url", jsrv.base_url,
             "--out", str(tmp_path / "judged")],
        )  # fmt: skip
        assert got.exit_code == 0, got.output
        assert writer.request_count == writes and jsrv.request_count > 0
        judged = json.loads((tmp_path / "judged" / "summary.json").read_text())
        assert judged["all"]["f1"]["value"] == 1.0
        manifest = json.loads((tmp_path / "judged" / "manifest.json").read_text())
        assert manifest["config"]["matcher"] == "judge"
        assert manifest["roles"]["judge"]["model"] == "openai-compatible/judge"
        assert first.summary["all"]["f1"].n == len(ds.subjects)
        compared = CliRunner().invoke(
            app, ["compare", "reconstruction", str(tmp_path / "judged"), str(out), "--n-boot", "50"]
        )
        assert compared.exit_code == 0, compared.output
        assert "(meaning matcher; the judge reads against gold only)" in compared.output
    assert replace(config, matcher="judge").matching().name == "meaning"


def test_the_matching_benchmark_scores_a_judge_and_counts_its_failures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`benchmarks/reconstruction_matching.py --judge-model`: a judge that answers by the
    labels scores precision and recall 1; one whose replies are prose has every verdict
    failed, counted and left out, and exit status 2."""
    root = Path(__file__).resolve().parents[2]
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    from benchmarks import reconstruction_matching as bench

    lines = (root / "benchmarks" / "data" / "claim_pairs.jsonl").read_text().splitlines()
    rows = [json.loads(x) for x in lines if x.strip()]
    picked = [r for r in rows if r["split"] == "held_out_5"][:12]
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in picked))
    label = {(r["a"]["statement"], r["b"]["statement"]): r["label"] for r in picked}
    verdict = {"match": "same", "contradiction": "contradicts", "no_match": "different"}

    def oracle(body: dict[str, Any]) -> str:
        (m,) = PAIR.findall(body["messages"][-1]["content"])
        return json.dumps({"reason": "labels", "verdict": verdict[label[(m[1], m[3])]]})

    with ChatServer(reply=oracle) as srv:
        argv = ["--data", str(data), "--judge-model", "openai-compatible/oracle",
                "--judge-base-url", srv.base_url]  # fmt: skip
        assert bench.main(argv) == 0
        out = capsys.readouterr().out
        asked = srv.request_count
    assert 0 < asked <= len(picked)
    assert "0 of 12 verdicts failed" in out
    assert "judge (openai-compatible/oracle)" in out
    assert "held_out_5     precision 1.000, recall 1.000: met" in out
    with ChatServer(reply=lambda body: "They look alike to me.") as srv:
        argv[-1] = srv.base_url
        assert bench.main([*argv, "--splits", "held_out_5"]) == 2
        out = capsys.readouterr().out
    assert f"{asked} of 12 verdicts failed" in out and "exit status 2" in out


def test_a_panel_of_judges_shows_how_far_the_matching_depends_on_the_judge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`dialogbench score RUN --set matcher=judge --judge-model A --judge-model B`: both
    judges rate the same candidate pairs; Krippendorff's alpha over their verdicts against a
    brute-force count, and each figure's spread."""
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    ds = load_dataset("sample")
    config = ReconstructionConfig(context_tokens=200_000, tokenizer="chars", n_boot=100)
    fair, contrary = Verdicts(), Verdicts()

    def by_model(body: dict[str, Any]) -> str:
        if body["model"] == "fair":
            return fair(body)
        contrary(body)
        return json.dumps({"reason": "scripted", "verdict": "different"})

    with ChatServer(reply=Writer(ds)) as writer, ChatServer(reply=by_model) as jsrv:
        model = RoleSpec("openai-compatible/writer", base_url=writer.base_url)
        out = tmp_path / "run"
        run_track(RECONSTRUCTION, ds, out, config, {"model": model})
        got = CliRunner().invoke(
            app,
            ["score", str(out), "--set", "matcher=judge",
             "--judge-model", "openai-compatible/fair", "--judge-model",
             "openai-compatible/contrary", "--judge-base-url", jsrv.base_url,
             "--out", str(tmp_path / "panel")],
        )  # fmt: skip
        assert got.exit_code == 0, got.output
    assert sorted(fair.asked) == sorted(contrary.asked)  # the same candidates for both
    stored = json.loads((tmp_path / "panel" / "judges.json").read_text())
    assert stored["agreement"]["rows"] == len(fair.asked)
    # alpha by hand: two raters, binary values; fair says same on the reworded pairs only
    ones = sum(1 for a, b in fair.asked if a.removeprefix(REWORDED) == b)
    n, pairs = len(fair.asked), 2 * len(fair.asked)
    disagree = ones  # units where the raters differ
    total_ones = ones  # the contrary judge never says same
    expected = 2 * total_ones * (pairs - total_ones) / (pairs * (pairs - 1))
    observed = disagree / n
    assert stored["agreement"]["krippendorff_alpha"] == pytest.approx(1 - observed / expected)
    spread = stored["spread"]["all f1"]
    assert spread["openai-compatible_fair"] == 1.0
    assert spread["spread"] == pytest.approx(1.0 - spread["openai-compatible_contrary"])
