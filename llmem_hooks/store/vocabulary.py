"""The typo-tolerance vocabulary: the ``fuzzy_terms`` and ``fuzzy_trigrams`` tables.

Every distinct word of the stored memories, and its padded trigrams, indexed once (see
`llmem_hooks.text.fuzzy` for the scoring). Written in the same transaction as the memory the
words come from; read by `MemoryStore.suggest_terms`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..text.fuzzy import (
    DEFAULT_THRESHOLD,
    MAX_CANDIDATES,
    MIN_FUZZY_LEN,
    fold,
    similarity,
    trigrams,
)


def index_terms(conn: Any, terms: Iterable[str]) -> None:
    """Add words to the vocabulary and their trigrams to the index (idempotent)."""
    new = list(set(terms))
    if not new:
        return
    known: set[str] = set()
    for i in range(0, len(new), 500):
        chunk = new[i : i + 500]
        marks = ",".join("?" * len(chunk))
        known.update(
            r[0]
            for r in conn.execute(f"SELECT term FROM fuzzy_terms WHERE term IN ({marks})", chunk)
        )
    fresh = [t for t in new if t not in known]
    if not fresh:
        return
    conn.executemany("INSERT OR IGNORE INTO fuzzy_terms(term) VALUES (?)", [(t,) for t in fresh])
    conn.executemany(
        "INSERT OR IGNORE INTO fuzzy_trigrams(trigram, term) VALUES (?, ?)",
        [(g, t) for t in fresh for g in trigrams(t)],
    )


def suggest(
    conn: Any, word: str, threshold: float = DEFAULT_THRESHOLD, limit: int = 3
) -> list[tuple[str, float]]:
    """Vocabulary words similar to ``word`` (similarity >= threshold), best first."""
    word = fold(word)
    if len(word) < MIN_FUZZY_LEN:
        return []
    grams = sorted(trigrams(word))
    marks = ",".join("?" * len(grams))
    # A word within edit distance d of `word` shares most trigrams; require at least a
    # quarter of them, and score only the words sharing the most (edit distance in Python
    # is the cost here: a common word's trigrams are shared by hundreds of words).
    need = max(1, len(grams) // 4)
    rows = conn.execute(
        f"SELECT term FROM fuzzy_trigrams WHERE trigram IN ({marks}) "
        f"GROUP BY term HAVING COUNT(*) >= ? ORDER BY COUNT(*) DESC LIMIT ?",
        [*grams, need, MAX_CANDIDATES],
    ).fetchall()
    scored = []
    for (term,) in rows:
        if term == word or abs(len(term) - len(word)) > len(word) * (1 - threshold) + 1:
            continue
        sim = similarity(word, term, threshold)
        if sim >= threshold:
            scored.append((term, sim))
    scored.sort(key=lambda ts: (-ts[1], ts[0]))
    return scored[:limit]
