"""Authorship-privacy track (RealCompanion, privacy paragraph): does style give people away?

Removing names does not remove authorship. Given a sample of one speaker's writing and
the histories of all N speakers, we attribute the sample from content-free style alone
(`style.py`: function words, punctuation, casing, lengths, masked character n-grams).

Speakers: every (subject, speaker) pair with role `user` and at least `min_messages`
messages. Each repeat draws, for every speaker, a held-out sample of `sample_size` of
their messages; every speaker's profile is built from the rest of their messages. Each
sample is then attributed to one of the N profiles by *Cosine Delta* (Smith & Aldridge
2011): features are z-scored with the mean and spread across the N profiles (features
that do not vary are dropped), and the profile with the highest cosine similarity to
the sample wins. Ties are broken at random (seeded), so indistinguishable speakers score
exactly chance in expectation. The n-gram features are the `max_ngrams` most frequent
masked n-grams of that repeat's profiles (held-out text never chooses features).

Control `shuffled authors`: before each repeat, the speakers' messages are pooled and
dealt back at random (each keeps their message count), so no speaker has a style of
their own and accuracy must sit at chance, 1/N.

A held-out sample leaves its speaker's profile as the complement of the sample within a
finite history, so the own profile is slightly *less* like the sample than it would be
otherwise: accuracy is, if anything, understated. (Speakers who share one fixed set of
messages therefore score below chance; the shuffled control deals afresh each repeat.)

Scores per trial: correct (top-1), top-3, reciprocal rank of the true speaker, and
`wrong, same subject` (attributed to another speaker of the same subject, e.g. LoCoMo's
conversation partner); each a mean with a bootstrap interval over trials (or whole
speakers), reported against chance (1/N, top-3: 3/N).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
import numpy.typing as npt
from rich.table import Table
from scipy import sparse

from dialogbench.data.model import Dataset
from dialogbench.report.table import summary_table
from dialogbench.runner import Outcome, Plan, Progress, TrackBase, option, register, run_track
from dialogbench.runner.track import Models, Rows
from dialogbench.stats.bootstrap import Estimate, bootstrap_means
from dialogbench.tracks.realcompanion.style import StyleCounts, count_style, style_features

TRACK = "privacy"
SYSTEMS = ("style", "shuffled authors")
IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class PrivacyConfig:
    """Who counts as a speaker, how samples are drawn, and how to draw intervals."""

    sample_size: int = option(10, help="messages in each held-out sample (k)", min=1, max=10_000)
    min_messages: int = option(
        15, help="speakers with fewer 'user' messages are left out (must exceed k)", min=2
    )
    repeats: int = option(10, help="trials per speaker", min=1, max=100_000)
    ngram: int = option(3, help="length of the masked character n-grams", min=1, max=20)
    max_ngrams: int = option(
        300, help="most frequent masked n-grams kept as features", min=0, max=1_000_000
    )
    control: bool = option(True, help="also run the shuffled-authors control")
    strip: str | None = option(
        r"\s*\[shares an image:[^\]]*\]",
        help="regular expression removed from every message first (none: keep all text)",
    )
    """Text a loader added that the person did not write (by default LoCoMo's
    machine-written image captions)."""
    seed: int = option(0, help="seed of the samples, the tie-breaks and the bootstrap", min=0)
    n_boot: int = option(2000, help="bootstrap resamples", min=1, max=1_000_000, stage="aggregate")
    cluster: Literal["trial", "speaker"] = option(
        "trial", help="resample trials, or whole speakers", stage="aggregate"
    )

    def __post_init__(self) -> None:
        if self.strip:
            try:
                re.compile(self.strip)
            except re.error as e:
                raise ValueError(f"strip {self.strip!r} is not a regular expression: {e}") from None
        if self.min_messages <= self.sample_size:
            raise ValueError(
                f"min_messages ({self.min_messages}) must exceed sample_size "
                f"({self.sample_size}): every speaker needs messages left for a profile"
            )


@dataclass(frozen=True)
class Speakers:
    """The eligible speakers and their messages, in one table."""

    keys: tuple[str, ...]
    """`subject/speaker`, one per speaker."""
    subjects: tuple[str, ...]
    owner: IntArray
    """Speaker index of each message."""
    message_ids: tuple[str, ...]
    texts: tuple[str, ...]


@dataclass
class PrivacyResult:
    """The track's figures as written to the run folder."""

    summary: dict[str, dict[str, Estimate]]
    """system (`style`, `shuffled authors`) -> metric -> estimate."""
    breakdown: dict[str, dict[str, dict[str, dict[str, Estimate]]]]
    """system -> facet (speaker, subject) -> level -> metric -> estimate."""
    speakers: dict[str, int]
    """speaker -> messages."""
    warnings: list[str] = field(default_factory=list)


