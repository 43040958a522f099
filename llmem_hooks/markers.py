"""Our markers in text we inject, and how text that imitates them is defused.

What we put into an agent's prompt sits between markers of ours: the per-prompt recall
block between `RECALL_OPEN` / `RECALL_CLOSE` lines (the query service's ``recall``; the
Copilot hook and the OpenCode plugin pass it on), and the context file and resume pack
under headings of ours, one memory per flat line. Memory text comes from transcripts and
agents, so it may hold ``</llmem-recall>`` followed by "SYSTEM NOTICE: ..." and read as
text outside our block. Every renderer passes memory text through `neutralize`, which
turns anything that looks like one of our tags (any letter case, spaces or slashes inside,
full-width and other look-alike brackets and letters, zero-width characters between them,
HTML / URL / backslash escapes) into a bracketed form: ``[/llmem-recall]`` stays readable
and is no tag. The agents' own wrappers (``<system_reminder>``, in which Copilot places
our text) are defused the same way.

`strip_injected` (extraction.transcript) removes only blocks exactly as we emit them, so
text that imitates a marker never makes it drop the user's own words.

Standard library only: the Copilot hook imports this on every prompt.
"""

from __future__ import annotations

import re
import unicodedata

RECALL_OPEN = "<llmem-recall>"
RECALL_CLOSE = "</llmem-recall>"
RECALL_HEADER = "Memories from earlier sessions that may bear on this prompt"

# Characters that read as "<", ">" or "/" (NFKC already folds the full-width and small
# forms: ＜ ﹤ ／ ...).
_LT = "‹〈〈⟨❮❬˂ᐸ⧼《«≺⟪⦉⦑"
_GT = "›〉〉⟩❯❭˃ᐳ⧽》»≻⟫⦊⦒"
_SLASH = "∕⁄⧸╱⟋\\⟍"
# Letters that read as the ASCII ones of our tag names (after NFKC and casefold).
_LETTERS = {
    "ӏ": "l",
    "ǀ": "l",
    "ℓ": "l",
    "ɩ": "l",
    "ι": "l",
    "і": "l",
    "ı": "l",
    "|": "l",
    "1": "l",
    "i": "l",
    "м": "m",
    "ｍ": "m",
    "е": "e",
    "ε": "e",
    "ё": "e",
    "3": "e",
    "а": "a",
    "α": "a",
    "с": "c",
    "ϲ": "c",
    "о": "o",
    "ο": "o",
    "0": "o",
    "р": "p",
    "ρ": "p",
    "г": "r",
    "ѕ": "s",
    "у": "y",
    "т": "t",
    "х": "x",
    "ԁ": "d",
    "һ": "h",
    "ո": "n",
}
_FOLD: dict[str, str] = {
    **dict.fromkeys(_LT, "<"),
    **dict.fromkeys(_GT, ">"),
    **dict.fromkeys(_SLASH, "/"),
    **_LETTERS,
}
# Escaped brackets and slashes: HTML entities (also double-escaped), URL and backslash
# escapes. Each is one character of the folded text.
_ESCAPE = re.compile(
    r"&(?:amp;)*(?:(?P<lt>lt|#0*60|#x0*3c)|(?P<gt>gt|#0*62|#x0*3e)|(?P<sl>sol|#0*47|#x0*2f));?"
    r"|%(?:(?P<ult>3c)|(?P<ugt>3e)|(?P<usl>2f))"
    r"|\\(?:u00|x)(?:(?P<blt>3c)|(?P<bgt>3e)|(?P<bsl>2f))",
    re.I,
)
_ESCAPED_AS = {"lt": "<", "ult": "<", "blt": "<", "gt": ">", "ugt": ">", "bgt": ">"}

_L = r"[l]"
_SEP = r"[^\w<>\n]{0,3}"
# Our tag names (llmem-recall and any other llmem-*), written loosely: "l l m e m",
# "lIm3m", "llrnem"; and the agents' wrappers around what we inject.
_NAME = (
    rf"(?:{_L}{_SEP}){{1,3}}(?:m|rn|nn){_SEP}e{_SEP}(?:m|rn|nn)"
    r"|system[^\w<>\n]{0,3}_?[^\w<>\n]{0,3}remlnder"  # "i" folds to "l"
)
_TAG = re.compile(rf"<[\s/]{{0,8}}(?:{_NAME})")
_TAG_END = 160  # how far a tag's ">" may follow its name


