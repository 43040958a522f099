"""What the hooks and the sidecar remember about sessions: the tables ``sessions``,
``extraction_log`` (extraction runs and adapter cursors), ``pending_hooks`` and
``model_usage``.

Kept in the memory DB so that updates commit in the same transaction as the memories and
cursors they go with. Module functions over the store's `Database`
(``sessions.find(store.db, sid)``; ``log_extraction`` and ``get_extraction`` are also
`MemoryStore` methods); reads take its lock, writes join the caller's transaction
(`MemoryStore.atomic`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

from ..redact import redact_secrets
from ..timestamps import now_iso
from .db import Database

ADAPTER_CURSOR = "adapter"  # extraction_log.source_type for an adapter's tail cursor


@dataclass
class SessionRecord:
    agent: str
    session_id: str
    project: str | None = None
    directory: str | None = None
    title: str | None = None
    state: str = "active"
    created_ms: int = 0
    last_activity_ms: int = 0
    turn_done_ms: int = 0
    idle_done_ms: int = 0
    compacted_ms: int = 0
    ended_ms: int | None = None
    end_reason: str | None = None


_COLUMNS = tuple(SessionRecord.__dataclass_fields__)


def get(db: Database, agent: str, session_id: str) -> SessionRecord | None:
    row = db.fetchone(
        f"SELECT {', '.join(_COLUMNS)} FROM sessions WHERE agent = ? AND session_id = ?",
        (agent, session_id),
    )
    return SessionRecord(*row) if row else None


def find(db: Database, session_id: str) -> SessionRecord | None:
    """A session by id alone (ids are unique across agents in practice)."""
    row = db.fetchone(
        f"SELECT {', '.join(_COLUMNS)} FROM sessions WHERE session_id = ? LIMIT 1",
        (session_id,),
    )
    return SessionRecord(*row) if row else None


def active(db: Database, agent: str | None = None) -> list[SessionRecord]:
    sql = f"SELECT {', '.join(_COLUMNS)} FROM sessions WHERE state = 'active'"
    args: tuple[Any, ...] = ()
    if agent:
        sql += " AND agent = ?"
        args = (agent,)
    return [SessionRecord(*r) for r in db.fetchall(sql + " ORDER BY created_ms", args)]


def all_sessions(db: Database, limit: int = 200) -> list[SessionRecord]:
    rows = db.fetchall(
        f"SELECT {', '.join(_COLUMNS)} FROM sessions ORDER BY last_activity_ms DESC LIMIT ?",
        (limit,),
    )
    return [SessionRecord(*r) for r in rows]


def _redacted(text: str | None) -> str | None:
    """Free text of a session (a title is the user's first prompt) without credentials;
    None if it holds a private key (nothing after its header is safe to keep)."""
    return None if text is None else redact_secrets(text)


def save(db: Database, rec: SessionRecord) -> None:
    """Insert or replace the record (joins the caller's transaction when there is one).

    Title, directory and end reason are redacted first (issue 9): the sidecar must keep
    working, so a credential there is cut out rather than refused."""
    rec = replace(
        rec,
        title=_redacted(rec.title),
        directory=_redacted(rec.directory),
        end_reason=_redacted(rec.end_reason),
    )
    marks = ", ".join("?" * len(_COLUMNS))
    values = [getattr(rec, c) for c in _COLUMNS]
    with db.transaction():
        db.conn.execute(
            f"INSERT OR REPLACE INTO sessions({', '.join(_COLUMNS)}) VALUES ({marks})", values
        )


def get_cursor(db: Database, source_id: str) -> str | None:
    row = get_extraction(db, ADAPTER_CURSOR, source_id)
    return row["cursor"] if row else None


def set_cursor(db: Database, source_id: str, cursor: str | None) -> None:
    with db.transaction():
        db.conn.execute(
            "INSERT INTO extraction_log(source_type, source_id, cursor, runs, extracted_at)"
            " VALUES (?, ?, ?, 1, ?)"
            " ON CONFLICT(source_type, source_id) DO UPDATE SET cursor = excluded.cursor,"
            " runs = runs + 1, extracted_at = excluded.extracted_at",
            (ADAPTER_CURSOR, source_id, cursor, now_iso()),
        )


@dataclass
class PendingHook:
    """A hook the sidecar owes a session (a row of ``pending_hooks``)."""

    seq: int
    session_id: str
    event: str
    arg: str = ""
    attempts: int = 0


def add_pending(db: Database, session_id: str, event: str, arg: str = "") -> int:
    """Record a hook to run (joins the caller's transaction: commit it with the cursor).
    One row per session and event; a newer ``arg`` (ending reason) replaces the older."""
    with db.transaction():
        db.conn.execute(
            "INSERT INTO pending_hooks(session_id, event, arg, created_ms)"
            " VALUES (?, ?, ?, ?) ON CONFLICT(session_id, event) DO UPDATE SET arg = excluded.arg",
            (session_id, event, arg, int(time.time() * 1000)),
        )
        row = db.conn.execute(
            "SELECT seq FROM pending_hooks WHERE session_id = ? AND event = ?",
            (session_id, event),
        ).fetchone()
    return int(row[0])


def pending(db: Database) -> list[PendingHook]:
    """Every hook still owed, oldest first."""
    rows = db.fetchall(
        "SELECT seq, session_id, event, arg, attempts FROM pending_hooks ORDER BY seq"
    )
    return [PendingHook(*r) for r in rows]


def done_pending(db: Database, seq: int) -> None:
    """The hook ran: forget it."""
    with db.transaction():
        db.conn.execute("DELETE FROM pending_hooks WHERE seq = ?", (seq,))


def failed_pending(db: Database, seq: int, max_attempts: int) -> bool:
    """The hook failed: count it; after ``max_attempts`` drop the row. True if dropped."""
    with db.transaction():
        db.conn.execute("UPDATE pending_hooks SET attempts = attempts + 1 WHERE seq = ?", (seq,))
        gone = db.conn.execute(
            "DELETE FROM pending_hooks WHERE seq = ? AND attempts >= ?", (seq, max_attempts)
        ).rowcount
    return bool(gone)


def created_since(db: Database, since_ms: int) -> list[SessionRecord]:
    """Active sessions created at or after ``since_ms`` (owed a context file)."""
    rows = db.fetchall(
        f"SELECT {', '.join(_COLUMNS)} FROM sessions WHERE state = 'active' AND created_ms >= ?"
        " ORDER BY created_ms",
        (since_ms,),
    )
    return [SessionRecord(*r) for r in rows]


def extracted_since(db: Database, ended_after_ms: int) -> list[SessionRecord]:
    """Sessions with an extraction (owed a resume pack): active ones, and ended ones whose
    files the retention rule has not removed yet."""
    rows = db.fetchall(
        f"SELECT {', '.join('s.' + c for c in _COLUMNS)} FROM sessions s"
        " WHERE (s.state = 'active' OR s.ended_ms >= ?) AND EXISTS ("
        "SELECT 1 FROM extraction_log e WHERE e.source_type = s.agent"
        " AND e.source_id = s.session_id)",
        (ended_after_ms,),
    )
    return [SessionRecord(*r) for r in rows]


def ended_before(db: Database, cutoff_ms: int) -> list[str]:
    """Ids of sessions that ended before ``cutoff_ms`` (their files may go)."""
    rows = db.fetchall(
        "SELECT session_id FROM sessions WHERE state = 'ended' AND ended_ms < ?", (cutoff_ms,)
    )
    return [r[0] for r in rows]


def log_extraction(
    db: Database,
    source_type: str,
    source_id: str,
    cursor: str | None = None,
    memory_count: int = 0,
    message_count: int = 0,
) -> None:
    """Record how far a source has been extracted (call inside the same transaction as the
    memories it produced, via `transaction(db.conn)`, to keep the two consistent)."""
    with db.lock:
        db.conn.execute(
            "INSERT INTO extraction_log(source_type, source_id, cursor, memory_count,"
            " message_count, runs, extracted_at) VALUES (?, ?, ?, ?, ?, 1, ?)"
            " ON CONFLICT(source_type, source_id) DO UPDATE SET cursor = excluded.cursor,"
            " memory_count = memory_count + excluded.memory_count,"
            " message_count = message_count + excluded.message_count, runs = runs + 1,"
            " extracted_at = excluded.extracted_at",
            (source_type, source_id, cursor, memory_count, message_count, now_iso()),
        )


def get_extraction(db: Database, source_type: str, source_id: str) -> dict[str, Any] | None:
    row = db.fetchone(
        "SELECT * FROM extraction_log WHERE source_type = ? AND source_id = ?",
        (source_type, source_id),
    )
    return dict(row) if row else None


def forget_extraction(db: Database, source_type: str, source_id: str) -> None:
    """Drop a source's extraction row (joins the caller's transaction)."""
    with db.transaction():
        db.conn.execute(
            "DELETE FROM extraction_log WHERE source_type = ? AND source_id = ?",
            (source_type, source_id),
        )


def last_extraction_at(db: Database, session_id: str) -> str | None:
    """When anything of this session was last extracted (any source type), or None."""
    row = db.fetchone(
        "SELECT extracted_at FROM extraction_log WHERE source_id = ? "
        "ORDER BY extracted_at DESC LIMIT 1",
        (session_id,),
    )
    return str(row[0]) if row else None


# -- model usage (see llmem_hooks.model.budget) -------------------------------------------------
def usage_totals(
    db: Database, *, day: str | None = None, session_key: str | None = None
) -> tuple[int, int, int, float]:
    """(calls, prompt tokens, output tokens, seconds) summed over one UTC day's rows or
    one session's (exactly one of ``day`` and ``session_key``)."""
    if (day is None) == (session_key is None):
        raise ValueError("give exactly one of day and session_key")
    column, value = ("day", day) if day is not None else ("session_key", session_key)
    row = db.fetchone(
        "SELECT coalesce(sum(calls), 0), coalesce(sum(prompt_tokens), 0), "
        "coalesce(sum(output_tokens), 0), coalesce(sum(seconds), 0.0) FROM model_usage "
        f"WHERE {column} = ?",
        (value,),
    )
    return int(row[0]), int(row[1]), int(row[2]), float(row[3])


def add_usage(
    db: Database,
    day: str,
    session_key: str,
    *,
    calls: int,
    prompt_tokens: int,
    output_tokens: int,
    seconds: float,
) -> None:
    """Add one call's cost to the (day, session) row."""
    with db.transaction():
        db.conn.execute(
            "INSERT INTO model_usage(day, session_key, calls, prompt_tokens, output_tokens,"
            " seconds, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT(day, session_key) DO UPDATE SET calls = calls + excluded.calls, "
            "prompt_tokens = prompt_tokens + excluded.prompt_tokens, "
            "output_tokens = output_tokens + excluded.output_tokens, "
            "seconds = seconds + excluded.seconds, updated_at = excluded.updated_at",
            (day, session_key, calls, prompt_tokens, output_tokens, seconds, now_iso()),
        )


def usage_sessions(db: Database, day: str) -> int:
    """How many sessions used the model on ``day``."""
    row = db.fetchone("SELECT count(*) FROM model_usage WHERE day = ?", (day,))
    return int(row[0])


__all__ = [
    "PendingHook",
    "SessionRecord",
    "active",
    "add_pending",
    "add_usage",
    "all_sessions",
    "created_since",
    "done_pending",
    "ended_before",
    "extracted_since",
    "failed_pending",
    "find",
    "forget_extraction",
    "get",
    "get_cursor",
    "get_extraction",
    "last_extraction_at",
    "log_extraction",
    "pending",
    "save",
    "set_cursor",
    "usage_sessions",
    "usage_totals",
]
