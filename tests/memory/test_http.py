"""HttpMemory against the reference memory server on loopback, through `memory.replay`:
the REST round trip, scoring, retries, indexing waits, absent endpoints, broken replies and
secrets (real HTTP, no mocks)."""

from __future__ import annotations

import importlib.util
import logging
import socket
import threading
import time
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from dialogbench.memory import Budget, MemorySystemError, Query, replay, replay_costs
from dialogbench.memory.http import HttpMemory, HttpMemoryError, public_url
from dialogbench.memory.registry import MemorySpecError, memory_name, resolve_memory
from dialogbench.testing.memoryserver import MemoryFault, MemoryServer

from .chat_support import MESSAGES

SUBJECT = "ana"
QUERIES = [
    Query("q-cat", SUBJECT, "What is the name of the cat Ana adopted?", "question", 2),
    Query("q-sister", SUBJECT, "Which city does Ana's sister live in?", "question", 4),
    Query("q-cello", SUBJECT, "How is Ben's cello teacher finding his bowing?", "question", 6),
]


def client(
    url: str, *, retries: int = 5, retry_after_max: float = 60.0, index_deadline: float = 300.0
) -> HttpMemory:
    """An HttpMemory with short back-off and polling, for quick tests."""
    return HttpMemory(
        url,
        retries=retries,
        backoff=0.02,
        poll_s=0.02,
        retry_after_max=retry_after_max,
        index_deadline=index_deadline,
    )


@pytest.fixture
def server() -> Iterator[MemoryServer]:
    with MemoryServer() as srv:
        yield srv


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


# -- the round trip ---------------------------------------------------------------------------


def test_ingest_and_recall_round_trip_scores_ids(server: MemoryServer) -> None:
    memory = client(server.base_url)
    rep = replay(memory, SUBJECT, MESSAGES, QUERIES, Budget(k=2))
    got = {r.query.id: r for r in rep.recalled}
    assert got["q-cat"].positions[0] == 0
    assert got["q-sister"].positions[0] == 2
    assert got["q-cello"].positions[0] == 5
    assert all(r.invalid_ids == () and len(r.memories) <= 2 for r in rep.recalled)
    # the harness fed the messages in time order, each once, never past the last query
    assert server.stored(SUBJECT) == [m.id for m in MESSAGES[:6]]
    assert rep.ingested == 6
    ingests = [r.body for r in server.requests if r.endpoint == "ingest"]
    assert [[m["id"] for m in b["messages"]] for b in ingests] == [
        ["m0", "m1"],
        ["m2", "m3"],
        ["m4", "m5"],
    ]
    # the message as the data model holds it; `person` only where the data gives one
    assert ingests[0]["messages"][0] == MESSAGES[0].model_dump(mode="json", exclude={"person"})
    first = server.requests[0]
    assert (first.endpoint, first.body) == ("reset", {"subject": SUBJECT})
    recall = next(r.body for r in server.requests if r.endpoint == "recall")
    assert recall["query"]["id"] == "q-cat" and recall["query"]["cutoff"] == 2
    assert recall["budget"] == {"k": 2, "tokens": None}


def test_a_person_id_travels_with_its_message(server: MemoryServer) -> None:
    known = [m.model_copy(update={"person": "p-ana"}) for m in MESSAGES]
    replay(client(server.base_url), SUBJECT, known, QUERIES[:1], Budget(k=1))
    sent = next(r.body for r in server.requests if r.endpoint == "ingest")["messages"]
    assert sent[0] == {**MESSAGES[0].model_dump(mode="json"), "person": "p-ana"}


def test_text_memories_are_scored_by_what_they_cite() -> None:
    with MemoryServer(memories="text") as srv:
        rep = replay(client(srv.base_url), SUBJECT, MESSAGES, QUERIES, Budget(k=1))
    got = {r.query.id: r for r in rep.recalled}
    cat = got["q-cat"]
    assert cat.positions == () and cat.cited_positions == (0,)
    assert cat.memories[0].text == "Ana said: I adopted a grey cat named Pixel last spring"
    assert got["q-sister"].cited_positions == (2,)


