"""What the viewer shows and does, as JSON-able dicts: one place for `llmem-hooks ui`
(`llmem_hooks.viewer.server`) and `llmem-hooks report --html` (`llmem_hooks.viewer.page`).

The overview: live memories by project and type, the newest durable memories and, apart
from them, the newest conversation episodes (issue 20: episodes had filled the first cards
of the list), the forgotten ones, the inbox, today's model usage against the budget, and
whether a dream report exists. A memory's provenance: its session (and that session's
agent), who entered it, when, its source and messages, and the episode it was learned
from. Search is the same `Retriever.find` as ``llmem-hooks search`` (hybrid when the
embedding model answers).
Edits go through `MemoryStore.update` / `invalidate` and `store.browse.restore`, so the
store's validation and its redaction choke point apply as everywhere else.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import Config
from ..errors import NotFoundError, ValidationError
from ..model.budget import BudgetLimits, ModelBudget
from ..paths import get_llmem_home, read_regular_file
from ..project import project_label
from ..registry import DEFAULT_MEMORY_TYPES
from ..search.retriever import Retriever, attach_passages
from ..store import MemoryFilter, browse, citation_review, citations
from ..store import projects as project_names
from ..store import sessions as session_state
from ..store import team as team_store
from ..text.lines import cap
from ..timestamps import now_iso
from . import review
from .search_index import build

if TYPE_CHECKING:
    from ..model.embed import EmbeddingEngine
    from ..store import MemoryStore

log = logging.getLogger(__name__)

DREAM_REPORT = "dream-report.html"  # written by the dream cycle into LLMEM_HOME
MAX_DREAM_REPORT_CHARS = 4 * 1024 * 1024
EPISODE_CHARS = 1200  # how much of the source episode a memory's provenance shows
SEARCH_LIMIT = 50
INBOX_LIMIT = 100
FORGOTTEN_LIMIT = 200
# Episodes (what was said, stored by the session hooks) are listed, counted and searched
# apart from the durable memories: the "Conversations" tab, never the default list.
EPISODE_TYPE = "conversation"
KINDS = ("memories", "conversations")  # what a search covers: durable memories or episodes
MEMORY_FIELDS = (
    "id",
    "type",
    "content",
    "summary",
    "source",
    "confidence",
    "created_at",
    "updated_at",
    "valid_until",
    "invalidation_reason",
    "expires_at",
    "entered_by",
    "project",
    "session_id",
    "tags",
)


def slim(memory: Mapping[str, Any], names: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The fields a list shows (no metadata, hints or message ids), and ``project_name``:
    the project as people know it (`project.project_label`; None for a global memory)."""
    out = {k: memory.get(k) for k in MEMORY_FIELDS}
    out["project_name"] = project_label(out["project"], names)
    return out


