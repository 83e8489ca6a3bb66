"""The SQLite response cache: keys, hits, explanations, no secrets, stats."""

from __future__ import annotations

import threading
from pathlib import Path

from dialogbench.models.cache import CallKey, ResponseCache
from dialogbench.models.types import ChatMessage, GenerateConfig, ModelOutput, Usage

MSGS: list[ChatMessage] = [{"role": "user", "content": "hello"}]


def _key(
    config: GenerateConfig | None = None,
    messages: list[ChatMessage] = MSGS,
    sample: int = 0,
    model: str = "openai-compatible/m",
) -> CallKey:
    fields = (config or GenerateConfig()).cache_fields()
    return CallKey(model, "http://127.0.0.1:1/v1", fields, messages, sample)


def test_put_get_and_explain(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite")
    key = _key()
    assert cache.get(key) is None
    assert cache.miss_reasons == {"new prompt": 1}
    out = ModelOutput(text="hi", usage=Usage(prompt_tokens=3, completion_tokens=1))
    cache.put(key, out)
    got = cache.get(key)
    assert got is not None and got.text == "hi" and got.cached
    assert got.usage.prompt_tokens == 3
    assert cache.explain(key) == "cached"
    hotter = _key(GenerateConfig(temperature=0.7))
    assert cache.explain(hotter) == "same prompt cached with different temperature"
    assert cache.explain(_key(sample=1)) == "same prompt cached with different sample index"
    assert cache.explain(_key(model="openai-compatible/other")) == (
        "same prompt cached with different model"
    )
    assert cache.explain(_key(messages=[{"role": "user", "content": "bye"}])) == "new prompt"


def test_persists_across_instances_and_counts_hits(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    first = ResponseCache(path)
    first.put(_key(), ModelOutput(text="x"))
    first.close()
    again = ResponseCache(path)
    assert again.get(_key()) is not None
    stats = again.stats()
    assert stats["entries"][0]["entries"] == 1 and stats["entries"][0]["hits"] == 1
    assert stats["session"] == {"hits": 1, "misses": 0, "miss_reasons": {}}


def test_key_depends_on_every_part() -> None:
    base = _key().digest
    assert _key(GenerateConfig(seed=1)).digest != base
    assert _key(GenerateConfig(max_tokens=7)).digest != base
    assert _key(GenerateConfig(json_schema={"type": "object"})).digest != base
    assert _key(sample=2).digest != base
    assert _key().digest == base


def test_threads_share_one_cache(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite")

    def work(i: int) -> None:
        k = _key(messages=[{"role": "user", "content": str(i)}])
        cache.put(k, ModelOutput(text=str(i)))
        assert cache.get(k) is not None

    threads = [threading.Thread(target=work, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert cache.stats()["entries"][0]["entries"] == 16
