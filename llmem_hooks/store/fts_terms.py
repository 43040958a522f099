"""Memories' words as the FTS5 index sees them, for a search that runs without SQLite: the
static report's search in the browser (`llmem_hooks.viewer.search_index`).

The terms come from FTS5's own tokenizer (the ``tokenize=`` of ``memories_fts``, read from
the schema): the memories to index are copied into a temporary FTS5 table with the same
tokenizer and columns and read back through ``fts5vocab``, and so are single words (a
word -> its stem), so the page needs no stemmer of its own and can never disagree with the
store's. BM25's statistics (rows, average length, each term's row count) are those of the
whole ``memories_fts`` index, as the live search ranks with them. Only ``temp`` tables are
written (dropped again), so a read-only store works (its file is opened ``mode=ro``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from . import floor_rows
from .db import Database
from .migrations import RANK_WEIGHTS

_TOKENIZE = re.compile(r"tokenize\s*=\s*'((?:[^']|'')*)'", re.IGNORECASE)
DEFAULT_TOKENIZE = "porter unicode61 remove_diacritics 2"
_DOCS, _WORDS = "llmem_report_docs", "llmem_report_words"
_VOCABS = ("llmem_report_docs_i", "llmem_report_words_i", "llmem_report_rows")
CHUNK = 500


@dataclass
class TermIndex:
    """What a BM25 ranking over some memories needs. ``docs``: id -> (the row's length in
    tokens over all columns, term -> weighted count: each occurrence counts its column's
    rank weight), in the index's row order; ``word_terms``: word -> its term (a word of
    one token only); ``df``: term -> rows of the whole index holding it; ``rows`` and
    ``avgdl`` of the whole index; ``floor``: the index's floor rows (`floor_rows`), which
    BM25's N counts besides the ``rows`` memories."""

    docs: dict[str, tuple[int, dict[str, float]]] = field(default_factory=dict)
    word_terms: dict[str, str] = field(default_factory=dict)
    df: dict[str, int] = field(default_factory=dict)
    rows: int = 0
    floor: int = 0
    avgdl: float = 0.0


def tokenizer(db: Database) -> str:
    """The ``tokenize=`` argument of ``memories_fts`` (what its terms are made with)."""
    row = db.fetchone("SELECT sql FROM sqlite_master WHERE name = 'memories_fts'")
    found = _TOKENIZE.search(row[0] if row and row[0] else "")
    return found.group(1).replace("''", "'") if found else DEFAULT_TOKENIZE


def term_index(db: Database, ids: Sequence[str], words: Iterable[str]) -> TermIndex:
    """The terms of the memories ``ids`` (missing ids are left out), the term of each of
    ``words``, and the index-wide statistics for those terms."""
    out = TermIndex()
    tok = tokenizer(db).replace("'", "''")
    with db.locked() as conn:
        columns = [r[1] for r in conn.execute("PRAGMA main.table_info(memories_fts)")]
        weights = dict(zip(columns, RANK_WEIGHTS, strict=False))
        cols = ", ".join(columns)
        # A read-only store (``mode=ro``: its file cannot be written) also sets query_only,
        # which refuses temporary tables too: lifted for these statements under the lock.
        query_only = conn.execute("PRAGMA query_only").fetchone()[0]
        try:
            conn.execute("PRAGMA query_only = OFF")
            _drop(conn)
            conn.execute(f"CREATE VIRTUAL TABLE temp.{_DOCS} USING fts5({cols}, tokenize='{tok}')")
            conn.execute(f"CREATE VIRTUAL TABLE temp.{_WORDS} USING fts5(w, tokenize='{tok}')")
            conn.execute(
                f"CREATE VIRTUAL TABLE temp.{_VOCABS[0]} USING fts5vocab(temp, {_DOCS}, instance)"
            )
            conn.execute(
                f"CREATE VIRTUAL TABLE temp.{_VOCABS[1]} USING fts5vocab(temp, {_WORDS}, instance)"
            )
            conn.execute(
                f"CREATE VIRTUAL TABLE temp.{_VOCABS[2]} USING fts5vocab(main, memories_fts, row)"
            )
            seq_id: dict[int, str] = {}
            values = ", ".join(f"coalesce({c}, '')" for c in columns)
            id_list = list(dict.fromkeys(ids))
            for i in range(0, len(id_list), CHUNK):
                chunk = id_list[i : i + CHUNK]
                marks = ",".join("?" * len(chunk))
                rows = conn.execute(
                    f"SELECT seq, id, {values} FROM main.memories WHERE id IN ({marks})", chunk
                ).fetchall()
                for r in rows:
                    seq_id[r[0]] = r[1]
                conn.executemany(
                    f"INSERT INTO temp.{_DOCS}(rowid, {cols}) VALUES "
                    f"(?, {', '.join('?' * len(columns))})",
                    [(r[0], *r[2:]) for r in rows],
                )
            lengths: dict[int, int] = {}
            tfs: dict[int, dict[str, float]] = {}
            for term, doc, col in conn.execute(f"SELECT term, doc, col FROM temp.{_VOCABS[0]}"):
                lengths[doc] = lengths.get(doc, 0) + 1
                w = weights.get(col, 0.0)
                if w > 0:
                    tf = tfs.setdefault(doc, {})
                    tf[term] = tf.get(term, 0.0) + w
            for seq, mid in sorted(seq_id.items()):  # FTS5's order: ties rank as there
                out.docs[mid] = (lengths.get(seq, 0), tfs.get(seq, {}))
            word_list = list(dict.fromkeys(words))
            conn.executemany(
                f"INSERT INTO temp.{_WORDS}(rowid, w) VALUES (?, ?)",
                [(i + 1, w) for i, w in enumerate(word_list)],
            )
            found: dict[int, list[str]] = {}
            for term, doc in conn.execute(f"SELECT term, doc FROM temp.{_VOCABS[1]}"):
                found.setdefault(doc, []).append(term)
            for doc, terms in found.items():
                if len(terms) == 1:
                    out.word_terms[word_list[doc - 1]] = terms[0]
            wanted = {t for _, tf in out.docs.values() for t in tf} | set(out.word_terms.values())
            for term in wanted:
                row = conn.execute(
                    f"SELECT doc FROM temp.{_VOCABS[2]} WHERE term = ?", (term,)
                ).fetchone()
                if row is not None:
                    out.df[term] = int(row[0])
            total = conn.execute(f"SELECT coalesce(sum(cnt), 0) FROM temp.{_VOCABS[2]}").fetchone()
            out.rows = int(conn.execute("SELECT count(*) FROM main.memories").fetchone()[0])
            out.floor = floor_rows.count(conn)
            indexed = out.rows + out.floor  # BM25's N: the floor rows count (and their tokens)
            out.avgdl = float(total[0]) / indexed if indexed else 0.0
        finally:
            _drop(conn)
            conn.execute(f"PRAGMA query_only = {'ON' if query_only else 'OFF'}")
    return out


def _drop(conn: object) -> None:
    for name in (*_VOCABS, _WORDS, _DOCS):
        conn.execute(f"DROP TABLE IF EXISTS temp.{name}")  # type: ignore[attr-defined]
