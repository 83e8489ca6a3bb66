"""The golden cases: every track driven through the CLI on fixed small inputs.

Each case is the argv of one `dialogbench run TRACK ...`, invoked in-process with typer's
`CliRunner` on `dialogbench.cli.app`; nothing here calls a track's Python API, so the cases
survive a refactor of those APIs. Model-backed cases talk to the scripted loopback
`ChatServer`, whose `reply` (`golden_reply`) is a pure function of the request body: the
model name and the messages, hashed with sha256. It answers

* a request with a json_schema `response_format`: an instance of that schema whose numbers,
  booleans, enum choices and list lengths come from the hash (within minimum / maximum /
  enum / minItems / maxItems), and whose strings reuse words of the last user message (a
  closed label set listed in a DEMO awareness prompt is answered from that set);
* a DEMO interaction agent's turn (no schema): `{"person": <its name>, "content": ...}`, or
  the end marker;
* any other plain request: a short sentence of hashed template words and words of the
  message (a question-track answer is sometimes the abstention phrase).

About one JSON request in 17 first gets prose, so the corrective path runs too; the
correction that follows always gets valid JSON.

Fixture layout and regeneration: see `tests/golden/regen.py`.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
TESTS = HERE.parent
"""`{tests}` in a case's args: input files the case reads (e.g. an answers file)."""

EXCLUDED = frozenset({"manifest.json", "usage.json"})
"""Result files not frozen: the manifest (paths, versions, git revision, command) and the
token usage; the `parts/` folder (resume state) is left out as a whole."""

GZIP_OVER = 64 * 1024
"""Result files larger than this are stored gzipped (`NAME.gz`, mtime 0) to keep fixtures
small; the test compares the decompressed bytes, so the check stays byte for byte."""

MODEL, JUDGE, PARTNER = "golden", "golden-judge", "golden-partner"
KEY_ENV = "DIALOGBENCH_GOLDEN_KEY"
"""A dummy API key variable (the loopback server ignores it)."""


@dataclass(frozen=True)
class Case:
    """One run: `args` after `run`, with `{out}` and `{url}` filled in at run time."""

    name: str
    args: tuple[str, ...]
    corpus: str | None = None
    """A public corpus under $DIALOGBENCH_DATA the case needs (skipped when absent)."""
    server: bool = False
    needs: tuple[str, ...] = field(default=())
    """Extra requirements: "tokenizer" (the embedded GGUF the coverage track counts with)."""

    def argv(self, out: Path, url: str | None) -> list[str]:
        filled = [a.replace("{out}", str(out)).replace("{tests}", str(TESTS)) for a in self.args]
        if url is not None:
            filled = [a.replace("{url}", url) for a in filled]
        return ["run", *filled]


BOOT = ("--n-boot", "200")


def _model(judge: bool = True) -> tuple[str, ...]:
    model = (
        "--model",
        f"openai-compatible/{MODEL}",
        "--base-url",
        "{url}",
        "--api-key-env",
        KEY_ENV,
    )
    if not judge:
        return model
    return (
        *model,
        "--judge-model",
        f"openai-compatible/{JUDGE}",
        "--judge-base-url",
        "{url}",
        "--judge-api-key-env",
        KEY_ENV,
    )


