"""Close spellings of known words are searched only when nothing matched the words
themselves: after a hit, "paging" for "staging" brings noise, not answers (found by the
Copilot e2e search once throwaway sessions stopped padding the results)."""

from __future__ import annotations

from pathlib import Path

from llmem_hooks import MemoryStore, Retriever
from llmem_hooks.store import MemoryFilter


def test_a_hit_keeps_close_spellings_of_known_words_out(tmp_path: Path) -> None:
    with MemoryStore(tmp_path / "m.db") as store:
        store.add("fact", "The staging database is called pg-orchid-7.")
        for i in range(6):
            store.add(
                "decision", f"Decision {i}: the module {i} uses redis for paging", dedupe=False
            )
        hits = Retriever(store).find("staging database", MemoryFilter(), limit=10)
        assert [h.memory["content"] for h in hits] == [
            "The staging database is called pg-orchid-7."
        ]
        # nothing matched at all: the close spellings are the answer
        typo = Retriever(store).find("pagin", MemoryFilter(), limit=10)
        assert typo and all("paging" in h.memory["content"] for h in typo)
