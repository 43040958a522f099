"""The inbox end to end: extraction stages the candidates it is not sure of, the dream
promotes one that a later session says again or the model confirms, and drops the rest
after ``dream.inbox_days`` (docs/extraction.md, docs/dream.md).

Real SQLite stores, OpenCode sessions written as OpenCode 1.18 writes them, the real
coordinator and dream cycle; the model is the fake Ollama server on 127.0.0.1.
"""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from support.opencode_db import OpenCodeDB, text

from llmem_hooks.adapters import OpenCodeAdapter
from llmem_hooks.config import DEFAULT_CONFIG
from llmem_hooks.dream.cycle import Dreamer
from llmem_hooks.dream.report import describe
from llmem_hooks.events import Message
from llmem_hooks.extraction import ExtractionEngine
from llmem_hooks.session.hooks import create_session_hook_coordinator
from llmem_hooks.store import MemoryStore
from llmem_hooks.store import dream as book

BROKER = "The message broker is RabbitMQ 3.12."
BROKER_AGAIN = "our message broker is RabbitMQ 3.12"
GITHUB_TOKEN = "ghp_" + "Zq8" * 12


def config(url: str | None = None) -> dict[str, Any]:
    cfg = copy.deepcopy(DEFAULT_CONFIG)
    cfg["session"]["idle_debounce_seconds"] = 0
    cfg["episodes"]["enabled"] = False  # the inbox here; episodes: tests/session/test_episodes.py
    cfg["ollama"]["enabled"] = False  # never a model on this machine's 11434
    if url:
        cfg["ollama"].update({"enabled": True, "base_url": url, "timeout_seconds": 5.0})
    return cfg


class World:
    """An OpenCode database, our store and the coordinator reading it."""

    def __init__(self, store: MemoryStore, tmp_path: Path, cfg: dict[str, Any]) -> None:
        self.store = store
        self.cfg = cfg
        self.db = OpenCodeDB(tmp_path / "oc" / "opencode.db")
        self.home = tmp_path / "home"
        # as the sidecar makes it: with the model extractor when ollama.enabled
        self.coord = create_session_hook_coordinator(
            cfg, store, {"opencode": OpenCodeAdapter(self.db.path)}
        )

    def session(self, *user_says: str) -> str:
        sid = self.db.session("Work")
        for said in user_says:
            u = self.db.user(sid, said)
            self.db.assistant(sid, u, text("Noted."))
        self.coord.on_idle(sid)
        return sid

    def dream(self, apply: bool = True, days_later: float = 0) -> Any:
        now = datetime.now(UTC) + timedelta(days=days_later)
        dreamer = Dreamer(self.store, self.cfg, home=self.home, now=now)
        return dreamer, dreamer.run(["deep"], apply=apply)

    def inbox(self) -> list[dict[str, Any]]:
        return self.store.list_inbox(100)

    def memories(self) -> list[dict[str, Any]]:
        return [m for m in self.store.list_all(limit=1000) if m["type"] != "self_assessment"]


@pytest.fixture
def world(store: MemoryStore, tmp_path: Path, llmem_home: Path) -> World:
    w = World(store, tmp_path, config())
    yield w
    w.db.close()


