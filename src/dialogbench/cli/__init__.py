"""The `dialogbench` command line."""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import shlex
from collections import Counter
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

import dialogbench.tracks  # noqa: F401  (registers every track)
from dialogbench.cli import build_demo, export_sft, quickstart, train_lora
from dialogbench.cli.agreement import agreement_cmd
from dialogbench.cli.answers import score_app
from dialogbench.cli.build import build_app, data_show
from dialogbench.cli.compare import compare_app
from dialogbench.cli.export import export_app
from dialogbench.cli.report import register as register_report
from dialogbench.cli.report_demo import print_table3
from dialogbench.cli.run import TrackCommands, register_commands
from dialogbench.cli.ui import console, csv, err, friendly_errors, table_of
from dialogbench.data.demo.model import TASKS
from dialogbench.data.demo.registry import (
    DEMO_DATASETS,
    demo_layouts,
    is_demo_path,
    load_demo,
    locate_demo,
)
from dialogbench.data.download import download
from dialogbench.data.errors import DataError
from dialogbench.data.generic import FIELD_HELP, ImportConfig, flag, import_chat_export
from dialogbench.data.model import Dataset
from dialogbench.data.registry import REGISTRY, load_dataset, locate, sniff_folder
from dialogbench.data.release import is_release, write_new_release
from dialogbench.data.sniff import Sniffed, sniff
from dialogbench.models import (
    CallKey,
    ChatMessage,
    GenerateConfig,
    Model,
    ModelError,
    ModelSpec,
    ResponseCache,
    make_provider,
)
from dialogbench.models.check import CheckReport, check_model
from dialogbench.models.spec import DEFAULT_TIMEOUT_S, public_url
from dialogbench.models.types import unreachable_reason
from dialogbench.runner import REGISTRY as TRACKS
from dialogbench.runner.status import ExitCode
from dialogbench.stats.bootstrap import Estimate
from dialogbench.tracks.demo.aggregate import AwarenessTable, TableRow, paper_table

app = typer.Typer(help=__doc__, no_args_is_help=True, pretty_exceptions_enable=False)
run_app = typer.Typer(cls=TrackCommands, help="Run a benchmark track.", no_args_is_help=True)
data_app = typer.Typer(help="List, download, validate and import datasets.", no_args_is_help=True)
app.add_typer(run_app, name="run")
app.add_typer(data_app, name="data")
app.add_typer(build_app, name="build")
build_demo.register(build_app)
data_app.command("show")(data_show)
export_sft.register(export_app)
train_app = typer.Typer(help="Fine-tune models on exported trajectories.", no_args_is_help=True)
app.add_typer(train_app, name="train")
train_lora.register(train_app)
register_commands(run_app, TRACKS)
app.add_typer(score_app, name="score")
app.add_typer(export_app, name="export")
app.command("agreement")(agreement_cmd)
app.command("quickstart")(quickstart.quickstart)
ModelOpt = Annotated[str, typer.Option("--model", help="provider/model, or 'embedded'")]
BaseUrlOpt = Annotated[str | None, typer.Option(help="server URL, e.g. http://host:8000/v1")]
KeyEnvOpt = Annotated[str | None, typer.Option(help="environment variable holding the API key")]


report_app = typer.Typer(help="Tables across finished runs.", no_args_is_help=True)
app.add_typer(report_app, name="report")
register_report(app, report_app)  # `report RUN_DIR...` (HTML) and `view`


