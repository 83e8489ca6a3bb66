"""The memory-demand track: every figure against a hand-computed release folder written here,
the quantile bootstrap against brute-force resampling, and the built-in sample against a
count made straight from its files."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dialogbench.data.registry import load_dataset
from dialogbench.runner import run_track
from dialogbench.stats.bootstrap import resample_counts
from dialogbench.tracks.realcompanion.demand import (
    DEMAND,
    DemandConfig,
    bootstrap_quantile,
    quantile_replicates,
)

FAST = DemandConfig(n_boot=200)

# -- a release folder with figures worked out by hand -------------------------------------

# (probe, stratum, references, needs_memory, needs_memory_strict, dependent); None = unlabelled
ItemSpec = tuple[str, str, list[str], bool | None, bool | None, bool | None]
SUBJECTS: dict[str, tuple[int, list[ItemSpec]]] = {
    # 20 messages, every person message (even positions) a chat item, but no census line
    "a": (
        20,
        [
            ("m0", "abstention", [], False, False, None),
            ("m2", "proportional", ["m1"], False, False, None),
            ("m4", "proportional", [], False, False, None),
            ("m6", "proportional", ["m5", "m3"], False, False, None),
            ("m8", "proportional", [], False, False, None),
            ("m10", "proportional", ["m9"], False, False, None),
            ("m12", "proportional", ["m1"], True, True, True),  # 11 back
            ("m14", "proportional", ["m13", "m2"], True, False, False),  # 1 and 12 back
            ("m16", "enriched", ["m0"], True, True, True),  # 16 back
            ("m18", "enriched", ["m17"], False, False, None),
        ],
    ),
    # 14 messages, 3 of 7 person messages labelled; two items read by their references
    "b": (
        14,
        [
            ("m4", "proportional", ["m3"], False, False, None),
            ("m8", "proportional", ["m0"], None, None, None),  # 8 back: recent, not needed
            ("m12", "proportional", ["m2"], None, None, False),  # 10 back: recorded only
        ],
    ),
    # contributes no memory-needing item
    "c": (4, [("m2", "enriched", ["m1"], False, False, None)]),
}


# census lines (probe, references, needs_memory, needs_memory_strict): b's four person
# messages outside its proportional items, and c's one (its other is an enriched item)
CENSUS: dict[str, list[tuple[str, list[str], bool, bool]]] = {
    "b": [
        ("m0", [], False, False),
        ("m2", ["m1"], False, False),
        ("m6", ["m5"], False, False),
        ("m10", ["m0"], True, False),  # 10 back
    ],
    "c": [("m0", [], False, False)],
}
# re-readings (probe, referents); needs_memory: a referent more than 8 back. b/m12 is a
# proportional item: outside the population
REREAD: dict[str, list[tuple[str, list[str]]]] = {
    "a": [("m16", ["m0"])],
    "b": [("m0", []), ("m6", []), ("m10", ["m0"]), ("m12", ["m2"])],
}


def write_release(root: Path) -> Path:
    """The folder above: messages alternate person (even) and companion (odd)."""
    for sid, (n, items) in SUBJECTS.items():
        folder = root / sid
        folder.mkdir(parents=True)
        lines = [
            {
                "id": f"m{i}",
                "speaker": "P" if i % 2 == 0 else "bot",
                "role": "user" if i % 2 == 0 else "assistant",
                "text": f"message {i} of {sid}",
            }
            for i in range(n)
        ]
        chat: list[dict[str, Any]] = []
        for probe, stratum, refs, recorded, strict, dependent in items:
            item: dict[str, Any] = {
                "probe_id": probe,
                "stratum": stratum,
                "reference_ids": refs,
                "reference_reply": "ok",
            }
            for key, value in (
                ("needs_memory", recorded),
                ("needs_memory_strict", strict),
                ("dependent", dependent),
            ):
                if value is not None:
                    item[key] = value
            chat.append(item)
        (folder / "conversation.jsonl").write_text("\n".join(map(json.dumps, lines)) + "\n")
        (folder / "chat.jsonl").write_text("\n".join(map(json.dumps, chat)) + "\n")
        census = [
            {
                "probe_id": probe,
                "stratum": "census",
                "reference_ids": refs,
                "needs_memory": recorded,
                "needs_memory_strict": strict,
            }
            for probe, refs, recorded, strict in CENSUS.get(sid, [])
        ]
        if census:
            (folder / "census.jsonl").write_text("\n".join(map(json.dumps, census)) + "\n")
        reread = [
            {"probe_id": probe, "needs_memory": bool(refs), "referent_ids": refs}
            for probe, refs in REREAD.get(sid, [])
        ]
        if reread:
            (folder / "reread.jsonl").write_text("\n".join(map(json.dumps, reread)) + "\n")
    return root


def value(e: dict[str, Any]) -> float:
    v = e["value"]
    return math.nan if v is None else float(v)


def test_hand_computed_release(tmp_path: Path) -> None:
    ds = load_dataset(str(write_release(tmp_path / "release")))
    result = run_track(DEMAND, ds, tmp_path / "run", FAST).result()
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    rec, strict = summary["readings"]["recorded"], summary["readings"]["strict"]
    # proportional: 7 of a, 3 of b; recorded a/m12, a/m14, b/m12; strict a/m12
    assert value(rec["demand rate"]) == pytest.approx(3 / 10) and rec["demand rate"]["n"] == 10
    assert value(strict["demand rate"]) == pytest.approx(1 / 10)
    # census: b and c, the subjects with census lines (a has none: its items are no
    # census, though every one of its person messages is a chat item); over their person
    # messages outside the proportional items: b/m0 m2 m6 m10 (census lines), c/m0 (census
    # line), c/m2 (enriched item); recorded b/m10 only, strict none
    assert summary["census"] == {
        "subjects": ["b", "c"],
        "person messages outside the proportional sample": 6,
        "labelled": 6,
    }
    assert value(rec["census rate"]) == pytest.approx(1 / 6) and rec["census rate"]["n"] == 6
    assert value(strict["census rate"]) == 0.0 and strict["census rate"]["n"] == 6
    # re-reading: a/m16, b/m0 m6 m10 (b/m12 is proportional); verified far: a/m16, b/m10
    assert summary["re-reading"] == {"subjects": ["a", "b"], "re-read": 4}
    assert value(rec["re-reading rate"]) == 0.5 and rec["re-reading rate"]["n"] == 4
    assert strict["re-reading rate"]["value"] is None
    # when needed (recorded), the required references only (outside the recent thread of
    # 8): a/m12 11, a/m14 12 (its reference 1 back is no memory demand), a/m16 16, b/m12 10;
    # nearest and furthest alike: sorted 10, 11, 12, 16
    for side in ("nearest", "furthest"):
        assert value(rec[f"{side} median"]) == 11.5
        assert value(rec[f"{side} p75"]) == 13.0  # 12 + 0.25 * (16 - 12)
        assert value(rec[f"{side} max"]) == 16 and rec[f"{side} max"]["ci_low"] is None
    # strict: 11 and 16
    assert value(strict["nearest median"]) == 13.5 and value(strict["nearest p75"]) == 14.75
    assert rec["nearest median"]["n"] == 4 and strict["furthest max"]["n"] == 2
    # the recency window (default 10), over the 11 items with references: a required one
    # within 10 for a/m2 m6 m10 m18, b/m4 m8 m12, c/m2 (not a/m12 11, a/m14 12, a/m16 16),
    # every required one for the same; every reference in the recent thread (8) for the
    # same but b/m12 (10 back)
    assert summary["window"] == 10
    window = summary["recency window"]
    everyone = window["probes with references"]
    assert value(everyone["finds required"]) == pytest.approx(8 / 11)
    assert value(everyone["finds all required"]) == pytest.approx(8 / 11)
    assert value(everyone["answerable from the recent thread"]) == pytest.approx(7 / 11)
    assert value(window["needs memory (recorded)"]["finds required"]) == pytest.approx(1 / 4)
    assert value(window["needs memory (recorded)"]["finds all required"]) == pytest.approx(1 / 4)
    assert value(window["needs memory (strict)"]["finds required"]) == 0.0
    assert summary["subjects contributing none"] == {
        "recorded": {"count": 1, "subjects": ["c"]},
        "strict": {"count": 2, "subjects": ["b", "c"]},
    }
    subjects = json.loads((tmp_path / "run" / "subjects.json").read_text())
    assert subjects["a"]["recorded"]["memory items"] == 3
    assert subjects["a"]["recorded"]["share of memory items"] == 0.75
    assert subjects["b"]["recorded"]["share of memory items"] == 0.25
    assert subjects["a"]["strict"]["share of memory items"] == 1.0
    assert subjects["b"]["censused"] is True and subjects["b"]["labelled person messages"] == 3
    assert subjects["a"]["censused"] is False and subjects["b"]["census lines"] == 4
    assert value(subjects["b"]["recorded"]["demand rate"]) == pytest.approx(1 / 3)
    assert summary["items"] == {"all": 14, "abstention": 1, "enriched": 3, "proportional": 10}
    assert any("2 of 14 chat items carry no needs_memory label" in w for w in result.warnings)
    items = [json.loads(x) for x in (tmp_path / "run" / "items.jsonl").read_text().splitlines()]
    b12 = next(r for r in items if r["subject"] == "b" and r["probe"] == "m12")
    assert b12["needs_memory"] and not b12["needs_memory_strict"] and b12["furthest"] == 10


def test_window_and_cluster_are_aggregate_options(tmp_path: Path) -> None:
    ds = load_dataset(str(write_release(tmp_path / "release")))
    wide = run_track(DEMAND, ds, tmp_path / "run", DemandConfig(n_boot=200, window=12)).result()
    # a/m12 (11 back), a/m14 (12), b/m12 (10) now lie inside; a/m16 (16) does not
    assert wide.window["needs memory (recorded)"]["finds all required"].value == pytest.approx(
        3 / 4
    )
    narrow = run_track(DEMAND, ds, tmp_path / "run", DemandConfig(n_boot=200, window=8)).result()
    # a window no wider than the recent thread never finds a memory item's required message
    assert narrow.window["needs memory (recorded)"]["finds required"].value == 0.0
    by_subject = run_track(
        DEMAND, ds, tmp_path / "run", DemandConfig(n_boot=200, cluster="subject")
    ).result()
    e = by_subject.readings["recorded"]["demand rate"]
    assert e.value == pytest.approx(0.3) and e.ci_low <= e.value <= e.ci_high


def test_no_chat_items_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no chat item"):
        run_track(DEMAND, _empty(tmp_path), tmp_path / "r")


def _empty(tmp_path: Path) -> Any:
    folder = tmp_path / "empty" / "s"
    folder.mkdir(parents=True)
    line = {"id": "m0", "speaker": "P", "text": "hi"}
    (folder / "conversation.jsonl").write_text(json.dumps(line) + "\n")
    return load_dataset(str(folder.parent))


# -- the quantile bootstrap -----------------------------------------------------------------


def test_quantile_replicates_match_brute_force() -> None:
    rng = np.random.default_rng(3)
    x = rng.integers(0, 50, size=13).astype(float)
    weights = resample_counts(13, 40, rng)
    weights[0] = 0.0  # an empty resample
    for q in (0.0, 0.25, 0.5, 0.75, 1.0):
        got = quantile_replicates(x, q, weights)
        assert math.isnan(got[0])
        want = [np.percentile(np.repeat(x, w.astype(int)), q * 100) for w in weights[1:]]
        np.testing.assert_allclose(got[1:], want)


def test_bootstrap_quantile_by_cluster_matches_brute_force() -> None:
    x = [5.0, 1.0, 9.0, 3.0, 7.0, 2.0]
    clusters = ["u", "u", "v", "w", "w", "w"]
    e = bootstrap_quantile(x, 0.5, clusters, n_boot=300, seed=4)
    assert e.value == np.median(x) and e.n == 6
    counts = resample_counts(3, 300, np.random.default_rng(4))  # clusters u, v, w in order
    unit = np.array([0, 0, 1, 2, 2, 2])
    reps = [np.median(np.repeat(x, row[unit].astype(int))) for row in counts]
    lo, hi = np.percentile(reps, [2.5, 97.5])
    assert (e.ci_low, e.ci_high) == pytest.approx((lo, hi))


# -- the built-in sample --------------------------------------------------------------------


def _quantile(values: list[int], q: float) -> float:
    """The q-quantile by hand: linear interpolation between the sorted values."""
    xs = sorted(values)
    at = q * (len(xs) - 1)
    lo = int(at)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (at - lo) * (xs[hi] - xs[lo])


def test_sample_against_its_files(tmp_path: Path) -> None:
    """Every headline figure of the built-in sample, counted again with plain loops over its
    chat.jsonl and conversation.jsonl (not the track's code)."""
    root = Path(__file__).resolve().parents[2] / "src" / "dialogbench" / "data" / "sample"
    prop = {"recorded": 0, "strict": 0}
    n_prop = 0
    back: dict[str, list[tuple[int, int]]] = {"recorded": [], "strict": []}  # nearest, furthest
    with_refs = near_in = all_in = recent = 0
    window: dict[str, list[tuple[bool, bool]]] = {"recorded": [], "strict": []}
    contributes: dict[str, set[str]] = {"recorded": set(), "strict": set()}
    subjects = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        subjects.append(folder.name)
        lines = (folder / "conversation.jsonl").read_text("utf-8").splitlines()
        position = {json.loads(line)["id"]: i for i, line in enumerate(lines)}
        for line in (folder / "chat.jsonl").read_text("utf-8").splitlines():
            item = json.loads(line)
            dist = [position[item["probe_id"]] - position[r] for r in item.get("reference_ids", [])]
            needs = {"recorded": item["needs_memory"], "strict": item["needs_memory_strict"]}
            if item.get("stratum", "proportional") == "proportional":  # the default
                n_prop += 1
                for reading in prop:
                    prop[reading] += needs[reading]
            # required: the references outside the recent thread of a memory item
            required = [d for d in dist if d > 8] if item["needs_memory"] else dist
            if dist:
                with_refs += 1
                near_in += min(required) <= 10
                all_in += max(required) <= 10
                recent += max(dist) <= 8
            for reading in needs:
                if needs[reading]:
                    back[reading].append((min(required), max(required)))
                    window[reading].append((min(required) <= 10, max(required) <= 10))
                    contributes[reading].add(folder.name)

    result = run_track(DEMAND, load_dataset("sample"), tmp_path, FAST).result()
    for reading in ("recorded", "strict"):
        got = result.readings[reading]
        rate = got["demand rate"]
        assert rate.n == n_prop == 60
        assert rate.value == pytest.approx(prop[reading] / n_prop)
        assert rate.ci_low <= rate.value <= rate.ci_high
        nearest = [a for a, _ in back[reading]]
        furthest = [b for _, b in back[reading]]
        assert got["nearest median"].n == len(nearest) > 0
        assert got["nearest median"].value == pytest.approx(_quantile(nearest, 0.5))
        assert got["nearest p75"].value == pytest.approx(_quantile(nearest, 0.75))
        assert got["nearest max"].value == max(nearest)
        assert got["furthest median"].value == pytest.approx(_quantile(furthest, 0.5))
        assert got["furthest p75"].value == pytest.approx(_quantile(furthest, 0.75))
        assert got["furthest max"].value == max(furthest)
        found = result.window[f"needs memory ({reading})"]
        hits = window[reading]
        assert found["finds required"].value == pytest.approx(sum(a for a, _ in hits) / len(hits))
        assert found["finds all required"].value == pytest.approx(
            sum(b for _, b in hits) / len(hits)
        )
    everyone = result.window["probes with references"]
    assert everyone["finds required"].value == pytest.approx(near_in / with_refs)
    assert everyone["finds all required"].value == pytest.approx(all_in / with_refs)
    assert everyone["answerable from the recent thread"].value == pytest.approx(recent / with_refs)
    assert len(result.subjects) == len(subjects) == 2
    # the rebuilt sample: memory is the exception on the proportional stratum (a few percent,
    # as in real companion logs), and the strict reading is the narrower one
    assert 0 < prop["strict"] < prop["recorded"] < n_prop / 10
    assert contributes["recorded"] == set(subjects)


def test_the_command_line(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from dialogbench.cli import app

    release = str(write_release(tmp_path / "release"))
    argv = ["run", "demand", "--dataset", release, "--out", str(tmp_path / "run")]
    got = CliRunner().invoke(app, [*argv, "--n-boot", "50", "--cluster", "subject"])
    assert got.exit_code == 0, got.output
    assert "censused subjects: b, c" in got.output
    assert "census rate over the 6 labelled of their 6 person messages" in got.output
    assert "re-reading rate over 4 re-read person messages" in got.output
    assert "strict: 2 of 3 subjects contribute no memory-needing item: b, c" in got.output
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["config"]["cluster"] == "subject"