def eligible_speakers(dataset: Dataset, min_messages: int, strip: str | None = None) -> Speakers:
    """Every (subject, speaker) with role `user` and at least `min_messages` messages.

    `strip` (a regular expression) is removed from every text.
    """
    pattern = re.compile(strip) if strip else None
    found: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for subject in dataset.subjects:
        for m in subject.messages:
            if m.role == "user":
                text = pattern.sub("", m.text) if pattern else m.text
                found.setdefault((subject.id, m.speaker), []).append((m.id, text))
    kept = [(k, v) for k, v in found.items() if len(v) >= min_messages]
    return Speakers(
        keys=tuple(f"{s}/{name}" for (s, name), _ in kept),
        subjects=tuple(s for (s, _), _ in kept),
        owner=np.repeat(np.arange(len(kept)), [len(v) for _, v in kept]),
        message_ids=tuple(mid for _, v in kept for mid, _ in v),
        texts=tuple(text for _, v in kept for _, text in v),
    )


def draw_samples(owner: IntArray, k: int, rng: np.random.Generator) -> IntArray:
    """Per speaker, k of their message rows at random: a (speakers x k) array."""
    n = int(owner.max()) + 1
    order: IntArray = np.lexsort((rng.random(len(owner)), owner))  # rows by speaker, shuffled
    starts = np.searchsorted(owner[order], np.arange(n))
    picked: IntArray = order[starts[:, None] + np.arange(k)[None, :]]
    return picked


def attribute(
    counts: StyleCounts,
    owner: IntArray,
    held_out: IntArray,
    max_ngrams: int,
    rng: np.random.Generator,
) -> tuple[IntArray, IntArray, FloatArray]:
    """Attribute each speaker's held-out sample to a profile by Cosine Delta.

    Returns, per speaker: the predicted speaker, the rank of the true one (1 = top) and
    the (speakers x speakers) similarity matrix (rows: samples, columns: profiles).
    """
    n, rows = int(owner.max()) + 1, len(owner)
    in_sample = np.zeros(rows, dtype=bool)
    in_sample[held_out.ravel()] = True
    sample_of = np.repeat(np.arange(n), held_out.shape[1])
    profile_rows = np.flatnonzero(~in_sample)
    sample_sum = _indicator(sample_of, held_out.ravel(), n, rows)
    profile_sum = _indicator(owner[profile_rows], profile_rows, n, rows)
    profile_grams = profile_sum @ counts.ngrams
    top = np.argsort(-np.asarray(profile_grams.sum(axis=0)).ravel(), kind="stable")
    keep = top[:max_ngrams]
    profiles = style_features(profile_sum @ counts.dense, profile_grams[:, keep].toarray())
    samples = style_features(
        sample_sum @ counts.dense, (sample_sum @ counts.ngrams)[:, keep].toarray()
    )
    mean, spread = profiles.mean(axis=0), profiles.std(axis=0)
    varies = spread > 1e-12
    zp = (profiles[:, varies] - mean[varies]) / spread[varies]
    zs = (samples[:, varies] - mean[varies]) / spread[varies]
    sims = _unit(zs) @ _unit(zp).T
    # rank by similarity, ties in a random order
    tiebreak = rng.random(sims.shape)
    order = np.lexsort((tiebreak, -sims), axis=1)
    rank = 1 + np.argmax(order == np.arange(n)[:, None], axis=1)
    return order[:, 0], rank, sims


