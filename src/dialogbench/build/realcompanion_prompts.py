"""Wording (our own) of the builder's stages, their reply schemas and the prompts built
from them. Each stage is one structured call whose reply holds its `reasoning` (the trace,
written before the decision, in the same call) and its decision fields.

    A resolve   probe + the history shown  -> kind, reading, referent_ids
    B verify    probe + A's reading + the proposed messages quoted from the conversation
                -> kept_ids (code keeps only ids A proposed)
    C classify  probe + A's reading + the verified messages -> needed_ids (code keeps only
                verified ids; the rules in `rules.py` then decide)
    D reply     probe + the verified messages alone -> reply
    E validate  probe + the verified messages + D's reply -> supported
    profile     a part of the conversation -> claims (field, statement, confidence, window,
                evidence_ids); then one check per claim against the messages it cites
    persona     a part of the conversation -> entries and named working hypotheses, with
                grounds
    questions   a part of the conversation -> questions (category, text, answer, evidence
                ids, answerable, asked after); then one check per question against the
                messages it cites (an unanswerable one: against the part it was asked about)
    identify    a chunk of messages -> the person names and places in it, with their kind
                (contact details are found by regexes, `build/anonymise.py`)

Messages are shown one a line as `[id] date speaker: text`. `PROMPT_SHA256` digests every
constant here, so a change of wording starts a build afresh (saved calls stay cached).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Literal, get_args

from pydantic import BaseModel, Field

from dialogbench.build.rules import KINDS, Kind
from dialogbench.data.model import RECENT_WINDOW, Message
from dialogbench.models.types import ChatMessage
from dialogbench.runner.record import digest
from dialogbench.tracks.common import render_message

MESSAGE_CHARS = 400
"""Longest message text shown; longer ones are cut with " [...]"."""
REASONING_CHARS = 300
"""Longest reasoning a reply may give (the schema says so, and a grammar-constrained model is
held to it, so a small model cannot ramble past its token budget)."""
TEXT_CHARS = 400
"""Longest reading, reply, statement or name."""
ID_CHARS = 64
"""Longest message id a reply may name (the ids shown are short; the schema says so, so a
grammar-constrained model cannot run on inside an id until its token budget is spent)."""
IDENTIFY_CHARS = 20_000
"""Longest message text the identify pass shows (it must see a whole message)."""
MAX_IDS = 10
"""Most message ids one reply may name (referents, kept, needed, evidence, grounds)."""

SYSTEM = (
    "You help build ground truth for a benchmark of AI companions from a real conversation "
    "between a person and a companion. You work on one step at a time, say briefly why (a "
    f"reasoning of at most {REASONING_CHARS} characters), and answer with one JSON object "
    "and nothing else."
)

KIND_HELP = (
    "kind, how the new message points back: none (complete on its own), answer (answers or "
    "reacts to the companion's last turn), continuation (carries on a topic already under "
    "way), back-reference (recalls a particular earlier event, statement or plan), update "
    "(changes or follows up on something stated earlier), correction (corrects something "
    "said earlier), absent (points at something that was never said in this conversation)"
)

RESOLVE_TASK = (
    "Read the new message {person} sent and the earlier messages shown. Work out what the "
    "new message points at in the earlier conversation, if anything.\n"
    "- reasoning: one or two sentences on what it refers to and why.\n"
    "- {kind_help}.\n"
    "- reading: one sentence saying what the message is about, as a reply would have to "
    "understand it.\n"
    "- referent_ids: the [id]s of the earlier messages it points at (any shown, however far "
    "back); an empty list when it points at none."
)

VERIFY_TASK = (
    "A first reading of {person}'s new message said: {reading} (kind: {kind}). It proposed "
    "the earlier messages below as what the message points at; they are quoted from the "
    "conversation. Check each one: keep it only if the new message really points at it and "
    "it supports that reading. You can only remove messages, never add any.\n"
    "- reasoning: one or two sentences per removal or for keeping all.\n"
    "- kept_ids: the [id]s you keep (an empty list keeps none)."
)

REREAD_TASK = (
    "Read {person}'s new message again, with the messages shown before it, and check, as a "
    "verifier would, whether it really points at one of the earlier messages from further "
    "back (those before the recent thread). Keep such a message only if the new message "
    "points at it and, as quoted, it supports that reading; most messages point at nothing "
    "further back, and then you keep none. Never keep a message of the recent thread.\n"
    "- reasoning: one or two sentences.\n"
    "- kept_ids: the [id]s of the earlier messages from further back you verified (an "
    "empty list keeps none)."
)
"""The re-reading (`build realcompanion --reread`): stage B's check, made on the message
itself rather than on stage A's proposal."""

