"""The index's floor rows (store/floor_rows.py): BM25 as if the store held more rows that
say none of the question's words, so a project's own vocabulary keeps its weight."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from llmem_hooks import MemoryStore, Retriever
from llmem_hooks.store import floor_rows
from llmem_hooks.store.db import connect
from llmem_hooks.store.migrations import migrate


def _billing(store: MemoryStore) -> dict[str, str]:
    """One project's exchanges: "invoice" in nearly all of them, "email" in three."""
    ids: dict[str, str] = {}
    for i in range(14):
        store.add(
            "conversation",
            f"User: the invoice worker run {i} went fine.\n"
            f"Assistant: Invoice batch {i} rendered, worker idle again.",
            project="billing",
            dedupe=False,
        )
    for i in range(2):
        ids[f"mail{i}"] = store.add(
            "conversation",
            f"User: mail provider note {i}: the email bounced, email retried, email footer "
            "fixed.\nAssistant: Email settings updated.",
            project="billing",
            dedupe=False,
        )
    ids["answer"] = store.add(
        "conversation",
        "User: how many tries does the invoice email get?\n"
        "Assistant: The invoice email job gets 8 tries.",
        project="billing",
        dedupe=False,
    )
    return ids


def test_a_word_in_most_of_a_projects_rows_still_counts(tmp_path: Path) -> None:
    with MemoryStore(tmp_path / "m.db") as store:
        ids = _billing(store)
        first = store.fts_search("invoice OR email", limit=3)
        assert first[0]["id"] == ids["answer"]  # the one row that says both
        assert Retriever(store).find("invoice email", track_access=False)[0].id == ids["answer"]
        # Without the floor rows, FTS5 weighs "invoice" (15 of 17 rows) at nothing and
        # ranks the rows that say "email" most often first.
        with store.atomic():
            floor_rows.drop(store.conn)
        assert store.fts_search("invoice OR email", limit=3)[0]["id"] != ids["answer"]


def test_the_floor_rows_are_no_memory(tmp_path: Path) -> None:
    with MemoryStore(tmp_path / "m.db") as store:
        _billing(store)
        assert floor_rows.count(store.conn) == 34  # twice the memories, at most FLOOR_ROWS
        assert store.count(valid_only=False) == 17
        assert len(store.list_all(limit=100)) == 17
        assert len(store.export_all()) == 17
        pad = f'"{floor_rows.PAD_TOKEN}"'
        assert store.fts_search(pad, limit=50) == []  # no text column holds the token
        assert store.count_matching("invoice") == 15
        assert store.fts_count('"invoice"', None, 100) == 15
        # What a person may type: the token itself, as a phrase, or a scope's syntax.
        for query in (floor_rows.PAD_TOKEN, pad, f"fts_scope : {pad}", "email NOT invoice"):
            hits = Retriever(store).find(query, track_access=False)
            assert all(store.get(h.id) is not None for h in hits)


def test_they_follow_the_store_as_it_grows(tmp_path: Path) -> None:
    with MemoryStore(tmp_path / "m.db") as store:
        store.add("fact", "a short one")
        assert floor_rows.count(store.conn) == 2
        long = " ".join(f"word{i}" for i in range(300))
        for i in range(400):
            store.add("fact", f"note {i}: {long}", dedupe=False)
        assert floor_rows.count(store.conn) == floor_rows.FLOOR_ROWS
        sizes = store.conn.execute(
            "SELECT sz FROM memories_fts_docsize WHERE id < 0 LIMIT 1"
        ).fetchone()[0]
        pad_tokens = sum(floor_rows._varints(sizes))
        assert 250 < pad_tokens < 320  # the memories' average (302 tokens), not the first's
        # Written once per quarter of growth, not once per memory.
        at = store.conn.execute("SELECT at_seq FROM fts_floor").fetchone()[0]
        assert 320 <= at <= 401
        # The index still agrees with the memories once they are out.
        with store.atomic():
            floor_rows.drop(store.conn)
        store.conn.execute(
            "INSERT INTO memories_fts(memories_fts, rank) VALUES('integrity-check', 1)"
        )
        # Gone (an index made again): the next memory writes them back.
        store.add("fact", "one more note")
        assert floor_rows.count(store.conn) == floor_rows.FLOOR_ROWS


