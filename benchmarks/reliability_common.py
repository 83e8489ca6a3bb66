"""What the four reliability benchmarks share: the CLI as a subprocess, the loopback server,
option detection, comparing a run with the fault-free one, and the printed table.

Every benchmark drives the real command line (`dialogbench run questions ...`, a judged
model-backed track) in child processes against `dialogbench.testing.ChatServer` running in
the benchmark's own process. The server's reply is `golden_reply` (tests/golden/cases.py), a
pure function of the request, so an uninterrupted fault-free run is the answer key. Each run
gets its own `DIALOGBENCH_CACHE` unless a benchmark shares one on purpose.

Options that other work adds to the CLI (`--timeout`, `--retry-after-max`, ...) are found in
`dialogbench run TRACK --help`; a check that needs a missing option says so in its row.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from aiohttp import web

from dialogbench.testing.chatserver import Body, ChatServer, Fault

ROOT = Path(__file__).resolve().parents[1]
CLI = "import sys; from dialogbench.cli import app; sys.exit(app())"
KEY_ENV = "DIALOGBENCH_BENCH_KEY"
COMPARED = ("items.jsonl", "summary.json")
"""The files a run must reproduce byte for byte."""


def reply_function() -> Callable[[Body], str]:
    """`golden_reply` from tests/golden/cases.py (tests/ put on sys.path for it)."""
    tests = str(ROOT / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    from golden.cases import golden_reply

    return golden_reply


# -- the command line --------------------------------------------------------------------


def child_env(cache: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of one CLI process: this checkout's sources, its own cache file."""
    env = dict(os.environ)
    src = str(ROOT / "src")
    env["PYTHONPATH"] = os.pathsep.join([src, *filter(None, [env.get("PYTHONPATH")])])
    env["DIALOGBENCH_CACHE"] = str(cache)
    env.setdefault(KEY_ENV, "bench-dummy-key")
    env["COLUMNS"] = "250"  # --help and tables unclipped
    env.update(extra or {})
    return env


def cli_command(args: Sequence[str]) -> list[str]:
    return [sys.executable, "-c", CLI, *args]


