"""The dream's inbox step: which candidates waiting in the inbox become memories, which go.

Extraction stages the candidates it is not sure of (`extraction.candidates.MIN_CONFIDENCE`)
in the inbox (source ``extract``) instead of dropping them. The deep phase reads them:

- said again: an item alike a live memory of its project is settled ("already a memory",
  nothing added; only the memories of its project holding one of its rarest words are
  compared); items alike each other from two or more sessions become ONE memory;
- a model confirms it: with ``ollama.enabled``, up to ``dream.inbox_model_checks`` of the
  oldest waiting items per applied run are asked about; "yes" promotes, "no" drops;
- otherwise an item waits, and is dropped ``dream.inbox_days`` after it arrived.

"Alike" is the light phase's wording test (`likeness`): word overlap at least
``dream.merge_overlap`` and no number or negation on one side only. Items of the other
sources (notes) keep the reference's rule: at least ``consolidate_min_score`` promoted,
the rest evicted at once. Everything here is a plan; `store.dream.settle_inbox` applies it
in one logged transaction (undo puts it back).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from ..config import Config, DreamSettings
from ..errors import LLMemError
from ..extraction.llm import ModelCaller
from ..extraction.summary import safe_text
from ..model.backoff import SharedBackoff
from ..model.budget import BudgetExceeded
from ..model.ollama import OllamaError, OllamaTimeout, OllamaUnavailable
from ..registry import check_memory_type
from ..store import MemoryStore
from ..store import dream as book
from ..timestamps import to_iso
from . import likeness
from .rewrite import dream_caller

if TYPE_CHECKING:
    from .cycle import Dreamer, DreamResult

log = logging.getLogger(__name__)

EXTRACTED = "extract"  # the inbox source of extraction's unsure candidates


@dataclass
class Promotion:
    """One memory made of inbox items: its fields for the store and why."""

    items: list[dict[str, Any]]
    how: str  # "said again", "score", "model"
    record: dict[str, Any] = field(default_factory=dict)


@dataclass
class InboxPlan:
    promote: list[Promotion] = field(default_factory=list)
    known: list[tuple[dict[str, Any], str]] = field(default_factory=list)  # (item, memory id)
    drop: list[tuple[dict[str, Any], str]] = field(default_factory=list)  # (item, reason)
    waiting: list[dict[str, Any]] = field(default_factory=list)


def meta_of(item: Mapping[str, Any]) -> dict[str, Any]:
    raw = item.get("metadata")
    if isinstance(raw, dict):
        return raw
    try:
        out = json.loads(raw or "{}")
    except ValueError:
        return {}
    return out if isinstance(out, dict) else {}


def _project(item: Mapping[str, Any]) -> str | None:
    project = meta_of(item).get("project")
    return project if isinstance(project, str) else None


def _session(item: Mapping[str, Any]) -> str | None:
    sid = meta_of(item).get("session_id")
    return sid if isinstance(sid, str) and sid else None


def alike(a: frozenset[str], b: frozenset[str], overlap: float) -> bool:
    """Two wordings of one statement, as the inbox reads them."""
    return likeness.jaccard(a, b) >= overlap and not likeness.differ_in_fact(a, b)


def plan(
    items: Sequence[dict[str, Any]],
    memories: Sequence[Mapping[str, Any]],
    settings: DreamSettings,
    now: datetime,
) -> InboxPlan:
    """What the inbox step does to ``items`` given the live ``memories`` (no model)."""
    out = InboxPlan()
    overlap = settings.merge_overlap or 0.01
    extracted: list[dict[str, Any]] = []
    for item in items:
        if item["source"] == EXTRACTED:
            extracted.append(item)
        elif item["attention_score"] >= settings.consolidate_min_score:
            out.promote.append(Promotion([item], "score", note_record(item)))
        else:
            out.drop.append((item, "below the minimum score"))
    if not extracted:
        return out
    sets = [likeness.words(str(i["content"])) for i in extracted]
    known = _known(extracted, sets, memories, overlap)
    parent = list(range(len(extracted)))

    def root(k: int) -> int:
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    groups = [_project(i) for i in extracted]
    for a, b, _score in likeness.similar_pairs(sets, groups, overlap):
        sa, sb = _session(extracted[a]), _session(extracted[b])
        if alike(sets[a], sets[b], overlap) and (sa is None or sa != sb):
            parent[root(a)] = root(b)  # said again by another session
    components: dict[int, list[int]] = {}
    for k in range(len(extracted)):
        if k in known:
            out.known.append((extracted[k], known[k]))
        else:
            components.setdefault(root(k), []).append(k)
    cutoff = to_iso(now - timedelta(days=settings.inbox_days))
    for members in components.values():
        group = [extracted[k] for k in members]
        if len(group) > 1 or group[0]["attention_score"] >= settings.consolidate_min_score:
            how = "said again" if len(group) > 1 else "score"
            out.promote.append(Promotion(group, how, candidate_record(group, how, settings)))
        elif group[0]["created_at"] < cutoff:
            out.drop.append((group[0], f"not said again within {settings.inbox_days:g} days"))
        else:
            out.waiting.append(group[0])
    out.waiting.sort(key=lambda i: (i["created_at"], i["id"]))
    return out


def _known(
    extracted: Sequence[Mapping[str, Any]],
    sets: Sequence[frozenset[str]],
    memories: Sequence[Mapping[str, Any]],
    overlap: float,
) -> dict[int, str]:
    """Item index -> the id of a live memory that says it already (before or since).
    Only the memories of the items' projects sharing a word with them are read, and
    each item is compared only with those holding one of its rarest words (the prefix
    bound of `likeness.similar_pairs`: an alike set must hold one of them)."""
    projects = {_project(i) for i in extracted}
    vocab = frozenset().union(*sets)
    found: list[tuple[frozenset[str], str]] = []
    index: dict[tuple[str | None, str], list[int]] = {}
    for m in memories:
        if m["project"] not in projects:
            continue
        words = likeness.words(str(m["content"]))
        shared = words & vocab
        if not shared:
            continue
        for w in shared:
            index.setdefault((m["project"], w), []).append(len(found))
        found.append((words, str(m["id"])))
    out: dict[int, str] = {}
    for k, item in enumerate(extracted):
        project, mine = _project(item), sets[k]
        ranked = sorted(mine, key=lambda w: (len(index.get((project, w), ())), w))
        prefix = ranked[: len(mine) - math.ceil(overlap * len(mine) - 1e-9) + 1]
        for j in (j for w in prefix for j in index.get((project, w), ())):
            if alike(mine, found[j][0], overlap):
                out[k] = found[j][1]
                break
    return out


def note_record(item: Mapping[str, Any]) -> dict[str, Any]:
    """A note's memory, as `MemoryStore.consolidate` makes it."""
    return {
        "type": "fact",
        "content": item["content"],
        "source": "consolidation",
        "confidence": item["attention_score"],
        "metadata": meta_of(item),
    }