def _segments(conn: Any) -> int:
    return int(conn.execute("SELECT count(DISTINCT segid) FROM memories_fts_idx").fetchone()[0])


def test_a_rewrite_adds_a_segment_or_two_not_one_a_row(tmp_path: Path) -> None:
    """FTS5 starts a new segment whenever a rowid is not above the one before: written
    -1, -2, ... the rows were one segment each, for the index's merges to join again."""
    with MemoryStore(tmp_path / "m.db") as store:
        with store.atomic():
            for i in range(300):
                store.add("fact", f"note {i} on the invoice worker", dedupe=False)
        assert floor_rows.count(store.conn) == floor_rows.FLOOR_ROWS
        # no merging, so every segment written stays to be counted
        store.conn.execute("INSERT INTO memories_fts(memories_fts, rank) VALUES('automerge', 0)")
        store.conn.execute(
            "INSERT INTO memories_fts(memories_fts, rank) VALUES('crisismerge', 1000)"
        )
        before = _segments(store.conn)
        with store.atomic():
            store.conn.execute("DELETE FROM fts_floor")  # due: the next insert rewrites them
            store.add("fact", "one more note", dedupe=False)
        assert floor_rows.count(store.conn) == floor_rows.FLOOR_ROWS
        # the new memory, the deleted rows, the written rows
        assert _segments(store.conn) - before <= 3


def test_a_store_of_many_projects_gets_fewer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """They stand in for the other projects a one-project store lacks: ten projects of
    equal size get a tenth of them, and never none (none would read as gone)."""
    with MemoryStore(tmp_path / "m.db") as store:
        for i in range(300):
            store.add("fact", f"note {i} on service {i % 10}", project=f"p{i % 10}")
        assert floor_rows.count(store.conn) == floor_rows.FLOOR_ROWS // 10
        monkeypatch.setattr(floor_rows, "FLOOR_ROWS", 5)  # a tenth of it is under one row
        with store.atomic():
            store.conn.execute("DELETE FROM fts_floor")
            assert floor_rows.keep(store.conn, 300)
            assert floor_rows.count(store.conn) == 1
            writes = [floor_rows.keep(store.conn, 300 + i) for i in range(1, 20)]
        assert writes == [False] * 19  # written once, not at every insert


def test_a_store_from_before_gets_them_on_upgrade(tmp_path: Path) -> None:
    conn = connect(tmp_path / "m.db")
    migrate(conn, upto=20)
    for i in range(3):
        conn.execute(
            "INSERT INTO memories(id, type, content, created_at, updated_at, content_hash,"
            " tag_text) VALUES (?, 'fact', ?, '2026-01-01T00:00:00.000000+00:00',"
            " '2026-01-01T00:00:00.000000+00:00', ?, '')",
            (f"m-{i}", f"the ledger pool size is {40 + i}", f"h{i}"),
        )
    assert floor_rows.count(conn) == 0
    assert migrate(conn) == [21]
    assert floor_rows.count(conn) == 6
    conn.close()
    empty = connect(tmp_path / "empty.db")
    migrate(empty)
    assert floor_rows.count(empty) == 0  # nothing to average yet: the first memory writes them
    empty.close()


def test_two_writers_at_once_keep_one_set(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    MemoryStore(db).close()
    script = textwrap.dedent(
        f"""
        import sys
        from llmem_hooks import MemoryStore
        with MemoryStore({str(db)!r}) as store:
            for i in range(150):
                store.add("fact", f"writer {{sys.argv[1]}} note {{i}} about queues", dedupe=False)
        """
    )
    procs = [subprocess.Popen([sys.executable, "-c", script, str(n)]) for n in (1, 2)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    with MemoryStore(db) as store:
        assert store.count(valid_only=False) == 300
        assert floor_rows.count(store.conn) == floor_rows.FLOOR_ROWS
        rowids = [r[0] for r in store.conn.execute("SELECT id FROM memories_fts_docsize")]
        assert len(rowids) == len(set(rowids)) == 300 + floor_rows.FLOOR_ROWS
        with store.atomic():
            floor_rows.drop(store.conn)
        store.conn.execute(
            "INSERT INTO memories_fts(memories_fts, rank) VALUES('integrity-check', 1)"
        )
