"""The LoRA recipe on a tiny randomly initialised Llama built here (no download): the loss
goes down on data exported from real runs, and the adapter saves and reloads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dialogbench.train.lora import LoraSettings, read_chats, train_lora
from dialogbench.train.sft import export_sft

pytest.importorskip(
    "trl", reason="the LoRA recipe needs the lora extra: pip install 'dialogbench[lora]'"
)
pytest.importorskip("peft", reason="the LoRA recipe needs the lora extra")
torch = pytest.importorskip("torch", reason="the LoRA recipe needs the lora extra")

TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>"
    "{% if m['role'] == 'assistant' %}{% generation %}{{ m['content'] }}<|end|>"
    "{% endgeneration %}{% else %}{{ m['content'] }}<|end|>{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def tiny_tokenizer(texts: list[str]) -> Any:
    """A byte-level BPE tokenizer (512 tokens) trained on `texts`, with a chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["<|pad|>", "<|end|>", "<|system|>", "<|user|>", "<|assistant|>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=512,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(texts, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<|pad|>", eos_token="<|end|>")  # type: ignore[no-untyped-call,unused-ignore]
    fast.chat_template = TEMPLATE
    return fast


def tiny_model(vocab: int) -> Any:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=None,
        initializer_range=0.2,  # logits wide enough for a frozen random head to fit
    )
    return LlamaForCausalLM(config)


def test_loss_goes_down_and_adapter_reloads(
    runs: tuple[Path, Path, list[Any]], tmp_path: Path
) -> None:
    from peft import PeftModel

    aw, inter, _ = runs
    export_sft([aw, inter], tmp_path / "sft", val_fraction=0.25, seed=0)
    chats = read_chats(tmp_path / "sft" / "train.jsonl")
    tokenizer = tiny_tokenizer([m["content"] for c in chats for m in c])
    model = tiny_model(len(tokenizer))
    settings = LoraSettings(
        learning_rate=1e-2,
        epochs=6,
        scheduler="constant",
        warmup_ratio=0.0,
        gradient_checkpointing=False,
        batch_size=4,
        per_device_batch=4,
        max_length=384,
        rank=8,
        alpha=16,
        dropout=0.0,
        assistant_only_loss=True,
    )
    result = train_lora(tmp_path / "sft", tmp_path / "lora", model, tokenizer, settings)
    losses = result.train_loss
    third = max(1, len(losses) // 3)
    print("loss curve:", [round(x, 3) for x in losses], "eval:", result.eval_loss)
    assert len(losses) >= 6
    first, last = sum(losses[:third]) / third, sum(losses[-third:]) / third
    assert last < first - 0.3  # nats per token
    saved = json.loads((tmp_path / "lora" / "losses.json").read_text())
    assert saved["train_loss"] == losses and saved["eval_loss"] == result.eval_loss
    assert (result.adapter / "adapter_config.json").exists()

    reloaded = PeftModel.from_pretrained(tiny_model(len(tokenizer)), str(result.adapter))
    trained = result.model
    ids = tokenizer.apply_chat_template(chats[0], tokenize=True, return_tensors="pt")
    ids = ids["input_ids"] if not isinstance(ids, torch.Tensor) else ids
    reloaded.eval()
    base = tiny_model(len(tokenizer)).eval()
    with torch.no_grad():
        got = reloaded(input_ids=ids[:, :64]).logits
        plain = base(input_ids=ids[:, :64]).logits
    assert not torch.allclose(got, plain)  # the adapter changes the base's output
    with torch.no_grad():  # the reloaded adapter gives the trained model's output
        assert torch.allclose(got, trained.eval()(input_ids=ids[:, :64]).logits, atol=1e-5)


def test_read_chats_names_the_bad_line(tmp_path: Path) -> None:
    from dialogbench.data.errors import DataError

    path = tmp_path / "train.jsonl"
    path.write_text('{"conversations": [{"from": "human", "value": "hi"}]}\n{"x": 1}\n')
    with pytest.raises(DataError, match="line 2"):
        read_chats(path)


def test_cli_train_lora(runs: tuple[Path, Path, list[Any]], tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from dialogbench.cli import app

    aw, inter, _ = runs
    export_sft([aw, inter], tmp_path / "sft", val_fraction=0.25, seed=0)
    chats = read_chats(tmp_path / "sft" / "train.jsonl")
    tokenizer = tiny_tokenizer([m["content"] for c in chats for m in c])
    tiny_model(len(tokenizer)).save_pretrained(tmp_path / "base")
    tokenizer.save_pretrained(tmp_path / "base")
    args = [
        "train",
        "lora",
        str(tmp_path / "sft"),
        "--base",
        str(tmp_path / "base"),
        "--out",
        str(tmp_path / "out"),
        "--epochs",
        "1",
        "--batch-size",
        "8",
        "--max-length",
        "128",
        "--rank",
        "4",
        "--no-gradient-checkpointing",
    ]
    got = CliRunner().invoke(app, args)
    assert got.exit_code == 0, got.output
    assert "training loss" in got.output
    assert (tmp_path / "out" / "adapter" / "adapter_config.json").exists()
    assert (tmp_path / "out" / "adapter" / "tokenizer_config.json").exists()
    bad = CliRunner().invoke(app, [*args[:2], str(tmp_path / "none"), *args[3:]])
    assert bad.exit_code == 2 and "file not found" in bad.output
