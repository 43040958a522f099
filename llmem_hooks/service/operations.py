"""QueryService: the operations agents and hooks ask of the memory, in one place.

``recall`` (a prompt -> a ready-to-inject block of what this session was not given yet),
``search``, ``remember``, ``forget``, ``get``, ``timeline`` and ``status``, each a method
returning a small JSON-able dict (the shapes: docs/query-service.md, the contract the
OpenCode plugin, the Copilot hook and the MCP server code against).

Two homes, one behaviour: the sidecar serves one warm instance on its Unix socket
(`service_socket`), which keeps the embedding cache, the project keys and SQLite's
statement cache between prompts; a client that finds no sidecar builds one in-process
(`service_client.query`). What recall already gave a session is kept in the store
(``recall_given``), so both homes agree.

Per-prompt recall, step by step (`recall`):
1. the floor on the prompt: small talk ("thanks", "continue") and questions of general
   knowledge (`general`: "explain how postgres vacuum works") -> nothing; its content
   words (no stop words) fewer than ``recall.min_content_words`` and no rare one -> nothing;
2. `Retriever.find` on those words (keyword; plus semantic when an embedder answers),
   within the caller's project plus global memories, minus what the session was given
   (by recall, or in its start-of-session context file);
3. the floor on each hit: it holds at least ``recall.min_coverage`` of the prompt's
   content words and adds to the session's best answer so far (`HAD_MARGIN`), or is a
   semantic neighbour within ``recall.semantic_max_distance``;
4. one line per hit, ``- [<short id>] (<type>, <date>) <text>``, best first, within
   ``recall.budget_tokens`` (~4 characters a token), between ``<llmem-recall>`` lines
   that `extraction.transcript` strips, so the block is never learned back. Every line
   is defused (`markers.neutralize`): no memory text can close the block early.

``get``, ``forget`` and ``timeline`` reach the caller's project and global memories; an
id of another project only with ``any_project`` (docs/security.md, "Id scope").

Reads run on a read-only connection of their own (`_reading`: a small pool of read-only
`MemoryStore`s on the same file; WAL lets them read side by side), so a costly search on
one link never waits for, or holds up, a recall on another; writes (what recall gave a
session, ``remember``, ``forget``) go through the service's one store. Each search stops
after `Retriever.time_limit` seconds (SQLite's progress handler): ``search`` answers
``bad_params`` with the reason, ``recall`` answers nothing (reason ``too_slow``).
"""

from __future__ import annotations

import inspect
import logging
import math
import os
import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any

from ..config import Config, RecallSettings
from ..errors import NotFoundError, SearchTimeout, ValidationError
from ..evidence.cite import capture_specs
from ..extraction.smalltalk import is_small_talk
from ..markers import RECALL_CLOSE, RECALL_HEADER, RECALL_OPEN, neutralize
from ..paths import get_context_dir
from ..project import project_key, project_name
from ..redact import find_secrets
from ..registry import get_registered_types
from ..search.doc_counts import DocCounts
from ..search.matching import terms_held
from ..search.relevance import Relevance, idf_weights, weighed_relevance
from ..search.retriever import Retriever, SearchHit
from ..session.context import session_context
from ..store import MemoryFilter, MemoryStore
from ..store import citation_review as review
from ..store import citations as cited
from ..store import projects as project_names
from ..store import recall as given
from ..store import sessions as session_state
from ..store import team as team_store
from ..store.db import is_interrupted
from ..text.query import MAX_QUERY_CHARS, ParsedQuery, parse_query, quote
from ..timestamps import to_iso
from . import file_recall as on_file
from . import protocol as proto
from .entry import clip_text
from .params import (  # noqa: F401 - ServiceError is also this module's (callers import it here)
    MAX_GET_IDS,
    ServiceError,
    _bounded,
    _id_list,
    _no_nul,
    _require,
    _text,
)
from .prompts import MAX_PROMPT_CHARS, MAX_PROMPT_WORDS, asks_general, prompt_words
from .start_contexts import StartContexts
from .topic import SessionTopics, refers_back

if TYPE_CHECKING:
    from ..model.embed import EmbeddingEngine

log = logging.getLogger(__name__)

