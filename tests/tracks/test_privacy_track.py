"""The authorship-privacy track: content-free features, chance controls, LoCoMo, MemoryBank."""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from dialogbench.cli import app
from dialogbench.data.errors import DataError
from dialogbench.data.locomo import load_locomo
from dialogbench.data.memorybank import load_memorybank
from dialogbench.data.model import Dataset, Message, Subject
from dialogbench.data.registry import load_dataset
from dialogbench.models.model import RETRY_SEED_STEP
from dialogbench.runner import run_track
from dialogbench.runner.roles import RoleSpec
from dialogbench.stats.bootstrap import Estimate
from dialogbench.testing import ChatServer
from dialogbench.tracks.realcompanion.privacy import (
    MODEL_SYSTEMS,
    PRIVACY,
    PrivacyConfig,
    _trials,
    draw_samples,
    eligible_speakers,
    summarise,
)
from dialogbench.tracks.realcompanion.speaker_ids import read_speaker_ids
from dialogbench.tracks.realcompanion.style import count_style, mask_content

FAST = PrivacyConfig(n_boot=500)


def test_masking_keeps_form_and_drops_content() -> None:
    assert mask_content("I saw Caroline's NEW painting!! 😀 at 9") == "I x Xx's XX x!! ☺ at d"
    assert mask_content("i don’t know... lol") == "i don’t x... lol"  # noqa: RUF001
    # the same form with other content words (of the same lengths) counts exactly the same
    a = count_style(["Honestly I LOVED Paris's museums, didn't you?", "ok lol"])
    b = count_style(["Actually I HATED Osaka's beaches, didn't you?", "ok lol"])
    assert np.array_equal(a.dense, b.dense)
    assert a.ngram_names == b.ngram_names
    assert (a.ngrams != b.ngrams).nnz == 0


def test_draw_samples_takes_k_own_rows() -> None:
    owner = np.repeat(np.arange(4), [5, 7, 6, 9])
    picked = draw_samples(owner, 3, np.random.default_rng(0))
    assert picked.shape == (4, 3)
    assert (owner[picked] == np.arange(4)[:, None]).all()
    assert all(len(set(row)) == 3 for row in picked.tolist())


def _writers(texts_of: list[list[str]]) -> Dataset:
    subjects = [
        Subject(
            id=f"s{i}",
            speakers=[f"P{i}"],
            messages=[
                Message(id=f"s{i}m{j}", position=j, speaker=f"P{i}", text=t)
                for j, t in enumerate(texts)
            ],
        )
        for i, texts in enumerate(texts_of)
    ]
    return Dataset(name="writers", subjects=subjects, sha256="0" * 64, source="test")


LINES = ["Hello there, how are you?", "i went out today", "ok!", "What about you...", "LOL yes"]


def _chance_level(result: dict[str, Estimate], n: int) -> None:
    acc, top3 = result["accuracy"], result["top-3 accuracy"]
    assert result["chance"].value == 1 / n
    assert acc.ci_low < 1 / n < acc.ci_high
    assert top3.ci_low < 3 / n < top3.ci_high


def test_identical_writers_score_chance(tmp_path: Path) -> None:
    """8 speakers who all write the very same message: every attribution is a tie."""
    config = PrivacyConfig(repeats=40, n_boot=500, control=False)
    result = run_track(PRIVACY, _writers([[LINES[0]] * 24] * 8), tmp_path, config).result()
    assert result.summary["style"]["accuracy"].n == 320
    _chance_level(result.summary["style"], 8)


def test_shuffled_authors_score_chance(tmp_path: Path) -> None:
    """Messages dealt to speakers at random, afresh each repeat: exactly chance on average."""
    rng = np.random.default_rng(1)
    texts = [list(rng.choice(LINES, size=24)) for _ in range(8)]
    result = run_track(
        PRIVACY, _writers(texts), tmp_path, PrivacyConfig(repeats=60, n_boot=500)
    ).result()
    _chance_level(result.summary["shuffled authors"], 8)


def test_distinct_synthetic_styles_are_found(tmp_path: Path) -> None:
    styles = [
        ["i dunno lol", "yeah ok", "haha sure thing"],
        ["Well, I believe that is correct.", "Indeed; however, I disagree."],
        ["WOW!!! so cool!!!", "OMG yes!!!"],
    ]
    ds = _writers([s * 10 for s in styles])
    result = run_track(PRIVACY, ds, tmp_path, PrivacyConfig(repeats=3, n_boot=200)).result()
    assert result.summary["style"]["accuracy"].value == 1.0


