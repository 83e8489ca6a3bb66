"""Rebuild the built-in sample's chat ground truth, profile and persona by running the
builder itself (`build realcompanion`) on the sample's conversations, with a scripted
loopback model standing in for the model and the judge.

    DIALOGBENCH_CACHE=/tmp/make-sample.sqlite PYTHONPATH=src python -m tests.build.make_sample

The script's answers are our own reading of each sampled message (written for dialogbench,
CC0): `LABELS` says, per probe, how it points back (stage A's kind), which earlier messages
it points at, which of them the judge keeps (B), which a reply needs (C), the reference reply
(D: the companion's recorded next turn unless written here) and whether the judge finds it
supported (E). The everyday sessions (s15 on) are read from `everyday_labels.json`: each
person message there is complete on its own or answers the turn before. A session opener
without a label points at nothing; any other probe without one is an error. The rules, the
strata, the counts and the files are the builder's own. `PROFILE` and `PERSONA` are what the
profile and persona passes propose.

Strata: `PROPORTIONAL` probes drawn uniformly with `SEED`; then every remaining session opener
(abstention) and every remaining message the surface signal marks as reaching outside the
recent thread (enriched), so each designed case is built. It writes `chat.jsonl`,
`profile.json` and `persona.json` of each subject in `src/dialogbench/data/sample/` and prints
build.json's sentences; the conversations, questions and dataset.json are written by hand.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dialogbench.build import BuildConfig, build_realcompanion
from dialogbench.build.sampling import Sizes, sample_strata
from dialogbench.data.model import Dataset, Subject
from dialogbench.data.registry import load_dataset
from dialogbench.runner import RoleSpec
from dialogbench.testing import ChatServer

from .scripted import ID, _probe

SAMPLE = Path(__file__).resolve().parents[2] / "src" / "dialogbench" / "data" / "sample"
SEED = 0
PROPORTIONAL = 60
WRITTEN = ("chat.jsonl", "profile.json", "persona.json")


@dataclass(frozen=True)
class L:
    """Our reading of one probe (message ids; "@p" is the message just before it)."""

    kind: str
    refs: tuple[str, ...] = ()
    note: str = ""
    """Stage A's reading: what the message is about."""
    keep: tuple[str, ...] | None = None
    """Stage B keeps these (None: all); `why` says why it removed the others."""
    need: tuple[str, ...] | None = None
    """Stage C: the ids a reply needs (None: every verified one)."""
    reply: str | None = None
    """Stage D's reply (None: the companion's recorded next turn)."""
    supported: bool = True
    why: str = ""
    """B's or E's reasoning, where it removes or rejects something."""


def answer(note: str = "", *more: str, **kw: Any) -> L:
    """An answer to the turn before (which a reply needs), plus `more` background ids."""
    return L("answer", ("@p", *more), note, need=kw.pop("need", ("@p",)), **kw)