CHARS_PER_TOKEN = 4
LINE_CHARS = 160  # one result line of search / timeline
RARE_MIN_COUNT = 3  # a word in at most this many memories is rare in any store
MAX_LIMIT = 50
MAX_AROUND = 20
GIVEN_RETENTION_DAYS = 30
# Recall ranks at most the newest this many rows its words match (`MemoryFilter.rank_newest`):
# the p95 of issue 18's 10k + 100k store with everyday words in half the rows.
RECALL_RANK_NEWEST = 3000
WRITE_BUSY_MS = 1000  # a recall waits this long at most for the sidecar's writer
MAX_IDLE_READERS = 4  # read connections kept open between requests
STATUS_COUNT_TTL_S = 300.0  # `status` recounts the memories at most this often
TYPE_LABELS = {"conversation": "episode"}
# A word no memory holds weighs as if this share of the memories (at least 2) held it
# (`relevance.idf_weights`): an unknown topic counts against a hit, but less than a known
# rare word (an unknown word is as often the asker's own wording: "release" for deploy).
UNKNOWN_WORD_DF = 2.0
UNKNOWN_SHARE = 0.01
# A new memory must answer the prompt this much better than the best the session has
# (its context, earlier blocks), counting the words that best one holds at
# `relevance.KNOWN_WEIGHT`: else the session has the answer, and the runners-up would be
# noise. A sibling sharing the words of what the session has needs 2.6 times its share;
# a memory about the prompt's other words 1.3 times (bench/recall_blocks.py, dev sets).
HAD_MARGIN = 1.3
# ... among the memories it was given last, this many (its context and recent blocks: what
# it has at hand; reading every memory of a long session costs milliseconds a prompt)
HAD_AT_HAND = 60


