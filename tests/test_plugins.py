"""Plugins from outside the repository (`dialogbench.plugins`): a package that declares a
track, a memory system or a rubric under dialogbench's entry-point groups reaches the CLI.

Each test "installs" a package the way pip leaves one: a `NAME-VERSION.dist-info` folder
(METADATA and entry_points.txt) beside the package's module on a folder put on the path;
importlib.metadata finds it there as it finds any installed distribution. The track is run
by the real `dialogbench` command in a subprocess, against the loopback chat server."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from dialogbench.judging.rubric_files import load_rubric_file
from dialogbench.memory import MemorySpecError, resolve_memory
from dialogbench.memory.registry import memory_name
from dialogbench.testing.chatserver import ChatServer, Fault, ok

REPO = Path(__file__).resolve().parents[1]
CLI = "import sys; from dialogbench.cli import main; sys.argv[0] = 'dialogbench'; main()"

TRACK = '''
"""A judged track shipped outside dialogbench: the model names each probe's topic, the
judge says whether it fits."""

from dataclasses import dataclass
from typing import Any, ClassVar

from dialogbench.runner import Outcome, Plan, Role, TrackBase, option, register


@dataclass(frozen=True)
class TopicConfig:
    limit: int | None = option(None, help="at most N probes", min=1)
    words: int = option(6, help="words in the topic", min=1, max=50)
    n_boot: int = option(100, help="bootstrap resamples", min=1, stage="aggregate")


class TopicTrack(TrackBase[TopicConfig, Any]):
    name: ClassVar[str] = "topic"
    summary: ClassVar[str] = "Name each probe's topic; a judge says whether it fits."
    config_type = TopicConfig
    roles: ClassVar[tuple[Role, ...]] = (
        Role("model", "solve", "the model under test"),
        Role("judge", "score", "the judge", fallback="model"),
    )
    judged: ClassVar[bool] = True

    def plan(self, data, config):
        probes = [m for s in data.subjects for m in s.messages]
        return Plan({m.id: m for m in probes[: config.limit]})

    async def solve(self, unit, models, config, plan):
        ask = f"The topic of this, in {config.words} words: {unit.text}"
        out = await models["model"].generate([{"role": "user", "content": ask}])
        return [{"probe": unit.id, "topic": out.text}]

    async def score(self, unit, rows, models, config, plan):
        ask = f"Does '{rows[0]['topic']}' fit '{unit.text}'? yes or no"
        out = await models["judge"].generate([{"role": "user", "content": ask}])
        return [{**rows[0], "fits": out.text.strip() == "yes"}]

    def aggregate(self, plan, rows, config):
        share = sum(r["fits"] for r in rows) / len(rows)
        return Outcome(summary={"fits": share, "n": len(rows)}, result=share)

    def judgments(self, rows):
        return {r["probe"]: float(r["fits"]) for r in rows}

    def headline(self, outcome):
        return {"fits": outcome.result}


TOPIC = register(TopicTrack())  # registering on import is harmless: the entry point counts
'''

MEMORY = '''
from dialogbench.memory import Memory, Recall


class LastMemory:
    """Recalls the newest message before each query."""

    name = "last"

    def __init__(self):
        self.ids = {}

    def ingest(self, subject, messages):
        self.ids.setdefault(subject, {}).update({m.position: m.id for m in messages})

    def recall(self, subject, query, budget):
        before = [p for p in self.ids.get(subject, {}) if p < query.cutoff]
        ids = self.ids.get(subject, {})
        return Recall(tuple(Memory(message_id=ids[max(before)]) for _ in before[:1]))
'''

RUBRIC = {
    "name": "warmth",
    "instructions": {"en": "Rate how warm each participant is."},
    "dimensions": [{"name": "warmth", "low": 0, "high": 3, "criteria": {"en": "0 cold, 3 warm"}}],
}


def install(
    root: Path, package: str, entry_points: Mapping[str, Mapping[str, str]], **modules: str
) -> Path:
    """Lay out distribution `package` 0.1 under `root` as pip would: its modules and a
    dist-info with METADATA and entry_points.txt (group -> name -> "module:attr")."""
    root.mkdir(parents=True, exist_ok=True)
    for module, source in modules.items():
        (root / f"{module}.py").write_text(textwrap.dedent(source))
    info = root / f"{package}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 0.1\n")
    lines = []
    for group, points in entry_points.items():
        lines += [f"[{group}]", *(f"{name} = {value}" for name, value in points.items()), ""]
    (info / "entry_points.txt").write_text("\n".join(lines))
    return root


@pytest.fixture
def on_path(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Path]]:
    """Folders put on sys.path (and PYTHONPATH for subprocesses) for one test."""
    folders: list[Path] = []
    yield folders
    for folder in folders:
        while str(folder) in sys.path:
            sys.path.remove(str(folder))
    importlib.invalidate_caches()


def use(folders: list[Path], folder: Path) -> None:
    folders.append(folder)
    sys.path.insert(0, str(folder))
    importlib.invalidate_caches()


def dialogbench(
    *args: str, path: list[Path], cwd: Path, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The real `dialogbench` command, with `path` (the plugins' folders) on PYTHONPATH."""
    pythonpath = os.pathsep.join([*(str(p) for p in path), str(REPO / "src")])
    return subprocess.run(
        [sys.executable, "-c", CLI, *args],
        env={**os.environ, **(env or {}), "PYTHONPATH": pythonpath, "COLUMNS": "200"},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def judge_says_yes(number: int, body: dict[str, Any]) -> Fault | None:
    return ok("yes") if body.get("model") == "j" else ok("a walk in the park")


def test_a_plugin_track_runs_from_the_shell_and_is_scored(tmp_path: Path) -> None:
    site = install(
        tmp_path / "site",
        "topic-track",
        {"dialogbench.tracks": {"topic": "topic_track:TOPIC"}},
        topic_track=TRACK,
    )
    env = {"DIALOGBENCH_CACHE": str(tmp_path / "cache.sqlite"), "DUMMY_KEY": "x"}

    listed = dialogbench("run", "--help", path=[site], cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "topic" in listed.stdout and "Name each probe's topic" in listed.stdout
    assert "chat" in listed.stdout and "demo-interaction" in listed.stdout  # built-ins stay
    helped = dialogbench("run", "topic", "--help", path=[site], cwd=tmp_path)
    for option in ("--limit", "--words", "--n-boot", "--model", "--judge-model", "--executor"):
        assert option in helped.stdout, option  # generated from its config and roles

    out = tmp_path / "runs" / "topic"
    with ChatServer(rules=judge_says_yes) as srv:
        run = dialogbench(
            "run", "topic", "--dataset", "sample", "--out", str(out), "--limit", "4",
            "--model", "openai-compatible/m", "--base-url", srv.base_url,
            "--api-key-env", "DUMMY_KEY", path=[site], cwd=tmp_path, env=env,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["track"] == "topic" and manifest["config"]["limit"] == 4
        items = [json.loads(line) for line in (out / "items.jsonl").read_text().splitlines()]
        assert len(items) == 4 and all(r["topic"] == "a walk in the park" for r in items)
        for name in ("summary.json", "usage.json", "warnings.json", "parts/scored.jsonl"):
            assert (out / name).exists(), name
        asked = srv.request_count
        assert asked == 8  # 4 answers, 4 verdicts (the judge is the model)

        scored = dialogbench(
            "score", str(out), "--judge-model", "openai-compatible/j",
            "--judge-base-url", srv.base_url, "--judge-api-key-env", "DUMMY_KEY",
            path=[site], cwd=tmp_path, env=env,
        )  # fmt: skip
        assert scored.returncode == 0, scored.stderr
        rejudged = out / "judges" / "openai-compatible_j"
        assert json.loads((rejudged / "summary.json").read_text())["fits"] == 1.0
        assert srv.request_count == asked + 4  # the judge only: the model is never called


def test_a_broken_plugin_says_so_in_one_line_and_breaks_nothing(tmp_path: Path) -> None:
    site = install(
        tmp_path / "site",
        "broken-track",
        {"dialogbench.tracks": {"shaky": "shaky_track:SHAKY", "chat": "topic_track:TOPIC"}},
        shaky_track="import no_such_module_xyz\n",
        topic_track=TRACK.replace('"topic"', '"chat"'),
    )
    listed = dialogbench("run", "--help", path=[site], cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "retrieval" in listed.stdout and "shaky" in listed.stdout
    assert "Traceback" not in listed.stdout + listed.stderr

    run = dialogbench("run", "shaky", "--dataset", "sample", path=[site], cwd=tmp_path)
    assert run.returncode == 2
    assert "Traceback" not in run.stdout + run.stderr
    (line,) = [x for x in run.stderr.splitlines() if x.strip()]
    assert line == (
        "error: cannot load entry point 'shaky = shaky_track:SHAKY' in 'dialogbench.tracks' "
        "(package broken-track 0.1): ModuleNotFoundError: No module named 'no_such_module_xyz'"
    )

    builtin = dialogbench("run", "chat", "--help", path=[site], cwd=tmp_path)
    assert builtin.returncode == 0 and "--memory" in builtin.stdout  # the built-in chat
    assert (
        "warning: entry point 'chat = topic_track:TOPIC' in 'dialogbench.tracks' (package "
        "broken-track 0.1) is refused: 'chat' is a built-in track" in builtin.stderr
    )
    coverage = dialogbench(
        "run", "coverage", "--out", str(tmp_path / "cov"), path=[site], cwd=tmp_path
    )
    assert coverage.returncode == 0, coverage.stderr  # another built-in runs as before
    assert "refused" not in coverage.stderr


def test_a_plugin_that_is_no_track_is_named(tmp_path: Path) -> None:
    site = install(
        tmp_path / "site",
        "odd-track",
        {"dialogbench.tracks": {"odd": "odd_track:ODD", "misnamed": "topic_track:TOPIC"}},
        odd_track="ODD = object()\n",
        topic_track=TRACK,
    )
    odd = dialogbench("run", "odd", path=[site], cwd=tmp_path)
    assert odd.returncode == 2 and "Traceback" not in odd.stderr
    assert (
        "'odd = odd_track:ODD' in 'dialogbench.tracks' (package odd-track 0.1) is not a track"
        in odd.stderr
    )
    misnamed = dialogbench("run", "misnamed", path=[site], cwd=tmp_path)
    assert misnamed.returncode == 2
    assert "gives the track 'topic': name the entry point after its track" in misnamed.stderr


def test_a_memory_plugin_runs_as_memory(tmp_path: Path, on_path: list[Path]) -> None:
    site = install(
        tmp_path / "site",
        "last-memory",
        {
            "dialogbench.memory": {
                "last": "last_memory:LastMemory",
                "shaky": "nope_xyz:Thing",
                "bm25": "last_memory:LastMemory",
            }
        },
        last_memory=MEMORY,
    )
    out = tmp_path / "runs" / "retrieval"
    run = dialogbench(
        "run", "retrieval", "--dataset", "sample", "--retrievers", "bm25", "--memory", "last",
        "--n-boot", "20", "--out", str(out), path=[site], cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    items = [json.loads(line) for line in (out / "items.jsonl").read_text().splitlines()]
    assert {r["retriever"] for r in items} == {"bm25", "memory:last"}

    use(on_path, site)
    system = resolve_memory("last")
    assert type(system).__name__ == "LastMemory" and memory_name("last", system) == "last"
    with pytest.raises(MemorySpecError) as e:
        resolve_memory("shaky")
    assert str(e.value) == (
        "cannot load entry point 'shaky = nope_xyz:Thing' in 'dialogbench.memory' (package "
        "last-memory 0.1): ModuleNotFoundError: No module named 'nope_xyz'"
    )


def test_a_memory_plugin_named_like_a_built_in_is_refused(
    tmp_path: Path, on_path: list[Path], capsys: pytest.CaptureFixture[str]
) -> None:
    site = install(
        tmp_path / "site",
        "clash-memory",
        {"dialogbench.memory": {"recency": "last_memory:LastMemory"}},
        last_memory=MEMORY,
    )
    use(on_path, site)
    system = resolve_memory("recency")
    assert type(system).__name__ == "RetrieverMemory"  # the built-in
    assert (
        "(package clash-memory 0.1) is refused: 'recency' is a built-in memory system"
        in capsys.readouterr().err
    )


def test_a_rubric_plugin_is_a_rubric(tmp_path: Path, on_path: list[Path]) -> None:
    data = "RUBRIC = " + repr(RUBRIC) + "\n"
    data += "from pathlib import Path\nFILE = Path(__file__).with_name('warmth.json')\n"
    data += "BAD = {'name': 'bad', 'instructions': {'en': 'x'}, 'dimensions': []}\n"
    site = install(
        tmp_path / "site",
        "warm-rubrics",
        {
            "dialogbench.rubrics": {
                "warmth": "warm_rubrics:RUBRIC",
                "warmth-file": "warm_rubrics:FILE",
                "bad": "warm_rubrics:BAD",
                "gone": "gone_xyz:R",
            }
        },
        warm_rubrics=data,
    )
    (site / "warmth.json").write_text(json.dumps(RUBRIC))
    use(on_path, site)
    from dialogbench.tracks.demo.interaction import InteractionConfig

    for name in ("warmth", "warmth-file"):
        spec = InteractionConfig(rubric=name).rubric_file()
        assert spec is not None and spec.names == ["warmth"] and len(spec.sha256) == 64
        assert [d.high for d in spec.rubric("en").dimensions] == [3]
    assert load_rubric_file("sotopia").name == "sotopia"  # the built-ins are untouched
    with pytest.raises(ValueError, match=r"entry point 'bad = warm_rubrics:BAD' .*dimensions"):
        load_rubric_file("bad")
    with pytest.raises(
        ValueError, match=r"cannot load entry point 'gone = gone_xyz:R' .*warm-rubrics 0\.1"
    ):
        load_rubric_file("gone")
