"""The session hooks attach citations to the memories they extract (docs/citations.md,
"Citations learned from sessions"): in the memory's transaction, never to episodes, and a
citation that cannot be added never costs the memory. Over a real opencode.db (rows as
OpenCode 1.18.33 writes them) and a real git repository."""

from __future__ import annotations

import logging
import os
import subprocess
from pathlib import Path

import pytest
from support.opencode_db import OpenCodeDB, text, tool

from llmem_hooks import MemoryStore, SessionHookCoordinator
from llmem_hooks.adapters import OpenCodeAdapter
from llmem_hooks.config import DEFAULT_CONFIG
from llmem_hooks.evidence.cite import MAX_PER_MEMORY, Citation
from llmem_hooks.store import citations

RETRY = "import time\n\n\nMAX_RETRIES = 5\nBACKOFF = 0.5\n"
SAID = "Remember: the retry limit is set in src/net/retry.py (MAX_RETRIES = 5)"


def repo_with_retry(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "src" / "net").mkdir(parents=True)
    (root / "src" / "net" / "retry.py").write_text(RETRY)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org"}
    env.update(GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.org")
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "retry"]):
        subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)
    return root


def session(db: OpenCodeDB, root: Path, words: str = SAID) -> str:
    """Read retry.py (offset/limit), then the user says ``words``; one pass sees it all."""
    sid = db.session("Retry", directory=str(root))
    u = db.user(sid, "show me the retry code")
    path = str(root / "src/net/retry.py")
    db.assistant(sid, u, tool("read", filePath=path, offset=1, limit=20), finish="tool-calls")
    db.assistant(sid, u, text("Here it is."))
    u2 = db.user(sid, words)
    db.assistant(sid, u2, text("Noted."))
    return sid


def coordinator(store: MemoryStore, db: OpenCodeDB, tmp_path: Path) -> SessionHookCoordinator:
    cfg = {k: dict(v) for k, v in DEFAULT_CONFIG.items()}
    cfg["session"].update(idle_quiet_seconds=0, idle_debounce_seconds=0)
    cfg["episodes"]["enabled"] = True
    adapters = {"opencode": OpenCodeAdapter(db.path)}
    return SessionHookCoordinator(store, adapters, cfg, tmp_path / "ctx")


def test_the_memory_is_cited_its_episodes_are_not(store: MemoryStore, tmp_path: Path) -> None:
    root = repo_with_retry(tmp_path)
    db = OpenCodeDB(tmp_path / "oc" / "opencode.db")
    sid = session(db, root)
    coord = coordinator(store, db, tmp_path)
    assert coord.on_idle(sid)[0] == "success"
    (mem,) = [
        m for m in store.list_all() if "MAX_RETRIES" in m["content"] and m["type"] != "conversation"
    ]
    (c,) = citations.of_memory(store.db, mem["id"])
    assert (c.path, c.line_start, c.line_end, c.status) == ("src/net/retry.py", 4, 4, "unchecked")
    episodes = store.list_all(type="conversation")
    assert episodes and all(citations.of_memory(store.db, e["id"]) == [] for e in episodes)
    db.close()


def test_a_memory_that_cannot_take_more_citations_is_still_stored(
    store: MemoryStore, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The same memory learned again (a duplicate: the store returns the known one) whose
    citations are full: the session's pass still commits, cursor and all."""
    root = repo_with_retry(tmp_path)
    db = OpenCodeDB(tmp_path / "oc" / "opencode.db")
    first = session(db, root)
    coord = coordinator(store, db, tmp_path)
    assert coord.on_idle(first)[0] == "success"
    (mem,) = [
        m for m in store.list_all() if "MAX_RETRIES" in m["content"] and m["type"] != "conversation"
    ]
    (root / "other.py").write_text("".join(f"x{i} = {i}\n" for i in range(40)))
    citations.add(
        store.db,
        mem["id"],
        [Citation("other.py", i, i) for i in range(1, MAX_PER_MEMORY)],
    )
    # The line moved (not committed): the new capture is another citation, one too many.
    (root / "src/net/retry.py").write_text("# retries\n" + RETRY)
    second = session(db, root)
    caplog.set_level(logging.INFO, "llmem_hooks.session.hooks")
    result = coord.on_idle(second)
    assert f"citations of {mem['id']} not added" in caplog.text
    assert result[0] in ("success", "no_memories")
    assert store.get_extraction("opencode", second)  # the pass committed
    assert len(citations.of_memory(store.db, mem["id"])) == MAX_PER_MEMORY
    db.close()


def test_a_session_outside_git_stores_the_memory_without_citations(
    store: MemoryStore, tmp_path: Path
) -> None:
    plain = tmp_path / "plain"
    (plain / "src" / "net").mkdir(parents=True)
    (plain / "src" / "net" / "retry.py").write_text(RETRY)
    db = OpenCodeDB(tmp_path / "oc" / "opencode.db")
    sid = session(db, plain)
    coord = coordinator(store, db, tmp_path)
    assert coord.on_idle(sid)[0] == "success"
    (mem,) = [
        m for m in store.list_all() if "MAX_RETRIES" in m["content"] and m["type"] != "conversation"
    ]
    assert citations.of_memory(store.db, mem["id"]) == []
    assert citations.state(store.db, mem["id"]) == "not checkable"
    db.close()


def test_what_an_earlier_pass_read_is_found_by_the_same_or_a_restarted_coordinator(
    store: MemoryStore, tmp_path: Path
) -> None:
    """The read is extracted in one pass, "remember" in the next: the same coordinator
    keeps the earlier exchange; a new one (a restarted sidecar) reads the transcript again."""
    root = repo_with_retry(tmp_path)
    db = OpenCodeDB(tmp_path / "oc" / "opencode.db")
    path = str(root / "src/net/retry.py")
    sids = []
    for _ in range(2):
        sid = db.session("Retry", directory=str(root))
        u = db.user(sid, "show me the retry code")
        db.assistant(sid, u, tool("read", filePath=path, offset=3, limit=3), finish="tool-calls")
        db.assistant(sid, u, text("Here it is."))
        sids.append(sid)
    first = coordinator(store, db, tmp_path)
    for sid in sids:
        assert first.on_idle(sid)[0] == "no_memories"
    said = ("BACKOFF = 0.5 is the pause", "MAX_RETRIES = 5 is the cap")
    for sid, words in zip(sids, said, strict=True):
        u2 = db.user(sid, f"Remember: {words}")
        db.assistant(sid, u2, text("Noted."))
    assert first.on_idle(sids[0])[0] == "success"  # the kept exchange
    restarted = coordinator(store, db, tmp_path)
    assert restarted.on_idle(sids[1])[0] == "success"  # read again
    got = {}
    for m in store.list_all():
        for c in citations.of_memory(store.db, m["id"]):
            got[m["content"]] = (c.path, c.line_start)
    assert got == {
        "BACKOFF = 0.5 is the pause.": ("src/net/retry.py", 5),
        "MAX_RETRIES = 5 is the cap.": ("src/net/retry.py", 4),
    }
    db.close()
