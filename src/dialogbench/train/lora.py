"""A LoRA fine-tuning recipe for the DEMO agent (`dialogbench train lora`).

It trains on what `dialogbench export sft` writes (`train.jsonl`, `val.jsonl`, OpenAI
`messages` or ShareGPT lines) with TRL's `SFTTrainer` and a PEFT LoRA adapter. The defaults
follow the paper's training setting (Wang et al., 2024, appendix C.3): learning rate 1e-4,
3 epochs, cosine schedule with 10% warm-up, a total batch of 32, cut-off length 8192, and
the checkpoint with the lowest validation loss kept. It runs on a GPU when there is one
(bf16 where supported) and on the CPU otherwise.

Needs the `lora` extra: `pip install 'dialogbench[lora]'` (TRL, PEFT, transformers, torch).
The adapter lands in `OUT/adapter` with the tokenizer; `OUT/losses.json` holds the training
and validation loss curves. Serving it and running the tracks against it:
[docs/training.md](../../../docs/training.md).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from dialogbench.data.errors import DataError
from dialogbench.data.io import json_lines

INSTALL = "pip install 'dialogbench[lora]'  (TRL, PEFT, transformers and torch)"
SHAREGPT_ROLES = {"system": "system", "human": "user", "gpt": "assistant"}


@dataclass(frozen=True)
class LoraSettings:
    """The recipe's settings (the paper's where it gives them)."""

    learning_rate: float = 1e-4
    epochs: float = 3.0
    batch_size: int = 32
    """The total batch: per-device batch x gradient accumulation."""
    per_device_batch: int = 4
    max_length: int = 8192
    warmup_ratio: float = 0.1
    scheduler: str = "cosine"
    rank: int = 16
    alpha: int = 32
    dropout: float = 0.05
    target_modules: str | tuple[str, ...] = "all-linear"
    assistant_only_loss: bool = False
    """Learn from the assistant turns only (needs a chat template with generation marks)."""
    gradient_checkpointing: bool = True
    """Recompute activations in the backward pass: less memory, slower steps."""
    seed: int = 0
    logging_steps: int = 1


@dataclass
class LoraResult:
    """Where the adapter went and the loss curves (one value per logged step / eval)."""

    adapter: Path
    train_loss: list[float]
    eval_loss: list[float]
    steps: int
    model: Any = None
    """The trained model (the base with its adapter), in memory."""


def require() -> None:
    """A clear error when the `lora` extra is not installed."""
    try:
        import peft  # noqa: F401
        import torch  # noqa: F401
        import trl  # noqa: F401
    except ImportError as e:
        raise ValueError(f"train lora needs {e.name}: {INSTALL}") from None


def read_chats(path: Path) -> list[list[dict[str, str]]]:
    """The chats of one JSONL file: `messages` lines or ShareGPT `conversations` lines."""
    if not path.exists():
        raise DataError(path, "file not found", fix="give the folder `export sft` wrote")
    chats = []
    fix = "regenerate it with `dialogbench export sft`"
    for n, row in json_lines(path, path.read_text(encoding="utf-8"), fix):
        if "messages" in row:
            chats.append([{"role": m["role"], "content": m["content"]} for m in row["messages"]])
        elif "conversations" in row:
            chats.append(
                [
                    {"role": SHAREGPT_ROLES[t["from"]], "content": t["value"]}
                    for t in row["conversations"]
                ]
            )
        else:
            raise DataError(
                path,
                "neither `messages` nor `conversations`",
                record=f"line {n}",
                fix="give OpenAI messages or ShareGPT lines (`export sft`)",
            )
    return chats


def train_lora(
    data: Path,
    out: Path,
    model: Any,
    tokenizer: Any,
    settings: LoraSettings = LoraSettings(),
) -> LoraResult:
    """Fine-tune a LoRA adapter on `data` (a folder with train.jsonl and val.jsonl, or one
    JSONL file) for `model` (a transformers causal LM) and save it to `out/adapter`."""
    require()
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from trl import SFTConfig, SFTTrainer  # type: ignore[attr-defined,unused-ignore]

    train_path = data / "train.jsonl" if data.is_dir() else data
    val_path = data / "val.jsonl" if data.is_dir() else None
    train = read_chats(train_path)
    val = read_chats(val_path) if val_path is not None and val_path.exists() else []
    if not train:
        raise DataError(train_path, "no examples", fix="export more runs, or a lower --min-score")
    accumulate = max(1, math.ceil(settings.batch_size / settings.per_device_batch))
    gpu = torch.cuda.is_available()
    args = SFTConfig(
        output_dir=str(out / "checkpoints"),
        learning_rate=settings.learning_rate,
        num_train_epochs=settings.epochs,
        per_device_train_batch_size=settings.per_device_batch,
        per_device_eval_batch_size=settings.per_device_batch,
        gradient_accumulation_steps=accumulate,
        lr_scheduler_type=settings.scheduler,
        warmup_steps=settings.warmup_ratio,  # a fraction below 1 is a ratio of all steps
        max_length=settings.max_length,
        assistant_only_loss=settings.assistant_only_loss,
        logging_steps=settings.logging_steps,
        eval_strategy="epoch" if val else "no",
        save_strategy="epoch" if val else "no",
        load_best_model_at_end=bool(val),
        metric_for_best_model="eval_loss" if val else None,
        save_total_limit=2,
        report_to="none",
        seed=settings.seed,
        use_cpu=not gpu,
        bf16=gpu and torch.cuda.is_bf16_supported(),
        disable_tqdm=True,
        gradient_checkpointing=settings.gradient_checkpointing,
    )
    lora = LoraConfig(
        r=settings.rank,
        lora_alpha=settings.alpha,
        lora_dropout=settings.dropout,
        target_modules=(
            settings.target_modules
            if isinstance(settings.target_modules, str)
            else list(settings.target_modules)
        ),
        task_type="CAUSAL_LM",
    )
    trainer = SFTTrainer(
        model=model,
        args=args,
        train_dataset=Dataset.from_list([{"messages": c} for c in train]),
        eval_dataset=Dataset.from_list([{"messages": c} for c in val]) if val else None,
        processing_class=tokenizer,
        peft_config=lora,
    )
    trainer.train()
    adapter = out / "adapter"
    trainer.save_model(str(adapter))
    history = trainer.state.log_history
    result = LoraResult(
        adapter=adapter,
        train_loss=[float(h["loss"]) for h in history if "loss" in h],
        eval_loss=[float(h["eval_loss"]) for h in history if "eval_loss" in h],
        steps=int(trainer.state.global_step),
        model=trainer.model,
    )
    (out / "losses.json").write_text(
        json.dumps(
            {
                "train_loss": result.train_loss,
                "eval_loss": result.eval_loss,
                "steps": result.steps,
                "settings": asdict(settings),
                "train_examples": len(train),
                "val_examples": len(val),
            },
            indent=1,
        )
        + "\n",
        encoding="utf-8",
    )
    return result


def load_base(name: str) -> tuple[Any, Any]:
    """A causal LM and its tokenizer by name or path (downloads only if `name` is a hub id)."""
    require()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(name)
    dtype = torch.bfloat16 if torch.cuda.is_available() else torch.float32
    model = AutoModelForCausalLM.from_pretrained(name, dtype=dtype)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer
