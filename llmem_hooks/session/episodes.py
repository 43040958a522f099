"""Episodes: each exchange of a session (a user message and the reply) as one memory.

An exchange becomes a ``conversation`` memory whose content is what was said (text only;
each tool call one line: the command or file, and ``failed`` when it failed); a longer one
keeps its two ends (`keep_ends`), and what lies between becomes parts of the same size
(`middle_parts`), so nothing said is lost and no row is longer than another. Reasoning,
patches and tool output are never kept, ``<private>`` spans are dropped and the context
blocks llmem-hooks itself injects are stripped. Credentials and private key blocks are
redacted before anything is cut (`redact_transcript`), and the store redacts again.

Besides its own text, an episode is indexed (``metadata.fts_context``, the low-weight FTS5
column of migration 10) by the words of the exchange before it, by its time as words
(ISO date, weekday, month name, and the dates that relative expressions in its text
("yesterday", "last week", "3 days ago") meant when it was said) and by the words inside
its camelCase identifiers (`text.words.identifier_parts`). An exchange that answers the
question the one before it ended on starts with that question (`question_asked`): the
answer is the next user message, and alone it rarely holds the question's words. See
docs/episodes.md.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from ..events import Message
from ..extraction.heuristics import HeuristicExtractor
from ..extraction.smalltalk import has_substance
from ..extraction.transcript import transcript_lines
from ..redact import redact_transcript
from ..store.records import MAX_LIST_ITEMS
from ..text.lines import cap, pieces
from ..text.words import identifier_parts

# An episode's own text, at most. Longer: its first 4,000 characters (the whole cut before
# 2026-11-27) and its last 2,000 (`keep_ends`): the end of an exchange is the reply's
# conclusion, or what an agent says it did after hundreds of tool calls. Not more: search
# reads what is stored, and on a store where a third of the exchanges are long a find took
# p50 5.2 ms at 4,000, 6.4 at 6,000, 7.8 at 9,000 (docs/episodes.md).
CONTENT_CHARS = 6000
HEAD_SHARE = 2 / 3
CONTEXT_CHARS = 600  # the previous exchange's words kept as context
NEXT_CHARS = 300  # ... and the next one's opening (a follow-up names what the answer did)
ASKED_CHARS = 200  # the question an exchange answers, carried over from the one before it
# What `keep_ends` leaves out of a longer exchange is stored too, as parts of at most
# CONTENT_CHARS each (`middle_parts`), at most this many: a step an agent explained halfway
# through a long turn stays findable, and no stored text is longer than any other episode.
MAX_PARTS = 10
PART_LEAD_CHARS = 200  # the user's message each part opens with (what the exchange was about)
_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+")
TOOL_LINE_CHARS = 160
# The context blocks we inject as markdown (a header, to the end of the message). The
# per-prompt recall block (<llmem-recall> ... </llmem-recall>) is cut out earlier, by
# `transcript_lines`, for episodes and extraction alike.
INJECTED_HEADERS = (
    "# Memory from earlier sessions (llmem-hooks)",
    "# Resume pack",
)
_TOOL = re.compile(
    r"^Tool:\s*(?P<name>[^:\[]+?)\s*(?::\s*(?P<what>.*?))?\s*(?P<err>\[error\])?\s*$"
)
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_RELATIVE = re.compile(
    r"\b(?:(?P<simple>yesterday|today|tomorrow|tonight|this morning|this afternoon)"
    r"|(?P<lastnext>last|next|this) (?P<unit>weekend|week|month|year|"
    + "|".join(_WEEKDAYS)
    + r")|(?P<n>\d{1,3}|a|an|one|two|three|four|five|six|seven) (?P<nunit>days?|weeks?|months?)"
    r" ago|(?:on|since) (?P<bare>" + "|".join(_WEEKDAYS) + r"))\b",
    re.IGNORECASE,
)
_SMALL = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
}


@dataclass
class Episode:
    """One exchange, ready for `MemoryStore.add` (type ``conversation``)."""

    content: str
    message_ids: list[str]
    time_ms: int
    context: str = ""
    files: list[str] = field(default_factory=list)
    after: str = ""  # the opening of the exchange after it (a lower-weight FTS column)
    asks: str = ""  # the question its last message (the assistant's) ends on, for the next
    # False for a throwaway exchange ("hello there" / "Hi! How can I help?"): no
    # statement, identifier, decision, command or error; it is counted, never stored
    substance: bool = True
    part: int = 0  # k >= 1: the k-th part of what a long exchange's own episode leaves out

    def metadata(self) -> dict[str, object]:
        meta: dict[str, object] = {"episode": True, "fts_context": self.context}
        if self.part:
            meta["part"] = self.part
        if self.after:
            meta["fts_after"] = self.after
        if self.asks:
            meta["asks"] = self.asks
        return meta


def time_words(ms: int) -> str:
    """``2026-11-24 Tuesday 24 November 2026``: the date as the words a question uses."""
    if ms <= 0:
        return ""
    day = datetime.fromtimestamp(ms / 1000, UTC)
    return f"{day:%Y-%m-%d} {day:%A} {day.day} {day:%B %Y}"


def resolved_times(text: str, ms: int) -> list[str]:
    """The dates that relative time expressions in ``text`` meant at ``ms``, as words."""
    if ms <= 0:
        return []
    now = datetime.fromtimestamp(ms / 1000, UTC)
    out: list[str] = []
    for m in _RELATIVE.finditer(text):
        when: datetime | None = None
        span = "day"
        if m.group("simple"):
            word = m.group("simple").lower()
            when = now + timedelta(days={"yesterday": -1, "tomorrow": 1}.get(word, 0))
        elif m.group("lastnext"):
            sign = {"last": -1, "next": 1, "this": 0}[m.group("lastnext").lower()]
            unit = m.group("unit").lower()
            if unit == "weekend":  # its Saturday (the Sunday follows below)
                delta = (5 - now.weekday()) % 7
                delta = {-1: delta - 7 if delta > 0 else -7, 1: delta or 7, 0: delta}[sign]
                when = now + timedelta(days=delta)
                out.append(time_words(int((when + timedelta(days=1)).timestamp() * 1000)))
            elif unit == "week":
                when, span = now + timedelta(weeks=sign), "week"
            elif unit == "month":
                month = now.month - 1 + sign
                when, span = (
                    now.replace(year=now.year + month // 12, month=month % 12 + 1, day=1),
                    "month",
                )
            elif unit == "year":
                when, span = now.replace(year=now.year + sign, month=1, day=1), "year"
            else:
                delta = (_WEEKDAYS.index(unit) - now.weekday()) % 7
                if sign < 0:
                    delta = delta - 7 if delta > 0 else -7
                elif sign > 0 and delta == 0:
                    delta = 7
                when = now + timedelta(days=delta)
        elif m.group("bare"):
            # "on Tuesday" in a conversation is most often the one just past; said on a
            # Tuesday it means a week ago (today would be "today")
            delta = (_WEEKDAYS.index(m.group("bare").lower()) - now.weekday()) % 7
            when = now + timedelta(days=delta - 7 if delta > 0 else -7)
        else:
            raw = m.group("n").lower()
            n = int(raw) if raw.isdigit() else _SMALL.get(raw, 1)
            unit = m.group("nunit").lower().rstrip("s")
            days = {"day": 1, "week": 7, "month": 30}[unit] * n
            when = now - timedelta(days=days)
        if span == "month":
            out.append(f"{when:%B %Y} {when:%Y-%m}")
        elif span == "year":
            out.append(f"{when:%Y}")
        else:
            out.append(time_words(int(when.timestamp() * 1000)))
    return list(dict.fromkeys(out))


def _tool_line(text: str) -> str:
    m = _TOOL.match(text.strip())
    if not m:
        return ""
    what = (m.group("what") or "").strip()
    line = f"[{m.group('name').strip()}] {what}".strip()[:TOOL_LINE_CHARS]
    return line + (" (failed)" if m.group("err") else "")


def message_text(msg: Message) -> str:
    """A message as episode text: speech and code, one line per tool call, nothing else
    (no reasoning, patches, tool output, private spans, injected context blocks)."""
    out: list[str] = []
    injected = False
    # Redacted whole, before any cut: a clipped secret is no longer recognizable, and a
    # key block spans lines. Redacted, never refused (docs/security.md).
    msg = replace(msg, text=redact_transcript(msg.text))
    for line in transcript_lines(msg):
        text = line.text.rstrip()
        if text.strip() in INJECTED_HEADERS:
            injected = True
            continue
        if injected:
            continue  # our own block runs to the end of the message it was put in
        if line.kind in ("speech", "code"):
            if text.strip():
                out.append(text)
        elif line.kind == "tool":
            tool = _tool_line(text)
            if tool:
                out.append(tool)
    return "\n".join(out).strip()


def build_episodes(
    msgs: Sequence[Message], previous: str = "", previous_asks: str = ""
) -> list[Episode]:
    """The exchanges of ``msgs`` (in order): each user message with the assistant messages
    after it; assistant messages before the first user message form an exchange of their
    own. ``previous`` is the text of the exchange before ``msgs`` (its context),
    ``previous_asks`` the question it ended on (its `Episode.asks`)."""
    groups: list[list[Message]] = []
    for msg in msgs:
        if msg.role == "user" or not groups:
            groups.append([msg])
        else:
            groups[-1].append(msg)
    episodes: list[Episode] = []
    middles: dict[int, list[str]] = {}  # an exchange's index -> its middle's parts
    prev, asked = previous, cap(previous_asks, ASKED_CHARS + len("Assistant: "))
    for group in groups:
        parts = []
        last_said = ("", "")
        for msg in group:
            text = message_text(msg)
            if text:
                speaker = "User" if msg.role == "user" else "Assistant"
                parts.append(f"{speaker}: {text}")
                last_said = (msg.role, text)
        whole = "\n".join([asked, *parts] if asked and parts else parts)
        content = keep_ends(whole)
        if not content:
            continue
        lead = next((p for p in parts if p.startswith("User: ")), "")
        middles[len(episodes)] = middle_parts(whole, lead)
        asked = question_asked(last_said[1]) if last_said[0] == "assistant" else ""
        time_ms = next((m.created_ms for m in group if m.created_ms), 0)
        context = " ".join(
            x
            for x in (
                cap(prev, CONTEXT_CHARS),
                time_words(time_ms),
                *resolved_times(content, time_ms),
                identifier_parts(content),
            )
            if x
        )
        files = [f for m in group for f in m.files]
        if episodes:
            episodes[-1].after = after_words(content)
        # An agentic turn may hold thousands of messages: the store keeps at most
        # MAX_LIST_ITEMS ids (the first one is what marks the exchange as stored).
        ids = [m.id for m in group][:MAX_LIST_ITEMS]
        staged = HeuristicExtractor().extract_staged(group)
        statements = len(staged.memories) + len(staged.inbox)
        substance = bool(files) or has_substance(content, statements=statements)
        episodes.append(
            Episode(content, ids, time_ms, context, files, substance=substance, asks=asked)
        )
        prev = content
    # Each exchange's parts just before it: stored in this order, the exchange's own
    # episode is the session's latest (the next batch's context and follow-up read it).
    # A part is indexed by the exchange's context and its own identifiers' words.
    out: list[Episode] = []
    for i, ep in enumerate(episodes):
        for k, text in enumerate(middles.get(i, ()), start=1):
            context = f"{ep.context} {identifier_parts(text)}".strip()
            out.append(
                Episode(text, ep.message_ids, ep.time_ms, context, substance=ep.substance, part=k)
            )
        out.append(ep)
    return out


def keep_ends(text: str, limit: int = CONTENT_CHARS) -> str:
    """``text`` whole if at most ``limit`` characters, else its first two thirds and its last
    third at line (or word) boundaries, joined by a line "…". Why (issue 23): a head cut at
    4,000 characters lost whatever a long reply said after it, and every word an agent's
    closing summary said after a long run of tool calls. What is left out is stored as
    `middle_parts`."""
    if len(text) <= limit:
        return text
    head_end, tail_start = _ends(text, limit)
    return f"{text[:head_end].rstrip()}\n…\n{text[tail_start:].lstrip()}"


def _ends(text: str, limit: int) -> tuple[int, int]:
    """Where `keep_ends`'s head of ``text`` ends and its tail starts (``len(text) > limit``)."""
    room = limit - 3
    head_room = int(room * HEAD_SHARE)
    cut = max(text.rfind("\n", 0, head_room), text.rfind(" ", 0, head_room))
    head_end = cut if cut > head_room // 2 else head_room
    tail_room = room - head_end
    tail_start = len(text) - tail_room
    tail = text[tail_start:]
    cut = min((i for i in (tail.find("\n"), tail.find(" ")) if i >= 0), default=-1)
    return head_end, tail_start + (cut + 1 if 0 <= cut < tail_room // 2 else 0)


def middle_parts(text: str, lead: str = "", limit: int = CONTENT_CHARS) -> list[str]:
    """What `keep_ends` leaves out of ``text``, cut at lines (a longer line at words) into
    parts of at most ``limit`` characters, each opening with ``lead`` (the user's message,
    at most `PART_LEAD_CHARS` of it, so a part read alone says what the exchange was about)
    and marked ``…`` where the exchange goes on; at most `MAX_PARTS` of them, the first.
    [] when nothing is left out."""
    if len(text) <= limit:
        return []
    head_end, tail_start = _ends(text, limit)
    middle = text[head_end:tail_start].strip()
    if not middle:
        return []
    opening = f"{cap(lead, PART_LEAD_CHARS)} …\n…\n" if lead else "…\n"
    room = limit - len(opening) - len("\n…")
    if room < limit // 4:  # a small limit: the parts go without the lead
        opening, room = "…\n", limit - len("…\n\n…")
    chunks: list[str] = []
    size = 0
    lines = (piece for line in middle.splitlines() for piece in pieces(line, room))
    for line in (x for x in lines if x.strip()):
        if chunks and size + 1 + len(line) <= room:
            chunks[-1] += "\n" + line
            size += 1 + len(line)
        else:
            if len(chunks) == MAX_PARTS:
                break
            chunks.append(line)
            size = len(line)
    return [f"{opening}{chunk}\n…" for chunk in chunks]


def question_asked(said: str) -> str:
    """The question an assistant's message ends on ("What cake did you make?"), its last
    sentence or run of question sentences, as the line the answer's exchange starts with;
    "" when it ends on none.

    The assistant's turn often ends by asking, and the answer is the next user message:
    in a conversation between two people half of all answers start an exchange. Without
    the question an exchange that says "A volcano cake. Chocolate, with dry ice." holds
    none of the words of "what cake did she make?" (docs/episodes.md). The role comes from
    the message, never from the text: a user who types "Assistant: ...?" asks nothing."""
    lines = said.rstrip().splitlines()
    last = lines[-1].strip() if lines else ""
    if not last.endswith("?"):
        return ""
    sentences = _SENTENCE_END.split(last)
    n = len(sentences)
    while n > 1 and sentences[n - 2].endswith("?"):  # "Postgres? REST?" asks once
        n -= 1
    text = " ".join(sentences[n - 1 :])
    if n > 1:  # the question only, not the reply's other sentences
        text = "… " + text
    if len(text) > ASKED_CHARS:
        text = "… " + text[-(ASKED_CHARS - 2) :].lstrip()
    return f"Assistant: {text}"


def after_words(next_content: str) -> str:
    """What an episode is also found by from the exchange after it: that exchange's
    opening (its follow-up, "that fixed it", "and the staging one?")."""
    return cap(next_content, NEXT_CHARS)