def _indicator(group: IntArray, rows: IntArray, n_groups: int, n_rows: int) -> sparse.csr_matrix:
    return sparse.csr_matrix((np.ones(len(rows)), (group, rows)), shape=(n_groups, n_rows))


def _unit(x: FloatArray) -> FloatArray:
    norm = np.linalg.norm(x, axis=1, keepdims=True)
    out: FloatArray = np.divide(x, norm, out=np.zeros_like(x), where=norm > 0)
    return out


@dataclass
class Shared:
    """What every repeat shares: the speakers, and their style counts once counted."""

    speakers: Speakers
    counts: StyleCounts | None = None


Unit = tuple[str, int]
"""A system (`style`, `shuffled authors`) and a repeat."""


class PrivacyTrack(TrackBase[PrivacyConfig, Unit]):
    """One unit per system and repeat: every speaker's held-out sample attributed once."""

    name: ClassVar[str] = TRACK
    summary: ClassVar[str] = (
        "Attribute held-out writing to its author from content-free style features."
    )
    config_type = PrivacyConfig

    def plan(self, data: Dataset, config: PrivacyConfig) -> Plan[Unit]:
        speakers = eligible_speakers(data, config.min_messages, config.strip)
        if len(speakers.keys) < 2:
            raise ValueError(
                f"dataset {data.name!r} has {len(speakers.keys)} speaker(s) with role 'user' "
                f"and at least {config.min_messages} messages; the privacy track needs two or "
                "more (lower min_messages, or check the messages' roles)"
            )
        systems = SYSTEMS if config.control else SYSTEMS[:1]
        units = {
            f"{system.replace(' ', '-')}-r{r:03d}": (system, r)
            for system in systems
            for r in range(config.repeats)
        }
        return Plan(units, warnings=list(data.warnings), context=Shared(speakers))

    async def solve(
        self, unit: Unit, models: Models, config: PrivacyConfig, plan: Plan[Unit]
    ) -> Rows:
        shared: Shared = plan.context
        if shared.counts is None:  # counted once, and only if some repeat is still to run
            shared.counts = count_style(shared.speakers.texts, config.ngram)
        system, repeat = unit
        return _trials(system, repeat, shared.speakers, shared.counts, config)

    def aggregate(self, plan: Plan[Unit], rows: Rows, config: PrivacyConfig) -> Outcome:
        speakers = plan.context.speakers
        result = summarise(rows, len(speakers.keys), config)
        result.speakers = {
            k: int(n) for k, n in zip(speakers.keys, np.bincount(speakers.owner), strict=True)
        }
        outcome = Outcome(
            summary=result.summary,
            files={"breakdown.json": result.breakdown, "speakers.json": result.speakers},
            warnings=result.warnings,
            result=result,
        )
        return outcome

    def show(self, outcome: Outcome, config: PrivacyConfig) -> list[Table | str]:
        result: PrivacyResult = outcome.result
        table = summary_table(
            "Authorship attribution (95% bootstrap intervals)",
            result.summary,
            ["accuracy", "chance", "top-3 accuracy", "top-3 chance", "mrr"],
            row_label="features",
        )
        return [table, f"speakers: {len(result.speakers)}"]


PRIVACY = register(PrivacyTrack())


def run_privacy(
    dataset: Dataset,
    out: Path,
    config: PrivacyConfig = PrivacyConfig(),
    progress: Progress | None = None,
) -> PrivacyResult:
    """Run the attribution trials (and the control), write the run folder, return figures."""
    finished = run_track(PRIVACY, dataset, out, config, progress=progress)
    result: PrivacyResult = finished.result()
    return result


