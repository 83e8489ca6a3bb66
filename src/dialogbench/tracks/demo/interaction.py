"""DEMO's dialogue agent interaction (paper section 2.2.2): two agents play out an episode's
prelude (scene, personas, one goal each) turn by turn, then a judge scores the whole
conversation on goal achievement, believability, skillfulness and realism (0-10 each).

Who plays whom:

    self-play (default)   the model under test plays both participants
    fixed partner         `InteractionConfig.partner` (or `partner_model=`) plays the other
                          side; `sides` says which participant the model under test plays:
                          "p1" (default: it speaks first), "p2", or "both" (every episode
                          is played twice, once per side; run ids get "@p1"/"@p2")

An episode: participant 1 speaks first and the agents alternate, each call restating the
whole state (`interaction_prompts.agent_messages`; the partner's profile is shown only
when `knows_partner`, the partner's goal never). Each reply must be one JSON object, a
turn `{"person": <the speaker>, "content": ...}` or the end marker `{"end": true}`. A reply
that is not (no JSON, wrong speaker, empty content) is sent back with a short correction
up to `max_fixes` times; after that the episode fails with the reason and the raw reply
(kept, counted and shown, never judged, never scored 0). An episode ends by the end marker,
at `max_turns` turns, or by failing. Episodes run concurrently; turns within one are
sequential.

Judging (temperature 0) is a `judging.Judge` with the episode language's rubric: it sees
the full background, both profiles and both goals, as the context and the transcript as
the candidate; an unusable verdict is kept unscored with its raw text and counted.

RUN_DIR/manifest.json   dataset (name, sha256), config, model/partner/judge settings,
                        prompt sha256, seed, package version
RUN_DIR/parts/          episode.<id>.jsonl (transcript, ending, failure, usage) written as
                        each episode finishes, judge.<id>.jsonl (verdict, usage); a rerun of
                        the same run keeps them and plays or judges only what is missing
                        (an episode that failed on a model call, not a malformed turn, is
                        played again)
RUN_DIR/items.jsonl     one row per episode (per side with sides="both"): ids, lang, who
                        played, turns, ending, failure, the four scores and their average
RUN_DIR/summary.json    lang -> goal | believability | skillfulness | realism | average ->
                        {value, ci_low, ci_high, n}: means over scored episodes, 95%
                        bootstrap intervals resampling episodes
RUN_DIR/counts.json     per lang and all: episodes, runs, ended by marker, hit max turns,
                        failed, judge scored/unscored, turns, turns fixed by a correction
RUN_DIR/usage.json      calls and tokens of the agent, the partner and the judge
RUN_DIR/warnings.json   data warnings, failed episodes, unscored verdicts
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections import Counter
from collections.abc import Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from dialogbench.data.demo.model import DemoSet, Episode
from dialogbench.data.errors import DataError
from dialogbench.judging.judge import DEFAULT_JUDGE_CONFIG, Judge
from dialogbench.models.model import Model
from dialogbench.models.structured import Structured, extract_json
from dialogbench.models.types import GenerateConfig
from dialogbench.report.run import DatasetInfo, Progress, RunDir, to_json
from dialogbench.stats.bootstrap import Estimate, bootstrap_means
from dialogbench.tracks.common import (
    ModelSettings,
    digest,
    spent,
    stratified_limit,
    usage_total,
)
from dialogbench.tracks.demo import interaction_prompts as ip

TRACK = "demo-interaction"
Sides = Literal["p1", "p2", "both"]
SIDES: tuple[Sides, ...] = ("p1", "p2", "both")
FIGURES = (*ip.DIMENSIONS, "average")
AGENT_TAG, PARTNER_TAG, JUDGE_TAG = "interaction:agent", "interaction:partner", "interaction:judge"


@dataclass(frozen=True)
class InteractionConfig:
    """Turn limit, models (under test, partner, judge) and their settings, a limit."""

    max_turns: int = 20
    """At most this many turns (utterances, both sides together) per episode."""
    limit: int | None = None
    """At most this many episodes, drawn in turn from each language (seeded)."""
    seed: int = 0
    n_boot: int = 2000
    models: ModelSettings = field(default_factory=ModelSettings)
    """The model under test and the judge (None: the model under test judges)."""
    partner: str | None = None
    """A fixed partner model's spec; None: the model under test plays both sides."""
    partner_base_url: str | None = None
    partner_api_key_env: str | None = None
    sides: Sides = "p1"
    """With a partner: which participant the model under test plays (see the module doc)."""
    temperature: float = 1.0
    """The agents' temperature (the paper's 1.0); the seed is recorded and sent."""
    max_tokens: int = 256
    """Per turn."""
    constrain_turns: bool | None = None
    """Also send the turn's JSON shape as a schema (`interaction_prompts.TURN_SCHEMA`):
    grammar-constrained on local models, `response_format` on servers. Off, as in the
    paper, the format is asked for in the prompt only. None: on only when the embedded
    smoke-test model plays a side (it cannot keep the format unaided)."""
    judge_max_tokens: int = 1024
    max_fixes: int = 2
    """Corrections asked for a malformed turn (and for an unusable verdict)."""

    def __post_init__(self) -> None:
        if self.max_turns < 1 or self.max_tokens < 1 or self.judge_max_tokens < 1:
            raise ValueError("max_turns, max_tokens and judge_max_tokens must be positive")
        if self.max_fixes < 0:
            raise ValueError("max_fixes must be 0 or more")
        if self.sides not in SIDES:
            raise ValueError(f"sides must be one of {', '.join(SIDES)}, not {self.sides!r}")
        if self.limit is not None and self.limit < 1:
            raise ValueError("limit must be positive")
        if self.constrain_turns is None:
            embedded = "embedded" in (self.models.model, self.partner)
            object.__setattr__(self, "constrain_turns", embedded)

    @property
    def partner_models(self) -> ModelSettings:
        """The fixed partner as model settings (its `model` None: self-play)."""
        return ModelSettings(
            model=self.partner,
            base_url=self.partner_base_url,
            api_key_env=self.partner_api_key_env,
        )

    def agent_config(self) -> GenerateConfig:
        return GenerateConfig(
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            seed=self.seed,
            json_schema=ip.TURN_SCHEMA if self.constrain_turns else None,
            schema_name="turn",
        )

    def judge_config(self) -> GenerateConfig:
        return replace(DEFAULT_JUDGE_CONFIG, max_tokens=self.judge_max_tokens)