@cache
def cli_options(track: str) -> frozenset[str]:
    """Every `--option` `dialogbench run TRACK --help` lists."""
    got = subprocess.run(
        cli_command(["run", track, "--help"]),
        env=child_env(Path(os.devnull)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    return frozenset(re.findall(r"--[a-z][a-z0-9-]*", got.stdout))


def has_option(track: str, option: str) -> bool:
    return option in cli_options(track)


@dataclass(frozen=True)
class Workload:
    """A judged model-backed run: `questions` over `dataset`, two systems (full and
    retrieval), so `items` rows come from `items / 2` questions."""

    dataset: str = "locomo"
    items: int = 600
    track: str = "questions"
    n_boot: int = 200

    @property
    def limit(self) -> int:
        return max(1, (self.items + 1) // 2)

    def args(
        self,
        url: str,
        out: Path,
        *,
        key_env: str = KEY_ENV,
        timeout: float | None = None,
        extra: Sequence[str] = (),
    ) -> list[str]:
        """`run questions ...` for this workload, both roles on the server at `url`."""
        args = [
            "run",
            self.track,
            "--dataset",
            self.dataset,
            "--systems",
            "full,retrieval",
            "--limit",
            str(self.limit),
            "--model",
            "openai-compatible/bench-model",
            "--base-url",
            url,
            "--api-key-env",
            key_env,
            "--judge-model",
            "openai-compatible/bench-judge",
            "--judge-base-url",
            url,
            "--judge-api-key-env",
            key_env,
            "--n-boot",
            str(self.n_boot),
            "--out",
            str(out),
        ]
        if timeout is not None:
            for option in ("--timeout", "--judge-timeout"):
                if has_option(self.track, option):
                    args += [option, f"{timeout:g}"]
        return [*args, *extra]

    def supports_timeout(self) -> bool:
        return has_option(self.track, "--timeout")


@dataclass
class Ran:
    """One finished CLI process."""

    rc: int
    stdout: str
    stderr: str
    wall_s: float

    @property
    def failure_lines(self) -> list[str]:
        """The `failed: N cause` lines the CLI printed."""
        return [ln.strip() for ln in self.stderr.splitlines() if ln.strip().startswith("failed:")]


def run_cli(args: Sequence[str], env: Mapping[str, str], timeout_s: float = 900) -> Ran:
    started = time.perf_counter()
    got = subprocess.run(
        cli_command(args), env=dict(env), capture_output=True, text=True, timeout=timeout_s
    )
    return Ran(got.returncode, got.stdout, got.stderr, time.perf_counter() - started)


def start_cli(args: Sequence[str], env: Mapping[str, str]) -> subprocess.Popen[str]:
    """A CLI process running in the background (stdout and stderr piped)."""
    return subprocess.Popen(
        cli_command(args),
        env=dict(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # our own SIGINT (Ctrl-C) does not reach it
    )


def finish(proc: subprocess.Popen[str], started: float, timeout_s: float = 900) -> Ran:
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        out, err = proc.communicate()
    return Ran(proc.returncode, out, err, time.perf_counter() - started)


def saved_units(out: Path, stage: str = "solved") -> int:
    """Whole lines in RUN_DIR/parts/STAGE.jsonl: units that run has saved so far."""
    try:
        return (out / "parts" / f"{stage}.jsonl").read_bytes().count(b"\n")
    except OSError:
        return 0


def wait_for(predicate: Callable[[], bool], timeout_s: float, every: float = 0.02) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(every)
    return predicate()


# -- the server ----------------------------------------------------------------------------

HTML_MARKER = "\x00bench-html\x00"
HTML_PAGE = "<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>\n"


def html() -> Fault:
    """HTTP 200 whose body is an HTML page (a proxy's error page), not JSON."""
    return Fault("ok", content=HTML_MARKER)


class BenchServer(ChatServer):
    """`ChatServer` plus the two things the benchmarks need beyond its faults: an `html()`
    reply, and (with `echo_auth`) the request's API key echoed into every reply's content
    and error message, raw, JSON-escaped and URL-encoded."""

    def __init__(self, *, echo_auth: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.echo_auth = echo_auth
        self.keys_seen: dict[str, int] = {}
        """With `echo_auth`: how many requests carried each key."""
        self.paused = threading.Event()
        """While set, requests wait before they are answered (or even numbered)."""
        self.arrived = 0
        """Requests that reached the server, paused ones included."""

    def __enter__(self) -> BenchServer:
        self.start()
        return self

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        self.arrived += 1  # one event loop: no lock needed
        while self.paused.is_set():
            await asyncio.sleep(0.02)
        resp = await super()._chat(request)
        if not isinstance(resp, web.Response) or resp.body is None:
            return resp
        text = resp.text or ""
        if HTML_MARKER in text or json.dumps(HTML_MARKER)[1:-1] in text:  # raw or JSON-escaped
            return web.Response(text=HTML_PAGE, content_type="text/html", status=200)
        if not self.echo_auth:
            return resp
        key = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        self.keys_seen[key] = self.keys_seen.get(key, 0) + 1
        shown = " | ".join(encodings(key))
        body = json.loads(text)
        if "error" in body:
            body["error"]["message"] = f"{body['error']['message']} (key was {shown})"
        else:
            for choice in body.get("choices", []):
                choice["message"]["content"] = f"{choice['message']['content']} [{shown}]"
        return web.json_response(body, status=resp.status, headers=_kept(resp.headers))


def _kept(headers: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.lower() == "retry-after"}


def encodings(key: str) -> list[str]:
    """The key raw, JSON-escaped (with `\\/`, as some encoders write it) and URL-encoded."""
    from urllib.parse import quote

    escaped = json.dumps(key)[1:-1].replace("/", "\\/")
    return [key, escaped, quote(key, safe="")]


# -- comparing a run with the answer key -----------------------------------------------------


def read_units(out: Path, stage: str = "scored") -> dict[str, dict[str, Any]]:
    """RUN_DIR/parts/STAGE.jsonl by unit (the last whole line wins)."""
    units: dict[str, dict[str, Any]] = {}
    path = out / "parts" / f"{stage}.jsonl"
    if not path.exists():
        return units
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            got = json.loads(line)
        except ValueError:
            continue
        units[str(got["unit"])] = got
    return units


def failure_cause(unit: Mapping[str, Any]) -> str | None:
    """Why a stored unit counts as failed, or None: a failed call in its usage, an answer
    error, or a verdict that could not be used."""
    for role, spent in (unit.get("usage") or {}).items():
        if int(spent.get("failed_calls", 0)):
            return f"failed {role} call"
    for row in unit.get("rows") or []:
        if row.get("answer_error"):
            return "answer failed"
        if row.get("judge_model") and row.get("judged") is False:
            return "judge unscored"
    return None


@dataclass
class Comparison:
    """Each unit of the fault-free run, as the other run left it."""

    units: int = 0
    rows: int = 0
    """Rows (items) of the answer key."""
    scored: int = 0
    """Rows equal to the answer key's."""
    failed: dict[str, int] = field(default_factory=dict)
    """Units the run counts as failed, by cause (a failed call, an unscored verdict, not
    finished after a failed call)."""
    lost: int = 0
    """Units missing with no failure counted for them."""
    wrong: int = 0
    """Units whose rows differ from the answer key's with no failure recorded."""
    wrong_examples: list[str] = field(default_factory=list)
    identical: dict[str, bool] = field(default_factory=dict)
    """COMPARED file -> byte-identical to the answer key's."""

    @property
    def failed_total(self) -> int:
        return sum(self.failed.values())


def compare(reference: Path, run: Path, ran: Ran | None = None) -> Comparison:
    """Every unit of `reference` in `run`: equal, failed with a cause, lost or wrong."""
    key = read_units(reference)
    got = read_units(run)
    unfinished = 0
    if ran is not None:
        for line in ran.failure_lines:
            m = re.match(r"failed: (\d+) units not finished", line)
            unfinished += int(m.group(1)) if m else 0
    cmp = Comparison(units=len(key), rows=sum(len(u["rows"]) for u in key.values()))
    missing = 0
    for unit, want in key.items():
        have = got.get(unit)
        if have is None:
            missing += 1
            continue
        cause = failure_cause(have)
        if cause is None and have["rows"] == want["rows"]:
            cmp.scored += 1
        elif cause is not None:
            cmp.failed[cause] = cmp.failed.get(cause, 0) + 1
        else:
            cmp.wrong += 1
            if len(cmp.wrong_examples) < 3:
                cmp.wrong_examples.append(unit)
    counted = min(missing, unfinished)
    if counted:
        cmp.failed["not finished (counted by the run)"] = counted
    cmp.lost = missing - counted
    cmp.identical = {
        name: (reference / name).exists()
        and (run / name).exists()
        and (reference / name).read_bytes() == (run / name).read_bytes()
        for name in COMPARED
    }
    return cmp


def cache_outputs(path: Path) -> dict[str, str]:
    """The response cache file's entries: key -> the reply text stored."""
    if not path.exists():
        return {}
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = con.execute("SELECT key, output FROM responses").fetchall()
    finally:
        con.close()
    return {str(k): str(json.loads(o).get("text", "")) for k, o in rows}


def cached_errors(reference: Path, run: Path) -> tuple[int, int]:
    """(entries of `run`'s cache whose text differs from the fault-free cache's for the same
    key, entries the fault-free run never made): both count errors or their consequences
    stored as if they were replies."""
    want = cache_outputs(reference)
    have = cache_outputs(run)
    differ = sum(1 for k, v in have.items() if k in want and want[k] != v)
    extra = sum(1 for k in have if k not in want)
    return differ, extra


# -- output --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Check:
    """One printed figure: what, the value, the target and whether it is met (None: for
    information only)."""

    what: str
    value: str
    target: str = ""
    met: bool | None = None
    note: str = ""
    needs: str = ""
    """Work outside this benchmark the target waits for (shown when it is missed)."""
    timed: bool = False
    """A wall-clock target: benchmarks check it, the fast tests do not."""


def table(title: str, checks: Iterable[Check]) -> str:
    rows = [(c.what, c.value, c.target, _mark(c.met), _note(c)) for c in checks]
    head = ("check", "value", "target", "", "note")
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(5)]

    def line(r: Sequence[str]) -> str:
        return "  ".join(str(x).ljust(w) for x, w in zip(r, widths, strict=True))

    out = [title, line(head), "  ".join("-" * w for w in widths)]
    out += [line(r).rstrip() for r in rows]
    return "\n".join(out)


def _note(c: Check) -> str:
    needs = f"[needs {c.needs}]" if c.needs and c.met is False else ""
    return " ".join(x for x in (needs, c.note) if x)


def _mark(met: bool | None) -> str:
    return "" if met is None else ("ok" if met else "MISSED")


def identical(c: Comparison) -> str:
    """ "items.jsonl yes, summary.json no": which COMPARED files are the answer key's."""
    return ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in c.identical.items())


def missed(checks: Iterable[Check]) -> list[Check]:
    return [c for c in checks if c.met is False]


def report(title: str, checks: list[Check]) -> int:
    """Print the table; 1 when a target is missed, else 0."""
    print(table(title, checks))
    bad = missed(checks)
    if bad:
        print(f"{len(bad)} target(s) missed: " + "; ".join(c.what for c in bad))
    return 1 if bad else 0
