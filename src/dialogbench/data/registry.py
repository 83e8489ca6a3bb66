"""Known datasets: where they live, how to fetch them, and how to load any name or path.

A dataset name resolves to files in `$DIALOGBENCH_DATA/<folder>` first (the shared
corpora), then in the download cache (`$DIALOGBENCH_HOME`, default
`~/.cache/dialogbench`). A path is sniffed: a release folder, or a JSON file in one of
the known public layouts, recognised from the keys of its first record (the file is
parsed once, and the parsed document handed to its loader).

A registered name keeps its name (`locomo`); a path is named after its file stem or
folder (`my_chats` for `my_chats.json`). DEMO's corpora (`cped`, `casino`, `sotopia`)
have their own registry, `dialogbench.data.demo.registry`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from dialogbench.data.errors import DataError
from dialogbench.data.io import clip, json_type, read_json
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


class Loader(Protocol):
    """A corpus loader: the file or folder, the dataset's name, the file already parsed."""

    def __call__(self, path: Path, name: str | None = None, raw: Any = None) -> Dataset: ...


@dataclass(frozen=True)
class DatasetSpec:
    """A dataset dialogbench knows by name."""

    name: str
    description: str
    folder: str
    loader: Loader
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
            return spec.loader(candidates[0], name=spec.name)
        return spec.loader(folder, name=spec.name)
    return load_path(Path(name_or_path))


def load_path(path: Path) -> Dataset:
    """Load a dataset from a path, recognising its layout; it is named after the path."""
    if not path.exists():
        # imported here: the DEMO registry imports this module
        from dialogbench.data.demo.registry import DEMO_DATASETS

        demo = str(path).partition(":")[0]
        if demo in DEMO_DATASETS:
            raise DataError(
                path,
                f"{demo} is a DEMO corpus, not a memory dataset",
                fix="use it with `dialogbench run demo-awareness` / `demo-interaction`, "
                f"or check it with `dialogbench data validate {path}`",
            )
        known = ", ".join(["sample", *REGISTRY])
        raise DataError(path, "no such dataset or path", fix=f"use one of {known}, or a path")
    if is_release(path):
        return load_release(path)
    if path.is_dir():
        return sniff_folder(path)(path, name=path.name)
    raw = read_json(path)
    return sniff(path, raw)(path, name=path.stem, raw=raw)


def sniff_folder(path: Path) -> Loader:
    """The loader of a folder holding a known dataset file."""
    for spec in REGISTRY.values():
        if spec.files and (path / spec.files[0].filename).exists():
            return spec.loader
    raise DataError(
        path,
        "not a release folder and no known dataset file inside",
        fix="see docs/release-format.md, or `dialogbench data import`",
    )


def sniff(path: Path, raw: Any) -> Loader:
    """Pick a loader for a parsed JSON file from the keys of its first record."""
    first: Any = None
    if isinstance(raw, list) and raw:
        first = raw[0]
    elif isinstance(raw, dict) and raw:
        first = next(iter(raw.values()))
    if isinstance(raw, list) and isinstance(first, dict):
        if "haystack_sessions" in first:
            return load_longmemeval
        if "conversation" in first and "qa" in first:
            return load_locomo
    if isinstance(raw, dict) and _memorybank_user(first):
        return load_memorybank
    raise DataError(
        path,
        "unrecognised layout (not LoCoMo, LongMemEval, MemoryBank or the release format): "
        f"it holds {_what(raw)}",
        fix="convert it with `dialogbench data import PATH --out FOLDER` and its field options",
    )


def _memorybank_user(user: Any) -> bool:
    """Whether a value looks like one MemoryBank user: `{history, ...}`, or that object
    written as a Python-literal string."""
    if isinstance(user, dict):
        return "history" in user
    return isinstance(user, str) and ("'history'" in user or '"history"' in user)


def _what(raw: Any) -> str:
    """What a document that fits no layout holds, for the error message."""
    if not isinstance(raw, list | dict):
        return json_type(raw)
    if not raw:
        return f"{json_type(raw)} with nothing in it"
    first = raw[0] if isinstance(raw, list) else next(iter(raw.values()))
    if isinstance(first, dict):
        keys = ", ".join(clip(str(k), 30) for k in list(first)[:8])
        return f"{json_type(raw)} whose first record has the keys {keys or '(none)'}"
    return f"{json_type(raw)} whose first record is {json_type(first)}"
