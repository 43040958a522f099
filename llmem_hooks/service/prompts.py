"""What a prompt is about, for recall's floor on it (`operations`, step 1): its content
words (`prompt_words`), and whether it asks about us at all (`asks_general`).

Questions about general knowledge, not about this project:
"explain how postgres vacuum works", "what's the difference between a mutex and a
semaphore", "how does TOTP work under the hood": the person asks what any textbook says.
The store may well mention postgres, a mutex or TOTP, and recall would then put a
project memory that shares the word in front of a question it does not answer (measured:
the one off-topic block left on each of the three recall dev sets).

How it is asked tells, unless the prompt speaks of us (`_OURS`: "our", "we", "I", "this
repo"): "in general", "under the hood", "what's new in" say so outright
(`_SAYS_GENERAL`); "explain", "the difference between", "the best way to", "how does X
work" only when the prompt points at no particular thing (`_POINTS_AT`: "how does the
nightly backup job work" is about our job, "how does kafka rebalancing work" is not).
"""

from __future__ import annotations

import re

from ..text.query import is_stop_word, words

MAX_PROMPT_CHARS = 20_000  # longer prompts are read up to here
MAX_PROMPT_WORDS = 12  # the longest content words of a long prompt are searched
# Small talk: words that carry no topic of their own ("thanks, continue", "great work";
# bench/recall_floor.py's small-talk prompts).
FILLER_WORDS = frozenset(
    """
    continue thanks thank thx ty ok okay yes yeah yep yup no nope sure great good fine
    nice cool awesome perfect lgtm proceed go ahead carry hello hi hey please pls done
    right alright agreed correct exactly now then next again retry more keep going
    work job
    """.split()  # noqa: SIM905 - a word list reads better as text
)

_SAYS_GENERAL = re.compile(
    r"\b(?:in general|generally|under the hood|in theory|conceptually|eli5|what'?s new in)\b",
    re.IGNORECASE,
)
_ASKS_GENERAL = re.compile(
    r"\b(?:explain|difference between|best practices?|best way|how (?:does|do) (?:\S+ ){1,4}"
    r"work)\b",
    re.IGNORECASE,
)
# The cue's own "the" ("the difference between", "the best way") points at nothing.
_CUE_THE = re.compile(r"\bthe (?=difference between|best (?:way|practices?)\b)", re.IGNORECASE)
_OURS = re.compile(
    r"\b(?:our|ours|we|we're|we've|us|my|mine|i|i'm|i've|this (?:repo|project|codebase|"
    r"service|app|code))\b",
    re.IGNORECASE,
)
_POINTS_AT = re.compile(r"\b(?:the|this|that|these|those|its|their|here)\b", re.IGNORECASE)
_HEAD_CHARS = 300  # a long prompt is a task, judged by how it opens


def asks_general(prompt: str) -> bool:
    """Whether ``prompt`` asks for general knowledge rather than about the project."""
    head = prompt[:_HEAD_CHARS]
    if _OURS.search(head):
        return False
    if _SAYS_GENERAL.search(head):
        return True
    return bool(_ASKS_GENERAL.search(head)) and not _POINTS_AT.search(_CUE_THE.sub("", head))


def prompt_words(prompt: str) -> list[str]:
    """The prompt's content words for recall: no stop words, no small talk, no single
    letters; for a long prompt the `MAX_PROMPT_WORDS` longest, in prompt order."""
    seen = dict.fromkeys(
        w
        for w in words(prompt[:MAX_PROMPT_CHARS])
        if not is_stop_word(w) and w not in FILLER_WORDS and (len(w) > 1 or w.isdigit())
    )
    found = list(seen)
    if len(found) > MAX_PROMPT_WORDS:
        keep = set(sorted(found, key=len, reverse=True)[:MAX_PROMPT_WORDS])
        found = [w for w in found if w in keep]
    return found
