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
(kept, counted and shown, never judged, never scored 0): the turn is a failed call of its
seat's role (kind `unparseable` or `schema`, `Model.generate_parsed`), so a rerun plays the
episode again, its earlier turns from the response cache and the failed turn asked afresh
(a turn that needed it carries `retry`, how many askings before it came back unusable). An
episode ends by the end marker,
at `max_turns` turns, or by failing. Episodes run concurrently; turns within one are
sequential.

Every episode that was played is judged and counted in the scores, as DEMO does, whatever
its ending: the end marker (early or not), the turn limit, or a goal the judge finds failed
(goal 0). Only a run that could not be played, because a call failed (a model call, or a
turn still malformed after the corrections), is kept apart: a failed call, counted, never
judged, never scored 0, and played again by a rerun.

Judging (temperature 0) is a `judging.Judge` with the episode language's rubric: it sees
the full background, both profiles and both goals, as the context and the transcript as
the candidate; an unusable verdict is kept unscored with its raw text and counted, a failed
judge call that a rerun asks again.

RUN_DIR/manifest.json   dataset (name, sha256), config, model/partner/judge settings,
                        prompt sha256, seed, package version
RUN_DIR/parts/          each run's record as it finishes (solved.jsonl), then its verdict
                        (scored.jsonl); a rerun keeps them and plays or judges only what is
                        missing (an episode that failed, on a model call or a malformed
                        turn, is played again; an unscored verdict is judged again)
RUN_DIR/items.jsonl     one row per episode (per side with sides="both"): ids, lang, who
                        played, turns, ending, failure, the judge fields
                        (`judging.verdict_fields`), the four scores and their average
RUN_DIR/summary.json    lang -> goal | believability | skillfulness | realism | average ->
                        {value, ci_low, ci_high, n}: means over scored episodes, 95%
                        bootstrap intervals resampling episodes
RUN_DIR/counts.json     per lang and all: episodes, runs, played (judged), ended by marker,
                        ended early (marker, fewer than max_turns turns), hit max turns,
                        goal failed (scored goal 0), failed (a failed call, not judged),
                        judge scored/unscored, turns, turns fixed by a correction
RUN_DIR/usage.json      calls and tokens of the model under test, the partner and the judge
RUN_DIR/warnings.json   data warnings, failed episodes, unscored verdicts
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np
from rich.table import Table

from dialogbench.data.demo.model import DemoSet, Episode
from dialogbench.data.errors import DataError
from dialogbench.judging import is_unscored, verdict_fields
from dialogbench.judging.judge import Judge, Verdict
from dialogbench.judging.rubric_files import PARTICIPANTS, RubricFile, load_rubric_file
from dialogbench.models.model import Model
from dialogbench.models.structured import Structured, Unusable, extract_json
from dialogbench.models.types import GenerateConfig
from dialogbench.report.table import summary_table
from dialogbench.runner import Outcome, Plan, Role, TrackBase, option, register
from dialogbench.runner import config as shared
from dialogbench.runner.record import digest
from dialogbench.runner.roles import judge_role, model_role
from dialogbench.runner.track import Models, Rows
from dialogbench.stats.bootstrap import Estimate, bootstrap_means
from dialogbench.tracks.common import dataset_info, outcome_of, stratified_limit
from dialogbench.tracks.demo import interaction_prompts as ip

TRACK = "demo-interaction"
Sides = Literal["self", "p1", "p2", "both"]
SIDES: tuple[Sides, ...] = ("self", "p1", "p2", "both")
Side = Literal["p1", "p2", "both"]
"""Which side of one run the model under test plays ("both": self-play)."""
FIGURES = (*ip.DIMENSIONS, "average")
DEMO_RUBRIC = "demo"
AGENT_TAG, PARTNER_TAG, JUDGE_TAG = "interaction:agent", "interaction:partner", "interaction:judge"