@dataclass
class InteractionResult:
    """The track's figures as written to the run folder."""

    summary: dict[str, dict[str, Estimate]]
    """lang -> figure (the four dimensions and `average`) -> mean with its interval."""
    counts: dict[str, dict[str, int]]
    """"all" and each lang -> episodes, runs, endings, judge scored/unscored, turns."""
    usage: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


# -- one turn -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ParsedTurn:
    """What an agent's reply says: words (None for a bare end marker) and/or the end."""

    content: str | None
    end: bool


def _same_name(a: str, b: str) -> bool:
    return " ".join(a.split()).casefold() == " ".join(b.split()).casefold()


def parse_turn(text: str, speaker: str) -> ParsedTurn:
    """Read one agent reply; `ValueError` with a short reason when it cannot be used.

    A turn is `{"person": speaker, "content": words}`; the end marker is `{"end": true}`
    (with or without `person`, and with optional last words under `content`).
    """
    data = extract_json(text)
    if not isinstance(data, dict):
        raise ValueError("the reply is JSON but not an object")
    person = data.get("person")
    if person is not None and (not isinstance(person, str) or not _same_name(person, speaker)):
        raise ValueError(f'"person" is {person!r}, but this turn is {speaker}\'s')
    content = data.get("content")
    if content is not None and not isinstance(content, str):
        raise ValueError('"content" must be a string')
    words = content.strip() if content else None
    end = data.get(ip.END_KEY) is True
    if not end:
        if person is None:
            raise ValueError(f'"person" is missing (it must be "{speaker}")')
        if not words:
            raise ValueError('"content" is missing or empty')
    return ParsedTurn(words or None, end)


# -- one episode ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Seat:
    """Who plays one participant: a model, as the model under test or as the partner."""

    model: Model
    role: Literal["under_test", "partner"]


@dataclass(frozen=True)
class Run:
    """One playing of an episode: its id in the run folder and who plays each side."""

    id: str
    episode: Episode
    under_test: Sides


def plan_runs(episodes: Sequence[Episode], fixed_partner: bool, sides: Sides) -> list[Run]:
    """The runs of a track: one per episode, or one per episode and side (`sides="both"`)."""
    if not fixed_partner:
        return [Run(e.id, e, "both") for e in episodes]
    if sides == "both":
        return [Run(f"{e.id}@{s}", e, s) for e in episodes for s in ("p1", "p2")]
    return [Run(e.id, e, sides) for e in episodes]


def _tag(seat: Seat, run_id: str) -> str:
    return f"{AGENT_TAG if seat.role == 'under_test' else PARTNER_TAG}:{run_id}"


