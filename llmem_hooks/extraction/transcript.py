"""Reading transcripts: which lines of a message were spoken, and their sentences.

Transcript text comes as ``User: ...`` / ``Assistant: ...`` lines with ``Reasoning:``,
``Tool: <name>`` and ``Patch`` blocks (see `llmem_hooks.events.Message`); only spoken
lines are mined for memories, never tool output, reasoning, patches or code fences.

Our own recall blocks (``<llmem-recall>`` ... ``</llmem-recall>``, put into prompts by
the query service; their shape: `markers`) are cut out here, with private spans, before
anything reads a line: extraction, episodes and the resume pack all go through
`transcript_lines`, so what we injected is never learned back (a feedback loop that
would grow every turn).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from ..events import Message
from ..markers import RECALL_CLOSE, RECALL_HEADER, RECALL_OPEN
from ..redact import strip_private

# One line of a block as we emit it: the header, or ``- [<short id>] (<type>, <date>) text``
# (memory text is flattened to one line and neutralized, `service.QueryService._render`).
_BLOCK_LINE = rf"(?:{re.escape(RECALL_HEADER)}[^\n]*|- \[[^\]\n]{{1,64}}\][^\n]*)"
# A whole block: our exact opening line, only lines of ours, our exact closing line at
# the start of a line (a clipped block: the text ends inside it). Nothing else matches.
_RECALL_BLOCK = re.compile(
    rf"{re.escape(RECALL_OPEN)}\r?\n(?:{_BLOCK_LINE}\r?\n)*?"
    rf"(?:{re.escape(RECALL_CLOSE)}|(?:{_BLOCK_LINE}|- \[[^\n]*)?\Z)"
)

LineKind = Literal["speech", "code", "tool", "reasoning", "patch", "error"]


@dataclass(frozen=True)
class TranscriptLine:
    """One line of a message, with the kind of block it belongs to."""

    kind: LineKind
    text: str


_SPEAKER = re.compile(r"^(?:User|Assistant):[ \t]?(.*)$")
_MARKERS: tuple[tuple[LineKind, re.Pattern[str]], ...] = (
    ("reasoning", re.compile(r"^Reasoning:")),
    ("tool", re.compile(r"^Tool:")),
    ("patch", re.compile(r"^Patch(?:\s*$|:)")),
    ("error", re.compile(r"^Error:")),  # a failed model call; only right after a speaker
)


def strip_injected(text: str) -> str:
    """``text`` without our recall blocks: only blocks exactly as we emit them (see
    `_RECALL_BLOCK`). A marker in the user's own words, a stray closing tag or a block
    that does not have our shape is kept as it is: stripping never drops user text."""
    if RECALL_OPEN not in text:
        return text
    return _RECALL_BLOCK.sub("", text)


def _marker(text: str, *, after_speaker: bool) -> LineKind | None:
    for kind, pattern in _MARKERS:
        if pattern.match(text) and (after_speaker or kind != "error"):
            return kind
    return None


def transcript_lines(message: Message) -> list[TranscriptLine]:
    """The message's lines (private spans and our recall blocks removed, speaker prefixes
    dropped), each tagged speech / code / tool / reasoning / patch / error.

    A block marker may follow the speaker (OpenCode: ``Assistant: Tool: bash: make lint
    [error]``) or start a line of its own; unprefixed lines continue the block above them,
    and a message without any prefix is all speech.
    """
    out: list[TranscriptLine] = []
    kind: LineKind = "speech"
    for raw in strip_injected(strip_private(message.text)).splitlines():
        speaker = _SPEAKER.match(raw)
        if speaker:
            raw = speaker.group(1)
            kind = _marker(raw, after_speaker=True) or "speech"
        else:
            kind = _marker(raw, after_speaker=False) or kind
        if kind in ("speech", "code") and raw.lstrip().startswith("```"):
            kind = "code" if kind == "speech" else "speech"
            continue
        out.append(TranscriptLine(kind, raw))
    return out


def speech_lines(message: Message) -> list[str]:
    """The spoken lines of a message, without prefixes, tool output or code blocks."""
    return [line.text for line in transcript_lines(message) if line.kind == "speech"]


_ABBREVIATIONS = ("e.g.", "i.e.", "etc.", "vs.", "cf.", "approx.", "incl.", "no.")
_SENTENCE_END = re.compile(r"[.!?]+[\"')\]]*\s+")


def split_sentences(line: str) -> list[str]:
    """Sentences of one line; a period after a common abbreviation does not end one."""
    out: list[str] = []
    start = 0
    for m in _SENTENCE_END.finditer(line):
        head = line[start : m.end()].rstrip()
        if head.lower().endswith(_ABBREVIATIONS):
            continue
        out.append(head)
        start = m.end()
    tail = line[start:].strip()
    if tail:
        out.append(tail)
    return [s.strip() for s in out if s.strip()]