@report_app.command("demo")
def report_demo_cmd(
    runs: Annotated[
        list[Path] | None,
        typer.Argument(help="finished DEMO runs, one or two per model: the paper's Table 3"),
    ] = None,
    n_boot: Annotated[int, typer.Option(help="bootstrap resamples", min=1)] = 2000,
    awareness: Annotated[
        Path | None, typer.Option(help="a finished demo-awareness run folder")
    ] = None,
    interaction: Annotated[
        Path | None, typer.Option(help="a finished demo-interaction run folder")
    ] = None,
) -> None:
    """DEMO's table. With RUN_DIR...: the paper's Table 3, one row per model, English and
    Chinese apart and pooled. With --awareness/--interaction only: one run's figures with
    their intervals, per language."""
    with friendly_errors():
        if runs:
            print_table3([*runs, *(r for r in (awareness, interaction) if r)], n_boot, seed=0)
            return
        if awareness is None and interaction is None:
            raise ValueError("give RUN_DIR... (or --awareness RUN and/or --interaction RUN)")
        tables: dict[str, AwarenessTable] = {}
        if awareness is not None:
            found = _summary(awareness, "demo-awareness")["awareness"]
            tables = {lang: AwarenessTable.model_validate(t) for lang, t in found.items()}
        dims: dict[str, dict[str, Estimate]] = {}
        if interaction is not None:
            found = _summary(interaction, "demo-interaction")
            dims = {
                lang: {k: Estimate.model_validate(v) for k, v in figures.items()}
                for lang, figures in found.items()
            }
        rows = paper_table(tables, dims)
        for lang, row in rows.items():
            console.print(table_of(f"DEMO ({lang})", _row_table(row), "part"))
            for note in row.notes:
                console.print(Text.assemble(("note: ", "yellow"), note))


def _summary(run: Path, track: str) -> dict[str, Any]:
    """A finished run's summary.json, checking the manifest says which track wrote it."""
    manifest, summary = run / "manifest.json", run / "summary.json"
    if not summary.exists() or not manifest.exists():
        raise DataError(run, "no finished run here", fix=f"run `dialogbench run {track}` first")
    wrote = json.loads(manifest.read_text()).get("track")
    if wrote != track:
        raise DataError(manifest, f"written by {wrote!r}, not {track!r}", field="track")
    loaded: dict[str, Any] = json.loads(summary.read_text())
    return loaded


def _row_table(row: TableRow) -> dict[str, dict[str, Estimate]]:
    """One line per figure (the two halves share names such as `goal`, so not columns)."""
    table: dict[str, dict[str, Estimate]] = {}
    for part, figures, average in (
        ("element awareness", row.awareness, row.awareness_average),
        ("interaction", row.interaction, row.interaction_average),
    ):
        if figures:
            for name, e in {**figures, "average": average}.items():
                table[f"{part}: {name}"] = {"score 0-10": e}
    table["overall (DEMO: (2 aw + int) / 3)"] = {"score 0-10": row.overall}
    table["(aw + int) / 2 (not DEMO)"] = {"score 0-10": row.mean_of_averages}
    return table


def _fmt(e: Estimate) -> str:
    return f"{e.value:.3f} [{e.ci_low:.3f}, {e.ci_high:.3f}] (n={e.n})"


app.add_typer(compare_app, name="compare")


@data_app.command("list")
def data_list() -> None:
    """Datasets dialogbench knows, and whether each is on this machine."""

    table = Table(title="Datasets", title_justify="left")
    for col in ("name", "here", "carries", "licence", "description"):
        table.add_column(col)
    table.add_row(
        "sample",
        "built in",
        "conversation, chat items, questions, profile, persona",
        "CC0-1.0",
        "two subjects written for dialogbench",
    )
    for spec in REGISTRY.values():
        where = locate(spec)
        here = str(where) if where else ("manual download" if spec.manual else "no")
        table.add_row(spec.name, here, spec.carries, spec.licence, spec.description)
    console.print(table)
    demo = Table(title="DEMO corpora (run demo-awareness / demo-interaction)", title_justify="left")
    for col in ("name", "here", "provides", "licence", "description"):
        demo.add_column(col)
    for d in DEMO_DATASETS.values():
        where = locate_demo(d)
        demo.add_row(d.name, str(where) if where else "no", d.provides, d.licence, d.description)
    console.print(demo)
    console.print(
        "Any other data: a release folder (docs/release-format.md) or `dialogbench data import`;"
        " DEMO's own files by path."
    )