def candidate_record(
    group: Sequence[Mapping[str, Any]], how: str, settings: DreamSettings
) -> dict[str, Any]:
    """The memory a group of staged candidates becomes: the best-scored text (then the
    newest), its type, the union of tags and source messages, confidence at least
    ``consolidate_min_score``, and where it was heard in ``metadata.inbox``."""
    best = max(group, key=lambda i: (i["attention_score"], i["created_at"]))
    meta = meta_of(best)
    try:
        kind = check_memory_type(str(meta.get("type") or "fact"))
    except LLMemError:
        kind = "fact"
    tags: list[str] = []
    msgs: list[str] = []
    sessions: list[str] = []
    for item in group:
        m = meta_of(item)
        tags += [t for t in m.get("tags") or () if isinstance(t, str) and t not in tags]
        msgs += [x for x in m.get("source_message_ids") or () if isinstance(x, str)]
        sid = _session(item)
        if sid and sid not in sessions:
            sessions.append(sid)
    latest = max(group, key=lambda i: i["created_at"])
    agent = meta_of(latest).get("agent")
    return {
        "type": kind,
        "content": best["content"],
        "source": "consolidation",
        "confidence": round(max(settings.consolidate_min_score, best["attention_score"]), 6),
        "tags": tags[:20] or [kind],
        "project": _project(best),
        "entered_by": agent if isinstance(agent, str) else None,
        "session_id": _session(latest),
        "source_message_ids": list(dict.fromkeys(msgs))[:100],
        "metadata": {
            "inbox": {
                "promoted_by": how,
                "sessions": sessions[:20],
                "first_seen": min(i["created_at"] for i in group),
            }
        },
    }


