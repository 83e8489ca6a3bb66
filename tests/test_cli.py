"""The command line: runs, listings and clear errors (exit code 2, no traceback)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from dialogbench.cli import app
from dialogbench.models.embedded import unavailable as embedded_unavailable
from dialogbench.tracks.demo import interaction_prompts as ip

runner = CliRunner()


def test_run_retrieval_on_sample(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = runner.invoke(
        app,
        [
            "run",
            "retrieval",
            "--dataset",
            "sample",
            "--out",
            str(out),
            "--n-boot",
            "100",
            "--k",
            "1,5",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "bm25" in result.output and "hit@5" in result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["all probes (pooled)"]["oracle"]["hit@1"]["value"] == 1.0


def test_quickstart_without_locomo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DIALOGBENCH_DATA", raising=False)
    monkeypatch.setenv("DIALOGBENCH_HOME", str(tmp_path / "empty"))
    result = runner.invoke(app, ["quickstart", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "LoCoMo is not on this machine" in result.output
    for track in ("retrieval", "coverage", "privacy"):
        assert (tmp_path / "sample" / track / "summary.json").exists()
    page = tmp_path / "report.html"
    assert f"report of these runs: {page}" in result.output
    assert "hit@k per system" in page.read_text()
    if embedded_unavailable() is None:  # the model-backed track, on three probes
        items = (tmp_path / "sample" / "detection-model" / "items.jsonl").read_text()
        assert len({json.loads(x)["probe"] for x in items.splitlines()}) == 3
        assert "for smoke tests" in result.output and "--base-url" in result.output
    else:
        assert "skipped the model-backed track" in result.output


def test_data_list_shows_where(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("DIALOGBENCH_DATA", raising=False)
    monkeypatch.setenv("DIALOGBENCH_HOME", str(tmp_path))
    result = runner.invoke(app, ["data", "list"])
    assert result.exit_code == 0
    for name in ("sample", "locomo", "memorybank", "longmemeval"):
        assert name in result.output


def test_validate_reports_counts() -> None:
    result = runner.invoke(app, ["data", "validate", "sample"])
    assert result.exit_code == 0, result.output
    assert "sample: valid." in result.output and "chat items" in result.output


def test_validate_names_the_problem(tmp_path: Path) -> None:
    folder = tmp_path / "x"
    folder.mkdir()
    (folder / "conversation.jsonl").write_text('{"id": "a", "speaker": "A"}\n')
    result = runner.invoke(app, ["data", "validate", str(folder)])
    assert result.exit_code == 2
    assert "conversation.jsonl, line 1, field 'text'" in result.output
    assert "Traceback" not in result.output


def test_missing_dataset_says_how_to_get_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("DIALOGBENCH_DATA", raising=False)
    monkeypatch.setenv("DIALOGBENCH_HOME", str(tmp_path))
    result = runner.invoke(
        app, ["run", "retrieval", "--dataset", "locomo", "--out", str(tmp_path / "r")]
    )
    assert result.exit_code == 2
    assert "dialogbench data download locomo" in result.output


def test_unknown_retriever(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["run", "retrieval", "--retrievers", "bm25,nope", "--out", str(tmp_path)]
    )
    assert result.exit_code == 2 and "unknown retriever 'nope'" in result.output


FIXTURES = Path(__file__).parent / "fixtures"


def test_import_a_chat_export(tmp_path: Path) -> None:
    out = tmp_path / "imported"
    args = [
        "data",
        "import",
        str(FIXTURES / "chat_export.jsonl"),
        "--out",
        str(out),
        "--rows",
        "turns",
        "--id-field",
        "thread",
        "--turn-id-field",
        "msg_id",
        "--speaker-field",
        "author",
        "--text-field",
        "content",
        "--timestamp-field",
        "ts",
        "--user-speakers",
        "maya,sam",
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    check = runner.invoke(app, ["data", "validate", str(out)])
    assert check.exit_code == 0 and "2 subjects" in check.output


def test_import_names_the_missing_field(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["data", "import", str(FIXTURES / "chat_export.jsonl"), "--out", str(tmp_path / "x")]
    )
    assert result.exit_code == 2
    assert "field 'turns'" in result.output and "--turns-field" in result.output


LOCOMO_LIKE_ARGS = [
    "--session-keys",
    "--body-field",
    "conversation",
    "--id-field",
    "sample_id",
    "--session-time-suffix",
    "_date_time",
    "--turn-id-field",
    "dia_id",
    "--questions-field",
    "qa",
]


def _import(path: Path, out: Path, *options: str) -> Any:
    return runner.invoke(app, ["data", "import", str(path), "--out", str(out), *options])


def test_import_questions(tmp_path: Path) -> None:
    out = tmp_path / "imported"
    names = "1=multi-hop,2=temporal,3=open-domain,4=single-hop,5=adversarial"
    result = _import(
        FIXTURES / "locomo_like_sample.json",
        out,
        *LOCOMO_LIKE_ARGS,
        "--category-names",
        names,
        "--unanswerable-categories",
        "adversarial",
    )
    assert result.exit_code == 0, result.output
    assert "wrote 1 conversations, 6 messages" in result.output
    assert "repaired to ['D1:3', 'D1:4']" in result.output
    assert "2 cited evidence ids name no turn" in result.output
    rows = (out / "ana-ben" / "questions.jsonl").read_text().splitlines()
    questions = [json.loads(row) for row in rows]
    assert [q["category"] for q in questions] == [
        "single-hop",
        "temporal",
        "multi-hop",
        "adversarial",
        "6",
    ]
    assert questions[3]["answerable"] is False
    check = runner.invoke(app, ["data", "validate", str(out)])
    assert check.exit_code == 0 and "5 questions" in check.output, check.output


def test_import_questions_with_default_categories(tmp_path: Path) -> None:
    result = _import(FIXTURES / "locomo_like_sample.json", tmp_path / "x", *LOCOMO_LIKE_ARGS)
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output


def test_import_missing_evidence_can_fail(tmp_path: Path) -> None:
    result = _import(
        FIXTURES / "locomo_like_sample.json",
        tmp_path / "x",
        *LOCOMO_LIKE_ARGS,
        "--on-missing-evidence",
        "fail",
    )
    assert result.exit_code == 2
    assert "qa[2], field 'evidence'" in result.output and "'D3:1'" in result.output
    bad = _import(
        FIXTURES / "locomo_like_sample.json", tmp_path / "y", "--on-missing-evidence", "x"
    )
    assert bad.exit_code == 2 and "--on-missing-evidence must be one of" in bad.output


def test_import_hints_and_unimported_questions(tmp_path: Path) -> None:
    sample = FIXTURES / "locomo_like_sample.json"
    result = _import(sample, tmp_path / "x")
    assert result.exit_code == 2
    assert "--session-keys --body-field conversation" in result.output
    result = _import(sample, tmp_path / "y", *LOCOMO_LIKE_ARGS[:-2])
    assert result.exit_code == 0, result.output
    assert "pass --questions-field qa" in result.output


def test_import_a_folder(tmp_path: Path) -> None:
    folder = tmp_path / "exports"
    folder.mkdir()
    for name in ("chat_b", "chat_a"):
        turns = [{"speaker": "me", "text": f"hello from {name}"}]
        (folder / f"{name}.json").write_text(json.dumps({"turns": turns}))
    out = tmp_path / "release"
    result = _import(folder, out)
    assert result.exit_code == 0, result.output
    assert "wrote 2 conversations" in result.output
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["chat_a", "chat_b"]
    empty = tmp_path / "empty"
    empty.mkdir()
    result = _import(empty, tmp_path / "z")
    assert result.exit_code == 2 and "no .json or .jsonl files" in result.output
    assert "Traceback" not in result.output


def test_import_nested_episodes(tmp_path: Path) -> None:
    out = tmp_path / "episodes"
    result = _import(
        FIXTURES / "episodes_nested.json",
        out,
        "--rows",
        "nested",
        "--timestamp-field",
        "time",
        "--timestamp-format",
        "%Y-%m-%d %H:%M",
        "--user-speakers",
        "user",
    )
    assert result.exit_code == 0, result.output
    assert "wrote 2 conversations, 7 messages" in result.output
    check = runner.invoke(app, ["data", "validate", str(out)])
    assert check.exit_code == 0 and "2 subjects" in check.output


def test_models_check_against_a_loopback_server() -> None:
    from dialogbench.testing import ChatServer

    with ChatServer(json_mode=False, reply=lambda b: '{"name": "Maya", "age": 31}') as srv:
        result = runner.invoke(
            app,
            ["models", "check", "--model", "openai-compatible/test", "--base-url", srv.base_url],
        )
    assert result.exit_code == 0, result.output
    assert "latency" in result.output and "tokens" in result.output
    assert "JSON output  works; mode: none" in result.output


def test_models_check_unreachable_is_a_clear_error() -> None:
    result = runner.invoke(
        app,
        [
            "models",
            "check",
            "--model",
            "openai-compatible/x",
            "--base-url",
            "http://127.0.0.1:9/v1",
        ],
    )
    assert result.exit_code == 4  # backend unreachable, as for a run
    said = result.output.replace("\n", " ")
    assert "server at http://127.0.0.1:9/v1 could not be reached" in said
    assert "connection refused" in said


def test_models_check_bad_spec() -> None:
    result = runner.invoke(app, ["models", "check", "--model", "gpt-4o"])
    assert result.exit_code == 2 and "is not provider/model" in result.output


def test_models_check_takes_a_timeout() -> None:
    from dialogbench.testing import ChatServer

    with ChatServer(reply=lambda b: '{"name": "Maya", "age": 31}') as srv:
        argv = ["models", "check", "--model", "openai-compatible/test", "--base-url", srv.base_url]
        result = runner.invoke(app, [*argv, "--timeout", "5"])
        assert result.exit_code == 0, result.output
        bad = runner.invoke(app, [*argv, "--timeout", "0"])
    assert bad.exit_code == 2 and "--timeout" in bad.output and "Traceback" not in bad.output


SECRET = "hunter2-Zq81"


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["--base-url", f"http://alice:{SECRET}@127.0.0.1:9/v1"], "--base-url"),
        (["--api-key-env", f"sk-proj-{SECRET}"], "--api-key-env"),
        (["--judge-model", "openai-compatible/j", "--judge-api-key-env", f"sk-{SECRET}"],
         "--judge-api-key-env"),
        (["--judge-model", "openai-compatible/j", "--judge-base-url",
          f"http://127.0.0.1:9/v1?key={SECRET}"], "--judge-base-url"),
        (["--judge-model", "openai-compatible/j", "--judge-timeout", "0"], "--judge-timeout"),
        (["--judge-deadline", "10"], "--judge-deadline given without --judge-model"),
        (["--model-deadline", "-1"], "--deadline"),
    ],
)  # fmt: skip
def test_role_options_that_would_leak_or_are_bad_are_refused_without_echo(
    tmp_path: Path, argv: list[str], option: str
) -> None:
    out = tmp_path / "run"
    model = ["--model", "openai-compatible/t"]
    if "--base-url" not in argv:
        model += ["--base-url", "http://127.0.0.1:9/v1"]
    result = runner.invoke(
        app,
        ["run", "demo-awareness", "--dataset", str(DEMO_FIXTURES / "element_awareness_en.json"),
         "--out", str(out), *model, *argv],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert option in result.output and "Traceback" not in result.output
    assert SECRET not in result.output
    assert not (out / "manifest.json").exists()


def test_a_damaged_cache_is_a_one_line_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = tmp_path / "cache.sqlite"
    bad.write_bytes(b"overwritten " * 500)
    stats = runner.invoke(app, ["cache", "stats", "--path", str(bad)])
    assert stats.exit_code == 2 and "Traceback" not in stats.output
    assert "cache.sqlite" in stats.output and "DIALOGBENCH_CACHE" in stats.output
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path))  # a directory
    result = runner.invoke(
        app,
        ["run", "demo-awareness", "--dataset", str(DEMO_FIXTURES / "element_awareness_en.json"),
         "--model", "openai-compatible/t", "--base-url", "http://127.0.0.1:9/v1",
         "--out", str(tmp_path / "run")],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "is a directory" in result.output and "Traceback" not in result.output


def test_role_timing_options_reach_the_manifest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dialogbench.testing import ChatServer

    monkeypatch.setenv("COLUMNS", "200")  # rich's width: every alias on its line
    shown = runner.invoke(app, ["run", "demo-interaction", "--help"]).output
    for option in (
        "--timeout", "--model-timeout", "--deadline", "--model-deadline", "--retry-after-max",
        "--model-retry-after-max", "--judge-timeout", "--judge-deadline",
        "--judge-retry-after-max", "--partner-timeout", "--partner-deadline",
        "--partner-retry-after-max",
    ):  # fmt: skip
        assert option in shown, option
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    out = tmp_path / "aware"
    with ChatServer() as srv:
        result = runner.invoke(
            app,
            ["run", "demo-awareness", "--dataset", str(DEMO_FIXTURES / "element_awareness_en.json"),
             "--model", "openai-compatible/t", "--base-url", srv.base_url, "--timeout", "12.5",
             "--judge-model", "openai-compatible/j", "--judge-base-url", srv.base_url,
             "--judge-deadline", "99", "--judge-retry-after-max", "5", "--out", str(out),
             "--n-boot", "20"],
        )  # fmt: skip
    assert result.exit_code == 0, result.output
    roles = json.loads((out / "manifest.json").read_text())["roles"]
    assert (roles["model"]["timeout_s"], roles["model"]["deadline_s"]) == (12.5, 300.0)
    judge = roles["judge"]
    assert (judge["timeout_s"], judge["deadline_s"], judge["retry_after_max_s"]) == (30.0, 99, 5)


def test_cache_explain_and_stats(tmp_path: Path) -> None:
    path = str(tmp_path / "c.sqlite")
    result = runner.invoke(
        app,
        [
            "cache",
            "explain",
            "--model",
            "openai-compatible/m",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--prompt",
            "hi",
            "--path",
            path,
        ],
    )
    assert result.exit_code == 0 and "new prompt" in result.output
    stats = runner.invoke(app, ["cache", "stats", "--path", path])
    assert stats.exit_code == 0 and "c.sqlite" in stats.output


def test_run_coverage_and_privacy_on_sample(tmp_path: Path) -> None:
    cov = runner.invoke(
        app,
        [
            "run",
            "coverage",
            "--out",
            str(tmp_path / "c"),
            "--n-boot",
            "100",
            "--budgets",
            "1k,4k,1M",
        ],
    )
    assert cov.exit_code == 0, cov.output
    assert "coverage@1k" in cov.output and "coverage@1M" in cov.output
    assert (tmp_path / "c" / "coverage.csv").exists()
    priv = runner.invoke(
        app, ["run", "privacy", "--out", str(tmp_path / "p"), "--n-boot", "100", "--repeats", "2"]
    )
    assert priv.exit_code == 0, priv.output
    assert "accuracy" in priv.output and "shuffled authors" in priv.output


def test_track_says_what_the_corpus_lacks(memorybank_dir: Path, tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["run", "coverage", "--dataset", str(memorybank_dir), "--out", str(tmp_path)]
    )
    assert result.exit_code == 2
    assert "reference" in result.output or "evidence" in result.output


def test_run_detection_without_a_model(tmp_path: Path) -> None:
    result = runner.invoke(app, ["run", "detection", "--out", str(tmp_path), "--n-boot", "100"])
    assert result.exit_code == 0, result.output
    assert "lexical" in result.output and "bm25" in result.output
    assert "caught" in result.output


def test_run_chat_against_a_loopback_server(tmp_path: Path) -> None:
    from dialogbench.testing import ChatServer

    with ChatServer(reply=lambda body: "That sounds lovely.") as srv:
        result = runner.invoke(
            app,
            [
                "run",
                "chat",
                "--model",
                "openai-compatible/test",
                "--base-url",
                srv.base_url,
                "--limit",
                "1",
                "--out",
                str(tmp_path),
                "--n-boot",
                "100",
            ],
        )
    assert result.exit_code == 3, result.output  # unscored replies: a run with failures
    assert "Paired gains" in result.output
    assert "unscored" in result.output  # the server's prose is no verdict: shown, not scored 0
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["roles"]["judge"] == {"same_as": "model"}  # it judged its own replies


def test_run_reconstruction_against_a_loopback_server(tmp_path: Path) -> None:
    from dialogbench.testing import ChatServer

    with ChatServer() as srv:  # answers each schema with a minimal valid instance
        result = runner.invoke(
            app,
            [
                "run",
                "reconstruction",
                "--model",
                "openai-compatible/t",
                "--base-url",
                srv.base_url,
                "--limit",
                "1",
                "--context-tokens",
                "100000",
                "--out",
                str(tmp_path),
                "--n-boot",
                "100",
            ],
        )
    assert result.exit_code == 0, result.output
    assert "Reconstruction, meaning matching (95% intervals" in result.output
    assert (tmp_path / "summary.json").exists()
    same = runner.invoke(
        app, ["compare", "reconstruction", str(tmp_path), str(tmp_path), "--n-boot", "100"]
    )
    assert same.exit_code == 0, same.output
    assert "agreement (F1)" in same.output


def test_run_questions_against_a_loopback_server(tmp_path: Path) -> None:
    from dialogbench.testing import ChatServer

    with ChatServer(reply=lambda body: "No information available.") as srv:
        result = runner.invoke(
            app,
            [
                "run",
                "questions",
                "--model",
                "openai-compatible/t",
                "--base-url",
                srv.base_url,
                "--limit",
                "3",
                "--systems",
                "retrieval",
                "--out",
                str(tmp_path),
                "--n-boot",
                "100",
            ],
        )
    assert result.exit_code == 3, result.output  # its own prose is no verdict: unscored
    assert "context 'retrieval'" in result.output and "counts:" in result.output


def test_model_tracks_say_what_the_corpus_lacks(
    locomo_dir: Path, memorybank_dir: Path, tmp_path: Path
) -> None:
    cases = [
        (
            ["chat", "--dataset", str(locomo_dir), "--model", "embedded"],
            "no chat item with a reference reply",
        ),
        (
            ["reconstruction", "--model", "embedded", "--dataset", str(locomo_dir)],
            "has a profile or persona",  # found before the model is opened
        ),
        (
            ["questions", "--dataset", str(memorybank_dir), "--model", "embedded"],
            "no gold answers",
        ),
    ]
    for args, says in cases:
        result = runner.invoke(app, ["run", *args, "--out", str(tmp_path)])
        assert result.exit_code == 2 and says in result.output, result.output


DEMO_FIXTURES = Path(__file__).parent / "data" / "demo" / "fixtures"


def _demo_reply(body: dict[str, Any]) -> str:
    """Agents say one line each, then end; the judge scores every dimension 7."""
    system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
    if system in {ip.EN.agent_system, ip.ZH.agent_system}:
        speaker = re.search(r"^## (?:You are |你是)(.+)$", user, re.MULTILINE)
        assert speaker is not None
        if re.search(r"^(?:Turn \d+ - |第 \d+ 轮 - )", user, re.MULTILINE):
            return json.dumps({"end": True})
        return json.dumps({"person": speaker.group(1), "content": "Hello there."})
    return json.dumps({"reason": "fine", **dict.fromkeys(ip.DIMENSIONS, 7)})


def test_demo_runs_and_report_against_a_loopback_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dialogbench.testing import ChatServer

    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    monkeypatch.setenv("MY_JUDGE_KEY", "sk-judge-secret-123")
    aware, inter = tmp_path / "aware", tmp_path / "inter"
    with ChatServer() as srv:  # a minimal valid instance of each answer and verdict schema
        result = runner.invoke(
            app,
            [
                "run",
                "demo-awareness",
                "--dataset",
                str(DEMO_FIXTURES / "element_awareness_en.json"),
                "--model",
                "openai-compatible/t",
                "--base-url",
                srv.base_url,
                "--judge-model",
                "openai-compatible/j",
                "--judge-base-url",
                srv.base_url,
                "--judge-api-key-env",
                "MY_JUDGE_KEY",
                "--out",
                str(aware),
                "--n-boot",
                "100",
            ],
        )
    assert result.exit_code == 0, result.output
    assert "Element awareness on" in result.output and "awareness average" in result.output
    assert "counts (en)" in result.output
    for name in ("manifest.json", "summary.json", "items.jsonl", "counts.json"):
        assert (aware / name).exists(), name
    judge = json.loads((aware / "manifest.json").read_text())["roles"]["judge"]
    assert judge["model"] == "openai-compatible/j" and judge["api_key_env"] == "MY_JUDGE_KEY"
    assert not any("sk-judge-secret" in f.read_text() for f in aware.rglob("*.json*"))

    with ChatServer(reply=_demo_reply) as srv:
        result = runner.invoke(
            app,
            [
                "run",
                "demo-interaction",
                "--dataset",
                str(DEMO_FIXTURES),
                "--model",
                "openai-compatible/t",
                "--base-url",
                srv.base_url,
                "--max-turns",
                "4",
                "--out",
                str(inter),
                "--n-boot",
                "100",
            ],
        )
    assert result.exit_code == 0, result.output
    assert "Dialogue agent interaction on" in result.output
    summary = json.loads((inter / "summary.json").read_text())
    assert set(summary) == {"en", "zh"}
    assert summary["en"]["goal"]["value"] == 7 and summary["en"]["goal"]["n"] == 3
    assert summary["zh"]["realism"]["n"] == 2

    report = runner.invoke(
        app, ["report", "demo", "--awareness", str(aware), "--interaction", str(inter)]
    )
    assert report.exit_code == 0, report.output
    assert "DEMO (en)" in report.output and "DEMO (zh)" in report.output
    # en has both parts, so an overall; zh has no awareness run, which the table says
    assert report.output.count("note:") == 1 and "no awareness score" in report.output
    assert "interaction: believability" in report.output and "overall" in report.output
    assert "overall (DEMO: (2 aw + int) / 3)" in report.output
    assert "(aw + int) / 2 (not DEMO)" in report.output

    swapped = runner.invoke(app, ["report", "demo", "--awareness", str(inter)])
    assert swapped.exit_code == 2 and "demo-interaction" in swapped.output, swapped.output
    nothing = runner.invoke(app, ["report", "demo"])
    assert nothing.exit_code == 2 and "--awareness" in nothing.output


def test_every_listed_name_validates(
    monkeypatch: pytest.MonkeyPatch,
    locomo_dir: Path,
    memorybank_dir: Path,
    cped_dir: Path,
    casino_dir: Path,
    sotopia_dir: Path,
) -> None:
    """Each name `data list` shows is known to `data validate` (DEMO corpora included)."""
    monkeypatch.setenv("DIALOGBENCH_DATA", str(locomo_dir.parent))
    listed = runner.invoke(app, ["data", "list"]).output
    for name in ("sample", "locomo", "memorybank", "cped", "casino", "sotopia"):
        assert name in listed
        result = runner.invoke(app, ["data", "validate", name])
        assert result.exit_code == 0, result.output
        assert result.output.startswith(f"{name}: valid."), result.output
    cped = runner.invoke(app, ["data", "validate", "cped:valid"]).output
    assert "dialogues" in cped and "awareness items (persona" in cped
    sotopia = runner.invoke(app, ["data", "validate", "sotopia"]).output
    assert "450 episodes" in sotopia


def test_validate_rejects_a_lone_surrogate(tmp_path: Path) -> None:
    folder = tmp_path / "x"
    folder.mkdir()
    (folder / "conversation.jsonl").write_text('{"id": "a", "speaker": "A", "text": "\\ud800"}\n')
    result = runner.invoke(app, ["data", "validate", str(folder)])
    assert result.exit_code == 2 and "lone surrogate" in result.output


DEMO_FIXTURES = Path(__file__).parent / "data" / "demo" / "fixtures"


def test_validate_demo_paths_as_named_sets(monkeypatch: pytest.MonkeyPatch) -> None:
    """A DEMO corpus folder by path gets the same summary line as the set by name; DEMO's
    released files (a folder or one file) get the DEMO summary too."""
    monkeypatch.setenv("DIALOGBENCH_DATA", str(DEMO_FIXTURES))
    for name, named in (("cped", "cped:test"), ("casino", "casino:test"), ("sotopia", "sotopia")):
        by_path = runner.invoke(app, ["data", "validate", str(DEMO_FIXTURES / name)])
        assert by_path.exit_code == 0, by_path.output
        assert by_path.output.startswith(f"{name}: valid."), by_path.output
        assert by_path.output == runner.invoke(app, ["data", "validate", named]).output
    folder = runner.invoke(app, ["data", "validate", str(DEMO_FIXTURES)])
    assert folder.exit_code == 0, folder.output
    text = " ".join(folder.output.split())
    assert text.startswith("fixtures: valid. 0 dialogues, 8 awareness items (goal 2"), text
    assert "5 episodes; sha256 " in text
    one = runner.invoke(app, ["data", "validate", str(DEMO_FIXTURES / "element_awareness_en.json")])
    assert one.exit_code == 0 and one.output.startswith("element_awareness_en: valid."), one.output
    broken = runner.invoke(app, ["data", "validate", str(DEMO_FIXTURES / "cped_broken")])
    assert broken.exit_code == 2 and "missing column 'DA'" in broken.output, broken.output


def test_validate_names_what_a_folder_was_looked_for_as(tmp_path: Path) -> None:
    for folder in (tmp_path, DEMO_FIXTURES / "broken"):
        result = runner.invoke(app, ["data", "validate", str(folder)])
        assert result.exit_code == 2, result.output
        text = " ".join(result.output.split())
        assert text.count("error") == 1, text
        for looked_for in (
            "release subject files",
            "LoCoMo",
            "element_awareness_*.json",
            "dialogue_agent_interaction_*.jsonl",
            "cped/test_split.csv",
            "casino/casino_test.json",
            "sotopia/env_agent_combo_storages.jsonl",
        ):
            assert looked_for in text, (looked_for, text)


def test_validate_real_demo_folders_by_path(
    cped_dir: Path, casino_dir: Path, sotopia_dir: Path
) -> None:
    for folder in (cped_dir, casino_dir, sotopia_dir):
        by_path = runner.invoke(app, ["data", "validate", str(folder)])
        assert by_path.exit_code == 0, by_path.output
        assert by_path.output == runner.invoke(app, ["data", "validate", folder.name]).output


def test_reimport_is_refused_or_replaced_whole(tmp_path: Path) -> None:
    """Issue 26, point 2: a second import never leaves the first one's subjects behind."""
    out = tmp_path / "release"
    folder = tmp_path / "exports"
    folder.mkdir()
    for name in ("chat_a", "chat_b"):
        (folder / f"{name}.json").write_text(
            json.dumps({"turns": [{"speaker": "me", "text": name}]})
        )
    assert _import(folder, out).exit_code == 0
    (folder / "chat_b.json").unlink()
    (folder / "chat_c.json").write_text(json.dumps({"turns": [{"speaker": "me", "text": "c"}]}))
    again = _import(folder, out)
    assert again.exit_code == 2 and "already holds files" in again.output
    assert "--force" in again.output and "Traceback" not in again.output
    assert sorted(p.name for p in out.iterdir()) == ["chat_a", "chat_b", "dataset.json"]
    forced = _import(folder, out, "--force")
    assert forced.exit_code == 0, forced.output
    assert sorted(p.name for p in out.iterdir()) == ["chat_a", "chat_c", "dataset.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exports", "release"]
    check = runner.invoke(app, ["data", "validate", str(out)])
    assert check.exit_code == 0 and "2 subjects" in check.output, check.output
    other = tmp_path / "notes"
    other.mkdir()
    (other / "todo.txt").write_text("mine")
    refused = _import(folder, other, "--force")
    assert refused.exit_code == 2 and "not a release" in refused.output
    assert (other / "todo.txt").read_text() == "mine"
    blocked = _import(folder, other / "todo.txt" / "release")
    assert blocked.exit_code == 2 and "Traceback" not in blocked.output
    assert "cannot write the release" in blocked.output


def test_import_stops_when_most_evidence_dangles(tmp_path: Path) -> None:
    """Issue 26, point 3: turn ids read from the wrong place drop every cited id; the import
    stops naming --turn-id-field, and --allow-dangling imports anyway."""
    sample = FIXTURES / "locomo_like_sample.json"
    args = [a for a in LOCOMO_LIKE_ARGS if a not in ("--turn-id-field", "dia_id")]
    result = _import(sample, tmp_path / "x", *args)
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "7 of 7 cited evidence ids name no turn" in result.output
    assert "pass --turn-id-field dia_id" in result.output
    assert not (tmp_path / "x").exists()
    allowed = _import(sample, tmp_path / "y", *args, "--allow-dangling")
    assert allowed.exit_code == 0, allowed.output
