"""`dialogbench build ...`: builders that write a release folder from a loaded dataset
(`build realcompanion`), and `data show FOLDER --item ID`, which prints one chat item's
stages and traces. Add another builder as one more `@build_app.command(...)` here."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from dialogbench.build.realcompanion import BUILD, REPORT, WORK_DIR, build_realcompanion, rule_text
from dialogbench.cli.run import (
    EMBEDDED_NOTE,
    build_config,
    field_params,
    given_roles,
    role_params,
    show_failures,
)
from dialogbench.cli.ui import console, friendly_errors, generated, param, with_progress
from dialogbench.data.model import RECENT_WINDOW, ChatItem, Subject
from dialogbench.data.registry import load_dataset
from dialogbench.runner.runner import models_of
from dialogbench.runner.status import EXIT_STATUS_HELP

build_app = typer.Typer(
    help="Derive ground truth from a dataset into a release folder.", no_args_is_help=True
)


def _realcompanion_command() -> Callable[..., None]:
    """`build realcompanion`: --from, --out, the model and judge role options (as `run`
    has them) and one option per `BuildConfig` field."""
    source = "the dataset to build from: a name (`dialogbench data list`) or a path"
    params = [
        param(
            "source",
            str,
            inspect.Parameter.empty,
            typer.Option("--from", help=source, metavar="NAME|PATH"),
        ),
        param(
            "out",
            Path,
            inspect.Parameter.empty,
            typer.Option(help="release folder to write (a rerun resumes it)"),
        ),
    ]
    for role in BUILD.roles:
        params += role_params(role)
    params += field_params(BUILD.config_type)

    def body(options: dict[str, Any]) -> int:
        source, out = options.pop("source"), options.pop("out")
        given = given_roles(BUILD, options)
        config = build_config(BUILD, options)
        data = load_dataset(source)
        result, finished = with_progress(
            f"build realcompanion from {data.name}",
            lambda progress: build_realcompanion(
                data, out, config, given.get("model"), given.get("judge"), progress
            ),
        )
        report = result.report
        for line in report["sentences"]:
            console.print(line)
        console.print(_counts_table(report))
        known = set(data.warnings)
        for w in finished.warnings:
            if w not in known:
                console.print(Text.assemble(("warning: ", "yellow"), w))
        show_failures(finished)
        if "embedded" in models_of(given):
            console.print(EMBEDDED_NOTE)
        console.print(
            f"wrote {out}/ ({len(result.dataset.subjects)} subjects, {REPORT}); the run "
            f"record is in {out}/{WORK_DIR}/; check it with `dialogbench data validate {out}`"
        )
        return finished.exit_code

    return generated(
        params,
        body,
        "RealCompanion's derivation: probes in three strata, five traced stages each "
        "(resolve, verify, classify by 19 rules, reply, validate), profile and persona.",
    )


def _counts_table(report: dict[str, Any]) -> Table:
    table = Table(title="Built items per stratum and rule", title_justify="left")
    table.add_column("stratum")
    for col in ("sampled", "built", "failed", "recorded", "strict"):
        table.add_column(col, justify="right")
    for stratum, n in report["strata"].items():
        r = report["readings"][stratum]
        table.add_row(
            stratum,
            *(str(x) for x in (n["sampled"], n["built"], n["failed"])),
            str(r["recorded"]),
            str(r["strict"]),
        )
    fired = ", ".join(f"{k} {v}" for k, v in report["rules"].items() if v) or "none"
    table.caption = f"rules fired: {fired}"
    return table


build_app.command("realcompanion", epilog=EXIT_STATUS_HELP)(_realcompanion_command())


def data_show(
    folder: Annotated[str, typer.Argument(help="a release folder (or a dataset name)")],
    item: Annotated[str, typer.Option(help="the probe id, or SUBJECT/PROBE_ID")],
) -> None:
    """Print one chat item: its probe, references, labels (rule, readings) and every stage
    of its trace."""
    with friendly_errors():
        ds = load_dataset(folder)
        want_subject, _, want = item.rpartition("/")
        found = [
            (s, i)
            for s in ds.subjects
            if not want_subject or s.id == want_subject
            for i in s.chat_items
            if i.probe_id == want
        ]
        if not found:
            raise ValueError(f"{folder} has no chat item with probe id {item!r}")
        if len(found) > 1:
            where = ", ".join(f"{s.id}/{want}" for s, _ in found)
            raise ValueError(f"{item!r} names items of several subjects; give one of {where}")
        for line in describe_item(*found[0]):
            console.print(line, highlight=False, markup=False)


def describe_item(subject: Subject, item: ChatItem) -> list[str]:
    """The lines `data show` prints for one item."""
    pos = subject.position_of()
    probe = subject.messages[pos[item.probe_id]]
    lines = [
        f"{subject.id}/{item.probe_id} ({item.stratum}), {probe.speaker}: {probe.text}",
        f"  tier {item.tier or '-'}, locus {item.locus}, surface tier {item.surface_tier or '-'}",
        f"  rule {rule_text(item.rule)}",
        f"  needs memory: recorded {item.needs_memory}, strict {item.needs_memory_strict}; "
        f"dependent {item.dependent}; supported {item.supported}",
        "  references:" + ("" if item.reference_ids else " none"),
    ]
    for rid in item.reference_ids:
        m = subject.messages[pos[rid]]
        back = probe.position - m.position
        where = "recent" if back <= RECENT_WINDOW else f"session {m.session}"
        lines.append(f"    [{rid}] {back} back ({where}) {m.speaker}: {m.text}")
    lines.append(f"  reference reply: {item.reference_reply}")
    for i, stage in enumerate(item.trace):
        reads = f" (reads {', '.join(stage.reads)})" if stage.reads else ""
        lines.append(f"  stage {i + 1} {stage.stage}{reads}:")
        lines += [f"    {line}" for line in stage.output.splitlines()]
    return lines