def test_an_unmarked_statement_waits_and_a_later_session_saying_it_again_promotes_it(
    world: World,
) -> None:
    first = world.session(BROKER)
    assert world.memories() == []  # not sure enough for a memory ...
    (item,) = world.inbox()  # ... but not dropped either
    assert item["content"] == BROKER and item["source"] == "extract"
    assert item["attention_score"] < 0.5
    meta = item["metadata"]
    assert meta["session_id"] == first and meta["agent"] == "opencode"
    assert meta["type"] == "fact" and meta["source_message_ids"]
    # a dream before anyone says it again changes nothing
    _, run = world.dream()
    assert run.results[0].consolidated == [] and run.results[0].evicted == []
    assert len(world.inbox()) == 1
    # another session says it again, in other words
    second = world.session(BROKER_AGAIN.capitalize() + ".")
    assert len(world.inbox()) == 2
    _, plan = world.dream(apply=False)
    (planned,) = plan.results[0].consolidated
    assert "-> a new memory (said again)" in describe("consolidated", planned)
    _, run = world.dream()
    (done,) = run.results[0].consolidated
    assert done["how"] == "said again" and len(done["inbox_ids"]) == 2
    (mem,) = world.memories()
    assert mem["id"] == done["id"] and mem["source"] == "consolidation"
    assert mem["confidence"] >= 0.5 and mem["entered_by"] == "opencode"
    assert mem["project"] == meta["project"]
    assert mem["metadata"]["inbox"]["promoted_by"] == "said again"
    assert set(mem["metadata"]["inbox"]["sessions"]) == {first, second}
    assert world.inbox() == []
    diary = (world.home / "dream-diary.md").read_text()
    assert f"-> memory {mem['id'][:8]} (said again)" in diary and "and 1 more" in diary
    # nothing is promoted twice: the next run has nothing, a third mention is known
    _, run = world.dream()
    assert run.results[0].consolidated == []
    world.session(BROKER)
    _, run = world.dream()
    (known,) = run.results[0].consolidated
    assert known["how"] == "already a memory" and known["id"] == mem["id"]
    assert [m["id"] for m in world.memories()] == [mem["id"]]
    assert world.inbox() == []


def test_a_statement_said_twice_in_one_session_is_not_said_again(world: World) -> None:
    world.session(BROKER, "By the way, " + BROKER_AGAIN + ".")
    assert len(world.inbox()) == 2
    _, run = world.dream()
    assert run.results[0].consolidated == []
    assert world.memories() == [] and len(world.inbox()) == 2


def test_a_marked_statement_later_settles_the_waiting_one(world: World) -> None:
    world.session(BROKER)
    world.session("Remember that the message broker is RabbitMQ 3.12.")
    (mem,) = world.memories()  # the marked one became a memory at once
    _, run = world.dream()
    (known,) = run.results[0].consolidated
    assert known["how"] == "already a memory" and known["id"] == mem["id"]
    assert world.inbox() == [] and len(world.memories()) == 1


def test_a_different_number_is_another_statement(world: World) -> None:
    world.session(BROKER)
    world.session("The message broker is RabbitMQ 3.13.")
    _, run = world.dream()
    assert run.results[0].consolidated == [] and len(world.inbox()) == 2


def test_said_once_it_is_dropped_after_inbox_days_dry_run_first_and_undo(world: World) -> None:
    world.session(BROKER)
    (item,) = world.inbox()
    _, run = world.dream(days_later=13)
    assert run.results[0].evicted == []  # still waiting
    _, plan = world.dream(apply=False, days_later=15)
    (gone,) = plan.results[0].evicted
    assert gone["inbox_id"] == item["id"] and "not said again within 14 days" in gone["reason"]
    assert "not said again within 14 days" in describe("evicted", gone)
    assert len(world.inbox()) == 1  # a dry run writes nothing
    dreamer, run = world.dream(days_later=15)
    assert [e["inbox_id"] for e in run.results[0].evicted] == [item["id"]]
    assert world.inbox() == []
    dreamer.undo(run.run_id)
    assert [i["id"] for i in world.inbox()] == [item["id"]]
    assert world.inbox()[0]["metadata"] == item["metadata"]


def test_undo_of_a_promotion_puts_the_inbox_back_and_removes_the_memory(world: World) -> None:
    world.session(BROKER)
    world.session(BROKER_AGAIN)
    before = sorted(i["id"] for i in world.inbox())
    dreamer, run = world.dream()
    assert len(world.memories()) == 1
    counts = dreamer.undo(run.run_id)
    assert counts["insert"] == 1 and counts["inbox"] == 2
    assert world.memories() == [] and sorted(i["id"] for i in world.inbox()) == before
    # and the same plan applies again, once
    _, again = world.dream()
    assert len(again.results[0].consolidated) == 1 and len(world.memories()) == 1


