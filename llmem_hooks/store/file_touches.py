"""Which episodes touched which files, and which files a session was told about: the
tables ``file_touches`` and ``file_recall_given`` (migration 19; docs/citations.md,
"Recall for the file in hand").

``file_touches``: one row per (episode, repository-relative path) for the files an
exchange's tool calls read, edited or ran (`events.Message.files`), written with the
episode (`SessionHookCoordinator.store_episodes`) and deleted with it (ON DELETE
CASCADE). ``file_recall_given``: a file whose memories a session was given (or asked
for and had none), so the next read of the same file in that session costs one indexed
read and gives nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from ..timestamps import now_iso
from .db import Database

MAX_FILES_PER_EPISODE = 50  # an exchange touching more (a sweeping refactor) keeps these


def add_touches(db: Database, memory_id: str, paths: Iterable[str], touched_at: str) -> int:
    """Record that episode ``memory_id`` touched ``paths`` (repository-relative, already
    checked); joins the caller's transaction. Returns how many rows were added."""
    rows = [(memory_id, p, touched_at) for p in list(dict.fromkeys(paths))[:MAX_FILES_PER_EPISODE]]
    if not rows:
        return 0
    cur = db.conn.executemany(
        "INSERT OR IGNORE INTO file_touches(memory_id, path, touched_at) VALUES (?, ?, ?)", rows
    )
    return int(cur.rowcount)


def touched_by(db: Database, memory_id: str) -> list[str]:
    """The paths an episode touched, in the order stored."""
    rows = db.fetchall(
        "SELECT path FROM file_touches WHERE memory_id = ? ORDER BY rowid", (memory_id,)
    )
    return [r[0] for r in rows]


def episodes_touching(
    db: Database,
    path: str,
    project: str | None,
    *,
    exclude_session: str | None = None,
    exclude_ids: Iterable[str] = (),
    limit: int = 3,
) -> list[str]:
    """Ids of the newest valid episodes of ``project`` (and global ones; any project when
    None) that touched ``path``, leaving out those of ``exclude_session`` (what the
    session said itself is in its own context) and ``exclude_ids``."""
    scope = "" if project is None else "AND (m.project = ? OR m.project IS NULL)"
    own = "" if exclude_session is None else "AND coalesce(m.session_id, '') != ?"
    params: list[object] = [path]
    if project is not None:
        params.append(project)
    if exclude_session is not None:
        params.append(exclude_session)
    params += [json.dumps(list(exclude_ids)), limit]
    rows = db.fetchall(
        "SELECT m.id FROM file_touches t JOIN memories m ON m.id = t.memory_id "
        f"WHERE t.path = ? {scope} AND m.valid_until IS NULL {own} "
        "AND m.id NOT IN (SELECT value FROM json_each(?)) "
        "ORDER BY t.touched_at DESC, m.seq DESC LIMIT ?",
        tuple(params),
    )
    return [r[0] for r in rows]


def was_given(db: Database, session_id: str, path: str) -> bool:
    """Whether ``session_id`` was already told about ``path``."""
    row = db.fetchone(
        "SELECT 1 FROM file_recall_given WHERE session_id = ? AND path = ?", (session_id, path)
    )
    return row is not None


def mark_given(db: Database, session_id: str, path: str) -> bool:
    """Record that ``session_id`` was told about ``path``; False if it already was (two
    calls at once: only one gives the block)."""
    with db.transaction() as conn:
        cur = conn.execute(
            "INSERT OR IGNORE INTO file_recall_given(session_id, path, given_at) VALUES (?, ?, ?)",
            (session_id, path, now_iso()),
        )
    return bool(cur.rowcount)


def prune_given(db: Database, before_iso: str) -> int:
    """Forget which files were given before ``before_iso`` (sessions that old are over)."""
    with db.transaction() as conn:
        cur = conn.execute("DELETE FROM file_recall_given WHERE given_at < ?", (before_iso,))
    return int(cur.rowcount)
