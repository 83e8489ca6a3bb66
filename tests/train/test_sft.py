"""`export sft`: expert trajectories from real finished runs (played against the golden
loopback model), checked against the requests the tracks really sent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from dialogbench.cli import app
from dialogbench.data.errors import DataError
from dialogbench.train.sft import export_sft, split
from train.sft_support import PEOPLE, SECRET, ZH_PEOPLE, sotopia_run


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_examples_are_the_prompts_the_tracks_sent(
    runs: tuple[Path, Path, list[Any]], tmp_path: Path
) -> None:
    aw, inter, requests = runs
    sent = [[{"role": m["role"], "content": m["content"]} for m in r["messages"]] for r in requests]
    summary = export_sft([aw, inter], tmp_path / "sft", val_fraction=0.25, seed=1)
    examples = _lines(tmp_path / "sft" / "train.jsonl") + _lines(tmp_path / "sft" / "val.jsonl")
    assert len(examples) == summary["train"] + summary["val"]
    aw_rows = _lines(aw / "items.jsonl")
    usable = [
        r for r in aw_rows if r["prediction"]["parsed"] is not None and r["score"] is not None
    ]
    assert summary["by_kind"]["awareness"] == len(usable) and usable
    episodes = [r for r in _lines(inter / "items.jsonl") if r["average"] is not None]
    # the model plays both sides: one example per side that spoke
    spoke = sum(len({t["person"] for t in r["turns"]}) for r in episodes)
    assert summary["by_kind"]["interaction"] == spoke and spoke
    for ex in examples:
        msgs = ex["messages"]
        assert msgs[-1]["role"] == "assistant"
        if msgs[1]["content"].count("<dialogue>"):  # awareness: prompt + answer
            assert len(msgs) == 3 and msgs[:2] in sent
            json.loads(msgs[2]["content"])
            continue
        assert [m["role"] for m in msgs[1:]] == ["user", "assistant"] * ((len(msgs) - 1) // 2)
        assert msgs[:2] in sent  # the prompt before this side's first turn, as sent
        turn = json.loads(msgs[2]["content"])
        assert set(turn) <= {"person", "content", "end"}
        me = turn["person"]
        if me in {b for _, b in PEOPLE}:  # participant 2 holds the secret goal
            assert SECRET in msgs[1]["content"]
        else:
            assert all(SECRET not in m["content"] for m in msgs)  # never the partner's goal
    counts = {r["track"]: r for r in summary["runs"]}
    assert counts["demo-awareness"]["rows"] == len(aw_rows)


def test_filter_split_and_sharegpt(runs: tuple[Path, Path, list[Any]], tmp_path: Path) -> None:
    aw, inter, _ = runs
    rows = _lines(aw / "items.jsonl")
    scores = sorted(r["score"] for r in rows if r["score"] is not None)
    cut = scores[len(scores) // 2]
    summary = export_sft([aw], tmp_path / "s", min_score=cut, val_fraction=0.5, fmt="sharegpt")
    kept = sum(1 for s in scores if s >= cut)
    assert summary["train"] + summary["val"] == kept
    left = summary["runs"][0]["left_out"]
    assert left.get(f"score below {cut:g}", 0) == sum(1 for s in scores if s < cut)
    line = _lines(tmp_path / "s" / "train.jsonl")[0]
    assert [t["from"] for t in line["conversations"]] == ["system", "human", "gpt"]
    # the split is by dialogue: every task of a dialogue lies on one side
    got = export_sft([aw, inter], tmp_path / "t", val_fraction=0.5, seed=3)
    assert got["val"] > 0 and got["train"] > 0
    train = {json.dumps(x) for x in _lines(tmp_path / "t" / "train.jsonl")}
    val = {json.dumps(x) for x in _lines(tmp_path / "t" / "val.jsonl")}
    assert not train & val


def test_split_groups_by_hand() -> None:
    from dialogbench.train.sft import Example

    exs = [Example([], f"g{i % 4}", "awareness", "r", 5.0) for i in range(12)]
    train, val = split(exs, 0.25, seed=0)
    assert len(val) == 3 and len({e.group for e in val}) == 1
    assert not {e.group for e in val} & {e.group for e in train}
    with pytest.raises(ValueError, match="val-fraction"):
        split(exs, 1.0, 0)


def test_errors_name_the_file(runs: tuple[Path, Path, list[Any]], tmp_path: Path) -> None:
    aw, _, _ = runs
    with pytest.raises(DataError, match=r"manifest\.json"):
        export_sft([tmp_path], tmp_path / "x")
    with pytest.raises(DataError, match="pass --dataset"):
        export_sft([aw], tmp_path / "x", dataset=str(tmp_path / "nowhere"))


def test_cli_export_sft(runs: tuple[Path, Path, list[Any]], tmp_path: Path) -> None:
    aw, inter, _ = runs
    got = CliRunner().invoke(
        app,
        ["export", "sft", str(aw), str(inter), "--out", str(tmp_path / "c"), "--min-score", "3"],
    )
    assert got.exit_code == 0, got.output
    assert "train and" in got.output and (tmp_path / "c" / "export.json").exists()
    bad = CliRunner().invoke(app, ["export", "sft", str(aw), "--out", "x", "--format", "csv"])
    assert bad.exit_code == 2 and "--format" in bad.output


def test_sotopia_judged_run_exports_its_episodes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    run = sotopia_run(tmp_path)
    rows = _lines(run / "items.jsonl")
    assert all(r["judge_overall"] == "overall" and "average" not in r for r in rows)
    # by hand: 6 episodes (4 English, 2 Chinese), self-play, each side speaks once and
    # participant 1 ends: two examples per episode, every one judged
    summary = export_sft([run], tmp_path / "all", val_fraction=0)
    assert summary["train"] == 12 and summary["val"] == 0
    assert summary["runs"][0]["left_out"] == {}
    examples = _lines(tmp_path / "all" / "train.jsonl")
    ends = [e for e in examples if json.loads(e["messages"][-1]["content"]).get("end")]
    assert len(ends) == 6  # participant 1's side, which ended it
    # SOTOPIA scores each agent: participant 1 has the top of every range (mean 40/7),
    # participant 2 the bottom (-30/7), so --min-score 0 keeps participant 1's six sides
    kept = export_sft([run], tmp_path / "p1", min_score=0, val_fraction=0)
    assert kept["train"] == 6
    assert kept["runs"][0]["left_out"] == {"side's score below 0": 6}
    firsts = [e["messages"][2]["content"] for e in _lines(tmp_path / "p1" / "train.jsonl")]
    assert sorted(json.loads(c)["person"] for c in firsts) == sorted(
        [a for a, _ in PEOPLE] + [a for a, _ in ZH_PEOPLE]
    )


@pytest.mark.parametrize("fmt", ["openai", "sharegpt"])
def test_files_are_utf8_with_chinese_unescaped(
    fmt: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    run = sotopia_run(tmp_path)
    export_sft([run], tmp_path / "o", val_fraction=0.5, fmt=fmt)  # type: ignore[arg-type]
    for name in ("train.jsonl", "val.jsonl", "export.json"):
        raw = (tmp_path / "o" / name).read_bytes()
        text = raw.decode("utf-8")  # strict: fails on anything that is not UTF-8
        assert "\\u" not in text, name
    lines = (tmp_path / "o" / "train.jsonl").read_bytes().decode("utf-8")
    lines += (tmp_path / "o" / "val.jsonl").read_bytes().decode("utf-8")
    assert "这辆自行车多少钱？" in lines and "卖掉自行车" in lines
    for a, _ in ZH_PEOPLE:  # the end marker with its Chinese name, as characters
        marker = json.dumps({"person": a, "end": True}, ensure_ascii=False)
        assert json.dumps(marker, ensure_ascii=False)[1:-1] in lines
    key = "messages" if fmt == "openai" else "conversations"
    assert all(key in json.loads(x) for x in lines.splitlines())
