"""Authorship-privacy track (RealCompanion, privacy paragraph): does style give people away?

Removing names does not remove authorship. Given a sample of one speaker's writing and
the histories of all N speakers, we attribute the sample from content-free style alone
(`style.py`: function words, punctuation, casing, lengths, masked character n-grams).

Speakers: every (subject, speaker) pair with role `user` and at least `min_messages`
messages; with `--speaker-id FILE` (`speaker_ids.py`), or where the data gives messages a
person id (`Message.person`), the pairs given one person id are one speaker (one author, their
messages pooled, `subject` naming all their subjects). A speaker name said in two or more
subjects by speakers nobody identified is warned about: each is taken as its own author.

Each repeat draws, for every speaker, a held-out sample of `sample_size` of their messages;
every speaker's profile is built from the rest of their messages. Each sample is then
attributed to one of the N profiles by *Cosine Delta* (Smith & Aldridge 2011): features are
z-scored with the mean and spread across the N profiles (features that do not vary are
dropped), and the profile with the highest cosine similarity to the sample wins. Ties are
broken at random (seeded), so indistinguishable speakers score exactly chance in
expectation. The n-gram features are the `max_ngrams` most frequent masked n-grams of that
repeat's profiles (held-out text never chooses features).

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

Language model (`--model`; without one the track runs the style systems alone). System
`language model`: for the very held-out samples the style system attributes (same seed,
repeat and draw), the model is shown the N speakers as `Writer 1..N`, in an order shuffled
per trial, each through `references` messages drawn from the rest of their history, then the
sample, and names the writer (`privacy_prompts.py`). One trial is one unit and one call. Its
control `language model, shuffled authors` does the same on the style control's shuffled
deal, so it must sit at chance too. Figures: `accuracy` over the trials with a usable
answer, `answered` (the share with one), `wrong, same subject`, against `chance`; and
`language model - style`, the mean paired difference of the two on the same samples. A reply
that is still unusable after `max_fixes` corrections is kept with its raw text, counted
(`failures`, exit status 3), never scored as wrong: it is a failed call of the model
(`Model.generate_parsed`), so a rerun of the same command does its trial again as the
call's next asking (`retry` in the row; a new cache key and seed, so the response cache
does not hand back the same reply; a deterministic model may still answer the same: it
stays counted).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from rich.table import Table
from scipy import sparse

from dialogbench.data.io import sha256_file
from dialogbench.data.model import Dataset
from dialogbench.models.model import Model
from dialogbench.report.table import summary_table
from dialogbench.runner import Outcome, Plan, TrackBase, model_role, option, register
from dialogbench.runner import config as shared
from dialogbench.runner.track import Models, Rows
from dialogbench.stats.bootstrap import Estimate, bootstrap_means
from dialogbench.tracks.realcompanion.privacy_prompts import (
    PROMPT_SHA256,
    attribution_messages,
    guess_model,
)
from dialogbench.tracks.realcompanion.speaker_ids import (
    Speaker,
    must_exist,
    person_of,
    read_speaker_ids,
    repeated_names,
)
from dialogbench.tracks.realcompanion.style import StyleCounts, count_style, style_features

TRACK = "privacy"
SYSTEMS = ("style", "shuffled authors")
MODEL_SYSTEMS = ("language model", "language model, shuffled authors")
DEALT_AS = dict(zip(MODEL_SYSTEMS, SYSTEMS, strict=True))
"""A model system's held-out samples are those of this style system (paired trials)."""
IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class PrivacyConfig(shared.Sampled):
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
    speaker_id: str | None = option(
        None,
        help="file naming who each speaker is across subjects: JSON "
        '{"SUBJECT/SPEAKER": "PERSON"} or CSV subject,speaker,person; speakers given one '
        "person id are one author (default: each subject's speaker is its own)",
    )
    seed: int = shared.seed("the samples, the tie-breaks and the bootstrap")
    n_boot: int = shared.n_boot()
    cluster: Literal["trial", "speaker"] = option(
        "trial", help="resample trials, or whole speakers", stage="aggregate"
    )
    language_model: bool | None = option(
        None, help="also let the model name the author (default: when --model is given)"
    )
    references: int = option(
        10, help="messages of each speaker's history the model is shown", min=1, max=1000
    )
    model_repeats: int | None = option(
        None, help="trials per speaker for the model (default: --repeats)", min=1, max=100_000
    )
    max_tokens: int = shared.tokens(32, "reply budget of the model")
    temperature: float = shared.temperature(0.0, "sampling temperature of the model")
    max_fixes: int = shared.fixes(1, "corrections of an unusable model reply")

    @property
    def systems(self) -> tuple[str, ...]:
        """The systems run, in the order shown: style, model, then their controls."""
        chosen = ["style", *(MODEL_SYSTEMS[:1] if self.language_model else ())]
        if self.control:
            chosen += ["shuffled authors", *(MODEL_SYSTEMS[1:] if self.language_model else ())]
        return tuple(chosen)

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
    """`subject/speaker`, one per speaker (or the person id `--speaker-id` or the data gives)."""
    subjects: tuple[str, ...]
    """The speaker's subject (its subjects joined by ` + `, for one across subjects)."""
    members: tuple[tuple[Speaker, ...], ...]
    """The (subject, speaker) pairs each speaker is."""
    owner: IntArray
    """Speaker index of each message."""
    message_ids: tuple[str, ...]
    texts: tuple[str, ...]

    def spans(self) -> dict[str, frozenset[str]]:
        """Each speaker's subjects."""
        return {k: frozenset(s for s, _ in m) for k, m in zip(self.keys, self.members, strict=True)}


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
    failures: dict[str, int] = field(default_factory=dict)
    """Model trials without a usable answer, by cause (left out of accuracy)."""


