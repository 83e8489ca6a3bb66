"""`dialogbench quickstart`: the README's first command.

On the built-in sample it runs the retrieval, coverage and privacy tracks (and retrieval on
LoCoMo when it is on this machine), one model-backed track on a few probes (memory-need
detection, with the embedded smoke-test model unless `--model` names a real one), and writes
one HTML report of all of them.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer

from dialogbench.cli.run import show
from dialogbench.cli.ui import console, friendly_errors, with_progress
from dialogbench.data.model import Dataset
from dialogbench.data.registry import REGISTRY, load_dataset, locate
from dialogbench.models.embedded import unavailable
from dialogbench.models.spec import IN_PROCESS_DEADLINE_S, IN_PROCESS_TIMEOUT_S
from dialogbench.report.html import write_report
from dialogbench.runner import REGISTRY as TRACKS
from dialogbench.runner import Finished, run_track
from dialogbench.runner.record import Progress
from dialogbench.runner.roles import RoleSpec

NO_MODEL_TRACKS = ("retrieval", "coverage", "privacy")
MODEL_TRACK, MODEL_PROBES = "detection", 3
EMBEDDED_NOTE = (
    "The embedded model (SmolLM2-135M, on this CPU) is for smoke tests: it shows the harness "
    "working, not what a model can do. Point the same command at a real server with "
    "`dialogbench quickstart --model openai/NAME --base-url http://HOST:PORT/v1` "
    "(any OpenAI-compatible server; `--api-key-env VAR` names the variable holding its key)."
)


def _run(name: str, ds: Dataset, folder: Path, config: Any, roles: dict[str, Any]) -> Path:
    track = TRACKS[name]

    def work(progress: Progress) -> Finished:
        return run_track(track, ds, folder, config, roles, progress=progress)

    finished = with_progress(f"{name} on {ds.name}", work)
    show(track, finished, config, roles, ds)
    return folder


def quickstart(
    out: Annotated[Path, typer.Option(help="folder for the runs")] = Path("runs/quickstart"),
    model: Annotated[
        str, typer.Option(help="the model of the model-backed track (provider/name)")
    ] = "embedded",
    base_url: Annotated[str | None, typer.Option(help="its server URL")] = None,
    api_key_env: Annotated[
        str | None, typer.Option(help="environment variable holding its API key")
    ] = None,
) -> None:
    """Retrieval, coverage and privacy on the built-in sample (retrieval on LoCoMo too when it
    is here), memory-need detection by a model on three probes, and one HTML report of all."""
    with friendly_errors():
        sample = load_dataset("sample")
        runs = [
            _run(name, sample, out / "sample" / name, TRACKS[name].config_type(), {})
            for name in NO_MODEL_TRACKS
        ]
        here = locate(REGISTRY["locomo"]) is not None
        if here:
            locomo = load_dataset("locomo")
            config = TRACKS["retrieval"].config_type()
            runs.append(_run("retrieval", locomo, out / "locomo" / "retrieval", config, {}))
        why_not = unavailable() if model == "embedded" else None
        if why_not is None:
            spec = RoleSpec(model=model, base_url=base_url, api_key_env=api_key_env)
            if model == "embedded":
                spec = replace(
                    spec,
                    max_connections=1,
                    timeout_s=IN_PROCESS_TIMEOUT_S,
                    deadline_s=IN_PROCESS_DEADLINE_S,
                )
            config = replace(TRACKS[MODEL_TRACK].config_type(), limit=MODEL_PROBES)
            folder = out / "sample" / f"{MODEL_TRACK}-model"
            runs.append(_run(MODEL_TRACK, sample, folder, config, {"model": spec}))
        else:
            console.print(f"[yellow]skipped the model-backed track:[/] {why_not}")
        page = write_report(runs, out / "report.html")
        console.print(
            f"report of these runs: {page} ({len(runs)} runs; open it, or `dialogbench view`)"
        )
        if model == "embedded":
            console.print(EMBEDDED_NOTE)
        if not here:
            console.print(
                "LoCoMo is not on this machine: set DIALOGBENCH_DATA or run "
                "`dialogbench data download locomo` to include it."
            )
