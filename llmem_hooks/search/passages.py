"""Query-focused passages: the parts of a result list that answer the question.

An episode (a whole exchange) runs to thousands of characters, while what answers a
question is usually a few lines of the reply, next to the words the question shares with
it. Showing whole episodes fills an agent's context with what it did not ask for; cutting
episodes into passages *before* ranking loses the words that made the right episode rank
first (measured on DevMemBench: -8 points of answer coverage). So ranking sees whole
memories, and only what is *shown* is cut, across the whole list at once:

1. every text is split into units (lines; long lines into sentences; a run-on sentence
   longer than `_MAX_UNIT` into pieces at word boundaries, so one unit never takes the
   whole budget);
2. a unit scores the question words it holds (stems, so inflections count), a word found
   in most units of the list counting less than a rare one (IDF within the list), and a
   unit of the first three results more (the ranking already judged them);
3. each result first gets its best unit (a result never shows nothing), then units are
   taken best first with the line after each (an answer follows its cue; a cue ending in
   ``:`` brings up to three), skipping a unit whose words were all shown already;
4. a chosen unit in a list (a bullet or numbered item, or the cue line before one) brings
   the *heads* of the list's other items: the words before the first comma, colon, dash
   or aside, and the aside's first part ("- Rate limiting (slowapi …" for "- Rate
   limiting (slowapi, 100/10 rpm, Redis backend)"), so a reader sees what the list names
   at a fraction of its length;
5. what budget is left widens the chosen units, result by result (the line after before
   the line before; a head so reached is shown whole), so a second or fifth result that
   holds the answer is not starved.

Heads (issue 23): the answer words cut from the shown text sat mostly in the list lines of
status and summary replies ("what is complete and what is pending?"), which share no word
with the question. Measured in process on DevMemBench dev: coverage 0.880 at 1,727
characters -> 0.911 at 1,730, the technical conversations unchanged (0.753).

Output keeps document order, with ``…`` where text was left out; a short text (<= 120
characters) is always shown whole. The full text stays one ``get`` away. Measured with
`bench/devmem.py` (docs/benchmarks.md): a fixed share per rank gave coverage 0.822 at
1,819 characters for five results, this list-wide selection 0.865 at 1,862.

The first `_HEAD` results are read first, and they get the budget first: they share it
less a small reserve for each later result (`_TAIL_RESERVE`), and the later ones then
share what the first leave (more when the first are short). Measured (issue 23): on
DevMemBench the fifth result held 7 answer words no other result did, for 14% of the
characters; this gave coverage 0.871 -> 0.886 at the same characters, the technical
conversations within +-0.006 (dev 0.728 -> 0.733; both halves in one store: dev 0.715 ->
0.709, held-out 0.729 -> 0.727).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..text.lines import pieces
from ..text.words import words as text_words
from .matching import word_patterns

ELLIPSIS = "…"
# "A number", one of a quantity question's words (`fit`'s ``numbers``): "how big is the
# image?" is answered by "1.2GB to 340MB", which holds none of its words. Measured in
# process (issue 23, 2026-11-27): answer coverage at the same characters, DevMemBench dev
# 0.878 -> 0.880, the technical conversations dev 0.715 -> 0.731; a digit weighing as two
# words: 0.882 / 0.728.
_DIGIT = re.compile(r"\d")
WHOLE_CHARS = 120  # texts this short are shown whole
_SENTENCE = re.compile(r"(?<=[.!?;:])\s+(?=[A-Z0-9`\"'(\[*-])")
_LONG_LINE = 220  # lines longer than this are split into sentences
_MAX_UNIT = 300  # ... and sentences longer than this into pieces at word boundaries
_SHORT_UNIT = 12  # units shorter than this ("```", "User:") are never chosen for a match
_NOVELTY = 0.9  # a unit whose words were shown already at this share adds nothing
_FOLLOW = 2  # lines taken after a matching unit
_FOLLOW_CUE = 3  # ... after one that ends in ":" (a list or code block follows)
_HEAD = 3  # the results that get the budget first
_TAIL_RESERVE = (130, 70)  # what the 4th and 5th (and later) results keep at least
# The list's order is evidence too: a unit of the first result weighs twice, the second's
# 5/3, the third's 4/3 (measured, issue 23: DevMemBench coverage 0.840 -> 0.856, technical
# conversations 0.696 -> 0.732, at 1,750 characters for five results).
_RANK_SPAN = 3
_ITEM = re.compile(r"^(?:[-*•+]|\d{1,3}[.)])\s+")  # a bullet or numbered list item
# where an item's head ends: an aside, a dash, a comma or semicolon; a colon too, unless
# the head is its label ("Pending: NextAuth.js, admin views" keeps "Pending: NextAuth.js")
_HEAD_END = re.compile(r"\s[(\[—–-]\s?|[:;,(]\s|\s=\s")
# ... and an aside's first part is kept: "- Email (SendGrid, fire-and-forget)" keeps
# "- Email (SendGrid" (measured: DevMemBench coverage 0.903 -> 0.911)
_ASIDE_END = re.compile(r"[,;:)]|\s[+—–-]\s|\s\(")
_HEAD_MAX = 60  # ... and at most this many characters
_HEAD_COST = 4  # what a head adds besides its text (" …" and a line break)


def _rank_weight(rank: int) -> float:
    return 1.0 + max(0, _RANK_SPAN - rank) / _RANK_SPAN


def _is_cue(text: str) -> bool:
    """A line that announces what follows ("Pydantic schemas:", "**Complete:**")."""
    return text.rstrip("*_ ").endswith(":")


def _head(text: str) -> str | None:
    """The head of a list item (its marker and the words before its first aside), or
    None: not a list item, or its head is nearly all of it."""
    marker = _ITEM.match(text)
    if marker is None:
        return None
    body = text[marker.end() :]
    end = _HEAD_END.search(body)
    cut = end.start() if end else len(body)
    if end is not None and body[cut] == ":":
        label_end = _HEAD_END.search(body, end.end())
        cut = label_end.start() if label_end else len(body)
    elif end is not None and "(" in end.group():  # an aside opens with what it is made of
        inner = _ASIDE_END.search(body, end.end())
        cut = inner.start() if inner else len(body)
    if cut > _HEAD_MAX:
        space = body.rfind(" ", 0, _HEAD_MAX)
        cut = space if space > _HEAD_MAX // 4 else _HEAD_MAX
    if cut >= len(body) - 3:
        return None
    return text[: marker.end()] + body[:cut].rstrip()


@dataclass(slots=True)
class _Unit:
    text: str
    line: int  # the line it came from: units of one line are joined by a space


def _units(content: str) -> list[_Unit]:
    out: list[_Unit] = []
    for n, line in enumerate(content.splitlines()):
        text = line.strip()
        if not text:
            continue
        parts = _SENTENCE.split(text) if len(text) > _LONG_LINE else [text]
        for part in parts:
            out.extend(_Unit(piece, n) for piece in pieces(part.strip(), _MAX_UNIT) if piece)
    return out


class _Picker:
    """The units chosen so far, per text, within one budget; and the list items of which
    only the head is shown (``heads``, per text like ``chosen``: unit -> its head)."""

    def __init__(self, docs: list[list[_Unit]], budget: int) -> None:
        self.docs = docs
        self.left = budget
        self.chosen: list[set[int]] = [set() for _ in docs]
        self.heads: list[dict[int, str]] = [{} for _ in docs]
        self.seen: set[str] = set()

    def take(self, i: int, j: int, force: bool = False) -> bool:
        """Unit ``j`` of text ``i`` shown whole (a head shown so far is given back)."""
        doc = self.docs[i]
        if not 0 <= j < len(doc) or j in self.chosen[i]:
            return False
        text = doc[j].text
        words = set(text_words(text))
        head = self.heads[i].get(j)
        refund = len(head) + _HEAD_COST if head is not None else 0
        if not force:
            if head is None and words and len(words & self.seen) >= _NOVELTY * len(words):
                return False
            if len(text) + 2 > self.left + refund:
                return False
        self.chosen[i].add(j)
        self.left -= len(text) + 2 - refund
        self.seen |= words
        self.heads[i].pop(j, None)
        return True

    def take_head(self, i: int, j: int) -> bool:
        """The head of list item ``j`` of text ``i`` shown, if it says something new."""
        if j in self.chosen[i] or j in self.heads[i]:
            return False
        head = _head(self.docs[i][j].text)
        if head is None or len(head) + _HEAD_COST > self.left:
            return False
        words = set(text_words(head))
        if words and len(words & self.seen) >= _NOVELTY * len(words):
            return False
        self.heads[i][j] = head
        self.left -= len(head) + _HEAD_COST
        self.seen |= words
        return True

    def take_list_heads(self) -> None:
        """For each chosen list item or cue line, the heads of its list's other items."""
        for i, doc in enumerate(self.docs):
            scanned: set[int] = set()  # each list once, however many of its items are chosen
            for j in sorted(self.chosen[i]):
                if j in scanned or not (_ITEM.match(doc[j].text) or _is_cue(doc[j].text)):
                    continue
                for step in (1, -1):
                    k = j + step
                    while 0 <= k < len(doc) and k not in scanned and _ITEM.match(doc[k].text):
                        scanned.add(k)
                        self.take_head(i, k)
                        k += step


