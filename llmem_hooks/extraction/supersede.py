"""Changes of state: "we've moved from Jenkins to GitHub Actions" makes a stored memory
that says "CI runs on Jenkins" stale.

`replaced_term` reads what a change statement says is gone; `supersede_replaced` marks
the stored memories that state it (same project or global, a durable type, naming the old
thing but not the new one) as superseded by the new memory: a ``supersedes`` relation
from the new one, and the old one invalidated with the reason. Only the public store API
is used (`MemoryStore.search`, ``add_relation``, ``invalidate``).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ..errors import LLMemError
from .candidates import Candidate, word_set, words

if TYPE_CHECKING:
    from ..store import MemoryStore

SUPERSEDABLE_TYPES = ("fact", "decision", "procedure", "preference")
MAX_SUPERSEDED = 5

_THING = r"[\w.+#/-]+(?: (?-i:[A-Z0-9])[\w.+#/-]*)?"
_OLD = re.compile(
    r"\b(?:from|off(?: of)?|replaced|swapped(?: out)?|dropped|ditched|retired|no longer use)\s+"
    rf"(?:our |the |using )?(?P<old>{_THING})"
    r"(?=\s+(?:to|onto|and|with|for|in favou?r of|in|on|at|last|this|\d)\b|\s*[;,]|[\s.]*$)",
    re.I,
)
_NEW = re.compile(
    rf"\b(?:to|onto|with|in favou?r of|(?<!no longer )use)\s+(?:the |using )?(?P<new>{_THING})",
    re.I,
)
_GENERIC = word_set("it this that them the a an our we us")


def replaced_term(content: str) -> str | None:
    """What a change statement says is gone ("We've moved from Jenkins to GitHub
    Actions." -> "Jenkins"); None when it names nothing specific."""
    m = _OLD.search(content)
    if not m:
        return None
    old = m.group("old").strip(" .,;")
    return None if old.lower() in _GENERIC or len(old) < 2 else old


def replacement_term(content: str) -> str | None:
    """What a change statement says is in place now ("... to GitHub Actions." ->
    "GitHub Actions"); None when it names nothing."""
    m = _NEW.search(content)
    return m.group("new").strip(" .,;") if m else None


def _mentions(text: str, term: str) -> bool:
    return bool(re.search(rf"(?<![\w-]){re.escape(term)}(?![\w-])", text, re.I))


def supersede_replaced(
    store: MemoryStore, new_id: str, candidate: Candidate, project: str | None
) -> list[str]:
    """Mark the stored memories that ``candidate`` (stored as ``new_id``) replaces as
    superseded; returns their ids. A store error costs only the marking, never the new
    memory."""
    old = candidate.replaces
    if not old or not words(old):
        return []
    new = replacement_term(candidate.content)
    query = '"' + " ".join(words(old)) + '"'
    try:
        hits = store.search(query, limit=20, type=SUPERSEDABLE_TYPES, project=project)
    except LLMemError:
        return []
    out: list[str] = []
    for mem in hits:
        text = str(mem.get("content") or "")
        if mem.get("id") == new_id or not _mentions(text, old):
            continue
        if (new and _mentions(text, new)) or replaced_term(text):
            continue  # already says the new state, or is itself a change statement
        try:
            store.add_relation(new_id, mem["id"], "supersedes")
            store.invalidate(mem["id"], reason=f"superseded by {new_id}: {candidate.content}")
        except LLMemError:
            continue
        out.append(mem["id"])
        if len(out) >= MAX_SUPERSEDED:
            break
    return out
