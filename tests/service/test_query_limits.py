"""A query's cost is bounded and one slow request holds up no other (issue 18, item 6).

A 60 KB OR-chain search took 41 s and a small recall on another link waited 38 s behind
it. Now: a query is at most `MAX_QUERY_CHARS` characters and, in search syntax,
`MAX_QUERY_TERMS` words; every search stops at its time limit (SQLite's progress
handler) with a clear error; the query service reads on read-only connections of its
own, so a recall answers while a long search runs on another link. No timed asserts:
the bounds are checked by what they say (the cap, the interruption), the concurrency by
the order the two replies arrive in (the long search runs for seconds, the recall for
milliseconds).
"""

from __future__ import annotations

import random
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from llmem_hooks import MemoryStore, Retriever
from llmem_hooks.errors import SearchTimeout, ValidationError
from llmem_hooks.service import client
from llmem_hooks.service import protocol as proto
from llmem_hooks.service.operations import QueryService
from llmem_hooks.service.server import ServiceServer
from llmem_hooks.text.query import MAX_QUERY_CHARS, MAX_QUERY_TERMS, parse_query

NOISE_WORDS = [f"w{i}" for i in range(40)]
# Prefix terms that each expand to every noise word: costly on purpose (seconds on the
# noise store), within the term cap, so only the time limit stops it.
COSTLY = " OR ".join(["w*"] * MAX_QUERY_TERMS)
FACT = "The billing worker listens on port 7077 in staging."


def _fill(path: Path, rows: int = 1500, words: int = 100) -> None:
    rng = random.Random(1)
    records = [
        {
            "id": f"{i:08x}-0000-4000-8000-000000000000",
            "type": "fact",
            "content": " ".join(rng.choice(NOISE_WORDS) for _ in range(words)),
        }
        for i in range(rows)
    ]
    with MemoryStore(path) as store:
        store.import_memories(records)
        store.add("fact", FACT)


@pytest.fixture(scope="module")
def noisy_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("noisy") / "memory.db"
    _fill(path)
    return path


@pytest.fixture
def served(noisy_db: Path, llmem_home: Path) -> Iterator[ServiceServer]:
    cfg = {"ollama": {"enabled": False}, "memory": {"db_path": str(noisy_db)}}
    service = QueryService.open(cfg, served_by="test", embeddings=False)
    with ServiceServer(service, proto.socket_path(llmem_home), owns_service=True) as srv:
        yield srv


def test_an_or_chain_over_the_term_cap_is_refused_before_it_runs() -> None:
    chain = " OR ".join(f"word{i}" for i in range(MAX_QUERY_TERMS + 1))
    with pytest.raises(ValidationError, match=f"at most {MAX_QUERY_TERMS}"):
        parse_query(chain)
    parse_query(" OR ".join(f"word{i}" for i in range(MAX_QUERY_TERMS)))  # at the cap: fine
    with pytest.raises(ValidationError, match=f"longer than {MAX_QUERY_CHARS}"):
        parse_query("x" * (MAX_QUERY_CHARS + 1))
    # A long question is no error: it keeps its first words.
    question = " ".join(f"topic{i}" for i in range(3 * MAX_QUERY_TERMS))
    assert parse_query(question).terms == [f"topic{i}" for i in range(MAX_QUERY_TERMS)]


def test_the_60kb_or_chain_gets_a_clear_error_on_the_socket(served: ServiceServer) -> None:
    chain = " OR ".join(f"t{i}" for i in range(10_000))[:60_000]  # 60 KB, as in the report
    with pytest.raises(client.ServiceCallError) as err:
        client.call("search", {"query": chain}, timeout=30)
    assert err.value.code == proto.BAD_PARAMS
    assert f"longer than {MAX_QUERY_CHARS}" in str(err.value)
    short = " OR ".join(f"t{i}" for i in range(200))  # under the length, over the terms
    with pytest.raises(client.ServiceCallError, match=f"at most {MAX_QUERY_TERMS}"):
        client.call("search", {"query": short}, timeout=30)


