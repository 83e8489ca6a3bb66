"""Property-based fuzzing of every loader, the importer (also with the options
`data.sniff` proposes, as `data import --dry-run` does) and `data validate`.

Each `Target` is a small real-shaped seed (a trimmed LoCoMo document, a MemoryBank bank,
the LongMemEval fixture, one subject of the built-in sample release, the importer's
fixtures) and the function that reads it. `mutated` is a hypothesis strategy that writes
a copy of the seed with one to three mutations: a value replaced by null / true / [] / {} /
NaN / 1e400 / -1e400 / a huge string or id / a lone surrogate / deep nesting / a huge
integer, a key or item deleted, a key written twice, an item or an id duplicated, a
container changed into another, the bytes truncated or broken with invalid UTF-8, or (in
a release) a file deleted or a subject folder without its conversation.

`outcome` runs a target on such a copy. The invariant: the read either gives data or
raises a `DataError` that names a file under the copy, with a message of bounded length;
anything else (a traceback) propagates. Used by tests/data/test_fuzz.py (a few hundred
examples) and benchmarks/fuzz_loaders.py (as many as asked).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from hypothesis import strategies as st

from dialogbench.data.errors import DataError
from dialogbench.data.generic import ImportConfig, import_chat_export
from dialogbench.data.locomo import load_locomo
from dialogbench.data.longmemeval import load_longmemeval
from dialogbench.data.memorybank import load_memorybank
from dialogbench.data.model import Dataset
from dialogbench.data.registry import SAMPLE_DIR
from dialogbench.data.release import load_release
from dialogbench.data.sniff import sniff

Key = str | int
Outcome = Literal["accepted", "error"]
MAX_MESSAGE = 2000
"""The longest error message allowed: values are quoted cut short, never whole."""


@dataclass(frozen=True)
class Raw:
    """JSON text written as it is (NaN, 1e400, deep nesting: what json.dumps cannot write)."""

    text: str


@dataclass(frozen=True)
class Pairs:
    """A JSON object that may name a key twice."""

    pairs: tuple[tuple[str, Any], ...]


DEEP = 100_000
SPECIAL: tuple[Any, ...] = (
    None,
    True,
    False,
    [],
    {},
    0,
    -1,
    1.5,
    "",
    "x",
    Raw("NaN"),
    Raw("Infinity"),
    Raw("-Infinity"),
    Raw("1e400"),
    Raw("-1e400"),
    Raw("1" + "0" * 5000),
    "\ud800",
    "ok \udfff",
    "i" * 300,
    "h" * 2_000_000,
    Raw("[" * DEEP + "]" * DEEP),
    Raw('{"a": ' * 900 + "1" + "}" * 900),
    Raw("[" * 800 + '"x"' + "]" * 800),
)
"""Values a mutation puts in place of another."""
BAD_BYTES = (b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80abc", b"\x00")


def dump(value: Any, indent: bool = False) -> str:
    """`value` as JSON text, writing `Raw` verbatim and `Pairs` with their repeats."""
    pad = "\n" if indent else ""
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, Pairs | dict):
        pairs = value.pairs if isinstance(value, Pairs) else tuple(value.items())
        inner = f",{pad}".join(f"{_string(str(k))}: {dump(v, indent)}" for k, v in pairs)
        return "{" + pad + inner + pad + "}"
    if isinstance(value, list):
        return "[" + pad + f",{pad}".join(dump(v, indent) for v in value) + pad + "]"
    if isinstance(value, str):
        return _string(value)
    return json.dumps(value)


def _string(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(text)  # escapes the surrogate as \udXXX
    return json.dumps(text, ensure_ascii=False)


@dataclass(frozen=True)
class Target:
    """A seed (file name -> parsed JSON; a .jsonl file is its list of objects) and the
    function that reads a copy of it from a folder."""

    name: str
    files: dict[str, Any]
    read: Callable[[Path], Any]
    release: bool = False


def write(root: Path, files: dict[str, bytes]) -> None:
    """Write the files of a mutated copy under `root`."""
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def outcome(target: Target, root: Path) -> Outcome:
    """Read the copy under `root`: 'accepted' or 'error' (a clean `DataError`); an
    `AssertionError` for a `DataError` that breaks the rules, and any other exception as
    it is."""
    try:
        result = target.read(root)
    except DataError as e:
        assert e.path.startswith(str(root)), f"the error names no file of the input: {e}"
        assert len(str(e)) <= MAX_MESSAGE, f"error message of {len(str(e))} characters"
        return "error"
    if isinstance(result, Dataset):
        # accepted data can be written back: no lone surrogate, no NaN
        json.dumps(result.model_dump(mode="json"), allow_nan=False).encode("utf-8")
    return "accepted"


# -- mutations -------------------------------------------------------------------------------


def _paths(doc: Any) -> list[tuple[Key, ...]]:
    """Every node of a document, as the keys leading to it (the root is ())."""
    out: list[tuple[Key, ...]] = []
    stack: list[tuple[Any, tuple[Key, ...]]] = [(doc, ())]
    while stack:
        node, path = stack.pop()
        out.append(path)
        if isinstance(node, dict):
            stack.extend((v, (*path, k)) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((v, (*path, i)) for i, v in enumerate(node))
    return sorted(out, key=lambda p: (len(p), [str(k) for k in p]))


def _get(doc: Any, path: tuple[Key, ...]) -> Any:
    for key in path:
        doc = doc[key]
    return doc


def _set(doc: Any, path: tuple[Key, ...], value: Any) -> Any:
    """`doc` with the node at `path` replaced (the new root when `path` is ())."""
    if not path:
        return value
    _get(doc, path[:-1])[path[-1]] = value
    return doc


def _retype(node: Any) -> Any:
    """`node` as another kind of container (or scalar)."""
    if isinstance(node, Raw | Pairs):
        return [node]
    if isinstance(node, dict):
        return list(node.values())
    if isinstance(node, list):
        return {str(i): v for i, v in enumerate(node)}
    if isinstance(node, str):
        return [node]
    return str(node)


TREE_OPS = ("replace", "delete", "repeat_key", "repeat_item", "copy_sibling", "retype", "wrap")
BYTE_OPS = ("truncate", "bad_bytes", "drop_byte")
FILE_OPS = ("delete_file", "orphan_folder", "empty_file")


@st.composite
def mutated(draw: st.DrawFn, target: Target) -> dict[str, bytes]:
    """A copy of `target`'s seed (file name -> bytes) with one to three mutations."""
    docs: dict[str, Any] = copy.deepcopy(target.files)
    byte_ops: list[tuple[str, str, int, bytes]] = []
    extra: dict[str, bytes] = {}
    indent = draw(st.booleans())
    ops = TREE_OPS + BYTE_OPS + (FILE_OPS if target.release else ())
    for _ in range(draw(st.integers(1, 3))):
        if not docs:
            break
        name = draw(st.sampled_from(sorted(docs)))
        op = draw(st.sampled_from(ops))
        if op in BYTE_OPS:
            byte_ops.append(
                (name, op, draw(st.integers(0, 1 << 30)), draw(st.sampled_from(BAD_BYTES)))
            )
        elif op == "delete_file":
            del docs[name]
        elif op == "empty_file":
            extra[name] = b""
        elif op == "orphan_folder":
            subject_file = draw(st.sampled_from([n for n in sorted(docs) if "/" in n]))
            docs["ghost/" + subject_file.split("/", 1)[1]] = copy.deepcopy(docs[subject_file])
        else:
            docs[name] = _tree_op(draw, op, docs[name])
    out = {**encode(docs, indent), **extra}
    for name, op, at, bad in byte_ops:
        if name not in out:
            continue
        data = out[name]
        i = at % (len(data) + 1)
        if op == "truncate":
            data = data[:i]
        elif op == "bad_bytes":
            data = data[:i] + bad + data[i:]
        else:
            data = data[:i] + data[i + 1 :]
        out[name] = data
    return out