LABELS: dict[str, L] = {
    # -- maya -------------------------------------------------------------------------------
    "maya/m0001": L("none", note="Maya introduces herself; a friend suggested the app."),
    "maya/m0005": answer(
        "What she does: packaging and branding at a small studio; a yoghurt label today."
    ),
    "maya/m0009": answer(
        "How the strawberry label ended: pink, and nobody really happy.",
        "m0007",
        supported=False,
        why="The reply says she mentioned feeding the dog; neither recorded message shows it.",
    ),
    "maya/m0011": answer("Who the dog she fed is: Biscuit, a rescue greyhound.", "m0003"),
    "maya/m0013": answer("How long she has had Biscuit, and why the dog matters.", "m0011"),
    "maya/m0017": answer(
        "She feels a bit better after typing it out.",
        reply="Glad it helped a bit. And no need to ask about my day; this space is for you.",
    ),
    "maya/m0019": answer("She is going to bed.", reply="Goodnight, Maya. Sleep well."),
    "maya/m0033": answer("Her maid of honour duty: planning the hen do to Jo's brief."),
    "maya/m0037": answer(
        "She is going to bed stressed about the hen do.",
        reply="A solid plan for tonight. Sleep well, Maya.",
    ),
    "maya/m0045": answer("What the GP said about a review and a headache diary."),
    "maya/m0047": answer("Her guesses at what sets off the migraines."),
    "maya/m0049": answer("Her sleep is bad: she lies awake thinking about kerning.", "m0047"),
    "maya/m0069": answer("Her proudest work for the portfolio: the Hearth rebrand.", "m0067"),
    "maya/m0079": L(
        "answer",
        ("m0067", "m0069", "@p"),
        "She will go back to the portfolio she was panicking about, Hearth first.",
        need=(),
    ),
    "maya/m0083": answer("Her plan for the rainy Sunday: sourdough with her starter, Gerald."),
    "maya/m0087": answer(
        "What she is changing in this sourdough attempt.",
        reply="The overnight cold proof is exactly what a lot of bakers swear by. Fingers crossed.",
    ),
    "maya/m0095": answer(
        "Typing her opening felt less scary.",
        "m0093",
        reply="It often does. Saying it out loud is the natural next step.",
    ),
    "maya/m0099": L(
        "continuation",
        ("m0083", "@p"),
        "She is off to bake with Gerald, the sourdough starter she named earlier this morning.",
        need=("m0083",),
    ),
    "maya/m0101": L(
        "back-reference",
        ("m0061", "m0090"),
        "The Fernhill interview, set for Wednesday, is over.",
    ),
    "maya/m0117": answer(
        "She knows she owes Priya nothing but still feels guilty.",
        reply="Still. It can be true and still feel weird.",
    ),
    "maya/m0119": L(
        "back-reference",
        ("m0053",),
        "She finally climbed the purple grade she had been stuck on.",
    ),
    "maya/m0123": L(
        "update",
        ("m0105", "m0107"),
        "News on the interview: Fernhill wants her for the second round.",
    ),
    "maya/m0131": L("none", note="Biscuit is limping; a vet visit is booked."),
    "maya/m0143": L(
        "back-reference",
        ("m0125", "m0123"),
        "Fernhill offered her the job; the creative director liked the tea design task.",
        need=(),
    ),
    "maya/m0149": answer("She would ask for two days from home, mostly for Biscuit."),
    "maya/m0153": answer("How Priya will take the news: kindly, which makes it harder."),
    "maya/m0159": L(
        "back-reference",
        ("m0043",),
        "She cannot sleep and her hands are cold again.",
        keep=(),
        why="m0043 only says the tablets can cause cold hands; the 'again' points at cold "
        "nights never recorded, so it does not support the reading.",
    ),
    "maya/m0165": L(
        "continuation",
        ("@p", "m0045"),
        "She will raise the cold hands at her GP review.",
        need=("@p",),
        reply="Good idea. Put it at the top of the list.",
    ),
    "maya/m0169": answer("She would freelance for Priya, but only once settled.", "m0167"),
    "maya/m0171": L(
        "update",
        ("m0147", "m0149", "m0151", "@p"),
        "The negotiation worked: 40k, two home days and a start date.",
        need=("m0147", "m0149", "@p"),
    ),
    "maya/m0173": L("continuation", ("@p",), "She told Biscuit about the home days."),
    "maya/m0177": L(
        "answer",
        ("@p", "m0033", "m0035"),
        "The hen do is booked for 27 April, built around what Jo asked for.",
    ),
    "maya/m0181": answer("She will try the tip and sleep."),
    "maya/m0183": L(
        "back-reference",
        ("m0177",),
        "The hen do she booked has happened.",
        need=(),
    ),
    "maya/m0187": answer("How long she lasted in the cold water.", "m0185"),
    "maya/m0201": answer("She is resting, as told."),
    "maya/m0207": L(
        "back-reference",
        ("m0161", "m0164", "m0165"),
        "At the GP review she raised the cold hands, as planned.",
        need=("m0161", "m0165"),
    ),
    "maya/m0211": answer(
        "The headache diary continues for three months.",
        reply="Makes sense. Three more months of the diary will tell you a lot.",
    ),
    "maya/m0215": L(
        "continuation",
        ("m0197", "m0213", "@p"),
        "She asks for help with the speech after the front-seat contract opening.",
        need=("m0213",),
    ),
    "maya/m0219": answer("The speech idea moves her."),
    "maya/m0221": L(
        "continuation",
        ("m0203", "m0213"),
        "Last week at the studio, then the new job, then the wedding week.",
        need=(),
    ),
    "maya/m0223": answer("Leah will have Biscuit for the wedding weekend."),
    "maya/m0225": L(
        "back-reference",
        ("m0213", "m0221"),
        "She is back after the wedding week.",
        need=("m0221",),
    ),
    "maya/m0235": answer(
        "Her new team seems good.",
        "m0233",
        reply="It sounds like a good team to start with: one quiet, one talker.",
    ),
    "maya/m0239": L(
        "continuation",
        ("m0237", "@p"),
        "Biscuit forgave her for the weekend away.",
        reply="Bribery works every time.",
    ),
    "maya/m0241": answer("She agrees it was a big spring and will sleep."),
    "maya/m0245": answer("She logged the headache and says goodnight."),
    "maya/m0251": answer("What she bought; a climbing film night with Leah."),
    "maya/m0257": answer("The freelance label is small enough to fit in.", "m0255"),
    "maya/m0261": L(
        "continuation",
        ("m0011", "m0259", "@p"),
        "Biscuit's birthday, marked by even more sleep than her usual 20 hours.",
        need=("m0259", "@p"),
    ),
    "maya/m0263": L(
        "absent",
        note="A lighthouse film she says she told the companion about: no such message is in "
        "the record.",
    ),
    "maya/m0265": L(
        "answer",
        ("@p", "m0263", "m0251", "m0253"),
        "The lighthouse film was something she told Leah; they will argue about it at the "
        "Friday film night.",
        need=("@p", "m0251", "m0253"),
    ),
    "maya/m0267": L(
        "back-reference",
        ("m0197", "m0229"),
        "Jo framed the front-seat contract from the wedding speech.",
        need=("m0229",),
    ),
    "maya/m0271": L(
        "back-reference",
        ("m0041", "m0045", "m0209", "m0211"),
        "Her headache diary shows far fewer migraines since the change of tablets.",
        need=("m0041", "m0209"),
    ),
    "maya/m0277": L(
        "continuation",
        ("m0255", "m0127"),
        "She finished the freelance hot sauce label, reusing the steam idea from the tea task.",
    ),
    "maya/m0279": L(
        "back-reference",
        ("m0015",),
        "Biscuit wants her walk.",
        keep=(),
        why="m0015 gives Biscuit's usual walk times, but the message does not point at them: "
        "it is complete on its own.",
    ),
    # -- tomas ------------------------------------------------------------------------------
    "tomas/m0001": L("none", note="Tomas says his daughter set up the app for him."),
    "tomas/m0007": answer("His job: mechanic at the bus depot for 19 years."),
    "tomas/m0013": answer("Lucia's age and the custody arrangement."),
    "tomas/m0015": answer("What he and Lucia do together; her career plans."),
    "tomas/m0029": answer("He takes the metformin with dinner, but dinner was a kebab."),
    "tomas/m0033": answer("When the diabetes food course is: two Saturdays in October."),
    "tomas/m0039": answer(
        "Vespa parts: the Italian ones are dear; he hunts the side panel online.", "m0037"
    ),
    "tomas/m0041": answer(
        "The Vespa's original colour, the same as his dad's.",
        reply="That's lovely, so in a way you're bringing back your dad's scooter.",
    ),
    "tomas/m0043": answer("He grew up in Spain until 10; his brother lives in Valencia."),
    "tomas/m0049": L(
        "back-reference",
        ("m0031",),
        "He finally cooked the brown rice that sat in the cupboard.",
    ),
    "tomas/m0053": L(
        "continuation",
        ("m0049",),
        "Lucia, over for dinner, has a part in the school play: the Tin Man.",
        need=(),
    ),
    "tomas/m0069": answer("The application deadline is the end of the month."),
    "tomas/m0071": answer("He will not decide tonight."),
    "tomas/m0079": answer(
        "How he feels after visiting his mother.",
        reply="Going every week, whether or not she knows you, is a real act of love. Do you "
        "have anyone to talk with about it?",
    ),
    "tomas/m0089": answer("Who will be on the interview panel."),
    "tomas/m0095": L(
        "back-reference",
        ("m0039",),
        "He found the Vespa side panel he searched eBay for every night.",
    ),
    "tomas/m0099": L(
        "continuation",
        ("m0097",),
        "His happy dance about the panel; Moose left.",
        need=(),
        reply="Moose doesn't appreciate dance. You earned the celebration.",
    ),
    "tomas/m0101": L(
        "answer",
        ("@p", "m0087"),
        "He got the supervisor interview: Thursday, 10am.",
        need=("@p",),
    ),
    "tomas/m0103": answer("He agrees to practise interview questions."),
    "tomas/m0109": answer("Why he wants the supervisor role."),
    "tomas/m0111": answer("He thinks the companion is being nice."),
    "tomas/m0117": L(
        "back-reference",
        ("m0101",),
        "The supervisor interview is over.",
        need=(),
    ),
    "tomas/m0121": answer("He hears in two weeks; three candidates."),
    "tomas/m0125": answer(
        "The Vespa looks like a scooter again; paint is next.",
        "m0123",
        reply="A professional spray sounds worth it. It's really coming together.",
    ),
    "tomas/m0127": L(
        "update",
        ("m0033",),
        "The food course he mentioned starts this Saturday.",
        need=(),
    ),
    "tomas/m0129": answer(
        "The food course feels like school.",
        reply="I think it's more about learning what's in food than testing you.",
    ),
    "tomas/m0131": answer(
        "He laughs about needing brown rice ideas.",
        supported=False,
        why="The reply congratulates him on an interview today; the recorded message is about "
        "the food course and brown rice only.",
    ),
    "tomas/m0139": L(
        "back-reference",
        ("m0075",),
        "His mother knew him today, unlike the visit when she took him for his father.",
    ),
    "tomas/m0143": L(
        "continuation",
        ("m0139", "m0141"),
        "He cried after the visit.",
        need=(),
    ),
    "tomas/m0147": L(
        "back-reference",
        ("m0121",),
        "He did not get the supervisor job he was waiting to hear about.",
    ),
    "tomas/m0151": L(
        "answer",
        ("@p", "m0085"),
        "He feels stupid for telling everyone he was trying.",
        need=("m0085",),
    ),
    "tomas/m0153": answer("A reluctant yes."),
    "tomas/m0163": L(
        "answer",
        ("@p", "m0015"),
        "Lucia wants a camera for her videos.",
        need=("@p",),
    ),
    "tomas/m0165": L(
        "continuation",
        ("m0015", "@p"),
        "Lucia has dropped the vet plan for the videos.",
        need=("m0015",),
        reply="Plans change by the month at 13.",
    ),
    "tomas/m0171": L(
        "continuation",
        ("m0169", "@p"),
        "He is worried about Moose, the cat in the videos.",
    ),
    "tomas/m0173": answer("Moose eats and sleeps as usual but looks thinner.", "m0171"),
    "tomas/m0175": L("none", note="Andrés is visiting at Christmas."),
    "tomas/m0179": answer(
        "Andrés comes alone: the divorced brothers.",
        reply="The divorced brothers' Christmas. That sounds like a good one.",
    ),
    "tomas/m0181": answer(
        "Andrés will still win at chess.",
        supported=False,
        why="The reply asks whether he is still on the eggs; no recorded message mentions eggs.",
    ),
    "tomas/m0185": L(
        "back-reference",
        ("m0171",),
        "The vet visit he booked for Moose: diabetes.",
        need=(),
    ),
    "tomas/m0187": L(
        "back-reference",
        ("m0017", "@p"),
        "He laughed because he was diagnosed with diabetes himself this autumn.",
    ),
    "tomas/m0195": L(
        "answer",
        ("@p", "m0165"),
        "Lucia wants to learn the injections as vet training.",
        need=("m0165",),
    ),
    "tomas/m0197": L(
        "back-reference",
        ("m0053", "m0059"),
        "Lucia rehearsed in the Tin Man costume Carla made.",
        need=("m0059",),
    ),
    "tomas/m0199": answer("He is the nervous one.", reply="That sounds like a dad."),
    "tomas/m0209": answer(
        "He has to ask Darren, now his boss, for the shift back.",
        supported=False,
        why="The reply says he worried about managing friends in the role; the recorded "
        "message does not show it.",
    ),
    "tomas/m0211": L(
        "back-reference",
        ("m0057", "@p"),
        "The day shift he asked for in September was approved by Gary, before Darren.",
        need=("@p",),
    ),
    "tomas/m0213": answer("He will talk to Darren and not miss the play.", reply="Good plan."),
    "tomas/m0217": L(
        "back-reference",
        ("m0021", "m0137", "m0183"),
        "The nurse check three months after the diagnosis is next week.",
        need=("m0021",),
    ),
    "tomas/m0219": L(
        "answer",
        ("@p", "m0119", "m0121"),
        "He is nervous, as when he waited for the interview result.",
        need=("@p",),
    ),
    "tomas/m0221": L(
        "back-reference",
        ("m0057", "m0207", "m0213"),
        "He went to Lucia's play despite the rota change.",
        need=("m0213",),
    ),
    "tomas/m0223": L(
        "answer",
        ("@p", "m0211"),
        "Darren fixed the shift: he had not seen Gary's note.",
        need=("@p",),
        reply="That's a good sign about Darren.",
    ),
    "tomas/m0227": answer("He cried at the song about the heart."),
    "tomas/m0231": L("continuation", ("@p",), "He wants to ride the Vespa to his mum's."),
    "tomas/m0239": L(
        "answer",
        ("@p", "m0045"),
        "He will tell Andrés over their nightly online chess.",
        need=("@p",),
    ),
    "tomas/m0243": L(
        "answer",
        ("@p", "m0137"),
        "A day off with porridge from the big oats.",
        need=("@p",),
        reply="A proper slow breakfast on a day off. Enjoy it.",
    ),
    "tomas/m0247": L(
        "correction",
        ("m0043",),
        "He corrects his age at the move to Bristol: 11, not 10.",
    ),
    "tomas/m0249": answer("What he remembers of the move: the rain."),
    "tomas/m0251": L(
        "back-reference",
        ("m0119", "m0149"),
        "Darren asks for spreadsheet help from him, who lost the job on the budget part.",
    ),
    "tomas/m0253": L(
        "correction",
        ("m0251",),
        "He corrects what he just said: the overtime sheet, not the rota.",
    ),
    "tomas/m0255": L(
        "back-reference",
        ("m0223",),
        "Darren is an ok boss, as he guessed after the play.",
        need=(),
    ),
    "tomas/m0261": L(
        "update",
        ("m0233",),
        "The Vespa's MOT, planned for 'next week', is on Monday.",
        need=(),
    ),
    "tomas/m0263": L(
        "back-reference",
        ("m0261",),
        "The Vespa passed the MOT he mentioned.",
        need=(),
    ),
    "tomas/m0265": L(
        "back-reference",
        ("m0231",),
        "He rode the Vespa to his mum's, as he had wanted to.",
    ),
    "tomas/m0267": L(
        "continuation",
        ("m0005",),
        "Moose sleeps on his jacket, as ever.",
        need=(),
    ),
    "tomas/m0269": L(
        "absent",
        note="Lucia's Tin Man video: no video of the play was ever mentioned in the record.",
    ),
    "tomas/m0271": L(
        "continuation",
        ("m0175", "m0177", "m0179"),
        "Andrés arrives soon; a new mattress for the sofa bed he will sleep on.",
        need=("m0177",),
    ),
    "tomas/m0273": L("none", note="Goodnight."),
}