def test_config_and_speaker_checks(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="must exceed sample_size"):
        PrivacyConfig(sample_size=20, min_messages=20)
    one = _writers([["hi there"] * 30])
    with pytest.raises(ValueError, match="needs two or more"):
        run_track(PRIVACY, one, tmp_path, FAST)


def test_sample_runs_and_resumes(tmp_path: Path) -> None:
    ds = load_dataset("sample")
    assert eligible_speakers(ds, 15).keys == ("maya/Maya", "tomas/Tomas")
    first = run_track(PRIVACY, ds, tmp_path, FAST).result()
    solved = tmp_path / "parts" / "solved.jsonl"
    units = [json.loads(line)["unit"] for line in solved.read_text().splitlines()]
    assert units[0] == "style-r000" and units[-1] == "shuffled-authors-r009"
    assert len(units) == 2 * FAST.repeats
    stamp = solved.stat().st_mtime_ns
    (tmp_path / "summary.json").unlink()
    again = run_track(PRIVACY, ds, tmp_path, replace(FAST, n_boot=300, cluster="speaker")).result()
    assert solved.stat().st_mtime_ns == stamp and (tmp_path / "summary.json").exists()
    assert again.summary["style"]["accuracy"].value == first.summary["style"]["accuracy"].value
    run_track(PRIVACY, ds, tmp_path, replace(FAST, repeats=2))  # a solve field: every unit redone
    units = [json.loads(line)["unit"] for line in solved.read_text().splitlines()]
    assert len(units) == 4


def test_cli_options(tmp_path: Path) -> None:
    runner = CliRunner()
    for bad in (["--cluster", "subject"], ["--sample-size", "0"], ["--strip", "[oops"]):
        got = runner.invoke(app, ["run", "privacy", "--out", str(tmp_path), *bad])
        assert got.exit_code == 2 and bad[0][2:] in got.output, got.output
    shown = runner.invoke(app, ["run", "privacy", "--help"], env={"COLUMNS": "200"})
    for name in ("--sample-size", "--min-messages", "--repeats", "--ngram", "--max-ngrams"):
        assert name in shown.output
    for name in ("--control", "--no-control", "--strip", "--seed", "--n-boot", "--cluster"):
        assert name in shown.output
    for name in ("--speaker-id",):
        assert name in shown.output
    for name in ("--model", "--references", "--model-repeats", "--language-model", "--max-fixes"):
        assert name in shown.output
    got = runner.invoke(app, ["run", "privacy", "--out", str(tmp_path), "--language-model"])
    assert got.exit_code == 2 and "needs a model" in got.output, got.output


def test_locomo(locomo_dir: Path, tmp_path: Path) -> None:
    ds = load_locomo(locomo_dir)
    result = run_track(PRIVACY, ds, tmp_path, FAST).result()
    style, control = result.summary["style"], result.summary["shuffled authors"]
    assert len(result.speakers) == 20 and style["chance"].value == 0.05
    assert style["accuracy"].n == 20 * FAST.repeats
    assert style["accuracy"].ci_low > 4 * 0.05  # well above chance
    assert style["top-3 accuracy"].value > style["accuracy"].value
    assert control["accuracy"].ci_low <= 0.05 <= control["accuracy"].ci_high
    rows = [json.loads(x) for x in (tmp_path / "items.jsonl").read_text().splitlines()]
    assert len(rows) == 2 * 20 * FAST.repeats
    assert {"system", "repeat", "speaker", "predicted", "rank", "sample"} <= set(rows[0])
    assert len(rows[0]["sample"]) == FAST.sample_size
    assert all((r["rank"] == 1) == (r["predicted"] == r["speaker"]) for r in rows)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["dataset"]["sha256"] == ds.sha256 and manifest["config"]["sample_size"] == 10
    breakdown = json.loads((tmp_path / "breakdown.json").read_text())
    assert len(breakdown["style"]["speaker"]) == 20


def test_memorybank(memorybank_dir: Path, tmp_path: Path) -> None:
    result = run_track(PRIVACY, load_memorybank(memorybank_dir), tmp_path, FAST).result()
    style, control = result.summary["style"], result.summary["shuffled authors"]
    assert len(result.speakers) == 15
    assert style["accuracy"].ci_low > 4 / 15
    assert control["accuracy"].ci_low <= 1 / 15 <= control["accuracy"].ci_high


