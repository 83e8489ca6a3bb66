"""`dialogbench models check`: one tiny request, its latency, tokens and JSON support."""

from __future__ import annotations

import time

from pydantic import BaseModel

from dialogbench.models.model import Model
from dialogbench.models.types import GenerateConfig

CHECK_PROMPT = "Reply with the single word: ready"
JSON_PROMPT = (
    "Read this sentence and give the person's name and age as JSON: 'Maya turned 31 last week.'"
)


class _Person(BaseModel):
    name: str
    age: int


class CheckReport(BaseModel):
    """What one check found."""

    model: str
    endpoint: str
    latency_s: float
    prompt_tokens: int
    completion_tokens: int
    reply: str
    json_mode: str
    json_valid: bool
    json_raw: str


async def check_model(model: Model) -> CheckReport:
    """Send one plain and one structured request (uncached) and report what came back."""
    started = time.perf_counter()
    out = await model.generate(
        [{"role": "user", "content": CHECK_PROMPT}], GenerateConfig(max_tokens=16)
    )
    latency = time.perf_counter() - started
    got = await model.generate_structured(
        [{"role": "user", "content": JSON_PROMPT}],
        _Person,
        GenerateConfig(max_tokens=64),
        max_fixes=0,
    )
    mode = getattr(model.provider, "json_mode", "grammar")
    return CheckReport(
        model=model.name,
        endpoint=model.provider.endpoint,
        latency_s=latency,
        prompt_tokens=out.usage.prompt_tokens,
        completion_tokens=out.usage.completion_tokens,
        reply=out.text.strip()[:200],
        json_mode=str(mode),
        json_valid=got.ok,
        json_raw=got.raw[:200],
    )
