"""Typo tolerance: a trigram index over the vocabulary of stored memories.

Rather than indexing the trigrams of every memory (3-5x the size of the text, and slow to
write), we index the trigrams of each distinct *word* once. A misspelled query word
(``dokcer``) is matched to vocabulary words sharing a padded trigram, then scored by
optimal-string-alignment edit distance (so a swap of two letters costs 1). The caller
rewrites the query with the corrections and runs the normal FTS5 search.

This module holds the text side (folding, words, trigrams, edit distance); the tables
``fuzzy_terms`` / ``fuzzy_trigrams`` are written and read in `llmem_hooks.store.vocabulary`.
"""

from __future__ import annotations

import re
import unicodedata

from ..config import RetrievalSettings

DEFAULT_THRESHOLD: float = RetrievalSettings.fuzzy_threshold
_WORD = re.compile(r"[a-z][a-z0-9_]{2,31}")
MIN_FUZZY_LEN = 4
MAX_CANDIDATES = 40


def fold(text: str) -> str:
    """Lower-case and strip diacritics, as the FTS5 tokenizer does."""
    text = unicodedata.normalize("NFKD", text.lower())
    return "".join(ch for ch in text if not unicodedata.combining(ch))


def extract_terms(text: str) -> set[str]:
    """Distinct words of ``text`` worth indexing for fuzzy lookup (3..32 chars, not numbers)."""
    return set(_WORD.findall(fold(text)))


def trigrams(word: str) -> set[str]:
    """Trigrams of ``word`` padded with spaces, so short words still share their ends."""
    padded = f"  {word} "
    return {padded[i : i + 3] for i in range(len(padded) - 2)}


def osa_distance(a: str, b: str, max_distance: int | None = None) -> int:
    """Optimal string alignment distance (Levenshtein plus adjacent transpositions).

    With ``max_distance``, stops as soon as the result must exceed it and returns
    a value above it (most candidate words are far off; this is the hot loop).
    """
    if a == b:
        return 0
    la, lb = len(a), len(b)
    if not la or not lb:
        return la or lb
    if max_distance is not None and abs(la - lb) > max_distance:
        return max_distance + 1
    prev2: list[int] = []
    prev = list(range(lb + 1))
    for i in range(1, la + 1):
        cur = [i] + [0] * lb
        ca = a[i - 1]
        for j in range(1, lb + 1):
            cb = b[j - 1]
            cost = 0 if ca == cb else 1
            v = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                v = min(v, prev2[j - 2] + 1)
            cur[j] = v
        # Every later cell builds on the last two rows (or the growing first column).
        if (
            max_distance is not None
            and i > max_distance
            and min(cur) > max_distance
            and (not prev2 or min(prev) >= max_distance)
        ):
            return max_distance + 1
        prev2, prev = prev, cur
    return prev[lb]


def similarity(a: str, b: str, threshold: float | None = None) -> float:
    """1 - edit distance / longer length: 1.0 for equal words, 0.0 for unrelated ones.
    With ``threshold``, any value below it may be returned as a cheaper lower estimate."""
    longest = max(len(a), len(b))
    if not longest:
        return 1.0
    cap = None if threshold is None else int((1.0 - threshold) * longest + 1e-9)
    return 1.0 - osa_distance(a, b, cap) / longest