OPENER = L("none", note="A session opener that points at nothing earlier.")
EVERYDAY: dict[str, L] = {
    "none": L("none", note="Everyday talk, complete on its own."),
    "answer": answer("Reacts to the companion's last turn."),
}
"""Our reading of the everyday sessions (s15 on): `everyday_labels.json` says, per person
message, whether it is complete on its own or answers the turn before."""


def everyday_labels() -> dict[str, L]:
    raw = json.loads((Path(__file__).with_name("everyday_labels.json")).read_text("utf-8"))
    return {f"{sid}/{mid}": EVERYDAY[kind] for sid, got in raw.items() for mid, kind in got.items()}


def _claims(subject: str, edits: Callable[[dict[str, Any]], dict[str, Any]]) -> list[Any]:
    """The hand-written claims of the previous sample (kept in `sample_profile.json`)."""
    raw = json.loads((Path(__file__).with_name("sample_profile.json")).read_text("utf-8"))
    return [edits(c) for c in raw[subject]]


PROFILE_EXTRA: dict[str, list[dict[str, Any]]] = {
    # proposed, then not kept: one the judge finds unsupported, one with no real evidence
    "maya": [
        {
            "field": "hobbies",
            "statement": "Runs half marathons with Leah.",
            "confidence": 0.4,
            "evidence_ids": ["m0051"],
        },
        {"field": "home", "statement": "Lives in a flat.", "evidence_ids": ["m9999"]},
    ],
    "tomas": [
        {
            "field": "hobbies",
            "statement": "Plays chess in a local club.",
            "confidence": 0.4,
            "evidence_ids": ["m0045"],
        },
        {"field": "home", "statement": "Has a garage.", "evidence_ids": ["x1"]},
    ],
}
UNSUPPORTED = {"Runs half marathons with Leah.", "Plays chess in a local club."}

