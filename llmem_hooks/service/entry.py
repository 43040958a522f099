"""One memory's text as a line of an answer (recall blocks, search and timeline lines,
file recall): on one line, cut to a limit, our markers defused."""

from __future__ import annotations

from collections.abc import Sequence

from ..markers import neutralize
from ..search.passages import excerpt
from ..text.lines import clip_at_word, flatten


def clip_text(text: str, prompt_words: Sequence[str], limit: int) -> str:
    """One entry's text on one line, at most ``limit`` characters, anything imitating our
    markers defused (`markers.neutralize`: the line goes between them). The one place
    where long texts (episodes) are cut: to the lines that hold the prompt's words
    (`passages.excerpt`), else to the opening."""
    return neutralize(_clip(neutralize(text), prompt_words, limit))


def _clip(text: str, prompt_words: Sequence[str], limit: int) -> str:
    flat = flatten(text)
    if len(flat) <= limit:
        return flat
    if prompt_words:
        flat = flatten(excerpt(text, prompt_words, limit))
        if len(flat) <= limit:
            return flat
    return clip_at_word(flat, limit, "…")