# -- the language-model attributor, against a scripted loopback server ------------------------

_BLOCK = re.compile(r"Writer (\d+)\n<messages>\n(.*?)\n</messages>", re.S)
_SAMPLE = re.compile(r"<sample>\n(.*?)\n</sample>", re.S)


def _lines(block: str) -> list[str]:
    return [line[2:] for line in block.splitlines()]


class Oracle:
    """Knows who really wrote every text; names the writer whose shown messages share the
    most true authors with the sample. Prose instead for a prompt holding `garble`, unless
    the request's seed says it is a redo."""

    def __init__(self, ds: Dataset, garble: str | None = None) -> None:
        self.author = {m.text: m.speaker for s in ds.subjects for m in s.messages}
        self.garble = garble

    def __call__(self, body: dict[str, Any]) -> str:
        text = body["messages"][1]["content"]
        sample = _lines(_SAMPLE.findall(text)[-1])
        if self.garble is not None and self.garble in text and body.get("seed") == 0:
            return "Probably the second one, I would say."
        wanted = Counter(self.author[t] for t in sample)
        overlap = {
            int(n): sum(wanted[self.author[t]] for t in _lines(b)) for n, b in _BLOCK.findall(text)
        }
        return json.dumps({"writer": max(overlap, key=lambda n: (overlap[n], -n))})


def _unique_writers(n: int, each: int) -> Dataset:
    return _writers([[f"speaker {i} says line {j}" for j in range(each)] for i in range(n)])


MODEL_FAST = PrivacyConfig(
    sample_size=3, min_messages=15, repeats=30, model_repeats=6, references=4, n_boot=300
)