def test_uncited_text_and_mixed_memories() -> None:
    with MemoryServer(memories="text", cite=False) as srv:
        rep = replay(client(srv.base_url), SUBJECT, MESSAGES, QUERIES, Budget(k=3))
    assert all(r.cited_positions == () and r.text_memories for r in rep.recalled)
    with MemoryServer(memories="mixed") as srv:
        rep = replay(client(srv.base_url), SUBJECT, MESSAGES, QUERIES, Budget(k=2))
    cello = {r.query.id: r for r in rep.recalled}["q-cello"]
    assert len(cello.id_memories) == 1 and len(cello.text_memories) == 1
    assert cello.positions[0] == 5 and cello.cited_positions


def test_reported_costs_reach_the_replay() -> None:
    with MemoryServer(report_cost=True) as srv:
        rep = replay(client(srv.base_url), SUBJECT, MESSAGES, QUERIES, Budget(k=2))
    assert rep.ingest_cost is not None and rep.ingest_cost.calls == 3
    assert rep.ingest_cost.prompt_tokens == sum(
        len(f"{m.speaker} {m.text}".replace("!", "").split()) for m in MESSAGES[:6]
    )
    assert all(r.cost is not None and r.cost.calls == 1 for r in rep.recalled)
    costs = replay_costs([rep], {m.id: m for m in MESSAGES})
    assert costs["system_tokens"]["calls"] == 6
    assert costs["messages_ingested"] == 6


def test_dump_lists_what_was_ingested(server: MemoryServer) -> None:
    memory = client(server.base_url)
    replay(memory, SUBJECT, MESSAGES, QUERIES[:1], Budget(k=2))
    assert [m.message_id for m in memory.dump(SUBJECT)] == ["m0", "m1"]
    assert memory.dump("nobody") == []


def test_a_rerun_starts_clean(server: MemoryServer) -> None:
    memory = client(server.base_url)
    replay(memory, SUBJECT, MESSAGES, QUERIES, Budget(k=2))
    rep = replay(memory, SUBJECT, MESSAGES, QUERIES[:1], Budget(k=8))
    assert server.stored(SUBJECT) == ["m0", "m1"]
    assert {p for r in rep.recalled for p in r.positions} <= {0, 1}


# -- retries ----------------------------------------------------------------------------------


def test_retries_honour_retry_after_and_survive_drops(caplog: pytest.LogCaptureFixture) -> None:
    faults = {
        "recall": [MemoryFault.status(429, retry_after=0.3), MemoryFault.status(503)],
        "ingest": [MemoryFault.drop()],  # stored, then the answer lost: the retry adds nothing
    }
    with MemoryServer(faults=faults) as srv, caplog.at_level(logging.WARNING):
        t0 = time.monotonic()
        rep = replay(client(srv.base_url, retries=3), SUBJECT, MESSAGES, QUERIES, Budget(k=2))
        took = time.monotonic() - t0
        assert srv.count("recall") == 3 + 2  # the first recall took three tries
        assert srv.count("ingest") == 3 + 1
        assert srv.stored(SUBJECT) == [m.id for m in MESSAGES[:6]]
    assert {r.query.id: r for r in rep.recalled}["q-cat"].positions[0] == 0
    assert took >= 0.3  # Retry-After: 0.3 was waited
    assert "answered HTTP 429; retry 1 of 3 in 0.3 s" in caplog.text
    assert "answered HTTP 503; retry 2 of 3" in caplog.text
    assert "/memory/ingest failed" in caplog.text


def test_a_long_retry_after_is_cut_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    with (
        MemoryServer(faults={"recall": [MemoryFault.status(429, retry_after=3600)]}) as srv,
        caplog.at_level(logging.WARNING),
    ):
        memory = client(srv.base_url, retry_after_max=0.1)
        t0 = time.monotonic()
        replay(memory, SUBJECT, MESSAGES, QUERIES[:1], Budget(k=2))
        assert time.monotonic() - t0 < 5
    assert "waiting 0.1 s, not the 3600.0 s asked" in caplog.text


def test_an_http_date_retry_after_falls_back_to_backoff() -> None:
    date = "Wed, 21 Oct 2099 07:28:00 GMT"
    with MemoryServer(faults={"recall": [MemoryFault.status(503, retry_after=date)]}) as srv:
        t0 = time.monotonic()
        replay(client(srv.base_url), SUBJECT, MESSAGES, QUERIES[:1], Budget(k=2))
        assert time.monotonic() - t0 < 5
        assert srv.count("recall") == 2