class ViewerData:
    """The viewer's reads and writes over one open store. Not thread-safe by itself: the
    server serializes calls."""

    def __init__(
        self,
        store: MemoryStore,
        config: Config | dict[str, Any] | None = None,
        *,
        embedder: EmbeddingEngine | None = None,
        home: Path | None = None,
    ) -> None:
        self.store = store
        self.config = Config.coerce(config)
        self.home = home if home is not None else get_llmem_home()
        self.retriever = Retriever.from_settings(store, self.config.retrieval, embedder)

    # -- reads ----------------------------------------------------------------------------
    def overview(self, *, details: bool = False) -> dict[str, Any]:
        """Everything the main page shows. ``details``: each listed memory carries its
        provenance too (the static report, which cannot ask later)."""
        limit = self.config.viewer.list_limit
        stats = self.store.stats()
        types = sorted({*DEFAULT_MEMORY_TYPES, *stats["by_type"]})
        durable = [t for t in types if t != EPISODE_TYPE]
        memories = self.store.list_all(type=durable, limit=limit, sort="created", order="desc")
        episodes = self.store.list_all(type=EPISODE_TYPE, limit=limit, sort="created")
        names = project_names.display_names(self.store.db)
        listed = self._shared([slim(m, names) for m in memories])
        forgotten = [slim(m, names) for m in browse.forgotten(self.store.db, FORGOTTEN_LIMIT)]
        stale = [
            {**slim(m, names), "stale_reason": m["stale_reason"]}
            for m in review.stale_list(self.store)
        ]
        out: dict[str, Any] = {
            "generated_at": now_iso(),
            "db_path": str(self.store.db_path),
            "totals": {
                "active": stats["active"],
                "forgotten": stats["invalidated"],
                "expired": stats["expired"],
                "inbox": stats["inbox"],
                "listed": len(listed),
                "conversations": stats["by_type"].get(EPISODE_TYPE, 0),
                "conversations_listed": len(episodes),
                "stale": len(stale),
            },
            "counts": [
                {"project": p, "name": project_label(p, names), "type": t, "count": n}
                for p, t, n in browse.counts_by_project_type(self.store.db)
            ],
            "types": types,
            "episode_type": EPISODE_TYPE,
            "memories": listed,
            "conversations": [slim(m, names) for m in episodes],
            "forgotten": forgotten,
            "stale": stale,
            "inbox": [
                {
                    k: item.get(k)
                    for k in ("id", "content", "source", "attention_score", "created_at")
                }
                for item in self.store.list_inbox(INBOX_LIMIT)
            ],
            "usage": ModelBudget(self.store, BudgetLimits.from_config(self.config)).report(),
            "dream": self.dream_status(),
            "team": self.team_status(),
        }
        if details:
            whole = [
                *memories,
                *episodes,
                *self.store.get_many([f["id"] for f in forgotten]).values(),
                *self.store.get_many([m["id"] for m in stale]).values(),
            ]
            out["provenance"] = {m["id"]: self.provenance(m) for m in whole}
        return out

    def report_search(self, overview: dict[str, Any], limit: int) -> dict[str, Any]:
        """The report's search index over the newest ``limit`` live memories (the listed
        ones at least); those not listed go to ``overview["searchable"]`` (shown as search
        results, without provenance)."""
        listed = [m["id"] for m in overview["memories"]]
        seen = set(listed)
        more = self.store.list_all(limit=limit, sort="created", order="desc") if limit else []
        extra = [m for m in more if m["id"] not in seen]
        names = project_names.display_names(self.store.db)
        overview["searchable"] = [slim(m, names) for m in extra]
        return self.search_index([*listed, *(m["id"] for m in extra)])

    def search_index(self, memory_ids: list[str]) -> dict[str, Any]:
        """The static report's search index over ``memory_ids`` (`search_index.build`)."""
        found = self.store.get_many(memory_ids)
        return build(self.store, [found[i] for i in memory_ids if i in found], self.retriever)

    def memory(self, memory_id: str) -> dict[str, Any]:
        """One memory, whole, with its provenance and relations."""
        if not isinstance(memory_id, str) or not memory_id:
            raise ValidationError("give a memory id")
        mem = self.store.get(self.store.resolve_id(memory_id))
        if mem is None:  # pragma: no cover - resolve_id found it
            raise NotFoundError(f"no memory with id {memory_id!r}")
        names = project_names.display_names(self.store.db)
        (one,) = self._shared([slim(mem, names)])
        return {"memory": one, "provenance": self.provenance(mem)}

    def provenance(self, mem: dict[str, Any]) -> dict[str, Any]:
        """Where a memory came from: session (and its agent), author, time, source,
        messages, the episode it was learned from, its relations, and the code it cites
        with the state of each citation (docs/citations.md)."""
        sid = mem.get("session_id")
        rec = session_state.find(self.store.db, sid) if sid else None
        episode = browse.episode_of(self.store.db, mem)
        return {
            "session_id": sid,
            "session_agent": rec.agent if rec else None,
            "session_title": rec.title if rec else None,
            "entered_by": mem.get("entered_by"),
            "created_at": mem.get("created_at"),
            "source": mem.get("source"),
            "source_message_ids": list(mem.get("source_message_ids") or [])[:50],
            "episode": None
            if episode is None
            else {
                "id": episode["id"],
                "created_at": episode["created_at"],
                "content": cap(episode["content"], EPISODE_CHARS),
            },
            "relations": self.store.get_relations(mem["id"]),
            **citations.shown(citations.of_memory(self.store.db, mem["id"])),
        }

    def search(
        self,
        query: str,
        *,
        project: str | None = None,
        type: str | None = None,
        kind: str | None = None,
    ) -> dict[str, Any]:
        """The retriever's hits for ``query`` (a person browsing: no access counts).
        ``kind``: only durable memories ("memories") or only episodes ("conversations"),
        as the tab searched lists them; None: both."""
        if not isinstance(query, str) or not query.strip():
            raise ValidationError("give something to search for")
        if kind not in (None, "", *KINDS):
            raise ValidationError(f"unknown kind: use {' or '.join(KINDS)}")
        if project:
            project = project_names.resolve(self.store.db, project)
        types: str | list[str] | None = type or None
        if kind == "conversations":
            types = EPISODE_TYPE if types in (None, EPISODE_TYPE) else []
        elif kind == "memories" and types == EPISODE_TYPE:
            types = []
        elif kind == "memories" and types is None:
            types = sorted(browse.live_types(self.store.db) - {EPISODE_TYPE})
        if types == []:  # nothing of that kind (a type the tab does not list): no hits
            return {"query": query, "mode": "none", "hits": []}
        flt = MemoryFilter(type=types, project=project or None)
        hits, mode = self.retriever.find_hybrid_or_keywords(
            query, flt, limit=SEARCH_LIMIT, track_access=False
        )
        attach_passages(hits, query, self.config.retrieval.passage_chars)
        names = project_names.display_names(self.store.db)
        return {
            "query": query,
            "mode": mode,
            "hits": self._shared(
                [
                    {**slim(h.memory, names), "score": round(h.score, 4), "passage": h.passage}
                    for h in hits
                ]
            ),
        }

    def _shared(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Each listed memory with ``shared``: whether it is shared with a team hub, and
        ``stale_reason`` when its cited code changed (None otherwise)."""
        ids = team_store.shared_ids(self.store.db, [m["id"] for m in items])
        stale = citation_review.stale_reasons(self.store.db, [m["id"] for m in items])
        for m in items:
            m["shared"] = m["id"] in ids
            m["stale_reason"] = stale.get(m["id"])
        return items

    def team_status(self) -> dict[str, Any]:
        """The team state the page shows (docs/team.md): projects synced, what waits to go,
        the last pull and the last error; read from the local store only (no hub call)."""
        enrolled = team_store.projects(self.store.db)
        pulls = [p.last_pull for p in enrolled if p.last_pull]
        errors = [p.last_error for p in enrolled if p.last_error]
        return {
            "projects": len(enrolled),
            "shared": sum(p.shared for p in enrolled),
            "outbox": sum(p.outbox for p in enrolled),
            "last_pull": max(pulls) if pulls else None,
            "last_error": errors[-1] if errors else None,
        }

    def dream_status(self) -> dict[str, Any]:
        path = self.home / DREAM_REPORT
        try:
            st = path.lstat()
        except OSError:
            return {"exists": False}
        return {"exists": path.is_file() and not path.is_symlink(), "size": st.st_size}

    def dream_report(self) -> str | None:
        """The dream cycle's latest report (its own self-contained page), or None. Never
        read through a symlink planted in LLMEM_HOME."""
        path = self.home / DREAM_REPORT
        if not path.is_file() or path.is_symlink():
            return None
        with contextlib.suppress(OSError, ValidationError):
            return read_regular_file(path, MAX_DREAM_REPORT_CHARS)
        return None

    # -- writes ---------------------------------------------------------------------------
    def edit(
        self,
        memory_id: str,
        *,
        content: str | None = None,
        type: str | None = None,
        tags: str | list[str] | None = None,
    ) -> dict[str, Any]:
        """Change a memory's content, type or tags (validated and redacted by the store)."""
        full = self.store.resolve_id(_id(memory_id))
        for name, value in (("content", content), ("type", type)):
            if value is not None and not isinstance(value, str):
                raise ValidationError(f"{name} must be a string")
        if tags is not None and not isinstance(tags, str | list):
            raise ValidationError("tags must be a string or a list")
        self.store.update(full, content=content, type=type, tags=tags)
        return self.memory(full)

    def forget(self, memory_id: str, reason: str | None = None) -> dict[str, Any]:
        full = self.store.resolve_id(_id(memory_id))
        if reason is not None and not isinstance(reason, str):
            raise ValidationError("reason must be a string")
        if not self.store.invalidate(full, reason or "forgotten in the viewer"):
            raise ValidationError(f"memory {full} is already forgotten")
        return self.memory(full)

    def confirm_citations(self, memory_id: Any) -> dict[str, Any]:
        """The person says a stale memory still holds (`review.confirm`)."""
        done = review.confirm(self.store, memory_id)
        return {**self.memory(done["id"]), "kept": done["kept"], "dropped": done["dropped"]}

    def fix_citation(self, memory_id: Any, spec: Any, replace: Any = None) -> dict[str, Any]:
        """A stale memory's citation points at ``spec`` now (`review.fix`)."""
        done = review.fix(self.store, memory_id, spec, replace)
        return {**self.memory(done["id"]), "citation": done["citation"]}

    def restore(self, memory_id: str) -> dict[str, Any]:
        full = self.store.resolve_id(_id(memory_id))
        if not browse.restore(self.store.db, full):
            raise ValidationError(f"memory {full} is not forgotten")
        return self.memory(full)


def _id(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValidationError("give a memory id")
    return value
