"""The RealCompanion ground-truth builder: probes sampled in three strata, five staged model
calls per probe, the profile, persona and question passes, and the anonymisation, written as
a release folder.

    dialogbench build realcompanion --from DATASET --out FOLDER --model SPEC [--judge-model SPEC]

Per probe (one unit, `subject/probe_id`), each stage reads only what earlier ones wrote:

    A resolve   the model proposes what the probe points at: ids anywhere before it (it is
                shown the recent thread and the earlier messages that share the most words
                with it, or the whole history when it is short); ids that are not messages
                before the probe are dropped in code and counted
    B verify    the judge (or the model) checks each proposed message, quoted from the
                source conversation; its output is, in code, A's ids that it kept: B can only
                remove (`verified = proposed ∩ kept`)
    C classify  the model says which verified messages a reply needs (again intersected);
                the numbered rules of `rules.py` decide tier, locus and both readings
    D reply     the model writes the reference reply from the probe and the verified
                messages alone
    E validate  the judge (or the model) checks the reply against that context; an
                unsupported reply is kept and marked `supported = false`

Per subject, two more units: the profile (claims with confidence, validity window and
evidence ids, proposed part by part, then a final pass in which the judge checks each claim
whose evidence names real messages, keeping the supported ones: "P matched, K kept") and the
persona (entries and named working hypotheses with their grounds; ungrounded ones dropped),
and, unless `questions="keep"`, the question set (questions in the 16 categories of
`realcompanion_prompts.QUESTION_CATEGORIES`, each with its answer, evidence ids that exist
and lie at or before the message it is asked after, or marked unanswerable; then the judge's
check of each, which only removes).

With `census` and `reread` (both off by default), two passes over every person message
outside the proportional sample (the paper's census and its re-reading under the Stage B
instruction): the census runs stages A to C on each message that is no sampled probe and
writes their labels (no reference reply) to `census.jsonl`, stratum `census`; the
re-reading asks the judge once per message (sampled enriched and abstention probes too),
shown what stage A is shown, which earlier messages beyond the recent thread it really
points at, and writes `reread.jsonl`. Each message is a unit of its own.

With `anonymise` (the default), a runner stage runs first: `identify`, one unit per subject,
whose calls (a chunk of messages each) return the person names and places found; every
unit of the subject needs it and reads the subject with surrogates in place of each
identifier (and of the contact details regexes find), so no later call sees an original,
and the release is written with the same surrogates (`build/anonymise.py`). The identify
rows, which hold the originals, stay in `FOLDER/.build/parts/identify.jsonl` (mode 0600);
no other file holds the mapping (the run record does name subjects by their source ids).

The builder is a `Track` run by `run_track` (not registered as a `run` command): the run
record lives in `FOLDER/.build/` (manifest, parts, items.jsonl, usage, warnings), so a killed
build resumes with every finished probe, and the stages of an unfinished one that were
answered come from the response cache (each stage's prompt depends only on the earlier
stages, so exactly the missing calls are sent). A probe with a failed call is redone on the
next run, and so is one whose reply stayed unusable after `max_fixes` corrections (that is
a failed call too, `Model.generate_parsed`: counted by kind, never cached, asked afresh);
until then the probe is counted and left out. Either makes the exit status 3. The runner's
lock on `FOLDER/.build/` is held until the release and its build.json are written, so a
second build into the same folder is refused before it writes anything.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar

import numpy as np
from pydantic import BaseModel

from dialogbench import __version__
from dialogbench.build import realcompanion_prompts as bp
from dialogbench.build.anonymise import KINDS as IDENTIFIER_KINDS
from dialogbench.build.anonymise import Surrogates, chunks, make_surrogates
from dialogbench.build.rules import BY_ID, RULE_IDS, Case, classify, explain
from dialogbench.build.sampling import STRATA, Pick, Sizes, outside_sample, sample_strata
from dialogbench.data.errors import DataError
from dialogbench.data.io import source_name
from dialogbench.data.model import (
    RECENT_WINDOW,
    ChatItem,
    Dataset,
    Message,
    PersonaEntry,
    ProfileClaim,
    Question,
    Reread,
    Subject,
    TraceStage,
)
from dialogbench.data.release import (
    CONVERSATION,
    SUBJECT_FILES,
    check_release_names,
    is_release,
    write_release,
)
from dialogbench.data.safe_names import name_problem
from dialogbench.models.model import Call, Model
from dialogbench.models.structured import Structured
from dialogbench.models.types import ChatMessage
from dialogbench.retrieval.bm25 import BM25Index
from dialogbench.runner import Finished, Outcome, Plan, Progress, Role, TrackBase, option, run_track
from dialogbench.runner import config as shared
from dialogbench.runner.record import RunLock, write_json
from dialogbench.runner.roles import Given
from dialogbench.runner.track import Models, Need, Rows, Stage

T = TypeVar("T", bound=BaseModel)
STAGES = ("resolve", "verify", "classify", "reply", "validate")
"""The trace's stage names, A to E."""
LETTER = dict(zip(STAGES, "ABCDE", strict=True))
WORK_DIR = ".build"
"""The run record's folder inside the release folder."""
REPORT = "build.json"


@dataclass(frozen=True)
class BuildConfig(shared.Sampled):
    """Strata sizes, the seed, what stage A is shown, the passes and the call settings."""

    proportional: int = option(40, help="probes of the proportional stratum (all subjects)", min=0)
    enriched: int = option(20, help="probes of the enriched stratum (all subjects)", min=0)
    abstention: int = option(10, help="session openers of the abstention control", min=0)
    seed: int = shared.seed("the strata draws and of the calls")
    subjects: tuple[str, ...] = option(
        (), help="only these subject ids (default: every subject)", nonempty=False
    )
    candidates: int = option(
        12, help="earlier messages stage A sees beyond the recent thread (BM25's best)", min=0
    )
    show_all: int = option(
        24, help="stage A sees the whole earlier history when it holds at most this many", min=0
    )
    profile: bool = option(
        True, help="derive the profile and persona (else keep the source's as they are)"
    )
    profile_window: int = option(40, help="messages per part of the profile pass", min=2)
    profile_parts: int = option(
        4, help="at most this many parts per subject (evenly spread when there are more)", min=1
    )
    claims_per_part: int = option(8, help="at most this many claims asked per part", min=1)
    questions: Literal["derive", "keep"] = option(
        "derive",
        help="derive the question set through the model (checked against its evidence), "
        "or keep the source's",
    )
    questions_per_part: int = option(8, help="at most this many questions asked per part", min=1)
    census: bool = option(
        False,
        help="label every other person message outside the proportional sample too (stages "
        "A to C, no reply; census.jsonl): the census rate of the demand track",
    )
    reread: bool = option(
        False,
        help="re-read every person message outside the proportional sample under the "
        "verification instruction (one call each; reread.jsonl): the re-reading rate",
    )
    anonymise: bool = option(
        True,
        help="replace names, places and contact details by consistent surrogates in the "
        "whole release (the model finds names and places, regexes the contact details)",
    )
    identify_chunk: int = option(
        60, help="messages per call of the anonymisation's identify pass", min=1
    )
    temperature: float = shared.temperature(0.0, "sampling temperature of every call")
    max_tokens: int = shared.tokens(512, "reply budget of each call (tokens)", min=16, max=None)
    max_fixes: int = shared.fixes(2, "corrective retries of an unusable reply")

    def sizes(self) -> Sizes:
        return Sizes(self.proportional, self.enriched, self.abstention)


