"""The sidecar's passes over a real opencode.db: created, idle, compacting, ending,
catch-up after a restart, no duplicates."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.opencode_db import PROJECT, OpenCodeDB, text

from llmem_hooks import MemoryStore, SessionHookCoordinator
from llmem_hooks.adapters import OpenCodeAdapter
from llmem_hooks.config import DEFAULT_CONFIG
from llmem_hooks.sidecar.loop import Sidecar
from llmem_hooks.store import sessions as session_state


def make(store: MemoryStore, db: OpenCodeDB, ctx: Path) -> Sidecar:
    cfg = {k: dict(v) for k, v in DEFAULT_CONFIG.items()}
    cfg["session"].update(idle_quiet_seconds=0, idle_debounce_seconds=0, end_after_minutes=600)
    cfg["episodes"]["enabled"] = (
        False  # extraction here; episodes in tests/session/test_episodes.py
    )
    coord = SessionHookCoordinator(store, {"opencode": OpenCodeAdapter(db.path)}, cfg, ctx)
    return Sidecar(coord, cfg)


def learned(store: MemoryStore, query: str) -> list[dict]:
    """Memories extracted from turns (session summaries, which may quote them, left out)."""
    return [m for m in store.search(query) if m["type"] not in ("event", "self_assessment")]


def remember_turn(db: OpenCodeDB, sid: str, words: str) -> None:
    u = db.user(sid, f"remember that {words}")
    db.assistant(sid, u, text("Noted."))


@contextlib.contextmanager
def worker_sidecar(tmp_path: Path, db: OpenCodeDB, url: str, **ollama: Any) -> Iterator[Sidecar]:
    """A sidecar as `llmem-hooks run` builds it: two coordinators from one config, the
    worker's with its own store connection and adapters; all closed afterwards."""
    from llmem_hooks import create_session_hook_coordinator

    cfg = {k: dict(v) for k, v in DEFAULT_CONFIG.items()}
    cfg["session"].update(idle_quiet_seconds=0, idle_debounce_seconds=0, end_after_minutes=600)
    cfg["episodes"]["enabled"] = (
        False  # extraction here; episodes in tests/session/test_episodes.py
    )
    cfg["memory"]["db_path"] = str(tmp_path / "memory.db")
    cfg["context"]["dir"] = str(tmp_path / "ctx")
    cfg["ollama"].update(base_url=url, **ollama)
    main, slow = (
        create_session_hook_coordinator(cfg, adapters={"opencode": OpenCodeAdapter(db.path)})
        for _ in range(2)
    )
    sidecar = Sidecar(main, cfg, worker=slow)
    try:
        yield sidecar
    finally:
        assert sidecar.worker is not None
        sidecar.worker.close()
        for c in (main, slow):
            c.store.close()


def test_lifecycle_over_a_real_store(store: MemoryStore, tmp_path: Path) -> None:
    store.add("decision", "We release on Tuesdays only", project=PROJECT)
    db = OpenCodeDB(tmp_path / "oc" / "opencode.db")
    ctx = tmp_path / "ctx"
    sidecar = make(store, db, ctx)
    sid = db.session("Work")
    sidecar.tick()
    context = ctx / f"{sid}.md"
    assert "Tuesdays" in context.read_text()  # created -> context with the project memory

    remember_turn(db, sid, "we deploy with blue-green releases")
    sidecar.tick()  # turn done, quiet period 0 -> idle -> extraction
    (mem,) = store.search("blue-green")
    assert mem["session_id"] == sid and mem["project"] == PROJECT
    assert mem["entered_by"] == "opencode"
    assert (ctx / f"{sid}.compact.md").exists()
    block = context.read_text()
    sidecar.tick()
    assert context.read_text() == block  # stays byte-identical
    assert len(learned(store, "blue-green")) == 1

    db.delete(sid)
    sidecar._check_deleted(force=True)
    events = store.list_all(type="event")
    assert [e["session_id"] for e in events] == [sid]
    db.close()


