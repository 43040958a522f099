"""What per-prompt recall asks of SQLite on repetitive, everyday vocabulary (issue 18).

Recall's time went into FTS5 ranking words that fill half the store: a word form of a
prompt word ("keeps" -> "kept") or a guessed spelling ("outdated" -> "updated") brought a
common word back after the common-word filter had removed it, and BM25 ranked every row
holding it. These tests read the SQL SQLite really ran (the connection's trace, with its
parameters) on real stores; no timing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from llmem_hooks import MemoryStore, Retriever
from llmem_hooks.service.operations import QueryService

EVERYDAY = "I kept the change small and ran it again; updated the script and the notes."
TARGET = "The arm64 build keeps failing because the qemu emulator is too old."


@pytest.fixture
def everyday_store(tmp_path: Path) -> Iterator[MemoryStore]:
    """1,200 memories that all say "kept" and "updated", and the one that answers."""
    records = [
        {
            "id": f"{i:08x}-0000-4000-8000-000000000000",
            "type": "fact",
            "content": f"Note {i}: {EVERYDAY}",
        }
        for i in range(1200)
    ]
    with MemoryStore(tmp_path / "m.db") as store:
        store.import_memories(records)
        store.add("fact", TARGET)
        yield store


def _traced(store: MemoryStore) -> list[str]:
    seen: list[str] = []
    store.conn.set_trace_callback(seen.append)
    return seen


def test_a_word_form_does_not_bring_back_a_common_word(everyday_store: MemoryStore) -> None:
    """ "keeps" is widened to "keep" and "kept" (irregular verbs), but "kept" is in every
    row: it is left out of the search, and the answer is still found."""
    seen = _traced(everyday_store)
    service = QueryService(everyday_store, {"ollama": {"enabled": False}})
    out = service.recall("ses_1", "why keeps the arm64 build failing?")
    everyday_store.conn.set_trace_callback(None)
    assert "qemu emulator" in out["block"]
    searches = [sql for sql in seen if "MATCH" in sql and "ORDER BY" in sql]
    assert searches
    assert not any('"kept"' in sql for sql in searches)


def test_a_guessed_spelling_is_never_a_common_word(everyday_store: MemoryStore) -> None:
    """ "outdated" is in no memory; "updated" (one edit away) is in all of them: no
    correction, rather than ranking the whole store."""
    seen = _traced(everyday_store)
    hits = Retriever(everyday_store).find("outdated qemu emulator", search_mode="fts")
    everyday_store.conn.set_trace_callback(None)
    assert hits and "qemu emulator" in hits[0].memory["content"]
    searches = [sql for sql in seen if "MATCH" in sql and "ORDER BY" in sql]
    assert not any('"updated"' in sql for sql in searches)


def test_recall_ranks_only_the_newest_matches_of_a_common_word(
    everyday_store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """BM25 is computed for every row a word matches: recall's search ranks the newest
    `RECALL_RANK_NEWEST` matches only (a rowid bound FTS5 applies before ranking); a
    search without the bound still ranks them all. Finding the bound runs the search's
    expression once more, so a stage whose words cannot match that many rows skips it."""
    from llmem_hooks.service import operations as service
    from llmem_hooks.store import MemoryFilter

    newest = 50
    bounded = everyday_store.fts_search('"note"', MemoryFilter(rank_newest=newest), limit=500)
    all_hits = everyday_store.fts_search('"note"', MemoryFilter(), limit=2000)
    assert len(all_hits) == 1200 and len(bounded) == newest
    by_age = [m["id"] for m in everyday_store.list_all(limit=2000, sort="created", order="asc")]
    assert {m["id"] for m in bounded} <= set(by_age[-newest - 1 :])
    # recall asks for the bound (the newest match at that depth), and still finds the answer
    monkeypatch.setattr(service, "RECALL_RANK_NEWEST", newest)
    seen = _traced(everyday_store)
    out = QueryService(everyday_store, {"ollama": {"enabled": False}}).recall(
        "ses_2", "which emulator does the arm64 build use"
    )
    everyday_store.conn.set_trace_callback(None)
    assert "qemu emulator" in out["block"]
    floor = f"ORDER BY rowid DESC LIMIT 1 OFFSET {newest - 1}"
    # ...but only where its words can match that many rows: "arm64" is in one memory
    assert not any(floor in sql for sql in seen)
    seen = _traced(everyday_store)
    # (no word counted "common": a prompt of only common words is not searched at all)
    QueryService(
        everyday_store, {"ollama": {"enabled": False}, "recall": {"common_word_share": 1.0}}
    ).recall("ses_3", "what did the note about the small change and the script say")
    everyday_store.conn.set_trace_callback(None)
    assert any(floor in sql for sql in seen)


def test_three_of_four_words_match_and_rank_as_every_combination(tmp_path: Path) -> None:
    """The "at least 3 of 4 words" stage writes each word twice, not three times (BM25
    reads a word's row list per occurrence): the same rows, in the same order, as the
    OR of the four 3-word combinations."""
    import itertools
    import random

    from llmem_hooks.text.query import parse_query

    rng = random.Random(7)
    words = ["ledger", "port", "canary", "deploy"]
    filler = ["the", "service", "was", "checked", "again", "after", "lunch"]
    with MemoryStore(tmp_path / "m.db") as store:
        for i in range(300):
            held = [w for w in words if rng.random() < 0.6]
            text = " ".join(held * rng.randint(1, 3) + rng.sample(filler, rng.randint(1, 6)))
            store.add("fact", f"n{i} {text}", dedupe=False)
        parsed = parse_query(" ".join(words))
        assert parsed.terms == words
        every = " OR ".join(
            f"({parsed.all_of(sub)})" for sub in itertools.combinations(parsed.terms, 3)
        )
        fast = parsed.at_least(3)
        assert fast != every and fast.count('"ledger"') == 2
        ranked = [m["id"] for m in store.fts_search(every, limit=300)]
        assert len(ranked) > 30
        assert [m["id"] for m in store.fts_search(fast, limit=300)] == ranked
        held3 = [
            m["id"]
            for m in store.list_all(limit=500)
            if sum(w in m["content"].split() for w in words) >= 3
        ]
        assert sorted(held3) == sorted(ranked)


def test_a_ranked_search_scores_each_match_once_in_the_configured_order(
    everyday_store: MemoryStore,
) -> None:
    """Selecting FTS5's ``rank`` next to ``ORDER BY rank`` scored every match twice (half
    the time of a ranked stage on everyday words); the search orders by the one value it
    selects, with the weights the store's ``rank`` is configured with, in the same order."""
    from llmem_hooks.store.migrations import BM25_RANK, RANK_WEIGHTS

    store = everyday_store
    conn = store.conn
    config = conn.execute("SELECT v FROM memories_fts_config WHERE k = 'rank'").fetchone()[0]
    assert config == f"bm25({', '.join(map(str, RANK_WEIGHTS))})"
    match = '"kept" OR "qemu" OR "arm64"'
    seen = _traced(store)
    hits = store.fts_search(match, limit=50)
    conn.set_trace_callback(None)
    ranked = [sql for sql in seen if "MATCH" in sql and "ORDER BY" in sql]
    assert ranked and all(".rank" not in sql and BM25_RANK in sql for sql in ranked)
    by_rank = [
        row[0]
        for row in conn.execute(
            "SELECT m.id FROM memories_fts JOIN memories m ON m.seq = memories_fts.rowid "
            "WHERE memories_fts MATCH ? ORDER BY memories_fts.rank LIMIT 50",
            (f"{{content summary tag_text fts_context fts_after}} : ({match})",),
        )
    ]
    assert [h["id"] for h in hits] == by_rank
    assert hits[0]["content"] == TARGET