def fit(
    contents: Sequence[str], terms: Sequence[str], budget: int, numbers: bool = False
) -> list[str]:
    """What to show of each text of a ranked list, within about ``budget`` characters in
    all (see the module docstring). ``budget`` <= 0 keeps every text whole. ``numbers``:
    the question asks for a quantity, and a digit counts as one of its words."""
    if budget <= 0 or sum(len(c) for c in contents) <= budget:
        return list(contents)
    patterns = word_patterns(terms) + ([_DIGIT] if numbers else [])
    rest = list(contents[_HEAD:])
    reserve = sum(min(len(c), _reserve(k)) for k, c in enumerate(rest))
    if not rest or budget - reserve < budget // 2:
        return _fit_list(contents, patterns, budget)
    head = _fit_list(contents[:_HEAD], patterns, budget - reserve)
    left = budget - sum(len(h) for h in head)
    if left >= sum(len(c) for c in rest):
        return head + rest
    tail = _fit_list(rest, patterns, max(left, 1))
    over = sum(len(t) for t in tail) - left  # forced best units may overrun what is left
    if over > 0:
        tail = [_clip(t, max(_reserve(k), len(t) - over)) for k, t in enumerate(tail)]
    return head + tail


def _reserve(k: int) -> int:
    return _TAIL_RESERVE[min(k, len(_TAIL_RESERVE) - 1)]