CLASSIFY_TASK = (
    "{person}'s new message was read as: {reading} (kind: {kind}). These earlier messages "
    "are verified to be what it points at. Which of them must a good reply draw on, so that "
    "a reply written without it would be wrong or miss the point?\n"
    "- reasoning: one or two sentences.\n"
    "- needed_ids: the [id]s a good reply needs (an empty list when it can be written "
    "from the new message alone)."
)

REPLY_TASK = (
    "Write the reply a caring, attentive companion would send to {person}'s new message. "
    "Use only the new message and the recorded earlier messages below: do not state "
    "anything about {person} or the past that they do not show.\n"
    "- reasoning: one sentence on what the reply draws on.\n"
    "- reply: the reply itself, at most three sentences."
)

VALIDATE_TASK = (
    "Check this reply to {person}'s new message against the recorded earlier messages "
    "below. Is everything the reply says or assumes about {person} or the past supported by "
    "the new message or those messages?\n"
    "- reasoning: one or two sentences.\n"
    "- supported: true when it is, false when it asserts something they do not show."
)

PROFILE_TASK = (
    "Below is {scope} between {person} and a companion. List facts {person} stated about "
    "their own life (at most {most}), one claim each:\n"
    "- field: a short lower-case subject such as occupation, family, pets, hobbies, health, "
    "home, friends, education, plans.\n"
    "- statement: one plain sentence about {person}.\n"
    "- confidence: from 0 to 1, how clearly the messages establish it.\n"
    "- valid_from / valid_to: dates (YYYY-MM-DD) when it held only for a while, else null.\n"
    "- evidence_ids: the [id]s of the messages that establish it.\n"
    "Give reasoning first: one sentence on what the part is about."
)

MATCH_TASK = (
    "A claim about {person} cites the messages below as its evidence. Do they support the "
    "claim as stated?\n"
    "Claim ({field}): {statement}\n"
    "- reasoning: one sentence.\n"
    "- supported: true when the messages establish the claim, false otherwise."
)

PERSONA_TASK = (
    "Below is {scope} between {person} and a companion. Describe how {person} thinks, feels "
    "and decides.\n"
    "- entries (at most {most}): dimension (values, coping style, anxieties, humour, "
    "speaking style, decision making, ...), statement (one sentence), grounds (the [id]s of "
    "the messages that show it).\n"
    "- hypotheses (at most 3): working guesses that are not shown outright, each with a "
    "short name (e.g. 'avoids conflict at work'), a statement and its grounds.\n"
    "Give reasoning first: one sentence."
)

QUESTION_CATEGORIES: dict[str, str] = {
    "single-hop": "one fact stated in one message",
    "multi-hop": "facts from several messages, combined",
    "temporal": "a date, or a time between events",
    "open-domain": "the record plus general knowledge",
    "adversarial": "a false premise or something never said (unanswerable when never said)",
    "knowledge-update": "the latest value of a fact that changed or was corrected",
    "preference": "what someone likes, wants or dislikes",
    "relationship": "who a person is to the subject",
    "event-order": "which of two events came first",
    "counting": "how many",
    "plan": "an intention and what became of it",
    "emotion": "how the subject felt or reacted",
    "health": "conditions, treatment, changes to it",
    "work": "job, role, career",
    "pets": "the subject's animals",
    "inference": "a likely conclusion the record supports but does not state",
}
"""The question categories (the sample's README defines them: LoCoMo's five, then ours)."""
CATEGORY_HELP = "; ".join(f"{k} ({v})" for k, v in QUESTION_CATEGORIES.items())