@data_app.command("download")
def data_download(
    name: str,
    dest: Annotated[Path | None, typer.Option(help="folder (default: the data home)")] = None,
) -> None:
    """Download a public dataset from its home and check its sha256."""
    with friendly_errors():
        if name not in REGISTRY:
            raise ValueError(f"unknown dataset {name!r}; known: {', '.join(REGISTRY)}")
        folder = download(REGISTRY[name], dest)
        console.print(f"{name}: verified files in {folder}")


@data_app.command("validate")
def data_validate(path: str) -> None:
    """Load a dataset (name or path, DEMO corpora included) and report what it holds, or
    the first problem found."""
    with friendly_errors():
        summary, warnings = validation_report(path)
        console.print(summary)
        for w in warnings:
            console.print(Text.assemble(("warning: ", "yellow"), w))


def validation_report(name_or_path: str) -> tuple[str, list[str]]:
    """`data validate`'s summary line and warnings; a `DataError` for bad input.

    A DEMO corpus by name, or by path (DEMO's released files, a `build demo` output, a
    CPED / CaSiNo / SOTOPIA folder), gets the DEMO summary; anything else is a dataset."""
    path = Path(name_or_path)
    if name_or_path.partition(":")[0] in DEMO_DATASETS or is_demo_path(path):
        demo = load_demo(name_or_path)
        tasks = Counter(i.task for i in demo.items)
        per_task = ", ".join(f"{t} {tasks[t]}" for t in TASKS if tasks[t])
        return (
            f"{demo.name}: valid. {len(demo.dialogues)} dialogues, {len(demo.items)} awareness "
            f"items{f' ({per_task})' if per_task else ''}, {len(demo.episodes)} episodes; "
            f"sha256 {demo.sha256}",
            demo.warnings,
        )
    if path.is_dir() and not is_release(path):
        try:
            sniff_folder(path)
        except DataError:
            raise DataError(
                path,
                "not a dataset folder: no release subject files, no known dataset file "
                f"(LoCoMo, MemoryBank, LongMemEval) and no DEMO files ({demo_layouts()})",
                fix="see docs/release-format.md, `dialogbench data import`, or "
                "`dialogbench data list`",
            ) from None
    ds = load_dataset(name_or_path)
    n_msg = sum(len(s.messages) for s in ds.subjects)
    n_chat = sum(len(s.chat_items) for s in ds.subjects)
    n_q = sum(len(s.questions) for s in ds.subjects)
    n_prof = sum(len(s.profile) for s in ds.subjects)
    n_pers = sum(len(s.persona) for s in ds.subjects)
    n_census = sum(len(s.census) for s in ds.subjects)
    n_reread = sum(len(s.reread) for s in ds.subjects)
    passes = f", {n_census} census labels" if n_census else ""
    passes += f", {n_reread} re-readings" if n_reread else ""
    return (
        f"{ds.name}: valid. {len(ds.subjects)} subjects, {n_msg} messages, {n_chat} chat "
        f"items, {n_q} questions, {n_prof} profile claims, {n_pers} persona entries{passes}; "
        f"sha256 {ds.sha256}",
        ds.warnings,
    )


models_app = typer.Typer(help="Check model endpoints.", no_args_is_help=True)
cache_app = typer.Typer(help="Inspect the response cache.", no_args_is_help=True)
app.add_typer(models_app, name="models")
app.add_typer(cache_app, name="cache")