@dataclass(frozen=True)
class ProbeUnit:
    """One sampled probe."""

    pick: Pick


@dataclass(frozen=True)
class SubjectUnit:
    """The profile, persona or question pass of one subject."""

    subject_id: str
    part: Literal["profile", "persona", "questions"]


@dataclass(frozen=True)
class PassUnit:
    """One person message outside the proportional sample, in the census (stages A to C
    of a message that is no probe) or the re-reading (one call)."""

    pick: Pick
    part: Literal["census", "reread"]


Unit = ProbeUnit | SubjectUnit | PassUnit


@dataclass
class Context:
    """What every unit reads: the source subjects and one BM25 index each."""

    subjects: dict[str, Subject]
    indexes: dict[str, BM25Index]
    data: Dataset
    picks: list[Pick]
    outside: list[Pick] = field(default_factory=list)
    """Every person message outside the proportional sample (with `census` or `reread`)."""
    anonymised: dict[str, Subject] = field(default_factory=dict)
    """Subject id -> the subject with its surrogates (when anonymising), made once."""


class Failed(Exception):
    """A stage whose reply could not be used (the call failed, or the reply did not parse)."""

    def __init__(self, stage: str, got: Structured[Any]) -> None:
        super().__init__(f"stage {LETTER.get(stage, '')} ({stage}): {got.error}")
        self.stage, self.got = stage, got


async def _ask(
    row: dict[str, Any],
    model: Model,
    stage: str,
    messages: list[ChatMessage],
    schema: type[T],
    c: BuildConfig,
) -> T:
    """Stage `stage`'s reply, recorded in `row["stages"]`; `Failed` when it is unusable."""
    got = await model.generate_structured(
        messages, schema, c.generate_config(), max_fixes=c.max_fixes, tag=f"build:{stage}"
    )
    if got.value is None:
        raise Failed(stage, got)
    row["stages"][stage] = got.value.model_dump()
    return got.value


def person_of(subject: Subject, fallback: str = "the person") -> str:
    """The name the prompts use for the person under study."""
    if subject.speakers:
        return " and ".join(subject.speakers[:2])
    users = Counter(m.speaker for m in subject.messages if m.role == "user")
    return users.most_common(1)[0][0] if users else fallback


# -- one probe: stages A to E ------------------------------------------------------------------


def shown_history(ctx: Context, subject: Subject, p: int, c: BuildConfig) -> list[Message]:
    """What stage A sees before the recent thread: all of it when short, else BM25's best
    `candidates` (in conversation order)."""
    end = max(0, p - RECENT_WINDOW)
    if end <= c.show_all:
        return list(subject.messages[:end])
    if c.candidates == 0:
        return []
    index = ctx.indexes[subject.id]
    row = index.score(index.text_queries([subject.messages[p].text]), np.array([end])).tocsr()
    cols, vals = row.indices, row.data
    best = cols[np.lexsort((-cols, -vals))][: c.candidates]
    return [subject.messages[int(i)] for i in sorted(best)]


def _ids(messages: Sequence[Message]) -> str:
    return ", ".join(m.id for m in messages) or "nothing"


def shown_ids(ctx: Context, subject: Subject, p: int, c: BuildConfig) -> set[str]:
    """The ids of every message stage A is shown for the probe at `p`: the recent thread
    and `shown_history`. A referent is proposable only among these."""
    recent = subject.messages[max(0, p - RECENT_WINDOW) : p]
    return {m.id for m in [*shown_history(ctx, subject, p, c), *recent]}


def source_references(ctx: Context, subject_id: str, probe_id: str) -> list[str]:
    """The source's own ground truth for a probe: its chat item's reference ids, if any."""
    for item in ctx.subjects[subject_id].chat_items:
        if item.probe_id == probe_id:
            return list(item.reference_ids)
    return []


async def build_probe(
    ctx: Context,
    pick: Pick,
    models: Models,
    c: BuildConfig,
    subject: Subject | None = None,
    labels_only: bool = False,
) -> dict[str, Any]:
    """Stages A to E for one probe: the row with its chat item, or where it failed.
    `subject` stands in for the source's (its anonymised form). With `labels_only` (the
    census), stages A to C alone: the item's labels, no reference reply (kind `census`)."""
    subject = subject or ctx.subjects[pick.subject_id]
    msgs, p = subject.messages, pick.position
    probe = msgs[p]
    person = probe.speaker
    pos = subject.position_of()
    row: dict[str, Any] = {
        "kind": "census" if labels_only else "probe",
        "subject": subject.id,
        "probe": probe.id,
        "position": p,
        "stratum": pick.stratum,
        "surface_tier": pick.surface_tier,
        "surface_score": pick.surface_score,
        "opener": pick.opener,
        "status": "failed",
        "failed_stage": None,
        "error": None,
        "stages": {},
    }
    shown = shown_ids(ctx, subject, p, c)
    refs = source_references(ctx, subject.id, probe.id)
    row["source_references"] = len(refs)
    row["source_references_outside_shown"] = sum(i not in shown for i in refs)
    row["source_references_beyond_recent"] = sum(
        p - pos[i] > RECENT_WINDOW for i in refs if i in pos
    )
    try:
        row.update(await _stages(ctx, pick, models, c, subject, person, pos, row, labels_only))
        verified = row["item"]["reference_ids"]
        row["verified_outside_shown"] = sum(i not in shown for i in verified)
    except Failed as e:
        row.update(failed_stage=e.stage, error=str(e), call_failed=e.got.call_failed)
        row["raw"] = e.got.raw
    return row