def test_retries_are_bounded_and_the_error_names_the_endpoint() -> None:
    with MemoryServer(faults={"recall": [MemoryFault.status(500)] * 5}) as srv:
        memory = client(srv.base_url, retries=2)
        with pytest.raises(MemorySystemError) as caught:
            replay(memory, SUBJECT, MESSAGES, QUERIES[:1], Budget(k=2))
        assert srv.count("recall") == 3
    text = str(caught.value)
    assert f"POST {srv.base_url}/recall answered HTTP 500 after 3 tries" in text
    assert "scripted HTTP 500" in text  # the service's own error text
    assert f"memory system {srv.base_url!r} failed in recall" in text


def test_a_client_error_is_not_retried() -> None:
    with MemoryServer(faults={"ingest": [MemoryFault.status(400, message="bad message")]}) as srv:
        with pytest.raises(MemorySystemError, match=r"/ingest answered HTTP 400: .*bad message"):
            replay(client(srv.base_url), SUBJECT, MESSAGES, QUERIES, Budget(k=2))
        assert srv.count("ingest") == 1


def test_an_unreachable_service_is_named() -> None:
    url = f"http://127.0.0.1:{free_port()}/memory"
    with pytest.raises(
        HttpMemoryError, match=r"POST .*/memory/ingest could not be reached after 2"
    ):
        client(url, retries=1).ingest(SUBJECT, MESSAGES[:1])


# -- indexing ---------------------------------------------------------------------------------


def test_recall_waits_for_indexing() -> None:
    # the evidence of each query is the last message before it: searchable only once indexed
    late = [Query("q-lisbon", SUBJECT, "Where is Ana flying next week?", "question", 7)]
    with MemoryServer(index_delay=0.3) as srv:
        rep = replay(client(srv.base_url), SUBJECT, MESSAGES, late, Budget(k=1))
        assert srv.count("indexed") > 1  # polled while indexing
    assert rep.recalled[0].positions == (6,)
    assert rep.ingest_s >= 0.3  # the wait counts as ingest time
    with MemoryServer(index_delay=0.3, absent={"indexed"}) as srv:
        rep = replay(client(srv.base_url), SUBJECT, MESSAGES, late, Budget(k=1))
    assert rep.recalled[0].positions == ()  # without the endpoint nothing is waited for


def test_indexing_has_a_deadline() -> None:
    with MemoryServer(index_delay=30) as srv:
        memory = client(srv.base_url, index_deadline=0.2)
        with pytest.raises(MemorySystemError, match=r"GET .*/indexed: subject 'ana' not indexed"):
            replay(memory, SUBJECT, MESSAGES, QUERIES, Budget(k=2))


# -- optional endpoints -----------------------------------------------------------------------


def test_optional_endpoints_may_be_absent() -> None:
    with MemoryServer(absent={"reset", "indexed", "dump"}) as srv:
        memory = client(srv.base_url)
        rep = replay(memory, SUBJECT, MESSAGES, QUERIES, Budget(k=2))
        assert {r.query.id: r for r in rep.recalled}["q-sister"].positions[0] == 2
        assert memory.dump(SUBJECT) == []
        replay(memory, "ben", MESSAGES, QUERIES, Budget(k=2))
        # each absent endpoint was asked once, then remembered as absent
        assert srv.count("reset") == 1 and srv.count("indexed") == 1


def test_a_required_endpoint_missing_is_an_error() -> None:
    with MemoryServer(prefix="/elsewhere") as srv:
        wrong = srv.base_url.replace("/elsewhere", "/memory")
        with pytest.raises(MemorySystemError, match=r"POST .*/memory/ingest answered HTTP 404"):
            replay(client(wrong), SUBJECT, MESSAGES, QUERIES, Budget(k=2))


# -- replies outside the contract -------------------------------------------------------------


