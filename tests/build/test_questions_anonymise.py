"""`build realcompanion`'s question set and anonymisation (issue 24.6) and what stage A is
shown (issue 24.9), against the scripted loopback model: derived questions keep only those
whose evidence exists before the point they are asked and that the check supports; no
original identifier survives anywhere in the output folder but the run record's private
identify file; the anonymised release loads and plans in every RealCompanion track; a rerun
sends nothing; an unusable reply in the new stages is a failed call asked again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dialogbench.build import BuildConfig, build_realcompanion
from dialogbench.build.anonymise import contacts, make_surrogates
from dialogbench.build.realcompanion import shown_ids
from dialogbench.data.model import (
    ChatItem,
    Dataset,
    Message,
    PersonaEntry,
    ProfileClaim,
    Question,
    Subject,
)
from dialogbench.data.registry import load_dataset
from dialogbench.runner import RoleSpec
from dialogbench.testing import ChatServer
from tests_support_unusable import build_twice

from .scripted import Script, Scripted
from .test_realcompanion import context_of, designed, sample_script

SMALL = BuildConfig(proportional=8, enriched=4, abstention=3, profile_window=60)
"""The defaults: questions derived, the release anonymised."""


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))


# -- the identifiers of a fixture whose names we know ---------------------------------------

PERSON = "Zephyrine"
NAMES = {
    "person": ["Zephyrine", "Bartholomew Quist", "Zoë Marchetti"],
    "place": ["Kerlouan", "Plœmeur"],
}
CONTACTS = ["zephy.q@mailbox.test", "+44 7700 900123", "https://zeph-blog.test/post/7", "@zephyq"]
ORIGINALS = [*NAMES["person"], *NAMES["place"], *CONTACTS, "Bartholomew", "Quist"]
"""Every original the output may not hold (the parts of a full name too)."""

LINES = [
    "hi, I'm Zephyrine. I moved to Kerlouan last spring",
    "my friend Bartholomew Quist says hi; Bartholomew is the one with the boat",
    "zoë marchetti from work wants my number: +44 7700 900123, ha",
    "I post about the coast at https://zeph-blog.test/post/7 and as @zephyq",
    "email me at zephy.q@mailbox.test if the app loses my notes",
    "we drove to Plœmeur on Sunday. ZEPHYRINE, my mum yelled, slow down",
    "Zoë Marchetti and Bartholomew came too",
]


def named() -> Subject:
    """60 messages in three sessions; the person, Zephyrine, speaks at even positions and
    names every identifier above; the source's profile, persona, questions and a chat item
    name them too."""
    msgs = [
        Message(
            id=f"z{i}",
            position=i,
            speaker=PERSON if i % 2 == 0 else "companion",
            role="user" if i % 2 == 0 else "assistant",
            text=LINES[(i // 2) % len(LINES)] if i % 2 == 0 else f"tell me more about topic{i}",
            session=f"s{i // 20 + 1}",
        )
        for i in range(60)
    ]
    return Subject(
        id="p01",
        messages=msgs,
        speakers=[PERSON],
        profile=[
            ProfileClaim(field="home", statement="Zephyrine lives in Kerlouan", evidence_ids=["z0"])
        ],
        persona=[
            PersonaEntry(dimension="values", statement="Loyal to Bartholomew", grounds=["z2"])
        ],
        questions=[
            Question(
                id="q1",
                category="relationship",
                text="Who is Bartholomew Quist to Zephyrine?",
                answer="Her friend with the boat (email zephy.q@mailbox.test).",
                evidence_ids=["z2"],
            )
        ],
        chat_items=[
            ChatItem(probe_id="z12", reference_ids=["z2"], reference_reply="Say hi to Bartholomew!")
        ],
    )


def named_script() -> Scripted:
    return Scripted(
        claims=[{"field": "home", "statement": "lives by the coast", "evidence_ids": ["z0"]}],
        questions=[
            {
                "category": "relationship",
                "question": "Who has the boat?",
                "answer": "The friend in z2",
                "evidence_ids": ["z2"],
                "answerable": True,
                "asked_after_id": "z3",
            }
        ],
        identifiers=[{"kind": k, "text": t} for k, ts in NAMES.items() for t in ts],
        default=Script("continuation", ["@previous"], reply="That sounds lovely, tell me more."),
    )


def _holders(folder: Path, text: str) -> list[str]:
    """The files under `folder` whose bytes hold `text` in any letter case (plain, or
    JSON-escaped)."""
    forms = {text.lower().encode(), json.dumps(text.lower())[1:-1].encode()}
    return [
        str(p.relative_to(folder))
        for p in sorted(folder.rglob("*"))
        if p.is_file() and any(f in p.read_bytes().lower() for f in forms)
    ]


@pytest.mark.parametrize("mode", ["derive", "keep"])
def test_no_original_identifier_survives_in_the_output_folder(tmp_path: Path, mode: str) -> None:
    """Every file (plain and JSON-escaped, any case) but the run record's private identify
    file is free of every original; the source's own records are replaced when kept; no
    call after the identify stage is shown an original."""
    data = Dataset(name="private-logs", subjects=[named()], sha256="0" * 64, source="logs")
    config = BuildConfig(proportional=6, enriched=2, abstention=2, profile_window=30)
    if mode == "keep":
        config = BuildConfig(
            proportional=6, enriched=2, abstention=2, profile=False, questions="keep"
        )
    out = tmp_path / "built"
    with ChatServer(reply=named_script()) as srv:
        spec = RoleSpec("openai-compatible/scripted", base_url=srv.base_url)
        result, finished = build_realcompanion(data, out, config, spec)
        assert finished.exit_code == 0, finished.failures
        n = srv.request_count
        _, again = build_realcompanion(data, out, config, spec)
        assert srv.request_count == n and again.exit_code == 0  # a rerun sends nothing
        later = [
            json.dumps(b["messages"]).lower()
            for b in srv.requests
            if b["response_format"]["json_schema"]["name"] != "IdentifyReply"
        ]
    assert later and not [o for o in ORIGINALS for text in later if o.lower() in text]
    assert not [o for o in ORIGINALS for text in later if json.dumps(o.lower())[1:-1] in text]
    private = ".build/parts/identify.jsonl"
    for original in ORIGINALS:
        assert set(_holders(out, original)) <= {private}, original
    assert _holders(out, "Bartholomew Quist") == [private]
    assert (out / private).stat().st_mode & 0o077 == 0  # readable by its owner only
    (built,) = result.dataset.subjects
    assert built.id == "p01" and built.speakers != [PERSON]
    # consistent: one surrogate for every mention of an original, across every record
    friend = next(m.text for m in built.messages if m.id == "z2").split()[2:4]
    assert all(" ".join(friend) in m.text for m in built.messages if m.id in ("z2", "z16"))
    report = json.loads((out / "build.json").read_text())
    anon = report["anonymisation"]
    assert anon["identifiers"] == {
        "person": 7,  # Zephyrine, Bartholomew Quist, Zoë Marchetti and each of their 4 words
        "place": 2,
        "email": 1,
        "url": 1,
        "phone": 1,
        "handle": 1,
    }
    assert anon["replaced"]["person"] > 30 and anon["subjects_left_out"] == 0
    loaded = load_dataset(str(out))
    if mode == "keep":
        (q,) = loaded.subjects[0].questions
        assert "contact1@example.org" in str(q.answer) and "Quist" not in q.text
        assert "Kerlouan" not in loaded.subjects[0].profile[0].statement
    else:
        assert [q.text for q in loaded.subjects[0].questions] == ["Who has the boat?"]


def test_surrogates_are_consistent_seeded_and_keep_the_case() -> None:
    subject = named()
    found = [(k, t) for k, ts in NAMES.items() for t in ts]
    a, b = make_surrogates(subject, found, 1), make_surrogates(subject, found, 1)
    assert a.mapping == b.mapping  # deterministic
    assert a.mapping != make_surrogates(subject, found, 2).mapping  # seeded
    nora = a.mapping["Zephyrine"][1]
    assert a.text("ZEPHYRINE and zephyrine, Zephyrine's") == (
        f"{nora.upper()} and {nora.lower()}, {nora}'s"
    )
    assert "Zephyrines" in a.text("Zephyrines")  # whole words only
    assert sorted(k for k, _ in contacts(LINES[2] + " " + LINES[3] + " " + LINES[4])) == [
        "email",
        "handle",
        "phone",
        "url",
    ]
    assert contacts("on 2024-03-04 it cost 12.50") == []  # a date or a price is no phone


# -- the question set -------------------------------------------------------------------------


def questions_script() -> Scripted:
    s = sample_script()
    s.questions = [
        {
            "category": "pets",
            "question": "What is the dog called?",
            "answer": "Biscuit",
            "evidence_ids": ["m0011"],
            "asked_after_id": "m0020",
        },
        {  # evidence that is no message: dropped in code
            "category": "single-hop",
            "question": "What colour is the car?",
            "answer": "red",
            "evidence_ids": ["m0011", "x9"],
        },
        {  # evidence after the point it is asked: dropped in code
            "category": "temporal",
            "question": "When did she start?",
            "answer": "in March",
            "evidence_ids": ["m0030"],
            "asked_after_id": "m0020",
        },
        {  # the check finds it unsupported: dropped
            "category": "work",
            "question": "Where does she work nights?",
            "answer": "a bakery",
            "evidence_ids": ["m0005"],
        },
        {  # unanswerable: kept without evidence (once, though every part proposes it)
            "category": "adversarial",
            "question": "What is the name of her brother's parrot?",
            "answer": "The conversation never says.",
            "evidence_ids": [],
            "answerable": False,
        },
    ]
    s.unsupported_questions = {"work nights"}
    s.identifiers = [
        {"kind": "person", "text": "Leah"},
        {"kind": "person", "text": "Biscuit"},
    ]
    return s


def test_sample_build_derives_questions_and_an_anonymised_release_every_track_plans(
    tmp_path: Path,
) -> None:
    from dialogbench.tracks.realcompanion.chat import CHAT, ChatConfig
    from dialogbench.tracks.realcompanion.coverage import COVERAGE, CoverageConfig
    from dialogbench.tracks.realcompanion.detection import DETECTION, DetectionConfig
    from dialogbench.tracks.realcompanion.privacy import PRIVACY, PrivacyConfig
    from dialogbench.tracks.realcompanion.questions import QUESTIONS, QuestionsConfig
    from dialogbench.tracks.realcompanion.reconstruction import (
        RECONSTRUCTION,
        ReconstructionConfig,
    )
    from dialogbench.tracks.realcompanion.retrieval import RETRIEVAL, RetrievalConfig

    out = tmp_path / "built"
    data = load_dataset("sample")
    with ChatServer(reply=questions_script()) as srv:
        spec = RoleSpec("openai-compatible/scripted", base_url=srv.base_url)
        _, finished = build_realcompanion(data, out, SMALL, spec)
        assert finished.exit_code == 0, finished.failures
        n = srv.request_count
        _, again = build_realcompanion(data, out, SMALL, spec)
        assert srv.request_count == n and again.solved_now == 0
    built = load_dataset(str(out))
    assert len(built.subjects) == 2
    maya = built.subjects[0]
    assert [
        (q.id, q.category, q.answerable, q.evidence_ids, q.after_id) for q in maya.questions
    ] == [
        ("q001", "pets", True, ["m0011"], "m0020"),
        ("q002", "adversarial", False, [], maya.questions[1].after_id),
    ]
    assert maya.questions[0].answer != "Biscuit"  # Biscuit (the dog) was found: a surrogate
    text = (out / maya.id / "conversation.jsonl").read_text()
    assert "Maya" not in text and "Leah" not in text and "Biscuit" not in text
    assert maya.id != "maya"
    report = json.loads((out / "build.json").read_text())
    q = report["questions"]  # both subjects' messages are numbered m0001, ...: twice each
    assert q["dropped"]["evidence not a message"] == 2
    assert q["dropped"]["evidence after the point it is asked"] == 2
    assert q["dropped"]["not supported by its evidence"] == 2
    assert q["kept"] == 4 and q["unanswerable"] == 2
    assert q["categories"] == {"adversarial": 2, "pets": 2}
    assert report["anonymisation"]["identifiers"]["person"] >= 3
    for track, config in [
        (RETRIEVAL, RetrievalConfig()),
        (DETECTION, DetectionConfig()),
        (CHAT, ChatConfig()),
        (QUESTIONS, QuestionsConfig()),
        (COVERAGE, CoverageConfig()),
        (RECONSTRUCTION, ReconstructionConfig()),
        (PRIVACY, PrivacyConfig()),
    ]:
        plan = track.plan(built, config)
        assert plan.units, track.name
    rows = [json.loads(line) for line in (out / ".build" / "items.jsonl").read_text().splitlines()]
    traced = [t for r in rows if r["kind"] == "questions" for t in r["traces"]]
    assert [[s["stage"] for s in t["trace"]] for t in traced] == [["propose", "check"]] * 4


@pytest.mark.parametrize("schema", ["IdentifyReply", "QuestionsReply", "QuestionCheckReply"])
def test_an_unusable_reply_in_the_new_stages_is_a_failed_call_asked_again(
    tmp_path: Path, schema: str
) -> None:
    """Each new stage's first answers are unusable: exit 3, and the rerun asks exactly those
    again (a question check's asking depends on the proposals, so each is spoiled alone)."""
    out = tmp_path / "built"
    data = load_dataset("sample")
    config = BuildConfig(
        proportional=4, enriched=2, abstention=2, profile=False, identify_chunk=400
    )
    got = build_twice(questions_script(), schema, data, out, config)
    assert got.exit_codes == (3, 0)
    assert got.failed and got.asked_again == got.failed
    kinds = {k for by_kind in got.failed_calls_by_kind.values() for k in by_kind}
    assert kinds == {"unparseable"}
    built = load_dataset(str(out))
    assert sum(len(s.chat_items) for s in built.subjects) == 8
    assert sum(len(s.questions) for s in built.subjects) >= 2


# -- issue 24.9: what stage A is shown --------------------------------------------------------


def test_build_counts_the_references_stage_a_was_not_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """designed(): 100 messages "message i about topic(i % 7)". Stage A, for the probe m90
    with show_all 10 and candidates 5, is shown the recent thread m82..m89 and the five
    earlier messages (m0..m81) BM25 ranks best: those sharing topic6 (90 % 7 == 6: m6, m13,
    ..., m76); m6 first, the shortest (a one-digit number is no token), then of the rest,
    all scoring alike, the latest: m55, m62, m69, m76. The source's
    ground truth gives m90 the references m62 (shown), m85 (recent) and m3 (neither): one
    of three lies outside what stage A was shown. Stage A proposes m62 and m3 (an id it was
    not shown, but a message before the probe): B keeps both, so one verified referent
    lies outside too."""
    from dialogbench.build import realcompanion as rc
    from dialogbench.build.sampling import Pick

    subject = designed()
    config = BuildConfig(
        candidates=5,
        show_all=10,
        proportional=0,
        enriched=0,
        abstention=0,
        profile=False,
        questions="keep",
    )
    ctx = context_of(subject)
    recent = {f"m{i}" for i in range(82, 90)}
    assert shown_ids(ctx, subject, 90, config) == recent | {f"m{i}" for i in (6, 55, 62, 69, 76)}
    item = ChatItem(probe_id="m90", reference_ids=["m62", "m85", "m3"])
    source = subject.model_copy(update={"chat_items": [item]})
    data = Dataset(name="designed", subjects=[source], sha256="0" * 64, source="designed")
    picks = [Pick("ana", 90, "proportional", "none", 0.0, False)]
    monkeypatch.setattr(rc, "sample_strata", lambda *a, **k: (picks, []))
    script = Scripted({"m90": Script("back-reference", ["m62", "m3"])})
    with ChatServer(reply=script) as srv:
        spec = RoleSpec("openai-compatible/scripted", base_url=srv.base_url)
        result, finished = build_realcompanion(data, tmp_path / "built", config, spec)
    assert finished.exit_code == 0, finished.failures
    shown = result.report["shown"]
    assert shown["source_references"] == 3
    assert shown["source_references_beyond_recent"] == 2  # m62, m3
    assert shown["source_references_outside_shown"] == 1  # m3
    assert shown["verified_outside_shown"] == 1  # m3 again
    assert any("not shown 1 of the 3 references" in s for s in result.report["sentences"])
