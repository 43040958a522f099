"""Migrations: applied once each, recorded, and an upgraded DB ends identical to a fresh one."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from llmem_hooks import MemoryStore, Retriever
from llmem_hooks.store.db import connect
from llmem_hooks.store.migrations import MIGRATIONS, migrate


def schema(conn: Any) -> list[tuple[str, str, str]]:
    return sorted(
        (r[0], r[1], r[2] or "")
        for r in conn.execute(
            "SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"
        )
    )


def test_fresh_db_records_every_migration_once(tmp_path: Path) -> None:
    conn = connect(tmp_path / "m.db")
    assert migrate(conn) == [v for v, _, _ in MIGRATIONS]
    assert migrate(conn) == []  # second run applies nothing
    rows = conn.execute("SELECT version, name FROM _schema_migrations ORDER BY version").fetchall()
    assert [(r[0], r[1]) for r in rows] == [(v, n) for v, n, _ in MIGRATIONS]
    conn.close()


def test_upgraded_db_matches_fresh_db(tmp_path: Path) -> None:
    fresh = connect(tmp_path / "fresh.db")
    migrate(fresh)

    old = connect(tmp_path / "old.db")
    migrate(old, upto=1)  # a database from the first release: no FTS, no fuzzy, no inbox
    assert not old.execute("SELECT 1 FROM sqlite_master WHERE name = 'memories_fts'").fetchone()
    old.execute(
        "INSERT INTO memories(id, type, content, created_at, updated_at, content_hash, tag_text)"
        " VALUES ('m-1', 'fact', 'Kubernetes manifests live in deploy/k8s', "
        "'2026-01-01T00:00:00.000000+00:00', '2026-01-01T00:00:00.000000+00:00', 'h', 'infra')"
    )
    old.close()

    with MemoryStore(tmp_path / "old.db") as upgraded:  # opening applies 2..N
        assert schema(upgraded.conn) == schema(fresh)
        versions = [r[0] for r in upgraded.conn.execute("SELECT version FROM _schema_migrations")]
        assert versions == [v for v, _, _ in MIGRATIONS]
        # Backfilled indexes work on the old row: FTS (stemmed, tags) and fuzzy vocabulary.
        r = Retriever(upgraded)
        assert [h.id for h in r.find("manifest", track_access=False)] == ["m-1"]
        assert [h.id for h in r.find("infra", track_access=False)] == ["m-1"]
        assert [h.id for h in r.find("kuberntes", track_access=False)] == ["m-1"]
    fresh.close()


def test_failed_migration_rolls_back(tmp_path: Path) -> None:
    conn = connect(tmp_path / "m.db")
    migrate(conn, upto=1)
    conn.execute("CREATE TABLE fuzzy_terms (x)")  # makes migration 3 fail half-way
    with contextlib.suppress(Exception):
        migrate(conn)
    applied = {r[0] for r in conn.execute("SELECT version FROM _schema_migrations")}
    assert applied == {1, 2}
    assert not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'fuzzy_trigrams'").fetchone()
    conn.close()


def test_extraction_log_timestamps_are_normalized(tmp_path: Path) -> None:
    """m009: cursors stamped by SQLite's datetime('now') take the canonical form, and new
    cursors are written in it."""
    from llmem_hooks.store import sessions
    from llmem_hooks.timestamps import parse_stored

    conn = connect(tmp_path / "m.db")
    migrate(conn, upto=8)
    with conn:
        conn.execute(
            "INSERT INTO extraction_log(source_type, source_id, cursor, runs, extracted_at)"
            " VALUES ('adapter', 'old', 'c', 1, '2026-11-22 13:15:00')"
        )
        conn.execute(
            "INSERT INTO extraction_log(source_type, source_id, cursor, runs, extracted_at)"
            " VALUES ('opencode', 'new', 'c', 1, '2026-11-22T13:16:00.000000+00:00')"
        )
    conn.close()
    with MemoryStore(tmp_path / "m.db") as store:
        old = store.get_extraction("adapter", "old")
        assert old is not None and old["extracted_at"] == "2026-11-22T13:15:00.000000+00:00"
        new = store.get_extraction("opencode", "new")
        assert new is not None and new["extracted_at"] == "2026-11-22T13:16:00.000000+00:00"
        sessions.set_cursor(store.db, "fresh", "7")
        row = store.get_extraction(sessions.ADAPTER_CURSOR, "fresh")
        assert row is not None and row["extracted_at"].endswith("+00:00")
        assert parse_stored(row["extracted_at"]).tzinfo is not None


def test_a_list_of_one_type_reads_that_type_in_date_order(tmp_path: Path) -> None:
    """The viewer's conversations and ``list --type``: the newest rows of one type come
    from an index in date order (migration 15), not from sorting every row of the type."""
    with MemoryStore(tmp_path / "m.db") as st:
        for i in range(30):
            st.add("conversation" if i % 3 else "fact", f"exchange number {i} about ports")
        newest = st.list_all(type="conversation", limit=5, sort="created")
        assert len(newest) == 5 and all(m["type"] == "conversation" for m in newest)
        dates = [m["created_at"] for m in newest]
        assert dates == sorted(dates, reverse=True)
        plan = " ".join(
            str(tuple(r))
            for r in st.db.fetchall(
                "EXPLAIN QUERY PLAN SELECT id FROM memories m WHERE m.type = ? "
                "ORDER BY m.created_at DESC, m.seq DESC LIMIT 5",
                ("conversation",),
            )
        )
        assert "idx_memories_type_created" in plan and "TEMP B-TREE" not in plan, plan


def test_the_context_weight_moves_without_a_rebuild(tmp_path: Path) -> None:
    """Migration 20 sets the index's ``rank`` to the weights search names (the exchange
    before an episode at 0.45, was 0.3) and leaves the rows indexed as they were."""
    from llmem_hooks.store.migrations import RANK_WEIGHTS

    conn = connect(tmp_path / "m.db")
    migrate(conn, upto=19)
    conn.execute(
        "INSERT INTO memories(id, type, content, created_at, updated_at, content_hash, tag_text)"
        " VALUES ('m-1', 'fact', 'the ledger pool size is 40', "
        "'2026-01-01T00:00:00.000000+00:00', '2026-01-01T00:00:00.000000+00:00', 'h', '')"
    )
    rank = "SELECT v FROM memories_fts_config WHERE k = 'rank'"
    assert conn.execute(rank).fetchone()[0] == "bm25(1.0, 0.5, 0.75, 0.0, 0.3, 0.1)"
    assert migrate(conn, upto=20) == [20]
    assert conn.execute(rank).fetchone()[0] == f"bm25({', '.join(map(str, RANK_WEIGHTS))})"
    assert RANK_WEIGHTS[4] == 0.45
    hits = conn.execute("SELECT rowid FROM memories_fts WHERE memories_fts MATCH 'ledger'")
    assert len(hits.fetchall()) == 1
    conn.close()