CASES: tuple[Case, ...] = (
    Case("retrieval-sample", ("retrieval", "--dataset", "sample", "--out", "{out}", *BOOT)),
    Case(
        "retrieval-locomo",
        ("retrieval", "--dataset", "locomo", "--out", "{out}", *BOOT),
        corpus="locomo",
    ),
    Case("detection-sample", ("detection", "--dataset", "sample", "--out", "{out}", *BOOT)),
    Case(
        "detection-sample-model",
        (
            "detection",
            "--dataset",
            "sample",
            *_model(judge=False),
            "--limit",
            "24",
            "--out",
            "{out}",
            *BOOT,
        ),
        server=True,
    ),
    Case(
        "chat-sample",
        ("chat", "--dataset", "sample", *_model(), "--limit", "4", "--out", "{out}", *BOOT),
        server=True,
    ),
    Case(
        "questions-locomo",
        ("questions", "--dataset", "locomo", *_model(), "--limit", "12", "--out", "{out}", *BOOT),
        corpus="locomo",
        server=True,
    ),
    Case(
        "answers-sample",
        (
            "answers",
            "--dataset",
            "sample",
            "--answers",
            "{tests}/golden/inputs/answers_sample.jsonl",
            "--calibration",
            "3",
            *_model()[6:],
            "--out",
            "{out}",
            *BOOT,
        ),
        server=True,
    ),
    Case(
        "answers-mem0-sample",
        (
            "answers",
            "--dataset",
            "sample",
            "--answers",
            "{tests}/fixtures/mem0_results_sample.json",
            "--format",
            "mem0",
            "--calibration",
            "2",
            *_model()[6:],
            "--out",
            "{out}",
            *BOOT,
        ),
        server=True,
    ),
    Case(
        "reconstruction-memorybank",
        (
            "reconstruction",
            "--dataset",
            "memorybank",
            *_model(judge=False),
            "--limit",
            "2",
            "--max-claims",
            "8",
            "--threshold",
            "0",
            "--max-persona",
            "4",
            "--out",
            "{out}",
            *BOOT,
        ),
        corpus="memorybank",
        server=True,
    ),
    Case(
        "coverage-locomo",
        ("coverage", "--dataset", "locomo", "--out", "{out}", *BOOT),
        corpus="locomo",
        needs=("tokenizer",),
    ),
    Case(
        "privacy-memorybank",
        ("privacy", "--dataset", "memorybank", "--out", "{out}", *BOOT),
        corpus="memorybank",
    ),
    Case(
        "demo-awareness-cped",
        ("demo-awareness", "--dataset", "cped", *_model(), "--limit", "8", "--out", "{out}", *BOOT),
        corpus="cped",
        server=True,
    ),
    Case(
        "demo-awareness-casino",
        (
            "demo-awareness",
            "--dataset",
            "casino",
            *_model(),
            "--limit",
            "8",
            "--out",
            "{out}",
            *BOOT,
        ),
        corpus="casino",
        server=True,
    ),
    Case(
        "demo-interaction-sotopia",
        (
            "demo-interaction",
            "--dataset",
            "sotopia",
            *_model(),
            "--partner-model",
            f"openai-compatible/{PARTNER}",
            "--partner-base-url",
            "{url}",
            "--partner-api-key-env",
            KEY_ENV,
            "--limit",
            "2",
            "--max-turns",
            "4",
            "--out",
            "{out}",
            *BOOT,
        ),
        corpus="sotopia",
        server=True,
    ),
)

BY_NAME = {c.name: c for c in CASES}


def missing(case: Case) -> str | None:
    """Why `case` cannot run on this machine, or None."""
    if case.corpus is not None:
        root = os.environ.get("DIALOGBENCH_DATA")
        if not root:
            return "DIALOGBENCH_DATA is not set; point it at the public corpora to run this case"
        folder = Path(root) / case.corpus
        if not folder.is_dir():
            return f"{folder} is missing; DIALOGBENCH_DATA should hold {case.corpus}/"
    if "tokenizer" in case.needs:
        import importlib.util

        from dialogbench.models.embedded import GGUFUnavailable, default_gguf

        if importlib.util.find_spec("cyllama") is None:
            return "cyllama is not installed (the coverage track's tokenizer)"
        try:
            default_gguf()
        except GGUFUnavailable as e:
            return str(e)
    return None


# -- the scripted model -------------------------------------------------------------------

_WORD = re.compile(r"[^\W\d_][\w'-]*", re.UNICODE)
_PERSON = re.compile(r'\{"person": ("(?:[^"\\]|\\.)*"), "content": ')
_LABELS = re.compile(r'^\s*- "([a-z_0-9]+)" \([^)]*\):.*?(?:allowed labels: |可选标签：)(.*)$')
_SUCH_AS = re.compile(r"such as ([a-z ,-]+?)[.;:]")
_TRAITS = ("openness", "conscientiousness", "extraversion", "agreeableness", "neuroticism")
_FILLER = (
    "I think",
    "that sounds",
    "maybe",
    "honestly",
    "you mentioned",
    "remember when",
    "it seems",
    "probably",
    "I wonder about",
    "tell me more about",
)
NOT_AVAILABLE = "No information available."
CORRECTION_START = ("Your reply could not be used", "你的回答无法使用")


def _text(content: Any) -> str:
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


class _Hash:
    """Deterministic numbers from the request's digest and a path within the reply."""

    def __init__(self, seed: str) -> None:
        self.seed = seed

    def __call__(self, *path: object) -> int:
        key = "\x1f".join([self.seed, *map(str, path)]).encode()
        return int.from_bytes(hashlib.sha256(key).digest()[:8], "big")


def _words(text: str) -> list[str]:
    return _WORD.findall(text)