class QueryService:
    """The operations of the module doc over one `MemoryStore`. Thread-safe: reads run on
    a read-only connection per request in flight (`_reading`), writes on the store, which
    serializes its connection; the few caches here take their own lock."""

    def __init__(
        self,
        store: MemoryStore,
        config: Config | Mapping[str, Any] | None = None,
        *,
        embedder: EmbeddingEngine | None = None,
        served_by: str = "in-process",
        owns_store: bool = False,
        readers: bool | None = None,
    ) -> None:
        self.store = store
        # Read connections of its own (`_reading`): by default when the store is its own
        # (a caller's store is shared as given: the caller closes what it opened).
        self._use_readers = owns_store if readers is None else readers
        self.settings = Config.coerce(config)
        self.recall_settings: RecallSettings = self.settings.recall
        self.embedder = embedder
        self.served_by = served_by
        self._owns_store = owns_store
        self._counts = DocCounts()
        self._topics = SessionTopics()  # each session's last topic (`topic`: follow-ups)
        self.retriever = self._retriever(store)
        self.context_dir = get_context_dir(self.settings.context.dir)
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._idle: list[tuple[MemoryStore, Retriever]] = []
        self._local = threading.local()  # the reader this thread's request holds
        self._closed = False
        self._count: tuple[int, float, int] | None = None  # (count, when, max seq then)
        self._named: set[str] = set()  # project keys whose name this service checked
        self._starts = StartContexts()  # each project's start context, per store version

    @classmethod
    def open(
        cls,
        config: Config | Mapping[str, Any] | None = None,
        *,
        served_by: str = "in-process",
        embeddings: bool = True,
    ) -> QueryService:
        """A service with a store of its own (config's ``memory`` section), and the
        embedding engine when ``embeddings`` and one is configured (short timeouts and
        the shared back-off: a prompt is waiting). Close it with `close`."""
        settings = Config.coerce(config)
        store = MemoryStore.from_config(settings)
        store.set_busy_timeout(WRITE_BUSY_MS)  # reads never wait (WAL); a write briefly
        embedder = None
        if embeddings:
            from ..model.embed import embedder_from_config

            embedder = embedder_from_config(settings, interactive=True)
        try:
            cutoff = to_iso(datetime.now(UTC) - timedelta(days=GIVEN_RETENTION_DAYS))
            given.prune_given(store.db, cutoff)
        except Exception as exc:  # a busy database: next time
            log.debug("recall_given retention skipped: %s", exc)
        # One call in a process (the in-process fallback) needs no second connection.
        readers = served_by != "in-process"
        return cls(
            store,
            settings,
            embedder=embedder,
            served_by=served_by,
            owns_store=True,
            readers=readers,
        )

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for store, _ in idle:
            store.close()
        if self.embedder is not None:
            self.embedder.close()
        if self._owns_store:
            self.store.close()

    # -- read connections -------------------------------------------------------------
    @contextmanager
    def _reading(self) -> Iterator[None]:
        """Run this request's reads on a read-only store of its own (module doc): taken
        from the idle ones or opened, given back after. A store in memory (tests) or one
        whose twin cannot open is shared instead (one connection behind its lock)."""
        if getattr(self._local, "reader", None) is not None:
            yield  # nested: the request holds one already
            return
        with self._lock:
            reader = self._idle.pop() if self._idle else None
        if reader is None:
            reader = self._open_reader()
        elif self.embedder is not None:
            reader[0].vectors.refresh()  # the writer may have set the index up since
        self._local.reader = reader
        try:
            yield
        finally:
            self._local.reader = None
            if reader[0] is not self.store:
                with self._lock:
                    keep = not self._closed and len(self._idle) < MAX_IDLE_READERS
                    if keep:
                        self._idle.append(reader)
                if not keep:
                    reader[0].close()

    def _open_reader(self) -> tuple[MemoryStore, Retriever]:
        if not self._use_readers or str(self.store.db_path) == ":memory:":
            return self.store, self.retriever
        try:
            store = MemoryStore(
                self.store.db_path,
                read_only=True,
                load_vec=self.store.vectors.enabled,
                prefilter_threshold=self.store.vectors.prefilter_threshold,
            )
        except Exception as exc:  # e.g. a schema the writer has not upgraded yet
            log.debug("query service: no read connection of its own: %s", exc)
            return self.store, self.retriever
        retriever = self._retriever(store)
        retriever.time_limit = self.retriever.time_limit
        return store, retriever

    def _retriever(self, store: MemoryStore) -> Retriever:
        """A retriever on ``store`` sharing the service's word counts (`DocCounts`)."""
        retriever = Retriever.from_settings(store, self.settings.retrieval, self.embedder)
        retriever.counts = self._counts
        return retriever

    @property
    def _rstore(self) -> MemoryStore:
        """The store this thread reads from: its request's reader, else the main one."""
        reader = getattr(self._local, "reader", None)
        return self.store if reader is None else reader[0]

    @property
    def _rretriever(self) -> Retriever:
        reader = getattr(self._local, "reader", None)
        return self.retriever if reader is None else reader[1]

    def __enter__(self) -> QueryService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- dispatch -----------------------------------------------------------------------
    def call(self, method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
        """Run ``method`` with ``params`` (the socket's and the fallback's one door):
        unknown methods and parameters, wrong types and bad values raise `ServiceError`
        with a protocol code; nothing else escapes as anything but ``internal``."""
        fn = self._methods().get(method) if isinstance(method, str) else None
        if fn is None:
            raise ServiceError(proto.UNKNOWN_METHOD, f"unknown method {str(method)[:60]!r}")
        if params is None:
            params = {}
        if not isinstance(params, Mapping):
            raise ServiceError(proto.BAD_PARAMS, "params must be an object")
        if proto.has_lone_surrogate(dict(params)):
            raise ServiceError(proto.BAD_PARAMS, "params hold a lone UTF-16 surrogate")
        allowed = METHOD_PARAMS[method]
        unknown = sorted(set(params) - set(allowed))
        if unknown:
            raise ServiceError(proto.BAD_PARAMS, f"unknown parameter(s): {', '.join(unknown)}")
        missing = [
            name
            for name, param in inspect.signature(fn).parameters.items()
            if param.default is inspect.Parameter.empty and name not in params
        ]
        if missing:  # checked here: a TypeError from inside a method is a bug, not bad input
            raise ServiceError(
                proto.BAD_PARAMS, f"missing required parameter(s): {', '.join(missing)}"
            )
        try:
            result: dict[str, Any] = fn(**params)
        except NotFoundError as exc:
            raise ServiceError(proto.NOT_FOUND, str(exc)) from None
        except ValidationError as exc:
            raise ServiceError(proto.BAD_PARAMS, str(exc)) from None
        return result

    def _methods(self) -> dict[str, Callable[..., dict[str, Any]]]:
        return {
            "recall": self.recall,
            "start": self.start,
            "search": self.search,
            "remember": self.remember,
            "forget": self.forget,
            "get": self.get,
            "timeline": self.timeline,
            "status": self.status,
            "file_recall": partial(on_file.file_recall, self),
        }

    # -- scoping ------------------------------------------------------------------------
    def scope(
        self, project: str | None, directory: str | None, session_id: str | None = None
    ) -> str | None:
        """The caller's project key: ``project`` as given, else the one of ``directory``
        (`project.project_key`, cached per folder), else the session's recorded project;
        None: no project known (every memory may match)."""
        if project is not None:
            return _no_nul(_text(project, "project", 500), "project")
        if directory is not None:
            return project_key(_no_nul(_text(directory, "directory", 4096), "directory"))
        if session_id:
            rec = session_state.find(self._rstore.db, session_id)
            if rec is not None:
                return rec.project
        return None

    def _learn_name(self, project: str | None, directory: str | None) -> None:
        """Record the name of a caller's project from its directory (`store.projects`):
        at a session's start and on the agent tools, not on every prompt's recall; once
        per key and service, a write only when the name is new or changed."""
        if project is not None or directory is None:
            return
        try:
            key = self.scope(None, directory)
            if key is None or key in self._named:
                return
            self._named.add(key)
            name = project_name(directory)
            if name is not None and project_names.name_of(self._rstore.db, key) != name:
                project_names.set_name(self.store.db, key, name)
                self._starts.clear()
        except Exception as exc:  # a name is never worth a failed request
            log.debug("project of %s not named: %s", directory, exc)

    def _find(self, query: str, flt: MemoryFilter, limit: int) -> list[SearchHit]:
        """Hybrid if the model answers, else keywords (`Retriever.find_hybrid_or_keywords`)."""
        return self._rretriever.find_hybrid_or_keywords(
            query, flt, limit=limit, track_access=False
        )[0]

    # -- recall -------------------------------------------------------------------------
    def recall(
        self,
        session_id: str,
        prompt: str,
        project: str | None = None,
        directory: str | None = None,
        budget_tokens: int | None = None,
    ) -> dict[str, Any]:
        """The block to put in front of ``prompt``: ``{"block": str ("" for nothing),
        "ids": [short ids], "memory_ids": [full ids], "tokens": int, "reason": str}``."""
        with self._reading():
            try:  # the whole recall's reads within the search's time limit
                with self._rstore.time_limit(self._rretriever.time_limit):
                    return self._recall(session_id, prompt, project, directory, budget_tokens)
            except Exception as exc:
                if not isinstance(exc, SearchTimeout) and not is_interrupted(exc):
                    raise
                log.info("recall stopped at its time limit: %s", exc)
                return _nothing("too_slow")

    def start(
        self,
        session_id: str,
        prompt: str | None = None,
        project: str | None = None,
        directory: str | None = None,
    ) -> dict[str, Any]:
        """What a new session gets before its first turn, in one call (the Copilot hook's
        ``sessionStart``, the OpenCode plugin's first call): ``{"context": str}``, the
        session-start context as the coordinator writes it to the session's context file
        (`context.session_context`; the sidecar still writes that file when it sees the
        session), recorded as given to the session, and with a ``prompt`` the recall
        block for it (`recall`'s fields), which leaves out what the context gives. The
        agent waits for neither the sidecar's watcher nor a second round trip."""
        session_id = _text(session_id, "session_id", 500)
        if prompt is not None:
            prompt = _require(prompt, "prompt", str)
        with self._reading():
            scope = self.scope(project, directory, session_id)
            self._learn_name(project, directory)
            context, shown = self._start_context(scope)
            self._mark(session_id, shown)
            result = _nothing("no_prompt")
            if prompt is not None:
                try:
                    with self._rstore.time_limit(self._rretriever.time_limit):
                        result = self._recall(session_id, prompt, scope, None, None)
                except Exception as exc:
                    if not isinstance(exc, SearchTimeout) and not is_interrupted(exc):
                        raise
                    log.info("recall stopped at its time limit: %s", exc)
                    result = _nothing("too_slow")
        return {"context": context, **result}

    def _start_context(self, scope: str | None) -> tuple[str, list[str]]:
        """`session_context` for ``scope``, once per store version (`start_contexts`)
        when the store is the service's own: a caller's store may be written through the
        very connection the version is read on."""
        budget, hide = self.settings.context.budget_tokens, self.settings.citations.hide_stale
        build = partial(session_context, self._rstore, scope, budget, hide_stale=hide)
        if not self._owns_store:
            return build()
        return self._starts.get((scope, budget, hide), self.store.data_version(), build)

    def _recall(
        self,
        session_id: str,
        prompt: str,
        project: str | None,
        directory: str | None,
        budget_tokens: int | None,
    ) -> dict[str, Any]:
        session_id = _text(session_id, "session_id", 500)
        prompt = _require(prompt, "prompt", str)
        cfg = self.recall_settings
        budget = cfg.budget_tokens if budget_tokens is None else budget_tokens
        budget = _bounded(budget, "budget_tokens", 0, 100_000)
        if not cfg.enabled or budget == 0:
            return _nothing("disabled")
        if len(prompt) <= MAX_PROMPT_CHARS and is_small_talk(prompt):  # as extraction's rule
            return _nothing("below_floor")  # "you're a star"
        if asks_general(prompt):
            return _nothing("general")
        own = prompt_words(prompt)
        terms = own
        before = self._topics.last(session_id)
        follow_up = bool(before and own and refers_back(prompt, own))
        if follow_up:  # "and staging?": read with the last topic, about what it names
            terms = [*own, *(t for t in before if t not in own)][:MAX_PROMPT_WORDS]
        self._topics.note(session_id, terms)
        df = self._doc_freq(terms)
        if not self._passes_floor(terms, df):
            return _nothing("below_floor")
        scope = self.scope(project, directory, session_id)
        exclude = given.given_ids(self._rstore.db, session_id)
        flt = MemoryFilter(
            project=scope, exclude_ids=tuple(exclude), rank_newest=RECALL_RANK_NEWEST
        )
        query = " ".join(self._search_words(terms, df))
        hits = self._find(query, flt, limit=max(cfg.max_results * 2, 10))
        if self.settings.citations.hide_stale:  # code they cite changed: one query for all
            stale = review.stale_among(self._rstore.db, [h.id for h in hits])
            hits = [h for h in hits if h.id not in stale]
        parsed = parse_query(" ".join(terms))
        relevance = self._relevance(parsed, own if follow_up else ())
        # What the session has: the best of what it was given sets the bar too, so a
        # question its context already answers gets nothing rather than the runners-up.
        at_hand = given.latest_given_texts(self._rstore.db, session_id, HAD_AT_HAND)
        had, answer = max(
            ((relevance(m, None), m) for m in at_hand), key=lambda x: x[0], default=(0.0, None)
        )
        if not hits:
            return _nothing("already_given" if had >= cfg.min_coverage else "no_match")
        fresh = relevance  # what a hit adds to the session's best answer so far
        if answer is not None and had > 0:
            known = {t for t, h in zip(parsed.terms, terms_held(parsed)(answer), strict=True) if h}
            fresh = self._relevance(parsed, own if follow_up else (), known)
        scored = [(hit, relevance(hit.memory, hit.corrections)) for hit in hits]
        best = max(r for _, r in scored)
        kept: list[SearchHit] = []
        for hit, rel in scored:
            semantic = hit.distance is not None and hit.distance <= cfg.semantic_max_distance
            floors = rel >= cfg.min_coverage and rel >= cfg.relative_floor * best
            if semantic or (floors and fresh(hit.memory, hit.corrections) >= HAD_MARGIN * had):
                kept.append(hit)
        block, shown = self._render(kept, terms, budget)
        if not shown:
            if kept:
                return _nothing("over_budget")
            return _nothing("already_given" if had >= cfg.min_coverage else "below_floor")
        full = [h.id for h in shown]
        self._mark(session_id, full)
        return {
            "block": block,
            "ids": [self._short(mid) for mid in full],
            "memory_ids": full,
            "tokens": math.ceil(len(block) / CHARS_PER_TOKEN),
            "reason": "recalled",
        }

    def _relevance(
        self, parsed: ParsedQuery, required: Sequence[str] = (), known: Collection[str] = ()
    ) -> Relevance:
        """How much of the prompt a memory answers (`relevance.weighed_relevance`), each
        word weighed by its rarity in this store (a ``known`` word less)."""
        size = self._rstore.size_hint()
        weights = idf_weights(
            parsed.terms,
            self._doc_freq(parsed.terms),
            size,
            max(UNKNOWN_WORD_DF, UNKNOWN_SHARE * size),
        )
        return weighed_relevance(parsed, weights, required, known)

    def _doc_freq(self, terms: Sequence[str]) -> dict[str, int]:
        """How many memories hold each word (stems count), counted up to the common-word
        cap (more is "common" whatever the number) and cached in the warm sidecar
        (`DocCounts`)."""
        cap = int(self._cap(self.recall_settings.common_word_share))
        return {t: self._counts.count(self._rstore, quote(t), cap) for t in terms}

    def _cap(self, share: float) -> float:
        return max(RARE_MIN_COUNT, share * self._rstore.size_hint())

    def _passes_floor(self, terms: Sequence[str], df: Mapping[str, int]) -> bool:
        """Enough topic to search on: `min_content_words` content words, or a rare one
        (in at most ``rare_word_share`` of the memories, and never fewer than
        `RARE_MIN_COUNT`, so a small store is not all "common")."""
        if not terms:
            return False
        if len(terms) >= self.recall_settings.min_content_words:
            return True
        cap = self._cap(self.recall_settings.rare_word_share)
        return any(0 < df[t] <= cap for t in terms)

    def _search_words(self, terms: Sequence[str], df: Mapping[str, int]) -> list[str]:
        """The words recall searches on: the prompt's words minus those in more than
        ``common_word_share`` of the memories (they say little, and ranking every memory
        that holds them costs tens of milliseconds on a large store); the rarest word
        when all are common. Unknown words stay (they may be typos the search corrects).
        The coverage floor still counts every word of the prompt."""
        cap = self._cap(self.recall_settings.common_word_share)
        kept = [t for t in terms if df[t] <= cap]
        if kept:
            return kept
        store = self._rstore
        top = store.size_hint()  # exact counts (cached): `df` stops at the cap
        return [min(terms, key=lambda t: self._counts.count(store, quote(t), top))]

    def _render(
        self, hits: Sequence[SearchHit], terms: Sequence[str], budget_tokens: int
    ) -> tuple[str, list[SearchHit]]:
        head = f"{RECALL_OPEN}\n{RECALL_HEADER} (llmem-hooks; full text: memory_get with the id):\n"
        tail = RECALL_CLOSE
        room = budget_tokens * CHARS_PER_TOKEN - len(head) - len(tail)
        lines: list[str] = []
        shown: list[SearchHit] = []
        for hit in hits:
            if len(shown) >= self.recall_settings.max_results:
                break
            mem = hit.memory
            label = TYPE_LABELS.get(mem["type"], mem["type"])
            prefix = f"- [{self._short(hit.id)}] ({label}, {str(mem['created_at'])[:10]}) "
            limit = min(self.recall_settings.entry_chars, room - len(prefix) - 1)
            if limit < 40:
                continue
            text = clip_text(str(mem["content"]), terms, limit)
            if find_secrets(text):
                continue  # the store redacts; never put something that still looks like one
            line = neutralize(prefix + text) + "\n"  # every field of the line, not only its text
            lines.append(line)
            shown.append(hit)
            room -= len(line)
        return head + "".join(lines) + tail, shown

    def _mark(self, session_id: str, ids: Sequence[str]) -> None:
        """Record what the session was given; a busy database costs a possible repeat
        later, never this answer."""
        try:
            given.mark_given(self.store.db, session_id, ids)
        except Exception as exc:
            log.warning("recall: could not record what session %s was given: %s", session_id, exc)

    def _short(self, memory_id: str) -> str:
        return given.short_id(self._rstore.db, memory_id)

    # -- agent tools ----------------------------------------------------------------------
    def search(
        self,
        query: str | None = None,
        limit: int = 10,
        type: str | None = None,
        project: str | None = None,
        directory: str | None = None,
        path: str | None = None,
    ) -> dict[str, Any]:
        """``{"results": [{"id", "type", "line", ..., "score"}]}``, best first; the caller's
        project plus global memories. An unknown ``type`` is an error (matching nothing reads
        as "no such memory"). With a ``path``: what is known about that file."""
        limit = _bounded(limit, "limit", 1, MAX_LIMIT)
        if type is not None:
            type = _text(type, "type", 100)
            if type not in get_registered_types():
                known = ", ".join(sorted(get_registered_types()))
                raise ServiceError(proto.BAD_PARAMS, f"unknown memory type {type!r} ({known})")
        if path is not None:
            return on_file.search_file(self, path, query, limit, type, project, directory)
        if query is None:
            raise ServiceError(proto.BAD_PARAMS, "missing required parameter(s): query")
        query = _text(query, "query", MAX_QUERY_CHARS)
        with self._reading():
            self._learn_name(project, directory)
            flt = MemoryFilter(type=type, project=self.scope(project, directory))
            try:
                hits = self._find(query, flt, limit)
            except SearchTimeout as exc:
                raise ServiceError(proto.BAD_PARAMS, str(exc)) from None
            terms = parse_query(query).terms
            stale = review.stale_reasons(self._rstore.db, [h.id for h in hits])
            return {"results": [self._hit(h, terms, stale.get(h.id)) for h in hits]}

    def _hit(self, hit: SearchHit, terms: Sequence[str], stale: str | None) -> dict[str, Any]:
        """A search result line, with its score, project, and stale mark (if its code changed)."""
        score = round(float(hit.score), 4)
        project = hit.memory.get("project")
        out = {
            **self._line(hit.memory, terms),
            "project": project,
            "project_name": project_names.name_of(self._rstore.db, project) if project else None,
            "score": score,
        }
        if stale is not None:
            out.update(citation_state="stale", stale_reason=neutralize(stale))
        return out

    def _line(self, mem: Mapping[str, Any], terms: Sequence[str] = ()) -> dict[str, Any]:
        return {
            "id": self._short(mem["id"]),
            "type": mem["type"],
            "line": clip_text(str(mem["content"]), terms, LINE_CHARS),
            "session_id": mem.get("session_id"),
            "created_at": mem.get("created_at"),
        }

    def remember(
        self,
        content: str,
        type: str | None = None,
        tags: list[str] | str | None = None,
        project: str | None = None,
        directory: str | None = None,
        session_id: str | None = None,
        agent: str | None = None,
        share: bool | None = None,
        citations: list[str] | None = None,
    ) -> dict[str, Any]:
        """Store a memory through `MemoryStore.add` (redaction, dedupe) with its
        ``citations`` (docs/citations.md): ``{"id", "status": "stored" | "duplicate" |
        "rejected", "reason"?, "redacted"}``; in the caller's project; ``share``: its team's."""
        if share is not None and not isinstance(share, bool):
            raise ServiceError(proto.BAD_PARAMS, "share must be true or false")
        content = _require(content, "content", str)
        kind = "fact" if type is None else _text(type, "type", 100)
        if tags is not None and not (
            isinstance(tags, str)
            or (isinstance(tags, list) and all(isinstance(t, str) for t in tags))
        ):
            raise ServiceError(proto.BAD_PARAMS, "tags must be a list of strings")
        if session_id is not None:
            session_id = _text(session_id, "session_id", 500)
        who = "agent" if agent is None else _text(agent, "agent", 100)
        cites = capture_specs(directory, citations)  # a bad one: bad_params, nothing stored
        scope = self.scope(project, directory, session_id)
        self._learn_name(project, directory)
        secrets = find_secrets(content) if isinstance(content, str) else []
        vector = None
        if self.embedder is not None and not secrets:
            try:
                vector = self.embedder.embed(content)
            except Exception as exc:
                log.debug("remember without an embedding: %s", exc)
        new_id = str(uuid.uuid4())
        try:
            with self.store.atomic():
                stored = self.store.add(
                    kind,
                    content,
                    tags=tags,
                    project=scope,
                    session_id=session_id,
                    entered_by=who,
                    source="agent",
                    embedding=vector,
                    id=new_id,
                )
                cited.add(self.store.db, stored, cites)
        except ValidationError as exc:
            return {"id": None, "status": "rejected", "reason": str(exc), "redacted": secrets}
        self._starts.clear()
        if session_id:  # what the session just said needs no recalling to it
            self._mark(session_id, [stored])
        status = "stored" if stored == new_id else "duplicate"
        out: dict[str, Any] = {"id": self._short(stored), "status": status, "redacted": secrets}
        return {**out, **team_store.share_outcome(self.store, stored)} if share else out

    def _reach(
        self,
        project: str | None,
        directory: str | None,
        session_id: str | None,
        any_project: bool | None,
    ) -> Callable[[Mapping[str, Any]], bool]:
        """Which memories an id may reach: the caller's project (``project``, else that of
        ``directory`` or the session) and global ones; every project only with
        ``any_project`` (or when no project is known at all)."""
        if any_project is not None and not isinstance(any_project, bool):
            raise ServiceError(proto.BAD_PARAMS, "any_project must be true or false")
        if session_id is not None:
            session_id = _text(session_id, "session_id", 500)
        scope = None if any_project else self.scope(project, directory, session_id)
        if scope is None:
            return lambda mem: True
        return lambda mem: mem.get("project") in (None, scope)

    def _resolve(self, raw: Any, reach: Callable[[Mapping[str, Any]], bool]) -> dict[str, Any]:
        """The memory an id names, if the caller may reach it (else `NotFoundError`: an id
        of another project reads and forgets nothing without ``any_project``)."""
        text = _text(raw, "id", 200)
        mem = self.store.get(self.store.resolve_id(text))
        if mem is None:
            raise NotFoundError(f"no memory with id {text!r}")
        if not reach(mem):
            raise NotFoundError(
                f"memory {text!r} is not in this project (any_project: true reaches it)"
            )
        return dict(mem)

    def forget(
        self,
        id: str,
        reason: str,
        project: str | None = None,
        directory: str | None = None,
        session_id: str | None = None,
        any_project: bool | None = None,
    ) -> dict[str, Any]:
        """Invalidate a memory of the caller's project or a global one (another project's
        with ``any_project``): ``{"id", "status": "forgotten" | "already_forgotten"}``."""
        reason = _text(reason, "reason", 1000)
        full = self._resolve(id, self._reach(project, directory, session_id, any_project))["id"]
        done = self.store.invalidate(full, reason)
        self._starts.clear()
        return {"id": self._short(full), "status": "forgotten" if done else "already_forgotten"}

    def get(
        self,
        ids: list[str] | str,
        project: str | None = None,
        directory: str | None = None,
        session_id: str | None = None,
        any_project: bool | None = None,
    ) -> dict[str, Any]:
        """Full text and provenance: ``{"memories": [...], "missing": [{"id", "reason"}]}``;
        the caller's project and global memories (every project with ``any_project``)."""
        reach = self._reach(project, directory, session_id, any_project)
        out: list[dict[str, Any]] = []
        missing: list[dict[str, str]] = []
        for raw in _id_list(ids):
            try:
                mem = self._resolve(raw, reach)
            except (NotFoundError, ValidationError, ServiceError) as exc:
                missing.append({"id": raw, "reason": str(exc)})
                continue
            self.store.touch_batch([mem["id"]])
            out.append(self._full(mem))
        if out:  # how often a memory is read weighs in the start context's order
            self._starts.clear()
        return {"memories": out, "missing": missing}

    def _full(self, mem: Mapping[str, Any]) -> dict[str, Any]:
        meta = mem.get("metadata") or {}
        return {
            "id": self._short(mem["id"]),
            "full_id": mem["id"],
            "type": mem["type"],
            "content": neutralize(str(mem["content"])),
            "tags": list(mem.get("tags") or ()),
            "confidence": mem.get("confidence"),
            "agent": mem.get("entered_by"),
            "session_id": mem.get("session_id"),
            "project": mem.get("project"),
            "created_at": mem.get("created_at"),
            "source": mem.get("source"),
            "episode": bool(isinstance(meta, Mapping) and meta.get("episode")),
            "source_message_ids": list(mem.get("source_message_ids") or ()),
            "valid": mem.get("valid_until") is None,
            "invalidation_reason": mem.get("invalidation_reason"),
            **cited.for_agent(cited.of_memory(self.store.db, mem["id"])),
        }

    def timeline(
        self,
        id: str,
        before: int = 3,
        after: int = 3,
        project: str | None = None,
        directory: str | None = None,
        session_id: str | None = None,
        any_project: bool | None = None,
    ) -> dict[str, Any]:
        """What happened around a memory or episode in its session: ``{"id", "session_id",
        "items": [{"id", "type", "line", "created_at", "anchor"}]}``, oldest first; within
        the caller's project and global memories (every project with ``any_project``)."""
        reach = self._reach(project, directory, session_id, any_project)
        before = _bounded(before, "before", 0, MAX_AROUND)
        after = _bounded(after, "after", 0, MAX_AROUND)
        mem = self._resolve(id, reach)
        full = mem["id"]
        items = [
            {**self._line(m), "anchor": m["id"] == full}
            for m in given.session_neighbours(self.store.db, mem, before, after)
            if reach(m)
        ]
        return {"id": self._short(full), "session_id": mem.get("session_id"), "items": items}

    def status(self) -> dict[str, Any]:
        """``{"version", "protocol", "served_by", "pid", "memories", "embedder",
        "recall": {"enabled", "budget_tokens"}, "uptime_s"}``."""
        from .. import __version__

        with self._reading():
            memories = self._memory_count()
        return {
            "version": __version__,
            "protocol": proto.PROTOCOL_VERSION,
            "served_by": self.served_by,
            "pid": os.getpid(),
            "memories": memories,
            "embedder": self.embedder is not None,
            "recall": {
                "enabled": self.recall_settings.enabled,
                "budget_tokens": self.recall_settings.budget_tokens,
            },
            "uptime_s": round(time.monotonic() - self.started, 1),
        }

    def _memory_count(self) -> int:
        """The valid memories, cheaply: counting them reads every row (~100 ms at 110k),
        so the count is redone at most every `STATUS_COUNT_TTL_S`; in between, the rows
        added since (the highest row number, O(1)) are added to it. A memory forgotten
        meanwhile shows up at the next count (docs/query-service.md)."""
        store = self._rstore
        top = store.size_hint()
        now = time.monotonic()
        with self._lock:
            cached = self._count
        if cached is not None and now - cached[1] < STATUS_COUNT_TTL_S:
            return cached[0] + max(0, top - cached[2])
        count = store.count()
        with self._lock:
            self._count = (count, now, top)
        return count


def _nothing(reason: str) -> dict[str, Any]:
    return {"block": "", "ids": [], "memory_ids": [], "tokens": 0, "reason": reason}


# The parameters each method takes (the socket refuses any other).
_REACH = ("project", "directory", "session_id", "any_project")  # which memories an id reaches
METHOD_PARAMS: dict[str, tuple[str, ...]] = {
    "recall": ("session_id", "prompt", "project", "directory", "budget_tokens"),
    "start": ("session_id", "prompt", "project", "directory"),
    "search": ("query", "limit", "type", "project", "directory", "path"),
    "file_recall": ("session_id", "path", "directory", "project", "agent", "budget_tokens"),
    "remember": ("content", "type", "tags", *_REACH[:3], "agent", "share", "citations"),
    "forget": ("id", "reason", *_REACH),
    "get": ("ids", *_REACH),
    "timeline": ("id", "before", "after", *_REACH),
    "status": (),
}
