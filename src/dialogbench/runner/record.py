"""The run record: one folder per run, the same files for every track.

RUN_DIR/manifest.json     what produced the run: track, dataset (name, source, sha256),
                          config, each model role once, prompt digests, seed, versions,
                          and the identities that decide what a rerun keeps
RUN_DIR/items.jsonl       one record per scored row, in plan order
RUN_DIR/summary.json      the track's figures, each with one 95% bootstrap interval
RUN_DIR/usage.json        calls and tokens per role and per stage (one schema)
RUN_DIR/warnings.json     data repairs, items left out, unscored verdicts
RUN_DIR/<track files>     e.g. breakdown.json, contrasts.json (see docs/run-record.md)
RUN_DIR/parts/solved.jsonl   one line per solved unit: its rows and what it spent
RUN_DIR/parts/scored.jsonl   one line per scored unit (judged tracks)
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from dialogbench import __version__

Progress = Callable[[str, int, int], None]
"""A progress callback: (what, done, total)."""

StoredStage = Literal["solved", "scored"]


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
    roles: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Each model role once: its settings, or `{"same_as": other role}`."""
    resolved: dict[str, Any] = Field(default_factory=dict)
    """What the run derived from its config: prompt digests, tokenizers, ..."""
    identity: dict[str, str] = Field(default_factory=dict)
    """sha256 of what produced the solved units (`solve`) and the scored ones (`score`)."""
    package_version: str = __version__
    git_revision: str | None = None
    python: str = Field(default_factory=lambda: platform.python_version())
    command: list[str] = Field(default_factory=lambda: list(sys.argv))
    started: str = Field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    warnings: list[str] = Field(default_factory=list)


def digest(value: object) -> str:
    """sha256 of a JSON-serialisable value (prompt constants, cue tables): recorded in a
    run's manifest, so that changed wording starts the run afresh."""
    return hashlib.sha256(
        json.dumps(value, sort_keys=True, ensure_ascii=False).encode()
    ).hexdigest()


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


@dataclass
class UnitRecord:
    """One stored unit: its key, its rows and what it spent ({role: usage})."""

    unit: str
    rows: list[dict[str, Any]]
    usage: dict[str, dict[str, Any]] = field(default_factory=dict)

    def line(self) -> str:
        return json.dumps(
            {"unit": self.unit, "rows": self.rows, "usage": self.usage}, ensure_ascii=False
        )


class RunFolder:
    """Reads and writes one run folder; keeps what a previous run of the same kind saved."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        if self.path.exists() and not self.path.is_dir():
            raise ValueError(f"--out {self.path} is a file; give a folder for the run")
        self.parts = self.path / "parts"

    def manifest(self) -> Manifest | None:
        """The manifest a run left here, or None."""
        path = self.path / "manifest.json"
        if not path.exists():
            return None
        try:
            return Manifest.model_validate_json(path.read_text(encoding="utf-8"))
        except ValueError:
            return None  # an older or damaged manifest: nothing can be trusted to match

    def begin(self, manifest: Manifest) -> dict[StoredStage, dict[str, UnitRecord]]:
        """Write the manifest; return the units a previous run with the same identities
        stored (solved and scored separately), deleting those that no longer match."""
        self.parts.mkdir(parents=True, exist_ok=True)
        old = self.manifest()
        kept: dict[StoredStage, dict[str, UnitRecord]] = {"solved": {}, "scored": {}}
        pairs: tuple[tuple[StoredStage, str], ...] = (("solved", "solve"), ("scored", "score"))
        for stage, key in pairs:
            same = old is not None and old.identity.get(key) == manifest.identity.get(key)
            if same and key in manifest.identity:
                kept[stage] = self.read(stage)
            else:
                self.drop(stage)
        manifest.git_revision = manifest.git_revision or git_revision()
        write_json(self.path / "manifest.json", manifest.model_dump(mode="json"))
        for stale in self.parts.glob("*.jsonl"):  # parts of older layouts
            if stale.stem not in ("solved", "scored"):
                stale.unlink()
        return kept

    def read(self, stage: StoredStage) -> dict[str, UnitRecord]:
        """Stored units of a stage by key (the last line wins). A line cut off by an
        interrupted write is dropped, and the file rewritten without it, so that the next
        unit is appended to a whole line."""
        path = self.parts / f"{stage}.jsonl"
        if not path.exists():
            return {}
        out: dict[str, UnitRecord] = {}
        text = path.read_text(encoding="utf-8", errors="replace")
        damaged = bool(text) and not text.endswith("\n")
        for line in text.splitlines():
            try:
                got = json.loads(line)
                record = UnitRecord(got["unit"], got["rows"], got.get("usage", {}))
            except (ValueError, KeyError, TypeError):
                damaged = True
                continue
            out[record.unit] = record
        if damaged:
            tmp = path.with_suffix(".jsonl.tmp")
            tmp.write_text("".join(r.line() + "\n" for r in out.values()), encoding="utf-8")
            os.replace(tmp, path)
        return out

    def drop(self, stage: StoredStage) -> None:
        (self.parts / f"{stage}.jsonl").unlink(missing_ok=True)

    def save(self, stage: StoredStage, record: UnitRecord) -> None:
        """Append one finished unit, flushed to disk before the call returns."""
        with (self.parts / f"{stage}.jsonl").open("a", encoding="utf-8") as f:
            f.write(record.line() + "\n")
            f.flush()
            os.fsync(f.fileno())

    def write_items(self, rows: Iterable[dict[str, Any]]) -> None:
        tmp = self.path / "items.jsonl.tmp"
        with tmp.open("w", encoding="utf-8") as out:
            for row in rows:
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
        os.replace(tmp, self.path / "items.jsonl")

    def write(self, name: str, content: Any) -> None:
        """A result file: JSON for `.json` names, text as given otherwise (`name` may name
        a subfolder, e.g. `written/run-0/S1/profile.json`)."""
        path = self.path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str):
            tmp = path.with_suffix(path.suffix + ".tmp")
            tmp.write_text(content, encoding="utf-8")
            os.replace(tmp, path)
        else:
            write_json(path, content)


def write_json(path: Path, content: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(content, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