def _phrase(h: _Hash, words: list[str], path: str, low: int, high: int, filler: bool = True) -> str:
    """`low`..`high` words of the message, sometimes after a filler opening."""
    n = low + h(path, "n") % (high - low + 1)
    out = [] if not filler or h(path, "f") % 3 else [_FILLER[h(path, "fw") % len(_FILLER)]]
    if words:
        start = h(path, "s") % len(words)
        step = 1 + h(path, "st") % 3
        out += [words[(start + i * step) % len(words)] for i in range(n)]
    else:
        out += ["something"] * n
    return " ".join(out)


class _Instance:
    """An instance of a JSON schema with hashed choices."""

    def __init__(self, root: Mapping[str, Any], h: _Hash, user: str) -> None:
        self.root, self.h, self.user = root, h, user
        self.words = _words(user)
        self.head = self.words[:150]
        self.examples: list[str] = sorted(
            {x.strip() for m in _SUCH_AS.findall(user) for x in m.split(",") if x.strip()}
        )
        self.labels: dict[str, list[str]] = {}
        for line in user.splitlines():
            m = _LABELS.match(line)
            if m:
                with contextlib.suppress(ValueError):
                    self.labels[m.group(1)] = [str(x) for x in json.loads(f"[{m.group(2)}]")]

    def resolve(self, schema: Any) -> Any:
        while isinstance(schema, dict) and isinstance(schema.get("$ref"), str):
            target: Any = self.root
            for part in schema["$ref"].lstrip("#/").split("/"):
                target = target.get(part, {}) if isinstance(target, dict) else {}
            schema = target
        return schema

    def make(self, schema: Any, path: str, key: str = "", rot: int = 0) -> Any:
        h = self.h
        schema = self.resolve(schema)
        if not isinstance(schema, dict):
            return None
        if "const" in schema:
            return schema["const"]
        if schema.get("enum"):
            options = schema["enum"]
            return options[(h(path.split("[")[0], key) + rot) % len(options)]
        for choice in ("anyOf", "oneOf"):
            if schema.get(choice):
                branches = schema[choice]
                return self.make(branches[h(path, choice) % len(branches)], path, key, rot)
        if schema.get("allOf"):
            return self.make(schema["allOf"][0], path, key, rot)
        kind = schema.get("type")
        kind = kind[0] if isinstance(kind, list) and kind else kind
        if kind == "object" or "properties" in schema:
            props = schema.get("properties") or {}
            return {k: self.make(v, f"{path}.{k}", k, rot) for k, v in props.items()}
        if kind == "array":
            low = int(schema.get("minItems", 0))
            high = int(schema.get("maxItems", max(low, 3)))
            high = min(high, max(low, 4))
            n = low + h(path, "len") % (high - low + 1)
            start = h(path, "rot")
            items = schema.get("items")
            return [self.make(items, f"{path}[{i}]", key, start + i) for i in range(n)]
        if kind == "integer":
            low = int(schema.get("minimum", schema.get("exclusiveMinimum", -1) + 1))
            high = int(schema.get("maximum", schema.get("exclusiveMaximum", 11) - 1))
            return low + h(path, "int") % (high - low + 1) if high >= low else low
        if kind == "number":
            lo = float(schema.get("minimum", 0.0))
            hi = float(schema.get("maximum", 1.0))
            return round(lo + (hi - lo) * (h(path, "num") % 101) / 100, 2)
        if kind == "boolean":
            return h(path, "bool") % 2 == 1
        if kind == "string":
            return self.string(schema, path, key)
        return None

    def string(self, schema: Mapping[str, Any], path: str, key: str) -> str:
        h = self.h
        if self.labels.get(key):
            options = self.labels[key]
            return options[h(path, "label") % len(options)]
        if key in _TRAITS:
            return ("high", "low")[h(path, "trait") % 2]
        limit = schema.get("maxLength")
        if limit is not None and int(limit) <= 40:
            if self.examples and h(path, "example") % 3:
                return self.examples[h(path, "which") % len(self.examples)][: int(limit)]
            text = _phrase(h, self.head, path, 1, 2, filler=False)
        else:
            text = _phrase(h, self.words, path, 1, 8, filler=h(path, "short") % 2 == 0)
        return text[: int(limit)] if limit is not None else text


