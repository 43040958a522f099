"""Migration 18 and the check-recording functions of `store.citations`: `stale_since`
kept, set and cleared, memories stale since a date, which projects have citations."""

from __future__ import annotations

from pathlib import Path

from llmem_hooks.evidence.cite import Citation
from llmem_hooks.store import MemoryStore
from llmem_hooks.store import citations as cited

HASH, COMMIT = "a" * 64, "b" * 40
T1, T2, T3 = (f"2026-01-0{d}T00:00:00.000000+00:00" for d in (1, 2, 3))


def test_stale_since_set_kept_and_cleared(tmp_path: Path) -> None:
    with MemoryStore(tmp_path / "m.db") as st:
        mid = st.add("fact", "retry limit in retry.py", project="p1")
        cited.add(st.db, mid, [Citation("a.py", 1, 2, HASH, COMMIT)])
        cid = cited.of_memory(st.db, mid)[0].id
        cited.record_check(st.db, cid, "stale", checked_at=T1)
        cited.record_check(st.db, cid, "stale", checked_at=T2)  # still stale: since T1
        assert cited.of_memory(st.db, mid)[0].stale_since == T1
        assert [m["id"] for m in cited.stale_memories(st.db, T1)] == [mid]
        assert cited.stale_memories(st.db, "2025-12-31T00:00:00.000000+00:00") == []
        cited.record_check(st.db, cid, "valid", checked_at=T3)  # confirmed: no longer
        assert cited.of_memory(st.db, mid)[0].stale_since is None
        assert cited.stale_memories(st.db, T3) == []


def test_a_memory_is_stale_since_its_first_citation_still_stale(tmp_path: Path) -> None:
    with MemoryStore(tmp_path / "m.db") as st:
        mid = st.add("fact", "two places", project="p1")
        cited.add(
            st.db, mid, [Citation("a.py", 1, 2, HASH, COMMIT), Citation("b.py", 1, 2, HASH, COMMIT)]
        )
        a, b = cited.of_memory(st.db, mid)
        cited.record_check(st.db, a.id, "stale", reason="gone", checked_at=T2)
        # an imported stale row without stale_since counts from its check time
        st.conn.execute(
            "UPDATE citations SET status = 'stale', checked_at = ? WHERE id = ?", (T1, b.id)
        )
        (m,) = cited.stale_memories(st.db, T3)
        assert (m["stale_since"], m["citation"]) == (T1, "b.py:1-2")
        assert cited.cited_projects(st.db) == ["p1"]
        assert cited.any_to_check(st.db, "p1") and not cited.any_to_check(st.db, "p2")
        st.invalidate(mid, "test")
        assert cited.stale_memories(st.db, T3) == [] and cited.cited_projects(st.db) == []
