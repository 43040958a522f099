"""Stale memories (their cited code changed) are left out of what a session is fed without
asking: the session-start context file the coordinator writes, and the recall block and
start context over the real query socket. Memories without citations, unchecked or valid
ones are kept; ``citations.hide_stale: false`` keeps the stale ones too."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from llmem_hooks import MemoryStore, SessionHookCoordinator, SessionInfo
from llmem_hooks.adapters.base import SessionAdapter
from llmem_hooks.config import DEFAULT_CONFIG
from llmem_hooks.events import LifecycleEvent, Message
from llmem_hooks.evidence.cite import Citation
from llmem_hooks.service import client
from llmem_hooks.service import protocol as proto
from llmem_hooks.service.operations import QueryService
from llmem_hooks.service.server import ServiceServer
from llmem_hooks.store import citations

PROJECT = "rootsha1"


class OneSession(SessionAdapter):
    """An agent store with one session in PROJECT and no messages."""

    agent = "opencode"

    def get_session(self, session_id: str) -> SessionInfo | None:
        return SessionInfo(session_id, "opencode", "/tmp/x", PROJECT, title="Demo")

    def list_sessions(self, limit: int = 50) -> list[SessionInfo]:
        return []

    def get_messages(self, session_id: str, after_id: str | None = None) -> list[Message]:
        return []

    def session_exists(self, session_id: str) -> bool:
        return True

    def poll(self, cursor: str | None) -> tuple[list[LifecycleEvent], str | None]:
        return [], cursor


def cite(
    store: MemoryStore, memory_id: str, status: str | None, path: str = "net/retry.py"
) -> None:
    """One citation of ``path`` for the memory; ``status``: what a check recorded (None:
    never checked)."""
    citations.add(store.db, memory_id, [Citation(path, 2, 4, "a" * 64, "b" * 40)])
    if status is not None:
        row = citations.of_memory(store.db, memory_id)[-1]
        reason = "the cited text is no longer in the file" if status == "stale" else None
        changed = "c" * 40 if status == "stale" else None
        citations.record_check(store.db, row.id, status, reason=reason, changed_by=changed)


@pytest.fixture
def memories(store: MemoryStore) -> dict[str, str]:
    texts = {
        "stale": ("decision", "The retry limit is 5, set in net/retry.py"),
        "valid": ("decision", "Retries back off exponentially in net/backoff.py"),
        "unchecked": ("fact", "The retry jitter is 100 ms in net/jitter.py"),
        "plain": ("preference", "User prefers small retry commits"),
        "mixed": ("fact", "Retry logging goes through net/log.py and net/trace.py"),
    }
    ids = {k: store.add(t, text, project=PROJECT) for k, (t, text) in texts.items()}
    cite(store, ids["stale"], "stale")
    cite(store, ids["valid"], "valid")
    cite(store, ids["unchecked"], None)
    cite(store, ids["mixed"], "valid", "net/log.py")
    cite(store, ids["mixed"], "stale", "net/trace.py")  # one stale citation makes it stale
    return ids


def _coordinator(store: MemoryStore, ctx: Path, hide: bool = True) -> SessionHookCoordinator:
    cfg = {k: dict(v) for k, v in DEFAULT_CONFIG.items()}
    cfg["episodes"]["enabled"] = False
    cfg["citations"]["hide_stale"] = hide
    return SessionHookCoordinator(store, {"opencode": OneSession()}, cfg, ctx)


def test_the_context_file_leaves_out_stale_memories(
    store: MemoryStore, memories: dict[str, str], tmp_path: Path
) -> None:
    result, path = _coordinator(store, tmp_path / "ctx").on_created("ses_ctx")
    assert result == "success"
    text = path.read_text()
    assert "The retry limit is 5" not in text
    assert "net/log.py and net/trace.py" not in text
    for kept in ("exponentially", "jitter is 100 ms", "small retry commits"):
        assert kept in text, kept
    # What the file gave is what recall will not repeat: the stale ones were not given.
    from llmem_hooks.store import recall

    given = recall.given_ids(store.db, "ses_ctx")
    assert memories["stale"] not in given and memories["valid"] in given


def test_hide_stale_off_keeps_them(
    store: MemoryStore, memories: dict[str, str], tmp_path: Path
) -> None:
    _, path = _coordinator(store, tmp_path / "ctx", hide=False).on_created("ses_all")
    assert "The retry limit is 5" in path.read_text()


@pytest.fixture
def server(store: MemoryStore, llmem_home: Path) -> Iterator[ServiceServer]:
    service = QueryService(store, {"ollama": {"enabled": False}}, served_by="test-server")
    srv = ServiceServer(service, proto.socket_path(llmem_home), idle_timeout=1.0, line_timeout=0.5)
    with srv:
        yield srv
    service.close()


def test_recall_over_the_socket_leaves_out_stale_memories(
    server: ServiceServer, store: MemoryStore, memories: dict[str, str]
) -> None:
    out = client.call(
        "recall", {"session_id": "ses_r", "prompt": "what is the retry limit?", "project": PROJECT}
    )
    assert "The retry limit is 5" not in out["block"]
    assert memories["stale"] not in out["memory_ids"]
    # the same question finds it once its citation is no longer stale
    row = citations.of_memory(store.db, memories["stale"])[0]
    citations.record_check(store.db, row.id, "valid")
    out = client.call(
        "recall", {"session_id": "ses_r2", "prompt": "what is the retry limit?", "project": PROJECT}
    )
    assert out["memory_ids"][:1] == [memories["stale"]], out


def test_start_over_the_socket_leaves_out_stale_memories(
    server: ServiceServer, memories: dict[str, str]
) -> None:
    out = client.call(
        "start",
        {"session_id": "ses_s", "project": PROJECT, "prompt": "where is retry logging traced?"},
    )
    assert "exponentially" in out["context"]
    assert "The retry limit is 5" not in out["context"]
    assert "net/trace.py" not in out["context"] + out["block"]
    assert memories["mixed"] not in out["memory_ids"]
