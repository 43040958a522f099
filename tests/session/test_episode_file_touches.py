"""Episodes record the files their exchange touched (issue 22 §3): a real OpenCode
database, the coordinator storing episodes, paths made repository-relative against the
session's directory (a real git repository); files outside it are not kept."""

from __future__ import annotations

from pathlib import Path

from support.opencode_db import OpenCodeDB, text, tool

from llmem_hooks import MemoryStore, SessionHookCoordinator
from llmem_hooks.adapters import OpenCodeAdapter
from llmem_hooks.config import DEFAULT_CONFIG
from llmem_hooks.store import file_touches as touches


def test_episodes_store_their_files_repository_relative(
    store: MemoryStore, tmp_path: Path, repo: Path
) -> None:
    (repo / "src").mkdir()
    (repo / "src" / "app.py").write_text("x = 1\n")
    db = OpenCodeDB(tmp_path / "oc" / "opencode.db")
    cfg = {k: dict(v) for k, v in DEFAULT_CONFIG.items()}
    cfg["session"].update(idle_quiet_seconds=0, idle_debounce_seconds=0, end_after_minutes=600)
    coord = SessionHookCoordinator(
        store, {"opencode": OpenCodeAdapter(db.path)}, cfg, tmp_path / "ctx"
    )
    sid = db.session("Retry limits", directory=str(repo / "src"))
    u1 = db.user(sid, "Why do retries stop at seven in the app module?")
    db.assistant(
        sid,
        u1,
        tool("read", filePath=str(repo / "src" / "app.py")),
        tool("read", filePath="/etc/hostname"),
        tool("edit", filePath=str(repo / "src" / ".." / ".." / "elsewhere.py")),
        tool("read", filePath="README.md"),  # relative to the session's folder (src/)
        text("RETRY_LIMIT in src/app.py is 7; the SRE team set it after the outage."),
    )
    coord.on_idle(sid, force=True)
    (ep,) = store.list_all(type="conversation", limit=10)
    assert touches.touched_by(store.db, ep["id"]) == ["src/app.py", "src/README.md"]
    assert touches.episodes_touching(store.db, "src/app.py", ep["project"]) == [ep["id"]]
    assert touches.episodes_touching(store.db, "src/app.py", "another-project") == []
    # deleted with the episode
    assert store.delete(ep["id"])
    assert touches.touched_by(store.db, ep["id"]) == []
    db.close()
