"""The resume pack: what an agent needs to carry on after its context is compacted.

Written to ``<session_id>.compact.md`` on idle and before compaction, so the summary the
agent builds (or the next prompt) can keep the goal, the decisions, what was touched and
what is still open. Deterministic: the same messages and memories give the same bytes,
so an unchanged pack is not rewritten needlessly, and it never holds ``<private>`` text
or credentials.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..events import Message
from ..extraction.heuristics import HeuristicExtractor
from ..extraction.summary import safe_text, session_goal, unique_recent
from ..extraction.transcript import split_sentences, transcript_lines
from ..markers import neutralize, plain_line
from ..text.lines import clip_at_word

DEFAULT_BUDGET_CHARS = 6000
MAX_LINE_CHARS = 300
MAX_GOAL_CHARS = 500
MAX_DECISIONS = 15
MAX_FILES = 25
MAX_COMMANDS = 15
MAX_TODOS = 15
MAX_KEY_MEMORIES = 20

_CHECKBOX = re.compile(r"^\s*[-*+]\s+\[(?P<mark>[ xX✓])\]\s+(?P<text>.+)$")
# "TODO: x" anywhere, or a line that starts with TODO ("the TODO list" is not one).
_TODO = re.compile(
    r"^(?:[-*+]\s+)?(?:TODO|FIXME)\b\s*[:\-–]?\s*(?P<text>.+)$|\b(?:TODO|FIXME)\s*:\s*(?P<after>.+)$"
)
_DONE = re.compile(r"^\s*(?:[-*+]\s+)?(?:done|fixed|✅|✔)\s*[:\-–]?\s*(?P<text>.+)$", re.I)
_STILL_NEED = re.compile(r"\bstill needs? to\b|\bnext steps?\b", re.I)
_NEXT_STEPS_HEADING = re.compile(r"^\s*(?:#+\s*)?(?:\*\*)?next steps?(?:\*\*)?\s*:?\s*$", re.I)
_BULLET = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+(?P<text>.+)$")


def _clean(text: str, limit: int = MAX_LINE_CHARS) -> str:
    """One safe line: private spans gone, credentials redacted, whitespace collapsed,
    cut at a word boundary. Empty when nothing safe is left."""
    return clip_at_word(safe_text(text), limit)


def _key(text: str) -> str:
    return " ".join(re.sub(r"[^\w]+", " ", text.lower()).split())


def _decisions(messages: Sequence[Message]) -> list[str]:
    found = HeuristicExtractor().extract(messages)
    return unique_recent((c.content for c in found if c.type == "decision"), MAX_DECISIONS)


def _todos(messages: Sequence[Message]) -> list[str]:
    """Open items: TODO lines, "still need to" / "next step" sentences, unchecked boxes
    and bullets under a "Next steps" heading, minus those later checked or marked done."""
    items: dict[str, str] = {}
    done: set[str] = set()
    for message in messages:
        under_next_steps = False
        for line in transcript_lines(message):
            if line.kind != "speech":
                continue
            text = line.text.strip()
            if not text:
                under_next_steps = False
                continue
            box = _CHECKBOX.match(text)
            if box:
                key = _key(box.group("text"))
                if box.group("mark") == " ":
                    done.discard(key)
                    items.setdefault(key, box.group("text"))
                else:
                    done.add(key)
                continue
            finished = _DONE.match(text)
            if finished:
                done.add(_key(finished.group("text")))
                continue
            if _NEXT_STEPS_HEADING.match(text):
                under_next_steps = True
                continue
            bullet = _BULLET.match(text)
            if under_next_steps and bullet:
                items.setdefault(_key(bullet.group("text")), bullet.group("text"))
                continue
            under_next_steps = False
            todo = _TODO.search(text)
            if todo:
                item = todo.group("text") or todo.group("after")
                items.setdefault(_key(item), item)
                continue
            for sentence in split_sentences(text):
                if _STILL_NEED.search(sentence) and not sentence.rstrip().endswith("?"):
                    items.setdefault(_key(sentence), sentence)
    open_items = (_clean(text) for key, text in items.items() if key and key not in done)
    return [t for t in open_items if t][-MAX_TODOS:]


def _key_memories(memories: Iterable[Mapping[str, Any]]) -> list[str]:
    out: list[str] = []
    seen: set[str] = set()
    for mem in memories:
        content = _clean(str(mem.get("content") or ""))
        kind = _clean(str(mem.get("type") or "memory"), 40)
        key = _key(content)
        if content and key not in seen:
            seen.add(key)
            out.append(f"- ({kind}) {content}")
        if len(out) >= MAX_KEY_MEMORIES:
            break
    return out


def _code(text: str) -> str:
    """``text`` as inline code, with a fence long enough for backticks inside it."""
    ticks = "`" * (max((len(r) for r in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def build_resume_pack(
    messages: Sequence[Message],
    key_memories: Sequence[Mapping[str, Any]],
    *,
    session_title: str | None = None,
    budget_chars: int = DEFAULT_BUDGET_CHARS,
) -> str:
    """Markdown with ``## Goal``, ``## Decisions``, ``## Files touched``, ``## Commands
    run``, ``## Open TODOs`` and ``## Key memories`` (empty ones left out), cut on whole
    lines to ``budget_chars``. Empty when there is nothing to say."""
    sections: list[tuple[str, list[str]]] = []
    goal = _clean(session_goal(messages, limit=MAX_GOAL_CHARS), MAX_GOAL_CHARS)
    sections.append(("Goal", [plain_line(goal)] if goal else []))
    sections.append(("Decisions", [f"- {_clean(d)}" for d in _decisions(messages)]))
    files = [_clean(f) for m in messages for f in m.files]
    sections.append(("Files touched", [f"- {_code(f)}" for f in unique_recent(files, MAX_FILES)]))
    commands = [_clean(c) for m in messages for c in m.commands]
    sections.append(
        ("Commands run", [f"- {_code(c)}" for c in unique_recent(commands, MAX_COMMANDS)])
    )
    sections.append(("Open TODOs", [f"- {t}" for t in _todos(messages)]))
    sections.append(("Key memories", _key_memories(key_memories)))
    sections = [(name, [x for x in body if x.strip("- ")]) for name, body in sections]
    sections = [(name, body) for name, body in sections if body]
    if not sections:
        return ""
    title = _clean(session_title or "", 120)
    lines = [f"# Resume pack: {title}" if title else "# Resume pack"]
    for name, body in sections:
        lines += ["", f"## {name}", *body]
    # Read in the agent's prompt: nothing in it may imitate our markers (`markers`).
    return neutralize(_fit(lines, budget_chars))


def _fit(lines: list[str], budget: int) -> str:
    """The longest prefix of whole lines within ``budget`` characters, without a section
    heading left dangling at the end."""
    kept: list[str] = []
    used = 0
    for line in lines:
        cost = len(line) + 1
        if used + cost > budget:
            break
        kept.append(line)
        used += cost
    while kept and (not kept[-1].strip() or kept[-1].startswith("#")):
        kept.pop()
    return "\n".join(kept) + "\n" if kept else ""
