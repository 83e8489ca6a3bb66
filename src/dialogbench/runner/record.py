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
RUN_DIR/parts/<stage>.jsonl  one line per unit of a track's earlier stage (e.g. recall.jsonl:
                          one memory system's replay of one subject)
RUN_DIR/.lock             while a run is writing the folder: who it is (pid, host, start,
                          command); held with flock, so a killed run's lock is stale at once
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import platform
import re
import socket
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from dialogbench import __version__
from dialogbench.data.safe_names import check_name, inside
from dialogbench.runner.status import FolderError, FolderLocked

try:
    import fcntl
except ImportError:  # pragma: no cover  (Windows: runs are not locked)
    fcntl = None  # type: ignore[assignment]

Progress = Callable[[str, int, int], None]
"""A progress callback: (what, done, total)."""

StoredStage = str
"""A file of stored units under parts/: `solved`, `scored`, or an earlier stage's name."""
MAIN_STAGES: tuple[tuple[StoredStage, str], ...] = (("solved", "solve"), ("scored", "score"))
"""The stored stages every track has, with the identity each is kept under."""


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
    """sha256 of what produced the solved units (`solve`), the scored ones (`score`) and
    each earlier stage's (by its name, e.g. `recall`)."""
    stages: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Earlier stage -> what the plan resolved for it (e.g. `recall`: the memory systems,
    their specs and the budget), part of that stage's identity."""
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
        self.repairs: list[str] = []
        """What reading the folder found damaged and set right (warnings of the run)."""
        self._manifest: Manifest | None = None

    def manifest(self) -> Manifest | None:
        """The manifest a run left here, or None (also when it cannot be read: see
        `manifest_problem`)."""
        return None if self.manifest_problem() else self._manifest

    def manifest_problem(self) -> str | None:
        """Why the manifest here cannot be used (damaged, or from an older layout), or None
        when it can or there is none."""
        path = self.path / "manifest.json"
        self._manifest = None
        if not path.exists():
            return None
        with reading(path):
            text = path.read_text(encoding="utf-8", errors="replace")
        try:
            json.loads(text)
        except ValueError as e:
            return f"damaged ({e})"
        try:
            self._manifest = Manifest.model_validate_json(text)
        except ValueError as e:
            return f"not a manifest this version reads ({str(e).splitlines()[0]})"
        return None

    def begin(
        self, manifest: Manifest, stages: tuple[str, ...] = ()
    ) -> dict[StoredStage, dict[str, UnitRecord]]:
        """Write the manifest; return the units a previous run with the same identities
        stored (per stored stage: `stages` before solved and scored), deleting those that
        no longer match."""
        with writing(self.parts):
            self.parts.mkdir(parents=True, exist_ok=True)
        problem = self.manifest_problem()
        old = self._manifest
        if problem is not None and any(self.parts.glob("*.jsonl")):
            self.repairs.append(
                f"{self.path / 'manifest.json'}: {problem}; the run started afresh (its saved "
                "units cannot be matched; calls made before come from the response cache)"
            )
        pairs = tuple((s, s) for s in stages) + MAIN_STAGES
        kept: dict[StoredStage, dict[str, UnitRecord]] = {stage: {} for stage, _ in pairs}
        for stage, key in pairs:
            same = old is not None and old.identity.get(key) == manifest.identity.get(key)
            if same and key in manifest.identity:
                kept[stage] = self.read(stage)
            else:
                self.drop(stage)
        manifest.git_revision = manifest.git_revision or git_revision()
        write_json(self.path / "manifest.json", manifest.model_dump(mode="json"))
        for stale in self.parts.glob("*.jsonl"):  # parts of older layouts
            if stale.stem not in kept:
                with writing(stale):
                    stale.unlink()
        return kept

    def read(self, stage: StoredStage) -> dict[str, UnitRecord]:
        """Stored units of a stage by key (the last line wins). A line cut off by an
        interrupted write is dropped, and the file rewritten without it, so that the next
        unit is appended to a whole line."""
        path = self.part(stage)
        if not path.exists():
            return {}
        out: dict[str, UnitRecord] = {}
        with reading(path):
            text = path.read_text(encoding="utf-8", errors="replace")
        damaged = 0
        for line in text.splitlines():
            try:
                got = json.loads(line)
                record = UnitRecord(got["unit"], got["rows"], got.get("usage", {}))
            except (ValueError, KeyError, TypeError):
                damaged += 1
                continue
            out[record.unit] = record
        if damaged or (text and not text.endswith("\n")):
            if damaged:
                self.repairs.append(
                    f"{path}: dropped {damaged} damaged line(s) (cut off by an interrupted "
                    "write); those units are done again"
                )
            tmp = path.with_suffix(".jsonl.tmp")
            with writing(tmp):
                tmp.write_text("".join(r.line() + "\n" for r in out.values()), encoding="utf-8")
                os.replace(tmp, path)
        return out

    def drop(self, stage: StoredStage) -> None:
        path = self.part(stage)
        with writing(path):
            path.unlink(missing_ok=True)

    def save(self, stage: StoredStage, record: UnitRecord) -> None:
        """Append one finished unit, flushed to disk before the call returns."""
        path = self.part(stage)
        with writing(path), path.open("a", encoding="utf-8") as f:
            f.write(record.line() + "\n")
            f.flush()
            os.fsync(f.fileno())

    def write_items(self, rows: Iterable[dict[str, Any]]) -> None:
        tmp = self.path / "items.jsonl.tmp"
        with writing(self.path / "items.jsonl"):
            with tmp.open("w", encoding="utf-8") as out:
                for row in rows:
                    out.write(json.dumps(row, ensure_ascii=False) + "\n")
            os.replace(tmp, self.path / "items.jsonl")

    def part(self, stage: StoredStage) -> Path:
        """`parts/<stage>.jsonl`, once the stage's name is checked as one file name."""
        check_name(stage, path=self.parts, record=f"stage '{stage}'", field="name")
        return self.parts / f"{stage}.jsonl"

    def write(self, name: str, content: Any) -> None:
        """A result file: JSON for `.json` names, text as given otherwise (`name` may name
        a subfolder, e.g. `written/run-0/S1/profile.json`; each of its parts must be a
        safe name, and the file lies inside the run folder)."""
        for part in name.split("/"):
            check_name(part, path=self.path, record=f"result file '{name}'", field="name")
        path = inside(self.path / name, self.path, record=f"result file '{name}'", field="name")
        with writing(path):
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, str):
                tmp = path.with_suffix(path.suffix + ".tmp")
                tmp.write_text(content, encoding="utf-8")
                os.replace(tmp, path)
            else:
                write_json(path, content)