def golden_reply(body: Mapping[str, Any]) -> str:
    """The scripted model's reply: a pure function of the model name and the messages."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    seed = json.dumps(
        {"model": body.get("model"), "messages": messages}, sort_keys=True, ensure_ascii=False
    )
    h = _Hash(hashlib.sha256(seed.encode()).hexdigest())
    users = [_text(m.get("content")) for m in messages if m.get("role") == "user"]
    user = users[-1] if users else ""
    correcting = user.startswith(CORRECTION_START)
    fmt = body.get("response_format") or {}
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        if not correcting and h("prose") % 17 == 0:
            return "Let me think about that first."
        schema = (fmt.get("json_schema") or {}).get("schema") or {}
        source = user if not correcting else "\n".join(users)
        return json.dumps(_Instance(schema, h, source).make(schema, "$"), ensure_ascii=False)
    person = _PERSON.search(user)
    if person is not None:  # a DEMO interaction agent's turn
        name = json.loads(person.group(1))
        turn = re.findall(r"^Turn \d+ - |^第 \d+ 轮 - ", "\n".join(users), re.MULTILINE)
        if turn and h("end") % 3 == 0:
            return json.dumps({"person": name, "end": True}, ensure_ascii=False)
        said = _phrase(h, _words(user), "turn", 4, 12)
        return json.dumps({"person": name, "content": said.capitalize() + "."})
    question = re.search(r"<question>\n(.*?)\n</question>", user, re.DOTALL)
    if question is not None:  # a question-track answer
        if h("abstain") % 5 == 0:
            return NOT_AVAILABLE
        pool = _words(question.group(1)) if h("pool") % 2 else _words(user)
        return _phrase(h, pool, "answer", 1, 5)
    new = re.search(r"<new_message>\n(.*?)\n</new_message>", user, re.DOTALL)
    pool = _words(new.group(1)) if new is not None and h("pool") % 2 else _words(user)
    return _phrase(h, pool, "reply", 3, 14).capitalize() + "."


# -- running a case and reading what it wrote ---------------------------------------------


@contextlib.contextmanager
def environment(cache: Path) -> Iterator[None]:
    """The environment a case runs in: its own response cache and a dummy API key."""
    saved = {k: os.environ.get(k) for k in ("DIALOGBENCH_CACHE", KEY_ENV)}
    os.environ["DIALOGBENCH_CACHE"] = str(cache)
    os.environ[KEY_ENV] = "golden-dummy-key"
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def run_case(case: Case, out: Path, cache: Path) -> tuple[int, str]:
    """Run one case into `out` with a fresh response cache file; (exit code, output)."""
    from typer.testing import CliRunner

    from dialogbench.cli import app

    runner = CliRunner()
    with environment(cache):
        if case.server:
            from dialogbench.testing import ChatServer

            with ChatServer(reply=golden_reply) as srv:
                result = runner.invoke(app, case.argv(out, srv.base_url))
        else:
            result = runner.invoke(app, case.argv(out, None))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        import traceback

        tb = "".join(traceback.format_exception(result.exception))
        return result.exit_code or 1, result.output + "\n" + tb
    return result.exit_code, result.output


def result_files(out: Path) -> dict[str, bytes]:
    """Every result file a run wrote (relative name -> bytes), without the excluded ones."""
    found: dict[str, bytes] = {}
    for path in sorted(out.rglob("*")):
        rel = path.relative_to(out)
        if not path.is_file() or rel.parts[0] == "parts" or rel.as_posix() in EXCLUDED:
            continue
        found[rel.as_posix()] = path.read_bytes()
    return found


def stored_files(case: Case) -> dict[str, bytes]:
    """The fixture of `case` (relative name -> the result file's bytes, gunzipped)."""
    folder = FIXTURES / case.name
    found: dict[str, bytes] = {}
    if not folder.is_dir():
        return found
    for path in sorted(folder.rglob("*")):
        if not path.is_file():
            continue
        rel = path.relative_to(folder).as_posix()
        if rel.endswith(".gz"):
            found[rel.removesuffix(".gz")] = gzip.decompress(path.read_bytes())
        else:
            found[rel] = path.read_bytes()
    return found


def store(case: Case, files: Mapping[str, bytes]) -> int:
    """Replace the fixture of `case` with `files`; the bytes stored on disk."""
    import shutil

    folder = FIXTURES / case.name
    if folder.exists():
        shutil.rmtree(folder)
    total = 0
    for rel, data in files.items():
        target = folder / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if len(data) > GZIP_OVER:
            target = target.with_name(target.name + ".gz")
            data = gzip.compress(data, compresslevel=9, mtime=0)
        target.write_bytes(data)
        total += len(data)
    return total
