"""The ``file_touches`` and ``file_recall_given`` tables (migration 19): a real SQLite
file through `MemoryStore`."""

from __future__ import annotations

from pathlib import Path

from llmem_hooks.store import MemoryStore
from llmem_hooks.store import file_touches as touches


def _episode(store: MemoryStore, text: str, project: str | None, session: str) -> str:
    return store.add("conversation", text, project=project, session_id=session, dedupe=False)


def test_touches_newest_first_scoped_and_gone_with_their_episode(tmp_path: Path) -> None:
    with MemoryStore(tmp_path / "m.db") as store:
        db = store.db
        old = _episode(store, "User: old change to app", "p1", "s1")
        new = _episode(store, "User: new change to app", "p1", "s2")
        other = _episode(store, "User: app in another project", "p2", "s3")
        shared = _episode(store, "User: a global note on app", None, "s4")
        with store.atomic():
            touches.add_touches(
                db, old, ["src/app.py", "src/app.py", "a.py"], "2026-11-01T00:00:00Z"
            )
            touches.add_touches(db, new, ["src/app.py"], "2026-11-03T00:00:00Z")
            touches.add_touches(db, other, ["src/app.py"], "2026-11-04T00:00:00Z")
            touches.add_touches(db, shared, ["src/app.py"], "2026-11-02T00:00:00Z")
        assert touches.touched_by(db, old) == ["src/app.py", "a.py"]  # twice is once
        assert touches.episodes_touching(db, "src/app.py", "p1") == [new, shared, old]
        assert touches.episodes_touching(db, "src/app.py", None, limit=9) == [
            other,
            new,
            shared,
            old,
        ]
        assert touches.episodes_touching(db, "src/app.py", "p1", exclude_session="s2") == [
            shared,
            old,
        ]
        assert touches.episodes_touching(db, "src/app.py", "p1", exclude_ids=[shared], limit=1) == [
            new
        ]
        store.invalidate(new, "wrong")  # forgotten: not given
        assert touches.episodes_touching(db, "src/app.py", "p1") == [shared, old]
        assert store.delete(old)
        assert touches.touched_by(db, old) == []
        assert touches.episodes_touching(db, "a.py", None) == []


def test_too_many_files_keep_the_first_fifty(tmp_path: Path) -> None:
    with MemoryStore(tmp_path / "m.db") as store:
        ep = _episode(store, "User: sweeping refactor", None, "s")
        with store.atomic():
            added = touches.add_touches(store.db, ep, [f"f{i}.py" for i in range(80)], "t")
        assert added == touches.MAX_FILES_PER_EPISODE == 50
        assert touches.touched_by(store.db, ep)[-1] == "f49.py"


def test_given_once_per_session_and_file(tmp_path: Path) -> None:
    with MemoryStore(tmp_path / "m.db") as store:
        db = store.db
        assert touches.mark_given(db, "s", "src/app.py")
        assert not touches.mark_given(db, "s", "src/app.py")
        assert touches.mark_given(db, "t", "src/app.py") and touches.mark_given(db, "s", "b.py")
        assert touches.was_given(db, "s", "src/app.py") and not touches.was_given(db, "u", "b.py")
        assert touches.prune_given(db, "9999") == 3
        assert not touches.was_given(db, "s", "src/app.py")


def test_an_episode_without_a_session_is_found(tmp_path: Path) -> None:
    with MemoryStore(tmp_path / "m.db") as store:
        ep = store.add("conversation", "User: imported exchange about app", dedupe=False)
        with store.atomic():
            touches.add_touches(store.db, ep, ["src/app.py"], "2026-11-01T00:00:00Z")
        assert touches.episodes_touching(store.db, "src/app.py", None) == [ep]
        assert touches.episodes_touching(store.db, "src/app.py", None, exclude_session="s") == [ep]
