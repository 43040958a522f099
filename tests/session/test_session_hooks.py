"""SessionHookCoordinator: the four hooks, their result tuples, crash-safe extraction."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from llmem_hooks import (
    MemoryStore,
    SessionEventManager,
    SessionHookCoordinator,
    SessionInfo,
    register_session_hook,
)
from llmem_hooks.adapters.base import SessionAdapter
from llmem_hooks.config import DEFAULT_CONFIG
from llmem_hooks.events import LifecycleEvent, Message
from llmem_hooks.registry import unregister_session_hook


class ListAdapter(SessionAdapter):
    """A session store held in lists: stands in for an agent's database."""

    agent = "opencode"

    def __init__(self) -> None:
        self.sessions: dict[str, SessionInfo] = {}
        self.messages: dict[str, list[Message]] = {}

    def add_session(self, sid: str, project: str = "rootsha1") -> None:
        self.sessions[sid] = SessionInfo(sid, "opencode", "/tmp/x", project, title="Demo")
        self.messages[sid] = []

    def say(self, sid: str, role: str, text: str) -> Message:
        prefix = "User" if role == "user" else "Assistant"
        msg = Message(f"msg_{len(self.messages[sid]):04d}", sid, role, f"{prefix}: {text}")  # type: ignore[arg-type]
        self.messages[sid].append(msg)
        return msg

    def list_sessions(self, limit: int = 50) -> list[SessionInfo]:
        return list(self.sessions.values())[:limit]

    def get_session(self, session_id: str) -> SessionInfo | None:
        return self.sessions.get(session_id)

    def get_messages(self, session_id: str, after_id: str | None = None) -> list[Message]:
        msgs = self.messages.get(session_id, [])
        if after_id is not None:
            ids = [m.id for m in msgs]
            msgs = msgs[ids.index(after_id) + 1 :] if after_id in ids else msgs
        return list(msgs)

    def session_exists(self, session_id: str) -> bool:
        return session_id in self.sessions

    def poll(self, cursor: str | None) -> tuple[list[LifecycleEvent], str | None]:
        return [], cursor


def config(**session: float) -> dict:
    cfg = {k: dict(v) for k, v in DEFAULT_CONFIG.items()}
    cfg["session"].update(session)
    cfg["episodes"]["enabled"] = (
        False  # these test extraction; tests/session/test_episodes.py those
    )
    return cfg


@pytest.fixture
def adapter() -> ListAdapter:
    a = ListAdapter()
    a.add_session("ses_a")
    return a


@pytest.fixture
def coord(store: MemoryStore, adapter: ListAdapter, tmp_path: Path) -> SessionHookCoordinator:
    return SessionHookCoordinator(
        store, {"opencode": adapter}, config(idle_debounce_seconds=0), tmp_path / "ctx"
    )


def test_created_writes_a_stable_private_context_file(
    store: MemoryStore, coord: SessionHookCoordinator, tmp_path: Path
) -> None:
    store.add("decision", "We deploy with blue-green releases", project="rootsha1")
    store.add("preference", "User prefers pnpm over npm")
    store.add("fact", "Another project's port is 9999", project="othersha")
    result, path = coord.on_created("ses_a")
    assert result == "success"
    text = path.read_text()
    assert "blue-green" in text and "pnpm" in text and "9999" not in text
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    # New memories do not change a running session's block (prompt caching).
    store.add("decision", "We use trunk-based development", project="rootsha1")
    assert coord.on_created("ses_a") == ("already_processed", None)
    assert path.read_text() == text


def test_context_respects_the_budget(
    store: MemoryStore, tmp_path: Path, adapter: ListAdapter
) -> None:
    for i in range(300):
        store.add(
            "fact",
            f"Fact number {i} about the build system and its many caches",
            project="rootsha1",
        )
    cfg = config()
    cfg["context"] = {"dir": None, "budget_tokens": 200}
    coord = SessionHookCoordinator(store, {"opencode": adapter}, cfg, tmp_path / "ctx")
    _, path = coord.on_created("ses_a")
    assert 200 < len(path.read_text()) <= 200 * 4


def test_idle_extracts_only_new_messages_once(
    store: MemoryStore, coord: SessionHookCoordinator, adapter: ListAdapter
) -> None:
    assert coord.on_idle("ses_a") == ("no_transcript", 0)
    m = adapter.say("ses_a", "user", "remember that we deploy with blue-green releases")
    adapter.say("ses_a", "assistant", "Noted.")
    result, count = coord.on_idle("ses_a")
    assert (result, count) == ("success", 1)
    mems = store.list_all()
    assert len(mems) == 1
    mem = mems[0]
    assert "blue-green" in mem["content"]
    assert mem["project"] == "rootsha1" and mem["session_id"] == "ses_a"
    assert mem["entered_by"] == "opencode" and mem["source_message_ids"] == [m.id]
    assert coord.on_idle("ses_a") == ("no_memories", 0)  # nothing new since the cursor
    adapter.say("ses_a", "user", "we decided to use Redis streams for the job queue")
    assert coord.on_idle("ses_a")[0] == "success"
    assert store.count() == 2
    # The resume pack was written next to the context file.
    pack = coord.ctx_dir / "ses_a.compact.md"
    assert pack.exists() and "Redis streams" in pack.read_text()