def write_json(path: Path, content: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    with writing(path):
        text = json.dumps(content, indent=2, ensure_ascii=False) + "\n"
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)


FIXES = {
    errno.ENOSPC: "free some disk space, then rerun the same command (finished units are kept)",
    errno.EDQUOT: "free some of your disk quota, then rerun the same command",
    errno.EROFS: "the file system is read-only: give --out a folder on a writable one",
    errno.EACCES: "give --out a folder you may write to, or change its permissions",
    errno.EPERM: "give --out a folder you may write to, or change its permissions",
}


def os_error(path: Path, e: OSError, doing: str = "write") -> FolderError:
    """A one-line error naming the file, the cause and the fix."""
    where = Path(e.filename) if e.filename else path
    cause = e.strerror or type(e).__name__
    code = errno.errorcode.get(e.errno or 0)
    fix = FIXES.get(e.errno or 0, "check the folder, then rerun the same command")
    return FolderError(f"cannot {doing} {where}: {cause}{f' ({code})' if code else ''}; {fix}")


@contextmanager
def writing(path: Path) -> Iterator[None]:
    """Turn an `OSError` while writing `path` into a `FolderError` saying what to do."""
    try:
        yield
    except FolderError:
        raise
    except OSError as e:
        raise os_error(path, e) from None


@contextmanager
def reading(path: Path) -> Iterator[None]:
    """Turn an `OSError` while reading `path` into a `FolderError` saying what to do."""
    try:
        yield
    except OSError as e:
        raise os_error(path, e, "read") from None


_CREDENTIALS = re.compile(r"(?<=://)[^/@\s]+@")


def without_credentials(text: str) -> str:
    """`text` with the `user:password@` of any URL in it removed."""
    return _CREDENTIALS.sub("", text)


_HELD: dict[str, tuple[int, int]] = {}
"""Locks this process holds: resolved folder -> (open lock file, depth)."""


class RunLock:
    """`RUN_DIR/.lock`, held for as long as a run writes the folder; a second process is
    refused with a message naming the holder. The lock is an `flock` on the file, which
    the kernel drops when its process dies, so a lock left by a killed run (kill -9, a
    crash, a reboot) is stale at once and simply taken over. The same process may take
    it again (`dialogbench score` re-judging in place)."""

    def __init__(self, folder: Path) -> None:
        self.path = Path(folder) / ".lock"

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def acquire(self) -> None:
        if fcntl is None:  # pragma: no cover
            return
        with writing(self.path):
            self.path.parent.mkdir(parents=True, exist_ok=True)
        key = str(self.path.resolve())
        if key in _HELD:
            fd, depth = _HELD[key]
            _HELD[key] = (fd, depth + 1)
            return
        while True:
            with writing(self.path):
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                raise FolderLocked(self._held_by()) from None
            try:
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)  # the holder removed the file as we opened it: try the new one
        holder = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": datetime.now(UTC).isoformat(timespec="seconds"),
            "command": without_credentials(" ".join(sys.argv)),
        }
        try:
            with writing(self.path):
                os.ftruncate(fd, 0)
                os.write(fd, (json.dumps(holder) + "\n").encode())
        except FolderError:
            os.close(fd)
            raise
        _HELD[key] = (fd, 1)

    def release(self) -> None:
        if fcntl is None:  # pragma: no cover
            return
        key = str(self.path.resolve())
        fd, depth = _HELD.pop(key, (-1, 0))
        if depth > 1:
            _HELD[key] = (fd, depth - 1)
            return
        if fd >= 0:
            with suppress(OSError):  # before unlocking: no one takes a file about to go
                self.path.unlink(missing_ok=True)
            os.close(fd)

    def _held_by(self) -> str:
        try:
            holder = json.loads(self.path.read_text(encoding="utf-8"))
            who = (
                f"process {holder['pid']} on {holder['host']}, started {holder['started']}: "
                f"{holder['command']}"
            )
        except (OSError, ValueError, KeyError, TypeError):
            who = "another process"
        return (
            f"{self.path.parent} is in use by {who}; wait for it to finish, or give another "
            "--out (the lock goes by itself when that process ends)"
        )