HYPOTHESIS_NAMES = {
    ("maya", "decision making"): "decides by a trusted friend's nudge",
    ("maya", "priorities"): "Biscuit shapes her plans",
    ("tomas", "meaning"): "the Vespa carries his father",
    ("tomas", "disclosure"): "tells hard news by indirect channels",
}


@dataclass
class SampleModel:
    """The loopback server's reply function: answers each builder stage from `LABELS`."""

    subjects: dict[str, Subject]
    persons: dict[str, str]
    """Person name -> subject id."""
    claims: dict[str, list[dict[str, Any]]]
    persona: dict[str, dict[str, Any]]
    calls: list[str] = field(default_factory=list)
    everyday: dict[str, L] = field(default_factory=everyday_labels)

    def subject_of(self, user: str) -> str:
        for person, sid in self.persons.items():
            if f"{person}'s new message" in user or f"between {person} and" in user:
                return sid
            if f"claim about {person}" in user or f"to {person}'s new message" in user:
                return sid
        raise AssertionError(f"no subject in {user[:200]!r}")

    def label(self, sid: str, probe: str) -> L:
        got = LABELS.get(f"{sid}/{probe}") or self.everyday.get(f"{sid}/{probe}")
        if got is not None:
            return got
        s = self.subjects[sid]
        p = s.position_of()[probe]
        earlier = {m.session for m in s.messages[:p] if m.role == "user"}
        if p == 0 or s.messages[p].session not in earlier:
            return OPENER
        raise KeyError(f"{sid}/{probe} has no label; add one to LABELS")

    def ids(self, sid: str, probe: str, refs: tuple[str, ...]) -> list[str]:
        p = self.subjects[sid].position_of()[probe]
        prev = self.subjects[sid].messages[p - 1].id
        return [prev if r == "@p" else r for r in refs]

    def reply_of(self, sid: str, probe: str, lab: L) -> str:
        if lab.reply is not None:
            return lab.reply
        s = self.subjects[sid]
        p = s.position_of()[probe]
        nxt = s.messages[p + 1] if p + 1 < len(s.messages) else None
        if nxt is None or nxt.role != "assistant":
            raise KeyError(f"{sid}/{probe}: no recorded next turn; write its reply")
        return nxt.text

    def __call__(self, body: dict[str, Any]) -> str:
        stage = body["response_format"]["json_schema"]["name"]
        user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        sid = self.subject_of(user)
        probe = _probe(user)
        self.calls.append(f"{stage} {sid}/{probe}")
        if stage == "ProfileReply":
            shown = set(ID.findall(user))
            mine = [c for c in self.claims[sid] if set(c["evidence_ids"]) & shown]
            mine += [c for c in PROFILE_EXTRA[sid] if c not in mine]
            return json.dumps(
                {"reasoning": "What the person states about their life.", "claims": mine}
            )
        if stage == "MatchReply":
            bad = any(st in user for st in UNSUPPORTED)
            why = "The cited messages do not say this." if bad else "The cited messages say so."
            return json.dumps({"reasoning": why, "supported": not bad})
        if stage == "PersonaReply":
            return json.dumps(self.persona[sid])
        lab = self.label(sid, probe)
        refs = self.ids(sid, probe, lab.refs)
        out: dict[str, Any]
        if stage == "ResolveReply":
            where = f"it points at {', '.join(refs)}" if refs else "it points at nothing earlier"
            out = {
                "reasoning": f"{lab.note or 'Read as written.'} As {lab.kind}, {where}.",
                "kind": lab.kind,
                "reading": lab.note or "The message as written.",
                "referent_ids": refs,
            }
        elif stage == "VerifyReply":
            keep = refs if lab.keep is None else self.ids(sid, probe, lab.keep)
            why = lab.why if lab.keep is not None else "Each proposed message supports the reading."
            out = {"reasoning": why, "kept_ids": keep}
        elif stage == "ClassifyReply":
            need = refs if lab.need is None else self.ids(sid, probe, lab.need)
            why = (
                "A reply must draw on these to make sense."
                if need
                else "A good reply can be written from the new message alone."
            )
            out = {"reasoning": why, "needed_ids": need}
        elif stage == "ReplyReply":
            out = {
                "reasoning": "Draws on the new message and the recorded context.",
                "reply": self.reply_of(sid, probe, lab),
            }
        elif stage == "ValidateReply":
            why = lab.why if not lab.supported else "Everything the reply assumes is shown."
            out = {"reasoning": why, "supported": lab.supported}
        else:  # pragma: no cover
            raise AssertionError(stage)
        return json.dumps(out)


