"""Recall for the file in hand: what memory knows about a file the agent just read or
edited (docs/citations.md, "Recall for the file in hand"; issue 22 §3).

``file_recall`` (the Copilot hook's ``postToolUse``, the OpenCode plugin's
``tool.execute.after``) answers a block in per-prompt recall's form (`markers`: our
``<llmem-recall>`` lines around defused lines): the memories citing the file, newest
first, then the last episodes of other sessions that touched it (`store.file_touches`).
Once per file per session: a file asked again gets nothing (``already_given``), and a
memory the session was given already (its context, per-prompt recall) is not given
again; what is shown is recorded as given, so per-prompt recall does not repeat it.

The floor: a memory is relevant because it cites the file (or the episode touched it),
not by words; forgotten memories, stale ones (``citations.hide_stale``) and those of
other projects never pass, and the block stays within ``recall.budget_tokens`` and
``recall.max_results`` memories plus `MAX_EPISODES` episodes. The path is made
repository-relative against the session's directory (`evidence.in_repo`: no git
process); a path outside that repository gets nothing (``outside_repository``).

``search_file`` is the same knowledge for ``memory_search`` with a ``path``.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from ..errors import SearchTimeout, ValidationError
from ..evidence.in_repo import check_tool_path, relative
from ..markers import RECALL_CLOSE, RECALL_OPEN, neutralize
from ..redact import find_secrets
from ..store import citations as cited
from ..store import file_touches as touches
from ..store import recall as given
from ..store.db import is_interrupted
from ..text.lines import clip_at_word, flatten
from ..text.query import words
from ..timestamps import to_iso
from . import protocol as proto
from .entry import clip_text
from .params import ServiceError, _bounded, _no_nul, _text

if TYPE_CHECKING:
    from .operations import QueryService

log = logging.getLogger(__name__)

CHARS_PER_TOKEN = 4
MAX_EPISODES = 3  # the last episodes that touched the file
MAX_CITING = 50  # memories citing one file that are read at most (newest first)
HEADER = (
    "Memories from earlier sessions about {path} (llmem-hooks; full text: memory_get with the id):"
)
PATH_CHARS = 200  # the path as the header shows it
GIVEN_RETENTION_DAYS = 30
_pruned: set[int] = set()  # stores (by id) whose old file_recall_given rows were pruned


def _nothing(reason: str, path: str | None = None) -> dict[str, Any]:
    return {"block": "", "ids": [], "memory_ids": [], "tokens": 0, "reason": reason, "path": path}


def _directory(directory: Any) -> str | None:
    if directory is None:
        return None
    return _no_nul(_text(directory, "directory", 4096), "directory")


def _repo_path(path: Any, directory: str | None) -> str | None:
    try:
        return relative(directory, check_tool_path(path))
    except ValidationError as exc:  # one line, bad_params
        raise ServiceError(proto.BAD_PARAMS, str(exc)) from None


def file_recall(
    service: QueryService,
    session_id: str,
    path: str,
    directory: str | None = None,
    project: str | None = None,
    agent: str | None = None,
    budget_tokens: int | None = None,
) -> dict[str, Any]:
    """The block for the file ``path`` (absolute, or relative to ``directory``, as the
    tool saw it): ``{"block", "ids", "memory_ids", "tokens", "reason", "path"}`` with
    the repository-relative ``path`` (None when outside the repository)."""
    session_id = _text(session_id, "session_id", 500)
    if agent is not None:
        _text(agent, "agent", 100)
    directory = _directory(directory)
    cfg = service.recall_settings
    budget = cfg.budget_tokens if budget_tokens is None else budget_tokens
    budget = _bounded(budget, "budget_tokens", 0, 100_000)
    if not service.settings.citations.file_recall or budget == 0:
        return _nothing("disabled")
    rel = _repo_path(path, directory)
    if rel is None:
        return _nothing("outside_repository")
    _prune(service)
    with service._reading():
        store = service._rstore
        if touches.was_given(store.db, session_id, rel):
            return _nothing("already_given", rel)
        try:
            with store.time_limit(service._rretriever.time_limit):
                scope = service.scope(project, directory, session_id)
                mems = _known(service, rel, scope, session_id, exclude_given=True)
        except Exception as exc:
            if not isinstance(exc, SearchTimeout) and not is_interrupted(exc):
                raise
            return _nothing("too_slow", rel)
        block, shown = _render(service, rel, mems, budget)
    try:
        if not touches.mark_given(service.store.db, session_id, rel):
            return _nothing("already_given", rel)  # another call for the same file won
    except Exception as exc:  # a busy database costs a possible repeat, never this answer
        log.warning("file recall: could not record %s for session %s: %s", rel, session_id, exc)
    if not shown:
        return _nothing("no_match", rel)
    full = [m["id"] for m in shown]
    service._mark(session_id, full)
    return {
        "block": block,
        "ids": [service._short(mid) for mid in full],
        "memory_ids": full,
        "tokens": math.ceil(len(block) / CHARS_PER_TOKEN),
        "reason": "recalled",
        "path": rel,
    }


def _known(
    service: QueryService,
    rel: str,
    scope: str | None,
    session_id: str | None,
    *,
    exclude_given: bool,
    hide_stale: bool = True,
    limit_episodes: int = MAX_EPISODES,
) -> list[dict[str, Any]]:
    """The memories citing ``rel`` (newest first), then the episodes that touched it,
    in ``scope`` (and global ones), minus forgotten, hidden-stale and (``exclude_given``)
    already given ones."""
    db = service._rstore.db
    had = given.given_ids(db, session_id) if exclude_given and session_id else set()
    ids = [m for m in cited.citing(db, rel)[:MAX_CITING] if m not in had]
    if ids and hide_stale and service.settings.citations.hide_stale:
        states = cited.of_memories(db, ids)
        ids = [m for m in ids if cited.overall(states.get(m, [])) != "stale"]
    episodes = touches.episodes_touching(
        db,
        rel,
        scope,
        exclude_session=session_id if exclude_given else None,
        exclude_ids=[*had, *ids],
        limit=limit_episodes,
    )
    found = service._rstore.get_many([*ids, *episodes])
    out = []
    for mid in [*ids, *episodes]:
        mem = found.get(mid)
        if mem is None or mem.get("valid_until") is not None:
            continue
        if scope is not None and mem.get("project") not in (None, scope):
            continue  # another project's file of the same name
        out.append(mem)
    return out


def _render(
    service: QueryService, rel: str, mems: Sequence[Mapping[str, Any]], budget_tokens: int
) -> tuple[str, list[Mapping[str, Any]]]:
    """Per-prompt recall's block form (`QueryService._render`), headed by the path."""
    shown_path = neutralize(clip_at_word(flatten(rel), PATH_CHARS, "…"))
    head = f"{RECALL_OPEN}\n{neutralize(HEADER.format(path=shown_path))}\n"
    room = budget_tokens * CHARS_PER_TOKEN - len(head) - len(RECALL_CLOSE)
    terms = [w for w in words(os.path.basename(rel)) if len(w) > 1]
    cfg = service.recall_settings
    lines: list[str] = []
    shown: list[Mapping[str, Any]] = []
    memories = 0
    for mem in mems:
        episode = mem["type"] == "conversation"
        if not episode and memories >= cfg.max_results:
            continue
        label = "episode that touched it" if episode else mem["type"]
        prefix = f"- [{service._short(mem['id'])}] ({label}, {str(mem['created_at'])[:10]}) "
        limit = min(cfg.entry_chars, room - len(prefix) - 1)
        if limit < 40:
            break
        text = clip_text(str(mem["content"]), terms, limit)
        if find_secrets(text):
            continue  # the store redacts; never put something that still looks like one
        line = neutralize(prefix + text) + "\n"
        lines.append(line)
        shown.append(mem)
        memories += not episode
        room -= len(line)
    return head + "".join(lines) + RECALL_CLOSE, shown