def encode(docs: dict[str, Any], indent: bool = False) -> dict[str, bytes]:
    """File name -> bytes of parsed documents (a .jsonl file's list one object a line)."""
    out: dict[str, bytes] = {}
    for name, doc in docs.items():
        if name.endswith(".jsonl") and isinstance(doc, list):
            text = "".join(dump(line) + "\n" for line in doc)
        else:
            text = dump(doc, indent)
        out[name] = text.encode("utf-8")
    return out


def _tree_op(draw: st.DrawFn, op: str, doc: Any) -> Any:
    path = draw(st.sampled_from(_paths(doc)))
    node = _get(doc, path)
    parent = _get(doc, path[:-1]) if path else None
    if op == "replace":
        return _set(doc, path, draw(st.sampled_from(SPECIAL)))
    if op == "delete" and path and isinstance(parent, dict | list):
        del parent[path[-1]]  # type: ignore[arg-type]
        return doc
    if op == "repeat_key" and isinstance(node, dict) and node:
        key = draw(st.sampled_from(sorted(node)))
        again = draw(st.sampled_from((node[key], None, "other")))
        return _set(doc, path, Pairs((*node.items(), (key, again))))
    if op == "repeat_item" and isinstance(node, list) and node:
        i = draw(st.integers(0, len(node) - 1))
        node.insert(draw(st.integers(0, len(node))), copy.deepcopy(node[i]))
        return doc
    if op == "copy_sibling" and len(path) >= 2:
        # the same key of another item of the same list: a repeated id, most often
        holder = _get(doc, path[:-2])
        key = path[-1]
        if isinstance(holder, list):
            donors = [d for d in holder if isinstance(d, dict) and key in d]
            if donors:
                return _set(doc, path, copy.deepcopy(draw(st.sampled_from(donors))[key]))
    if op == "retype":
        return _set(doc, path, _retype(node))
    return _set(doc, path, [node] if draw(st.booleans()) else {"x": node})


