"""DEMO-style corpora by name (`cped`, `casino`, `sotopia`) or DEMO's own files by path.

A name resolves to `$DIALOGBENCH_DATA/<folder>` (then the download home, as for the other
datasets); `name:split` picks splits (`cped:valid`, `casino:test`, `casino:train+valid`).
Any other argument is a path to DEMO's released files: one file or a folder holding them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dialogbench.data.demo import casino, cped, sotopia
from dialogbench.data.demo.model import DemoSet
from dialogbench.data.demo.release import load_release
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
                fix=f"use one of {known}, or a path to DEMO's element_awareness_*.json / "
                "dialogue_agent_interaction_*.jsonl (or a folder holding them)",
            )
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
