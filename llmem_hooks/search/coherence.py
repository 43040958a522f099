"""Which projects a question is about: a project that holds little of it is demoted.

A question asked across projects ("where does each generated document end up in object
storage?") shares a word or two with many projects by chance ("document" in a web
project's DOM code, "object" in a Rust pipeline's `object_store`), while the project it is
about holds most of its words, spread over its memories. Among the candidates, each
project's *coverage* is the weight of the question's words that its hits hold together
(each word weighted by its rarity); a project whose coverage is below `STRAY_SHARE` of the
best project's loses up to `STRAY_PENALTY` of score, in proportion to how far below it is.
Projects near the best are left alone: the rule removes chance matches, it does not rank
the relevant projects against each other (a notes project holding one summary of all the
others keeps its place).

Measured in process (2026-11-28, docs/benchmarks.md): technical conversations of seven
projects in one store, @5 on a conversation written that day and scored before tuning
0.730 -> 0.790 (the plain keyword floor 0.802), dev 0.740 -> 0.748; the long chats of
eight people in one store @10 0.714 -> 0.731 on the two written that day; DevMemBench and
the rest within one question.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from .matching import terms_held

if TYPE_CHECKING:
    from ..text.query import ParsedQuery
    from .retriever import SearchHit

STRAY_SHARE = 0.75
STRAY_PENALTY = 0.3


def demote_stray_projects(
    hits: list[SearchHit], parsed: ParsedQuery, rarity: Callable[[], Sequence[float]]
) -> list[SearchHit]:
    """``hits`` (best first) with those of projects covering less than `STRAY_SHARE` of
    what the best-covering project does scored lower, re-sorted (stable); ``rarity``
    gives one weight per question word (`ParsedQuery.terms`), asked only when needed.
    Unchanged when the hits come from fewer than two projects (a search within one
    project, recall) or the question has fewer than two words."""
    n = len(parsed.terms)
    if n < 2 or len(hits) < 2:
        return hits
    projects = {h.memory.get("project") for h in hits} - {None, ""}
    if len(projects) < 2:
        return hits
    held = terms_held(parsed)
    covered: dict[str, list[bool]] = {}
    for h in hits:
        project = h.memory.get("project")
        if not project:
            continue
        mine = covered.setdefault(project, [False] * n)
        for i, found in enumerate(held(h.memory)):
            mine[i] = mine[i] or found
    weights = rarity()
    cover = {p: sum(w for w, f in zip(weights, c, strict=True) if f) for p, c in covered.items()}
    best = max(cover.values())
    if best <= 0:
        return hits
    changed = False
    for h in hits:
        share = cover.get(h.memory.get("project") or "", best) / best
        if share < STRAY_SHARE:
            h.score -= STRAY_PENALTY * (STRAY_SHARE - share) / STRAY_SHARE
            changed = True
    return sorted(hits, key=lambda h: h.score, reverse=True) if changed else hits
