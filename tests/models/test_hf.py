"""The transformers provider, on a tiny random model built here (no hub download).

Runs where the `transformers` extra (transformers + torch) is installed; elsewhere it
skips, saying so. The error a user gets without the extra is tested everywhere.
"""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path

import pytest

from dialogbench.models.hf import TransformersProvider
from dialogbench.models.types import ChatMessage, GenerateConfig, ModelError

HAVE_EXTRA = all(importlib.util.find_spec(m) for m in ("torch", "transformers", "tokenizers"))
needs_extra = pytest.mark.skipif(
    not HAVE_EXTRA,
    reason="the transformers extra is not installed (pip install 'dialogbench[transformers]')",
)
ASK: list[ChatMessage] = [{"role": "user", "content": "hello there how are you"}]
TEMPLATE = (
    "{% for m in messages %}<|im_start|> {{ m['role'] }} {{ m['content'] }} <|im_end|> "
    "{% endfor %}{% if add_generation_prompt %}<|im_start|> assistant {% endif %}"
)


@pytest.mark.skipif(HAVE_EXTRA, reason="checks the message shown without the extra")
def test_missing_extra_is_a_clear_error() -> None:
    provider = TransformersProvider("some/model")
    with pytest.raises(ModelError, match=r"pip install 'dialogbench\[transformers\]'"):
        asyncio.run(provider.generate(ASK, GenerateConfig()))


def _tiny_model(folder: Path) -> Path:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    words = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()
    special = ["[UNK]", "[PAD]", "<|im_start|>", "<|im_end|>"]
    words.train_from_iterator(
        ["hello there how are you today", "user assistant system fine thanks"],
        trainers.WordLevelTrainer(special_tokens=special),
    )
    tok = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call,unused-ignore]
        tokenizer_object=words, unk_token="[UNK]", pad_token="[PAD]", eos_token="<|im_end|>"
    )
    tok.chat_template = TEMPLATE
    config = GPT2Config(
        vocab_size=len(tok),
        n_positions=64,
        n_embd=16,
        n_layer=1,
        n_head=2,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    GPT2LMHeadModel(config).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


@needs_extra
def test_generates_with_usage_and_determinism(tmp_path: Path) -> None:
    provider = TransformersProvider(str(_tiny_model(tmp_path / "tiny")))

    async def twice() -> tuple[object, object]:
        config = GenerateConfig(max_tokens=5, temperature=0.0)
        return (await provider.generate(ASK, config), await provider.generate(ASK, config))

    first, second = asyncio.run(twice())
    assert first.usage.prompt_tokens > 0  # type: ignore[attr-defined]
    assert 0 < first.usage.completion_tokens <= 5  # type: ignore[attr-defined]
    assert first.text == second.text  # type: ignore[attr-defined]
    assert provider.endpoint.startswith("transformers:")
