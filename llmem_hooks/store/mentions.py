"""Which projects or sessions say a word: the retriever's question "where is the Sunniva
this question names?" (`Retriever._named_first`), answered inside FTS5 without ranking."""

from __future__ import annotations

from collections.abc import Iterable

from .db import Database
from .projects import fts_scope
from .records import FTS_TEXT_COLUMNS


def _term(word: str) -> str:
    """``word`` as a quoted FTS5 string on the text columns (`text.query.quote`'s rule,
    written out: importing text.query here would put its lexicon on every store open)."""
    return f"{FTS_TEXT_COLUMNS} : (" + '"' + word.replace('"', '""') + '")'


def projects_saying(db: Database, word: str, keys: Iterable[str]) -> set[str]:
    """Which of the projects ``keys`` hold a memory that says ``word`` (stems count): one
    FTS5 lookup each, stopping at the first row, so a name said a thousand times costs no
    more than one said once."""
    found: set[str] = set()
    with db.lock:
        for key in dict.fromkeys(keys):
            hit = db.conn.execute(
                "SELECT 1 FROM memories_fts WHERE memories_fts MATCH ? LIMIT 1",
                (f"{_term(word)} AND fts_scope : {fts_scope(key)}",),
            ).fetchone()
            if hit is not None:
                found.add(key)
    return found


def sessions_saying(db: Database, word: str, session_ids: Iterable[str]) -> set[str]:
    """Which of the sessions ``session_ids`` hold a memory that says ``word``: per session,
    one FTS5 lookup within the span of its rows (a session's memories are stored together,
    so the span is short), stopping at the first row: 20 sessions in 2-8 ms on a 110k-row
    store. Not the word's rows joined to the sessions: "redis" in 4,000 of the rows took
    14 ms that way, a word in 100,000 of them 325 ms."""
    ids = list(dict.fromkeys(session_ids))
    if not ids:
        return set()
    found: set[str] = set()
    with db.lock:
        spans = db.conn.execute(
            "SELECT session_id, min(seq), max(seq) FROM memories WHERE session_id IN "
            f"({','.join('?' * len(ids))}) GROUP BY session_id",
            ids,
        ).fetchall()
        for sid, low, high in spans:
            hit = db.conn.execute(
                "SELECT 1 FROM memories_fts JOIN memories m ON m.seq = memories_fts.rowid "
                "WHERE memories_fts MATCH ? AND memories_fts.rowid BETWEEN ? AND ? "
                "AND m.session_id = ? LIMIT 1",
                (_term(word), low, high, sid),
            ).fetchone()
            if hit is not None:
                found.add(str(sid))
    return found