@pytest.mark.parametrize(
    ("how", "says"),
    [
        ("no_memories", "the reply has no 'memories' list (its keys: results)"),
        ("not_json", "answered with no JSON"),
        ("not_object", "answered a JSON list, not an object"),
        ("bad_memory", "a memory needs 'message_id' (a string) or 'text'"),
    ],
)
def test_a_broken_reply_names_the_endpoint(how: str, says: str) -> None:
    fault = MemoryFault.broken(how)  # type: ignore[arg-type]
    with (
        MemoryServer(faults={"recall": [fault]}) as srv,
        pytest.raises(MemorySystemError) as caught,
    ):
        replay(client(srv.base_url), SUBJECT, MESSAGES, QUERIES, Budget(k=2))
    text = str(caught.value)
    assert f"POST {srv.base_url}/recall" in text and says in text
    assert "Traceback" not in text


def test_bad_memory_fields_are_named(server: MemoryServer) -> None:
    from dialogbench.memory.http import _cost, _memory

    with pytest.raises(HttpMemoryError, match="'cites' must be a list of message ids"):
        _memory({"text": "x", "cites": "m1"}, "POST u/recall")
    with pytest.raises(HttpMemoryError, match="'score' must be a finite number"):
        _memory({"message_id": "m1", "score": "high"}, "POST u/recall")
    with pytest.raises(HttpMemoryError, match="'cost' must be an object of non-negative"):
        _cost({"calls": "one"}, "POST u/recall")
    assert _memory({"message_id": 3}, "w").message_id == "3"


# -- secrets ----------------------------------------------------------------------------------