async def take_turn(
    run: Run, side: int, seat: Seat, pairs: Sequence[tuple[str, str]], config: InteractionConfig
) -> Structured[ParsedTurn]:
    """Ask participant `side` for the next turn; send a malformed reply back with a
    correction up to `config.max_fixes` times."""
    episode, name = run.episode, run.episode.participants[side].name
    return await seat.model.generate_parsed(
        ip.agent_messages(episode, side, pairs),
        lambda raw: parse_turn(raw, name),
        lambda error: ip.correction_message(episode, side, error),
        config.agent_config(),
        max_fixes=config.max_fixes,
        tag=_tag(seat, run.id),
    )


async def play(run: Run, seats: tuple[Seat, Seat], config: InteractionConfig) -> dict[str, Any]:
    """Play one episode to its end; the record holds turns, ending, failure and usage."""
    episode = run.episode
    turns: list[dict[str, Any]] = []
    pairs: list[tuple[str, str]] = []
    ending, ended_by, failure = "max_turns", None, None
    fixed = 0
    for index in range(config.max_turns):
        side = index % 2
        seat, name = seats[side], episode.participants[side].name
        got = await take_turn(run, side, seat, pairs, config)
        if got.value is None:
            ending = "failed"
            failure = {
                "kind": "call" if got.call_failed else "malformed",
                "turn": index + 1,
                "person": name,
                "error": got.error,
                "raw": got.raw,
                "attempts": got.attempts,
            }
            break
        if got.attempts > 1:
            fixed += 1
        if got.value.content is not None:
            turns.append(
                {
                    "turn": len(turns) + 1,
                    "person": name,
                    "content": got.value.content,
                    "played_by": seat.role,
                    "attempts": got.attempts,
                }
            )
            pairs.append((name, got.value.content))
        if got.value.end:
            ending, ended_by = "end_marker", name
            break
    usage = {
        role: spent(seat.model, _tag(seat, run.id))
        for role, seat in {s.role: s for s in seats}.items()
    }
    return {
        "id": run.id,
        "episode": episode.id,
        "lang": episode.lang,
        "source": episode.source,
        "under_test": run.under_test,
        "participants": [p.name for p in episode.participants],
        "models": {p.name: s.model.name for p, s in zip(episode.participants, seats, strict=True)},
        "turns": turns,
        "ending": ending,
        "ended_by": ended_by,
        "failure": failure,
        "turns_fixed": fixed,
        "usage": usage,
    }


async def judge_episode(episode: Episode, record: dict[str, Any], judge: Judge) -> dict[str, Any]:
    """The judge's verdict on a played episode (unscored, with raw text, when unusable)."""
    pairs = [(t["person"], t["content"]) for t in record["turns"]]
    tag = f"{JUDGE_TAG}:{record['id']}"
    verdict = await judge.score(
        ip.transcript(episode, pairs), context=ip.judge_context(episode), tag=tag
    )
    return {"id": record["id"], "verdict": verdict.model_dump(), "usage": spent(judge.model, tag)}


# -- running --------------------------------------------------------------------------------


def _episodes_of(data: DemoSet | Sequence[Episode]) -> tuple[list[Episode], DatasetInfo, list[str]]:
    if isinstance(data, DemoSet):
        info = DatasetInfo(
            name=data.name, source=data.source, sha256=data.sha256, subjects=len(data.episodes)
        )
        return list(data.episodes), info, list(data.warnings)
    episodes = list(data)
    sha = digest([e.model_dump(mode="json") for e in episodes])
    info = DatasetInfo(name="episodes", source="given", sha256=sha, subjects=len(episodes))
    return episodes, info, []


def part_name(kind: str, run_id: str) -> str:
    """A run's part file name: the id made file-safe (plus a hash when that changed it)."""
    safe = re.sub(r"[^A-Za-z0-9._@-]", "_", run_id)[:80]
    if safe != run_id:
        safe += "-" + hashlib.sha256(run_id.encode()).hexdigest()[:10]
    return f"{kind}.{safe}"


