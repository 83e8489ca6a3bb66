"""The reference memory service itself, over real HTTP: its memory, its refusals, its knobs
(HttpMemory against it is tested in tests/memory/test_http.py)."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

from dialogbench.testing import MemoryFault, MemoryServer


def call(srv: MemoryServer, endpoint: str, body: Any = None, query: str = "") -> tuple[int, Any]:
    """(status, parsed JSON) of one request; GET when `body` is None."""
    data = None if body is None else json.dumps(body).encode()
    url = f"{srv.base_url}/{endpoint}{'?' + query if query else ''}"
    req = urllib.request.Request(url, data, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        with e:
            return e.code, json.loads(e.read())


MESSAGES = [
    {"id": "a", "position": 0, "speaker": "Ana", "text": "my cat Pixel sleeps all day"},
    {"id": "b", "position": 1, "speaker": "Ben", "text": "I play the cello on Sundays"},
    {"id": "c", "position": 2, "speaker": "Ana", "text": "Pixel the cat chased a cat toy"},
]


def test_recall_ranks_by_bm25_and_honours_k() -> None:
    with MemoryServer() as srv:
        assert call(srv, "ingest", {"subject": "s", "messages": MESSAGES}) == (200, {"ingested": 3})
        assert call(srv, "ingest", {"subject": "s", "messages": MESSAGES[:1]})[1] == {
            "ingested": 0  # idempotent by id
        }
        status, got = call(srv, "recall", {"subject": "s", "query": {"text": "cat"}})
        assert status == 200
        assert [m["message_id"] for m in got["memories"]] == ["c", "a"]  # two 'cat's first
        assert got["memories"][0]["score"] > got["memories"][1]["score"] > 0
        one = call(srv, "recall", {"subject": "s", "query": {"text": "cat"}, "budget": {"k": 1}})
        assert len(one[1]["memories"]) == 1
        other = call(srv, "recall", {"subject": "t", "query": {"text": "cat"}})
        assert other == (200, {"memories": []})  # subjects are apart
        assert call(srv, "dump", query="subject=s")[1]["memories"][0] == {
            "message_id": "a",
            "score": 0.0,
        }
        assert call(srv, "reset", {"subject": "s"}) == (200, {})
        assert srv.stored("s") == []


def test_text_memories_and_costs() -> None:
    with MemoryServer(memories="text", report_cost=True) as srv:
        assert call(srv, "ingest", {"subject": "s", "messages": MESSAGES})[1]["cost"]["calls"] == 1
        got = call(srv, "recall", {"subject": "s", "query": {"text": "cello"}})[1]
        assert got["memories"] == [
            {
                "text": "Ben said: I play the cello on Sundays",
                "score": got["memories"][0]["score"],
                "cites": ["b"],
            }
        ]
        assert got["cost"] == {"calls": 1, "prompt_tokens": 1, "completion_tokens": 8}


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"messages": []}, "'subject' must be a non-empty string"),
        ({"subject": "s", "messages": {}}, "'messages' must be a list"),
        ({"subject": "s", "messages": [{"text": "x"}]}, "messages[0] must be an object"),
        ({"subject": "s", "messages": [{"id": "x"}]}, "messages[0] (x) must have a string 'text'"),
    ],
)
def test_bad_ingest_bodies_are_400_naming_the_field(body: dict[str, Any], says: str) -> None:
    with MemoryServer() as srv:
        status, got = call(srv, "ingest", body)
        assert status == 400 and says in got["error"]
        assert srv.count("ingest") == 1  # logged all the same


def test_bad_recall_bodies_are_400() -> None:
    with MemoryServer() as srv:
        status, got = call(srv, "recall", {"subject": "s", "query": "cat"})
        assert status == 400 and "'query' must be an object" in got["error"]
        bad_k = {"subject": "s", "query": {"text": "cat"}, "budget": {"k": -1}}
        assert call(srv, "recall", bad_k)[0] == 400


def test_faults_queue_per_endpoint_and_slow_indexing() -> None:
    with MemoryServer(index_delay=0.3, faults={"recall": [MemoryFault.status(429, 2)]}) as srv:
        call(srv, "ingest", {"subject": "s", "messages": MESSAGES})
        assert call(srv, "indexed", query="subject=s") == (200, {"indexed": False})
        assert call(srv, "recall", {"subject": "s", "query": {"text": "cat"}})[0] == 429
        assert call(srv, "recall", {"subject": "s", "query": {"text": "cat"}})[1] == {
            "memories": []  # not searchable yet
        }
        time.sleep(0.35)
        assert call(srv, "indexed", query="subject=s") == (200, {"indexed": True})
        assert len(call(srv, "recall", {"subject": "s", "query": {"text": "cat"}})[1]["memories"])
        srv.enqueue("dump", MemoryFault.broken("not_object"))
        assert call(srv, "dump", query="subject=s")[0] == 200
        assert [r.endpoint for r in srv.requests][:3] == ["ingest", "indexed", "recall"]


def test_absent_endpoints_and_required_auth() -> None:
    with MemoryServer(absent={"dump"}, require_auth="Bearer k") as srv:
        assert call(srv, "dump", query="subject=s")[0] == 404
        assert call(srv, "ingest", {"subject": "s", "messages": []})[0] == 401
        assert srv.count("dump") == 1


def test_misconfiguration_is_refused() -> None:
    with pytest.raises(ValueError, match="only optional endpoints can be absent"):
        MemoryServer(absent={"recall"})
    with pytest.raises(ValueError, match="no endpoint"):
        MemoryServer(faults={"search": []})
    with pytest.raises(ValueError, match="no endpoint"):
        MemoryServer().enqueue("search", MemoryFault.ok())