async def _stages(
    ctx: Context,
    pick: Pick,
    models: Models,
    c: BuildConfig,
    subject: Subject,
    person: str,
    pos: dict[str, int],
    row: dict[str, Any],
    labels_only: bool = False,
) -> dict[str, Any]:
    msgs, p = subject.messages, pick.position
    probe = msgs[p]
    model, judge = models["model"], models["judge"]
    recent = list(msgs[max(0, p - RECENT_WINDOW) : p])
    earlier = shown_history(ctx, subject, p, c)
    trace: list[TraceStage] = []

    # A: resolve
    messages = bp.resolve_messages(person, probe, recent, earlier)
    a = await _ask(row, model, "resolve", messages, bp.ResolveReply, c)
    proposed_ids = list(dict.fromkeys(i for i in a.referent_ids if pos.get(i, p) < p))
    dropped = [i for i in dict.fromkeys(a.referent_ids) if i not in proposed_ids]
    proposed = sorted((msgs[pos[i]] for i in proposed_ids), key=lambda m: m.position)
    note = f"; dropped {', '.join(dropped)} (not a message before the probe)" if dropped else ""
    trace.append(
        TraceStage(
            stage="resolve",
            output=f"{a.reasoning}\nDecision: kind {a.kind}; reading: {a.reading}; "
            f"proposed {_ids(proposed)}{note}",
        )
    )

    # B: verify (only removes)
    if proposed:
        messages = bp.verify_messages(person, probe, a.reading, a.kind, proposed)
        b = await _ask(row, judge, "verify", messages, bp.VerifyReply, c)
        kept = set(b.kept_ids)
        verified = [m for m in proposed if m.id in kept]
        added = sorted(kept - {m.id for m in proposed})
        removed = [m for m in proposed if m.id not in kept]
        extra = f"; ignored {', '.join(added)} (B cannot add)" if added else ""
        out_b = f"{b.reasoning}\nDecision: kept {_ids(verified)}; removed {_ids(removed)}{extra}"
    else:
        verified, added = [], []
        out_b = "No referent proposed (no call); the reference set stays empty."
    trace.append(TraceStage(stage="verify", output=out_b, reads=["resolve"]))

    # C: classify (the model names what a reply needs; the rules decide)
    if verified:
        messages = bp.classify_messages(person, probe, a.reading, a.kind, verified)
        cr = await _ask(row, model, "classify", messages, bp.ClassifyReply, c)
        needed_ids, reasoning_c = set(cr.needed_ids), cr.reasoning + "\n"
    else:
        needed_ids, reasoning_c = set(), "Nothing verified (no call).\n"
    case = Case(
        first=p == 0,
        opener=pick.opener,
        kind=a.kind,
        proposed=len(proposed),
        distances=tuple(p - m.position for m in verified),
        earlier_session=tuple(
            m.session is not None and probe.session is not None and m.session != probe.session
            for m in verified
        ),
        needed=tuple(m.id in needed_ids for m in verified),
    )
    rule, d = classify(case)
    needed = [m for m in verified if m.id in needed_ids]
    trace.append(
        TraceStage(
            stage="classify",
            output=f"{reasoning_c}Decision: needed {_ids(needed)}; {explain(rule, case)}. "
            f"tier {d.tier}, locus {d.locus}, recorded {d.needs_memory}, "
            f"strict {d.needs_memory_strict}, dependent {d.dependent}",
            reads=["resolve", "verify"],
        )
    )

    far = [m for m in proposed if p - m.position > RECENT_WINDOW]
    counts = {
        "status": "ok",
        "proposed": len(proposed),
        "proposed_dropped": len(dropped),
        "proposed_far": bool(far),
        "verified": len(verified),
        "verified_far": any(p - m.position > RECENT_WINDOW for m in verified),
        "verify_additions_ignored": len(added),
    }
    decided: dict[str, Any] = {  # what stages A to C decided: the item's labels
        "probe_id": probe.id,
        "stratum": pick.stratum,
        "tier": d.tier,
        "reference_ids": [m.id for m in verified],
        "trace": trace,
        "rule": rule.id,
        "locus": d.locus,
        "needs_memory": d.needs_memory,
        "needs_memory_strict": d.needs_memory_strict,
        "dependent": d.dependent,
        "surface_tier": pick.surface_tier,
    }
    if labels_only:  # the census: the labels stages A to C give, no reply
        return {**counts, "item": ChatItem(**decided).model_dump(mode="json")}

    # D: reply, from the recorded context alone
    messages = bp.reply_messages(person, probe, verified)
    r = await _ask(row, model, "reply", messages, bp.ReplyReply, c)
    trace.append(TraceStage(stage="reply", output=r.reasoning, reads=["verify", "classify"]))

    # E: validate (marks, never drops)
    messages = bp.validate_messages(person, probe, verified, r.reply)
    e = await _ask(row, judge, "validate", messages, bp.ValidateReply, c)
    verdict = "supported" if e.supported else "NOT supported: marked supported=false"
    trace.append(
        TraceStage(
            stage="validate",
            output=f"{e.reasoning}\nDecision: {verdict}",
            reads=["verify", "reply"],
        )
    )
    item = ChatItem(**decided, reference_reply=r.reply, supported=e.supported)
    return {**counts, "item": item.model_dump(mode="json")}


async def reread_message(
    ctx: Context, pick: Pick, models: Models, c: BuildConfig, subject: Subject
) -> dict[str, Any]:
    """The re-reading of one person message: the judge, shown what stage A is shown, keeps
    the earlier messages outside the recent thread the message really points at (stage
    B's check made on the message itself). In code, ids that are no message more than
    RECENT_WINDOW before it are dropped; `needs_memory` is whether any is kept. A message
    with nothing beyond the recent thread makes no call (none can be kept)."""
    msgs, p = subject.messages, pick.position
    probe = msgs[p]
    pos = subject.position_of()
    row: dict[str, Any] = {
        "kind": "reread",
        "subject": subject.id,
        "probe": probe.id,
        "position": p,
        "stratum": pick.stratum,
        "status": "failed",
        "failed_stage": None,
        "error": None,
        "stages": {},
    }
    if p <= RECENT_WINDOW:  # nothing lies beyond the recent thread: no call
        out = f"No message lies more than {RECENT_WINDOW} before it (no call): none verified"
        none = Reread(
            probe_id=probe.id,
            needs_memory=False,
            trace=[TraceStage(stage="reread", output=out)],
        )
        row.update(status="ok", dropped=0, reread=none.model_dump(mode="json"))
        return row
    recent = list(msgs[max(0, p - RECENT_WINDOW) : p])
    earlier = shown_history(ctx, subject, p, c)
    messages = bp.reread_messages(probe.speaker, probe, recent, earlier)
    try:
        got = await _ask(row, models["judge"], "reread", messages, bp.RereadReply, c)
    except Failed as e:
        row.update(failed_stage=e.stage, error=str(e), call_failed=e.got.call_failed)
        row["raw"] = e.got.raw
        return row
    ids = list(dict.fromkeys(got.kept_ids))
    kept = sorted((i for i in ids if i in pos and p - pos[i] > RECENT_WINDOW), key=pos.__getitem__)
    dropped = [i for i in ids if i not in kept]
    note = (
        f"; dropped {', '.join(dropped)} (not a message more than {RECENT_WINDOW} before it)"
        if dropped
        else ""
    )
    verdict = "a verified referent outside the recent thread" if kept else "none verified"
    trace = TraceStage(
        stage="reread",
        output=f"{got.reasoning}\nDecision: kept {', '.join(kept) or 'nothing'}{note}: {verdict}",
    )
    reread = Reread(probe_id=probe.id, needs_memory=bool(kept), referent_ids=kept, trace=[trace])
    row.update(status="ok", dropped=len(dropped), reread=reread.model_dump(mode="json"))
    return row


def _pass_row(
    kind: str,
    subject: str,
    errors: list[str],
    calls: Sequence[Structured[Any]],
    parts: int,
    proposed: int,
) -> dict[str, Any]:
    """The head of a whole-subject pass's row (profile, persona, questions): its status,
    errors and whether a call of it failed."""
    return {
        "kind": kind,
        "subject": subject,
        "status": "failed" if errors else "ok",
        "errors": errors,
        "call_failed": any(g.call_failed for g in calls),
        "parts": parts,
        "proposed": proposed,
    }


