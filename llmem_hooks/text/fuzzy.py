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


def looks_like_typo(word: str, meant: str) -> bool:
    """Whether ``word`` reads as a slip of the keys for ``meant``: two neighbouring letters
    swapped ("dokcer" / "docker"), or one letter dropped or doubled inside a word of five
    or more letters ("enviroment", "kuberntes", "postgress"). A different letter ("cost" / "most",
    "features" / "fixtures", "external" / "internal") or a different ending ("shown" /
    "show", "exact" / "exactly") is as likely another word the store never held: guessing
    it up front, while the question's other words find plenty, adds noise, not answers
    (bench/ablation.py, docs/retrieval.md)."""
    if word == meant or min(len(word), len(meant)) < 5:
        return False
    if len(word) == len(meant):
        diff = [i for i, (a, b) in enumerate(zip(word, meant, strict=True)) if a != b]
        return (
            len(diff) == 2
            and diff[1] == diff[0] + 1
            and (word[diff[0]], word[diff[1]]) == (meant[diff[1]], meant[diff[0]])
        )
    if abs(len(word) - len(meant)) != 1:
        return False
    short, long_ = (word, meant) if len(word) < len(meant) else (meant, word)
    i = next((k for k in range(len(short)) if short[k] != long_[k]), len(short))
    if short[i:] != long_[i + 1 :]:
        return False
    # the letter added or dropped is inside the word, or doubles the one before it
    return 0 < i < len(short) or (i > 0 and long_[i] == long_[i - 1])
