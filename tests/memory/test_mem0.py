"""mem0 for real, offline, end to end through `memory.replay`: its LLM is a scripted loopback
ChatServer answering mem0's fact-extraction prompt in the JSON shape mem0 asks for, its
embedder the same server's /v1/embeddings backed by our offline MiniLM, its vector store
qdrant in-process on disk. Skipped, saying why, where mem0ai or MiniLM is not installed
(the main test environment has neither mem0ai nor needs it)."""

from __future__ import annotations

import importlib.util
import json
import logging
import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from dialogbench.data.model import Message
from dialogbench.memory import Budget, Query, replay, replay_costs
from dialogbench.memory.mem0 import Mem0Error, Mem0Memory, message_content, user_id
from dialogbench.memory.registry import MemorySpecError, resolve_memory
from dialogbench.testing import ChatServer

from .chat_support import MESSAGES

HAS_MEM0 = importlib.util.find_spec("mem0") is not None
needs_mem0 = pytest.mark.skipif(
    not HAS_MEM0, reason="mem0ai is not installed (pip install 'dialogbench[mem0]')"
)

SUBJECT = "ana lima"  # holds a space, which mem0 refuses in a user id
QUERIES = [
    Query("q-cat", SUBJECT, "What is the name of the cat Ana adopted?", "question", 2),
    Query("q-sister", SUBJECT, "Which city does Ana's sister live in?", "question", 4),
    Query("q-cello", SUBJECT, "What does Ben's cello teacher say about his bowing?", "question", 6),
]
_NEW = re.compile(r"## New Messages\n(.*?)(?:\n\n## |\Z)", re.S)


def extract_facts(body: dict[str, Any]) -> str:
    """A scripted fact extractor: one memory per new message, in the JSON mem0 asks for
    ({"memory": [{"id", "text", "attributed_to"}]}, mem0's additive extraction prompt)."""
    prompt = str(body["messages"][-1]["content"])
    found = _NEW.search(prompt)
    assert found, "mem0's extraction prompt has no '## New Messages' section (mem0 changed?)"
    facts: list[dict[str, str]] = []
    for line in found.group(1).splitlines():
        role, _, said = line.partition(": ")
        if role in ("user", "assistant") and said:
            facts.append({"id": str(len(facts)), "text": said, "attributed_to": role})
    return json.dumps({"memory": facts})


@pytest.fixture(scope="module")
def server() -> Iterator[ChatServer]:
    if not HAS_MEM0:
        pytest.skip("mem0ai is not installed (pip install 'dialogbench[mem0]')")
    from dialogbench.models.embedding import EmbedderUnavailable, load_embedder

    try:
        embedder = load_embedder()
    except EmbedderUnavailable as e:
        pytest.skip(f"mem0's embedder here is our MiniLM: {e}")

    def embed(texts: list[str]) -> list[list[float]]:
        vectors: list[list[float]] = embedder.encode(texts).tolist()
        return vectors

    with ChatServer(reply=extract_facts, embed=embed) as srv:
        yield srv


@pytest.fixture
def mem0(server: ChatServer, tmp_path: Path) -> Iterator[Mem0Memory]:
    server.reset()
    with Mem0Memory(base_url=server.base_url, model="scripted", path=tmp_path / "mem0") as m:
        yield m


@needs_mem0
@pytest.mark.parametrize("store", ["qdrant", "faiss"])
def test_mem0_end_to_end_through_replay(server: ChatServer, tmp_path: Path, store: str) -> None:
    server.reset()
    with Mem0Memory(
        base_url=server.base_url, model="scripted", path=tmp_path, vector_store=store
    ) as mem0:
        check_end_to_end(mem0, server)


def check_end_to_end(mem0: Mem0Memory, server: ChatServer) -> None:
    rep = replay(mem0, SUBJECT, MESSAGES, QUERIES, Budget(k=2))
    got = {r.query.id: r for r in rep.recalled}
    # text memories, each citing the message its fact was extracted from
    assert got["q-cat"].memories[0].text == "Ana: I adopted a grey cat named Pixel last spring"
    assert got["q-cat"].cited_positions[0] == 0
    assert got["q-sister"].cited_positions[0] == 2
    assert got["q-cello"].cited_positions[0] == 5
    assert all(r.positions == () and r.invalid_ids == () for r in rep.recalled)
    # one LLM call per message ingested, none past the last query; tokens as the LLM reported
    assert server.request_count == 6
    assert rep.ingest_cost is not None and rep.ingest_cost.calls == 6
    assert rep.ingest_cost.prompt_tokens > 0 and rep.ingest_cost.completion_tokens > 0
    assert all(r.cost is not None and r.cost.calls == 0 for r in rep.recalled)
    costs = replay_costs([rep], {m.id: m for m in MESSAGES})
    assert costs["system_tokens"]["calls"] == 6
    assert server.embedding_requests  # the embedder was our loopback MiniLM
    assert mem0.unparsable_replies == 0
    dumped = mem0.dump(SUBJECT)
    assert sorted(m.cites for m in dumped) == [(f"m{i}",) for i in range(6)]