@dataclass(frozen=True)
class InteractionConfig(shared.Checked, shared.Sampled, shared.Judged):
    """Turn limit, who plays which side, the agents' and the judge's settings, a limit."""

    max_turns: int = option(
        20, help="at most this many turns (both sides together) per episode", min=1, max=1000
    )
    limit: int | None = shared.limit("episodes, drawn in turn from each language")
    seed: int = shared.seed("the episode draw, the agents and the bootstrap")
    n_boot: int = shared.n_boot()
    sides: Sides | None = option(  # noqa: RUF009  (an option field, like the others)
        None,
        help="who the model under test plays: self (both participants, self-play: the default "
        "without a partner), p1 (speaks first: the default with a partner), p2, or both (with "
        "a partner, every episode twice)",
    )
    temperature: float = shared.temperature(1.0, "the agents' temperature (the paper's 1.0)")
    max_tokens: int = shared.tokens(256, "tokens per turn")
    constrain_turns: bool | None = option(
        None,
        help="send each turn's JSON shape as a schema (default: only when the embedded model "
        "plays a side)",
    )
    judge_max_tokens: int = shared.tokens(1024, "the verdict's token budget", stage="score")
    max_fixes: int = shared.fixes(
        2, "corrections asked for a malformed turn (and an unusable verdict)", max=20
    )
    rubric: str = option(
        "demo",
        help="the judge's rubric: demo (DEMO's four dimensions, 0-10), sotopia (SOTOPIA's "
        "seven, each agent scored), or a path to a rubric JSON file (docs/demo.md)",
        stage="score",
    )

    def rubric_file(self) -> RubricFile | None:
        """The rubric file `rubric` names; None for DEMO's own (built into the prompts)."""
        return None if self.rubric == DEMO_RUBRIC else load_rubric_file(self.rubric)

    def agent_config(self, constrain: bool | None = None) -> GenerateConfig:
        """The agents' settings; `constrain` stands in for an unset `constrain_turns`."""
        on = self.constrain_turns if self.constrain_turns is not None else bool(constrain)
        schema = ip.TURN_SCHEMA if on else None
        return replace(self.generate_config(), json_schema=schema, schema_name="turn")


@dataclass
class InteractionResult:
    """The track's figures as written to the run folder."""

    summary: dict[str, dict[str, Estimate]]
    """lang -> figure (the four dimensions and `average`) -> mean with its interval."""
    counts: dict[str, dict[str, int]]
    """"all" and each lang -> episodes, runs, endings, judge scored/unscored, turns."""
    usage: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    dataset: str = ""


# -- one turn -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ParsedTurn:
    """What an agent's reply says: words (None for a bare end marker) and/or the end."""

    content: str | None
    end: bool


def _same_name(a: str, b: str) -> bool:
    return " ".join(a.split()).casefold() == " ".join(b.split()).casefold()


def parse_turn(text: str, speaker: str) -> ParsedTurn:
    """Read one agent reply; `Unusable` with a short reason (and its kind: `unparseable`
    without JSON, `schema` for JSON that is not a turn) when it cannot be used.

    A turn is `{"person": speaker, "content": words}`; the end marker is `{"end": true}`
    (with or without `person`, and with optional last words under `content`). DEMO's end
    marker, `*ENDING*` in the content or anywhere in a reply without JSON, ends it too.
    """
    try:
        data = extract_json(text)
    except ValueError:
        if ip.DEMO_END in text:
            return ParsedTurn(None, True)
        raise
    if not isinstance(data, dict):
        raise Unusable("the reply is JSON but not an object", "schema")
    person = data.get("person")
    if person is not None and (not isinstance(person, str) or not _same_name(person, speaker)):
        raise Unusable(f'"person" is {person!r}, but this turn is {speaker}\'s', "schema")
    content = data.get("content")
    if content is not None and not isinstance(content, str):
        raise Unusable('"content" must be a string', "schema")
    words = content.strip() if content else None
    end = data.get(ip.END_KEY) is True
    if words is not None and ip.DEMO_END in words:
        words, end = words.replace(ip.DEMO_END, "").strip() or None, True
    if not end:
        if person is None:
            raise Unusable(f'"person" is missing (it must be "{speaker}")', "schema")
        if not words:
            raise Unusable('"content" is missing or empty', "schema")
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
    under_test: Side


def plan_runs(episodes: Sequence[Episode], fixed_partner: bool, sides: Sides) -> list[Run]:
    """The runs of a track: one per episode, or one per episode and side (`sides="both"`)."""
    if not fixed_partner:
        return [Run(e.id, e, "both") for e in episodes]
    if sides == "both":
        return [Run(f"{e.id}@{s}", e, s) for e in episodes for s in ("p1", "p2")]
    return [Run(e.id, e, "p2" if sides == "p2" else "p1") for e in episodes]


def _tag(seat: Seat) -> str:
    return AGENT_TAG if seat.role == "under_test" else PARTNER_TAG


async def take_turn(
    run: Run,
    side: int,
    seat: Seat,
    pairs: Sequence[tuple[str, str]],
    config: InteractionConfig,
    constrain: bool = False,
) -> Structured[ParsedTurn]:
    """Ask participant `side` for the next turn; send a malformed reply back with a
    correction up to `config.max_fixes` times."""
    episode, name = run.episode, run.episode.participants[side].name
    return await seat.model.generate_parsed(
        ip.agent_messages(episode, side, pairs),
        lambda raw: parse_turn(raw, name),
        lambda error: ip.correction_message(episode, side, error),
        config.agent_config(constrain),
        max_fixes=config.max_fixes,
        tag=_tag(seat),
    )