def test_an_inflected_stop_word_is_not_searched_as_a_typo(tmp_path: Path) -> None:
    """ "I keep getting this error": "getting" is in no memory, so it was read as a typo
    and searched as its close spellings ("setting", "settings": one memory in ten of a
    real store, read by BM25 on every stage). Inflections of stop words are stop words;
    short words that only look like one ("dos", "ones") stay."""
    from llmem_hooks.service.prompts import prompt_words
    from llmem_hooks.text.query import content_words, is_stop_word

    assert [w for w in ("getting", "says", "knows", "liked", "tells") if not is_stop_word(w)] == []
    assert [w for w in ("dos", "ones", "setting", "status", "docker") if is_stop_word(w)] == []
    assert prompt_words("I keep getting this migration error") == ["migration", "error"]
    assert content_words("getting the settings") == ["settings"]
    with MemoryStore(tmp_path / "m.db") as store:
        for i in range(40):
            store.add("fact", f"The setting {i} for the cache is in settings.toml", dedupe=False)
        store.add("fact", "The migration error came from a missing index on orders.")
        seen = _traced(store)
        out = QueryService(store, {"ollama": {"enabled": False}}).recall(
            "ses_1", "I keep getting this migration error"
        )
        store.conn.set_trace_callback(None)
    assert "missing index" in out["block"]
    assert not any('"setting"' in sql for sql in seen)
