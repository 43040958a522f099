"""Which of a question's words a text holds, and how close together.

`terms_held` answers "does this memory hold each word (or a synonym, inflections
counting)?" for recall's relevance and the known-words rule; `evidence_scorer` answers
"how much of the question does the best short stretch of this text hold?", the ranking's
second signal beside BM25 (docs/retrieval.md, *Ranking*): an exchange runs to thousands
of characters, and BM25 over the whole of it cannot tell a reply that answers the
question in one paragraph from one whose every paragraph shares a word with it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from ..text.query import ParsedQuery

# How far apart (characters) the question's words may be and still count as one stretch
# of evidence: two or three sentences, a short paragraph.
WINDOW_CHARS = 250
SHORT_WORD = 4  # words this short match whole (with an inflection), never as a prefix


def _owners(groups: list[set[str]], longer: set[str], key: str) -> list[int]:
    """The words (indexes into ``groups``) a matched text ``key`` (lower case) stands for:
    a long word's stem starts it; a short word is it, or it with an ending."""
    return [
        i
        for i, g in enumerate(groups)
        if any(
            key.startswith(p) if p in longer else re.fullmatch(re.escape(p) + _short_tail(p), key)
            for p in g
        )
    ]


def _short_tail(word: str) -> str:
    """The endings a short word takes ("pins", "pinned", "pinning", "fixes", "logged")."""
    c = re.escape(word[-1:])
    return rf"(?:s|es|ed|d|ing|er|{c}ed|{c}ing|{c}er)?(?!\w)"


# Plurals in -es whose singular is not the plural's start minus "s" ("crash" / "crashes").
_ES_PLURALS = ("shes", "ches", "xes", "sses", "zes")


def _stem(word: str) -> str:
    """A crude stem for counting matches: the first 4-6 letters (whole word if short), an
    adverb's of its adjective ("locally" holds "local", "manually" "manual"), a plural's
    in -es of its singular ("crashes" holds "crash")."""
    low = word.lower()
    adverb = len(word) >= 7 and low.endswith("ly")
    if adverb or (len(word) >= 5 and low.endswith(_ES_PLURALS)):
        word = word[:-2]
    return word if len(word) <= 4 else word[: max(4, min(6, len(word) - 1))]


def memory_text(mem: Mapping[str, Any]) -> str:
    """What of a memory a question's words are looked for in: content, summary, tags."""
    tags = " ".join(mem.get("tags") or ())
    return f"{mem.get('content', '')} {mem.get('summary') or ''} {tags}"


def word_patterns(terms: Sequence[str]) -> list[re.Pattern[str]]:
    """One pattern per question word (of 2+ letters), by `_stem_index`'s rule: a long
    word by its stem's start, a short one whole or with an ending ("web" is not
    "webhook"); words of one stem share the first one's pattern."""
    out: dict[str, re.Pattern[str]] = {}
    for t in terms:
        w = t.lower()
        if len(w) > 1 and _stem(w) not in out:
            tail = "" if len(w) > SHORT_WORD else _short_tail(w)
            out[_stem(w)] = re.compile(r"(?<!\w)" + re.escape(_stem(w)) + tail, re.IGNORECASE)
    return list(out.values())


def _matches(
    index: tuple[list[set[str]], re.Pattern[str], dict[str, list[int]], set[str]], text: str
) -> Iterator[tuple[int, list[int]]]:
    """Each match of an index's pattern in ``text``: its offset and the question words
    (indexes) it stands for (an ending or a case folding ``lower()`` does not undo is read
    off once and kept)."""
    groups, pattern, owners, longer = index
    for m in pattern.finditer(text):
        key = m.group(0).lower()
        hits = owners.get(key)
        if hits is None:
            hits = owners.setdefault(key, _owners(groups, longer, key))
        yield m.start(), hits