def test_restart_catches_up_without_duplicates(store: MemoryStore, tmp_path: Path) -> None:
    db = OpenCodeDB(tmp_path / "oc" / "opencode.db")
    ctx = tmp_path / "ctx"
    first = make(store, db, ctx)
    a = db.session("A")
    remember_turn(db, a, "integration tests need the local Postgres on port 5433")
    first.tick()
    assert len(learned(store, "5433")) == 1
    # While the sidecar is down: a new session with a turn, and A is deleted.
    b = db.session("B")
    remember_turn(db, b, "the staging VPN must be off for the e2e tests")
    db.delete(a)
    second = make(store, db, ctx)
    second._check_deleted(force=True)
    second.tick()
    assert (ctx / f"{b}.md").exists()
    assert len(learned(store, "5433")) == 1
    assert len(learned(store, "VPN")) == 1
    assert {e["session_id"] for e in store.list_all(type="event")} == {a}
    # A third start over the same data changes nothing.
    before = store.count()
    third = make(store, db, ctx)
    third._check_deleted(force=True)
    third.tick()
    assert store.count() == before
    db.close()


def test_subagent_sessions_share_the_parents_context(store: MemoryStore, tmp_path: Path) -> None:
    db = OpenCodeDB(tmp_path / "oc" / "opencode.db")
    ctx = tmp_path / "ctx"
    sidecar = make(store, db, ctx)
    parent = db.session("Parent")
    child = db.session("Child (@general subagent)", parent=parent)
    sidecar.tick()
    assert (ctx / f"{parent}.md").exists()
    assert not (ctx / f"{child}.md").exists()
    db.close()


