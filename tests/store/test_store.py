"""MemoryStore: CRUD, validation, tags, FTS sync, relations, inbox, import/export."""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from llmem_hooks import (
    ImportFormatError,
    MemoryFilter,
    MemoryStore,
    NotFoundError,
    ValidationError,
    register_memory_type,
    validate_session_id,
)
from llmem_hooks.store import floor_rows
from llmem_hooks.store.db import transaction


def fts_ids(store: MemoryStore, match: str) -> set[str]:
    return {m["id"] for m in store.fts_search(match, limit=100)}


def test_add_get_defaults(store: MemoryStore) -> None:
    mid = store.add("fact", "Project uses SQLite with WAL mode", tags=["SQLite", "db"])
    mem = store.get(mid)
    assert mem is not None
    assert len(mid) == 36 and mid.count("-") == 4  # a UUID
    assert mem["confidence"] == 0.8
    assert mem["tags"] == ["sqlite", "db"]
    assert mem["metadata"] == {} and mem["hints"] == []
    assert mem["created_at"] == mem["updated_at"]
    assert mem["access_count"] == 0 and mem["accessed_at"] is None
    assert store.get("nope") is None


def test_db_file_modes(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "m.db"
    with MemoryStore(path) as st:
        st.add("fact", "x1 something")
        for suffix in ("", "-wal", "-shm"):  # the WAL holds memory text too
            assert stat.S_IMODE(os.stat(f"{path}{suffix}").st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700


def test_pragmas(store: MemoryStore) -> None:
    c = store.conn
    assert c.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert c.execute("PRAGMA busy_timeout").fetchone()[0] > 0
    assert c.execute("PRAGMA foreign_keys").fetchone()[0] == 1


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"type": "fact", "content": "x" * 10_001}, "10,000"),
        ({"type": "fact", "content": "   "}, "non-empty"),
        ({"type": "nonsense", "content": "abc"}, "unknown memory type"),
        ({"type": "fact", "content": "abc", "confidence": 1.5}, "confidence"),
        ({"type": "fact", "content": "abc", "tags": ["has space"]}, "invalid tag"),
        ({"type": "fact", "content": "abc", "expires_at": "tomorrow"}, "expires_at"),
        ({"type": "fact", "content": "abc", "metadata": [1]}, "metadata"),
    ],
)
def test_add_rejects_bad_input(store: MemoryStore, kwargs: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        store.add(**kwargs)
    assert store.count() == 0


def test_content_limit_is_inclusive(store: MemoryStore) -> None:
    mid = store.add("fact", "y" * 10_000)
    assert len(store.get(mid)["content"]) == 10_000


@pytest.fixture
def own_types() -> Iterator[None]:
    """Types a test registers leave the process-wide registry with it."""
    from llmem_hooks.registry import memory_types

    before = set(memory_types.all())
    yield
    for name in set(memory_types.all()) - before:
        memory_types.unregister(name)


def test_register_memory_type(own_types: None) -> None:
    assert register_memory_type("code_review") == "code_review"
    for bad in ("Bad", "1abc", "a-b", "x" * 65, ""):
        with pytest.raises(ValidationError):
            register_memory_type(bad)


def test_custom_type_usable_and_known_after_reopen(tmp_path: Path, own_types: None) -> None:
    register_memory_type("runbook_step")
    with MemoryStore(tmp_path / "m.db") as st:
        st.add("runbook_step", "restart the worker with systemctl restart worker")
    with MemoryStore(tmp_path / "m.db") as st:
        assert st.list_all(type="runbook_step")[0]["type"] == "runbook_step"


def test_duplicates_are_merged(store: MemoryStore) -> None:
    a = store.add("fact", "Use  pnpm for installs", tags=["js"])
    b = store.add("fact", "use pnpm for INSTALLS", tags=["pnpm"])
    assert a == b
    assert store.get(a)["tags"] == ["js", "pnpm"]
    c = store.add("fact", "Use pnpm for installs", project="other")
    assert c != a
    d = store.add("fact", "Use pnpm for installs", dedupe=False)
    assert d != a


def test_fts_sync_on_insert_update_delete(store: MemoryStore) -> None:
    mid = store.add("fact", "The staging cluster runs Kubernetes", tags=["infra"])
    assert fts_ids(store, "kubernetes") == {mid}
    assert fts_ids(store, "infra") == {mid}  # tags are indexed
    store.update(mid, content="The staging cluster runs Nomad", tags=["ops"])
    assert fts_ids(store, "kubernetes") == set()
    assert fts_ids(store, "infra") == set()
    assert fts_ids(store, "nomad") == {mid}
    assert fts_ids(store, "ops") == {mid}
    store.update(mid, summary="orchestrator choice")
    assert fts_ids(store, "orchestrator") == {mid}
    assert store.delete(mid)
    assert fts_ids(store, "nomad") == set()
    # The external-content index agrees with its table (once the floor rows, which no
    # memory stands behind, are out: store/floor_rows.py).
    with store.atomic():
        floor_rows.drop(store.conn)
    store.conn.execute("INSERT INTO memories_fts(memories_fts, rank) VALUES('integrity-check', 1)")


def test_access_tracking_does_not_touch_fts(store: MemoryStore) -> None:
    mid = store.add("fact", "alpha beta gamma")
    assert store.touch_batch([mid, mid, "missing"]) == 1
    mem = store.get(mid)
    assert mem["access_count"] == 1 and mem["accessed_at"] is not None
    assert fts_ids(store, "gamma") == {mid}


def test_update_missing_and_validation(store: MemoryStore) -> None:
    assert store.update("nope", content="x") is False
    mid = store.add("fact", "original text here")
    with pytest.raises(ValidationError):
        store.update(mid, content="z" * 10_001)
    assert store.get(mid)["content"] == "original text here"


def test_invalidate(store: MemoryStore) -> None:
    mid = store.add("decision", "We use MySQL")
    assert store.invalidate(mid, reason="moved to Postgres")
    assert not store.invalidate(mid)
    mem = store.get(mid)
    assert mem["valid_until"] and mem["invalidation_reason"] == "moved to Postgres"
    assert store.search("mysql") == []
    assert [m["id"] for m in store.search("mysql", valid_only=False)] == [mid]
    assert store.list_all() == []


def test_expired_hidden_and_pruned(store: MemoryStore) -> None:
    old = store.add("fact", "temporary staging url", expires_at="2020-01-01")
    keep = store.add("fact", "permanent staging url", expires_at="2999-01-01")
    assert {m["id"] for m in store.search("staging")} == {keep}
    assert [m["id"] for m in store.prune(dry_run=True)] == [old]
    assert store.get(old) is not None
    assert [m["id"] for m in store.prune()] == [old]
    assert store.get(old) is None and store.get(keep) is not None


def test_prune_before(store: MemoryStore) -> None:
    a = store.add("fact", "first note", created_at="2024-01-01T00:00:00Z")
    b = store.add("fact", "second note", created_at="2026-01-01T00:00:00Z")
    gone = store.prune(before="2025-01-01")
    assert [m["id"] for m in gone] == [a]
    assert store.get(b) is not None


def test_filters(store: MemoryStore) -> None:
    a = store.add(
        "fact",
        "deploy with make deploy",
        tags=["ci", "deploy"],
        project="p1",
        entered_by="opencode",
        created_at="2026-01-05T00:00:00Z",
    )
    b = store.add(
        "decision",
        "deploy via github actions",
        tags=["ci"],
        project="p2",
        entered_by="copilot",
        created_at="2026-02-05T00:00:00Z",
    )
    g = store.add(
        "preference", "deploy only on weekdays", tags=["deploy"], created_at="2026-03-05T00:00:00Z"
    )

    def ids(**kw: object) -> set[str]:
        return {m["id"] for m in store.search("deploy", **kw)}

    assert ids() == {a, b, g}
    assert ids(type="decision") == {b}
    assert ids(tags_all=["ci", "deploy"]) == {a}
    assert ids(tags_any=["deploy"]) == {a, g}
    assert ids(after="2026-02-01") == {b, g}
    assert ids(before="2026-02-01") == {a}
    assert ids(entered_by="copilot") == {b}
    assert ids(project="p1") == {a, g}  # the project plus global memories
    assert ids(project="p1", project_only=True) == {a}
    with pytest.raises(ValidationError):
        ids(after="yesterday-ish")


def test_list_sort_order_paging(store: MemoryStore) -> None:
    ids = [
        store.add(
            "fact",
            f"note number {i}",
            confidence=0.5 + i / 10,
            created_at=f"2026-01-0{i + 1}T00:00:00Z",
        )
        for i in range(4)
    ]
    assert [m["id"] for m in store.list_all()] == ids[::-1]
    assert [m["id"] for m in store.list_all(order="asc", limit=2, offset=1)] == ids[1:3]
    assert store.list_all(sort="confidence")[0]["id"] == ids[3]
    with pytest.raises(ValidationError):
        store.list_all(sort="bogus")


def test_resolve_id(store: MemoryStore) -> None:
    mid = store.add("fact", "prefix lookups")
    assert store.resolve_id(mid) == mid
    assert store.resolve_id(mid[:8]) == mid
    with pytest.raises(NotFoundError):
        store.resolve_id("zzzzzzzz")


def test_relations_and_traversal(store: MemoryStore) -> None:
    a, b, c, d = (store.add("fact", f"node {n}") for n in "abcd")
    store.add_relation(a, b, "supersedes")
    store.add_relation(b, c, "related_to")
    store.add_relation(c, d, "derived_from")
    store.add_relation(a, "src/lib.rs:42:58", "references", target_type="code")
    assert {r["target_id"] for r in store.get_relations(b)} == {b, c}  # both directions
    walk = store.traverse_relations(a, max_depth=5)
    assert [(r["target_id"], r["distance"]) for r in walk] == sorted(
        [(b, 1), ("src/lib.rs:42:58", 1), (c, 2), (d, 3)], key=lambda x: (x[1], x[0])
    )
    assert [
        r["target_id"] for r in store.traverse_relations(a, max_depth=1, target_type="code")
    ] == ["src/lib.rs:42:58"]
    assert {r["target_id"] for r in store.traverse_relations(a, relation_type="supersedes")} == {b}
    assert len(store.traverse_relations(a, max_depth=99)) == 4  # capped at 5, no cycles
    with pytest.raises(ValidationError):
        store.add_relation(a, b, "likes")
    with pytest.raises(ValidationError):
        store.add_relation(a, "../etc/passwd:1:2", "references", target_type="code")
    with pytest.raises(NotFoundError):
        store.add_relation(a, "missing-id", "related_to")
    store.delete(b)  # edges to and from b go with it
    assert all(b not in (r["source_id"], r["target_id"]) for r in store.get_relations(a))


def test_inbox_and_consolidate(tmp_path: Path) -> None:
    with MemoryStore(tmp_path / "m.db", inbox_capacity=3) as st:
        low = st.add_to_inbox("a passing thought", attention_score=0.2)
        hi = st.add_to_inbox(
            "the API rate limit is 100 requests per minute",
            source="learn",
            attention_score=0.9,
            metadata={"s": 1},
        )
        mid = st.add_to_inbox("CI runs on ubuntu-24.04", attention_score=0.6)
        assert st.inbox_count() == 3
        assert [i["id"] for i in st.list_inbox()] == [hi, mid, low]
        st.add_to_inbox("overflow note", attention_score=0.7)  # evicts the lowest
        assert st.inbox_count() == 3 and st.get_from_inbox(low) is None
        assert st.update_inbox_attention_score(mid, 0.4)
        assert st.get_from_inbox(hi)["metadata"] == {"s": 1}
        with pytest.raises(ValidationError):
            st.add_to_inbox("x", source="rumour")
        with pytest.raises(ValidationError):
            st.update_inbox_attention_score(mid, 2)
        dry = st.consolidate(min_score=0.5, dry_run=True)
        assert {i["id"] for i in dry["promoted"]} == {hi, st.list_inbox()[1]["id"]}
        assert [i["id"] for i in dry["evicted"]] == [mid]
        assert st.inbox_count() == 3 and st.count() == 0
        result = st.consolidate(min_score=0.5)
        assert st.inbox_count() == 0
        assert len(result["promoted"]) == 2 and len(result["evicted"]) == 1
        promoted = st.get(result["promoted"][0]["memory_id"])
        assert promoted["source"] == "consolidation" and promoted["confidence"] == 0.9
        assert st.remove_from_inbox("missing") is False


def test_export_import_round_trip(store: MemoryStore, tmp_path: Path) -> None:
    a = store.add(
        "decision",
        "Pick Postgres",
        tags=["db"],
        metadata={"why": "jsonb"},
        project="p",
        session_id="s1",
        source_message_ids=["m1", "m2"],
        embedding=[0.1, 0.2, 0.3],
    )
    b = store.add("fact", "Postgres 16 runs on port 5433")
    store.add_relation(b, a, "derived_from")
    store.invalidate(b, "old")
    data = store.export_all()
    assert len(data) == 2 and store.export_all(limit=1)[0]["id"] == a
    with MemoryStore(tmp_path / "other.db") as other:
        assert other.import_memories(data) == 2
        assert other.import_memories(data) == 0  # idempotent
        got = other.get(a)
        orig = store.get(a)
        assert got == orig
        assert other.get_embedding(a) == pytest.approx([0.1, 0.2, 0.3])
        assert other.get(b)["valid_until"] == store.get(b)["valid_until"]
        assert [(r["source_id"], r["target_id"]) for r in other.get_relations(a)] == [(b, a)]
        everything = MemoryFilter(valid_only=False)
        assert {m["id"] for m in other.fts_search("postgres", everything)} == {a, b}


def test_import_is_all_or_nothing(store: MemoryStore) -> None:
    good = {"type": "fact", "content": "fine"}
    for bad in (
        {"type": "fact", "content": "z" * 10_001},
        {"type": "weird", "content": "x"},
        {"type": "fact"},
        "not an object",
        {"type": "fact", "content": "x", "id": "a/b"},
    ):
        with pytest.raises(ValidationError):
            store.import_memories([good, good | {"content": "also fine"}, bad])
        assert store.count(valid_only=False) == 0
    with pytest.raises(ValidationError, match="duplicate id"):
        store.import_memories([good | {"id": "x1"}, good | {"id": "x1"}])
    with pytest.raises(ImportFormatError):
        store.import_memories({"format": "llmem-hooks-export", "version": 99, "memories": []})


def test_concurrent_writers_do_not_lose_data(tmp_path: Path) -> None:
    """Two connections writing at once queue on the lock (busy_timeout) instead of failing."""
    path = tmp_path / "m.db"
    MemoryStore(path).close()
    errors: list[BaseException] = []

    def writer(tag: str) -> None:
        try:
            with MemoryStore(path) as st:
                for i in range(100):
                    st.add("fact", f"{tag} memory {i}")
        except BaseException as exc:  # pragma: no cover - asserted below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(t,)) for t in ("one", "two", "three")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with MemoryStore(path) as st:
        assert st.count() == 300


def test_failed_transaction_leaves_nothing(store: MemoryStore) -> None:
    with pytest.raises(RuntimeError), transaction(store.conn):
        store.conn.execute(
            "INSERT INTO extraction_log(source_type, source_id, extracted_at) VALUES ('s','x','t')"
        )
        raise RuntimeError("crash mid-way")
    assert store.get_extraction("s", "x") is None


def test_extraction_log(store: MemoryStore) -> None:
    store.log_extraction("opencode", "ses_1", cursor="42", memory_count=2, message_count=5)
    store.log_extraction("opencode", "ses_1", cursor="57", memory_count=1, message_count=3)
    log = store.get_extraction("opencode", "ses_1")
    assert log["cursor"] == "57" and log["memory_count"] == 3 and log["runs"] == 2


def test_validate_session_id() -> None:
    assert validate_session_id("ses_abc123") == "ses_abc123"
    for bad in ("../etc/passwd", "foo/bar", "a\\b", "..", ""):
        with pytest.raises(ValueError):
            validate_session_id(bad)


def test_stats(store: MemoryStore) -> None:
    store.add("fact", "one", tags=["a"], entered_by="opencode")
    store.add("decision", "two", tags=["a", "b"], entered_by="copilot", project="p")
    s = store.stats()
    assert s["active"] == 2 and s["by_type"] == {"decision": 1, "fact": 1}
    assert s["by_tag"]["a"] == 2 and s["by_agent"] == {"copilot": 1, "opencode": 1}
    assert s["db_size_bytes"] > 0


def test_a_second_store_in_one_process_keeps_the_first_ones_writes_visible(
    tmp_path: Path,
) -> None:
    """Opening a second MemoryStore on the same file (the sidecar does, for its worker)
    must not drop the first connection's POSIX locks: another process closing the file
    would then take itself for the last user, delete the WAL, and the first store's
    later commits would be invisible to every other process until it closed."""
    import subprocess
    import sys

    path = tmp_path / "m.db"
    count = (
        f"import sqlean; c = sqlean.connect({str(path)!r}); "
        "print(c.execute('SELECT count(*) FROM memories').fetchone()[0])"
    )
    with MemoryStore(path) as first:
        first.add("fact", "written before the second store")
        with MemoryStore(path) as second:
            subprocess.run([sys.executable, "-c", count], check=True, capture_output=True)
            first.add("fact", "written after another process came and went")
            seen = subprocess.run(
                [sys.executable, "-c", count], check=True, capture_output=True, text=True
            ).stdout.strip()
            assert seen == "2"
            assert second.count() == 2


class _CountingLock:
    """An RLock that counts how often it was taken, and refuses connection use without it."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.taken = 0
        self.depth = 0

    def __enter__(self) -> _CountingLock:
        self._lock.acquire()
        self.taken += 1
        self.depth += 1
        return self

    def __exit__(self, *exc: object) -> None:
        self.depth -= 1
        self._lock.release()


class _GuardedConn:
    """A connection wrapper that fails a statement run while the store's lock is free."""

    def __init__(self, conn: object, lock: _CountingLock) -> None:
        self._conn = conn
        self._lock = lock

    def __getattr__(self, name: str) -> object:
        attr = getattr(self._conn, name)
        if name in ("execute", "executemany") and self._lock.depth == 0:
            raise AssertionError(f"{name} outside the store lock")
        return attr


def test_every_public_method_runs_sql_under_the_lock(store: MemoryStore) -> None:
    """The docstring promises thread safety behind one lock: no public method, read or
    write, touches the connection without holding it."""
    from llmem_hooks.store import sessions

    mid = store.add("fact", "Locks guard the shared connection", tags=["lock"])
    other = store.add("fact", "A second memory to relate to")
    lock = _CountingLock()
    store.db.lock = lock  # type: ignore[assignment]
    store.db.conn = _GuardedConn(store.db.conn, lock)
    store.vectors.conn = store.db.conn
    calls = [
        lambda: store.get(mid, track_access=True),
        lambda: store.resolve_id(mid[:8]),
        lambda: store.get_many([mid]),
        lambda: store.get_embedding(mid),
        lambda: store.count(),
        lambda: store.stats(),
        lambda: store.size_hint(),
        lambda: store.search("locks"),
        lambda: store.count_matching("locks"),
        lambda: store.has_match("locks"),
        lambda: store.list_all(),
        lambda: store.add_relation(mid, other, "related_to"),
        lambda: store.get_relations(mid),
        lambda: store.traverse_relations(mid),
        lambda: store.add_to_inbox("an inbox note"),
        lambda: store.list_inbox(),
        lambda: store.inbox_count(),
        lambda: store.get_from_inbox("nope"),
        lambda: store.log_extraction("test", "s1", "c1"),
        lambda: store.get_extraction("test", "s1"),
        lambda: store.export_all(),
        lambda: store.missing_embeddings(),
        lambda: store.count_embeddings(),
        lambda: store.get_embeddings_with_types(),
        lambda: store.update(mid, summary="guarded"),
        lambda: store.prune(dry_run=True),
        lambda: sessions.active(store.db),
        lambda: sessions.pending(store.db),
        lambda: sessions.get_cursor(store.db, "k"),
        lambda: sessions.set_cursor(store.db, "k", "1"),
        lambda: store.invalidate(other),
        lambda: store.delete(other),
    ]
    for call in calls:
        before = lock.taken
        call()
        assert lock.taken > before


def test_sql_runs_only_inside_the_store_package() -> None:
    """Which module owns which table stays visible: outside ``llmem_hooks/store/`` no module
    of the package runs a statement (adapters read the agents' own databases, not ours),
    not through the store's private helpers either (``_fetchone``, ``_conn``)."""
    import re

    import llmem_hooks

    root = Path(llmem_hooks.__file__).parent
    statement = re.compile(
        r"\.(execute|executemany|executescript)\(|\.conn\b|\._conn\b|\._fetch(one|all)\("
    )
    offenders = [
        f"{path.relative_to(root)}:{n}"
        for path in sorted(root.rglob("*.py"))
        if "store" not in path.relative_to(root).parts[:1]
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if statement.search(line)
    ]
    assert offenders == []