def _clip(text: str, limit: int) -> str:
    """``text`` cut at a word boundary to about ``limit`` characters, ``…`` marking the cut."""
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", limit // 2, limit)
    return text[: cut if cut > 0 else limit].rstrip() + " " + ELLIPSIS


def _fit_list(
    contents: Sequence[str], patterns: Sequence[re.Pattern[str]], budget: int
) -> list[str]:
    """`fit` for one list sharing one budget (see the module docstring, steps 1-5);
    ``patterns``: one per question word (`word_patterns`)."""
    if sum(len(c) for c in contents) <= budget:
        return list(contents)
    docs = [_units(c) for c in contents]
    units = [u for d in docs for u in d]
    matched = {id(u): [bool(p.search(u.text)) for p in patterns] for u in units}
    df = [sum(matched[id(u)][k] for u in units) for k in range(len(patterns))]
    weight = [1.0 / (1.0 + d / max(len(units), 1)) if d else 0.0 for d in df]
    scored: list[tuple[float, int, int]] = []
    for i, doc in enumerate(docs):
        for j, u in enumerate(doc):
            if len(u.text) >= _SHORT_UNIT:
                s = sum(w for w, m in zip(weight, matched[id(u)], strict=True) if m)
                if s > 0:
                    scored.append((s * _rank_weight(i), i, j))
    scored.sort(key=lambda c: (-c[0], c[1], c[2]))
    pick = _Picker(docs, budget)
    for i, content in enumerate(contents):  # short texts whole
        if len(content) <= WHOLE_CHARS:
            for j in range(len(docs[i])):
                pick.take(i, j, force=True)
    for _, i, j in scored:  # every result its best unit
        if not pick.chosen[i]:
            pick.take(i, j, force=True)
    for _, i, j in scored:  # the best units, each with what follows it
        if pick.take(i, j):
            follow = _FOLLOW_CUE if _is_cue(docs[i][j].text) else _FOLLOW
            for k in range(j + 1, j + 1 + follow):
                if not pick.take(i, k):
                    break
    pick.take_list_heads()
    grew = True
    while grew and pick.left > 0:  # widen around each chosen unit, result by result
        grew = False
        for i in range(len(docs)):
            for j in sorted(pick.chosen[i]):
                if pick.take(i, j + 1) or pick.take(i, j - 1):
                    grew = True
    for i, doc in enumerate(docs):  # a result nothing matched: its opening
        if doc and not pick.chosen[i]:
            pick.take(i, 0, force=True)
    out: list[str] = []
    for i, content in enumerate(contents):
        whole = len(content) <= WHOLE_CHARS or len(pick.chosen[i]) == len(docs[i])
        heads = pick.heads[i]
        out.append(content if whole else _join(docs[i], sorted(pick.chosen[i] | set(heads)), heads))
    return out


def excerpt(content: str, terms: Sequence[str], budget: int = 400) -> str:
    """One text's passage for ``terms`` within ``budget`` characters (`fit` of a list of one)."""
    return fit([content], terms, budget)[0]


def _join(units: list[_Unit], picked: list[int], heads: dict[int, str]) -> str:
    """The ``picked`` units in order, ``heads`` (by unit) in place of theirs, with ``…``
    where text was left out (once: a head already ends with one)."""
    out: list[str] = []
    prev: int | None = None
    for i in picked:
        u = units[i]
        if prev is None:
            if i > 0:
                out.append(ELLIPSIS + " ")
        elif i != prev + 1:
            out.append("\n" if prev in heads else f" {ELLIPSIS}\n")
        elif units[prev].line == u.line:
            out.append(" ")
        else:
            out.append("\n")
        out.append(f"{heads[i]} {ELLIPSIS}" if i in heads else u.text)
        prev = i
    if picked and picked[-1] < len(units) - 1 and picked[-1] not in heads:
        out.append(" " + ELLIPSIS)
    return "".join(out)
