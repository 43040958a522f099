"""Words of free text: the one tokenizer for a query's words and the words of a text they
are matched against (passages), so both sides split ``foo:bar``, ``v1.2`` or ``c++`` alike.

A word starts with a letter or digit and may hold ``. - : / + # @`` inside (paths, versions,
handles, ``c#``); the punctuation around it is dropped. Other splitters keep their own
rules on purpose: `fuzzy` (the typo index: 3-32 ASCII letters), `dream.likeness` (wording
folded to ASCII for near-duplicates), `dream.rewrite` (tokens a rewrite must keep: flags,
``a=b``, ``~/``), extraction's candidate gate.
"""

from __future__ import annotations

import re

WORD = re.compile(r"[\w][\w.\-:/+#@]*[\w+#]|\w", re.UNICODE)
# camelCase and PascalCase (ASCII: the casing conventions of code): a run of letters and
# digits, and in it a hump, an upper-case letter after a lower-case one or a digit
# (``maxConcurrent``) or starting a word after an acronym (``HTTPServer``). No nested
# repetition in these patterns: they run over whatever a transcript holds.
_TOKEN = re.compile(r"[A-Za-z][A-Za-z0-9]*")
_HAS_HUMP = re.compile(r"[a-z0-9][A-Z]|[A-Z][A-Z][a-z]")
_HUMP = re.compile(r"[A-Z]?[a-z]+|[A-Z]{2,}(?![a-z])|[0-9]+")


def words(text: str) -> list[str]:
    """Words of free text, lower-cased, punctuation around them removed."""
    return [w.lower() for w in WORD.findall(text)]


def identifier_parts(text: str, limit: int = 400) -> str:
    """The words inside the camelCase and PascalCase identifiers of ``text``, lower-cased,
    each once, at most ``limit`` characters: ``MaxConcurrentReconciles`` -> ``max
    concurrent reconciles``. A developer asks in words ("how many concurrent reconciles")
    for what the code said as one token, which the full-text index keeps whole (it splits
    snake_case and kebab-case at their punctuation, not camelCase at its humps)."""
    seen: dict[str, None] = {}
    size = 0
    for m in _TOKEN.finditer(text):
        token = m.group(0)
        if not _HAS_HUMP.search(token):
            continue
        parts = [p.lower() for p in _HUMP.findall(token) if len(p) > 1]
        if len(parts) < 2:  # "iOS", "v1Alpha": not words put together
            continue
        for word in parts:
            if word in seen:
                continue
            if size + len(word) + 1 > limit:
                return " ".join(seen)
            seen[word] = None
            size += len(word) + 1
    return " ".join(seen)
