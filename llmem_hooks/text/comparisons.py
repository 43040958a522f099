"""The two events a comparison question names ("which came first: A or B?", "how long after
A did B?", "did we A before or after B?", "how many days between A and B?").

Such a question has its evidence in two places, often sessions apart, and one search over
all its words ranks the place that shares the most words first and buries the other
(measured on the technical conversations, issue 23: "which came first" and "how long
after" questions found one event of two in the top five). The retriever searches each
event on its own too and keeps the best hit of each near the top (`Retriever.find`).

Only the sentence's shape decides: an order word (first, before, after, ...) with "or", or
a "how long / how many <unit>" with after, before, since or between. A choice between two
things without an order word ("Leo or Jamal?", "single-AZ or Multi-AZ?") is one question
about one place and is left alone.
"""

from __future__ import annotations

import re

from .query import is_stop_word
from .words import words

# "Did we add the jitter before or after moving metrics?"
_BEFORE_OR_AFTER = re.compile(
    r"^(?P<a>.+?)\s+(?:before\s+or\s+after|after\s+or\s+before)\s+(?P<b>.+)$", re.IGNORECASE
)
# "How long after the outage did the fix ship?", "How many weeks before the launch was ..."
_HOW_LONG = re.compile(
    r"\bhow\s+(?:long|soon|much\s+time|many\s+[a-z]+)\s+(?:after|before|since)\s+(?P<a>.+?)\s+"
    r"(?:did|was|were|had|has|have|do|does|is|are|until|till|could|would)\s+(?P<b>.+)$",
    re.IGNORECASE,
)
# "How long did we run with short tokens before doubling them?"
_HOW_LONG_UNTIL = re.compile(
    r"\bhow\s+(?:long|many\s+[a-z]+)\s+(?:did|had|have|was|were|do|does)\s+(?P<a>.+?)\s+"
    r"(?:before|until|till)\s+(?P<b>.+)$",
    re.IGNORECASE,
)
# "How many days passed between buying the bike and the first ride?"
_BETWEEN = re.compile(
    r"\b(?:how|what)\b.*?\bbetween\s+(?P<a>.+?)\s+and\s+(?P<b>.+)$", re.IGNORECASE
)
# "Which happened first: A, or B?", "Which came first, A or B?"
_ORDER_WORD = re.compile(r"\b(?:first|earlier|later|sooner|last|before|after)\b", re.IGNORECASE)
_OR = re.compile(r",?\s+or\s+", re.IGNORECASE)
_LEAD = re.compile(r"[:,]\s*")
_MIN_WORDS = 1  # content words each side must hold to stand as an event
_MAX_CHARS = 400  # longer questions are not taken apart


def event_clauses(question: str) -> tuple[str, str] | None:
    """The two events ``question`` compares in time, or None when it compares none."""
    text = question.strip().rstrip("?.! ")
    if not text or len(text) > _MAX_CHARS:
        return None
    for pattern in (_BEFORE_OR_AFTER, _HOW_LONG, _HOW_LONG_UNTIL, _BETWEEN):
        m = pattern.search(text)
        if m:
            return _pair(m["a"], m["b"])
    return _either(text)


def _either(text: str) -> tuple[str, str] | None:
    """For "<order word> ...: A, or B": A is what follows the last ``:`` or ``,`` before "or"."""
    ors = list(_OR.finditer(text))
    if not ors or not _ORDER_WORD.search(text[: ors[-1].start()]):
        return None
    left, right = text[: ors[-1].start()], text[ors[-1].end() :]
    leads = list(_LEAD.finditer(left))
    if leads:
        left = left[leads[-1].end() :]
    else:
        cue = list(_ORDER_WORD.finditer(left))
        left = left[cue[-1].end() :] if cue else left
    return _pair(left, right)


def _pair(a: str, b: str) -> tuple[str, str] | None:
    a, b = a.strip(" ,:;"), b.strip(" ,:;")
    if _telling(a) < _MIN_WORDS or _telling(b) < _MIN_WORDS:
        return None
    return a, b


def _telling(text: str) -> int:
    return sum(1 for w in words(text) if len(w) > 1 and not is_stop_word(w))