QUESTIONS_TASK = (
    "Below is {scope} between {person} and a companion. Write questions (at most {most}) "
    "that someone who had read the conversation could answer about {person}, the way a "
    "test of a companion's memory would ask them.\n"
    "- category: one of {categories}.\n"
    "- question: one question.\n"
    "- answer: the short answer the messages give.\n"
    "- evidence_ids: the [id]s of the messages that give the answer.\n"
    "- answerable: true; or false for a question about something the conversation never "
    "says (then answer says so and evidence_ids is empty).\n"
    "- asked_after_id: the [id] of the message after which the question is asked (at or "
    "after its last evidence), or null for after the last message shown.\n"
    "Give reasoning first: one sentence on what the part is about."
)

QUESTION_CHECK_TASK = (
    "A question about {person} gives the answer below and cites the messages below as its "
    "evidence. Do they give that answer?\n"
    "Question ({category}): {question}\nAnswer: {answer}\n"
    "- reasoning: one sentence.\n"
    "- supported: true when the messages give the answer, false otherwise."
)

UNANSWERABLE_CHECK_TASK = (
    "A question about {person} is marked unanswerable: the conversation below is said never "
    "to give its answer. Is that so?\n"
    "Question ({category}): {question}\n"
    "- reasoning: one sentence.\n"
    "- supported: true when the messages do not answer it, false when they do."
)

IDENTIFY_TASK = (
    "Below are messages of a conversation that will be released anonymised. List every "
    "identifier in them that could point to a real person or place:\n"
    "- kind: person (a name or nickname of a person or pet), or place (a town, street, "
    "workplace, school or other named location).\n"
    "- text: exactly as written in the messages.\n"
    "Leave out email addresses, phone numbers, links and handles (they are found "
    "separately). Give reasoning first: one sentence."
)

WHOLE_SCOPE = "the whole conversation"
PART_SCOPE = "part {part} of {parts} of a conversation"
RECENT_HEADING = "The recent thread (the last {n} messages before the new one):"
EARLIER_HEADING = "Earlier messages (from further back, the ones sharing the most words):"
PROPOSED_HEADING = "The proposed messages:"
VERIFIED_HEADING = "The verified earlier messages:"
RECORDED_HEADING = "The recorded earlier messages (the only context you may use):"
CITED_HEADING = "The cited messages:"
NOTHING = "(none)"
NEW_HEADING = "{person}'s new message:"
REPLY_HEADING = "The reply:"


Reasoning = Annotated[str, Field(max_length=REASONING_CHARS)]
Short = Annotated[str, Field(min_length=1, max_length=TEXT_CHARS)]
RefId = Annotated[str, Field(min_length=1, max_length=ID_CHARS)]
Ids = Annotated[list[RefId], Field(default_factory=list, max_length=MAX_IDS)]
"""Message ids, bounded in length and number."""


class ResolveReply(BaseModel):
    """Stage A's reply."""

    reasoning: Reasoning
    kind: Kind = Field(description=" | ".join(KINDS))
    reading: Short
    referent_ids: Ids


class VerifyReply(BaseModel):
    """Stage B's reply."""

    reasoning: Reasoning
    kept_ids: Ids


class RereadReply(BaseModel):
    """The re-reading's reply."""

    reasoning: Reasoning
    kept_ids: Ids


class ClassifyReply(BaseModel):
    """Stage C's reply."""

    reasoning: Reasoning
    needed_ids: Ids


class ReplyReply(BaseModel):
    """Stage D's reply."""

    reasoning: Reasoning
    reply: Short


class ValidateReply(BaseModel):
    """Stage E's reply."""

    reasoning: Reasoning
    supported: bool


class ClaimProposal(BaseModel):
    """One proposed profile claim."""

    field: str = Field(min_length=1)
    statement: Short
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)
    valid_from: str | None = None
    valid_to: str | None = None
    evidence_ids: Ids


