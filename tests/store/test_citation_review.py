"""store/citation_review.py over a real SQLite file: which memories are stale (one query
for many), why, the review list, the project's working folder, and a rewrite of a
memory's citations that lands whole or not at all."""

from __future__ import annotations

import pytest

from llmem_hooks.errors import ValidationError
from llmem_hooks.evidence.cite import Citation
from llmem_hooks.store import MemoryStore, citation_review, citations
from llmem_hooks.store import sessions as session_state

H = "a" * 64


def _cite(st: MemoryStore, mid: str, path: str, status: str | None, reason: str = "") -> None:
    citations.add(st.db, mid, [Citation(path, 1, 2, H, None)])
    if status:
        row = next(c for c in citations.of_memory(st.db, mid) if c.path == path)
        citations.record_check(st.db, row.id, status, reason=reason or None)


def test_stale_among_and_reasons(store: MemoryStore) -> None:
    a = store.add("fact", "alpha cites two files")
    b = store.add("fact", "beta cites one valid file")
    c = store.add("fact", "gamma cites nothing")
    _cite(store, a, "x.py", "valid")
    _cite(store, a, "y.py", "stale", "the cited file was deleted")
    _cite(store, a, "z.py", "stale", "line one\nline two " + "x" * 400)
    _cite(store, b, "x.py", "valid")
    assert citation_review.stale_among(store.db, [a, b, c, "nope"]) == {a}
    assert citation_review.stale_among(store.db, []) == set()
    why = citation_review.stale_reasons(store.db, [a, b, c])
    assert set(why) == {a}
    assert why[a].startswith("y.py:1-2 the cited file was deleted; z.py:1-2 line one line two x")
    assert "\n" not in why[a] and len(why[a]) == citation_review.MAX_STALE_REASON


def test_stale_memories_lists_live_ones_of_a_project(store: MemoryStore) -> None:
    a = store.add("fact", "alpha", project="p1")
    b = store.add("fact", "beta", project="p2")
    gone = store.add("fact", "gamma", project="p1")
    for mid in (a, b, gone):
        _cite(store, mid, "x.py", "stale")
    store.invalidate(gone, "wrong")
    assert {m["id"] for m in citation_review.stale_memories(store.db, 10)} == {a, b}
    assert [m["id"] for m in citation_review.stale_memories(store.db, 10, "p1")] == [a]


def test_project_directory_is_the_latest_sessions(store: MemoryStore) -> None:
    assert citation_review.project_directory(store.db, "p1") is None
    assert citation_review.project_directory(store.db, None) is None
    for sid, folder, at in (("s1", "/old", 1), ("s2", "/new", 5), ("s3", None, 9)):
        session_state.save(
            store.db,
            session_state.SessionRecord(
                agent="opencode", session_id=sid, project="p1", directory=folder,
                created_ms=at, last_activity_ms=at,
            ),
        )  # fmt: skip
    assert citation_review.project_directory(store.db, "p1") == "/new"


def test_rewrite_is_whole_or_nothing(store: MemoryStore) -> None:
    mid = store.add("fact", "alpha")
    _cite(store, mid, "x.py", "stale")
    _cite(store, mid, "y.py", "valid")
    x, y = citations.of_memory(store.db, mid)
    with pytest.raises(ValidationError):  # a bad new citation: the old ones stay
        citation_review.rewrite(store.db, mid, [x.id], [Citation("../up.py", 1, 1, H, None)])
    assert citations.of_memory(store.db, mid) == [x, y]
    citation_review.rewrite(store.db, mid, [x.id], [Citation("w.py", 3, 4, "b" * 64, None)])
    after = citations.of_memory(store.db, mid)
    assert [(c.spec(), c.status) for c in after] == [("y.py:1-2", "valid"), ("w.py:3-4", "valid")]
    assert after[1].reason == citation_review.CONFIRMED and after[1].text_hash == "b" * 64
    # the same path and lines again: the new capture replaces the kept row
    citation_review.rewrite(store.db, mid, [], [Citation("y.py", 1, 2, "c" * 64, None)])
    assert [(c.spec(), c.text_hash) for c in citations.of_memory(store.db, mid)] == [
        ("w.py:3-4", "b" * 64),
        ("y.py:1-2", "c" * 64),
    ]


def test_the_episode_a_stale_memory_was_learned_from_is_stale_with_it(store: MemoryStore) -> None:
    """The raw exchange says what the memory learned from it says: recall must not give
    back "Remember: ... MAX_RETRIES = 5" as an episode once the memory is stale."""
    said = store.add(
        "conversation",
        "User: Remember: the retry limit is MAX_RETRIES = 5 in src/net/retry.py",
        source="episode",
        session_id="s1",
        source_message_ids=["m1", "m2"],
        dedupe=False,
    )
    other = store.add(
        "conversation",
        "User: and the timeout? Assistant: 30 s",
        source="episode",
        session_id="s1",
        source_message_ids=["m3", "m4"],
        dedupe=False,
    )
    elsewhere = store.add(
        "conversation",
        "User: Remember: the retry limit is MAX_RETRIES = 5 (another session)",
        source="episode",
        session_id="s2",
        source_message_ids=["m1"],
        dedupe=False,
    )
    learned = store.add(
        "fact", "The retry limit is MAX_RETRIES = 5.", session_id="s1", source_message_ids=["m2"]
    )
    _cite(store, learned, "src/net/retry.py", "valid")
    ids = [said, other, elsewhere, learned]
    assert citation_review.stale_among(store.db, ids) == set()
    (row,) = citations.of_memory(store.db, learned)
    citations.record_check(store.db, row.id, "stale", reason="the cited lines changed")
    assert citation_review.stale_among(store.db, ids) == {said, learned}
    why = citation_review.stale_reasons(store.db, ids)
    assert set(why) == {said, learned}
    assert why[said] == f"says what {learned[:8]} said: {why[learned]}"
    store.invalidate(learned, "wrong")  # a forgotten memory no longer speaks for the episode
    assert citation_review.stale_among(store.db, ids) == {learned}