def consolidate(dreamer: Dreamer, result: DreamResult) -> None:
    """The deep phase's inbox step (`Dreamer.consolidate_inbox`): plan, ask the model about
    the oldest waiting candidates (applied runs only; a dry run says it would), report,
    and with ``apply`` settle it all in one logged transaction."""
    items = book.inbox_items(dreamer.store)
    if not items:
        return
    settings = dreamer.settings
    todo = plan(items, dreamer._live_memories(), settings, dreamer.now())
    ask = todo.waiting[: settings.inbox_model_checks] if dreamer.config.ollama.enabled else []
    planning = not result.apply or dreamer.rehearsal  # a dry run asks no model
    if ask and planning:
        result.notes.append(f"inbox: would ask the model about {len(ask)} waiting candidate(s)")
    elif ask:
        _confirm(dreamer, result, todo, ask)
    ids: list[str | None] = [None] * len(todo.promote)
    where = [p.record.get("project") for p in todo.promote]  # before the store takes them
    if result.apply:
        ids = book.settle_inbox(
            dreamer.store,
            result.run_id or "",
            "deep",
            [(p.record, [i["id"] for i in p.items]) for p in todo.promote],
            [i["id"] for i, _ in todo.known] + [i["id"] for i, _ in todo.drop],
        )
    for p, mid, project in zip(todo.promote, ids, where, strict=True):
        # A rehearsal's new memory exists only in its copy: its id would name nothing,
        # while one it could not add (None) is a plan of nothing added.
        planned = not result.apply or (dreamer.rehearsal and mid is not None)
        result.consolidated.append(
            {"inbox_id": p.items[0]["id"], "inbox_ids": [i["id"] for i in p.items],
             "content": p.record["content"], "id": None if dreamer.rehearsal else mid,
             "project": project,
             "attention_score": max(i["attention_score"] for i in p.items), "how": p.how,
             "planned": planned}
        )  # fmt: skip
    for item, mid in todo.known:
        result.consolidated.append(
            {"inbox_id": item["id"], "inbox_ids": [item["id"]], "content": item["content"],
             "id": mid, "attention_score": item["attention_score"], "how": "already a memory"}
        )  # fmt: skip
    result.evicted = [
        {"inbox_id": i["id"], "content": i["content"], "attention_score": i["attention_score"],
         "reason": why}
        for i, why in todo.drop
    ]  # fmt: skip


def _confirm(
    dreamer: Dreamer, result: DreamResult, todo: InboxPlan, ask: Sequence[dict[str, Any]]
) -> None:
    from ..model.backoff import FILE_NAME
    from ..paths import get_llmem_home

    backoff = SharedBackoff(path=(dreamer.home or get_llmem_home()) / FILE_NAME)
    confirmer = build_confirmer(dreamer.config, dreamer.store, result.run_id or "",
                                shared_backoff=backoff)  # fmt: skip
    if confirmer is None:
        return
    try:
        for item in ask:
            verdict = confirmer.confirm(str(item["content"]))
            if verdict is None:
                break
            if verdict:
                record = candidate_record([item], "model", dreamer.settings)
                todo.promote.append(Promotion([item], "model", record))
            else:
                todo.drop.append((item, "the model did not confirm it"))
        if confirmer.stopped:
            result.notes.append(f"inbox: the model stopped answering: {confirmer.stopped}")
    finally:
        confirmer.close()


