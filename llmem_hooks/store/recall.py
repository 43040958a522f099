"""What the query service needs from the store beyond search: the ``recall_given`` table
(which memories a session was already given), short ids that stay unique, and a
memory's neighbours in its session (the timeline).

Module functions over the store's `Database` (``recall.given_ids(store.db, sid)``), like
`sessions`: reads take its lock, writes run in one short ``BEGIN IMMEDIATE`` transaction.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..timestamps import now_iso
from .db import Database
from .records import MEMORY_COLUMNS, row_to_memory

SHORT_ID_LENGTHS = (8, 12, 16, 24)  # tried in turn until the prefix names one memory


def given_ids(db: Database, session_id: str) -> set[str]:
    """The full ids of the memories recall already gave ``session_id``."""
    rows = db.fetchall("SELECT memory_id FROM recall_given WHERE session_id = ?", (session_id,))
    return {str(r[0]) for r in rows}


def latest_given_texts(db: Database, session_id: str, limit: int) -> list[dict[str, Any]]:
    """The words of the ``limit`` memories ``session_id`` was given last (newest first):
    ``{"content", "summary", "tags"}`` each, what recall measures a new hit against (only
    the text: decoding whole rows cost more than the comparison)."""
    rows = db.fetchall(
        "SELECT m.content, m.summary, m.tag_text FROM recall_given g "
        "JOIN memories m ON m.id = g.memory_id "
        "WHERE g.session_id = ? ORDER BY g.given_at DESC LIMIT ?",
        (session_id, limit),
    )
    return [{"content": r[0] or "", "summary": r[1], "tags": (r[2] or "").split()} for r in rows]


def mark_given(db: Database, session_id: str, memory_ids: Iterable[str]) -> None:
    """Record that ``session_id`` was given these memories (idempotent)."""
    ids = list(dict.fromkeys(memory_ids))
    if not ids:
        return
    now = now_iso()
    with db.transaction():
        db.conn.executemany(
            "INSERT OR IGNORE INTO recall_given(session_id, memory_id, given_at) VALUES (?, ?, ?)",
            [(session_id, mid, now) for mid in ids],
        )


def prune_given(db: Database, before_iso: str) -> int:
    """Forget what was given before ``before_iso`` (sessions that old are over)."""
    with db.transaction():
        cur = db.conn.execute("DELETE FROM recall_given WHERE given_at < ?", (before_iso,))
        return int(cur.rowcount)


def short_id(db: Database, memory_id: str) -> str:
    """The shortest prefix of ``memory_id`` in `SHORT_ID_LENGTHS` that no other memory
    shares (so `MemoryStore.resolve_id` resolves it); the full id if none is unique.
    One indexed range read per length tried, usually one."""
    for n in SHORT_ID_LENGTHS:
        if n >= len(memory_id):
            break
        prefix = memory_id[:n]
        rows = db.fetchall(
            "SELECT id FROM memories WHERE id >= ? AND id < ? ORDER BY id LIMIT 2",
            (prefix, prefix + "\uffff"),
        )
        if len(rows) <= 1:
            return prefix
    return memory_id


def session_neighbours(
    db: Database, memory: dict[str, Any], before: int, after: int
) -> list[dict[str, Any]]:
    """The memories of ``memory``'s session (episodes and extracted memories alike, valid
    or not) just before and after it in time, and itself, oldest first."""
    sid = memory.get("session_id")
    if not sid:
        return [memory]
    at, mid = memory["created_at"], memory["id"]
    cols = MEMORY_COLUMNS
    with db.lock:
        seq = db.conn.execute("SELECT seq FROM memories WHERE id = ?", (mid,)).fetchone()
        key = (at, seq[0] if seq else 0)
        older = db.conn.execute(
            f"SELECT {cols} FROM memories m WHERE m.session_id = ? "
            "AND (m.created_at < ? OR (m.created_at = ? AND m.seq < ?)) "
            "ORDER BY m.created_at DESC, m.seq DESC LIMIT ?",
            (sid, key[0], key[0], key[1], before),
        ).fetchall()
        newer = db.conn.execute(
            f"SELECT {cols} FROM memories m WHERE m.session_id = ? "
            "AND (m.created_at > ? OR (m.created_at = ? AND m.seq > ?)) "
            "ORDER BY m.created_at, m.seq LIMIT ?",
            (sid, key[0], key[0], key[1], after),
        ).fetchall()
    return [
        *(row_to_memory(r) for r in reversed(older)),
        memory,
        *(row_to_memory(r) for r in newer),
    ]