def eligible_speakers(
    dataset: Dataset,
    min_messages: int,
    strip: str | None = None,
    people: Mapping[Speaker, str] | None = None,
) -> Speakers:
    """Every (subject, speaker) with role `user` and at least `min_messages` messages; the
    messages given one person id (by `people`, `speaker_ids.read_speaker_ids`, else by the
    data, `Message.person`) as one speaker.

    `strip` (a regular expression) is removed from every text.
    """
    pattern = re.compile(strip) if strip else None
    found: dict[str, list[tuple[str, str]]] = {}
    members: dict[str, dict[Speaker, None]] = {}
    for subject in dataset.subjects:
        for m in subject.messages:
            if m.role == "user":
                text = pattern.sub("", m.text) if pattern else m.text
                key = person_of(people or {}, subject.id, m.speaker, m.person)
                found.setdefault(key, []).append((m.id, text))
                members.setdefault(key, {})[(subject.id, m.speaker)] = None
    kept = [(k, v) for k, v in found.items() if len(v) >= min_messages]
    return Speakers(
        keys=tuple(k for k, _ in kept),
        subjects=tuple(" + ".join(dict.fromkeys(s for s, _ in members[k])) for k, _ in kept),
        members=tuple(tuple(members[k]) for k, _ in kept),
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


@dataclass(frozen=True)
class Deal:
    """One repeat's draw for a system: who owns each message (shuffled for a control), the
    held-out samples (speakers x k rows) and, for the model, each speaker's shown messages."""

    owner: IntArray
    held_out: IntArray
    references: tuple[IntArray, ...] = ()


Unit = tuple[str, int, int]
"""A system, a repeat, and a speaker index (-1 for a style unit, which does them all)."""


@dataclass
class Shared:
    """What every unit shares: the speakers, their style counts once counted, and each
    repeat's deal once drawn."""

    speakers: Speakers
    warnings: list[str] = field(default_factory=list)
    """What the speakers' names say (a name repeated across subjects), shown with the figures."""
    counts: StyleCounts | None = None
    deals: dict[tuple[str, int], Deal] = field(default_factory=dict)


def _deal(
    system: str, repeat: int, owner: IntArray, config: PrivacyConfig
) -> tuple[IntArray, IntArray, np.random.Generator]:
    """The style system's draw for a repeat: owners (dealt afresh for the control) and the
    held-out samples, with the generator in the state the attribution goes on from."""
    rng = np.random.default_rng([config.seed, repeat, SYSTEMS.index(system)])
    if system == "shuffled authors":
        owner = rng.permutation(owner)
    return owner, draw_samples(owner, config.sample_size, rng), rng


def draw_references(
    owner: IntArray, held_out: IntArray, m: int, rng: np.random.Generator
) -> tuple[IntArray, ...]:
    """Per speaker, up to m of their rows outside every held-out sample, at random, in
    history order: the messages the model is shown of them."""
    outside = np.ones(len(owner), dtype=bool)
    outside[held_out.ravel()] = False
    picked = []
    for i in range(held_out.shape[0]):
        rows = np.flatnonzero((owner == i) & outside)
        chosen: IntArray = np.sort(rng.choice(rows, size=min(m, len(rows)), replace=False))
        picked.append(chosen)
    return tuple(picked)


class PrivacyTrack(TrackBase[PrivacyConfig, Unit]):
    """One unit per system and repeat: every speaker's held-out sample attributed once."""

    name = TRACK
    summary = "Attribute held-out writing to its author: content-free style, and a model if given."
    config_type = PrivacyConfig
    roles = (model_role("the model that names the author", required=False),)

    def configure(self, config: PrivacyConfig, roles: frozenset[str]) -> PrivacyConfig:
        """The model systems run when a model is given (unless turned off); the speaker-id
        file's absolute path."""
        if config.speaker_id is not None:
            path = Path(config.speaker_id).expanduser().resolve()
            must_exist(path)
            config = replace(config, speaker_id=str(path))
        if config.language_model is None:
            return replace(config, language_model="model" in roles)
        if config.language_model and "model" not in roles:
            raise ValueError(
                "language_model needs a model: pass --model (e.g. `embedded`) or model="
            )
        return config

    def plan(self, data: Dataset, config: PrivacyConfig) -> Plan[Unit]:
        people: dict[Speaker, str] = {}
        resolved: dict[str, Any] = {}
        if config.speaker_id is not None:
            path = Path(config.speaker_id)
            people = read_speaker_ids(path, data)
            resolved["speaker ids"] = {"sha256": sha256_file(path), "speakers": len(people)}
        speakers = eligible_speakers(data, config.min_messages, config.strip, people)
        if len(speakers.keys) < 2:
            raise ValueError(
                f"dataset {data.name!r} has {len(speakers.keys)} speaker(s) with role 'user' "
                f"and at least {config.min_messages} messages; the privacy track needs two or "
                "more (lower min_messages, or check the messages' roles)"
            )
        units: dict[str, Unit] = {}
        model_repeats = config.model_repeats or config.repeats
        for system in config.systems:
            stem = system.replace(", ", "-").replace(" ", "-")
            if system in SYSTEMS:
                units.update({f"{stem}-r{r:03d}": (system, r, -1) for r in range(config.repeats)})
            else:
                n = len(speakers.keys)
                units.update(
                    {
                        f"{stem}-r{r:03d}-{i:03d}": (system, r, i)
                        for r in range(model_repeats)
                        for i in range(n)
                    }
                )
        if config.language_model:
            resolved["prompt_sha256"] = PROMPT_SHA256
        repeated = repeated_names(speakers.keys, speakers.members, people)
        shared = Shared(speakers, _name_warnings(repeated))
        return Plan(units, warnings=list(data.warnings), resolved=resolved, context=shared)

    async def solve(
        self, unit: Unit, models: Models, config: PrivacyConfig, plan: Plan[Unit]
    ) -> Rows:
        shared: Shared = plan.context
        system, repeat, _ = unit
        if system in MODEL_SYSTEMS:
            return [await _model_trial(unit, shared, models["model"], config)]
        if shared.counts is None:  # counted once, and only if some repeat is still to run
            shared.counts = count_style(shared.speakers.texts, config.ngram)
        return _trials(system, repeat, shared.speakers, shared.counts, config)

    def aggregate(self, plan: Plan[Unit], rows: Rows, config: PrivacyConfig) -> Outcome:
        speakers = plan.context.speakers
        result = summarise(rows, speakers.spans(), config)
        result.warnings[:0] = plan.context.warnings
        result.speakers = {
            k: int(n) for k, n in zip(speakers.keys, np.bincount(speakers.owner), strict=True)
        }
        outcome = Outcome(
            summary=result.summary,
            files={"breakdown.json": result.breakdown, "speakers.json": result.speakers},
            warnings=result.warnings,
            result=result,
            failures=result.failures,
        )
        return outcome

    def show(self, outcome: Outcome, config: PrivacyConfig) -> list[Table | str]:
        result: PrivacyResult = outcome.result
        metrics = ["accuracy", "chance", "top-3 accuracy", "top-3 chance", "mrr"]
        if any("answered" in row for row in result.summary.values()):
            metrics.append("answered")
        table = summary_table(
            "Authorship attribution (95% bootstrap intervals)",
            result.summary,
            metrics,
            row_label="attributor",
        )
        shown: list[Table | str] = [table, f"speakers: {len(result.speakers)}"]
        shown += [
            f"{k}: {v} (left out of accuracy, listed in items)" for k, v in result.failures.items()
        ]
        return shown


PRIVACY = register(PrivacyTrack())


def _name_warnings(repeated: Mapping[str, list[str]]) -> list[str]:
    """One line for the speaker names said in several subjects, each taken as several
    authors; none when no name repeats."""
    if not repeated:
        return []
    each = "; ".join(
        f"{name!r} in {len(subjects)} subjects ({', '.join(subjects)})"
        for name, subjects in repeated.items()
    )
    return [
        f"speaker names repeat across subjects, each speaker taken as a different author: "
        f"{each}. If some are one person, give --speaker-id FILE mapping them to one person "
        'id (JSON {"SUBJECT/SPEAKER": "PERSON"}; docs/tracks.md#privacy)'
    ]


def _trials(
    system: str, repeat: int, speakers: Speakers, counts: StyleCounts, config: PrivacyConfig
) -> list[dict[str, Any]]:
    """One repeat: every speaker's sample attributed once."""
    owner, held_out, rng = _deal(system, repeat, speakers.owner, config)
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


def model_deal(shared: Shared, system: str, repeat: int, config: PrivacyConfig) -> Deal:
    """A model system's deal for a repeat: the paired style system's owners and held-out
    samples, plus the messages shown of each speaker (drawn once, then kept)."""
    key = (system, repeat)
    if key not in shared.deals:
        style = DEALT_AS[system]
        owner, held_out, _ = _deal(style, repeat, shared.speakers.owner, config)
        rng = np.random.default_rng([config.seed, repeat, SYSTEMS.index(style), 1])
        refs = draw_references(owner, held_out, config.references, rng)
        shared.deals[key] = Deal(owner, held_out, refs)
    return shared.deals[key]


def writer_order(config: PrivacyConfig, system: str, repeat: int, speaker: int, n: int) -> IntArray:
    """The speakers in the order a trial shows them (`Writer 1` first), seeded per trial."""
    rng = np.random.default_rng([config.seed, repeat, MODEL_SYSTEMS.index(system), 2, speaker])
    order: IntArray = rng.permutation(n)
    return order


async def _model_trial(
    unit: Unit, shared: Shared, model: Model, config: PrivacyConfig
) -> dict[str, Any]:
    """One model trial: speaker `i`'s held-out sample, the N speakers' shown messages, the
    model's answer (or its raw reply and why it could not be used)."""
    system, repeat, i = unit
    sp = shared.speakers
    deal = model_deal(shared, system, repeat, config)
    n = len(sp.keys)
    order = writer_order(config, system, repeat, i, n)
    rows = np.sort(deal.held_out[i])
    prompt = attribution_messages(
        [[sp.texts[j] for j in deal.references[o]] for o in order], [sp.texts[j] for j in rows]
    )
    got = await model.generate_structured(
        prompt,
        guess_model(n),
        config.generate_config(),
        max_fixes=config.max_fixes,
        tag=f"{TRACK}:{system}",
    )
    row: dict[str, Any] = {
        "system": system,
        "repeat": repeat,
        "speaker": sp.keys[i],
        "subject": sp.subjects[i],
        "answered": got.value is not None,
        "predicted": None,
        "correct": None,
        "writer": None,
        "true writer": int(np.flatnonzero(order == i)[0]) + 1,
        "shown": [sp.keys[o] for o in order],
        "sample": [sp.message_ids[j] for j in rows],
        "attempts": got.attempts,
        "retry": got.retry,
    }
    if got.value is not None:
        who = int(order[got.value.writer - 1])
        row.update(predicted=sp.keys[who], correct=who == i, writer=got.value.writer)
    else:
        row.update(raw=got.raw, error=got.error, call_failed=got.call_failed)
    return row


def summarise(
    rows: Sequence[dict[str, Any]], spans: Mapping[str, frozenset[str]], config: PrivacyConfig
) -> PrivacyResult:
    """Accuracy, top-3 and MRR per system with intervals, against chance; `spans`: each
    speaker's subjects (for `wrong, same subject`)."""
    n_speakers = len(spans)
    summary: dict[str, dict[str, Estimate]] = {}
    breakdown: dict[str, dict[str, dict[str, dict[str, Estimate]]]] = {}
    warnings: list[str] = []
    failures: dict[str, int] = {}
    top3 = min(3, n_speakers) / n_speakers
    for system in dict.fromkeys(r["system"] for r in rows):
        mine = [r for r in rows if r["system"] == system]
        if system in MODEL_SYSTEMS:
            table = _model_summary(system, mine, spans, config, breakdown, warnings)
            summary[system] = table
            unusable = sum(1 for r in mine if not r["answered"] and not r["call_failed"])
            if unusable:
                failures[f"unusable {system} answers"] = unusable
            continue
        rank = np.array([r["rank"] for r in mine], dtype=np.float64)
        same_subject = np.array([r["rank"] > 1 and _shares_subject(r, spans) for r in mine])
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
        if system == "shuffled authors":
            warnings += _control_warning(system, table["accuracy"], n_speakers)
    paired = _paired_difference(rows, config)
    if paired is not None:
        summary[PAIRED] = {"accuracy": paired}
    return PrivacyResult(
        summary=summary, breakdown=breakdown, speakers={}, warnings=warnings, failures=failures
    )


def _control_warning(system: str, acc: Estimate, n_speakers: int) -> list[str]:
    if acc.ci_low <= 1 / n_speakers <= acc.ci_high:
        return []
    name = system.replace(", ", " ").replace(" ", "-")
    return [
        f"CONTROL: {name} accuracy {acc.value:.3f} "
        f"[{acc.ci_low:.3f}, {acc.ci_high:.3f}] excludes chance {1 / n_speakers:.3f}. "
        "One run in twenty does so by luck; if it persists across seeds, the "
        "attribution is not symmetric between speakers."
    ]


def _shares_subject(row: Mapping[str, Any], spans: Mapping[str, frozenset[str]]) -> bool:
    """Whether the predicted speaker speaks in a subject of the true one."""
    return bool(spans[row["predicted"]] & spans[row["speaker"]])


def _model_summary(
    system: str,
    mine: Sequence[dict[str, Any]],
    spans: Mapping[str, frozenset[str]],
    config: PrivacyConfig,
    breakdown: dict[str, dict[str, dict[str, dict[str, Estimate]]]],
    warnings: list[str],
) -> dict[str, Estimate]:
    """A model system's figures: accuracy over answered trials, the answered share and
    `wrong, same subject`, against chance; per speaker and subject into `breakdown`."""
    nan, n_speakers = np.nan, len(spans)
    matrix = np.array(
        [
            [
                float(r["correct"]) if r["answered"] else nan,
                float(r["answered"]),
                float(not r["correct"] and _shares_subject(r, spans)) if r["answered"] else nan,
            ]
            for r in mine
        ],
        dtype=np.float64,
    ).reshape(-1, 3)
    speaker = np.array([r["speaker"] for r in mine])
    clusters = speaker if config.cluster == "speaker" else None
    names = MODEL_METRICS
    table = _estimate(matrix, clusters, np.ones(len(mine), dtype=bool), config, names)
    chance = 1 / n_speakers
    table["chance"] = Estimate(value=chance, ci_low=chance, ci_high=chance, n=len(mine))
    table = {k: table[k] for k in ("accuracy", "chance", "answered", "wrong, same subject")}
    for facet in ("speaker", "subject"):
        labels = np.array([r[facet] for r in mine])
        for level in sorted(set(labels)):
            breakdown.setdefault(system, {}).setdefault(facet, {})[level] = _estimate(
                matrix, clusters, labels == level, config, names
            )
    missing = sum(1 for r in mine if not r["answered"])
    if missing:
        failed = sum(1 for r in mine if not r["answered"] and r["call_failed"])
        warnings.append(
            f"{system}: {missing} of {len(mine)} trials without a usable answer "
            f"({failed} failed calls, {missing - failed} unusable replies); left out of its "
            "accuracy, listed in items.jsonl; a rerun of the same command asks again"
        )
    if system == MODEL_SYSTEMS[1]:
        warnings += _control_warning(system, table["accuracy"], n_speakers)
    return table


PAIRED = "language model - style"
"""summary.json row: the model's accuracy minus the style system's on the same samples."""


def _paired_difference(rows: Sequence[dict[str, Any]], config: PrivacyConfig) -> Estimate | None:
    """Mean of (model correct - style correct) over the trials both made on the same
    held-out sample (same repeat and speaker; unanswered model trials left out), with its
    interval; None without model trials."""
    style = {(r["repeat"], r["speaker"]): r["rank"] == 1 for r in rows if r["system"] == "style"}
    pairs = [
        (r["speaker"], float(r["correct"]) - float(style[(r["repeat"], r["speaker"])]))
        for r in rows
        if r["system"] == MODEL_SYSTEMS[0]
        and r["answered"]
        and (r["repeat"], r["speaker"]) in style
    ]
    if not any(r["system"] == MODEL_SYSTEMS[0] for r in rows):
        return None
    clusters = [sp for sp, _ in pairs] if config.cluster == "speaker" else None
    values = np.array([d for _, d in pairs], dtype=np.float64)
    (est,) = bootstrap_means(
        values.reshape(-1, 1), clusters, n_boot=config.n_boot, seed=config.seed
    )
    return est


METRICS = ("accuracy", "top-3 accuracy", "mrr", "wrong, same subject")
MODEL_METRICS = ("accuracy", "answered", "wrong, same subject")


def _estimate(
    matrix: FloatArray,
    clusters: npt.NDArray[np.str_] | None,
    mask: npt.NDArray[np.bool_],
    config: PrivacyConfig,
    names: Sequence[str] = METRICS,
) -> dict[str, Estimate]:
    sub = None if clusters is None else clusters[mask]
    ests = bootstrap_means(matrix[mask], sub, n_boot=config.n_boot, seed=config.seed)
    return dict(zip(names, ests, strict=True))