# -- the model's confirmation ------------------------------------------------------------

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"durable": {"type": "boolean"}},
    "required": ["durable"],
}
SYSTEM = """\
You keep the long-term memory of a coding assistant. A statement was heard once in a \
coding session, and it is not certain that it is worth remembering. Answer true only if \
it is a standalone, lasting fact, decision, preference or procedure about the project or \
the user that will still help in a later session; false for remarks about the moment, \
guesses, questions, tasks or anything that needs the conversation to make sense. Answer \
with JSON {"durable": true} or {"durable": false} and nothing else."""


def _verdict(data: Any) -> bool:
    if not isinstance(data, dict) or not isinstance(data.get("durable"), bool):
        raise ValueError('expected {"durable": true|false}')
    return bool(data["durable"])


class Confirmer:
    """Asks the model whether waiting candidates are worth a memory, at most ``limit`` per
    run; the first failure (down, timeout, budget) ends the asking for the run."""

    def __init__(
        self,
        caller: ModelCaller,
        session_key: str,
        *,
        shared_backoff: SharedBackoff | None = None,
        limit: int = 20,
    ) -> None:
        self.caller = caller
        self.session_key = session_key
        self.shared_backoff = shared_backoff
        self.limit = limit
        self.asked = 0
        self.stopped: str | None = None

    @property
    def model(self) -> str:
        return self.caller.model

    def close(self) -> None:
        self.caller.client.close()

    def confirm(self, text: str) -> bool | None:
        """True / False: the model's verdict; None: not asked (limit, failure, back-off)."""
        text = " ".join(safe_text(text).split())
        if not text or self.stopped or self.asked >= self.limit:
            return None
        url = self.caller.client.base_url
        if self.shared_backoff is not None:
            failure = self.shared_backoff.blocked(url)
            if failure is not None:
                self.stopped = f"{failure.cause()} (backing off)"
                return None
        self.asked += 1
        try:
            answer = self.caller.call_json(
                key=self.session_key,
                system=SYSTEM,
                prompt=f"Statement: {text}",
                schema=SCHEMA,
                validate=_verdict,
                what="inbox confirmation",
            )
        except (OllamaTimeout, OllamaUnavailable) as exc:
            self.stopped = str(exc)
            log.warning("dream inbox: %s; no more confirmations this run", exc)
            if self.shared_backoff is not None:
                kind = "timeout" if isinstance(exc, OllamaTimeout) else "down"
                self.shared_backoff.failed(url, kind, str(exc), self.caller.client.timeout)
            return None
        except (BudgetExceeded, OllamaError) as exc:
            self.stopped = str(exc)
            log.info("dream inbox: %s; no more confirmations this run", exc)
            return None
        if self.shared_backoff is not None:
            self.shared_backoff.succeeded(url)
        return bool(answer.value)


def build_confirmer(
    config: Config, store: MemoryStore, run_id: str, *, shared_backoff: SharedBackoff | None
) -> Confirmer | None:
    """A confirmer when ``ollama.enabled`` and ``dream.inbox_model_checks`` > 0 and the
    URL is accepted; None otherwise."""
    if not (config.ollama.enabled and config.dream.inbox_model_checks > 0):
        return None
    caller = dream_caller(config, store, "dream inbox confirmation")
    if caller is None:
        return None
    return Confirmer(
        caller,
        f"dream:{run_id}",
        shared_backoff=shared_backoff,
        limit=config.dream.inbox_model_checks,
    )