# -- profile and persona ---------------------------------------------------------------------


def parts_of(subject: Subject, c: BuildConfig) -> list[list[Message]]:
    """The conversation cut into windows of `profile_window`; at most `profile_parts` of
    them, evenly spread."""
    msgs = subject.messages
    windows = [msgs[i : i + c.profile_window] for i in range(0, len(msgs), c.profile_window)]
    if len(windows) > c.profile_parts:
        at = np.linspace(0, len(windows) - 1, c.profile_parts).round().astype(int)
        windows = [windows[i] for i in dict.fromkeys(at.tolist())]
    return [list(w) for w in windows]


def _date(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.strip())
    except ValueError:
        return None


async def _per_part(
    person: str,
    parts: list[list[Message]],
    models: Models,
    c: BuildConfig,
    messages: Callable[[str, Sequence[Message], int, int, int], list[ChatMessage]],
    reply: type[T],
    tag: str,
) -> tuple[list[Structured[T]], list[str]]:
    """The model's reply for each part of the conversation (`messages(person, part, i, n,
    claims_per_part)`), and an error line for each part without a usable one."""
    n = len(parts)
    calls = [
        Call(messages(person, w, i + 1, n, c.claims_per_part), c.generate_config())
        for i, w in enumerate(parts)
    ]
    got = await models["model"].generate_structured_many(
        calls, reply, max_fixes=c.max_fixes, tag=tag
    )
    errors = [f"part {i + 1}: {g.error}" for i, g in enumerate(got) if g.value is None]
    return got, errors


async def build_profile(subject: Subject, models: Models, c: BuildConfig) -> dict[str, Any]:
    """Claims part by part, then the judge's check of each claim against the messages it
    cites: proposed, matched (its evidence names messages of the conversation), kept."""
    person, parts = person_of(subject), parts_of(subject, c)
    got, errors = await _per_part(
        person, parts, models, c, bp.profile_messages, bp.ProfileReply, "build:profile"
    )
    pos = subject.position_of()
    merged: dict[tuple[str, str], bp.ClaimProposal] = {}
    proposed = 0
    for g in got:
        for claim in g.value.claims if g.value else []:
            proposed += 1
            key = (claim.field.strip().lower(), " ".join(claim.statement.lower().split()))
            if key in merged:
                ev = list(dict.fromkeys([*merged[key].evidence_ids, *claim.evidence_ids]))
                merged[key] = merged[key].model_copy(update={"evidence_ids": ev})
            else:
                merged[key] = claim
    matched = []
    for claim in merged.values():
        ev = [i for i in dict.fromkeys(claim.evidence_ids) if i in pos]
        if ev:
            matched.append((claim, sorted(ev, key=pos.__getitem__)))
    checks = await models["judge"].generate_structured_many(
        [
            Call(
                bp.match_messages(
                    person, cl.field, cl.statement, [subject.messages[pos[i]] for i in ev]
                ),
                c.generate_config(),
            )
            for cl, ev in matched
        ],
        bp.MatchReply,
        max_fixes=c.max_fixes,
        tag="build:profile-match",
    )
    errors += [f"claim check {i + 1}: {g.error}" for i, g in enumerate(checks) if g.value is None]
    claims = []
    for (cl, ev), check in zip(matched, checks, strict=True):
        if check.value is None or not check.value.supported:
            continue
        start = _date(cl.valid_from) or subject.messages[pos[ev[0]]].timestamp
        end = _date(cl.valid_to)
        if start is not None and end is not None and _after(start, end):
            end = None
        claims.append(
            ProfileClaim(
                field=cl.field.strip().lower()[:256],
                statement=cl.statement.strip(),
                confidence=cl.confidence,
                valid_from=start,
                valid_to=end,
                evidence_ids=ev,
            ).model_dump(mode="json")
        )
    return {
        **_pass_row("profile", subject.id, errors, [*got, *checks], len(parts), proposed),
        "distinct": len(merged),
        "matched": len(matched),
        "kept": len(claims),
        "claims": claims,
    }


def _after(a: datetime, b: datetime) -> bool:
    if (a.tzinfo is None) != (b.tzinfo is None):
        a, b = a.replace(tzinfo=None), b.replace(tzinfo=None)
    return a > b


async def build_persona(subject: Subject, models: Models, c: BuildConfig) -> dict[str, Any]:
    """Entries and named working hypotheses part by part; those without a ground that is a
    message of the conversation are dropped."""
    person, parts = person_of(subject), parts_of(subject, c)
    got, errors = await _per_part(
        person, parts, models, c, bp.persona_messages, bp.PersonaReply, "build:persona"
    )
    pos = subject.position_of()
    merged: dict[tuple[str, str, str | None], PersonaEntry] = {}
    proposed = 0
    for g in got:
        if g.value is None:
            continue
        found: list[tuple[str, str, list[str], str | None]] = [
            (e.dimension, e.statement, e.grounds, None) for e in g.value.entries
        ] + [("working hypothesis", h.statement, h.grounds, h.name) for h in g.value.hypotheses]
        for dimension, statement, grounds, name in found:
            proposed += 1
            ok = [i for i in dict.fromkeys(grounds) if i in pos]
            if not ok:
                continue
            key = (dimension.strip().lower()[:256], statement.strip(), name and name.strip())
            if key in merged:  # the same entry from another part: one entry, both grounds
                ok = list(dict.fromkeys([*merged[key].grounds, *ok]))
            merged[key] = PersonaEntry(
                dimension=key[0],
                statement=key[1],
                grounds=sorted(ok, key=pos.__getitem__),
                hypothesis=name is not None,
                name=key[2],
            )
    entries = [e.model_dump(mode="json") for e in merged.values()]
    return {
        **_pass_row("persona", subject.id, errors, got, len(parts), proposed),
        "kept": len(entries),
        "hypotheses": sum(bool(e["hypothesis"]) for e in entries),
        "entries": entries,
    }


# -- the question set ---------------------------------------------------------------------


