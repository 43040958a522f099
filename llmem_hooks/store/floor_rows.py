"""The index's floor rows: FTS5 ranks as if the store held up to `FLOOR_ROWS` more
exchanges that say none of the question's words.

Why (issue 23): FTS5's BM25 weighs a word by ``log((N - n + 0.5) / (n + 0.5))`` over the
index's N rows, and clamps it to almost nothing once the word is in half of them. One
repository's sessions make a store of a few hundred exchanges, and its own vocabulary
("invoice", "worker", "index") is in many of them: a question's most telling words then
count less than a word said once by chance, or not at all. A store of many projects does
not have the problem (each project's words are rare among all rows). Measured on the real
path (docs/benchmarks.md, stop 40): ten technical conversations, each alone in its store,
@5 / @10 0.791 / 0.904 -> 0.820 / 0.917 (the keyword floor 0.776 / 0.870); the store of
all ten, the chats and DevMemBench within a question or three.

How many: `FLOOR_ROWS` times the share of the memories the largest project holds, and at
most `FLOOR_SHARE` times the memories. They stand in for the other projects a store of one
project lacks: a store of ten projects of equal size gets a tenth of them (on the real
path, 200 of them there cost @10 -0.014 on the technical dev half; 21 cost nothing).

The rows: rowids -1, -2, ... of ``memories_fts`` (an external-content table: no
``memories`` row stands behind them, so no search, count or listing that joins the
memories sees one), each holding as many tokens as the store's rows do on average (BM25's
average length stays what it is), all of them one private-use character in the
``fts_scope`` column (weight 0; no query names it: searches name the text columns or a
scope's own tokens). `keep` rewrites them as the store grows (the average changes), in the
writer's transaction. A migration that drops and recreates ``memories_fts`` drops them;
the next insert writes them again (the ones present are read off the index, never assumed,
so they are never deleted twice).
"""

from __future__ import annotations

from typing import Any

# 200 rather than 300-1,000: the chats (short exchanges, hundreds in a store) lost up to
# 0.016 @10 at 1,000 and nothing at 200, while the technical stores kept their gain.
FLOOR_ROWS = 200
# At most twice as many as the memories: a store of a dozen notes ranked as if it held 200
# more rows would weigh every one of its words about the same.
FLOOR_SHARE = 2.0
PAD_TOKEN = "\ue000"  # a private-use character: a token to FTS5's unicode61, typed by no one
GROWTH = 1.25  # the rows are rewritten when the store has grown by a quarter ...
MIN_STEP = 16  # ... or by this many memories, whichever is more
SAMPLE = 2000  # rows whose length is read to measure the average


def keep(conn: Any, last_seq: int) -> bool:
    """Write or rewrite the floor rows when due: never written, gone from the index, or the
    store (``last_seq``, its highest row number) has grown by `GROWTH` since they were
    written. Runs inside the caller's write transaction; True when it wrote them."""
    row = conn.execute("SELECT at_seq FROM fts_floor").fetchone()
    grown = row is None or last_seq >= max(row[0] * GROWTH, row[0] + MIN_STEP)
    # not due, unless they are gone (an index dropped and made again)
    if not grown and conn.execute("SELECT 1 FROM memories_fts_docsize WHERE id < 0").fetchone():
        return False
    drop(conn)
    pad = _pad(round(_average_tokens(conn, last_seq)))
    # at least one: none would read as "gone" and be written again at every insert
    n = int(max(1, min(FLOOR_ROWS * _largest_share(conn), FLOOR_SHARE * last_seq)))
    # In ascending rowid order (-n .. -1): FTS5 starts a new segment whenever a rowid is not
    # above the one before, so -1, -2, ... wrote one segment a row, for the merges to join
    # again (the recall bench's store: 11 -> 16 segments, now 12; a rewrite of 200 rows
    # 8-10 ms, now 7).
    conn.executemany(
        "INSERT INTO memories_fts(rowid, content, summary, tag_text, fts_scope, fts_context,"
        " fts_after) VALUES (?, '', '', '', ?, '', '')",
        [(-i, pad) for i in range(n, 0, -1)],
    )
    conn.execute("DELETE FROM fts_floor")
    conn.execute("INSERT INTO fts_floor(at_seq) VALUES (?)", (last_seq,))
    return True


def drop(conn: Any) -> None:
    """Take the floor rows out of the index (each deleted with the text it was written
    with, read back from the index's own sizes, as an external-content table needs)."""
    present = conn.execute(
        "SELECT id, sz FROM memories_fts_docsize WHERE id < 0 ORDER BY id"
    ).fetchall()
    for rowid, size in present:
        conn.execute(
            "INSERT INTO memories_fts(memories_fts, rowid, content, summary, tag_text,"
            " fts_scope, fts_context, fts_after) VALUES ('delete', ?, '', '', '', ?, '', '')",
            (rowid, _pad(sum(_varints(size)))),
        )


def count(conn: Any) -> int:
    """How many floor rows the index holds (what BM25's N counts besides the memories)."""
    row = conn.execute("SELECT count(*) FROM memories_fts_docsize WHERE id < 0").fetchone()
    return int(row[0])


def _largest_share(conn: Any) -> float:
    """The share of the memories that the largest project holds (the global ones count as
    one): the floor rows stand in for the other projects a store of one project lacks, and
    a store of ten projects of equal size needs a tenth of them."""
    row = conn.execute(
        "SELECT max(n), sum(n) FROM (SELECT count(*) AS n FROM memories GROUP BY project)"
    ).fetchone()
    return row[0] / row[1] if row and row[1] else 1.0


def _pad(tokens: int) -> str:
    return " ".join([PAD_TOKEN] * max(0, tokens))


def _average_tokens(conn: Any, last_seq: int) -> float:
    """The memories' average length in tokens (all columns, as BM25 counts it), from a
    sample of at most about `SAMPLE` rows of the index's own sizes (exact, not pending)."""
    step = max(1, last_seq // SAMPLE)
    sizes = conn.execute(
        "SELECT sz FROM memories_fts_docsize WHERE id > 0 AND id % ? = 0", (step,)
    ).fetchall()
    if not sizes:
        return 0.0
    return sum(sum(_varints(s[0])) for s in sizes) / len(sizes)


def _varints(blob: bytes) -> list[int]:
    """SQLite's varints (big-endian, 7 bits a byte, the ninth byte whole): a docsize row is
    one per column."""
    out: list[int] = []
    i = 0
    while i < len(blob):
        value = 0
        for k in range(9):
            if i >= len(blob):  # cut short (a damaged row): what was read counts
                break
            byte = blob[i]
            i += 1
            if k == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if not byte & 0x80:
                break
        out.append(value)
    return out
