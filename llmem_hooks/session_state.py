"""What the sidecar remembers about sessions between runs (the `sessions` table).

Kept in the memory DB so that updates commit in the same transaction as the memories and
cursors they go with; the store itself stays agnostic of agents.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from .redact import redact_secrets
from .store import MemoryStore

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


def get(store: MemoryStore, agent: str, session_id: str) -> SessionRecord | None:
    row = store.conn.execute(
        f"SELECT {', '.join(_COLUMNS)} FROM sessions WHERE agent = ? AND session_id = ?",
        (agent, session_id),
    ).fetchone()
    return SessionRecord(*row) if row else None


def find(store: MemoryStore, session_id: str) -> SessionRecord | None:
    """A session by id alone (ids are unique across agents in practice)."""
    row = store.conn.execute(
        f"SELECT {', '.join(_COLUMNS)} FROM sessions WHERE session_id = ? LIMIT 1",
        (session_id,),
    ).fetchone()
    return SessionRecord(*row) if row else None


def active(store: MemoryStore, agent: str | None = None) -> list[SessionRecord]:
    sql = f"SELECT {', '.join(_COLUMNS)} FROM sessions WHERE state = 'active'"
    args: tuple[Any, ...] = ()
    if agent:
        sql += " AND agent = ?"
        args = (agent,)
    return [SessionRecord(*r) for r in store.conn.execute(sql + " ORDER BY created_ms", args)]


def all_sessions(store: MemoryStore, limit: int = 200) -> list[SessionRecord]:
    rows = store.conn.execute(
        f"SELECT {', '.join(_COLUMNS)} FROM sessions ORDER BY last_activity_ms DESC LIMIT ?",
        (limit,),
    )
    return [SessionRecord(*r) for r in rows]


def _redacted(text: str | None) -> str | None:
    """Free text of a session (a title is the user's first prompt) without credentials;
    None if it holds a private key (nothing after its header is safe to keep)."""
    return None if text is None else redact_secrets(text)


def save(store: MemoryStore, rec: SessionRecord) -> None:
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
    with store.atomic():
        store.conn.execute(
            f"INSERT OR REPLACE INTO sessions({', '.join(_COLUMNS)}) VALUES ({marks})", values
        )


def get_cursor(store: MemoryStore, source_id: str) -> str | None:
    row = store.get_extraction(ADAPTER_CURSOR, source_id)
    return row["cursor"] if row else None


def set_cursor(store: MemoryStore, source_id: str, cursor: str | None) -> None:
    with store.atomic():
        store.conn.execute(
            "INSERT INTO extraction_log(source_type, source_id, cursor, runs, extracted_at)"
            " VALUES (?, ?, ?, 1, datetime('now'))"
            " ON CONFLICT(source_type, source_id) DO UPDATE SET cursor = excluded.cursor,"
            " runs = runs + 1, extracted_at = excluded.extracted_at",
            (ADAPTER_CURSOR, source_id, cursor),
        )


__all__ = [
    "SessionRecord",
    "active",
    "all_sessions",
    "find",
    "get",
    "get_cursor",
    "save",
    "set_cursor",
]