async def build_questions(subject: Subject, models: Models, c: BuildConfig) -> dict[str, Any]:
    """Questions part by part, then one check per question. In code first: a question is
    dropped when an evidence id is no message, lies after the point it is asked, or an
    answerable one cites none (an unanswerable one keeps no evidence); the judge's check
    then drops those its evidence does not support. Checks only remove."""
    person, parts = person_of(subject), parts_of(subject, c)
    calls = [
        Call(
            bp.questions_messages(person, w, i + 1, len(parts), c.questions_per_part),
            c.generate_config(),
        )
        for i, w in enumerate(parts)
    ]
    got = await models["model"].generate_structured_many(
        calls, bp.QuestionsReply, max_fixes=c.max_fixes, tag="build:questions"
    )
    errors = [f"part {i + 1}: {g.error}" for i, g in enumerate(got) if g.value is None]
    pos = subject.position_of()
    msgs = subject.messages
    proposed, dropped = 0, Counter[str]()
    candidates: list[tuple[bp.QuestionProposal, list[str], str, str, list[Message]]] = []
    seen: set[str] = set()
    for part, g in zip(parts, got, strict=True):
        for q in g.value.questions if g.value else []:
            proposed += 1
            key = " ".join(q.question.lower().split())
            after = q.asked_after_id if q.asked_after_id in pos else part[-1].id
            ev = list(dict.fromkeys(q.evidence_ids)) if q.answerable else []
            why = None
            if key in seen:
                why = "duplicate"
            elif any(i not in pos for i in ev):
                why = "evidence not a message"
            elif any(pos[i] > pos[str(after)] for i in ev):
                why = "evidence after the point it is asked"
            elif q.answerable and not ev:
                why = "answerable without evidence"
            if why is not None:
                dropped[why] += 1
                continue
            seen.add(key)
            ev.sort(key=pos.__getitem__)
            propose = (
                f"{g.value.reasoning if g.value else ''}\nDecision: {q.category}, "
                f"{'answerable' if q.answerable else 'unanswerable'}, "
                f"evidence {', '.join(ev) or 'none'}, "
                f"asked after {after}"
            )
            shown = (
                [msgs[pos[i]] for i in ev]
                if ev
                else [m for m in part if pos[m.id] <= pos[str(after)]]
            )
            candidates.append((q, ev, str(after), propose, shown))
    checks = await models["judge"].generate_structured_many(
        [
            Call(bp.question_check_messages(person, q, shown), c.generate_config())
            for q, _, _, _, shown in candidates
        ],
        bp.QuestionCheckReply,
        max_fixes=c.max_fixes,
        tag="build:questions-check",
    )
    errors += [
        f"question check {i + 1}: {g.error}" for i, g in enumerate(checks) if g.value is None
    ]
    questions: list[dict[str, Any]] = []
    traces: list[dict[str, Any]] = []
    for (q, ev, after, propose, _), check in zip(candidates, checks, strict=True):
        if check.value is None:
            continue
        if not check.value.supported:
            dropped["not supported by its evidence"] += 1
            continue
        qid = f"q{len(questions) + 1:03d}"
        questions.append(
            Question(
                id=qid,
                category=q.category,
                text=q.question.strip(),
                answer=q.answer.strip(),
                evidence_ids=ev,
                answerable=q.answerable,
                after_id=after,
            ).model_dump(mode="json", exclude_none=True)
        )
        traces.append(
            {
                "question": qid,
                "trace": [
                    TraceStage(stage="propose", output=propose).model_dump(mode="json"),
                    TraceStage(
                        stage="check",
                        output=f"{check.value.reasoning}\nDecision: supported",
                        reads=["propose"],
                    ).model_dump(mode="json"),
                ],
            }
        )
    return {
        **_pass_row("questions", subject.id, errors, [*got, *checks], len(parts), proposed),
        "checked": len(candidates),
        "dropped": dict(sorted(dropped.items())),
        "kept": len(questions),
        "unanswerable": sum(not q["answerable"] for q in questions),
        "questions": questions,
        "traces": traces,
    }


# -- anonymisation: the identify stage ----------------------------------------------------


async def identify(subject: Subject, models: Models, c: BuildConfig) -> dict[str, Any]:
    """The identify stage of one subject: the model's person names and places, chunk by
    chunk (contact details and speakers are added in code, `anonymise.make_surrogates`).
    Its row holds originals: it stays in the run record (`parts/identify.jsonl`)."""
    parts = chunks(subject, c.identify_chunk)
    got = await models["model"].generate_structured_many(
        [Call(bp.identify_messages(w), c.generate_config()) for w in parts],
        bp.IdentifyReply,
        max_fixes=c.max_fixes,
        tag="build:identify",
    )
    errors = [f"chunk {i + 1}: {g.error}" for i, g in enumerate(got) if g.value is None]
    found = [{"kind": x.kind, "text": x.text} for g in got if g.value for x in g.value.identifiers]
    trace = [
        TraceStage(
            stage="identify",
            output=f"{g.value.reasoning}\nDecision: {len(g.value.identifiers)} identifiers",
        ).model_dump(mode="json")
        for g in got
        if g.value
    ]
    return {
        "kind": "identify",
        "subject": subject.id,
        "status": "failed" if errors else "ok",
        "errors": errors,
        "chunks": len(parts),
        "identifiers": found,
        "trace": trace,
    }


def identify_identity(c: BuildConfig) -> dict[str, Any]:
    """What decides the identify stage's rows beyond the dataset: its prompts and the call
    settings. (The runner's stage identity does not cover the model, which is a solve
    role: a changed model redoes every probe but keeps the identifiers found; delete
    `.build/parts/identify.jsonl` to find them afresh.)"""
    return {
        "prompt_sha256": bp.PROMPT_SHA256,
        "identify_chunk": c.identify_chunk,
        "seed": c.seed,
        "temperature": c.temperature,
        "max_tokens": c.max_tokens,
        "max_fixes": c.max_fixes,
    }


def surrogates_of(subject: Subject, rows: Rows, c: BuildConfig) -> Surrogates:
    """A subject's surrogates from its identify row (made afresh each time: deterministic)."""
    found = [(x["kind"], x["text"]) for r in rows for x in r.get("identifiers", [])]
    return make_surrogates(subject, found, c.seed)


def _identified(plan: Plan[Any], sid: str) -> Rows | None:
    rows = plan.done.get("identify", {}).get(sid)
    return rows if rows and rows[0]["status"] == "ok" else None


def _not_identified(unit: Unit, ctx: Context) -> dict[str, Any]:
    """The row of a unit whose subject's identify stage has no usable reply: it fails
    without a call (and is redone with it)."""
    error = "the anonymisation's identify stage had no usable reply for this subject"
    if isinstance(unit, ProbeUnit | PassUnit):
        pick = unit.pick
        probe = ctx.subjects[pick.subject_id].messages[pick.position]
        return {
            "kind": unit.part if isinstance(unit, PassUnit) else "probe",
            "subject": pick.subject_id,
            "probe": probe.id,
            "position": pick.position,
            "stratum": pick.stratum,
            "status": "failed",
            "failed_stage": "identify",
            "error": error,
            "call_failed": False,
        }
    zeros = {k: 0 for k in ("proposed", "matched", "kept", "hypotheses", "checked", "unanswerable")}
    return {
        "kind": unit.part,
        "subject": unit.subject_id,
        "status": "failed",
        "errors": [error],
        **zeros,
    }


# -- the track ------------------------------------------------------------------------------


