"""What a question's hyphenated words ("feature-flag", "testing-related") may have been
said as.

FTS5 reads a hyphenated word as a phrase of its parts. Said in a question it is often not
said so in the talk: "testing-related" by nobody at all, "feature-flag" as "the Unleash
flags" and `FEATURE_PRICE_BOOST` in the exchange that answers. Two rules, by how the
store holds the word:

* held by no memory as written: it stands for its parts (any of them), or the question
  would lose its most telling word;
* held as written, but its parts held apart, in one memory, at least `APART_RATIO` times
  as often: the parts together in one memory count as the word, in the search for
  memories holding *any* of the question's words. Only while that co-occurrence is rare
  (in `APART_SHARE` of the memories at most, and `APART_MAX`): "build-time" split into
  "build" and "time" is a quarter of a technical store and says nothing. A name written
  one way ("ecommerce-api") is held apart no more often than together: a phrase.

Measured (issue 23, stop 42, in process): the technical conversations' dev half, each
alone @5 0.824 -> 0.831, eight in one store 0.758 -> 0.763; held out, eight in one store
0.771 -> 0.775, each alone unchanged; chats and DevMemBench unchanged.
"""

from __future__ import annotations

from collections.abc import Callable

from ..text.query import ParsedQuery, quote

APART_RATIO = 2.0
APART_SHARE = 0.2
# ... and at most this many: counting an AND of two common words in a store of 100k
# memories up to a fifth of them took 2-3 ms a word (a prompt pays it too); up to this, 0.3
APART_MAX = 500
_MIN_PART = 3  # shorter parts ("e2e"'s "e", "re-run"'s "re") are no words of their own


def widen_compounds(parsed: ParsedQuery, count: Callable[[str, int], int], size: int) -> None:
    """Set ``parsed``'s alternatives (a word held by no memory) and its ``apart`` parts (see
    the module docstring) for its hyphenated words. ``count(match, cap)``: how many
    memories match an FTS5 expression, or more than ``cap``; ``size``: about how many
    memories there are."""
    cap = min(int(APART_SHARE * size), APART_MAX)
    for term in parsed.terms:
        if "-" not in term or parsed.alternatives.get(term):
            continue
        parts = [p for p in dict.fromkeys(term.split("-")) if len(p) >= _MIN_PART]
        if not parts:
            continue
        whole = count(quote(term), int(cap / APART_RATIO))
        if whole == 0:
            parsed.alternatives[term] = parts
        elif len(parts) > 1 and APART_RATIO * whole <= cap:
            apart = count(" AND ".join(quote(p) for p in parts), cap)
            if APART_RATIO * whole <= apart <= cap:
                parsed.apart[term] = parts