def run_interaction(
    demo_set_or_episodes: DemoSet | Sequence[Episode],
    out: Path,
    config: InteractionConfig = InteractionConfig(),
    model: Model | None = None,
    partner_model: Model | None = None,
    progress: Progress | None = None,
    judge_model: Model | None = None,
) -> InteractionResult:
    """Play every episode, judge each finished one, write the run folder, return the figures.
    Episodes and verdicts already stored by the same run are kept.

    `model` (else `config.models.model`, with the response cache) is under test;
    `partner_model` (else `config.partner`) plays the fixed partner, if any;
    `judge_model` (else `config.models.judge_model`, else the model under test) judges.
    """
    if model is None and config.models.model is None:
        raise ValueError(
            "the interaction track needs a model: set InteractionConfig.models.model or pass model="
        )
    episodes, info, warnings = _episodes_of(demo_set_or_episodes)
    if not episodes:
        raise ValueError(f"{info.name!r} has no interaction episodes")
    repeated = sorted(i for i, n in Counter(e.id for e in episodes).items() if n > 1)
    if repeated:
        raise DataError(
            info.source,
            f"episode ids must be unique; repeated: {repeated[:5]}",
            record=f"episode {repeated[0]}",
            field="id",
            fix="give every episode its own id",
        )
    episodes = stratified_limit(episodes, lambda e: e.lang, config.limit, config.seed)
    fixed_partner = partner_model is not None or config.partner is not None
    runs = plan_runs(episodes, fixed_partner, config.sides)
    if fixed_partner:
        partner_settings = config.partner_models.recorded(partner_model)["model_settings"]
    else:
        partner_settings = {"same_as": "model under test"}
    run_dir = RunDir(out)
    done = run_dir.start(
        TRACK,
        info,
        config,
        warnings,
        {
            **config.models.recorded(model, judge_model),
            "partner_settings": partner_settings,
            "prompt_sha256": ip.PROMPT_SHA256,
            "episodes": len(episodes),
            "runs": len(runs),
        },
    )
    given = (model, partner_model, judge_model)
    records, verdicts = asyncio.run(_work(run_dir, done, runs, config, given, progress))
    rows = [_item(records[r.id], verdicts[r.id]) for r in runs]
    result = summarise(rows, config)
    result.usage = _usage(rows)
    result.warnings = warnings + result.warnings
    files: dict[str, Any] = {
        "summary.json": to_json(result.summary),
        "counts.json": result.counts,
        "usage.json": result.usage,
        "warnings.json": {"warnings": result.warnings},
    }
    run_dir.write_part("items", rows)
    run_dir.finish(["items"], files)
    return result


def _stored(run_dir: RunDir, done: set[str], kind: str, run_id: str) -> dict[str, Any] | None:
    name = part_name(kind, run_id)
    return run_dir.read_part(name)[0] if name in done else None


async def _work(
    run_dir: RunDir,
    done: set[str],
    runs: Sequence[Run],
    config: InteractionConfig,
    given: tuple[Model | None, Model | None, Model | None],
    progress: Progress | None,
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any] | None]]:
    """Play and judge, concurrently over runs, whatever the run folder does not hold yet;
    return every run's episode record and verdict (None: not judged)."""
    records = {r.id: _stored(run_dir, done, "episode", r.id) for r in runs}
    for rid, rec in records.items():
        if rec is not None and (rec["failure"] or {}).get("kind") == "call":
            records[rid] = None  # a failed call is played again
    verdicts = {r.id: _stored(run_dir, done, "judge", r.id) for r in runs}
    todo = [
        r
        for r in runs
        if (rec := records[r.id]) is None or (rec["ending"] != "failed" and verdicts[r.id] is None)
    ]
    if not todo:
        return _complete(records), verdicts
    given_model, partner, given_judge = given
    async with AsyncExitStack() as stack:
        opened = config.models.opened(given_model, given_judge)
        model, judge = await stack.enter_async_context(opened)
        if partner is not None or config.partner is not None:
            partner, _ = await stack.enter_async_context(config.partner_models.opened(partner))
        judges = {
            lang: Judge(judge, rubric, config.judge_config(), max_fixes=config.max_fixes)
            for lang, rubric in ip.JUDGE_RUBRICS.items()
        }
        me = Seat(model, "under_test")
        other = Seat(partner, "partner") if partner is not None else me
        finished = 0

        async def one(r: Run) -> None:
            nonlocal finished
            record = records[r.id]
            if record is None:
                seats = (other, me) if r.under_test == "p2" else (me, other)
                record = records[r.id] = await play(r, seats, config)
                run_dir.write_part(part_name("episode", r.id), [record])
            if record["ending"] != "failed" and verdicts[r.id] is None:
                verdict = await judge_episode(r.episode, record, judges[r.episode.lang])
                verdicts[r.id] = verdict
                run_dir.write_part(part_name("judge", r.id), [verdict])
            finished += 1
            if progress:
                progress("episodes", finished, len(todo))

        if progress:
            progress("episodes", 0, len(todo))
        await asyncio.gather(*(one(r) for r in todo))
    return _complete(records), verdicts