class BuildTrack(TrackBase[BuildConfig, Unit]):
    """The builder as a `Track`: one unit per probe, and the profile and persona of each
    subject; `aggregate` assembles the release."""

    name: ClassVar[str] = "build-realcompanion"
    summary: ClassVar[str] = "Derive chat ground truth, profile and persona in traced stages."
    config_type = BuildConfig
    stages: ClassVar[tuple[Stage, ...]] = (
        Stage("identify", "model", "each subject's person names and places (anonymisation)"),
    )
    roles: ClassVar[tuple[Role, ...]] = (
        Role(
            "model",
            "solve",
            "the model that identifies names, resolves, classifies, writes (stages A, C, D), "
            "proposes claims, persona entries and questions",
        ),
        Role(
            "judge",
            "solve",
            "the checker of stages B and E, of profile claims and of questions, and the "
            "re-reader (--reread)",
            fallback="model",
        ),
    )

    def plan(self, data: Dataset, config: BuildConfig) -> Plan[Unit]:
        picks, warnings = sample_strata(data, config.sizes(), config.seed, config.subjects)
        chosen = [s for s in data.subjects if not config.subjects or s.id in config.subjects]
        ctx = Context(
            subjects={s.id: s for s in chosen},
            indexes={s.id: BM25Index.from_texts([m.text for m in s.messages]) for s in chosen},
            data=data,
            picks=picks,
        )
        units: dict[str, Unit] = {}
        for pick in picks:
            probe = ctx.subjects[pick.subject_id].messages[pick.position]
            units[f"{pick.subject_id}/{probe.id}"] = ProbeUnit(pick)
        if config.census or config.reread:
            ctx.outside = outside_sample(data, picks, config.subjects)
        for pick in ctx.outside:
            mid = ctx.subjects[pick.subject_id].messages[pick.position].id
            if config.census and pick.stratum == "census":
                units[f"{pick.subject_id}/:census/{mid}"] = PassUnit(pick, "census")
            if config.reread:
                units[f"{pick.subject_id}/:reread/{mid}"] = PassUnit(pick, "reread")
        if config.profile:
            for s in chosen:
                units[f"{s.id}/:profile"] = SubjectUnit(s.id, "profile")
                units[f"{s.id}/:persona"] = SubjectUnit(s.id, "persona")
        if config.questions == "derive":
            for s in chosen:
                units[f"{s.id}/:questions"] = SubjectUnit(s.id, "questions")
        stages: dict[str, dict[str, Any]] = {}
        needs: dict[Need, list[Need]] = {}
        if config.anonymise:
            stages["identify"] = {s.id: s.id for s in chosen}
            for key in units:
                needs[("solve", key)] = [("identify", key.split("/")[0])]
        if not units:
            raise ValueError(
                f"nothing to build from {data.name!r}: the strata drew no probe (sizes "
                f"{config.sizes()}) and the profile pass is off"
            )
        return Plan(
            units,
            warnings=list(data.warnings) + warnings,
            resolved={"prompt_sha256": bp.PROMPT_SHA256, "rules": list(RULE_IDS)},
            context=ctx,
            stages=stages,
            needs=needs,
            stage_resolved={"identify": identify_identity(config)} if config.anonymise else {},
        )

    async def run_stage(
        self, stage: str, unit: Any, models: Models, config: BuildConfig, plan: Plan[Unit]
    ) -> Rows:
        ctx: Context = plan.context
        return [await identify(ctx.subjects[str(unit)], models, config)]

    def subject_for(self, plan: Plan[Unit], sid: str, config: BuildConfig) -> Subject | None:
        """The subject the stages read: the source's, or its anonymised form (None when its
        identify stage has no usable reply)."""
        ctx: Context = plan.context
        if not config.anonymise:
            return ctx.subjects[sid]
        if sid not in ctx.anonymised:
            rows = _identified(plan, sid)
            if rows is None:
                return None
            surrogates = surrogates_of(ctx.subjects[sid], rows, config)
            ctx.anonymised[sid] = surrogates.subject(ctx.subjects[sid], rename=False)
        return ctx.anonymised[sid]

    async def solve(
        self, unit: Unit, models: Models, config: BuildConfig, plan: Plan[Unit]
    ) -> Rows:
        ctx: Context = plan.context
        sid = unit.subject_id if isinstance(unit, SubjectUnit) else unit.pick.subject_id
        subject = self.subject_for(plan, sid, config)
        if subject is None:
            return [_not_identified(unit, ctx)]
        if isinstance(unit, ProbeUnit):
            return [await build_probe(ctx, unit.pick, models, config, subject)]
        if isinstance(unit, PassUnit):
            if unit.part == "census":
                return [await build_probe(ctx, unit.pick, models, config, subject, True)]
            return [await reread_message(ctx, unit.pick, models, config, subject)]
        if unit.part == "profile":
            return [await build_profile(subject, models, config)]
        if unit.part == "questions":
            return [await build_questions(subject, models, config)]
        return [await build_persona(subject, models, config)]

    def aggregate(self, plan: Plan[Unit], rows: Rows, config: BuildConfig) -> Outcome:
        ctx: Context = plan.context
        built, anonymised = assemble(ctx, rows, config, plan.done.get("identify", {}))
        report = summarise(ctx, rows, config)
        passes = census_report(ctx, rows, config)
        report["sentences"] += passes.pop("sentences")
        report.update(passes)
        if config.anonymise:
            report["anonymisation"] = anonymised
            report["sentences"].append(
                f"Anonymisation: {sum(anonymised['identifiers'].values())} identifiers "
                f"replaced by surrogates ({sum(anonymised['replaced'].values())} occurrences "
                "in the source's records)."
            )
        failures = {
            "probes not built (a stage reply was unusable)": sum(
                r["kind"] == "probe" and r["status"] != "ok" and not r.get("call_failed")
                for r in rows
            ),
            "profile, persona or question passes with an unusable reply": sum(
                r["kind"] in ("profile", "persona", "questions")
                and r["status"] != "ok"
                and not r.get("call_failed")
                for r in rows
            ),
            "census labels or re-readings not made (a reply was unusable)": sum(
                r["kind"] in ("census", "reread")
                and r["status"] != "ok"
                and not r.get("call_failed")
                for r in rows
            ),
        }
        return Outcome(
            summary=report,
            result=BuildResult(built, report),
            failures={k: v for k, v in failures.items() if v},
        )


BUILD = BuildTrack()


@dataclass
class BuildResult:
    """A finished build: the release's dataset and the build's report (build.json)."""

    dataset: Dataset
    report: dict[str, Any]
    path: Path | None = None
    warnings: list[str] = field(default_factory=list)