async def play(
    run: Run, seats: tuple[Seat, Seat], config: InteractionConfig, constrain: bool = False
) -> dict[str, Any]:
    """Play one episode to its end; the record holds turns, ending and failure
    (`constrain`: send the turn schema when `config.constrain_turns` is unset)."""
    episode = run.episode
    turns: list[dict[str, Any]] = []
    pairs: list[tuple[str, str]] = []
    ending, ended_by, failure = "max_turns", None, None
    fixed = 0
    for index in range(config.max_turns):
        side = index % 2
        seat, name = seats[side], episode.participants[side].name
        got = await take_turn(run, side, seat, pairs, config, constrain)
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
                    **({"retry": got.retry} if got.retry else {}),
                }
            )
            pairs.append((name, got.value.content))
        if got.value.end:
            ending, ended_by = "end_marker", name
            break
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
    }


async def judge_episode(episode: Episode, record: dict[str, Any], judge: Judge) -> Verdict:
    """The judge's verdict on a played episode (unscored, with raw text, when unusable)."""
    pairs = [(t["person"], t["content"]) for t in record["turns"]]
    return await judge.score(
        ip.transcript(episode, pairs), context=ip.judge_context(episode), tag=JUDGE_TAG
    )


# -- the track ------------------------------------------------------------------------------


class InteractionTrack(TrackBase[InteractionConfig, Run]):
    """One unit per run (an episode, or an episode x side): played by the agents (solve),
    then judged (score), so a new judge re-judges saved transcripts without replaying them."""

    name = TRACK
    summary = (
        "DEMO dialogue agent interaction: two agents play out each episode, each knowing only "
        "its own goal; a judge scores goal, believability, skillfulness and realism (0-10)."
    )
    config_type = InteractionConfig
    roles = (
        model_role("the model under test"),
        Role(
            "partner",
            "solve",
            "a fixed partner playing the other side (default: self-play, the model under "
            "test plays both)",
            required=False,
        ),
        judge_role("the judge of the episodes"),
    )
    corpus = "demo"
    judged = True

    def configure(self, config: InteractionConfig, roles: frozenset[str]) -> InteractionConfig:
        """Self-play without a partner, the first side with one (unless `sides` says)."""
        partner = "partner" in roles
        if config.sides is None:
            return replace(config, sides="p1" if partner else "self")
        if config.sides == "self" and partner:
            raise ValueError("--sides self is self-play: leave out --partner-model, or pick a side")
        if config.sides != "self" and not partner:
            return replace(config, sides="self")  # self-play: the model plays every side
        return config

    def plan(self, data: DemoSet, config: InteractionConfig) -> Plan[Run]:
        episodes = list(data.episodes)
        if not episodes:
            raise ValueError(f"{data.name!r} has no interaction episodes")
        repeated = sorted(i for i, n in Counter(e.id for e in episodes).items() if n > 1)
        if repeated:
            raise DataError(
                data.source,
                f"episode ids must be unique; repeated: {repeated[:5]}",
                record=f"episode {repeated[0]}",
                field="id",
                fix="give every episode its own id",
            )
        episodes = stratified_limit(episodes, lambda e: e.lang, config.limit, config.seed)
        config.rubric_file()  # a bad rubric file fails here, before anything is asked
        sides: Sides = config.sides or "self"
        runs = plan_runs(episodes, sides != "self", sides)
        info = dataset_info(data, len(episodes))
        return Plan(
            {r.id: r for r in runs},
            warnings=list(data.warnings),
            resolved={
                "prompt_sha256": ip.PROMPT_SHA256,
                "episodes": len(episodes),
                "runs": len(runs),
            },
            context=data.name,
            dataset=info,
        )

    async def solve(
        self, unit: Run, models: Models, config: InteractionConfig, plan: Plan[Run]
    ) -> Rows:
        """Play the run: the episode record (transcript, ending, failure)."""
        me = Seat(models["model"], "under_test")
        other = Seat(models["partner"], "partner") if "partner" in models else me
        seats = (other, me) if unit.under_test == "p2" else (me, other)
        constrain = any(s.model.name == "embedded" for s in seats)
        return [await play(unit, seats, config, constrain)]

    async def score(
        self, unit: Run, rows: Rows, models: Models, config: InteractionConfig, plan: Plan[Run]
    ) -> Rows:
        """The items.jsonl row: the record with the judge's verdict (none for a failed run)."""
        record = rows[0]
        spec = config.rubric_file()
        if spec is not None:
            if record["ending"] == "failed":
                return [rubric_item(record, None, spec)]
            rubric = spec.rubric(unit.episode.lang)
        elif record["ending"] == "failed":
            return [_item(record, None)]
        else:
            rubric = ip.JUDGE_RUBRICS[unit.episode.lang]
        judge = Judge(models["judge"], rubric, config.judge_config(), max_fixes=config.max_fixes)
        verdict = await judge_episode(unit.episode, record, judge)
        return [_item(record, verdict) if spec is None else rubric_item(record, verdict, spec)]

    def aggregate(self, plan: Plan[Run], rows: Rows, config: InteractionConfig) -> Outcome:
        result = summarise(rows, config)
        result.dataset = plan.context
        c = result.counts["all"]
        failures = {"failed episodes": c["failed"], "verdicts unscored": c["judge_unscored"]}
        return outcome_of(result, {"counts.json": result.counts}, failures)

    def show(self, outcome: Outcome, config: InteractionConfig) -> list[Table | str]:
        result: InteractionResult = outcome.result
        scale = "0-10" if config.rubric == DEMO_RUBRIC else f"rubric {config.rubric}"
        title = (
            f"Dialogue agent interaction on {result.dataset}, judge {scale} "
            "(95% bootstrap intervals)"
        )
        columns = list(dict.fromkeys(col for row in result.summary.values() for col in row))
        shown: list[Table | str] = [
            summary_table(title, result.summary, columns, row_label="language")
        ]
        shown += [f"counts ({k}): {v}" for k, v in result.counts.items()]
        return shown

    def judgments(self, rows: Rows) -> dict[str, float]:
        """Run id -> the judge's mean of the rubric's dimensions (scored runs)."""
        found: dict[str, float] = {}
        for r in rows:
            value = r.get(r.get("judge_overall", "average"))
            if value is not None:
                found[r["id"]] = float(value)
        return found

    def headline(self, outcome: Outcome) -> dict[str, float]:
        """Per language: each dimension's mean and their average."""
        result: InteractionResult = outcome.result
        return {
            f"{lang} {figure}": e.value
            for lang, figures in result.summary.items()
            for figure, e in figures.items()
        }