@models_app.command("check")
def models_check(
    model: ModelOpt,
    base_url: BaseUrlOpt = None,
    api_key_env: KeyEnvOpt = None,
    timeout: Annotated[
        float, typer.Option(help="seconds each request may take", metavar="SECONDS")
    ] = DEFAULT_TIMEOUT_S,
) -> None:
    """Send one tiny request; print latency, token counts and whether JSON mode works."""
    with friendly_errors():
        spec = ModelSpec.parse(model, base_url=base_url, api_key_env=api_key_env, timeout_s=timeout)

        async def go() -> CheckReport:
            m = Model.from_spec(spec, max_retries=1)
            try:
                return await check_model(m)
            finally:
                await m.aclose()

        try:
            report = asyncio.run(go())
        except ModelError as e:
            if e.kind == "unreachable":
                where = public_url(spec.base_url) if spec.base_url else spec.name
                said = f"the server at {where} {unreachable_reason(e)}: {e}"
                err.print(Text.assemble(("error: ", "bold red"), said))
                raise typer.Exit(ExitCode.UNREACHABLE) from None
            raise ValueError(f"{spec.name} did not answer: {e}") from None
        console.print(f"{report.model} at {report.endpoint}")
        console.print(f"  latency      {report.latency_s * 1000:.0f} ms")
        console.print(
            f"  tokens       {report.prompt_tokens} prompt, {report.completion_tokens} completion"
        )
        console.print(f"  reply        {report.reply!r}")
        verdict = "works" if report.json_valid else f"failed (raw: {report.json_raw!r})"
        console.print(f"  JSON output  {verdict}; mode: {report.json_mode}")


CachePathOpt = Annotated[Path | None, typer.Option("--path", help="cache file")]


@cache_app.command("stats")
def cache_stats(path: CachePathOpt = None) -> None:
    """Entries and hits per model and endpoint."""
    with friendly_errors():
        cache = ResponseCache(path)
        stats = cache.stats()
    console.print(f"{stats['path']}: {stats['bytes'] / 1e6:.1f} MB")
    for row in stats["entries"]:
        console.print(
            f"  {row['model']} at {row['endpoint']}: {row['entries']} entries, {row['hits']} hits"
        )


@cache_app.command("explain")
def cache_explain(
    model: ModelOpt,
    prompt: Annotated[str, typer.Option(help="the user message of the call")],
    base_url: BaseUrlOpt = None,
    system: Annotated[str | None, typer.Option(help="a system message before it")] = None,
    temperature: float = 0.0,
    max_tokens: int = 512,
    seed: int = 0,
    sample: int = 0,
    path: CachePathOpt = None,
) -> None:
    """Say whether a call is cached and, if not, how it differs from what is."""
    with friendly_errors():
        spec = ModelSpec.parse(model, base_url=base_url)
        endpoint = make_provider(spec).endpoint
        messages: list[ChatMessage] = [{"role": "user", "content": prompt}]
        if system:
            messages.insert(0, {"role": "system", "content": system})
        config = GenerateConfig(temperature=temperature, max_tokens=max_tokens, seed=seed)
        key = CallKey(spec.name, endpoint, config.cache_fields(), messages, sample)
        console.print(ResponseCache(path).explain(key))


