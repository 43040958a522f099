"""Text on one line: whitespace collapsed, cut to a length with a mark. One place for what
summaries, tool results, adapters' tool lines and reports each used to spell (three of
them as ``one_line``, each cutting a little differently).

Two cuts of a flattened text, named for what they do: `clip` cuts at exactly ``limit``
characters (mark included), `clip_at_word` at the last word boundary before it, dropping
a dangling ``,;:``. `cap` cuts like `clip` but keeps the lines (episodes, the viewer's
panels). The mark is "..." or "…", as each caller always showed. `pieces` cuts a long
line into several at word boundaries, marking nothing (passages, an episode's parts).
"""

from __future__ import annotations

from collections.abc import Iterator


def flatten(text: str) -> str:
    """``text`` on one line: every run of whitespace (newlines too) one space, no ends."""
    return " ".join(text.split())


def clip(text: str, limit: int, mark: str = "...") -> str:
    """``text`` flattened; longer than ``limit``: cut so that with ``mark`` it is ``limit``
    characters long (spaces before the mark dropped)."""
    flat = flatten(text)
    if len(flat) <= limit:
        return flat
    return flat[: limit - len(mark)].rstrip() + mark


def clip_at_word(text: str, limit: int, mark: str = "...") -> str:
    """``text`` flattened; longer than ``limit``: cut at a word boundary to at most
    ``limit`` characters with ``mark`` (a single word longer than that is cut inside)."""
    flat = flatten(text)
    if len(flat) <= limit:
        return flat
    room = limit - len(mark)
    cut = flat[:room].rsplit(" ", 1)[0] or flat[:room]
    return cut.rstrip(" ,;:") + mark


def cap(text: str, limit: int, mark: str = "…") -> str:
    """``text`` as it is (lines kept) if at most ``limit`` characters, else cut so that with
    ``mark`` it is ``limit`` long (whitespace before the mark dropped)."""
    return text if len(text) <= limit else text[: limit - len(mark)].rstrip() + mark


def pieces(text: str, limit: int) -> Iterator[str]:
    """``text`` cut at word boundaries (the last space in the second half of ``limit``)
    into pieces of at most ``limit`` characters, a word longer than that cut inside; the
    whitespace at a cut dropped. A text that short, whole. Linear: the rest is never
    copied, so a 5 MB line costs one pass."""
    start, end, limit = 0, len(text), max(1, limit)
    while end - start > limit:
        cut = text.rfind(" ", start + limit // 2, start + limit + 1)
        if cut < 0:
            cut = start + limit
        yield text[start:cut].rstrip()
        start = cut
        while start < end and text[start].isspace():
            start += 1
    if start < end:
        yield text[start:]