def test_status_and_context_commands_show_what_the_sidecar_did(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from llmem_hooks.cli import main

    db_file = tmp_path / "memory.db"
    with MemoryStore(db_file) as store:
        store.add("decision", "We release on Tuesdays only", project=PROJECT)
        db = OpenCodeDB(tmp_path / "oc" / "opencode.db")
        sidecar = make(store, db, tmp_path / "ctx")
        sid = db.session("Work")
        sidecar.tick()
    assert main(["--db", str(db_file), "status"]) == 0
    out = capsys.readouterr().out
    assert "sidecar: not running" in out and sid in out and "opencode" in out
    assert main(["--db", str(db_file), "status", "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert [s["session_id"] for s in status["sessions"]] == [sid]
    assert main(["context", "no-such-session"]) == 2
    assert "error:" in capsys.readouterr().err
    db.close()


def test_a_slow_model_never_holds_back_a_new_sessions_context(
    tmp_path: Path, fake_ollama: tuple[object, str]
) -> None:
    """Idle and ending run on the worker (own store connection, own adapters): while the
    local model takes seconds over one session's extraction, another session's context
    file is written at once; the extraction still lands, and ending is queued once."""
    import time

    srv, url = fake_ollama
    srv.control.delay_ms = 1500  # every model and embedding call
    db = OpenCodeDB(tmp_path / "oc" / "opencode.db")
    with worker_sidecar(tmp_path, db, url, timeout_seconds=10.0) as sidecar:
        main = sidecar.coord
        a = db.session("A")
        sidecar.tick()
        remember_turn(db, a, "we deploy with blue-green releases")
        sidecar.tick()  # A's idle goes to the worker, which waits on the model
        time.sleep(0.2)
        b = db.session("B")
        t0 = time.monotonic()
        sidecar.tick()
        assert (tmp_path / "ctx" / f"{b}.md").exists()
        assert time.monotonic() - t0 < 1.0, "B's context waited for A's extraction"
        assert not main.store.search("blue-green"), "A's extraction is still running"

        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not main.store.search("blue-green"):
            time.sleep(0.1)
            sidecar.tick()
        assert main.store.search("blue-green")
        assert srv.control.bodies("/api/generate"), "the model was asked"

        db.delete(a)
        for _ in range(3):  # every existence check sees A gone; one ending is queued
            sidecar._check_deleted(force=True)
        assert sidecar._ending == {a}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and sidecar._ending:
            time.sleep(0.1)
            sidecar.tick()
        events = [e for e in main.store.list_all(type="event") if e["session_id"] == a]
        assert len(events) == 1
    db.close()


def test_the_worker_backfills_vectors_for_memories_stored_without_one(
    tmp_path: Path, fake_ollama: tuple[object, str]
) -> None:
    """Memories stored while the embedder was down (or before there was one) get their
    vectors in the worker's idle time, without their updated_at changing."""
    import time

    _, url = fake_ollama
    db = OpenCodeDB(tmp_path / "oc" / "opencode.db")
    with MemoryStore(tmp_path / "memory.db") as st:
        ids = [st.add("fact", f"fact number {i} about the deploy pipeline") for i in range(40)]
        before = {m["id"]: m["updated_at"] for m in st.list_all(limit=100)}

    with worker_sidecar(tmp_path, db, url) as sidecar:
        main = sidecar.coord
        sidecar.tick()  # the worker's queue is empty: a first backfill pass (32 memories)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and main.store.count_embeddings() < 32:
            time.sleep(0.05)
        assert main.store.count_embeddings() == 32
        sidecar.tick()  # the next pass waits for BACKFILL_EVERY_S
        time.sleep(0.3)
        assert main.store.count_embeddings() == 32
        sidecar._backfill_at = 0.0
        sidecar.tick()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and main.store.count_embeddings() < 40:
            time.sleep(0.05)
        assert main.store.count_embeddings() == 40
        after = {m["id"]: m["updated_at"] for m in main.store.list_all(limit=100)}
        assert after == before and set(after) == set(ids)
        assert main.store.nearest(
            main.store.conn.execute("SELECT embedding FROM memories LIMIT 1").fetchone()[0]
        ), "the vectors are searchable"
    db.close()


def test_backfill_does_nothing_without_a_working_embedder(store: MemoryStore) -> None:
    store.add("fact", "stored before there was any embedder")
    coord = SessionHookCoordinator(store, {}, {k: dict(v) for k, v in DEFAULT_CONFIG.items()})
    assert coord.backfill_embeddings() == 0  # no embedder
    assert store.missing_embeddings() and store.count_embeddings() == 0


def test_a_session_recorded_before_its_agent_store_shows_it_is_not_taken_for_deleted(
    store: MemoryStore, tmp_path: Path
) -> None:
    """The Copilot sessionStart hook records a session (through on_created) before
    Copilot may have written its events.jsonl; the existence check must not end it then,
    only once the grace period is over and the agent store still does not show it."""
    from support.copilot_home import CopilotHome

    from llmem_hooks import SessionInfo
    from llmem_hooks.adapters import CopilotAdapter
    from llmem_hooks.sidecar.loop import UNSEEN_GRACE_MS

    home = CopilotHome(tmp_path / "cp")
    cfg = {k: dict(v) for k, v in DEFAULT_CONFIG.items()}
    coord = SessionHookCoordinator(
        store, {"copilot": CopilotAdapter(home.root)}, cfg, tmp_path / "ctx"
    )
    sidecar = Sidecar(coord, cfg)
    sid = "0b7a5f5e-1c1d-4a43-9a1e-3f1f3f1f3f1f"
    coord.on_created(sid, SessionInfo(sid, "copilot", str(tmp_path)))  # the hook's record
    sidecar._check_deleted(force=True)
    assert session_state.find(store.db, sid).state == "active"
    assert not store.list_all(type="event")

    rec = session_state.find(store.db, sid)
    rec.last_activity_ms -= UNSEEN_GRACE_MS + 1000  # long unseen: it never existed there
    session_state.save(store.db, rec)
    sidecar._check_deleted(force=True)
    assert session_state.find(store.db, sid).state == "ended"


def test_a_session_dated_ahead_of_our_clock_still_goes_idle(
    store: MemoryStore, tmp_path: Path
) -> None:
    """An agent whose clock runs ahead of ours (a skewed VM, a session written on another
    machine) dates its turns in our future: an event cannot have happened after we saw it,
    so the quiet period counts from when we saw it, and the turn is extracted now, not in a
    month."""
    import time

    db = OpenCodeDB(tmp_path / "oc" / "opencode.db")
    db.ms = int(time.time() * 1000) + 30 * 86_400_000  # a month ahead
    sidecar = make(store, db, tmp_path / "ctx")
    sid = db.session("Ahead")
    remember_turn(db, sid, "the nightly export runs on the replica")
    sidecar.tick()
    sidecar.tick()
    assert len(learned(store, "replica")) == 1
    assert sidecar.next_wait() <= sidecar.poll_s
    db.close()
