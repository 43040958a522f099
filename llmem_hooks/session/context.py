"""Per-session context files: what a new session should know, as markdown.

`<context_dir>/<session_id>.md` is written once when a session starts and then left
alone: it sits in the system prompt, and a block that changed every turn would defeat
prompt caching. `<session_id>.compact.md` (the resume pack) is rewritten as the session
goes on. Both are 0600 in a 0700 folder.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from ..config import ContextSettings
from ..markers import neutralize
from ..paths import (
    COMPACT_MARKER_SUFFIX,
    RECALL_LOCK_SUFFIX,
    ensure_private_dir,
    get_context_dir,
    validate_session_id,
    write_private_file,
)
from ..redact import find_secrets
from ..store import MemoryStore, citation_review
from ..store import projects as project_names

log = logging.getLogger(__name__)

CHARS_PER_TOKEN = 4
# Which kinds of memory a fresh session needs first, and how each section is titled.
SECTIONS: tuple[tuple[str, str], ...] = (
    ("preference", "Preferences"),
    ("decision", "Decisions"),
    ("procedure", "How-tos and commands"),
    ("project_state", "Project state"),
    ("fact", "Facts"),
    ("event", "Recent sessions"),
)
TYPE_WEIGHT = {
    "preference": 1.2,
    "decision": 1.15,
    "procedure": 1.1,
    "project_state": 1.0,
    "fact": 0.95,
    "event": 0.6,
}
CANDIDATES = 400


def context_path(session_id: str, context_dir: Path | None = None) -> Path:
    return (context_dir or get_context_dir()) / f"{validate_session_id(session_id)}.md"


def resume_path(session_id: str, context_dir: Path | None = None) -> Path:
    return (context_dir or get_context_dir()) / f"{validate_session_id(session_id)}.compact.md"


def _score(mem: Mapping[str, Any], now: float) -> float:
    try:
        updated = datetime.fromisoformat(str(mem["updated_at"]).replace("Z", "+00:00"))
        age_days = max(0.0, (now - updated.timestamp()) / 86400)
    except (KeyError, ValueError):
        age_days = 365.0
    recency = 1.0 / (1.0 + age_days / 30)
    usage = min(1.0, (mem.get("access_count") or 0) / 10)
    return TYPE_WEIGHT.get(mem["type"], 0.8) * (
        0.55 * float(mem.get("confidence") or 0.5) + 0.3 * recency + 0.15 * usage
    )


def select_memories(
    store: MemoryStore, project: str | None, *, hide_stale: bool = True
) -> list[dict[str, Any]]:
    """The project's and global memories worth putting in front of a new session, best
    first. Conversation and self-assessment memories are left out (noise in a prompt),
    and with ``hide_stale`` (config ``citations.hide_stale``) the stale ones: their cited
    code changed (one query for all the candidates, `citation_review.stale_among`)."""
    types = [t for t, _ in SECTIONS]
    mems = store.list_all(
        type=types, project=project, sort="updated", order="desc", limit=CANDIDATES, brief=True
    )
    if project is None:
        mems = [m for m in mems if m.get("project") is None]
    if hide_stale:
        stale = citation_review.stale_among(store.db, [m["id"] for m in mems])
        mems = [m for m in mems if m["id"] not in stale]
    now = time.time()
    return sorted(mems, key=lambda m: -_score(m, now))


ENTRY_CHARS = 400  # one memory's line in the context file, at most


def context_entry(content: object) -> str:
    """A memory as its line of the context file shows it (after ``- ``): flat, cut at
    `ENTRY_CHARS`, anything imitating our markers defused (`markers.neutralize`).
    Per-prompt recall compares against it to skip what the file gave."""
    text = str(content)
    return _entry(text) if len(text) <= _CACHED_CHARS else _entry.__wrapped__(text)


_CACHED_CHARS = 4096  # longer texts are not kept: the cache stays under ~4 MB


@functools.lru_cache(maxsize=1024)  # the same memories open every session: computed once
def _entry(content: str) -> str:
    text = " ".join(neutralize(content).split())
    if len(text) > ENTRY_CHARS:
        text = neutralize(text[: ENTRY_CHARS - 3].rstrip()) + "..."
    return text


@functools.lru_cache(maxsize=1024)  # entries of at most ENTRY_CHARS
def _holds_secret(text: str) -> bool:
    return bool(find_secrets(text))


def render_context(
    memories: Sequence[Mapping[str, Any]], project: str | None, budget_tokens: int
) -> str:
    """Markdown within ``budget_tokens`` (about 4 characters each), whole entries only,
    grouped by kind. Empty string when there is nothing to say."""
    return _render(memories, budget_tokens)[0]


def _render(
    memories: Sequence[Mapping[str, Any]], budget_tokens: int, name: str | None = None
) -> tuple[str, list[str]]:
    """`render_context`'s text and the ids of the memories it shows; ``name``: the
    project as people know it (``acme/api``), said in the header."""
    budget = budget_tokens * CHARS_PER_TOKEN
    where = f"this project ({_header_name(name)})" if name else "this project"
    head = (
        "# Memory from earlier sessions (llmem-hooks)\n\n"
        f"What earlier sessions in {where} learned. Prefer it over guessing; it may be "
        "outdated, so trust the code and the user when they disagree.\n"
    )
    used = len(head)
    picked: dict[str, list[str]] = {t: [] for t, _ in SECTIONS}
    seen: set[str] = set()
    shown: list[str] = []
    for mem in memories:
        text = context_entry(mem["content"])
        if not text or text.lower() in seen:
            continue
        line = f"- {text}\n"
        extra = len(line) + (0 if picked[mem["type"]] else 20)
        if used + extra > budget or _holds_secret(text):  # the costly check last
            continue
        seen.add(text.lower())
        picked[mem["type"]].append(line)
        shown.append(str(mem["id"]))
        used += extra
    if not any(picked.values()):
        return "", []
    parts = [head]
    for mtype, title in SECTIONS:
        if picked[mtype]:
            parts.append(f"\n## {title}\n\n" + "".join(picked[mtype]))
    return "".join(parts), shown


def build_session_context(
    store: MemoryStore,
    project: str | None,
    budget_tokens: int = ContextSettings.budget_tokens,
    *,
    hide_stale: bool = True,
) -> str:
    return session_context(store, project, budget_tokens, hide_stale=hide_stale)[0]


def session_context(
    store: MemoryStore,
    project: str | None,
    budget_tokens: int = ContextSettings.budget_tokens,
    *,
    hide_stale: bool = True,
) -> tuple[str, list[str]]:
    """The session-start context and the ids of the memories it gives: whoever hands it
    to a session records them as given (`store.recall.mark_given`), so per-prompt recall
    never repeats them (by id, not by comparing rendered text). ``hide_stale``: leave out
    memories whose cited code changed (`select_memories`)."""
    name = project_names.name_of(store.db, project) if project else None
    mems = select_memories(store, project, hide_stale=hide_stale)
    return _render(mems, budget_tokens, name)


def _header_name(name: str) -> str:
    """A project name as the header says it: one plain line, markers defused (it goes
    into a system prompt)."""
    return neutralize(" ".join(name.split())[:100])


def write_context_file(path: Path, text: str) -> bool:
    """Write a context file (0600, atomically). Refused, with a log line, into a context
    folder that is a symlink or over a file that is one: we never follow a link we did
    not create (it could point the write, and the folder's chmod, anywhere). Returns
    whether the file was written."""
    for p in (path.parent, path):
        if p.is_symlink():
            log.warning("not writing %s: %s is a symlink", path.name, p)
            return False
    ensure_private_dir(path.parent)
    write_private_file(path, text)
    return True


def remove_session_files(session_id: str, context_dir: Path | None = None) -> list[Path]:
    """Delete a session's files in the context folder (retention): its context file,
    resume pack, and the Copilot hook's marker and recall lock. Nothing is deleted through a context
    folder that is a symlink: its target is not ours to clean. (A file that is itself a
    symlink is unlinked, which removes the link, never its target.)"""
    removed: list[Path] = []
    folder = context_path(session_id, context_dir).parent
    if folder.is_symlink():
        log.warning("not cleaning %s: it is a symlink", folder)
        return removed
    extra = [
        folder / f"{validate_session_id(session_id)}{suffix}"
        for suffix in (COMPACT_MARKER_SUFFIX, RECALL_LOCK_SUFFIX)
    ]
    for path in (
        context_path(session_id, context_dir),
        resume_path(session_id, context_dir),
        *extra,
    ):
        try:
            path.unlink()
            removed.append(path)
        except FileNotFoundError:
            pass
    return removed