class ProfileReply(BaseModel):
    """The profile pass's reply for one part of the conversation."""

    reasoning: Reasoning
    claims: list[ClaimProposal] = Field(default_factory=list)


class MatchReply(BaseModel):
    """The final pass's verdict on one claim."""

    reasoning: Reasoning
    supported: bool


class PersonaProposal(BaseModel):
    """One persona entry."""

    dimension: str = Field(min_length=1)
    statement: Short
    grounds: Ids


class HypothesisProposal(BaseModel):
    """One named working hypothesis."""

    name: Short
    statement: Short
    grounds: Ids


class PersonaReply(BaseModel):
    """The persona pass's reply for one part of the conversation."""

    reasoning: Reasoning
    entries: list[PersonaProposal] = Field(default_factory=list)
    hypotheses: list[HypothesisProposal] = Field(default_factory=list)


Category = Literal[
    "single-hop",
    "multi-hop",
    "temporal",
    "open-domain",
    "adversarial",
    "knowledge-update",
    "preference",
    "relationship",
    "event-order",
    "counting",
    "plan",
    "emotion",
    "health",
    "work",
    "pets",
    "inference",
]
assert get_args(Category) == tuple(QUESTION_CATEGORIES)


class QuestionProposal(BaseModel):
    """One proposed question."""

    category: Category = Field(description=" | ".join(QUESTION_CATEGORIES))
    question: Short
    answer: Short
    evidence_ids: Ids
    answerable: bool = True
    asked_after_id: RefId | None = None


class QuestionsReply(BaseModel):
    """The question pass's reply for one part of the conversation."""

    reasoning: Reasoning
    questions: list[QuestionProposal] = Field(default_factory=list)


class QuestionCheckReply(BaseModel):
    """The check of one proposed question."""

    reasoning: Reasoning
    supported: bool


IDENTIFIER_KINDS = ("person", "place")


class Identifier(BaseModel):
    """One identifier found in a chunk of messages."""

    kind: Literal["person", "place"]
    text: Annotated[str, Field(min_length=1, max_length=ID_CHARS)]


class IdentifyReply(BaseModel):
    """The identify pass's reply for one chunk of messages."""

    reasoning: Reasoning
    identifiers: list[Identifier] = Field(default_factory=list, max_length=40)


def render(message: Message) -> str:
    """`[id] date speaker: text`, the text cut to MESSAGE_CHARS."""
    return render_message(message, MESSAGE_CHARS, with_id=True)


def block(heading: str, messages: Sequence[Message]) -> str:
    lines = [render(m) for m in messages] or [NOTHING]
    return "\n".join([heading, *lines])


def probe_block(person: str, probe: Message) -> str:
    """The probe under `NEW_HEADING`: every probe stage's prompt shows it."""
    return block(NEW_HEADING.format(person=person), [probe])


def _call(task: str, *parts: str) -> list[ChatMessage]:
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "\n\n".join([task, *parts])},
    ]


def resolve_messages(
    person: str, probe: Message, recent: Sequence[Message], earlier: Sequence[Message]
) -> list[ChatMessage]:
    return _call(
        RESOLVE_TASK.format(person=person, kind_help=KIND_HELP),
        block(EARLIER_HEADING, earlier),
        block(RECENT_HEADING.format(n=RECENT_WINDOW), recent),
        probe_block(person, probe),
    )


def reread_messages(
    person: str, probe: Message, recent: Sequence[Message], earlier: Sequence[Message]
) -> list[ChatMessage]:
    """The re-reading: stage A's view of the history (what it was shown), stage B's check."""
    return _call(
        REREAD_TASK.format(person=person),
        block(EARLIER_HEADING, earlier),
        block(RECENT_HEADING.format(n=RECENT_WINDOW), recent),
        probe_block(person, probe),
    )