def assemble(
    ctx: Context, rows: Rows, config: BuildConfig, identified: dict[str, Rows] | None = None
) -> tuple[Dataset, dict[str, Any]]:
    """The built dataset: each chosen subject's conversation, its built chat items (in
    conversation order), its derived (or kept) profile, persona and questions; anonymised
    when `config.anonymise` (a subject whose identify stage failed is left out). Also the
    anonymisation's counts by kind (no original)."""
    by_subject: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for r in rows:
        by_subject.setdefault(r["subject"], {}).setdefault(r["kind"], []).append(r)
    subjects = []
    kinds: Counter[str] = Counter()
    replaced: Counter[str] = Counter()
    left_out = 0
    for sid, s in ctx.subjects.items():
        mine = by_subject.get(sid, {})
        surrogates: Surrogates | None = None
        if config.anonymise:
            got = (identified or {}).get(sid)
            if not got or got[0]["status"] != "ok":
                left_out += 1
                continue
            surrogates = surrogates_of(s, got, config)
        items = [ChatItem.model_validate(r["item"]) for r in _done(mine, "probe")]
        census = [ChatItem.model_validate(r["item"]) for r in _done(mine, "census")]
        reread = [Reread.model_validate(r["reread"]) for r in _done(mine, "reread")]
        profile, persona, questions = s.profile, s.persona, s.questions
        if config.profile:
            profile = [
                ProfileClaim.model_validate(c) for r in mine.get("profile", []) for c in r["claims"]
            ]
            found = [x for r in mine.get("persona", []) for x in r["entries"]]
            persona = [PersonaEntry.model_validate(x) for x in found]
        if config.questions == "derive":
            questions = [
                Question.model_validate(q)
                for r in mine.get("questions", [])
                for q in r["questions"]
            ]
        built = s.model_copy(
            update={
                "chat_items": items,
                "census": census,
                "reread": reread,
                "profile": profile,
                "persona": persona,
                "questions": questions,
            }
        )
        if surrogates is not None:  # what was derived read the anonymised text already
            built = surrogates.subject(built)
            kinds.update(surrogates.kinds())
            replaced.update(surrogates.replaced)
        subjects.append(built)
    data = ctx.data
    dataset = Dataset(
        name=f"{data.name}-built",
        subjects=subjects,
        sha256=data.sha256,
        source=str(data.source),
        licence=data.licence,
    )
    report = {
        "subjects": len(subjects),
        "subjects_left_out": left_out,
        "identifiers": {k: kinds[k] for k in IDENTIFIER_KINDS},
        "replaced": {k: replaced[k] for k in IDENTIFIER_KINDS},
        "mapping": "not written: recomputed from the identify stage's rows, which stay in "
        f"the private run record ({WORK_DIR}/parts/identify.jsonl)",
    }
    return dataset, report


def _done(rows: dict[str, list[dict[str, Any]]], kind: str) -> list[dict[str, Any]]:
    """The finished rows of `kind`, in conversation order."""
    done = [r for r in rows.get(kind, []) if r["status"] == "ok"]
    return sorted(done, key=lambda r: int(r["position"]))


def _share(k: int, n: int) -> str:
    return f"{k / n:.1%}" if n else "no value"


def census_report(ctx: Context, rows: Rows, config: BuildConfig) -> dict[str, Any]:
    """build.json's `census` and `reread`: over the person messages outside the
    proportional sample, how many each pass labelled (the census counts the built
    enriched and abstention items too: they carry the same stages' labels), failed, and
    found needing memory; and their sentences."""
    outside = {(p.subject_id, p.position) for p in ctx.outside}
    n = len(outside)
    out: dict[str, Any] = {"sentences": []}
    if config.census:
        built = [
            r
            for r in rows
            if r["kind"] in ("probe", "census")
            and r["status"] == "ok"
            and (r["subject"], r["position"]) in outside
        ]
        labelled = [r["item"] for r in built]
        recorded = sum(bool(i["needs_memory"]) for i in labelled)
        strict = sum(bool(i["needs_memory_strict"]) for i in labelled)
        out["census"] = {
            "messages": n,
            "labelled": len(labelled),
            "labelled_by_chat_items": sum(r["kind"] == "probe" for r in built),
            "labelled_by_census": sum(r["kind"] == "census" for r in built),
            "failed": sum(r["kind"] == "census" and r["status"] != "ok" for r in rows),
            "recorded": recorded,
            "strict": strict,
        }
        out["sentences"].append(
            f"Census: {len(labelled)} of the {n} person messages outside the proportional "
            f"sample labelled (stages A to C); {recorded} carry a verified memory demand under "
            f"the recorded reading ({_share(recorded, len(labelled))}) and {strict} under the "
            f"strict one ({_share(strict, len(labelled))})."
        )
    if config.reread:
        done = [r for r in rows if r["kind"] == "reread"]
        ok = [r["reread"] for r in done if r["status"] == "ok"]
        found = sum(bool(x["needs_memory"]) for x in ok)
        out["reread"] = {
            "messages": n,
            "read": len(ok),
            "failed": len(done) - len(ok),
            "needs_memory": found,
            "ids_dropped": sum(r.get("dropped", 0) for r in done if r["status"] == "ok"),
        }
        out["sentences"].append(
            f"Re-reading under the Stage B instruction: {len(ok)} of the {n} person messages "
            f"outside the proportional sample read; {found} have a verified referent outside "
            f"the recent thread ({_share(found, len(ok))})."
        )
    return out


