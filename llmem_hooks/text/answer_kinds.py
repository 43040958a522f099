"""Whether a text says the kind of thing a question asks for: a time, a number.

"When did Kofi fly out?" and "How many hives does Lucien keep?" share their words with
many turns of a long chat; the turn that answers says a time ("the 12th of December",
"last weekend") or a number ("two hives, soon four"). `Retriever.find` adds a little to
such a result (`retriever.ANSWER_KIND_BOOST`) when the question asks for that kind
(`ParsedQuery.asks_when`, `ParsedQuery.asks_quantity`). Set lookups over the lower-cased
words, no alternation scan: a 6,000-character exchange is read in ~70 µs.
"""

from __future__ import annotations

import re
import string

_DIGIT = re.compile(r"\d")
_PUNCTUATION = str.maketrans({c: " " for c in string.punctuation + "’‘“”…—–"})
TIME_WORDS = frozenset(
    """january february march april may june july august september october november
    december monday tuesday wednesday thursday friday saturday sunday yesterday today
    tonight tomorrow weekend ago""".split()  # noqa: SIM905 - a word list reads better as text
)
# "one" is left out: "the one with the blue door" says no number.
NUMBER_WORDS = frozenset(
    """two three four five six seven eight nine ten eleven twelve thirteen fourteen
    fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy
    eighty ninety hundred thousand million billion dozen half twice double""".split()  # noqa: SIM905
)


def _words(text: str) -> list[str]:
    return text.lower().translate(_PUNCTUATION).split()


def says_time(text: str) -> bool:
    """A digit, a month or weekday, or yesterday/tonight/last weekend's kind of word."""
    return bool(_DIGIT.search(text)) or not TIME_WORDS.isdisjoint(_words(text))


def says_number(text: str) -> bool:
    """A digit or a number word ("two", "a dozen", "half")."""
    return bool(_DIGIT.search(text)) or not NUMBER_WORDS.isdisjoint(_words(text))