def _prune(service: QueryService) -> None:
    """Old ``file_recall_given`` rows go once per store and process (sessions that old
    are over); a busy database: next time."""
    key = id(service.store)
    if key in _pruned:
        return
    _pruned.add(key)
    try:
        cutoff = to_iso(datetime.now(UTC) - timedelta(days=GIVEN_RETENTION_DAYS))
        touches.prune_given(service.store.db, cutoff)
    except Exception:
        _pruned.discard(key)


def search_file(
    service: QueryService,
    path: Any,
    query: str | None,
    limit: int,
    type: str | None,
    project: str | None,
    directory: str | None,
) -> dict[str, Any]:
    """``memory_search`` with a ``path``: the memories citing the file, then the
    episodes that touched it (any session), in ``search``'s result shape plus ``via``
    (``cites`` | ``touched``) and ``citations``; with a ``query`` too, only those holding
    all of its words. ``path`` outside the repository: an error (one line)."""
    directory = _directory(directory)
    rel = _repo_path(path, directory)
    if rel is None:
        raise ServiceError(
            proto.BAD_PARAMS,
            "path must name a file inside the repository of the session's directory",
        )
    with service._reading():
        scope = service.scope(project, directory)
        mems = _known(
            service, rel, scope, None, exclude_given=False, hide_stale=False, limit_episodes=limit
        )
        terms = [w.lower() for w in words(query or "") if len(w) > 1 or w.isdigit()]
        if terms:
            mems = [m for m in mems if all(t in str(m["content"]).lower() for t in terms)]
        if type is not None:
            mems = [m for m in mems if m["type"] == type]
        states = cited.of_memories(service._rstore.db, [m["id"] for m in mems[:limit]])
        results = []
        for mem in mems[:limit]:
            mine = states.get(mem["id"], [])
            results.append(
                {
                    **service._line(mem, terms),
                    "project": mem.get("project"),
                    "project_name": None,
                    "score": None,
                    "via": "touched" if mem["type"] == "conversation" and not mine else "cites",
                    **cited.for_agent(mine),
                }
            )
    return {"results": results, "path": rel}