# -- seeds -------------------------------------------------------------------------------------


def _locomo_seed(repairable: bool = True) -> list[dict[str, Any]]:
    """Two LoCoMo-shaped samples; `repairable` keeps an evidence id only LoCoMo's loader
    repairs (`'D2:1; D1:3'`)."""

    def turn(speaker: str, dia: str, text: str, **more: Any) -> dict[str, Any]:
        return {"speaker": speaker, "dia_id": dia, "text": text, **more}

    def sample(sid: str) -> dict[str, Any]:
        return {
            "sample_id": sid,
            "conversation": {
                "speaker_a": "Caroline",
                "speaker_b": "Melanie",
                "session_1_date_time": "1:56 pm on 8 May, 2023",
                "session_1": [
                    turn("Caroline", "D1:1", "Hey Mel! Good to see you!"),
                    turn("Melanie", "D1:2", "I went to a pottery class.", blip_caption="a bowl"),
                    turn("Caroline", "D1:3", "That sounds lovely."),
                ],
                "session_2_date_time": "1:14 pm on 25 May, 2023",
                "session_2": [
                    turn("Melanie", "D2:1", "I ran a charity race for mental health."),
                    turn("Caroline", "D2:2", "So proud of you!"),
                ],
            },
            "qa": [
                {
                    "question": "What class did Melanie take?",
                    "answer": "pottery",
                    "evidence": ["D1:2"],
                    "category": 4,
                },
                {
                    "question": "When did Melanie run the race?",
                    "answer": 2023,
                    "evidence": ["D2:1; D1:3" if repairable else "D2:1"],
                    "category": 2,
                },
                {
                    "question": "What did Caroline paint?",
                    "adversarial_answer": "a sunset",
                    "evidence": [],
                    "category": 5,
                },
            ],
            "event_summary": {"events_session_1": ["pottery"]},
        }

    return [sample("conv-1"), sample("conv-2")]


def _memorybank_seed() -> dict[str, Any]:
    def user(name: str) -> dict[str, Any]:
        return {
            "name": name,
            "summary": {},
            "personality": {},
            "overall_history": "",
            "history": {
                "2023-04-27": [
                    {"query": f"Hello, my name is {name}.", "response": "Hello! Nice to meet you."},
                    {"query": "I enjoy painting and tea.", "response": "Lovely hobbies."},
                ],
                "2023-04-28": [{"query": "I walked in the park.", "response": "Which park?"}],
            },
            "meta_information": {
                "name": name,
                "personality": "Curious, kind",
                "hobbies": "painting, and tea tasting",
                "speaking_style": "Gentle",
            },
        }

    return {"Emily": user("Emily"), "Luna": str(user("Luna"))}


def _release_seed(messages: int = 30) -> dict[str, Any]:
    """The sample's first subject, cut to its first `messages` messages and what cites them."""
    folder = sorted(p for p in SAMPLE_DIR.iterdir() if p.is_dir())[0]

    def lines(name: str) -> list[Any]:
        text = (folder / name).read_text(encoding="utf-8")
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    conversation = lines("conversation.jsonl")[:messages]
    kept = {m["id"] for m in conversation}
    chat = [c for c in lines("chat.jsonl") if {c["probe_id"], *c.get("reference_ids", [])} <= kept]
    questions = [
        q
        for q in lines("questions.jsonl")
        if set(q.get("evidence_ids", [])) <= kept and q.get("after_id", next(iter(kept))) in kept
    ]
    profile = json.loads((folder / "profile.json").read_text(encoding="utf-8"))
    persona = json.loads((folder / "persona.json").read_text(encoding="utf-8"))
    claims = [c for c in profile["claims"] if set(c.get("evidence_ids", [])) <= kept]
    entries = [e for e in persona["entries"] if set(e.get("grounds", [])) <= kept]
    sid = folder.name
    return {
        "dataset.json": json.loads((SAMPLE_DIR / "dataset.json").read_text(encoding="utf-8")),
        f"{sid}/conversation.jsonl": conversation,
        f"{sid}/chat.jsonl": chat[:4],
        f"{sid}/questions.jsonl": questions[:4],
        f"{sid}/profile.json": {"claims": claims[:4]},
        f"{sid}/persona.json": {"entries": entries[:4]},
    }


