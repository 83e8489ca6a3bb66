"""BM25 analyzers: the choice by script, each analyzer's terms against hand-written ones, the
analyzer recorded with a retrieval run, and the English path as it was."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from dialogbench.cli import app
from dialogbench.data.registry import load_dataset
from dialogbench.lang import cjk_language
from dialogbench.retrieval import analyzers
from dialogbench.retrieval.analyzers import (
    ANALYZERS,
    AUTO,
    BIGRAMS,
    WORDS,
    AnalyzerUnavailable,
    analyzer_for,
)
from dialogbench.retrieval.base import build_probes
from dialogbench.retrieval.bm25 import BM25Retriever, tokenize
from dialogbench.runner import run_track
from dialogbench.tracks.realcompanion.retrieval import RETRIEVAL, RetrievalConfig

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "cjk_release"
KO = "지난주에 부산에서 친구랑 회를 먹었어."
ZH = "我上周去杭州看了西湖，天气特别好。"
JA = "先週、京都で友達と抹茶を飲みました。"
EN = "We hiked up Mount Tam with the dogs on Saturday."
MIXED = "오늘 iPhone 15를 샀어"


@pytest.mark.parametrize(
    ("text", "language"),
    [(KO, "ko"), (ZH, "zh"), (JA, "ja"), (EN, None), (MIXED, "ko"), ("", None)],
)
def test_the_language_of_a_script(text: str, language: str | None) -> None:
    assert cjk_language([text]) == language


def test_a_few_cjk_names_in_english_text_stay_english() -> None:
    texts = [EN, "My friend 王伟 is visiting from Beijing next week, and we will cook."]
    assert cjk_language(texts) is None
    assert analyzer_for("auto", texts) is WORDS


@pytest.mark.parametrize("text", [KO, ZH, JA])
def test_auto_picks_bigrams_for_cjk_and_words_otherwise(text: str) -> None:
    assert set(AUTO.values()) == {"bigrams"}
    assert analyzer_for("auto", [text]) is BIGRAMS
    assert analyzer_for("auto", [EN]) is WORDS
    assert analyzer_for("words", [text]) is WORDS  # a forced analyzer is never overridden
    assert analyzer_for("bigrams", [EN]) is BIGRAMS


TERMS = {
    ("words", KO): ["지난주에", "부산에서", "친구랑", "회를", "먹었어"],
    ("bigrams", KO): [
        *("지난", "난주", "주에", "부산", "산에", "에서", "친구", "구랑", "회를", "먹었", "었어"),
    ],
    ("kiwi", KO): ["지난주", "부산", "친구", "회", "먹"],
    ("words", ZH): ["我上周去杭州看了西湖", "天气特别好"],
    ("bigrams", ZH): [
        *("我上", "上周", "周去", "去杭", "杭州", "州看", "看了", "了西", "西湖"),
        *("天气", "气特", "特别", "别好"),
    ],
    ("jieba", ZH): ["我", "上周", "去", "杭州", "看", "了", "西湖", "天气", "特别", "好"],
    ("words", JA): ["先週", "京都で友達と抹茶を飲みました"],
    ("bigrams", JA): [
        *("先週", "京都", "都で", "で友", "友達", "達と", "と抹", "抹茶", "茶を", "を飲"),
        *("飲み", "みま", "まし", "した"),
    ],
    ("janome", JA): ["先週", "京都", "友達", "抹茶", "飲む"],
    ("sudachi", JA): ["先週", "京都", "友達", "抹茶", "飲む"],
    ("words", MIXED): ["오늘", "iphone", "15를", "샀어"],
    ("bigrams", MIXED): ["iphone", "15", "오늘", "를", "샀어"],  # a lone syllable stays
}


@pytest.mark.parametrize(("name", "text"), list(TERMS))
def test_terms_of_a_sentence(name: str, text: str) -> None:
    try:
        ANALYZERS[name].load()
    except AnalyzerUnavailable:
        pytest.skip(f"{ANALYZERS[name].package} is not installed (an optional segmenter)")
    assert ANALYZERS[name].terms([text]) == [TERMS[(name, text)]]


def test_an_unknown_analyzer_is_named() -> None:
    with pytest.raises(ValueError, match="unknown analyzer 'nope'; use one of auto, words"):
        BM25Retriever(analyzer="nope")


def test_bigrams_of_ascii_text_are_its_words() -> None:
    texts = [EN, "Caroline's 2nd LGBTQ support-group meeting, 7 May 2023!"]
    assert BIGRAMS.terms(texts) == WORDS.terms(texts)


def test_a_missing_segmenter_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> None:
        raise ImportError(name)

    monkeypatch.setattr("dialogbench.retrieval.analyzers.import_module", missing)
    analyzers._jieba.cache_clear()
    try:
        with pytest.raises(AnalyzerUnavailable, match="pip install jieba"):
            ANALYZERS["jieba"].terms([ZH])
    finally:
        analyzers._jieba.cache_clear()


def test_english_rankings_are_unchanged_under_auto() -> None:
    data = load_dataset("sample")
    for subject in data.subjects:
        probes = [p for p in build_probes(subject) if p.reference_positions]
        auto = BM25Retriever().rank(subject, probes, 10)
        words = BM25Retriever(analyzer="words").rank(subject, probes, 10)
        assert np.array_equal(auto.top, words.top)
        assert np.array_equal(auto.ref_ranks, words.ref_ranks, equal_nan=True)
        texts = [m.text for m in subject.messages]
        assert WORDS.terms(texts) == [tokenize(t, frozenset()) for t in texts]


def test_bigrams_find_a_korean_callback_that_words_miss() -> None:
    data = load_dataset(str(FIXTURE))
    ko = next(s for s in data.subjects if s.id == "ko-1")
    probes = [p for p in build_probes(ko) if p.reference_positions]
    words = BM25Retriever(analyzer="words").rank(ko, probes, 5)
    bigrams = BM25Retriever(analyzer="bigrams").rank(ko, probes, 5)
    # "해운대 지점은 ..." asks about "해운대 근처 지점으로 ...": only the stems match
    assert np.isinf(words.ref_ranks[0, 0]) and bigrams.ref_ranks[0, 0] == 1


def test_a_retrieval_run_records_its_analyzer(tmp_path: Path) -> None:
    data = load_dataset(str(FIXTURE))
    config = RetrievalConfig(retrievers=("bm25", "oracle"), memory=("bm25",), n_boot=50)
    run_track(RETRIEVAL, data, tmp_path, config)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    record = {"option": "auto", "subjects": {"bigrams": 2, "words": 1}, "auto": AUTO}
    assert manifest["config"]["analyzer"] == "auto"
    assert manifest["resolved"]["bm25 analyzer"] == record
    assert manifest["stages"]["recall"]["bm25 analyzer"] == record
    summary = json.loads((tmp_path / "summary.json").read_text())
    pooled = summary["all probes (pooled)"]
    assert pooled["memory:bm25"]["hit@5"] == pooled["bm25"]["hit@5"]  # the same BM25


def test_the_cli_option_forces_an_analyzer_and_changes_the_identity(tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "run"
    base = ["run", "retrieval", "--dataset", str(FIXTURE), "--out", str(out)]
    base += ["--retrievers", "bm25", "--n-boot", "50"]
    assert runner.invoke(app, base).exit_code == 0
    first = json.loads((out / "manifest.json").read_text())
    items = (out / "items.jsonl").read_text()
    result = runner.invoke(app, [*base, "--analyzer", "words"])
    assert result.exit_code == 0, result.output
    second = json.loads((out / "manifest.json").read_text())
    assert second["resolved"]["bm25 analyzer"] == {"option": "words", "subjects": {"words": 3}}
    assert second["identity"]["solve"] != first["identity"]["solve"]
    assert (out / "items.jsonl").read_text() != items  # redone, not resumed
    bad = runner.invoke(app, [*base, "--analyzer", "nope"])
    assert bad.exit_code == 2 and "--analyzer" in bad.output


def test_an_uninstalled_segmenter_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unavailable() -> analyzers.Terms:
        raise AnalyzerUnavailable("the kiwipiepy segmenter is not installed: pip install kiwipiepy")

    kiwi = ANALYZERS["kiwi"]
    monkeypatch.setitem(ANALYZERS, "kiwi", analyzers.Analyzer("kiwi", unavailable, kiwi.package))
    args = ["run", "retrieval", "--dataset", str(FIXTURE), "--out", str(tmp_path / "r")]
    result = CliRunner().invoke(app, [*args, "--analyzer", "kiwi"])
    assert result.exit_code == 2
    assert "--analyzer" in result.output and "pip install kiwipiepy" in result.output
    assert not (tmp_path / "r" / "items.jsonl").exists()
