"""The error taxonomy of ``self_assessment`` memories (the LLMem reference's categories).

A session's self-assessment names one category, so assessments can be counted and
searched by kind of mistake ("how often did we miss a null check?"). The model is asked
to pick from `ERROR_TAXONOMY_KEYS` (a JSON-schema enum); a stored assessment starts with
``CATEGORY: what happened`` so `parse_self_assessment` can read it back without a model.
"""

from __future__ import annotations

import re

ERROR_TAXONOMY: dict[str, str] = {
    "NULL_SAFETY": "Missing null/None/undefined checks",
    "ERROR_HANDLING": "Missing try/except, bare except, swallowed errors",
    "OFF_BY_ONE": "Boundary errors, wrong loop bounds",
    "RACE_CONDITION": "Concurrency issues, async problems",
    "AUTH_BYPASS": "Missing auth checks, SSRF, injection",
    "DATA_INTEGRITY": "Stale derived fields, cache sync issues",
    "MISSING_VERIFICATION": "Skipped tests, unverified outputs",
    "EDGE_CASE": "Unhandled empty input, unexpected types",
    "PERFORMANCE": "N+1 queries, memory leaks",
    "DESIGN": "Architectural issues, coupling problems",
    "REVIEW_PASSED": "Clean review — positive outcome",
}

ERROR_TAXONOMY_KEYS: tuple[str, ...] = tuple(ERROR_TAXONOMY)

# What a model self-assessment holds, in the order it is written out.
SELF_ASSESSMENT_FIELDS: tuple[str, ...] = (
    "category",
    "what_happened",
    "caught_by",
    "proposed_fix",
    "outcome",
)

OUTCOMES: tuple[str, ...] = ("completed", "partial", "failed", "unclear")

_LINE = re.compile(r"^\s*([A-Za-z_]+)\s*:\s*(.*?)\s*$", re.S)


def category_tag(category: str) -> str:
    """The tag a category gets on a memory: ``NULL_SAFETY`` -> ``null-safety``."""
    return category.strip().lower().replace("_", "-")


def parse_self_assessment(text: str) -> dict[str, str] | None:
    """``"NULL_SAFETY: null pointer dereference"`` -> ``{"category": "NULL_SAFETY",
    "what": "null pointer dereference"}``; only the first line counts. None when the line
    does not start with a known category (case-insensitive)."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    m = _LINE.match(first)
    if not m:
        return None
    category = m.group(1).upper()
    if category not in ERROR_TAXONOMY:
        return None
    return {"category": category, "what": m.group(2)}
