"""How alike two memories are without a model: their normalized words and the overlap
of those words (Jaccard), and every pair of a list above a threshold, fast.

"The API stores its data in PostgreSQL 16." and "the api stores data in postgresql 16"
normalize to the same words. Pairs are found with prefix filtering (each word set sorted
rarest word first; two sets at Jaccard >= t must share a word among the first
``n - ceil(t * n) + 1`` of each), so 100,000 memories compare in seconds, not in 10**10
steps. Two texts that differ by a number or a negation are never alike: "port 8080" is
not "port 8081", "do not use X" is not "use X" (docs/dream.md).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Hashable, Sequence

from ..text.fuzzy import fold

_WORD = re.compile(r"[a-z0-9][a-z0-9_.+#-]*[a-z0-9+#]|[a-z0-9]")
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "of",
        "to",
        "in",
        "on",
        "at",
        "for",
        "from",
        "by",
        "with",
        "as",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "we",
        "our",
        "us",
        "you",
        "your",
        "i",
        "my",
        "me",
        "he",
        "she",
        "they",
        "them",
        "their",
        "there",
        "here",
        "so",
        "then",
        "than",
        "too",
        "very",
        "just",
        "also",
        "into",
        "onto",
        "over",
        "about",
        "has",
        "have",
        "had",
        "do",
        "does",
        "did",
        "will",
        "would",
        "should",
        "can",
        "could",
        "may",
        "might",
        "must",
        "shall",
        "which",
        "who",
        "whom",
        "what",
        "when",
        "where",
        "how",
        "all",
        "any",
        "some",
        "each",
        "every",
        "more",
        "most",
        "other",
        "such",
        "only",
        "own",
        "same",
    ]
)
NEGATIONS = frozenset(
    ["not", "no", "never", "none", "nothing", "without", "cannot", "dont", "doesnt", "isnt", "wont"]
)


def stem(word: str) -> str:
    """A crude suffix strip, applied the same way to both sides (uses -> use,
    stored -> stor, storing -> stor): enough to see two wordings of one statement."""
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix) and not word.endswith("ss"):
            return word[: -len(suffix)]
    return word


def words(text: str) -> frozenset[str]:
    """The normalized content words of ``text``: folded (case, accents), stop words
    dropped, stems; negations kept (they change the meaning)."""
    folded = fold(text).replace("n't", "nt").replace("'", "")
    return frozenset(stem(w) for w in _WORD.findall(folded) if w not in STOPWORDS)


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a or not b:
        return 0.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


def differ_in_fact(a: frozenset[str], b: frozenset[str]) -> bool:
    """True when the words only one side has include a number or a negation."""
    return any(w in NEGATIONS or any(c.isdigit() for c in w) for w in a ^ b)


def same_statement(a: frozenset[str], b: frozenset[str]) -> bool:
    """Whether two word sets can be one statement worded twice: one holds all the other's
    words (word order, case, stop words, endings and added words may differ) and the
    words only one side has hold no number and no negation. Each side having a word the
    other lacks ("tests for docstrings" / "tests for imports") makes two statements."""
    return (a <= b or b <= a) and not differ_in_fact(a, b)


def similar_pairs(
    sets: Sequence[frozenset[str]],
    groups: Sequence[Hashable],
    threshold: float,
    *,
    only: set[int] | None = None,
) -> list[tuple[int, int, float]]:
    """(i, j, jaccard) for every i < j of the same group with Jaccard >= ``threshold``
    (> 0); whether they `differ_in_fact` is the caller's question. ``only``: pairs with
    at least one of these indices (an incremental run compares new against all)."""
    if not 0 < threshold <= 1:
        raise ValueError("threshold must be in (0, 1]")
    freq: Counter[str] = Counter()
    for s in sets:
        freq.update(s)
    order = sorted(range(len(sets)), key=lambda i: len(sets[i]))
    index: dict[tuple[Hashable, str], list[int]] = {}
    out: list[tuple[int, int, float]] = []
    for i in order:
        s = sets[i]
        n = len(s)
        if not n:
            continue
        ranked = sorted(s, key=lambda w: (freq[w], w))
        prefix = ranked[: n - math.ceil(threshold * n - 1e-9) + 1]
        seen: set[int] = set()
        group = groups[i]
        for w in prefix:
            for j in index.get((group, w), ()):
                if j in seen:
                    continue
                seen.add(j)
                if only is not None and i not in only and j not in only:
                    continue
                other = sets[j]
                if len(other) < threshold * n:  # sets come smallest first
                    continue
                score = jaccard(s, other)
                if score >= threshold:
                    out.append((min(i, j), max(i, j), score))
            index.setdefault((group, w), []).append(i)
    return out