TURNS_CONFIG = ImportConfig(
    rows="turns",
    id_field="thread",
    turn_id_field="msg_id",
    text_field="content",
    speaker_field="author",
    timestamp_field="ts",
    user_speakers=("maya", "sam"),
)
NESTED_CONFIG = ImportConfig(
    conversations_field="conversations",
    id_field="conv_id",
    body_field="dialogue",
    session_keys=True,
    session_time_suffix="_date_time",
    text_field="says",
    speaker_field="who",
    turn_id_field="turn",
    questions_field="qa",
    question_field="q",
    answer_field="a",
    category_field="type",
    unanswerable_categories=("adversarial",),
)
LOCOMO_CONFIG = ImportConfig(
    id_field="sample_id",
    body_field="conversation",
    session_keys=True,
    session_time_suffix="_date_time",
    turn_id_field="dia_id",
    timestamp_format="%I:%M %p on %d %B, %Y",
    questions_field="qa",
    answer_field=None,
    category_field=None,
)
"""The importer's configurations under test (the first two are its test fixtures')."""


def _validate(path: Path) -> Any:
    from dialogbench.cli import validation_report  # the CLI imports every track: lazily

    return validation_report(str(path))


def _sniffed_import(root: Path) -> Any:
    """`data import --dry-run`'s work: the layout sniffed, then the import it proposes."""
    path = root / "export.json"
    return import_chat_export(path, ImportConfig(**sniff(path).options))


def targets(fixtures: Path) -> list[Target]:
    """Every target; `fixtures` is the repository's tests/fixtures folder."""
    lme = json.loads((fixtures / "longmemeval_mini.json").read_text(encoding="utf-8"))
    turns_text = (fixtures / "chat_export.jsonl").read_text(encoding="utf-8")
    turns = [json.loads(line) for line in turns_text.splitlines() if line.strip()]
    nested = json.loads((fixtures / "chat_export_nested.json").read_text(encoding="utf-8"))
    memorybank = {
        "memory_bank_en.json": _memorybank_seed(),
        "probing_questions_en.jsonl": [{"Emily": ["What do I enjoy?"]}, {"Luna": ["Which park?"]}],
    }
    release = _release_seed()
    lists = json.loads((fixtures / "layouts" / "nested_lists.json").read_text(encoding="utf-8"))
    return [
        Target("locomo", {"locomo10.json": _locomo_seed()}, lambda r: load_locomo(r)),
        Target(
            "validate-locomo", {"chats.json": _locomo_seed()}, lambda r: _validate(r / "chats.json")
        ),
        Target("memorybank", memorybank, lambda r: load_memorybank(r)),
        Target("validate-memorybank", memorybank, _validate),
        Target("longmemeval", {"lme.json": lme}, lambda r: load_longmemeval(r / "lme.json")),
        Target("validate-longmemeval", {"lme.json": lme}, lambda r: _validate(r / "lme.json")),
        Target("release", release, lambda r: load_release(r), release=True),
        Target("validate-release", release, _validate, release=True),
        Target(
            "import-turns",
            {"export.jsonl": turns},
            lambda r: import_chat_export(r / "export.jsonl", TURNS_CONFIG),
        ),
        Target(
            "import-nested",
            {"export.json": nested},
            lambda r: import_chat_export(r / "export.json", NESTED_CONFIG),
        ),
        Target(
            "import-locomo",
            {"export.json": _locomo_seed(repairable=False)},
            lambda r: import_chat_export(r / "export.json", LOCOMO_CONFIG),
        ),
        Target("sniff-locomo", {"export.json": _locomo_seed()}, _sniffed_import),
        Target("sniff-nested", {"export.json": nested}, _sniffed_import),
        Target("sniff-lists", {"export.json": lists}, _sniffed_import),
    ]
