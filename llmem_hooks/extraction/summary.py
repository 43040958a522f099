"""Session summaries and the plain-text self-assessment: what the session-end hook
writes when no model is asked (or as the ``event`` memory of every session).

Counts and listings only, never a judgement: private spans and credentials are removed
before anything is quoted (`safe_text`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from ..events import Message
from ..redact import redact_transcript, strip_private
from ..text.lines import clip_at_word
from .candidates import normalize_key, word_set
from .transcript import speech_lines, transcript_lines

_SMALL_TALK = word_set(
    "hi hello hey thanks thank you ok okay yes no continue go on go ahead proceed sure "
    "yep nope cool great"
)
SUMMARY_MAX_CHARS = 600
_ERROR_LINE = re.compile(r"(?i)\berror|\bfailed\b|\bfailure\b|\btraceback\b")
_NO_ERROR_LINE = re.compile(r"(?i)\b(?:0|no|zero) (?:errors?|failed|failures)\b")


def safe_text(text: str) -> str:
    """Private spans gone, credentials and key blocks redacted (never refused)."""
    return redact_transcript(strip_private(text))


def session_goal(messages: Sequence[Message], limit: int = 500) -> str:
    """The first real user request: the first user message that is not small talk or a
    bare slash command, on one line."""
    for message in messages:
        if message.role != "user":
            continue
        text = safe_text("\n".join(speech_lines(message)))
        words = normalize_key(text)
        if not words or words in _SMALL_TALK or re.fullmatch(r"/\S+", text.strip()):
            continue
        if all(w in _SMALL_TALK for w in words.split()):
            continue
        return clip_at_word(text, limit)
    return ""


def unique_recent(items: Iterable[str], limit: int) -> list[str]:
    """Distinct items in order of their last occurrence, the last ``limit`` of them."""
    order: dict[str, None] = {}
    for item in items:
        item = item.strip()
        if item:
            order.pop(item, None)
            order[item] = None
    return list(order)[-limit:] if limit > 0 else []


def _files(messages: Sequence[Message]) -> list[str]:
    return [f for f in (safe_text(f) for m in messages for f in m.files) if f.strip()]


def _commands(messages: Sequence[Message]) -> list[str]:
    return [c for c in (safe_text(c) for m in messages for c in m.commands) if c.strip()]


def _listing(items: Sequence[str], shown: int) -> str:
    head = ", ".join(clip_at_word(i, 80) for i in items[:shown])
    more = len(items) - shown
    return f"{head} (+{more} more)" if more > 0 else head


def _count(n: int, singular: str, plural: str | None = None) -> str:
    return f"{n} {singular if n == 1 else plural or singular + 's'}"


def summarize_session(messages: Sequence[Message], *, goal: bool = True) -> str:
    """A short plain-text summary of the session for its ``event`` memory: the goal
    (unless ``goal`` is False: the stored episodes already quote it), how many turns,
    which files and commands. At most 600 characters."""
    users = sum(1 for m in messages if m.role == "user")
    replies = len(messages) - users
    files = unique_recent(_files(messages), 1000)
    commands = unique_recent(_commands(messages), 1000)
    turns = _count(users, "user turn") + ", "
    turns += _count(replies, "assistant reply", "assistant replies")
    if goal:
        asked = session_goal(messages, limit=200) or "unknown"
        parts = [f"Session summary. Goal: {asked.rstrip('.!')}", turns]
    else:
        parts = [f"Session summary: {turns}"]
    if files:
        parts.append(f"{_count(len(files), 'file')} touched: {_listing(files, 5)}")
    if commands:
        parts.append(f"{_count(len(commands), 'command')} run: {_listing(commands, 3)}")
    return clip_at_word(". ".join(parts) + ".", SUMMARY_MAX_CHARS)


def _is_error(line: str) -> bool:
    return bool(_ERROR_LINE.search(line)) and not _NO_ERROR_LINE.search(line)


def _tool_calls(message: Message) -> list[bool]:
    """For each tool call of the message, in order, whether it failed: its line says
    ``[error]`` (OpenCode) or its printed output has an error line. A failed model call
    (``Error: ...``) counts as one more failure."""
    calls: list[bool] = []
    for line in transcript_lines(message):
        if line.kind == "error" and line.text.startswith("Error:"):
            calls.append(True)
        elif line.kind == "tool" and line.text.startswith("Tool:"):
            calls.append(line.text.rstrip().endswith("[error]"))
        elif line.kind == "tool" and calls and _is_error(line.text):
            calls[-1] = True
    return calls


def self_assessment(messages: Sequence[Message]) -> str:
    """The degraded (no model) ``self_assessment`` text: counts only, no judgement.

    Tool errors are failed tool calls (and failed model calls) as the transcript shows
    them. "completed" only means the agent had the last word and its last tool call did
    not fail, not that the goal was met; anything else is "unclear".
    """
    if not messages:
        return ""
    turns = sum(1 for m in messages if m.role == "user")
    errors = sum(sum(_tool_calls(m)) for m in messages)
    files = unique_recent(_files(messages), 1000)
    last = messages[-1]
    done = last.role == "assistant" and not (_tool_calls(last) or [False])[-1]
    text = (
        f"Session self-assessment (heuristic): {_count(turns, 'turn')}, "
        f"{_count(errors, 'tool error')} seen, "
        f"files touched: {_listing(files, 5) if files else 'none'}, "
        f"outcome: {'completed' if done else 'unclear'}."
    )
    return clip_at_word(text, SUMMARY_MAX_CHARS)