@needs_mem0
def test_a_rerun_starts_clean_and_subjects_stay_apart(mem0: Mem0Memory) -> None:
    replay(mem0, SUBJECT, MESSAGES, QUERIES, Budget(k=2))
    replay(mem0, "ben", MESSAGES, QUERIES[:1], Budget(k=2))
    assert len(mem0.dump(SUBJECT)) == 6 and len(mem0.dump("ben")) == 2
    replay(mem0, SUBJECT, MESSAGES, QUERIES[:1], Budget(k=5))
    assert sorted(m.cites for m in mem0.dump(SUBJECT)) == [("m0",), ("m1",)]
    assert len(mem0.dump("ben")) == 2


@needs_mem0
def test_an_unparsable_llm_reply_is_counted_and_logged(
    server: ChatServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from dialogbench.testing import ok

    server.reset()
    server.enqueue(ok("these are not the facts you are looking for"))
    with (
        Mem0Memory(base_url=server.base_url, model="scripted", path=tmp_path) as m,
        caplog.at_level(logging.WARNING),
    ):
        m.ingest(SUBJECT, MESSAGES[:2])
        assert m.unparsable_replies == 1
        assert [x.cites for x in m.dump(SUBJECT)] == [("m1",)]
    assert "not a JSON object" in caplog.text


@needs_mem0
def test_without_inference_messages_are_stored_as_they_are(
    server: ChatServer, tmp_path: Path
) -> None:
    server.reset()
    with Mem0Memory(
        base_url=server.base_url, model="scripted", path=tmp_path, infer=False, messages_per_add=4
    ) as m:
        rep = replay(m, SUBJECT, MESSAGES, QUERIES, Budget(k=1))
        assert server.request_count == 0  # no LLM call
        cat = {r.query.id: r for r in rep.recalled}["q-cat"]
        assert cat.cited_positions == (0, 1)  # one add of up to 4 messages cites them all


@needs_mem0
def test_mem0_failures_are_named_without_the_key(
    server: ChatServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dialogbench.testing import status

    monkeypatch.setenv("DIALOGBENCH_MEM0_API_KEY", "sk-mem0-secret-1234")
    server.reset()
    server.enqueue(*[status(401, message="bad key sk-mem0-secret-1234")] * 5)
    with Mem0Memory(base_url=server.base_url, model="scripted", path=tmp_path) as m:
        with pytest.raises(Mem0Error, match="mem0 add failed") as caught:
            m.ingest(SUBJECT, MESSAGES[:1])
        assert "sk-mem0-secret-1234" not in str(caught.value) + repr(m) + str(m.settings)
    assert server.authorizations[0] == "Bearer sk-mem0-secret-1234"


@needs_mem0
def test_resolve_memory_builds_mem0_from_the_environment(
    server: ChatServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DIALOGBENCH_MEM0_BASE_URL", raising=False)
    with pytest.raises(MemorySpecError, match="DIALOGBENCH_MEM0_BASE_URL"):
        resolve_memory("mem0")
    monkeypatch.setenv("DIALOGBENCH_MEM0_BASE_URL", server.base_url)
    monkeypatch.setenv("DIALOGBENCH_MEM0_MODEL", "scripted")
    monkeypatch.setenv("DIALOGBENCH_MEM0_DIR", str(tmp_path))
    system = resolve_memory("mem0")
    assert isinstance(system, Mem0Memory) and system.name == "mem0"
    assert system.settings["vector_store"] == "qdrant"
    system.close()


@pytest.mark.skipif(HAS_MEM0, reason="checks the message given where mem0ai is missing")
def test_without_mem0_the_spec_says_how_to_install_it() -> None:
    with pytest.raises(MemorySpecError, match=r"pip install 'dialogbench\[mem0\]'"):
        resolve_memory("mem0")


def test_user_ids_and_contents() -> None:
    assert user_id("ana lima") == "ana%20lima" and user_id("conv-26") == "conv-26"
    assert user_id("a%20b") != user_id("a b")
    m = Message(
        id="x", position=0, speaker="Ana", text="hi", timestamp=datetime(2023, 5, 8, 13, 56)
    )
    assert message_content(m) == "[2023-05-08 13:56] Ana: hi"
    assert message_content(m, dates=False) == "Ana: hi"
