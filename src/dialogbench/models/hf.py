"""A local transformers model (the `transformers` extra; needs torch).

Runs in-process on whatever device torch picks. Structured output is prompt-only here
(no constrained decoding): replies go through the same extraction, validation and
correction as every other provider.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from dialogbench.models.types import ChatMessage, GenerateConfig, ModelError, ModelOutput, Usage


class TransformersProvider:
    """`transformers/<hub id or folder>`: chat template, greedy or sampled generation."""

    def __init__(self, model: str, name: str | None = None) -> None:
        self.model_id = model
        self.name = name or f"transformers/{model}"
        self.endpoint = f"transformers:{model}"
        self._lock = threading.Lock()
        self._loaded: tuple[Any, Any] | None = None

    def _load(self) -> tuple[Any, Any]:
        if self._loaded is None:
            try:
                import torch  # noqa: F401
                from transformers import AutoModelForCausalLM, AutoTokenizer
            except ImportError:
                raise ModelError(
                    "the transformers provider needs `pip install 'dialogbench[transformers]'`",
                    retryable=False,
                ) from None
            tok = AutoTokenizer.from_pretrained(self.model_id)
            model = AutoModelForCausalLM.from_pretrained(self.model_id)
            self._loaded = (tok, model)
        return self._loaded

    def _generate(self, messages: list[ChatMessage], config: GenerateConfig) -> ModelOutput:
        started = time.perf_counter()
        with self._lock:
            tok, model = self._load()
            import torch

            prompt = tok.apply_chat_template(
                messages, add_generation_prompt=True, return_tensors="pt"
            )
            if not isinstance(prompt, torch.Tensor):  # newer releases return a mapping
                prompt = prompt["input_ids"]
            if config.seed is not None:
                torch.manual_seed(config.seed)
            sample = config.temperature > 0
            kwargs: dict[str, Any] = {"max_new_tokens": config.max_tokens, "do_sample": sample}
            if sample:
                kwargs["temperature"] = config.temperature
                if config.top_p is not None:
                    kwargs["top_p"] = config.top_p
            with torch.no_grad():
                out = model.generate(prompt.to(model.device), **kwargs)
            new = out[0, prompt.shape[1] :]
            text = tok.decode(new, skip_special_tokens=True)
        for stop in config.stop:
            text = text.split(stop)[0]
        return ModelOutput(
            text=text,
            usage=Usage(prompt_tokens=int(prompt.shape[1]), completion_tokens=int(new.shape[0])),
            model=self.model_id,
            finish_reason="stop",
            latency_s=time.perf_counter() - started,
        )

    async def generate(self, messages: list[ChatMessage], config: GenerateConfig) -> ModelOutput:
        try:
            return await asyncio.to_thread(self._generate, messages, config)
        except ModelError:
            raise
        except Exception as e:  # the library's own errors, as a call failure
            raise ModelError(f"{self.name}: {type(e).__name__}: {e}", retryable=False) from None

    async def aclose(self) -> None:
        self._loaded = None