def _on_reading(
    task: str,
    heading: str,
    person: str,
    probe: Message,
    reading: str,
    kind: str,
    shown: Sequence[Message],
) -> list[ChatMessage]:
    """Stages B and C: `task` with stage A's reading and kind, `shown` under `heading`,
    then the probe."""
    return _call(
        task.format(person=person, reading=reading, kind=kind),
        block(heading, shown),
        probe_block(person, probe),
    )


def verify_messages(
    person: str, probe: Message, reading: str, kind: str, proposed: Sequence[Message]
) -> list[ChatMessage]:
    return _on_reading(VERIFY_TASK, PROPOSED_HEADING, person, probe, reading, kind, proposed)


def classify_messages(
    person: str, probe: Message, reading: str, kind: str, verified: Sequence[Message]
) -> list[ChatMessage]:
    return _on_reading(CLASSIFY_TASK, VERIFIED_HEADING, person, probe, reading, kind, verified)


def reply_messages(person: str, probe: Message, recorded: Sequence[Message]) -> list[ChatMessage]:
    return _call(
        REPLY_TASK.format(person=person),
        block(RECORDED_HEADING, recorded),
        probe_block(person, probe),
    )


def validate_messages(
    person: str, probe: Message, recorded: Sequence[Message], reply: str
) -> list[ChatMessage]:
    return _call(
        VALIDATE_TASK.format(person=person),
        block(RECORDED_HEADING, recorded),
        probe_block(person, probe),
        f"{REPLY_HEADING}\n{reply}",
    )


def _scope(part: int, parts: int) -> str:
    return WHOLE_SCOPE if parts == 1 else PART_SCOPE.format(part=part, parts=parts)


def profile_messages(
    person: str, messages: Sequence[Message], part: int, parts: int, most: int
) -> list[ChatMessage]:
    task = PROFILE_TASK.format(scope=_scope(part, parts), person=person, most=most)
    return _call(task, "\n".join(render(m) for m in messages))


def match_messages(
    person: str, field: str, statement: str, cited: Sequence[Message]
) -> list[ChatMessage]:
    task = MATCH_TASK.format(person=person, field=field, statement=statement)
    return _call(task, block(CITED_HEADING, cited))


def persona_messages(
    person: str, messages: Sequence[Message], part: int, parts: int, most: int
) -> list[ChatMessage]:
    task = PERSONA_TASK.format(scope=_scope(part, parts), person=person, most=most)
    return _call(task, "\n".join(render(m) for m in messages))


def questions_messages(
    person: str, messages: Sequence[Message], part: int, parts: int, most: int
) -> list[ChatMessage]:
    task = QUESTIONS_TASK.format(
        scope=_scope(part, parts), person=person, most=most, categories=CATEGORY_HELP
    )
    return _call(task, "\n".join(render(m) for m in messages))


def question_check_messages(
    person: str, q: QuestionProposal, cited: Sequence[Message]
) -> list[ChatMessage]:
    if q.answerable:
        task = QUESTION_CHECK_TASK.format(
            person=person, category=q.category, question=q.question, answer=q.answer
        )
        return _call(task, block(CITED_HEADING, cited))
    task = UNANSWERABLE_CHECK_TASK.format(person=person, category=q.category, question=q.question)
    return _call(task, "\n".join(render(m) for m in cited))


def identify_messages(messages: Sequence[Message]) -> list[ChatMessage]:
    lines = [render_message(m, IDENTIFY_CHARS, with_id=True) for m in messages]
    return _call(IDENTIFY_TASK, "\n".join(lines))


SCHEMAS: tuple[type[BaseModel], ...] = (
    ResolveReply,
    VerifyReply,
    ClassifyReply,
    ReplyReply,
    ValidateReply,
    ProfileReply,
    MatchReply,
    PersonaReply,
    QuestionsReply,
    QuestionCheckReply,
    IdentifyReply,
    RereadReply,
)


def _constants() -> dict[str, object]:
    words = {n: v for n, v in globals().items() if n.isupper() and isinstance(v, str | int)}
    return {**words, "schemas": [s.model_json_schema() for s in SCHEMAS]}


PROMPT_SHA256 = digest(_constants())
"""Digest of every wording constant above and of the reply schemas."""
