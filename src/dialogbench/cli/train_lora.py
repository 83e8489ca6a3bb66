"""`dialogbench train lora`: the LoRA recipe (`dialogbench.train.lora`).

`register(train_app)` adds the command to the `train` group.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dialogbench.cli.ui import console, friendly_errors


def train_lora_cmd(
    data: Annotated[Path, typer.Argument(help="the folder `export sft` wrote (train/val.jsonl)")],
    base: Annotated[str, typer.Option("--base", help="base model: a local folder or hub id")],
    out: Annotated[Path, typer.Option("--out", help="folder for the adapter and losses.json")],
    learning_rate: Annotated[float, typer.Option(help="peak learning rate")] = 1e-4,
    epochs: Annotated[float, typer.Option(help="passes over the training data")] = 3.0,
    batch_size: Annotated[int, typer.Option(help="total batch (per device x accumulation)")] = 32,
    per_device_batch: Annotated[int, typer.Option(help="examples per device and step")] = 4,
    max_length: Annotated[int, typer.Option(help="cut-off length in tokens")] = 8192,
    gradient_checkpointing: Annotated[
        bool, typer.Option(help="recompute activations: less memory, slower steps")
    ] = True,
    rank: Annotated[int, typer.Option(help="LoRA rank")] = 16,
    alpha: Annotated[int, typer.Option(help="LoRA alpha")] = 32,
    assistant_only_loss: Annotated[
        bool, typer.Option(help="learn from assistant turns only (template must mark them)")
    ] = False,
    seed: Annotated[int, typer.Option(help="training seed")] = 0,
) -> None:
    """Fine-tune a LoRA adapter on exported DEMO trajectories (the paper's settings by
    default: lr 1e-4, 3 epochs, cosine with 10% warm-up, batch 32, cut-off 8192, the
    lowest-validation-loss checkpoint kept). Needs `pip install 'dialogbench[lora]'`."""
    from dialogbench.train.lora import LoraSettings, load_base, read_chats, require, train_lora

    with friendly_errors():
        settings = LoraSettings(
            learning_rate=learning_rate,
            epochs=epochs,
            batch_size=batch_size,
            per_device_batch=per_device_batch,
            max_length=max_length,
            rank=rank,
            alpha=alpha,
            assistant_only_loss=assistant_only_loss,
            gradient_checkpointing=gradient_checkpointing,
            seed=seed,
        )
        read_chats(data / "train.jsonl" if data.is_dir() else data)  # bad data: before loading
        require()
        model, tokenizer = load_base(base)
        result = train_lora(data, out, model, tokenizer, settings)
        tokenizer.save_pretrained(str(result.adapter))
    first = result.train_loss[0] if result.train_loss else float("nan")
    last = result.train_loss[-1] if result.train_loss else float("nan")
    console.print(
        f"{result.steps} steps; training loss {first:.3f} -> {last:.3f}; "
        f"validation loss {result.eval_loss}; adapter in {result.adapter}"
    )


def register(train_app: typer.Typer) -> None:
    """Add `train lora` to the `train` group."""
    train_app.command("lora")(train_lora_cmd)
