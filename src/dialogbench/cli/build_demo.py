"""`dialogbench build demo`: DEMO's synthesis pipeline (`dialogbench.build.demo`).

`register(build_app)` adds the command to the `build` group.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from dialogbench.cli.run import show_failures
from dialogbench.cli.ui import console, friendly_errors, with_progress
from dialogbench.models.spec import DEFAULT_DEADLINE_S, DEFAULT_TIMEOUT_S
from dialogbench.runner.roles import RoleSpec
from dialogbench.runner.status import EXIT_STATUS_HELP

BUILD_HELP = (
    "Build a DEMO-style benchmark from seed dialogues in five resumable stages: goal and "
    "scene distillation, persona design, conflict assessment, dialogue generation with "
    "annotation, and quality control by two checker models with a majority vote. The "
    "output loads into demo-awareness and demo-interaction (--dataset OUT); OUT is also the "
    "run folder (manifest.json, parts/, usage.json, warnings.json)."
)


def _pick(values: list[str] | None, i: int, n: int, option: str) -> str | None:
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    if len(values) != n:
        raise ValueError(f"{option}: give it once (for every checker) or once per checker")
    return values[i]


def build_demo_cmd(
    seed: Annotated[str, typer.Option("--seed", help="seed corpus: cped, casino, sample, a path")],
    out: Annotated[Path, typer.Option("--out", help="build folder (resumed when it exists)")],
    model: Annotated[str, typer.Option("--model", help="provider/model, or 'embedded'")],
    base_url: Annotated[str | None, typer.Option(help="the model's server URL")] = None,
    api_key_env: Annotated[
        str | None, typer.Option(help="environment variable holding the model's API key")
    ] = None,
    checker_model: Annotated[
        list[str] | None,
        typer.Option(help="a checker model (give two); without, the model checks twice"),
    ] = None,
    checker_base_url: Annotated[
        list[str] | None, typer.Option(help="checker server URL (once, or once per checker)")
    ] = None,
    checker_api_key_env: Annotated[
        list[str] | None, typer.Option(help="checker key variable (once, or per checker)")
    ] = None,
    timeout: Annotated[
        float, typer.Option(help="seconds one request may take (every model)", min=0.001)
    ] = DEFAULT_TIMEOUT_S,
    deadline: Annotated[
        float, typer.Option(help="seconds one call may take with its retries", min=0.001)
    ] = DEFAULT_DEADLINE_S,
    limit: Annotated[int, typer.Option(help="at most N seed dialogues", min=1)] = 20,
    personas: Annotated[
        int | None, typer.Option(help="personas to design (default: 2 per seed)", min=2)
    ] = None,
    pairs_per_goal: Annotated[int, typer.Option(help="persona pairs per goal", min=1)] = 1,
    dialogues: Annotated[
        int | None, typer.Option(help="dialogues to generate (default: every kept one)", min=1)
    ] = None,
    min_turns: Annotated[int, typer.Option(help="fewest utterances in a dialogue", min=2)] = 6,
    max_turns: Annotated[int, typer.Option(help="most utterances in a dialogue", min=2)] = 12,
    temperature: Annotated[
        float, typer.Option(help="sampling temperature of persona and dialogue writing")
    ] = 0.7,
    max_tokens: Annotated[int, typer.Option(help="reply length limit", min=16)] = 2048,
    max_fixes: Annotated[int, typer.Option(help="corrections after a bad reply", min=0)] = 2,
    random_seed: Annotated[int, typer.Option(help="seed of every random draw")] = 0,
    sotopia_pool: Annotated[
        bool, typer.Option(help="SOTOPIA's profiles first as English personas, when on disk")
    ] = True,
    persona_texts: Annotated[
        Path | None,
        typer.Option(
            help="web passages (one per line, or JSONL with 'text'): each persona's design is "
            "shown one, as the paper prompts with web texts"
        ),
    ] = None,
) -> None:
    """Build a DEMO-style benchmark (see `dialogbench build demo --help`)."""
    from dialogbench.build.demo import BuildConfig, build_demo

    with friendly_errors():
        config = BuildConfig(
            seed_dataset=seed,
            limit=limit,
            personas=personas,
            pairs_per_goal=pairs_per_goal,
            dialogues=dialogues,
            min_turns=min_turns,
            max_turns=max_turns,
            temperature=temperature,
            max_tokens=max_tokens,
            max_fixes=max_fixes,
            seed=random_seed,
            sotopia_pool=sotopia_pool,
            persona_texts=None if persona_texts is None else str(persona_texts),
        )
        main = RoleSpec(
            model,
            base_url=base_url,
            api_key_env=api_key_env,
            timeout_s=timeout,
            deadline_s=deadline,
        )
        checkers = checker_model or []
        if len(checkers) not in (0, 2):
            raise ValueError(f"--checker-model: give two checkers (or none), not {len(checkers)}")
        specs = [
            RoleSpec(
                m,
                base_url=_pick(checker_base_url, i, 2, "--checker-base-url"),
                api_key_env=_pick(checker_api_key_env, i, 2, "--checker-api-key-env"),
                timeout_s=timeout,
                deadline_s=deadline,
            )
            for i, m in enumerate(checkers)
        ]
        pair = (specs[0], specs[1]) if specs else None
        summary, finished = with_progress(
            f"build demo from {seed}",
            lambda progress: build_demo(config, out, main, pair, progress),
        )
        console.print(steps_table(summary))
        console.print(
            f"{summary['output']['dialogues']} dialogues written to {out}: "
            + ", ".join(f"{k} ({v})" for k, v in summary["output"]["files"].items())
        )
        show_failures(finished)
        if not summary["complete"]:
            console.print(
                f"{summary['unfinished_units']} units unfinished (failed, unparsed or "
                "waiting): rerun the same command to retry them"
            )
    raise typer.Exit(finished.exit_code)


def steps_table(summary: dict[str, Any]) -> Table:
    """One row per step: its units and how each ended."""
    table = Table(title="build demo: steps")
    columns = ("units", "ok", "rejected", "failed", "unparsed", "waiting", "not_run")
    table.add_column("step")
    for c in columns:
        table.add_column(c, justify="right")
    for name, counts in summary["steps"].items():
        table.add_row(name, *(str(counts.get(c, 0)) for c in columns))
    return table


def register(build_app: typer.Typer) -> None:
    """Add `build demo` to the `build` group."""
    build_app.command("demo", help=BUILD_HELP, epilog=EXIT_STATUS_HELP)(build_demo_cmd)