def test_a_search_past_its_time_limit_is_stopped(noisy_db: Path) -> None:
    """The progress handler cuts the statement off: a SearchTimeout that says so, and the
    store answers the next query as usual."""
    with MemoryStore(noisy_db, read_only=True) as store:
        retriever = Retriever(store, time_limit=0.0)
        with pytest.raises(SearchTimeout, match="longer than 0 s"):
            retriever.find(COSTLY, limit=50, search_mode="fts")
        retriever.time_limit = None
        hits = retriever.find("billing worker port", search_mode="fts")
        assert hits and hits[0].memory["content"] == FACT


def test_the_service_reports_a_stopped_search_and_recall_fails_open(
    noisy_db: Path, llmem_home: Path
) -> None:
    cfg = {"ollama": {"enabled": False}, "memory": {"db_path": str(noisy_db)}}
    with QueryService.open(cfg, embeddings=False) as service:
        service.retriever.time_limit = 0.0  # the readers take it over
        with pytest.raises(Exception, match="took longer than") as err:
            service.call("search", {"query": COSTLY, "limit": 50})
        assert getattr(err.value, "code", None) == proto.BAD_PARAMS
        out = service.call("recall", {"session_id": "ses_t", "prompt": "w1 w2 w3 w4 w5"})
        assert out["reason"] == "too_slow" and out["block"] == ""


def test_a_recall_answers_while_a_long_search_runs_on_another_link(
    served: ServiceServer,
) -> None:
    """The search runs until its time limit (0.5 s here; unbounded it takes 0.9-2 s on an
    idle machine) stops it; the recall, sent while it runs, answers in a fraction of
    that. Before, the recall waited for the search's statement to end (it held the
    store's one connection): both took about as long."""
    served.service.retriever.time_limit = 0.5  # the read connections, opened next, copy it
    done: list[str] = []
    replies: dict[str, Any] = {}

    def long_search() -> None:
        t0 = time.monotonic()
        try:
            replies["search"] = client.call("search", {"query": COSTLY, "limit": 50}, timeout=60)
        except client.ServiceCallError as exc:
            replies["search"] = exc
        replies["search_s"] = time.monotonic() - t0
        done.append("search")

    worker = threading.Thread(target=long_search)
    worker.start()
    time.sleep(0.15)  # let the search start
    t0 = time.monotonic()
    out = client.call(
        "recall",
        {"session_id": "ses_short", "prompt": "which port does the billing worker listen on?"},
        timeout=60,
    )
    recall_s = time.monotonic() - t0
    done.append("recall")
    worker.join(60)
    assert "7077" in out["block"]
    assert done == ["recall", "search"]
    # generous: the recall did not wait for the search (it took a fraction of its time)
    assert recall_s < replies["search_s"] / 2
    # and the search was bounded by its time limit, not left to run for many seconds
    assert isinstance(replies["search"], client.ServiceCallError)
    assert "took longer than" in str(replies["search"])


def test_cli_search_over_the_bounds_is_one_line_and_exit_2(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    with MemoryStore(db) as store:
        store.add("fact", FACT)
    chain = " OR ".join(f"term{i}" for i in range(100))
    proc = subprocess.run(
        [sys.executable, "-m", "llmem_hooks.cli", "--db", str(db), "search", chain],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert f"at most {MAX_QUERY_TERMS}" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_status_counts_cheaply_and_stays_right(noisy_db: Path, llmem_home: Path) -> None:
    """`status` recounts at most every 5 minutes; rows added in between are added to it."""
    cfg = {"ollama": {"enabled": False}, "memory": {"db_path": str(noisy_db)}}
    with QueryService.open(cfg, embeddings=False) as service:
        first = service.status()["memories"]
        assert first == service.store.count()
        added = service.call("remember", {"content": "The staging cache is redis 7.2."})
        assert service.status()["memories"] == first + 1
        service.call("forget", {"id": added["id"], "reason": "test"})
        assert service.store.count() == first
