"""DEMO-style corpora by name (`cped`, `casino`, `sotopia`) or DEMO's own files by path.

A name resolves to `$DIALOGBENCH_DATA/<folder>` (then the download home, as for the other
datasets); `name:split` picks splits (`cped:valid`, `casino:test`, `casino:train+valid`).
Any other argument is a path: to DEMO's released files (one file or a folder holding them,
as `dialogbench build demo` writes) or to a corpus folder (one holding its marker file).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dialogbench.data.demo import casino, cped, sotopia
from dialogbench.data.demo.model import DemoSet
from dialogbench.data.demo.release import AWARENESS_GLOB, INTERACTION_GLOB, load_release
from dialogbench.data.errors import DataError
from dialogbench.data.registry import data_roots


@dataclass(frozen=True)
class DemoDatasetSpec:
    """A corpus `load_demo` knows by name."""

    name: str
    description: str
    folder: str
    licence: str
    provides: str
    loader: Callable[[Path, tuple[str, ...] | None, int], DemoSet]
    marker: str
    """A file whose presence in the folder means the corpus is there."""
    splits: tuple[str, ...] = ()
    split_files: tuple[tuple[str, str], ...] = ()
    """(split, file name) for a corpus whose splits are files, to read the ones a folder has."""

    def splits_in(self, folder: Path) -> tuple[str, ...] | None:
        """The splits to read from a corpus folder given by path: None (the defaults) when
        every split file is there, else those that are."""
        present = tuple(s for s, f in self.split_files if (folder / f).is_file())
        return None if len(present) == len(self.split_files) else present


def _cped(folder: Path, splits: tuple[str, ...] | None, seed: int) -> DemoSet:
    return cped.load_cped(folder, splits or cped.DEFAULT_SPLITS, seed=seed)


def _casino(folder: Path, splits: tuple[str, ...] | None, seed: int) -> DemoSet:
    return casino.load_casino(folder, splits or casino.SPLITS, seed=seed)


def _sotopia(folder: Path, splits: tuple[str, ...] | None, seed: int) -> DemoSet:
    if splits and len(splits) > 1:
        raise DataError(folder, "pick one SOTOPIA subset", fix="use sotopia:hard or sotopia")
    return sotopia.load_sotopia(folder, splits[0] if splits else "all")


DEMO_DATASETS: dict[str, DemoDatasetSpec] = {
    spec.name: spec
    for spec in (
        DemoDatasetSpec(
            name="cped",
            description="CPED: Chinese TV-series dialogues with speaker gender, age and Big "
            "Five, per-utterance sentiment, emotion and dialogue act, and scene labels",
            folder="cped",
            licence=cped.LICENCE,
            provides="dialogues and awareness items (persona, scene, utterance), zh",
            loader=_cped,
            marker=cped.SPLITS["test"],
            splits=tuple(cped.SPLITS),
            split_files=tuple(cped.SPLITS.items()),
        ),
        DemoDatasetSpec(
            name="casino",
            description="CaSiNo: English campsite negotiations with item priorities and "
            "reasons, deal outcomes, demographics, Big Five and strategy labels",
            folder="casino",
            licence=casino.LICENCE,
            provides="dialogues and awareness items (goal, persona, utterance), en",
            loader=_casino,
            marker="casino_test.json",
            splits=casino.SPLITS,
            split_files=tuple((s, f"casino_{s}.json") for s in casino.SPLITS),
        ),
        DemoDatasetSpec(
            name="sotopia",
            description="SOTOPIA: 450 benchmark episodes (90 social scenarios x 5 agent "
            "pairs) with goals, profiles, secrets and relationships; sotopia:hard is "
            "SOTOPIA-hard (14 scenarios, 70 episodes)",
            folder="sotopia",
            licence=sotopia.LICENCE,
            provides="interaction episodes, en",
            loader=_sotopia,
            marker="env_agent_combo_storages.jsonl",
            splits=sotopia.SUBSETS,
        ),
    )
}


def locate_demo(spec: DemoDatasetSpec) -> Path | None:
    """The folder holding a corpus, or None if it is not on this machine."""
    for root in data_roots():
        folder = root / spec.folder
        if (folder / spec.marker).exists():
            return folder
    return None


def demo_corpus_at(path: Path) -> DemoDatasetSpec | None:
    """The corpus whose marker file the folder `path` holds, or None."""
    if path.is_dir():
        for spec in DEMO_DATASETS.values():
            if (path / spec.marker).is_file():
                return spec
    return None


def is_demo_release(path: Path) -> bool:
    """True for one of DEMO's released files or a folder holding any (a `build demo` output)."""
    if path.is_file():
        return path.match(AWARENESS_GLOB) or path.match(INTERACTION_GLOB)
    return path.is_dir() and any(
        any(path.glob(pattern)) for pattern in (AWARENESS_GLOB, INTERACTION_GLOB)
    )


def is_demo_path(path: Path) -> bool:
    """True for a path `load_demo` reads: DEMO's released files or a corpus folder."""
    return is_demo_release(path) or demo_corpus_at(path) is not None


def demo_layouts() -> str:
    """What a DEMO path is looked for as, in words (for error messages)."""
    corpora = ", ".join(f"{s.folder}/{s.marker}" for s in DEMO_DATASETS.values())
    return f"DEMO's {AWARENESS_GLOB} / {INTERACTION_GLOB} (or a folder holding them), {corpora}"


def load_demo(name_or_path: str, seed: int = 0) -> DemoSet:
    """Load `cped`, `casino`, `sotopia` (optionally `name:split+split`) or DEMO files by path.

    `seed` picks the target utterance of each dialogue's utterance item.
    """
    name, _, split_text = name_or_path.partition(":")
    spec = DEMO_DATASETS.get(name)
    if spec is None:
        path = Path(name_or_path)
        if not path.exists():
            known = ", ".join(DEMO_DATASETS)
            raise DataError(
                name_or_path,
                "no such DEMO dataset or path",
                fix=f"use one of {known}, or a path to {demo_layouts()}",
            )
        corpus = None if is_demo_release(path) else demo_corpus_at(path)
        if corpus is not None:
            return corpus.loader(path, corpus.splits_in(path), seed)
        return load_release(path)
    splits = tuple(s for s in split_text.split("+") if s) or None
    if splits and not set(splits) <= set(spec.splits):
        raise DataError(
            name_or_path,
            f"unknown split {sorted(set(splits) - set(spec.splits))}",
            fix=f"{spec.name} has splits {list(spec.splits)}"
            if spec.splits
            else f"{spec.name} has no splits; use '{spec.name}'",
        )
    folder = locate_demo(spec)
    if folder is None:
        raise DataError(
            name_or_path,
            "dataset is not on this machine",
            fix=f"set DIALOGBENCH_DATA to a folder holding {spec.folder}/ (with {spec.marker})",
        )
    return spec.loader(folder, splits, seed)