def test_model_oracle_finds_authors_and_its_control_sits_at_chance(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    ds = _unique_writers(8, 20)
    with ChatServer(reply=Oracle(ds)) as srv:
        model = RoleSpec("openai-compatible/oracle", base_url=srv.base_url)
        out = tmp_path / "run"
        result = run_track(PRIVACY, ds, out, MODEL_FAST, {"model": model}).result()
        assert srv.request_count == 2 * 6 * 8  # one call per trial, both systems
    assert list(result.summary) == [
        "style",
        "language model",
        "shuffled authors",
        "language model, shuffled authors",
        "language model - style",
    ]
    lm, control = result.summary["language model"], result.summary[MODEL_SYSTEMS[1]]
    assert lm["accuracy"].value == 1.0 and lm["accuracy"].n == 48
    assert lm["answered"].value == 1.0 and lm["chance"].value == 1 / 8
    rows = [json.loads(x) for x in (out / "items.jsonl").read_text().splitlines()]
    mine = [r for r in rows if r["system"] == MODEL_SYSTEMS[1]]
    # the figure is the plain share of correct answers, as counted here by hand
    assert control["accuracy"].value == sum(r["correct"] for r in mine) / len(mine)
    assert control["accuracy"].ci_low <= 1 / 8 <= control["accuracy"].ci_high
    for r in (r for r in rows if r["system"] in MODEL_SYSTEMS):
        assert r["shown"][r["true writer"] - 1] == r["speaker"]
        assert r["correct"] == (r["predicted"] == r["speaker"])
        assert len(r["sample"]) == 3 and r["answered"] and r["retry"] == 0
    # the model saw exactly the held-out messages the style system attributed (paired)
    style = {(r["repeat"], r["speaker"]): r["sample"] for r in rows if r["system"] == "style"}
    for r in (r for r in rows if r["system"] == "language model"):
        assert sorted(r["sample"]) == sorted(style[(r["repeat"], r["speaker"])])
    # the paired difference, by hand: the oracle is always right, style on the same samples
    style_right = {
        (r["repeat"], r["speaker"]): r["rank"] == 1 for r in rows if r["system"] == "style"
    }
    lm_rows = [r for r in rows if r["system"] == "language model"]
    diff = sum(1 - style_right[(r["repeat"], r["speaker"])] for r in lm_rows) / len(lm_rows)
    assert result.summary["language model - style"]["accuracy"].value == pytest.approx(diff)
    # shown order is shuffled per trial: the true writer is not always the same number
    assert len({r["true writer"] for r in rows if r["system"] == "language model"}) > 1
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["language_model"] is True and "prompt_sha256" in manifest["resolved"]
    breakdown = json.loads((out / "breakdown.json").read_text())
    assert len(breakdown["language model"]["speaker"]) == 8


def test_unusable_answers_are_counted_not_wrong_and_asked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    ds = _unique_writers(4, 20)
    config = replace(MODEL_FAST, control=False, max_fixes=1)
    garble = "<sample>\n- speaker 2 says"
    with ChatServer(reply=Oracle(ds, garble)) as srv:
        model = RoleSpec("openai-compatible/oracle", base_url=srv.base_url)
        out = tmp_path / "run"
        first = run_track(PRIVACY, ds, out, config, {"model": model}).result()
        rows = [json.loads(x) for x in (out / "items.jsonl").read_text().splitlines()]
        bad = [r for r in rows if r["system"] == "language model" and not r["answered"]]
        assert len(bad) == 6  # speaker 2's trials
        assert all(r["raw"].startswith("Probably") and r["correct"] is None for r in bad)
        assert all(r["attempts"] == 2 and r["call_failed"] is False for r in bad)
        n = 6 * 4
        lm = first.summary["language model"]
        assert lm["accuracy"].value == 1.0 and lm["accuracy"].n == n - 6  # never scored wrong
        assert lm["answered"].value == pytest.approx((n - len(bad)) / n)
        assert first.failures == {"unusable language model answers": len(bad)}
        assert "without a usable answer" in " ".join(first.warnings)
        asked = srv.request_count
        assert asked == n + len(bad)  # each bad one got one correction
        usage = json.loads((out / "usage.json").read_text())
        assert usage["roles"]["model"]["failed_by_kind"] == {"unparseable": len(bad)}
        # a rerun asks exactly those trials again, as their next asking (a new seed)
        again = run_track(PRIVACY, ds, out, config, {"model": model}).result()
        assert srv.request_count == asked + len(bad)
        assert {r.get("seed") for r in srv.requests[asked:]} == {RETRY_SEED_STEP}
        assert again.summary["language model"]["answered"].value == 1.0
        assert again.failures == {}
        rows = [json.loads(x) for x in (out / "items.jsonl").read_text().splitlines()]
        redone = [r for r in rows if r["system"] == "language model" and r["retry"] == 1]
        assert len(redone) == len(bad) and all(r["answered"] for r in redone)
        # and a third run has nothing left to ask
        run_track(PRIVACY, ds, out, config, {"model": model})
        assert srv.request_count == asked + len(bad)


def test_model_option_checks(tmp_path: Path) -> None:
    ds = _unique_writers(3, 20)
    with pytest.raises(ValueError, match="needs a model"):
        run_track(PRIVACY, ds, tmp_path, replace(MODEL_FAST, language_model=True))
    # without a model the track runs the style systems as before
    result = run_track(PRIVACY, ds, tmp_path / "plain", MODEL_FAST).result()
    assert list(result.summary) == ["style", "shuffled authors"]


# -- one person across subjects: --speaker-id ---------------------------------------------------

STYLES = {
    "Ann": ["i dunno lol", "yeah ok", "haha sure thing"],
    "Bob": ["Well, I believe that is correct.", "Indeed; however, I disagree."],
    "Cy": ["WOW!!! so cool!!!", "OMG yes!!!"],
}


def _people() -> Dataset:
    """Ann writes in two subjects (s0 with Bob, s1 with Cy), always in her own style."""

    def subject(sid: str, names: tuple[str, str]) -> Subject:
        texts = [(n, t) for _ in range(5) for n in names for t in STYLES[n]]
        messages = [
            Message(id=f"{sid}m{j}", position=j, speaker=n, text=t)
            for j, (n, t) in enumerate(texts)
        ]
        return Subject(id=sid, speakers=list(names), messages=messages)

    subjects = [subject("s0", ("Ann", "Bob")), subject("s1", ("Ann", "Cy"))]
    return Dataset(name="people", subjects=subjects, sha256="0" * 64, source="test")


PEOPLE = PrivacyConfig(sample_size=3, min_messages=8, repeats=20, n_boot=200, control=False)


def test_one_person_across_subjects_is_one_author(tmp_path: Path) -> None:
    ds = _people()
    apart = run_track(PRIVACY, ds, tmp_path / "apart", PEOPLE).result()
    assert sorted(apart.speakers) == ["s0/Ann", "s0/Bob", "s1/Ann", "s1/Cy"]
    warned = [w for w in apart.warnings if "repeat across subjects" in w]
    assert warned == [w for w in apart.warnings if "'Ann' in 2 subjects (s0, s1)" in w]
    assert "--speaker-id" in warned[0]
    on_disk = json.loads((tmp_path / "apart" / "warnings.json").read_text())["warnings"]
    assert warned[0] in on_disk
    # the two Anns write alike, so each is often taken for the other
    assert apart.summary["style"]["accuracy"].value < 1.0
    assert apart.summary["style"]["chance"].value == 1 / 4

    ids = tmp_path / "ids.json"
    ids.write_text(json.dumps({"s0/Ann": "ann", "s1/Ann": "ann"}))
    one = run_track(PRIVACY, ds, tmp_path / "one", replace(PEOPLE, speaker_id=str(ids))).result()
    assert one.speakers == {"ann": 30, "s0/Bob": 10, "s1/Cy": 10}  # her messages pooled
    assert one.summary["style"]["chance"].value == 1 / 3
    assert one.summary["style"]["accuracy"].value == 1.0
    assert not [w for w in one.warnings if "repeat across subjects" in w]
    rows = [json.loads(x) for x in (tmp_path / "one" / "items.jsonl").read_text().splitlines()]
    assert {r["subject"] for r in rows if r["speaker"] == "ann"} == {"s0 + s1"}
    manifest = json.loads((tmp_path / "one" / "manifest.json").read_text())
    assert manifest["resolved"]["speaker ids"]["speakers"] == 2
    # a CSV file says the same; an id that joins a speaker onto another's name does too
    csv_ids = tmp_path / "ids.csv"
    csv_ids.write_text("\ufeffsubject,speaker,person\ns0,Ann,ann\ns1,Ann,ann\n")  # with a BOM
    json_onto = tmp_path / "onto.json"
    json_onto.write_text(json.dumps({"s1/Ann": "s0/Ann"}))
    for path, key in ((csv_ids, "ann"), (json_onto, "s0/Ann")):
        got = run_track(PRIVACY, ds, tmp_path / path.stem, replace(PEOPLE, speaker_id=str(path)))
        assert got.result().speakers == {key: 30, "s0/Bob": 10, "s1/Cy": 10}


def test_the_datas_own_person_ids_join_subjects(tmp_path: Path) -> None:
    """Messages that carry one person id (`Message.person`) are one author without a file,
    and no warning; a file's id for a speaker overrides the data's."""
    ds = _people()
    for s in ds.subjects:
        s.messages[:] = [
            m.model_copy(update={"person": "ann-7"}) if m.speaker == "Ann" else m
            for m in s.messages
        ]
    got = run_track(PRIVACY, ds, tmp_path / "data", PEOPLE).result()
    assert got.speakers == {"ann-7": 30, "s0/Bob": 10, "s1/Cy": 10}
    assert got.summary["style"]["accuracy"].value == 1.0
    assert not [w for w in got.warnings if "repeat across subjects" in w]
    ids = tmp_path / "ids.json"
    ids.write_text(json.dumps({"s1/Ann": "other-ann"}))
    split = run_track(PRIVACY, ds, tmp_path / "file", replace(PEOPLE, speaker_id=str(ids)))
    assert split.result().speakers == {"ann-7": 15, "s0/Bob": 10, "other-ann": 15, "s1/Cy": 10}


def test_renamed_speakers_keep_every_figure() -> None:
    """Giving each speaker a person id of its own changes names only, no figure."""
    ds = _people()
    config = replace(PEOPLE, repeats=5)
    people = {("s0", "Ann"): "a", ("s0", "Bob"): "b", ("s1", "Ann"): "c", ("s1", "Cy"): "d"}
    plain = eligible_speakers(ds, 8)
    named = eligible_speakers(ds, 8, people=people)
    assert named.keys == ("a", "b", "c", "d") and named.subjects == plain.subjects
    assert (named.owner == plain.owner).all() and named.texts == plain.texts
    counts = count_style(plain.texts, config.ngram)
    for r in range(config.repeats):
        a = _trials("style", r, plain, counts, config)
        b = _trials("style", r, named, counts, config)
        assert [x["rank"] for x in a] == [x["rank"] for x in b]


def test_wrong_same_subject_counts_any_shared_subject() -> None:
    """By hand: Ann (s0 and s1) taken once for Cy (s1: a shared subject) and once for Bob
    (s0: shared too), Cy once for Bob (none shared), Bob once right."""
    spans = {
        "ann": frozenset({"s0", "s1"}),
        "s0/Bob": frozenset({"s0"}),
        "s1/Cy": frozenset({"s1"}),
    }
    trial = {"system": "style", "repeat": 0, "similarity": 0.0, "best similarity": 0.0}
    rows = [
        {**trial, "speaker": "ann", "subject": "s0 + s1", "predicted": "s1/Cy", "rank": 2},
        {**trial, "speaker": "ann", "subject": "s0 + s1", "predicted": "s0/Bob", "rank": 3},
        {**trial, "speaker": "s1/Cy", "subject": "s1", "predicted": "s0/Bob", "rank": 2},
        {**trial, "speaker": "s0/Bob", "subject": "s0", "predicted": "s0/Bob", "rank": 1},
    ]
    got = summarise(rows, spans, replace(PEOPLE, n_boot=50)).summary["style"]
    assert got["wrong, same subject"].value == pytest.approx(2 / 4)
    assert got["accuracy"].value == pytest.approx(1 / 4) and got["chance"].value == 1 / 3


@pytest.mark.parametrize(
    ("name", "text", "record", "field", "fix"),
    [
        ("ids.json", '{"s9/Ann": "a"}', "entry 's9/Ann'", "subject", "its subjects: s0, s1"),
        ("ids.json", '{"s0/Cy": "a"}', "entry 's0/Cy'", "speaker", "its speakers: Ann, Bob"),
        ("ids.json", '{"Ann": "a"}', "entry 'Ann'", None, '"conv-26/Caroline"'),
        ("ids.json", '{"s0/Ann": ""}', "entry 's0/Ann'", "person", "non-empty string"),
        ("ids.json", '{"s0/Ann": 3}', "entry 's0/Ann'", "person", "non-empty string"),
        ("ids.json", '["s0/Ann"]', None, None, "subject,speaker,person"),
        ("ids.json", "{oops", None, None, '{"SUBJECT/SPEAKER": "PERSON", ...}'),
        ("ids.csv", "subject,person\ns0,a\n", "line 1", None, "header subject,speaker,person"),
        ("ids.csv", "subject,speaker,person\ns0,,a\n", "line 2", "speaker", "give the speaker"),
        ("ids.csv", "subject,speaker,person\ns0,Ann,a\ns0,Ann,b\n", "line 3", "person", "one"),
    ],
)
def test_bad_speaker_id_files_name_file_record_field_and_fix(
    tmp_path: Path, name: str, text: str, record: str | None, field: str | None, fix: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(DataError) as raised:
        read_speaker_ids(path, _people())
    e = raised.value
    assert e.path == str(path) and e.record == record and e.field == field
    assert e.fix is not None and fix in e.fix, e.fix


def test_locomo_names_that_repeat_are_warned_about_on_the_cli(
    locomo_dir: Path, tmp_path: Path
) -> None:
    """LoCoMo has three Johns: the warning is printed and in warnings.json; a mapping that
    names them silences it (joining two of them makes 19 authors of 20)."""
    ds = load_locomo(locomo_dir)
    johns = [s.id for s in ds.subjects if any(m.speaker == "John" for m in s.messages)]
    assert len(johns) == 3
    args = ["run", "privacy", "--dataset", "locomo", "--repeats", "2", "--n-boot", "50"]
    args += ["--no-control"]
    got = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "a")], terminal_width=300)
    assert got.exit_code == 0, got.output
    line = f"'John' in 3 subjects ({', '.join(johns)})"
    assert line in " ".join(got.output.split()) and "--speaker-id" in got.output
    stored = json.loads((tmp_path / "a" / "warnings.json").read_text())["warnings"]
    assert any(line in w for w in stored)
    ids = tmp_path / "ids.json"
    ids.write_text(json.dumps({f"{johns[0]}/John": "john", f"{johns[1]}/John": "john"}))
    mapped = CliRunner().invoke(
        app, [*args, "--speaker-id", str(ids), "--out", str(tmp_path / "b")], terminal_width=300
    )
    assert mapped.exit_code == 0, mapped.output
    assert "repeat across subjects" not in mapped.output
    speakers = json.loads((tmp_path / "b" / "speakers.json").read_text())
    assert len(speakers) == 19 and "john" in speakers
    missing = CliRunner().invoke(app, [*args, "--speaker-id", str(tmp_path / "none.json")])
    assert missing.exit_code == 2 and "no such speaker-id file" in missing.output
