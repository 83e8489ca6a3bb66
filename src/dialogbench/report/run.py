"""A run folder: manifest, resumable parts, items and summary.

RUN_DIR/manifest.json    what produced the run (dataset sha256, config, seed, versions)
RUN_DIR/parts/*.jsonl    finished units of work; a rerun with the same manifest keeps them
RUN_DIR/items.jsonl      one record per scored unit, joined from the parts
RUN_DIR/summary.json     headline figures with intervals
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from dialogbench import __version__
from dialogbench.data.model import Dataset

Progress = Callable[[str, int, int], None]
"""A track's progress callback: (what, done, total)."""


def to_json(tree: Any) -> Any:
    """Nested dicts of pydantic records (Estimates) as plain JSON data; NaN becomes null."""
    if isinstance(tree, BaseModel):
        return json.loads(tree.model_dump_json())
    if isinstance(tree, dict):
        return {k: to_json(v) for k, v in tree.items()}
    return tree


class DatasetInfo(BaseModel):
    """Which data a run used, exactly."""

    name: str
    source: str
    sha256: str
    subjects: int


class Manifest(BaseModel):
    """Everything needed to say what produced a run's numbers."""

    track: str
    dataset: DatasetInfo
    config: dict[str, Any]
    seed: int
    package_version: str = __version__
    git_revision: str | None = None
    python: str = Field(default_factory=lambda: platform.python_version())
    command: list[str] = Field(default_factory=lambda: list(sys.argv))
    started: str = Field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    warnings: list[str] = Field(default_factory=list)

    def identity(self) -> dict[str, Any]:
        """The fields that must match for a rerun to reuse finished parts."""
        data = self.model_dump(mode="json", include={"track", "config", "seed", "package_version"})
        data["dataset"] = self.dataset.sha256
        same: dict[str, Any] = json.loads(json.dumps(data))  # tuples and lists compare alike
        return same


def dataset_info(dataset: Dataset) -> DatasetInfo:
    return DatasetInfo(
        name=dataset.name,
        source=dataset.source,
        sha256=dataset.sha256,
        subjects=len(dataset.subjects),
    )


def git_revision() -> str | None:
    """The package's git revision when it runs from a checkout, else None."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


class RunDir:
    """Writes a run's files; keeps finished parts when the same run is started again."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.parts = self.path / "parts"

    def start(
        self,
        track: str,
        dataset: DatasetInfo,
        config: Any,
        warnings: Iterable[str] = (),
        resolved: Mapping[str, Any] | None = None,
    ) -> set[str]:
        """Begin a track's run: its config (a dataclass with a `seed`) and what the run
        resolved from it (`resolved`: model settings, prompt digests, ...) go into the
        manifest; return the names of the parts a previous run of the same kind finished."""
        manifest = Manifest(
            track=track,
            dataset=dataset,
            config={**asdict(config), **(resolved or {})},
            seed=config.seed,
            warnings=list(warnings),
        )
        return self.begin(manifest)

    def begin(self, manifest: Manifest) -> set[str]:
        """Write the manifest; return the names of parts that a previous run finished."""
        self.parts.mkdir(parents=True, exist_ok=True)
        old_path = self.path / "manifest.json"
        done: set[str] = set()
        if old_path.exists():
            old = Manifest.model_validate_json(old_path.read_text())
            if old.identity() == manifest.identity():
                done = {p.stem for p in self.parts.glob("*.jsonl")}
            else:
                for p in self.parts.glob("*.jsonl"):
                    p.unlink()
        manifest.git_revision = manifest.git_revision or git_revision()
        _write_json(old_path, manifest.model_dump(mode="json"))
        return done

    def write_part(self, name: str, rows: Iterable[dict[str, Any]]) -> None:
        """Store one finished unit of work atomically."""
        tmp = self.parts / f"{name}.jsonl.tmp"
        with tmp.open("w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
        os.replace(tmp, self.parts / f"{name}.jsonl")

    def read_part(self, name: str) -> list[dict[str, Any]]:
        with (self.parts / f"{name}.jsonl").open(encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]

    def finish(self, part_names: Iterable[str], files: dict[str, Any]) -> None:
        """Join the parts into items.jsonl and write the other result files."""
        tmp = self.path / "items.jsonl.tmp"
        with tmp.open("w", encoding="utf-8") as out:
            for name in part_names:
                with (self.parts / f"{name}.jsonl").open(encoding="utf-8") as f:
                    out.writelines(f)
        os.replace(tmp, self.path / "items.jsonl")
        for filename, content in files.items():
            _write_json(self.path / filename, content)


def _write_json(path: Path, content: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(content, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
