"""A scripted builder model for the loopback server: it reads which stage a request is (the
schema's name) and which probe it is about (the `[id]` under the new-message heading), and
answers from a per-probe `Script`."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

ID = re.compile(r"^\[([^\]]+)\]", re.MULTILINE)


@dataclass
class Script:
    """What the scripted model answers for one probe (ids are message ids)."""

    kind: str = "none"
    referents: list[str] = field(default_factory=list)
    keep: list[str] | None = None
    """Stage B keeps these (None: every proposed one)."""
    needed: list[str] | None = None
    """Stage C: the ids a reply needs (None: every verified one)."""
    supported: bool = True
    reply: str = "That sounds like a lot; tell me more?"
    reread: list[str] = field(default_factory=list)
    """The re-reading keeps these ids (`["@first"]`: the first message shown)."""


@dataclass
class Scripted:
    """The reply function: `ChatServer(reply=Scripted({...}))`."""

    scripts: dict[str, Script] = field(default_factory=dict)
    claims: list[dict[str, Any]] = field(default_factory=list)
    """Profile claims every part proposes."""
    unsupported_claims: set[str] = field(default_factory=set)
    """Statements the final pass finds unsupported."""
    persona: dict[str, Any] = field(
        default_factory=lambda: {"reasoning": "r", "entries": [], "hypotheses": []}
    )
    questions: list[dict[str, Any]] = field(default_factory=list)
    """Questions every part proposes (those citing a message the part shows, and those
    citing none)."""
    unsupported_questions: set[str] = field(default_factory=set)
    """Questions the check finds unsupported."""
    identifiers: list[dict[str, str]] = field(default_factory=list)
    """Identifiers ({kind, text}) the identify pass finds where a chunk holds them."""
    default: Script = field(default_factory=Script)
    """The script of a probe not in `scripts`; referents `["@previous"]` name the message
    shown just before the probe, `["@first"]` the first message shown."""
    calls: list[tuple[str, str]] = field(default_factory=list)
    """(stage, probe id) of every request."""
    shown: list[tuple[str, str, list[str]]] = field(default_factory=list)
    """(stage, probe id, the message ids the request shows) of every request."""

    def __call__(self, body: dict[str, Any]) -> str:
        stage = body["response_format"]["json_schema"]["name"]
        user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        probe = _probe(user)
        self.calls.append((stage, probe))
        s = self.scripts.get(probe, self.default)
        shown = ID.findall(user)
        self.shown.append((stage, probe, shown))
        if stage == "ResolveReply":
            before = [i for i in shown if i != probe]
            marks = {"@previous": before[-1:], "@first": before[:1]}
            refs = [x for r in s.referents for x in marks.get(r, [r])]
            out: dict[str, Any] = {
                "reasoning": f"scripted reading of {probe}",
                "kind": s.kind,
                "reading": f"the message {probe}",
                "referent_ids": refs,
            }
        elif stage == "RereadReply":
            marks = {"@first": shown[:1]}
            kept = [x for r in s.reread for x in marks.get(r, [r])]
            out = {"reasoning": f"scripted re-reading of {probe}", "kept_ids": kept}
        elif stage == "VerifyReply":
            keep = shown if s.keep is None else s.keep
            out = {"reasoning": "scripted check", "kept_ids": [i for i in keep if i != probe]}
        elif stage == "ClassifyReply":
            need = [i for i in shown if i != probe] if s.needed is None else s.needed
            out = {"reasoning": "scripted need", "needed_ids": need}
        elif stage == "ReplyReply":
            out = {"reasoning": "scripted reply", "reply": s.reply}
        elif stage == "ValidateReply":
            out = {"reasoning": "scripted validation", "supported": s.supported}
        elif stage == "ProfileReply":
            ids = set(shown)
            claims = [
                c for c in self.claims if not c["evidence_ids"] or set(c["evidence_ids"]) & ids
            ]
            out = {"reasoning": "scripted profile", "claims": claims}
        elif stage == "MatchReply":
            bad = any(st in user for st in self.unsupported_claims)
            out = {"reasoning": "scripted match", "supported": not bad}
        elif stage == "PersonaReply":
            out = self.persona
        elif stage == "QuestionsReply":
            ids = set(shown)
            qs = [
                q
                for q in self.questions
                if not q.get("evidence_ids") or set(q["evidence_ids"]) & ids
            ]
            out = {"reasoning": "scripted questions", "questions": qs}
        elif stage == "QuestionCheckReply":
            bad = any(q in user for q in self.unsupported_questions)
            out = {"reasoning": "scripted question check", "supported": not bad}
        elif stage == "IdentifyReply":
            found = [x for x in self.identifiers if x["text"] in user]
            out = {"reasoning": "scripted identify", "identifiers": found}
        else:  # pragma: no cover
            raise AssertionError(stage)
        return json.dumps(out)


def _probe(user: str) -> str:
    """The id under the "new message" heading ("" for the profile and persona passes)."""
    _, sep, after = user.partition("new message:\n")
    if not sep:
        return ""
    got = ID.search(after)
    return got.group(1) if got else ""