def _trials(
    system: str, repeat: int, speakers: Speakers, counts: StyleCounts, config: PrivacyConfig
) -> list[dict[str, Any]]:
    """One repeat: every speaker's sample attributed once."""
    rng = np.random.default_rng([config.seed, repeat, SYSTEMS.index(system)])
    owner = speakers.owner
    if system == "shuffled authors":
        owner = rng.permutation(owner)
    held_out = draw_samples(owner, config.sample_size, rng)
    predicted, rank, sims = attribute(counts, owner, held_out, config.max_ngrams, rng)
    keys, subjects = speakers.keys, speakers.subjects
    return [
        {
            "system": system,
            "repeat": repeat,
            "speaker": keys[i],
            "subject": subjects[i],
            "predicted": keys[int(predicted[i])],
            "rank": int(rank[i]),
            "similarity": round(float(sims[i, i]), 6),
            "best similarity": round(float(sims[i].max()), 6),
            "sample": [speakers.message_ids[j] for j in held_out[i]],
        }
        for i in range(len(keys))
    ]


def summarise(
    rows: Sequence[dict[str, Any]], n_speakers: int, config: PrivacyConfig
) -> PrivacyResult:
    """Accuracy, top-3 and MRR per system with intervals, against chance."""
    summary: dict[str, dict[str, Estimate]] = {}
    breakdown: dict[str, dict[str, dict[str, dict[str, Estimate]]]] = {}
    warnings: list[str] = []
    top3 = min(3, n_speakers) / n_speakers
    for system in dict.fromkeys(r["system"] for r in rows):
        mine = [r for r in rows if r["system"] == system]
        rank = np.array([r["rank"] for r in mine], dtype=np.float64)
        subject_of = {r["speaker"]: r["subject"] for r in mine}
        same_subject = np.array(
            [r["rank"] > 1 and subject_of.get(r["predicted"]) == r["subject"] for r in mine]
        )
        matrix = np.column_stack([rank == 1, rank <= 3, 1.0 / rank, same_subject])
        speaker = np.array([r["speaker"] for r in mine])
        clusters = speaker if config.cluster == "speaker" else None
        table = _estimate(matrix, clusters, np.ones(len(mine), dtype=bool), config)
        n = len(mine)
        for name, value in (("chance", 1 / n_speakers), ("top-3 chance", top3)):
            table[name] = Estimate(value=value, ci_low=value, ci_high=value, n=n)
        summary[system] = table
        for facet in ("speaker", "subject"):
            labels = np.array([r[facet] for r in mine])
            for level in sorted(set(labels)):
                breakdown.setdefault(system, {}).setdefault(facet, {})[level] = _estimate(
                    matrix, clusters, labels == level, config
                )
        acc = table["accuracy"]
        if system == "shuffled authors" and not acc.ci_low <= 1 / n_speakers <= acc.ci_high:
            warnings.append(
                f"CONTROL: shuffled-authors accuracy {acc.value:.3f} "
                f"[{acc.ci_low:.3f}, {acc.ci_high:.3f}] excludes chance {1 / n_speakers:.3f}. "
                "One run in twenty does so by luck; if it persists across seeds, the "
                "attribution is not symmetric between speakers."
            )
    return PrivacyResult(summary=summary, breakdown=breakdown, speakers={}, warnings=warnings)


METRICS = ("accuracy", "top-3 accuracy", "mrr", "wrong, same subject")


def _estimate(
    matrix: FloatArray,
    clusters: npt.NDArray[np.str_] | None,
    mask: npt.NDArray[np.bool_],
    config: PrivacyConfig,
) -> dict[str, Estimate]:
    sub = None if clusters is None else clusters[mask]
    ests = bootstrap_means(matrix[mask], sub, n_boot=config.n_boot, seed=config.seed)
    return dict(zip(METRICS, ests, strict=True))