def test_url_credentials_reach_the_server_and_nothing_else(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DIALOGBENCH_MEMORY_API_KEY", raising=False)
    basic = "Basic YWxpY2U6czNjcjN0LXB3"  # alice:s3cr3t-pw
    echo = MemoryFault.status(500, message="rejected {authorization}")
    with (
        MemoryServer(require_auth=basic, faults={"recall": [echo] * 3}) as srv,
        caplog.at_level(logging.DEBUG),
    ):
        url = srv.base_url.replace("http://", "http://alice:s3cr3t-pw@")
        memory = resolve_memory(url, allow_credentials=True)
        assert isinstance(memory, HttpMemory)
        memory.retries, memory.backoff = 2, 0.02
        with pytest.raises(MemorySystemError) as caught:
            replay(memory, SUBJECT, MESSAGES, QUERIES, Budget(k=2))
        assert {r.authorization for r in srv.requests} == {basic}
        assert srv.stored(SUBJECT) == ["m0", "m1"]  # the header was accepted
    shown = [memory.name, memory.url, repr(memory), str(caught.value), caplog.text]
    shown.append(memory_name(url, memory))
    assert "rejected Basic ***" in str(caught.value)  # the echoed header was redacted
    for text in shown:
        assert "s3cr3t-pw" not in text and "alice" not in text and "YWxpY2U6" not in text
    assert memory.name == srv.base_url


def test_an_api_key_from_the_environment_is_sent_and_never_shown(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = "sk-test-9f8e7d6c5b4a"
    monkeypatch.setenv("DIALOGBENCH_MEMORY_API_KEY", key)
    faults = {
        "recall": [MemoryFault.status(429, retry_after=0, message="slow down {authorization}")],
        "dump": [MemoryFault.status(403, message="forbidden for {authorization}")],
    }
    with MemoryServer(require_auth=f"Bearer {key}", faults=faults) as srv:
        with caplog.at_level(logging.DEBUG):
            memory = client(srv.base_url)
            replay(memory, SUBJECT, MESSAGES, QUERIES, Budget(k=2))
            with pytest.raises(HttpMemoryError) as caught:
                memory.dump(SUBJECT)
        assert {r.authorization for r in srv.requests} == {f"Bearer {key}"}
    error = str(caught.value)
    assert "answered HTTP 403 (check the key in $DIALOGBENCH_MEMORY_API_KEY" in error
    for text in (error, caplog.text, memory.name, memory.url, repr(memory)):
        assert key not in text
    # a wrong key: refused, named, not retried
    monkeypatch.setenv("DIALOGBENCH_MEMORY_API_KEY", "sk-wrong-0000")
    with MemoryServer(require_auth=f"Bearer {key}") as srv:
        with pytest.raises(HttpMemoryError, match="answered HTTP 401") as caught:
            client(srv.base_url).ingest(SUBJECT, MESSAGES[:1])
        assert srv.count("ingest") == 1
    assert "sk-wrong-0000" not in str(caught.value)


def test_unreachable_with_credentials_shows_none() -> None:
    url = f"http://bob:hunter2-pw@127.0.0.1:{free_port()}/memory"
    with pytest.raises(HttpMemoryError) as caught:
        HttpMemory(url, retries=0).recall(SUBJECT, QUERIES[0], Budget())
    assert "hunter2" not in str(caught.value) and "bob" not in str(caught.value)


def test_a_url_with_a_query_string_is_refused_without_echoing_it() -> None:
    with pytest.raises(MemorySpecError, match="drop the query string") as caught:
        resolve_memory("http://127.0.0.1:9/memory?api_key=topsecret-123")
    assert "topsecret-123" not in str(caught.value)
    with pytest.raises(MemorySpecError, match="must be http"):
        resolve_memory("http://")


def test_public_url_drops_credentials_query_and_fragment() -> None:
    assert public_url("https://u:p@h.example:8443/m/?k=v#f") == "https://h.example:8443/m"
    assert public_url("http://[::1]:80/x") == "http://[::1]:80/x"


def test_the_documented_minimal_service_passes_the_contract() -> None:
    """examples/memory_service.py, the stdlib server docs/memory-adapters.md shows."""
    path = Path(__file__).parents[2] / "examples" / "memory_service.py"
    spec = importlib.util.spec_from_file_location("memory_service_example", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    server = ThreadingHTTPServer(("127.0.0.1", 0), module.Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        memory = client(f"http://127.0.0.1:{server.server_port}")
        rep = replay(memory, SUBJECT, MESSAGES, QUERIES, Budget(k=2))
        got = {r.query.id: r for r in rep.recalled}
        assert got["q-cat"].positions[0] == 0 and got["q-sister"].positions[0] == 2
        assert [m.message_id for m in memory.dump(SUBJECT)] == [f"m{i}" for i in range(6)]
        replay(memory, SUBJECT, MESSAGES, QUERIES[:1], Budget(k=2))  # reset, then again
        assert len(memory.dump(SUBJECT)) == 2
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_redirects_are_not_followed_so_the_key_stays_home(
    monkeypatch: pytest.MonkeyPatch, server: MemoryServer
) -> None:
    """A 307 pointing at another host is an error; the other host never sees the key."""
    from http.server import BaseHTTPRequestHandler

    class Redirect(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.send_response(307)
            self.send_header("Location", f"{server.base_url}/ingest")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    monkeypatch.setenv("DIALOGBENCH_MEMORY_API_KEY", "sk-stay-home-42")
    redirector = ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
    thread = threading.Thread(target=redirector.serve_forever, daemon=True)
    thread.start()
    try:
        memory = client(f"http://127.0.0.1:{redirector.server_port}/memory")
        with pytest.raises(HttpMemoryError, match=r"HTTP 307 .*redirects are not followed"):
            memory.ingest(SUBJECT, MESSAGES[:1])
    finally:
        redirector.shutdown()
        redirector.server_close()
        thread.join(5)
    assert server.requests == []  # the redirect's target was never asked


def test_a_track_spec_with_credentials_is_refused_without_echoing_them() -> None:
    with pytest.raises(MemorySpecError) as caught:
        resolve_memory("http://alice:s3cr3t-pw@127.0.0.1:9/mem")
    assert "s3cr3t-pw" not in str(caught.value) and "alice" not in str(caught.value)
    assert "DIALOGBENCH_MEMORY_BASIC_AUTH" in str(caught.value)


def test_basic_auth_from_the_environment_is_sent_and_never_shown(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DIALOGBENCH_MEMORY_API_KEY", raising=False)
    monkeypatch.setenv("DIALOGBENCH_MEMORY_BASIC_AUTH", "alice:s3cr3t-pw")
    basic = "Basic YWxpY2U6czNjcjN0LXB3"  # alice:s3cr3t-pw
    with MemoryServer(require_auth=basic) as srv, caplog.at_level(logging.DEBUG):
        memory = resolve_memory(srv.base_url)
        replay(memory, SUBJECT, MESSAGES, QUERIES, Budget(k=2))
        assert {r.authorization for r in srv.requests} == {basic}
    for text in (memory.name, repr(memory), caplog.text):
        assert "s3cr3t-pw" not in text and "YWxpY2U6" not in text