def test_a_promotion_whose_items_are_gone_is_not_made_again(world: World) -> None:
    """Two settles of one plan (a viewer removing items meanwhile, a second process):
    the second adds nothing."""
    world.session(BROKER)
    world.session(BROKER_AGAIN)
    ids = [i["id"] for i in world.inbox()]
    record = {"type": "fact", "content": BROKER, "source": "consolidation", "confidence": 0.5}
    for run in ("r1", "r2"):
        book.begin_run(world.store, run, "test", ["deep"])
    first = book.settle_inbox(world.store, "r1", "deep", [(record, ids)], [])
    second = book.settle_inbox(world.store, "r2", "deep", [(record, ids)], [])
    assert first[0] is not None and second == [None]
    assert len(world.memories()) == 1


def test_notes_keep_the_reference_rule(world: World) -> None:
    world.store.add_to_inbox("The staging DB is read-only on weekends.", attention_score=0.8)
    world.store.add_to_inbox("maybe something about lunch", attention_score=0.2)
    _, run = world.dream()
    deep = run.results[0]
    assert [c["how"] for c in deep.consolidated] == ["score"]
    assert [e["reason"] for e in deep.evicted] == ["below the minimum score"]
    assert world.inbox() == []


# -- secrets ------------------------------------------------------------------------------
def test_secrets_never_reach_the_inbox(world: World, store: MemoryStore) -> None:
    world.session(
        f"The deploy bot token is {GITHUB_TOKEN} and the staging host is build-07.",
        f"Our CI runner uses the key {GITHUB_TOKEN} for the package registry.",
    )
    key = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n"
    world.session(
        "The release bucket is s3://acme-releases and it has versioning on.",
        f"The deploy key is this one:\n{key}-----END OPENSSH PRIVATE KEY-----",
    )
    staged = [i["content"] for i in world.inbox()]
    assert "Our CI runner uses the key [REDACTED] for the package registry." in staged
    assert "The release bucket is s3://acme-releases and it has versioning on." in staged
    assert not any("b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ" in t for t in staged)
    raw = b"".join(p.read_bytes() for p in Path(store.db_path).parent.glob("memory.db*"))
    assert (
        GITHUB_TOKEN.encode() not in raw
        and b"b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ" not in raw
    )
    assert all(GITHUB_TOKEN not in json.dumps(i) for i in world.inbox())


# -- the model ----------------------------------------------------------------------------
def extraction_answer(mems: list[dict[str, Any]]) -> str:
    return json.dumps({"memories": mems})


def test_the_models_unsure_candidates_are_staged_and_it_confirms_or_rejects_them(
    store: MemoryStore, tmp_path: Path, llmem_home: Path, fake_ollama: tuple[Any, str]
) -> None:
    srv, url = fake_ollama
    sure = "The API gateway terminates TLS for every service."
    durable = "Integration tests need the docker compose stack running."
    passing = "The user was looking at the login page."

    def answer(body: dict[str, Any]) -> str:
        props = (body.get("format") or {}).get("properties", {})
        if "memories" in props:
            return extraction_answer(
                [
                    {"type": "fact", "content": sure, "confidence": 0.9, "tags": [],
                     "scope": "project", "source_message_ids": []},
                    {"type": "procedure", "content": durable, "confidence": 0.4, "tags": [],
                     "scope": "project", "source_message_ids": []},
                    {"type": "fact", "content": passing, "confidence": 0.2, "tags": [],
                     "scope": "project", "source_message_ids": []},
                    {"type": "fact", "content": f"The token is {GITHUB_TOKEN} for the deploys",
                     "confidence": 0.3, "tags": [], "scope": "project",
                     "source_message_ids": []},
                ]
            )  # fmt: skip
        if "durable" in props:
            return json.dumps({"durable": "docker" in body["prompt"]})
        return json.dumps({})

    srv.control.responder = answer
    w = World(store, tmp_path, config(url))
    try:
        w.session("Let's get the integration tests going.")
        assert [m["content"] for m in w.memories()] == [sure]
        staged = {i["content"]: i for i in w.inbox()}
        assert set(staged) >= {durable, passing}
        assert staged[durable]["metadata"]["type"] == "procedure"
        assert staged[durable]["attention_score"] == pytest.approx(0.4)
        assert GITHUB_TOKEN not in json.dumps(list(staged))
        # a dry run asks nothing and says it would
        asked = len(srv.control.bodies("/api/generate"))
        _, plan = w.dream(apply=False)
        assert any("would ask the model" in n for n in plan.results[0].notes)
        assert len(srv.control.bodies("/api/generate")) == asked
        _, run = w.dream()
        deep = run.results[0]
        assert [(c["content"], c["how"]) for c in deep.consolidated] == [(durable, "model")]
        assert "the model did not confirm it" in {e["reason"] for e in deep.evicted}
        mem = next(m for m in w.memories() if m["content"] == durable)
        assert mem["type"] == "procedure" and mem["metadata"]["inbox"]["promoted_by"] == "model"
        assert w.inbox() == []
    finally:
        w.db.close()


