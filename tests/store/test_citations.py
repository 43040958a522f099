"""The ``citations`` table (migration 17) and `store.citations`: stored with their memory,
gone with it, a memory's state from them, carried by export and import."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_migrations import schema

from llmem_hooks.errors import ValidationError
from llmem_hooks.evidence.cite import Citation
from llmem_hooks.store import MemoryStore
from llmem_hooks.store import citations as cited
from llmem_hooks.store.db import connect
from llmem_hooks.store.migrations import MIGRATIONS, migrate

HASH = "a" * 64
COMMIT = "b" * 40


def _cite(path: str = "src/net/retry.py", start: int = 12, end: int = 30) -> Citation:
    return Citation(path, start, end, HASH, COMMIT)


def test_an_upgrade_from_16_equals_a_fresh_database(tmp_path: Path) -> None:
    fresh = connect(tmp_path / "fresh.db")
    migrate(fresh)
    old = connect(tmp_path / "old.db")
    migrate(old, upto=16)
    assert not old.execute("SELECT 1 FROM sqlite_master WHERE name = 'citations'").fetchone()
    old.close()
    with MemoryStore(tmp_path / "old.db") as upgraded:
        assert schema(upgraded.conn) == schema(fresh)
        versions = [r[0] for r in upgraded.conn.execute("SELECT version FROM _schema_migrations")]
        assert versions == [v for v, _, _ in MIGRATIONS] and 17 in versions
    fresh.close()


def test_citations_go_with_their_memory(tmp_path: Path) -> None:
    with MemoryStore(tmp_path / "m.db") as st:
        keep = st.add("fact", "the retry limit is set in retry.py")
        gone = st.add("fact", "the timeout lives in net/timeout.py")
        cited.add(st.db, keep, [_cite()])
        cited.add(st.db, gone, [_cite("src/net/timeout.py", 1, 4), _cite()])
        assert st.delete(gone)
        assert [r[0] for r in st.conn.execute("SELECT memory_id FROM citations")] == [keep]
        assert [c.spec() for c in cited.of_memory(st.db, keep)] == ["src/net/retry.py:12-30"]
        # and SQLite itself refuses a citation of no memory
        with pytest.raises(Exception, match="FOREIGN KEY"):
            st.conn.execute(
                "INSERT INTO citations(memory_id, path, line_start, line_end, created_at)"
                " VALUES ('nope', 'a.py', 1, 1, 'x')"
            )


def test_bad_citations_are_refused_whole(tmp_path: Path) -> None:
    with MemoryStore(tmp_path / "m.db") as st:
        mid = st.add("fact", "the build script is tools/build.sh")
        for bad in (
            Citation("/etc/passwd", 1, 2),
            Citation("../outside.py", 1, 2),
            Citation("a\nb.py", 1, 2),
            Citation("a.py", 0, 2),
            Citation("a.py", 5, 2),
            Citation("a.py", 1, 2, "not-hex"),
        ):
            with pytest.raises(ValidationError):
                cited.add(st.db, mid, [_cite("ok.py"), bad])
        assert cited.of_memory(st.db, mid) == []  # not even the good one of the batch
        with pytest.raises(ValidationError, match="no memory"):
            cited.add(st.db, "missing-id", [_cite()])


def test_at_most_20_per_memory_and_no_repeats(tmp_path: Path) -> None:
    with MemoryStore(tmp_path / "m.db") as st:
        mid = st.add("fact", "the handlers are spread over twenty files")
        assert cited.add(st.db, mid, [_cite(f"f{i}.py") for i in range(19)]) == 19
        assert cited.add(st.db, mid, [_cite("f0.py"), _cite("f19.py")]) == 1  # f0 known
        with pytest.raises(ValidationError, match="at most 20"):
            cited.add(st.db, mid, [_cite("f20.py")])
        assert len(cited.of_memory(st.db, mid)) == 20


def test_the_state_of_a_memory(tmp_path: Path) -> None:
    with MemoryStore(tmp_path / "m.db") as st:
        bare = st.add("fact", "we deploy on fridays never")
        mid = st.add("fact", "retry is in retry.py and timeout in timeout.py")
        cited.add(st.db, mid, [_cite(), _cite("src/net/timeout.py", 3, 9)])
        assert cited.state(st.db, bare) == "not checkable"  # never 'valid'
        assert cited.state(st.db, mid) == "unchecked"
        first, second = cited.of_memory(st.db, mid)
        assert cited.record_check(st.db, first.id, "valid", check_ms=0.4)
        assert cited.state(st.db, mid) == "unchecked"  # one still unchecked
        moved = Citation("src/net/retry_policy.py", 52, 70, "c" * 64, "d" * 40)
        assert cited.record_check(st.db, second.id, "valid", reason="renamed", updated=moved)
        assert cited.state(st.db, mid) == "valid"
        row = cited.of_memory(st.db, mid)[1]
        assert (row.spec(), row.text_hash, row.commit, row.reason) == (
            "src/net/retry_policy.py:52-70",
            "c" * 64,
            "d" * 40,
            "renamed",
        )
        assert row.checked_at is not None
        assert cited.record_check(
            st.db, first.id, "stale", reason="the lines changed", changed_by="e" * 40
        )
        assert cited.state(st.db, mid) == "stale"
        assert cited.of_memory(st.db, mid)[0].changed_by == "e" * 40
        with pytest.raises(ValidationError):
            cited.record_check(st.db, first.id, "fine")
        assert not cited.record_check(st.db, 10**9, "valid")


def test_memories_citing_a_path(tmp_path: Path) -> None:
    with MemoryStore(tmp_path / "m.db") as st:
        a = st.add("fact", "retry limit lives in retry.py")
        b = st.add("fact", "retry backoff doubles each time")
        c = st.add("fact", "the timeout is 30 seconds")
        cited.add(st.db, a, [_cite()])
        cited.add(st.db, b, [_cite(start=40, end=41), _cite(start=50, end=51)])
        cited.add(st.db, c, [_cite("src/net/timeout.py")])
        assert cited.citing(st.db, "src/net/retry.py") == [b, a]  # newest first, once each
        st.invalidate(b, "wrong")
        assert cited.citing(st.db, "./src/net/retry.py") == [a]
        assert set(cited.of_memories(st.db, [a, b, c, "nope"])) == {a, b, c}


def test_export_and_import_carry_citations(tmp_path: Path) -> None:
    with MemoryStore(tmp_path / "a.db") as st:
        mid = st.add("fact", "retry limit lives in retry.py")
        cited.add(st.db, mid, [_cite(), _cite("src/net/timeout.py", 2, 2)])
        first = cited.of_memory(st.db, mid)[0]
        cited.record_check(st.db, first.id, "stale", reason="gone", changed_by="f" * 40)
        exported = st.export_all()
    doc = json.loads(json.dumps(exported))
    with MemoryStore(tmp_path / "b.db") as st:
        assert st.import_memories(doc) == 1
        assert st.import_memories(doc) == 0  # again: nothing doubled
        rows = cited.of_memory(st.db, mid)
        assert [(c.spec(), c.status, c.reason, c.changed_by, c.text_hash) for c in rows] == [
            ("src/net/retry.py:12-30", "stale", "gone", "f" * 40, HASH),
            ("src/net/timeout.py:2", "unchecked", None, None, HASH),
        ]
    # an export from before citations still imports; a broken citation is one clear error
    old = [{k: v for k, v in doc[0].items() if k != "citations"}]
    with MemoryStore(tmp_path / "c.db") as st:
        assert st.import_memories(old) == 1
        assert cited.state(st.db, mid) == "not checkable"
    bad = [{**doc[0], "citations": [{"path": "../x.py", "line_start": 1, "line_end": 1}]}]
    with MemoryStore(tmp_path / "d.db") as st:
        with pytest.raises(ValidationError, match="relative to the repository"):
            st.import_memories(bad)
        assert st.count(valid_only=False) == 0
