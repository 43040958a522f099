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

import functools
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
_ESCAPE = (
    r"(?i)&(?:amp;)*(?:(?P<lt>lt|#0*60|#x0*3c)|(?P<gt>gt|#0*62|#x0*3e)|(?P<sl>sol|#0*47|#x0*2f));?"
    r"|%(?:(?P<ult>3c)|(?P<ugt>3e)|(?P<usl>2f))"
    r"|\\(?:u00|x)(?:(?P<blt>3c)|(?P<bgt>3e)|(?P<bsl>2f))"
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
_TAG = rf"<[\s/]{{0,8}}(?:{_NAME})"
_TAG_END = 160  # how far a tag's ">" may follow its name


_SEGMENT = r"[\x00-\x7f]+|[^\x00-\x7f]"
# Patterns stay text: `re` compiles and caches them on first use, so importing this
# module (the Copilot hook does, on every prompt) compiles nothing.


@functools.cache
def _ascii_fold() -> dict[int, str]:
    return str.maketrans({chr(c): _FOLD.get(chr(c).lower(), chr(c).lower()) for c in range(128)})


def _fold(text: str) -> tuple[str, list[int], list[int]]:
    """``text`` as it reads (NFKC, casefolded, look-alikes and escapes folded, invisible
    characters dropped), with the start and end in ``text`` of each folded character."""
    out: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    for seg in re.finditer(_SEGMENT, text):
        a, run = seg.start(), seg.group()
        if run.isascii():
            pos = 0
            for esc in (
                re.finditer(_ESCAPE, run) if ("&" in run or "%" in run or "\\" in run) else ()
            ):
                if esc.start() > pos:
                    out.append(run[pos : esc.start()].translate(_ascii_fold()))
                    starts.extend(range(a + pos, a + esc.start()))
                    ends.extend(range(a + pos + 1, a + esc.start() + 1))
                out.append(_ESCAPED_AS.get(esc.lastgroup or "sl", "/"))
                starts.append(a + esc.start())
                ends.append(a + esc.end())
                pos = esc.end()
            out.append(run[pos:].translate(_ascii_fold()))
            starts.extend(range(a + pos, a + len(run)))
            ends.extend(range(a + pos + 1, a + len(run) + 1))
            continue
        if unicodedata.category(run) in ("Cf", "Mn", "Me", "Cc"):
            continue  # zero-width, joiners, combining marks: invisible between letters
        for c in unicodedata.normalize("NFKC", run).casefold():
            out.append(_FOLD.get(c, c))
            starts.append(a)
            ends.append(a + 1)
    return "".join(out), starts, ends


# Where a tag may start: a bracket, a look-alike of one, or the start of an escape. Only
# the text just after such a character is folded (most text holds few of them).
_START = "[<&%\\\\" + re.escape(_LT) + "\uff1c\ufe64\u226e\u2329\u3008]"
_NAME_WINDOW = 96  # raw characters after a start within which a tag's name must be
_NAME_LETTER = r"[mMnN]"  # every name we look for holds one (m, rn, nn)


def _tags(text: str) -> list[tuple[tuple[int, int], tuple[int, int] | None]]:
    """Each tag of ours (or look-alike) in ``text``: the span of its opening bracket and
    of its closing one (None when the tag is not closed). Only the text after a possible
    start is folded (each stretch once), so a long text with few brackets costs little."""
    regions: list[list[int]] = []
    for start in re.finditer(_START, text):
        p = start.start()
        head = text[p : p + _NAME_WINDOW]
        if head.isascii() and not re.search(_NAME_LETTER, head):
            continue
        stop = p + _NAME_WINDOW + _TAG_END
        if regions and p <= regions[-1][1]:
            regions[-1][1] = stop
        else:
            regions.append([p, stop])
    found: list[tuple[tuple[int, int], tuple[int, int] | None]] = []
    for a, b in regions:
        folded, starts, ends = _fold(text[a:b])
        for tag in re.finditer(_TAG, folded):
            end = tag.end()
            limit = min(len(folded), end + _TAG_END)
            while end < limit and folded[end] not in "<>\n":
                end += 1
            close = None
            if end < limit and folded[end] == ">":
                close = (a + starts[end], a + ends[end])
            found.append(((a + starts[tag.start()], a + ends[tag.start()]), close))
    return found


def find(text: str) -> list[tuple[int, int]]:
    """Where ``text`` holds one of our tags or a look-alike: ``(start, end)`` spans of
    ``text``, from its opening bracket to its closing one (or the end of its name)."""
    out = []
    for (start, _), close in _tags(text):
        out.append((start, close[1] if close else start + 1))
    return out


def neutralize(text: str) -> str:
    """``text`` with every tag of ours (and look-alike) defused: its opening bracket
    becomes ``[`` and its closing one ``]``; everything else is kept as it was."""
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


_STRUCTURE = r"\s*(?:#|```|~~~)"


def plain_line(text: str) -> str:
    """A line of someone else's text that stands alone in our markdown (the resume pack's
    goal): a leading ``#`` or code fence is escaped, so it cannot read as a heading or a
    fence of ours."""
    return "\\" + text.lstrip() if re.match(_STRUCTURE, text) else text


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