INTERACTION = register(InteractionTrack())


def as_demo_set(data: DemoSet | Sequence[Episode]) -> DemoSet:
    """Episodes given by hand as the DEMO set the track runs on (its sha256 their digest);
    a `DemoSet` as it is."""
    if isinstance(data, DemoSet):
        return data
    episodes = list(data)
    sha = digest([e.model_dump(mode="json") for e in episodes])
    return DemoSet(name="episodes", source="given", sha256=sha, episodes=episodes)


def _judged_row(record: dict[str, Any], verdict: Verdict | None) -> dict[str, Any]:
    """The episode record without its turns, its turn count and the common judge fields
    (`judging.verdict_fields`); the caller adds the figures, then the turns."""
    row: dict[str, Any] = {k: v for k, v in record.items() if k != "turns"}
    row["n_turns"] = len(record["turns"])
    skipped = "episode failed" if verdict is None else None
    row.update(verdict_fields(verdict, skipped=skipped))
    return row


def _item(record: dict[str, Any], verdict: Verdict | None) -> dict[str, Any]:
    """One items.jsonl row: the episode record with the common judge fields
    (`judging.verdict_fields`), the four scores as figures and their average."""
    row = _judged_row(record, verdict)
    row.update(figures(row["judge_scores"]))
    row["turns"] = record["turns"]
    return row


def figures(scores: dict[str, int] | None) -> dict[str, float | None]:
    """The four dimensions as floats and their average (all None when unscored)."""
    if scores is None:
        return dict.fromkeys(FIGURES)
    out: dict[str, float | None] = {d: float(scores[d]) for d in ip.DIMENSIONS}
    out["average"] = float(np.mean([scores[d] for d in ip.DIMENSIONS]))
    return out