def test_idle_is_debounced(store: MemoryStore, adapter: ListAdapter, tmp_path: Path) -> None:
    coord = SessionHookCoordinator(
        store, {"opencode": adapter}, config(idle_debounce_seconds=30), tmp_path / "c"
    )
    adapter.say("ses_a", "user", "remember that the staging VPN must be off for tests")
    assert coord.on_idle("ses_a")[0] == "success"
    adapter.say("ses_a", "user", "remember that integration tests need port 5433")
    assert coord.on_idle("ses_a") == ("debounced", 0)
    assert coord.on_idle("ses_a", force=True)[0] == "success"


def test_a_crash_before_commit_loses_and_duplicates_nothing(
    store: MemoryStore, coord: SessionHookCoordinator, adapter: ListAdapter
) -> None:
    adapter.say("ses_a", "user", "remember that we deploy with blue-green releases")
    adapter.say("ses_a", "user", "we decided to pin every dependency exactly")

    class Boom(Exception):
        pass

    real_log = store.log_extraction

    def failing_log(*a: object, **k: object) -> None:
        raise Boom  # the cursor write fails after the memories were added: all roll back

    store.log_extraction = failing_log  # type: ignore[method-assign]
    assert coord.on_idle("ses_a") == ("error", 0)
    assert store.count() == 0
    store.log_extraction = real_log  # type: ignore[method-assign]
    assert coord.on_idle("ses_a", force=True) == ("success", 2)
    assert coord.on_idle("ses_a", force=True) == ("no_memories", 0)
    assert store.count() == 2


def test_compacting_writes_the_resume_pack(
    store: MemoryStore, coord: SessionHookCoordinator, adapter: ListAdapter
) -> None:
    store.add("procedure", "Run make test before pushing", project="rootsha1", confidence=0.9)
    store.add("procedure", "Low-confidence guess", project="rootsha1", confidence=0.3)
    adapter.say("ses_a", "user", "Add retries to the HTTP client")
    result, path = coord.on_compacting("ses_a")
    assert result == "success"
    text = path.read_text()
    assert "Add retries" in text and "make test" in text and "Low-confidence" not in text


def test_ending_stores_a_summary_once(
    store: MemoryStore, coord: SessionHookCoordinator, adapter: ListAdapter
) -> None:
    adapter.say("ses_a", "user", "Fix the flaky login test")
    adapter.say("ses_a", "user", "remember that the login test needs a seeded Redis")
    result, written = coord.on_ending("ses_a", "deleted")
    assert result == "success" and written >= 1
    types = {m["type"] for m in store.list_all()}
    assert {"event", "self_assessment"} <= types  # plus the flushed "remember" memory
    assert len(types) == 3
    (summary,) = store.list_all(type="event")
    assert summary["session_id"] == "ses_a" and summary["project"] == "rootsha1"
    assert coord.on_ending("ses_a") == ("already_processed", 0)


def test_ending_of_a_session_whose_rows_are_gone(
    store: MemoryStore, coord: SessionHookCoordinator, adapter: ListAdapter
) -> None:
    coord.on_created("ses_a")
    adapter.messages["ses_a"] = []
    del adapter.sessions["ses_a"]
    result, written = coord.on_ending("ses_a", "deleted")
    assert (result, written) == ("success", 1)
    (summary,) = store.list_all(type="event")
    assert "deleted" in summary["content"]


def test_without_adapter(store: MemoryStore, tmp_path: Path) -> None:
    coord = SessionHookCoordinator(store, {}, config(), tmp_path / "ctx")
    assert coord.on_idle("ses_x") == ("no_transcript", 0)
    assert coord.on_ending("ses_x") == ("no_transcript", 0)
    assert coord.on_created("ses_x")[0] == "success"


def test_bad_session_id_is_an_error_not_a_crash(coord: SessionHookCoordinator) -> None:
    assert coord.on_created("../etc/passwd") == ("error", None)
    assert coord.on_idle("a/b") == ("error", 0)


def test_event_manager_and_registry(coord: SessionHookCoordinator) -> None:
    seen: list[str] = []
    manager = SessionEventManager(coord)
    assert manager.emit("created", "ses_a")[0] == "success"
    register_session_hook("idle", seen.append)
    try:
        register_session_hook("idle", seen.append)  # the same hook again: it runs once
        manager.emit("idle", "ses_a")
        assert seen == ["ses_a"]
    finally:
        unregister_session_hook("idle")
    with pytest.raises(ValueError):
        manager.emit("exploded", "ses_a")
    with pytest.raises(TypeError):
        register_session_hook("created", "not callable")  # type: ignore[arg-type]


def test_a_pack_is_not_replaced_by_an_empty_post_compaction_transcript(
    store: MemoryStore, coord: SessionHookCoordinator, adapter: ListAdapter
) -> None:
    adapter.say("ses_a", "user", "Add retries to the HTTP client")
    _, path = coord.on_compacting("ses_a")
    before = path.read_text()
    adapter.messages["ses_a"] = []  # after compaction: nothing newer yet
    assert coord.on_compacting("ses_a") == ("success", path)
    assert path.read_text() == before
