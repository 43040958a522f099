"""Cached counts of the memories an FTS5 expression matches.

Every plain question asks how common each of its words is (a common word is not searched
for alone, a rare one weighs more), and recall asks on every prompt; the answers change
slowly, so they are counted up to the cap the caller decides with and kept for a while.
"""

from __future__ import annotations

import threading
import time

from ..store import MemoryFilter, MemoryStore

DF_CACHE_S = 300.0  # how long a count is reused
DF_CACHE_MAX = 20_000


class DocCounts:
    """How many memories match an FTS5 expression (a word and its stems), counted only
    up to the cap the caller decides with and cached for `DF_CACHE_S`: counting a common
    word costs milliseconds every time, and the answer ("more than the cap") changes
    slowly. Thread-safe; the query service shares one between its read connections."""

    def __init__(self, ttl: float = DF_CACHE_S) -> None:
        self.ttl = ttl
        self._lock = threading.Lock()
        # (match, project, project only) -> count, whether it was cut at a cap, when
        self._counts: dict[tuple[str, str | None, bool], tuple[int, bool, float]] = {}
        self._suggested: dict[tuple[str, float], tuple[list[str], float]] = {}

    def count(
        self, store: MemoryStore, match: str, cap: int, flt: MemoryFilter | None = None
    ) -> int:
        """The number of matches (within ``flt``'s project, if any; ``match`` "": the
        project's rows), or ``cap + 1`` when there are more than ``cap``."""
        key = (match, flt.project if flt else None, bool(flt and flt.project_only))
        now = time.monotonic()
        with self._lock:
            hit = self._counts.get(key)
        if hit is not None and now - hit[2] < self.ttl and (not hit[1] or hit[0] > cap):
            return min(hit[0], cap + 1)
        n = store.fts_count(match or None, flt, cap + 1)
        with self._lock:
            if len(self._counts) >= DF_CACHE_MAX:
                self._counts.clear()
            self._counts[key] = (n, n > cap, now)
        return n

    def suggestions(self, store: MemoryStore, term: str, threshold: float) -> list[str]:
        """`MemoryStore.suggest_terms`, cached like the counts (scoring the vocabulary's
        candidates in Python costs milliseconds a word)."""
        key = (term, threshold)
        now = time.monotonic()
        with self._lock:
            hit = self._suggested.get(key)
        if hit is not None and now - hit[1] < self.ttl:
            return hit[0]
        found = store.suggest_terms(term, threshold)
        with self._lock:
            if len(self._suggested) >= DF_CACHE_MAX:
                self._suggested.clear()
            self._suggested[key] = (found, now)
        return found
