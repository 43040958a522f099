"""What a session is talking about, for recall's follow-ups.

"and staging?", "now the browser ones", "where do its results get posted?": a follow-up
names only what changed and points back at the rest ("it", "that", "the ... one"). Read
alone its words find the wrong memories (any staging memory), so recall reads it with the
topic before it (`SessionTopics`: the words of the last prompt, and of the prompts it
followed up, up to recall's word limit): "staging" + "deploy webapp production", and a
hit must hold what the follow-up names.
Kept in the warm service's memory only (a bounded map, no store writes): a client
without the sidecar reads each prompt on its own, as before.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Sequence

MAX_SESSIONS = 2000  # sessions whose last topic is kept (least recently used go first)
FOLLOW_UP_MAX_WORDS = 3  # a prompt with more content words stands on its own
# A prompt that opens by continuing ("and ...", "what about ...", "now ...") ...
_CONTINUES = re.compile(
    r"^\W*(?:and|or|also|now|then|plus|but|same|what about|how about|ok(?:ay)? now|"
    r"ok(?:ay)? and|what of)\b",
    re.IGNORECASE,
)
# ... or points back at something said before.
_POINTS_BACK = re.compile(
    r"\b(?:it|its|it's|that|this|those|these|them|they|their|there|one|ones|same|again|"
    r"instead|too|either)\b",
    re.IGNORECASE,
)


def refers_back(prompt: str, terms: Sequence[str]) -> bool:
    """Whether ``prompt`` (its content words: ``terms``) reads as a follow-up: few content
    words, and it opens by continuing or points back (or names one thing alone)."""
    if len(terms) > FOLLOW_UP_MAX_WORDS:
        return False
    head = prompt[:300]
    return len(terms) <= 1 or bool(_CONTINUES.search(head) or _POINTS_BACK.search(head))


class SessionTopics:
    """The content words of each session's last prompt with a topic (thread-safe)."""

    def __init__(self, max_sessions: int = MAX_SESSIONS) -> None:
        self._max = max_sessions
        self._lock = threading.Lock()
        self._topics: OrderedDict[str, tuple[str, ...]] = OrderedDict()

    def last(self, session_id: str) -> tuple[str, ...]:
        with self._lock:
            return self._topics.get(session_id, ())

    def note(self, session_id: str, terms: Sequence[str]) -> None:
        if not terms:
            return  # small talk keeps the topic
        with self._lock:
            self._topics[session_id] = tuple(terms)
            self._topics.move_to_end(session_id)
            while len(self._topics) > self._max:
                self._topics.popitem(last=False)