def sizes(data: Dataset) -> Sizes:
    """PROPORTIONAL probes, then every remaining opener and every remaining message the
    surface signal marks: counted by a dry draw with the same seed, so nothing is short."""
    picks, _ = sample_strata(data, Sizes(PROPORTIONAL, 10**6, 10**6), SEED)
    n = {s: sum(p.stratum == s for p in picks) for s in ("enriched", "abstention")}
    return Sizes(PROPORTIONAL, n["enriched"], n["abstention"])


def persona_of(sid: str) -> dict[str, Any]:
    raw = json.loads((Path(__file__).with_name("sample_profile.json")).read_text("utf-8"))
    entries = raw[f"{sid}:persona"]
    return {
        "reasoning": "How the person thinks, feels and decides, with grounds.",
        "entries": [
            {"dimension": e["dimension"], "statement": e["statement"], "grounds": e["grounds"]}
            for e in entries
            if not e.get("hypothesis")
        ],
        "hypotheses": [
            {
                "name": HYPOTHESIS_NAMES[(sid, e["dimension"])],
                "statement": e["statement"],
                "grounds": e["grounds"],
            }
            for e in entries
            if e.get("hypothesis")
        ],
    }


def fix_claim(sid: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The claims a correction in the new sessions changed."""

    def edit(c: dict[str, Any]) -> dict[str, Any]:
        if sid == "maya" and c["statement"].startswith("Owns Biscuit"):
            return {
                **c,
                "statement": "Owns Biscuit, a seven-year-old rescue greyhound retired from "
                "racing (first said six, then corrected), adopted about two years ago.",
                "evidence_ids": [*c["evidence_ids"], "m0259"],
            }
        if sid == "tomas" and c["statement"].startswith("Grew up in Spain"):
            return {
                **c,
                "statement": "Grew up in Spain until age 11 (first said 10, then corrected), "
                "then moved with his family to Bristol.",
                "evidence_ids": [*c["evidence_ids"], "m0247"],
            }
        return c

    return edit


def build_sample(out: Path) -> dict[str, Any]:
    """Run the builder on the sample's conversations with the scripted model into `out`;
    return its build.json (raises if the build fails)."""
    data = load_dataset(str(SAMPLE))
    subjects = {s.id: s for s in data.subjects}
    persons = {s.messages[0].speaker: s.id for s in data.subjects}
    model = SampleModel(
        subjects,
        persons,
        {sid: _claims(sid, fix_claim(sid)) for sid in subjects},
        {sid: persona_of(sid) for sid in subjects},
    )
    strata = sizes(data)
    config = BuildConfig(
        proportional=PROPORTIONAL,
        enriched=strata.enriched,
        abstention=strata.abstention,
        seed=SEED,
        profile_window=1000,
        profile_parts=1,
        claims_per_part=16,
        questions="keep",  # the sample's questions are authored (data/sample/README.md)
        anonymise=False,  # its people are invented
    )
    with ChatServer(reply=model) as srv:
        given = RoleSpec("openai-compatible/sample-script", base_url=srv.base_url)
        _, finished = build_realcompanion(data, out, config, model=given)
    if finished.exit_code != 0:
        raise RuntimeError(f"build failed ({finished.exit_code}): {finished.failures}")
    report: dict[str, Any] = json.loads((out / "build.json").read_text("utf-8"))
    return report


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "built"
        try:
            report = build_sample(out)
        except RuntimeError as e:
            print(e, file=sys.stderr)
            return 1
        for sid in (p.name for p in out.iterdir() if p.is_dir() and not p.name.startswith(".")):
            for name in WRITTEN:
                shutil.copyfile(out / sid / name, SAMPLE / sid / name)
    for line in report["sentences"]:
        print(line)
    print(json.dumps({k: report[k] for k in ("strata", "rules", "readings")}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