def summarise(ctx: Context, rows: Rows, config: BuildConfig) -> dict[str, Any]:
    """build.json's counts: per stratum, per stage (in the paper's phrasing), per rule, the
    surface-signal agreement, both readings, profile and persona."""
    probes = [r for r in rows if r["kind"] == "probe"]
    ok = [r for r in probes if r["status"] == "ok"]
    items = [r["item"] for r in ok]
    strata = {
        s: {
            "sampled": sum(p.stratum == s for p in ctx.picks),
            "built": sum(r["stratum"] == s for r in ok),
            "failed": sum(r["stratum"] == s and r["status"] != "ok" for r in probes),
        }
        for s in STRATA
    }
    failed_at = Counter(r["failed_stage"] for r in probes if r["status"] != "ok")
    prop_far = sum(r["proposed_far"] for r in ok)
    ver_far = sum(r["proposed_far"] and r["verified_far"] for r in ok)
    proposed = sum(r["proposed"] > 0 for r in ok)
    verified = sum(r["verified"] > 0 for r in ok)
    differs = sum(i["tier"] != i["surface_tier"] for i in items)
    pairs = Counter(f"{i['surface_tier']} -> {i['tier']}" for i in items)
    readings = {
        s: {
            "items": sum(i["stratum"] == s for i in items),
            "recorded": sum(i["stratum"] == s and i["needs_memory"] for i in items),
            "strict": sum(i["stratum"] == s and i["needs_memory_strict"] for i in items),
        }
        for s in STRATA
    }
    prof = [r for r in rows if r["kind"] == "profile"]
    pers = [r for r in rows if r["kind"] == "persona"]
    p_prop, p_match, p_kept = (sum(r[k] for r in prof) for k in ("proposed", "matched", "kept"))
    s_prop, s_kept, s_hyp = (sum(r[k] for r in pers) for k in ("proposed", "kept", "hypotheses"))
    unsupported = sum(i["supported"] is False for i in items)
    quest = [r for r in rows if r["kind"] == "questions"]
    q_prop, q_check, q_kept, q_unans = (
        sum(r[k] for r in quest) for k in ("proposed", "checked", "kept", "unanswerable")
    )
    q_dropped: Counter[str] = Counter()
    for r in quest:
        q_dropped.update(r.get("dropped", {}))
    categories = Counter(q["category"] for r in quest for q in r.get("questions", []))
    src_refs = sum(r.get("source_references", 0) for r in ok)
    src_out = sum(r.get("source_references_outside_shown", 0) for r in ok)
    src_far = sum(r.get("source_references_beyond_recent", 0) for r in ok)
    ver_out = sum(r.get("verified_outside_shown", 0) for r in ok)
    sentences = [
        f"Stage A proposed a distant referent (more than {RECENT_WINDOW} messages back) for "
        f"{prop_far} messages and Stage B verified {ver_far}.",
        f"Stage A proposed any referent for {proposed} messages and Stage B verified one for "
        f"{verified}.",
        f"The tier differs from the surface signal on {differs} of {len(items)} items.",
        f"Stage E marked {unsupported} of {len(items)} reference replies unsupported.",
        f"Stage A was not shown {src_out} of the {src_refs} references the source's own "
        f"ground truth gives for the built probes ({src_far} of them more than "
        f"{RECENT_WINDOW} messages back), so it could not propose them; {ver_out} verified "
        "referents lie outside what it was shown.",
    ]
    if config.questions == "derive":
        sentences.append(
            f"Questions: {q_prop} proposed, {q_check} with evidence that exists before the "
            f"point they are asked, {q_kept} kept after the check ({q_unans} unanswerable)."
        )
    if config.profile:
        sentences += [
            f"Profile: {p_prop} claims proposed; a final pass matched {p_match} to referents "
            f"and kept {p_kept}.",
            f"Persona: {s_prop} entries proposed, {s_kept} kept with grounds, {s_hyp} of them "
            "named working hypotheses.",
        ]
    return {
        "sentences": sentences,
        "strata": strata,
        "stages": {
            "resolve": {
                "probes": len(probes) - failed_at.get("resolve", 0),
                "proposed_any": proposed,
                "proposed_distant": prop_far,
                "ids_dropped_not_before_probe": sum(r["proposed_dropped"] for r in ok),
            },
            "verify": {
                "verified_any": verified,
                "verified_distant": ver_far,
                "ids_proposed": sum(r["proposed"] for r in ok),
                "ids_kept": sum(r["verified"] for r in ok),
                "additions_ignored": sum(r["verify_additions_ignored"] for r in ok),
            },
            "classify": {"dependent": sum(bool(i["dependent"]) for i in items)},
            "validate": {"supported": len(items) - unsupported, "unsupported": unsupported},
            "failed": {s: failed_at.get(s, 0) for s in ("identify", *STAGES)},
        },
        "shown": {
            "source_references": src_refs,
            "source_references_beyond_recent": src_far,
            "source_references_outside_shown": src_out,
            "verified_outside_shown": ver_out,
            "recent_window": RECENT_WINDOW,
            "candidates": config.candidates,
            "show_all": config.show_all,
        },
        "rules": {rid: sum(i["rule"] == rid for i in items) for rid in RULE_IDS},
        "tiers": dict(Counter(i["tier"] for i in items)),
        "surface": {"items": len(items), "differs": differs, "pairs": dict(sorted(pairs.items()))},
        "readings": readings,
        "profile": {
            "proposed": p_prop,
            "matched": p_match,
            "kept": p_kept,
            "failed_subjects": sum(r["status"] != "ok" for r in prof),
        },
        "persona": {
            "proposed": s_prop,
            "kept": s_kept,
            "hypotheses": s_hyp,
            "failed_subjects": sum(r["status"] != "ok" for r in pers),
        },
        "questions": {
            "mode": config.questions,
            "proposed": q_prop,
            "checked": q_check,
            "kept": q_kept,
            "unanswerable": q_unans,
            "dropped": dict(sorted(q_dropped.items())),
            "categories": dict(sorted(categories.items())),
            "failed_subjects": sum(r["status"] != "ok" for r in quest),
        },
    }


# -- writing the release ----------------------------------------------------------------------


def check_out(out: Path, source: str) -> None:
    """Refuse an --out that is a file, the source itself, or a release not written by the
    builder (its files would be mixed with ours)."""
    if out.exists() and not out.is_dir():
        raise DataError(out, "is a file, not a folder", fix="give --out a folder to write")
    src = Path(source)
    if src.exists() and out.exists() and src.resolve() == out.resolve():
        raise DataError(out, "is the source dataset itself", fix="give --out another folder")
    if out.is_dir() and is_release(out) and not (out / REPORT).exists():
        raise DataError(
            out,
            f"holds a release that no build wrote (no {REPORT})",
            fix="give --out an empty or new folder",
        )


def write_built(result: BuildResult, out: Path, finished: Finished) -> None:
    """The release folder and its build.json (with the provenance), replacing the subject
    folders an earlier build wrote there that this one no longer has."""
    old = out / REPORT
    if old.exists():
        before = json.loads(old.read_text(encoding="utf-8")).get("output", {}).get("subjects", [])
        now = {s.id for s in result.dataset.subjects}
        for sid in before:
            if not isinstance(sid, str) or name_problem(sid) is not None:
                continue  # an edited build.json names no folder outside OUT
            d = out / sid
            if not d.resolve().is_relative_to(out.resolve()):
                continue
            if sid not in now and d.is_dir() and (d / CONVERSATION).exists():
                for f in SUBJECT_FILES:
                    (d / f).unlink(missing_ok=True)
                if not any(d.iterdir()):
                    d.rmdir()
    check_release_names(result.dataset, out)
    for s in result.dataset.subjects:  # a file this build leaves empty must not linger
        for f in SUBJECT_FILES[1:]:
            (out / s.id / f).unlink(missing_ok=True)
    write_release(result.dataset, out)
    m = finished.manifest
    report = {
        **result.report,
        "output": {
            "name": result.dataset.name,
            "subjects": [s.id for s in result.dataset.subjects],
        },
        "provenance": {
            "dataset": {
                **m.dataset.model_dump(mode="json"),
                "source": source_name(m.dataset.source),
            },
            "prompts_sha256": bp.PROMPT_SHA256,
            "models": m.roles,
            "seed": m.seed,
            "config": m.config,
            "package_version": __version__,
            "run_record": WORK_DIR,
        },
        "failures": finished.failures,
    }
    write_json(out / REPORT, report)
    private = out / WORK_DIR / "parts" / "identify.jsonl"
    if private.exists():  # the identifiers found, originals: the run record's only such file
        private.chmod(0o600)
    result.report = report
    result.path = out


def build_realcompanion(
    data: Dataset,
    out: Path,
    config: BuildConfig = BuildConfig(),
    model: Given | None = None,
    judge_model: Given | None = None,
    progress: Progress | None = None,
) -> tuple[BuildResult, Finished]:
    """Build `data`'s chat ground truth (and profile and persona) into the release folder
    `out`; a rerun into the same folder resumes. Returns the result and the finished run
    (its `exit_code` is 3 when any stage failed)."""
    check_out(out, str(data.source))
    roles = {k: v for k, v in (("model", model), ("judge", judge_model)) if v is not None}
    with RunLock(out / WORK_DIR):  # the runner takes it again; held while the release is written
        finished = run_track(BUILD, data, out / WORK_DIR, config, roles=roles, progress=progress)
        result: BuildResult = finished.outcome.result
        write_built(result, out, finished)
    result.warnings = finished.warnings
    return result, finished


def rule_text(rule_id: str | None) -> str:
    """`R12 (opener resumes a thread): when ...` for `data show`."""
    if rule_id is None or rule_id not in BY_ID:
        return str(rule_id)
    r = BY_ID[rule_id]
    return f"{r.id} ({r.name}): {r.when}; decides {r.decides}"


__all__ = [
    "BUILD",
    "BuildConfig",
    "BuildResult",
    "BuildTrack",
    "build_realcompanion",
    "rule_text",
]
