"""Plugins from outside the repository (`dialogbench.plugins`): a package that declares a
memory system or a rubric under dialogbench's entry-point groups reaches the CLI.

Each test "installs" a package the way pip leaves one: a `NAME-VERSION.dist-info` folder
(METADATA and entry_points.txt) beside the package's module on a folder put on the path;
importlib.metadata finds it there as it finds any installed distribution."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from dialogbench.judging.rubric_files import load_rubric_file
from dialogbench.memory import MemorySpecError, resolve_memory
from dialogbench.memory.registry import memory_name

REPO = Path(__file__).resolve().parents[1]
CLI = "import sys; from dialogbench.cli import main; sys.argv[0] = 'dialogbench'; main()"

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