def rubric_item(
    record: dict[str, Any], verdict: Verdict | None, spec: RubricFile
) -> dict[str, Any]:
    """One items.jsonl row judged with a rubric file: the common judge fields, each
    dimension's score, and their mean under `spec.overall`. A per-agent rubric's scores are
    kept per participant under `agents`, and each dimension's figure is the mean over the
    participants the model under test played (both in self-play)."""
    row = _judged_row(record, verdict)
    scores = row["judge_scores"]
    row["judge_overall"] = spec.overall
    if spec.per_agent:
        played = {"p1": ["p1"], "p2": ["p2"]}.get(record["under_test"], list(PARTICIPANTS))
        agents = spec.agent_scores(scores) if scores is not None else None
        row["agents"] = agents
        row["agents_counted"] = played
        for d in spec.names:
            row[d] = None if agents is None else float(np.mean([agents[p][d] for p in played]))
    else:
        for d in spec.names:
            row[d] = None if scores is None else float(scores[d])
    values = [row[d] for d in spec.names]
    row[spec.overall] = None if scores is None else float(np.mean(values))
    row["turns"] = record["turns"]
    return row


# -- figures --------------------------------------------------------------------------------


GOAL_FAILED = 0.0
"""The goal figure of an episode that failed its goal: the rubric's lowest anchor (DEMO:
"neither participant makes any progress towards their goals")."""


def _counts(rows: Sequence[dict[str, Any]], max_turns: int) -> dict[str, int]:
    """Endings and verdicts. Every played run (any ending but `failed`, which is a failed
    call) is judged: `played` = `judge_scored` + `judge_unscored`; `ended_early` (the end
    marker with fewer than `max_turns` turns) and `goal_failed` (a scored goal of 0) are
    counted in the scores like any other. `played_as_p1` / `played_as_p2` / `self_play`:
    runs where the model under test played the first, the second or both participants."""
    endings = [r["ending"] for r in rows]
    judged = [r for r in rows if r["ending"] != "failed"]
    return {
        "episodes": len({r["episode"] for r in rows}),
        "runs": len(rows),
        "played": len(judged),
        "ended_by_marker": endings.count("end_marker"),
        "ended_early": sum(
            1 for r in judged if r["ending"] == "end_marker" and r["n_turns"] < max_turns
        ),
        "hit_max_turns": endings.count("max_turns"),
        "goal_failed": sum(1 for r in judged if r.get("goal") == GOAL_FAILED),
        "failed": endings.count("failed"),
        "judge_scored": sum(1 for r in judged if r["judged"]),
        "judge_unscored": sum(1 for r in judged if is_unscored(r)),
        "turns": sum(r["n_turns"] for r in rows),
        "turns_fixed": sum(r["turns_fixed"] for r in rows),
        # which side the model under test played (SOTOPIA-hard's figures are one side's)
        "played_as_p1": sum(1 for r in rows if r["under_test"] == "p1"),
        "played_as_p2": sum(1 for r in rows if r["under_test"] == "p2"),
        "self_play": sum(1 for r in rows if r["under_test"] == "both"),
    }


def summarise(rows: Sequence[dict[str, Any]], config: InteractionConfig) -> InteractionResult:
    """Figures from the items rows: per language, the mean of each score over the scored
    runs (every played run whatever its ending, early-ended and goal-failed ones included)
    with a 95% bootstrap interval that resamples episodes."""
    summary: dict[str, dict[str, Estimate]] = {}
    counts: dict[str, dict[str, int]] = {"all": _counts(rows, config.max_turns)}
    spec = config.rubric_file()
    names = list(FIGURES) if spec is None else [*spec.names, spec.overall]
    for lang in sorted({r["lang"] for r in rows}):
        mine = [r for r in rows if r["lang"] == lang]
        values = np.array(  # None -> NaN
            [[np.nan if r.get(f) is None else r[f] for f in names] for r in mine], float
        )
        clusters = np.array([r["episode"] for r in mine], dtype=str)
        ests = bootstrap_means(values, clusters, n_boot=config.n_boot, seed=config.seed)
        summary[lang] = dict(zip(names, ests, strict=True))
        counts[lang] = _counts(mine, config.max_turns)
    warnings: list[str] = []
    for r in rows:
        f = r["failure"]
        if f:
            warnings.append(
                f"{r['id']}: failed at turn {f['turn']} ({f['person']}) after {f['attempts']} "
                f"attempt(s): {f['error']}; kept in items.jsonl, not judged"
            )
        elif is_unscored(r):
            warnings.append(
                f"{r['id']}: verdict unscored ({r.get('judge_error')}); kept in items.jsonl "
                "with the raw reply, left out of the scores"
            )
    c = counts["all"]
    said = {  # count -> what it means, when it is not 0
        "failed": f"{c['failed']} of {c['runs']} episodes could not be played (a failed call) "
        "and were not judged; a rerun plays them again",
        "judge_unscored": f"{c['judge_unscored']} verdicts unscored, left out of the scores",
    }
    warnings += [text for key, text in said.items() if c[key]]
    return InteractionResult(summary=summary, counts=counts, warnings=warnings)
