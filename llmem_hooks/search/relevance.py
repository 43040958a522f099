"""How much of a prompt a memory answers: recall's relevance, 0..1.

Counting the prompt's words a memory holds treats "port" like "ledger"; in a store where
every service has a port, "which port does the ledger database use?" then finds every
port. Each word is weighed by how rare it is in the store (`idf_weights`), so a memory
holding "ledger" answers far more of the prompt than one holding "port" and "database".
The query service sets its floors on this score (docs/query-service.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..text.query import ParsedQuery
from .matching import terms_held

Relevance = Callable[[Mapping[str, Any], Mapping[str, Sequence[str]] | None], float]
GUESSED_WEIGHT = 0.5  # a word matched only through a guessed spelling counts this much
# A word the session already holds an answer for (`known`) counts this much in a new
# memory: a sibling that shares the words of what the session has adds little to it.
KNOWN_WEIGHT = 0.5


def idf_weights(
    terms: Sequence[str], doc_freq: Mapping[str, int], size: int, unknown_df: float
) -> list[float]:
    """Each word's weight, its inverse document frequency log(1 + N / df): ``doc_freq``
    may stop counting at a cap (a common word then weighs the least, whatever its count);
    a word no memory holds weighs as if ``unknown_df`` memories did (a topic the store
    does not know counts against a hit)."""
    n = max(size, 1)
    return [math.log(1.0 + n / (doc_freq.get(t) or unknown_df)) for t in terms]


def weighed_relevance(
    parsed: ParsedQuery,
    weights: Sequence[float],
    required: Sequence[str] = (),
    known: Collection[str] = (),
) -> Relevance:
    """A function of a memory (and the spellings the search guessed for it) giving the
    weighed share of ``parsed.terms`` it holds. A word matched only through a guessed
    spelling ("dokcer" -> docker, but also "convert" -> connect) counts half: a guess is
    weaker evidence than the word itself. A memory without one of the ``required`` words
    (what a follow-up names) answers nothing of the prompt. A ``known`` word (one the
    session's best answer so far holds) counts `KNOWN_WEIGHT` of its weight: what a new
    memory adds to the session is what it says beyond that."""
    total = sum(weights) or 1.0
    if known:
        weights = [
            w * KNOWN_WEIGHT if t in known else w
            for t, w in zip(parsed.terms, weights, strict=True)
        ]
    held = terms_held(parsed)
    must = [i for i, t in enumerate(parsed.terms) if t in set(required)]

    def relevance(mem: Mapping[str, Any], corrections: Mapping[str, Sequence[str]] | None) -> float:
        exact = held(mem)
        guessed = exact
        if corrections:
            alts = {
                t: [*parsed.alternatives.get(t, ()), *corrections.get(t, ())] for t in parsed.terms
            }
            guessed = terms_held(replace(parsed, alternatives=alts))(mem)
        if not all(guessed[i] for i in must):
            return 0.0
        score = sum(
            w if h else GUESSED_WEIGHT * w if g else 0.0
            for w, h, g in zip(weights, exact, guessed, strict=True)
        )
        return score / total

    return relevance
