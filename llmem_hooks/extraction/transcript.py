"""Reading transcripts: which lines of a message were spoken, and their sentences.

Transcript text comes as ``User: ...`` / ``Assistant: ...`` lines with ``Reasoning:``,
``Tool: <name>`` and ``Patch`` blocks (see `llmem_hooks.events.Message`); only spoken
lines are mined for memories, never tool output, reasoning, patches or code fences.

Our own recall blocks (``<llmem-recall>`` ... ``</llmem-recall>``, put into prompts by
the query service) are cut out here, with private spans, before anything reads a line:
extraction, episodes and the resume pack all go through `transcript_lines`, so what we
injected is never learned back (a feedback loop that would grow every turn).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from ..events import Message
from ..redact import strip_private

RECALL_OPEN = "<llmem-recall>"
RECALL_CLOSE = "</llmem-recall>"
_RECALL_TAG = re.compile(r"</?llmem-recall>", re.I)

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
    """``text`` without our recall blocks. An unclosed block drops the rest of the text and
    a stray closing tag everything before it (a clipped block must not leak back in)."""
    if "llmem-recall" not in text.lower():
        return text
    kept: list[str] = []
    pos = 0
    inside = False
    for tag in _RECALL_TAG.finditer(text):
        closing = tag.group(0).startswith("</")
        if not closing and not inside:
            kept.append(text[pos : tag.start()])
            inside = True
        elif closing and inside:
            inside = False
            pos = tag.end()
        elif closing:
            kept, pos = [], tag.end()
    if not inside:
        kept.append(text[pos:])
    return "".join(kept)


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
