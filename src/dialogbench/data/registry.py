"""Known datasets: where they live, how to fetch them, and how to load any name or path.

A dataset name resolves to files in `$DIALOGBENCH_DATA/<folder>` first (the shared
corpora), then in the download cache (`$DIALOGBENCH_HOME`, default
`~/.cache/dialogbench`). A path is sniffed: a release folder, or a JSON file in one of
the known public layouts.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dialogbench.data.errors import DataError
from dialogbench.data.locomo import load_locomo
from dialogbench.data.longmemeval import load_longmemeval
from dialogbench.data.memorybank import load_memorybank
from dialogbench.data.model import Dataset
from dialogbench.data.release import is_release, load_release

SAMPLE_DIR = Path(__file__).parent / "sample"


@dataclass(frozen=True)
class RemoteFile:
    """One file of a public dataset, pinned by digest."""

    filename: str
    url: str
    sha256: str


@dataclass(frozen=True)
class DatasetSpec:
    """A dataset dialogbench knows by name."""

    name: str
    description: str
    folder: str
    loader: Callable[[Path], Dataset]
    files: tuple[RemoteFile, ...]
    licence: str
    home: str
    carries: str
    manual: str | None = None


REGISTRY: dict[str, DatasetSpec] = {
    spec.name: spec
    for spec in (
        DatasetSpec(
            name="locomo",
            description="LoCoMo: 10 long two-person chats, 1,986 evidence-linked questions",
            folder="locomo",
            loader=load_locomo,
            files=(
                RemoteFile(
                    "locomo10.json",
                    "https://raw.githubusercontent.com/snap-research/LoCoMo/main/data/locomo10.json",
                    "79fa87e90f04081343b8c8debecb80a9a6842b76a7aa537dc9fdf651ea698ff4",
                ),
            ),
            licence="CC BY-NC 4.0",
            home="https://github.com/snap-research/LoCoMo",
            carries="conversation, questions with evidence",
        ),
        DatasetSpec(
            name="memorybank",
            description="MemoryBank: 15 users x up to 150 days of companion chat, user profiles",
            folder="memorybank",
            loader=load_memorybank,
            files=(
                RemoteFile(
                    "memory_bank_en.json",
                    "https://raw.githubusercontent.com/zhongwanjun/MemoryBank-SiliconFriend/"
                    "main/eval_data/en/memory_bank_en.json",
                    "27c302202f9675d87dcaa73e3a42dc0fca8999dcff3c6e7882a787c8a08d9bc7",
                ),
                RemoteFile(
                    "probing_questions_en.jsonl",
                    "https://raw.githubusercontent.com/zhongwanjun/MemoryBank-SiliconFriend/"
                    "main/eval_data/en/probing_questions_en.jsonl",
                    "84538a41e5a9c8000850c19008a85445b01bf52c9960c9d735d21a4b73e5c648",
                ),
            ),
            licence="MIT",
            home="https://github.com/zhongwanjun/MemoryBank-SiliconFriend",
            carries="conversation, profile and persona gold, questions without answers",
        ),
        DatasetSpec(
            name="longmemeval",
            description="LongMemEval: 500 questions, each over its own haystack of chat sessions",
            folder="longmemeval",
            loader=load_longmemeval,
            files=(),
            licence="MIT",
            home="https://github.com/xiaowu0162/LongMemEval",
            carries="conversation, questions with evidence turns",
            manual=(
                "download longmemeval_s.json (or _m / _oracle) from the project's page and "
                "load it by path: dialogbench run retrieval --dataset PATH/longmemeval_s.json"
            ),
        ),
    )
}


def data_home() -> Path:
    """Where downloads go: `$DIALOGBENCH_HOME` or `~/.cache/dialogbench`."""
    return Path(os.environ.get("DIALOGBENCH_HOME", Path.home() / ".cache" / "dialogbench"))


def data_roots() -> list[Path]:
    """Where datasets are looked for, in order: `$DIALOGBENCH_DATA` (when set), then
    `data_home()`."""
    roots = [Path(os.environ["DIALOGBENCH_DATA"])] if os.environ.get("DIALOGBENCH_DATA") else []
    return [*roots, data_home()]


def locate(spec: DatasetSpec) -> Path | None:
    """The folder holding a dataset's files, or None if it is not on this machine."""
    for root in data_roots():
        folder = root / spec.folder
        if spec.files and all((folder / f.filename).exists() for f in spec.files[:1]):
            return folder
        if not spec.files and folder.is_dir() and any(folder.glob("*.json")):
            return folder
    return None


def load_dataset(name_or_path: str) -> Dataset:
    """Load `sample`, a registered name, or a path (release folder or known JSON layout)."""
    if name_or_path == "sample":
        return load_release(SAMPLE_DIR, name="sample")
    spec = REGISTRY.get(name_or_path)
    if spec is not None:
        folder = locate(spec)
        if folder is None:
            how = spec.manual or f"run `dialogbench data download {spec.name}`"
            raise DataError(
                name_or_path,
                "dataset is not on this machine",
                fix=f"{how}, or set DIALOGBENCH_DATA to a folder holding {spec.folder}/",
            )
        if not spec.files:
            candidates = sorted(folder.glob("*.json"))
            return spec.loader(candidates[0])
        return spec.loader(folder)
    return load_path(Path(name_or_path))


def load_path(path: Path) -> Dataset:
    """Load a dataset from a path, recognising its layout."""
    if not path.exists():
        known = ", ".join(["sample", *REGISTRY])
        raise DataError(path, "no such dataset or path", fix=f"use one of {known}, or a path")
    if is_release(path):
        return load_release(path)
    loader = sniff(path)
    return loader(path)


def sniff(path: Path) -> Callable[[Path], Dataset]:
    """Pick a loader for a JSON file from the shape of its first record."""
    if path.is_dir():
        for spec in REGISTRY.values():
            if spec.files and (path / spec.files[0].filename).exists():
                return spec.loader
        raise DataError(
            path,
            "not a release folder and no known dataset file inside",
            fix="see docs/release-format.md, or `dialogbench data import`",
        )
    with path.open(encoding="utf-8") as f:
        head = f.read(1 << 16)
    if '"haystack_sessions"' in head:
        return load_longmemeval
    if '"conversation"' in head and '"qa"' in head:
        return load_locomo
    if '"history"' in head and ('"meta_information"' in head or '"query"' in head):
        return load_memorybank
    raise DataError(
        path,
        "unrecognised layout (not LoCoMo, LongMemEval, MemoryBank or the release format)",
        fix="convert it with `dialogbench data import PATH --out FOLDER` and its field options",
    )