def _complete(records: dict[str, dict[str, Any] | None]) -> dict[str, dict[str, Any]]:
    """Every run's record, now that each has been played."""
    missing = [rid for rid, rec in records.items() if rec is None]
    assert not missing, f"runs never played: {missing[:3]}"
    return {rid: rec for rid, rec in records.items() if rec is not None}


def _item(record: dict[str, Any], judged: dict[str, Any] | None) -> dict[str, Any]:
    """One items.jsonl row: the episode record with its verdict and scores."""
    row: dict[str, Any] = {k: v for k, v in record.items() if k not in ("turns", "usage")}
    row["n_turns"] = len(record["turns"])
    scores: dict[str, float | None] = dict.fromkeys(FIGURES)
    if judged is None:
        row.update(judged=False, judge_skipped="episode failed")
    else:
        v = judged["verdict"]
        row.update(
            judged=v["scores"] is not None,
            judge=v["judge"],
            judge_rubric=v["rubric"],
            judge_reason=v["reason"],
            judge_attempts=v["attempts"],
        )
        if v["scores"] is not None:
            scores.update({d: float(v["scores"][d]) for d in ip.DIMENSIONS})
            scores["average"] = float(np.mean([v["scores"][d] for d in ip.DIMENSIONS]))
        else:
            row.update(judge_raw=v["raw"], judge_error=v["error"])
    row.update(scores)
    row["turns"] = record["turns"]
    row["usage"] = {**record["usage"], **({"judge": judged["usage"]} if judged else {})}
    return row


def _usage(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Calls and tokens summed over episodes, per role (under_test, partner, judge)."""
    roles = dict.fromkeys(role for row in rows for role in row["usage"])
    usage: dict[str, Any] = {
        role: usage_total(row["usage"][role] for row in rows if role in row["usage"])
        for role in roles
    }
    usage["tokens_processed"] = sum(u["tokens_processed"] for u in usage.values())
    return usage


# -- figures --------------------------------------------------------------------------------


def _counts(rows: Sequence[dict[str, Any]]) -> dict[str, int]:
    endings = [r["ending"] for r in rows]
    judged = [r for r in rows if r["ending"] != "failed"]
    return {
        "episodes": len({r["episode"] for r in rows}),
        "runs": len(rows),
        "ended_by_marker": endings.count("end_marker"),
        "hit_max_turns": endings.count("max_turns"),
        "failed": endings.count("failed"),
        "judge_scored": sum(1 for r in judged if r["judged"]),
        "judge_unscored": sum(1 for r in judged if not r["judged"]),
        "turns": sum(r["n_turns"] for r in rows),
        "turns_fixed": sum(r["turns_fixed"] for r in rows),
    }


def summarise(rows: Sequence[dict[str, Any]], config: InteractionConfig) -> InteractionResult:
    """Figures from the items rows: per language, the mean of each score over the scored
    runs with a 95% bootstrap interval that resamples episodes."""
    summary: dict[str, dict[str, Estimate]] = {}
    counts: dict[str, dict[str, int]] = {"all": _counts(rows)}
    for lang in sorted({r["lang"] for r in rows}):
        mine = [r for r in rows if r["lang"] == lang]
        values = np.array([[r[f] for f in FIGURES] for r in mine], float)  # None -> NaN
        clusters = np.array([r["episode"] for r in mine], dtype=str)
        ests = bootstrap_means(values, clusters, n_boot=config.n_boot, seed=config.seed)
        summary[lang] = dict(zip(FIGURES, ests, strict=True))
        counts[lang] = _counts(mine)
    warnings: list[str] = []
    for r in rows:
        f = r["failure"]
        if f:
            warnings.append(
                f"{r['id']}: failed at turn {f['turn']} ({f['person']}) after {f['attempts']} "
                f"attempt(s): {f['error']}; kept in items.jsonl, not judged"
            )
        elif not r["judged"]:
            warnings.append(
                f"{r['id']}: verdict unscored ({r.get('judge_error')}); kept in items.jsonl "
                "with the raw reply, left out of the scores"
            )
    c = counts["all"]
    if c["failed"]:
        warnings.append(f"{c['failed']} of {c['runs']} episodes failed and were not judged")
    if c["judge_unscored"]:
        warnings.append(f"{c['judge_unscored']} verdicts unscored, left out of the scores")
    return InteractionResult(summary=summary, counts=counts, warnings=warnings)