def terms_held(parsed: ParsedQuery) -> Callable[[Mapping[str, Any]], list[bool]]:
    """A function telling, for each of the question's words in order, whether a memory
    holds it (or a synonym; inflections count), so a caller can weigh the words.

    One pass over a memory's text for all the words (recall reads dozens of memories a
    prompt, episodes among them): one pattern of every word's stems, longest first, so at
    each word of the text it matches the longest stem that starts it; a question word is
    held when one of its stems starts a matched one (all of them start that text word)."""
    key = tuple((t, *parsed.alternatives.get(t, ())) for t in parsed.terms)
    groups, pattern, owners, longer = _stem_index(key)
    if pattern is None:
        return lambda mem: []
    index = (groups, pattern, owners, longer)
    n = len(groups)

    def held(mem: Mapping[str, Any]) -> list[bool]:
        found = [False] * n
        left = n
        for _, hits in _matches(index, memory_text(mem)):
            for i in hits:
                if not found[i]:
                    found[i] = True
                    left -= 1
            if not left:
                break
        return found

    return held


@functools.lru_cache(maxsize=1024)
def _stem_index(
    words: tuple[tuple[str, ...], ...],
) -> tuple[list[set[str]], re.Pattern[str] | None, dict[str, list[int]], set[str]]:
    """For `terms_held` (cached: the retriever's stages and recall ask for the same
    question's words several times): each word's stems, one pattern of them all (longest
    first, at the start of a word), and which words each stem stands for."""
    groups = [{_stem(a).lower() for a in alts} for alts in words]
    stems = sorted(set().union(*groups), key=lambda x: (-len(x), x)) if groups else []
    if not stems:
        return groups, None, {}, set()
    # A word of up to four letters is its own stem: it matches itself and its inflections,
    # not every word it starts ("web" is not "webhook", "led" not "ledger").
    longer = {_stem(a).lower() for alts in words for a in alts if len(a) > SHORT_WORD}
    owners = {s: _owners(groups, longer, s) for s in stems}
    pieces = [re.escape(s) + ("" if s in longer else _short_tail(s)) for s in stems]
    # The whole word is matched, so the words it stands for are read off all of it.
    pattern = re.compile(r"(?<!\w)(?:" + "|".join(pieces) + r")\w*", re.IGNORECASE)
    return groups, pattern, owners, longer


def evidence_scorer(
    parsed: ParsedQuery,
    weights: Sequence[float],
    width: int = WINDOW_CHARS,
    anywhere: Sequence[float] = (),
) -> Callable[[str], float]:
    """A function of a text giving the weighed share (0..1) of the question's words that
    its best stretch of ``width`` characters holds (``weights``: one per word of
    ``parsed.terms``, e.g. IDF). One regex pass per text, then a sliding window over the
    matches: linear in the matches, so dozens of episodes cost well under a millisecond.

    ``anywhere`` (one weight per word, or empty): words counted when the text holds them
    anywhere, not within the stretch. For common words: in a long reply they match every
    few words, each match a step of the window, while whether the text holds them at all
    is one search that stops at the first."""
    kept = [(t, x) for t, x in zip(parsed.terms, weights, strict=True) if x > 0]
    key = tuple((t, *parsed.alternatives.get(t, ())) for t, _ in kept)
    groups, pattern, owners, longer = _stem_index(key)
    present = [
        (x, _stem_index(((t, *parsed.alternatives.get(t, ())),))[1])
        for t, x in zip(parsed.terms, anywhere, strict=False)
        if x > 0
    ]
    total = sum(x for _, x in kept) + sum(x for x, _ in present)
    if total <= 0 or (pattern is None and not present):
        return lambda text: 0.0
    w = [x for _, x in kept]

    def score(text: str) -> float:
        also = sum(x for x, p in present if p is not None and p.search(text))
        if pattern is None:
            return min(1.0, also / total)
        found = [(pos, hits) for pos, hits in _matches((groups, pattern, owners, longer), text)
                 if hits]  # fmt: skip
        counts = [0] * len(w)
        held = best = 0.0
        left = 0
        for pos, hits in found:
            for i in hits:
                if counts[i] == 0:
                    held += w[i]
                counts[i] += 1
            while pos - found[left][0] > width:
                for i in found[left][1]:
                    counts[i] -= 1
                    if counts[i] == 0:
                        held -= w[i]
                left += 1
            best = max(best, held)
        return min(1.0, (best + also) / total)

    return score