def _import_command() -> Callable[..., None]:
    """`data import`, with one option per `ImportConfig` field (`text_field` -> --text-field)."""
    params = [
        inspect.Parameter(
            "path",
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            annotation=Annotated[
                Path, typer.Argument(help="the export file, or a folder of *.json / *.jsonl files")
            ],
        ),
        inspect.Parameter(
            "out",
            inspect.Parameter.KEYWORD_ONLY,
            annotation=Annotated[Path, typer.Option(help="release folder to write")],
        ),
        inspect.Parameter(
            "force",
            inspect.Parameter.KEYWORD_ONLY,
            default=False,
            annotation=Annotated[
                bool,
                typer.Option(
                    "--force",
                    help="replace an earlier release in --out whole (without it, a folder "
                    "that holds files is refused)",
                ),
            ],
        ),
        inspect.Parameter(
            "dry_run",
            inspect.Parameter.KEYWORD_ONLY,
            default=False,
            annotation=Annotated[
                bool,
                typer.Option(
                    "--dry-run",
                    help="write nothing: print the layout seen, what the import would hold "
                    "and the command that imports it (the options given, the rest found)",
                ),
            ],
        ),
    ]
    tuples = {f.name for f in fields(ImportConfig) if "tuple" in str(f.type)}
    for f in fields(ImportConfig):
        is_tuple = f.name in tuples
        kind: Any = str | None if is_tuple or "None" in str(f.type) else str
        if f.type in ("bool", bool):
            kind = bool
        default = ",".join(f.default) if isinstance(f.default, tuple) else f.default
        what = FIELD_HELP.get(f.name, "")
        what = f"key of the {what}" if f.name.endswith("_field") else what
        extra = " (comma-separated)" if is_tuple else ""
        params.append(
            inspect.Parameter(
                f.name,
                inspect.Parameter.KEYWORD_ONLY,
                default=default,
                annotation=Annotated[kind, typer.Option(flag(f.name), help=what + extra)],
            )
        )

    def command(path: Path, out: Path, force: bool, dry_run: bool, **options: Any) -> None:
        """Convert another chat export into the release format, naming its fields
        (`--dry-run` finds them: it prints the layout it sees and the command to run)."""
        with friendly_errors():
            for name, value in options.items():
                if name in tuples and value is not None:
                    options[name] = tuple(csv(value))  # "" : an empty tuple, not None
                elif value == "":
                    options[name] = None  # --answer-field "" : the export has none
            if dry_run:
                _dry_run(path, out, ImportConfig(**options), force)
                return
            try:
                ds = import_chat_export(path, ImportConfig(**options))
            except DataError as e:
                err.print(Text.assemble(("error: ", "bold red"), str(e)))
                again = shlex.join(["dialogbench", "data", "import", str(path), "--out", str(out)])
                said = (
                    f"`{again} --dry-run` prints the layout it sees and a command that imports it"
                )
                err.print(Text.assemble(("hint: ", "yellow"), said))
                raise typer.Exit(ExitCode.USAGE) from None
            write_new_release(ds, out, force=force)
            console.print(f"wrote {_counts(ds)} to {out}; run it with --dataset {out}")
            _print_warnings(ds.warnings)

    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    return command


def _dry_run(path: Path, out: Path, given: ImportConfig, force: bool) -> None:
    """`data import --dry-run`: the layout seen, what the import would hold, the command."""
    found = sniff(path)
    console.print(Text.assemble(("layout: ", "bold"), found.layout))
    plain = ImportConfig()
    chosen = {**found.options}
    chosen.update(
        (f.name, getattr(given, f.name))
        for f in fields(ImportConfig)
        if getattr(given, f.name) != getattr(plain, f.name)
    )
    options = {f.name: chosen[f.name] for f in fields(ImportConfig) if f.name in chosen}
    ds = import_chat_export(path, ImportConfig(**options))
    console.print(f"would write {_counts(ds)} to {out}")
    _print_warnings(ds.warnings)
    command = Sniffed(found.layout, options).command(path, out, ["--force"] if force else [])
    if out.is_dir() and any(out.iterdir()) and not force:
        said = f"{out} already holds files: the import refuses it (--force replaces a release)"
        console.print(Text.assemble(("note: ", "yellow"), said))
    console.print("import it with:")
    console.print(f"  {command}", soft_wrap=True, markup=False, highlight=False)


def _counts(ds: Dataset) -> str:
    """'N conversations, M messages[, Q questions]' of an imported dataset."""
    n_msg = sum(len(s.messages) for s in ds.subjects)
    n_q = sum(len(s.questions) for s in ds.subjects)
    questions = f", {n_q} questions" if n_q else ""
    return f"{len(ds.subjects)} conversations, {n_msg} messages{questions}"


def _print_warnings(warnings: list[str]) -> None:
    for w in warnings:
        console.print(Text.assemble(("warning: ", "yellow"), w))


data_app.command("import")(_import_command())


def main() -> None:  # pragma: no cover
    os.environ.setdefault("PYTHONIOENCODING", "utf-8")
    app()