def test_model_down_leaves_the_candidates_waiting(
    store: MemoryStore, tmp_path: Path, llmem_home: Path, fake_ollama: tuple[Any, str]
) -> None:
    srv, url = fake_ollama
    w = World(store, tmp_path, config(url))
    try:
        srv.control.status = 503
        w.session(BROKER)  # the heuristics stage it while the model is down
        assert len(w.inbox()) == 1
        _, run = w.dream()
        deep = run.results[0]
        assert deep.consolidated == [] and deep.evicted == [] and len(w.inbox()) == 1
        assert any("stopped answering" in n for n in deep.notes)
    finally:
        w.db.close()


# -- extraction alone -----------------------------------------------------------------------
def staged(*said: str) -> tuple[list[str], list[str]]:
    msgs = [Message(f"m{i}", "s", "user", f"User: {t}") for i, t in enumerate(said)]
    out = ExtractionEngine().extract_staged(msgs, project="p")
    return [c.content for c in out.memories], [c.content for c in out.inbox]


@pytest.mark.parametrize(
    "said",
    [
        "The build failed with exit code 1.",  # what happened
        "I think the cache is stale.",  # a guess
        "Is the broker RabbitMQ?",  # a question
        "Fix the typo on line 42.",  # an instruction
        "This function is called in a hot loop.",  # the code at hand
        "The tests pass now.",  # the moment
    ],
)
def test_remarks_of_the_moment_are_not_staged(said: str) -> None:
    assert staged(said) == ([], [])


def test_a_statement_marked_later_is_a_memory_not_an_inbox_item() -> None:
    sure, unsure = staged("The staging certs are self-signed. Remember that.")
    assert sure == ["The staging certs are self-signed."] and unsure == []


def test_extract_keeps_returning_only_the_sure_candidates() -> None:
    msgs = [Message("m0", "s", "user", f"User: {BROKER}")]
    assert ExtractionEngine().extract(msgs, project="p") == []


def test_a_full_inbox_keeps_the_newest_of_equal_score(tmp_path: Path) -> None:
    """A flood of unsure candidates from one session must not keep every later one out
    until they expire: at equal score the oldest leave first, the higher-scored stay."""
    with MemoryStore(tmp_path / "m.db", inbox_capacity=3) as st:
        sure = st.add_to_inbox("A note worth more than the rest.", attention_score=0.9)
        for i in range(5):
            st.add_to_inbox(f"Statement number {i} of the flood.", "extract", 0.4)
        kept = [i["content"] for i in st.list_inbox()]
        assert kept[0] == "A note worth more than the rest." and st.get_from_inbox(sure)
        assert sorted(kept[1:]) == [
            "Statement number 3 of the flood.",
            "Statement number 4 of the flood.",
        ]
