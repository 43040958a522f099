"""`MemoryStore.add`'s duplicate check reads one row by its hash, however many memories
share the type: migration 15's (type, created_at) index once took it over, and every add
then read every memory of its type (~2 ms an add at 5k, ~40 ms for an episode at 100k)."""

from __future__ import annotations

from pathlib import Path

from llmem_hooks.store import MemoryStore


def test_the_duplicate_check_uses_the_hash_index(tmp_path: Path) -> None:
    with MemoryStore(tmp_path / "m.db") as store:
        for i in range(50):
            store.add("decision", f"Service s{i} listens on port {9000 + i}.", project="p")
        traced: list[str] = []
        store.db.conn.set_trace_callback(traced.append)
        store.add("decision", "Service s7 listens on port 9007.", project="p")
        store.db.conn.set_trace_callback(None)
        (query,) = [q for q in traced if "content_hash = " in q and q.startswith("SELECT")]
        plan = " ".join(
            str(row[-1]) for row in store.db.conn.execute(f"EXPLAIN QUERY PLAN {query}")
        )
        assert "idx_memories_hash" in plan, plan
