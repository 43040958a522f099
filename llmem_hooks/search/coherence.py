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

The same rule then runs over sessions, at half the penalty (`SESSION_PENALTY`): one
repository's sessions are threads on many topics, and a session that shares a word or two
with the question by chance goes below the sessions that hold it (issue 23, stop 42: ten
technical conversations in one project @5 dev 0.740 -> 0.752, held out 0.754 -> 0.776;
in a home of ten projects held out 0.764 -> 0.773, @10 0.844 -> 0.853; the long chats'
held-out half in one home @5 0.692 -> 0.680, @10 0.778 -> 0.775: a catch-up chat's
session holds many topics, so its coverage says less).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from .matching import terms_held

if TYPE_CHECKING:
    from ..text.query import ParsedQuery
    from .retriever import SearchHit

STRAY_SHARE = 0.75
STRAY_PENALTY = 0.3
SESSION_PENALTY = 0.15


def demote_strays(
    hits: list[SearchHit], parsed: ParsedQuery, rarity: Callable[[], Sequence[float]]
) -> list[SearchHit]:
    """``hits`` (best first) with those of projects covering less than `STRAY_SHARE` of
    what the best-covering project does scored lower, then those of sessions likewise (by
    `SESSION_PENALTY`), re-sorted (stable); ``rarity`` gives one weight per question word
    (`ParsedQuery.terms`), asked only when needed. A grain whose hits come from fewer than
    two projects (sessions) is left alone, and so is a question of fewer than two words; a
    hit of no project (session) is never demoted."""
    if len(parsed.terms) < 2 or len(hits) < 2:
        return hits
    grains = [
        (key, penalty)
        for key, penalty in (("project", STRAY_PENALTY), ("session_id", SESSION_PENALTY))
        if len({_group(h, key) for h in hits} - {""}) >= 2
    ]
    if not grains:
        return hits
    held = terms_held(parsed)
    found = {h.id: list(held(h.memory)) for h in hits}
    weights = rarity()
    for key, penalty in grains:
        if _demote(hits, key, penalty, found, weights):
            hits = sorted(hits, key=lambda h: h.score, reverse=True)
    return hits


def _demote(
    hits: list[SearchHit],
    key: str,
    penalty: float,
    found: dict[str, list[bool]],
    weights: Sequence[float],
) -> bool:
    """Lower the score of the hits whose ``key`` group (project, session) covers less than
    `STRAY_SHARE` of the best group's weight of the question; True when one was."""
    covered: dict[str, list[bool]] = {}
    for h in hits:
        group = _group(h, key)
        if not group:
            continue
        mine = covered.setdefault(group, [False] * len(weights))
        for i, f in enumerate(found[h.id]):
            mine[i] = mine[i] or f
    cover = {g: sum(w for w, f in zip(weights, c, strict=True) if f) for g, c in covered.items()}
    best = max(cover.values())
    if best <= 0:
        return False
    changed = False
    for h in hits:
        share = cover.get(_group(h, key), best) / best
        if share < STRAY_SHARE:
            h.score -= penalty * (STRAY_SHARE - share) / STRAY_SHARE
            changed = True
    return changed


def _group(hit: SearchHit, key: str) -> str:
    """The hit's project or session ("" for none)."""
    value = cast(Mapping[str, Any], hit.memory).get(key)
    return value if isinstance(value, str) else ""
