"""Which projects or sessions say a word: the retriever's question "where is the Sunniva
this question names?" (`Retriever._named_first`), answered inside FTS5 without ranking."""

from __future__ import annotations

from collections.abc import Iterable

from .db import Database
from .projects import fts_scope
from .records import FTS_TEXT_COLUMNS


def _term(word: str) -> str:
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
    """Which of the sessions ``session_ids`` hold a memory that says ``word``: the word's
    rows from FTS5 once, joined to the few sessions asked about."""
    ids = list(dict.fromkeys(session_ids))
    if not ids:
        return set()
    with db.lock:
        rows = db.conn.execute(
            "SELECT DISTINCT session_id FROM memories WHERE session_id IN "
            f"({','.join('?' * len(ids))}) AND seq IN "
            "(SELECT rowid FROM memories_fts WHERE memories_fts MATCH ?)",
            [*ids, _term(word)],
        ).fetchall()
    return {str(r[0]) for r in rows}
