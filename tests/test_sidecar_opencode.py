"""The sidecar's passes over a real opencode.db: created, idle, compacting, ending,
catch-up after a restart, no duplicates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from opencode_db import PROJECT, OpenCodeDB, text

from llmem_hooks import MemoryStore, SessionHookCoordinator
from llmem_hooks.adapters import OpenCodeAdapter
from llmem_hooks.config import DEFAULT_CONFIG
from llmem_hooks.sidecar import Sidecar


def make(store: MemoryStore, db: OpenCodeDB, ctx: Path) -> Sidecar:
    cfg = {k: dict(v) for k, v in DEFAULT_CONFIG.items()}
    cfg["session"].update(idle_quiet_seconds=0, idle_debounce_seconds=0, end_after_minutes=600)
    coord = SessionHookCoordinator(store, {"opencode": OpenCodeAdapter(db.path)}, cfg, ctx)
    return Sidecar(coord, cfg)


def learned(store: MemoryStore, query: str) -> list[dict]:
    """Memories extracted from turns (session summaries, which may quote them, left out)."""
    return [m for m in store.search(query) if m["type"] not in ("event", "self_assessment")]


def remember_turn(db: OpenCodeDB, sid: str, words: str) -> None:
    u = db.user(sid, f"remember that {words}")
    db.assistant(sid, u, text("Noted."))


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
