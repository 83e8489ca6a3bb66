"""The SQLite response cache: keys, hits, explanations, no secrets, stats; damaged files
(a clear error at open, misses mid-run) and processes racing on one file."""

from __future__ import annotations

import logging
import os
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from dialogbench.models.cache import CacheError, CallKey, ResponseCache
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
    assert first.stats()["session"]["stored"] == 1
    first.close()
    again = ResponseCache(path)
    assert again.get(_key()) is not None
    stats = again.stats()
    assert stats["entries"][0]["entries"] == 1 and stats["entries"][0]["hits"] == 1
    assert stats["session"] == {
        "hits": 1,
        "misses": 0,
        "miss_reasons": {},
        "unreadable": 0,
        "unstored": 0,
        "evicted_unusable": 0,
        "stored": 0,
    }


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


# -- damage ------------------------------------------------------------------------------------


def _filled(path: Path, n: int = 300) -> list[CallKey]:
    """A closed cache of `n` replies of about 2 kB each (a few hundred pages)."""
    cache = ResponseCache(path)
    keys = [_key(messages=[{"role": "user", "content": f"q{i}"}]) for i in range(n)]
    for i, k in enumerate(keys):
        cache.put(k, ModelOutput(text=f"{i} " + "y" * 2000))
    cache.close()
    return keys


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty-header"])
def test_a_damaged_file_is_a_clear_error_naming_it(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "c.sqlite"
    _filled(path, 20)
    data = path.read_bytes()
    if damage == "garbage":
        path.write_bytes(b"not a database at all " * 400)
    elif damage == "truncated":
        path.write_bytes(data[:50])
    else:
        path.write_bytes(b"\0" * 100 + data[100:])
    with pytest.raises(CacheError) as e:
        ResponseCache(path)
    assert isinstance(e.value, ValueError)
    assert str(path) in str(e.value) and "delete it" in str(e.value)
    assert "DIALOGBENCH_CACHE" in str(e.value)


def test_a_directory_or_an_unmakeable_folder_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(CacheError, match=r"is a directory.*DIALOGBENCH_CACHE") as e:
        ResponseCache(tmp_path)
    assert str(tmp_path) in str(e.value)
    (tmp_path / "file").write_text("x")
    with pytest.raises(CacheError, match=r"folder.*DIALOGBENCH_CACHE"):
        ResponseCache(tmp_path / "file" / "c.sqlite")


def test_a_bad_row_is_a_miss_reported_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "c.sqlite"
    keys = _filled(path, 4)
    db = sqlite3.connect(path)
    db.execute(
        "UPDATE responses SET output = '{\"text\": ' WHERE key IN (?, ?)",
        (keys[0].digest, keys[1].digest),
    )
    db.commit()
    db.close()
    cache = ResponseCache(path)
    with caplog.at_level(logging.WARNING, logger="dialogbench.models.cache"):
        assert cache.get(keys[0]) is None
        got = cache.get_many(keys)
    assert set(got) == {keys[2].digest, keys[3].digest}
    assert cache.unreadable == 3 and cache.misses == 3 and cache.hits == 2
    assert cache.miss_reasons == {"unreadable entry": 3}
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and str(path) in warnings[0].getMessage()
    assert "DIALOGBENCH_CACHE" in warnings[0].getMessage()
    cache.put(keys[0], ModelOutput(text="fresh"))  # the fresh reply replaces the bad row
    again = cache.get(keys[0])
    assert again is not None and again.text == "fresh"
    assert cache.stats()["session"]["unreadable"] == 3
    cache.close()


def test_pages_damaged_mid_run_are_misses_not_a_crash(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "c.sqlite"
    keys = _filled(path)
    data = bytearray(path.read_bytes())
    start = len(data) // 3
    data[start : start + 4096 * 20] = b"\x5a" * (4096 * 20)  # twenty pages overwritten
    path.write_bytes(bytes(data))
    cache = ResponseCache(path)  # the first pages are whole: it opens
    with caplog.at_level(logging.WARNING, logger="dialogbench.models.cache"):
        one_by_one = [cache.get(k) for k in keys]
        many = cache.get_many(keys)
        cache.put(keys[0], ModelOutput(text="fresh"))
        cache.put(_key(messages=[{"role": "user", "content": "new"}]), ModelOutput(text="n"))
    found = {k.digest for k, got in zip(keys, one_by_one, strict=True) if got is not None}
    assert 0 < len(found) < len(keys)  # some entries lost, the rest still served
    assert set(many) == found  # a damaged batch falls back to key by key
    assert cache.unreadable > 0 and cache.miss_reasons["damaged cache"] > 0
    for got in many.values():
        assert got.text.endswith("y" * 2000)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert 1 <= len(warnings) <= 2 and all(str(path) in w for w in warnings)  # read, write
    cache.close()


_RACER = """
import sys, time
from pathlib import Path
from dialogbench.models.cache import CallKey, ResponseCache
from dialogbench.models.types import ModelOutput
path, go, me = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
while not go.exists():
    time.sleep(0.005)
cache = ResponseCache(path)
keys = []
for i in range(40):
    k = CallKey("m", "http://h/v1", {}, [{"role": "user", "content": f"{me}-{i}"}])
    cache.put(k, ModelOutput(text=f"{me}-{i}"))
    assert cache.get(k) is not None
    keys.append(k)
    cache.get_many(keys[-5:])
    cache.stats()
cache.close()
"""


def test_six_processes_racing_on_one_new_cache_never_see_a_locked_database(
    tmp_path: Path,
) -> None:
    path, go = tmp_path / "shared.sqlite", tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", _RACER, str(path), str(go), str(i)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(6)
    ]
    go.touch()
    results = [r.communicate(timeout=300) for r in racers]
    for r, (_, err) in zip(racers, results, strict=True):
        assert r.returncode == 0, err
        assert "locked" not in err
    cache = ResponseCache(path)
    assert cache.stats()["entries"][0]["entries"] == 6 * 40
    cache.close()