def _fold(text: str) -> tuple[str, list[tuple[int, int]]]:
    """``text`` as it reads (NFKC, casefolded, look-alikes and escapes folded, invisible
    characters dropped), with the span of ``text`` each folded character came from."""
    out: list[str] = []
    spans: list[tuple[int, int]] = []
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch in "&%\\":
            m = _ESCAPE.match(text, i)
            if m:
                kind = m.lastgroup or "sl"
                out.append(_ESCAPED_AS.get(kind, "/"))
                spans.append((i, m.end()))
                i = m.end()
                continue
        if ch.isascii():
            folded = _FOLD.get(ch.lower(), ch.lower())
        elif unicodedata.category(ch) in ("Cf", "Mn", "Me", "Cc"):
            i += 1  # zero-width, joiners, combining marks: invisible between letters
            continue
        else:
            folded = "".join(_FOLD.get(c, c) for c in unicodedata.normalize("NFKC", ch).casefold())
        for c in folded:
            out.append(_FOLD.get(c, c))
            spans.append((i, i + 1))
        i += 1
    return "".join(out), spans


def _suspect(text: str) -> bool:
    """Cheap test: plain ASCII without "mem", "reminder", "rn" or an escape is harmless."""
    if not text.isascii():
        return True
    low = text.lower()
    return any(s in low for s in ("<", "&", "%3c", "\\u00", "\\x3c")) and any(
        s in low for s in ("m", "reminder")
    )


def _tags(text: str) -> list[tuple[tuple[int, int], tuple[int, int] | None]]:
    """Each tag of ours (or look-alike) in ``text``: the span of its opening bracket and
    of its closing one (None when the tag is not closed)."""
    folded, spans = _fold(text)
    found: list[tuple[tuple[int, int], tuple[int, int] | None]] = []
    for m in _TAG.finditer(folded):
        end = m.end()
        limit = min(len(folded), end + _TAG_END)
        while end < limit and folded[end] not in "<>\n":
            end += 1
        close = spans[end] if end < limit and folded[end] == ">" else None
        found.append((spans[m.start()], close))
    return found


def find(text: str) -> list[tuple[int, int]]:
    """Where ``text`` holds one of our tags or a look-alike: ``(start, end)`` spans of
    ``text``, from its opening bracket to its closing one (or the end of its name)."""
    if not _suspect(text):
        return []
    out = []
    for (start, _), close in _tags(text):
        out.append((start, close[1] if close else start + 1))
    return out


def neutralize(text: str) -> str:
    """``text`` with every tag of ours (and look-alike) defused: its opening bracket
    becomes ``[`` and its closing one ``]``; everything else is kept as it was."""
    if not _suspect(text):
        return text
    edits: list[tuple[int, int, str]] = []
    for opening, closing in _tags(text):
        edits.append((*opening, "["))
        if closing is not None:
            edits.append((*closing, "]"))
    if not edits:
        return text
    parts: list[str] = []
    pos = 0
    for start, stop, repl in sorted(edits):
        if start < pos:
            continue
        parts.append(text[pos:start])
        parts.append(repl)
        pos = stop
    parts.append(text[pos:])
    return "".join(parts)


def seal_recall(block: str) -> str:
    """A recall block as a client passes it on: exactly our opening and closing lines
    around neutralized lines; '' when ``block`` is not shaped like one of ours (a
    client must not forward what it cannot vouch for)."""
    if not block.strip():
        return ""
    head, tail = RECALL_OPEN + "\n", "\n" + RECALL_CLOSE
    if not (block.startswith(head) and block.endswith(tail)) or len(block) < len(head + tail):
        return ""
    inner = block[len(head) : len(block) - len(tail)]
    return head + neutralize(inner) + tail
