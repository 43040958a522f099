"""The four lifecycle hooks: created, idle, compacting, ending.

`SessionHookCoordinator` is the one place where a session event turns into work on the
memory store and the context files. The sidecar calls it for what adapters saw; the
Copilot hook command calls the very same methods. Every hook returns the LLMem
reference's ``(result, value)`` tuple and never raises: a failure is ``("error", ...)``
and a log line, so no agent is ever blocked by us.

Crash safety: extracted memories and the cursor of the last message they came from
commit in one transaction, and exact duplicates are merged by the store, so re-running
any hook after a crash neither loses nor duplicates memories.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import faults
from ..config import Config, load_settings
from ..errors import ValidationError
from ..events import Message, SessionInfo
from ..paths import get_context_dir, read_regular_file, validate_session_id
from ..project import project_name, session_project
from ..registry import VALID_SESSION_EVENT_TYPES, session_hooks
from ..store import MemoryStore
from ..store import projects as project_names
from ..store import recall as recall_given
from ..store import sessions as session_state
from .context import (
    context_path,
    remove_session_files,
    resume_path,
    session_context,
    write_context_file,
)

if TYPE_CHECKING:  # the engine and the model client load only when a hook needs them
    from ..evidence.cite import Citation
    from ..extraction.candidates import Assessment, Candidate, Extractor
    from ..model.embed import BatchEmbedder

if TYPE_CHECKING:  # importing the adapters loads YAML: the Copilot hook's fast path skips it
    from ..adapters.base import SessionAdapter

log = logging.getLogger(__name__)

BACKFILL_BATCH = 32  # memories given a vector per backfill pass
TAILS_KEPT = 256  # sessions whose last exchange is kept for the next pass's citations
BACKFILL_SESSIONS = 100_000  # past sessions indexed as episodes, at most, on the first start

RESULT_SUCCESS = "success"
RESULT_ALREADY_PROCESSED = "already_processed"
RESULT_DEBOUNCED = "debounced"
RESULT_NO_TRANSCRIPT = "no_transcript"
RESULT_NO_MEMORIES = "no_memories"
RESULT_ERROR = "error"

KEY_MEMORY_TYPES = ("decision", "preference", "procedure", "project_state")
KEY_MEMORY_MIN_CONFIDENCE = 0.7
ENDING_LOG = "ending"  # extraction_log.source_type suffix marking a finished session
EPISODE_LOG = "episodes"  # extraction_log.source_type suffix: the last message in an episode
EPISODE_BACKFILL = ("episodes", "backfill")  # extraction_log row: the one backfill is done

HookResult = tuple[str, Any]


class SessionHookCoordinator:
    """Runs the hooks for sessions of any agent whose adapter it was given.

    ``adapters`` maps agent name -> SessionAdapter (None or empty: created and compacting
    still work from the store; idle and ending return ``no_transcript``).

    The ``on_*`` methods are the built-in hooks. The sidecar and the Copilot hook command
    reach them through `SessionEventManager`, which then runs the hook registered for the
    event (`register_session_hook`).
    """

    def __init__(
        self,
        store: MemoryStore,
        adapters: Mapping[str, SessionAdapter] | None = None,
        config: Config | Mapping[str, Any] | None = None,
        context_dir: Path | None = None,
        extractor: Extractor | None = None,
        clock: Callable[[], float] = time.monotonic,
        embedder: BatchEmbedder | None = None,
    ) -> None:
        self.store = store
        self.adapters: dict[str, SessionAdapter] = dict(adapters or {})
        self.settings = _settings(config)
        self.context_dir = context_dir or get_context_dir(self.settings.context.dir)
        self.budget_tokens = self.settings.context.budget_tokens
        self.hide_stale = self.settings.citations.hide_stale
        self.debounce_s = self.settings.session.idle_debounce_seconds
        if extractor is None:
            from ..extraction.engine import ExtractionEngine

            extractor = ExtractionEngine()
        self.extractor = extractor
        self.embedder = embedder
        self._clock = clock
        self._last_idle: dict[str, float] = {}
        self.retention_skipped = 0  # exchanges too old to store, since this coordinator began
        self._backfilling = False
        self._named: set[tuple[str, str]] = set()  # (key, directory) named by this coordinator
        # Per session, the last exchange of the last extraction pass (the next pass's
        # memories may be about what it touched: `_citations`); the oldest dropped past
        # TAILS_KEPT sessions.
        self._tails: dict[str, list[Message]] = {}

    # -- session bookkeeping -------------------------------------------------------------
    @property
    def ctx_dir(self) -> Path:
        return self.context_dir

    def track(
        self, session_id: str, info: SessionInfo | None = None
    ) -> session_state.SessionRecord | None:
        """The stored record for a session, created from ``info`` or an adapter if new
        (None: no adapter knows the session). The sidecar calls it for every session an
        adapter reports, the hooks for the session they run on."""
        rec = session_state.find(self.store.db, session_id)
        if rec is not None and (info is None or rec.agent == info.agent):
            self._name_project(rec)
            return rec
        if info is None:
            for adapter in self.adapters.values():
                info = adapter.get_session(session_id)
                if info is not None:
                    break
        if info is None:
            return None
        now_ms = int(time.time() * 1000)
        rec = session_state.SessionRecord(
            agent=info.agent,
            session_id=session_id,
            project=session_project(info.native_project_id, info.directory),
            directory=info.directory,
            title=info.title,
            created_ms=info.created_ms or now_ms,
            last_activity_ms=max(info.updated_ms, info.created_ms) or now_ms,
        )
        session_state.save(self.store.db, rec)
        self._name_project(rec)
        return rec

    def _name_project(self, rec: session_state.SessionRecord) -> None:
        """Record the name of the session's project (``owner/repo`` or its folder's name,
        `project.project_name`) so displays show it; once per coordinator, and never at
        the cost of the hook."""
        if not rec.project or not rec.directory or (rec.project, rec.directory) in self._named:
            return
        try:
            self._named.add((rec.project, rec.directory))
            name = project_name(rec.directory)
            if name is not None and project_names.name_of(self.store.db, rec.project) != name:
                project_names.set_name(self.store.db, rec.project, name)  # a write only if new
        except Exception as exc:
            log.debug("project %s not named: %s", rec.project, exc)

    def _messages(
        self, rec: session_state.SessionRecord | None, session_id: str, after: str | None = None
    ) -> list[Message] | None:
        adapter = self.adapters.get(rec.agent) if rec else None
        if adapter is None:
            return None
        return adapter.get_messages(session_id, after_id=after)

    # -- hooks ---------------------------------------------------------------------------
    def on_created(self, session_id: str, info: SessionInfo | None = None) -> HookResult:
        """Write ``<session_id>.md`` with the project's and global memories that matter
        most. Written once: an existing file is never changed (prompt caching)."""
        try:
            path = context_path(session_id, self.ctx_dir)
            if path.exists():
                return RESULT_ALREADY_PROCESSED, None
            rec = self.track(session_id, info)
            faults.hit("after-session-row", session_id)
            project = rec.project if rec else None
            text, given = session_context(
                self.store, project, self.budget_tokens, hide_stale=self.hide_stale
            )
            # What the file gives is recorded first: a replay after a kill writes the file
            # (and records again, idempotent); recall never repeats it (by memory id).
            recall_given.mark_given(self.store.db, session_id, given)
            write_context_file(path, text)
            return RESULT_SUCCESS, path
        except Exception:
            log.exception("on_created failed for session %s", session_id)
            return RESULT_ERROR, None

    def on_idle(self, session_id: str, force: bool = False) -> HookResult:
        """Extract memories from the messages added since the last extraction, then
        refresh the resume pack. Debounced per session unless ``force``."""
        try:
            validate_session_id(session_id)
            last = self._last_idle.get(session_id)
            if not force and last is not None and self._clock() - last < self.debounce_s:
                return RESULT_DEBOUNCED, 0
            rec = self.track(session_id)
            if rec is None or rec.agent not in self.adapters:
                return RESULT_NO_TRANSCRIPT, 0
            try:
                self.store_episodes(rec, session_id)
            except Exception as exc:  # the episodes' trouble never costs the extraction
                log.warning("session %s: episodes not stored this pass: %s", session_id, exc)
            done = self.store.get_extraction(rec.agent, session_id)
            cursor = done["cursor"] if done else None
            msgs = self._messages(rec, session_id, after=cursor)
            self._last_idle[session_id] = self._clock()
            if not msgs:
                if cursor is not None and not resume_path(session_id, self.ctx_dir).exists():
                    # Killed between the memories' commit and the pack: write it now.
                    self._write_resume(rec, session_id)
                return (RESULT_NO_TRANSCRIPT if cursor is None else RESULT_NO_MEMORIES), 0
            count = self._store_candidates(rec, session_id, msgs)
            faults.hit("after-memories-commit", session_id)
            self._write_resume(rec, session_id)
            return (RESULT_SUCCESS, count) if count else (RESULT_NO_MEMORIES, 0)
        except Exception:
            log.exception("on_idle failed for session %s", session_id)
            return RESULT_ERROR, 0

    def on_compacting(self, session_id: str) -> HookResult:
        """Refresh the resume pack at once (the compaction prompt is about to be built)."""
        try:
            rec = self.track(session_id)
            path = self._write_resume(rec, session_id)
            return (RESULT_SUCCESS, path) if path else (RESULT_NO_MEMORIES, None)
        except Exception:
            log.exception("on_compacting failed for session %s", session_id)
            return RESULT_ERROR, None

    def on_ending(self, session_id: str, reason: str = "ended") -> HookResult:
        """Final extraction, then a session summary (event) and a self-assessment memory;
        once per session. Context files are removed later, after the retention period."""
        try:
            rec = self.track(session_id)
            if rec is None:
                return RESULT_NO_TRANSCRIPT, 0
            if self.store.get_extraction(f"{rec.agent}:{ENDING_LOG}", session_id):
                return RESULT_ALREADY_PROCESSED, 0
            if rec.agent in self.adapters:
                self.on_idle(session_id, force=True)
            msgs = self._messages(rec, session_id) or []
            from ..redact import redact_transcript

            # Deleted sessions leave no rows: say what we know.
            summary = self._summary(msgs) if msgs else self._summary_without_transcript(rec, reason)
            # Before the write transaction: the model may take seconds to answer. A
            # throwaway session (no summary) is not assessed either: it leaves nothing.
            assessment = self._assess(rec, session_id, msgs) if msgs and summary else None
            written = 0
            with self.store.atomic():
                common: dict[str, Any] = {
                    "entered_by": rec.agent,
                    "project": rec.project,
                    "session_id": session_id,
                    "source": "session-end",
                }
                if summary:
                    written += bool(
                        self._add_unit(
                            "session summary",
                            session_id,
                            "event",
                            redact_transcript(summary),
                            tags=["session-summary"],
                            dedupe=False,  # one per session, even when two read alike
                            **common,
                        )
                    )
                if assessment is not None and assessment.content:
                    written += bool(
                        self._add_unit(
                            "self-assessment",
                            session_id,
                            "self_assessment",
                            redact_transcript(assessment.content),
                            tags=assessment.tags,
                            metadata=assessment.metadata or None,
                            **common,
                        )
                    )
                if msgs and not summary:
                    from ..store.episodes import count_noise

                    count_noise(self.store.db, summaries=1)
                self.store.log_extraction(
                    f"{rec.agent}:{ENDING_LOG}", session_id, cursor=reason, memory_count=written
                )
                rec.state = "ended"
                rec.ended_ms = int(time.time() * 1000)
                rec.end_reason = reason
                session_state.save(self.store.db, rec)
            return RESULT_SUCCESS, written
        except Exception:
            log.exception("on_ending failed for session %s", session_id)
            return RESULT_ERROR, 0

    def _summary(self, msgs: list[Message]) -> str:
        """The session's summary event, or "" for a session of throwaway exchanges only.
        With episodes on, the exchanges already say what was asked: the summary then
        quotes no goal, only what they don't say (turns, files touched, commands run)."""
        from ..extraction.summary import summarize_session
        from .episodes import build_episodes

        kept = [e for e in build_episodes(msgs) if e.substance]
        if not kept:
            return ""
        return summarize_session(msgs, goal=not self.settings.episodes.enabled)

    # -- episodes ------------------------------------------------------------------------
    def store_episodes(
        self, rec: session_state.SessionRecord, session_id: str, embed: bool = True
    ) -> int:
        """Store the session's exchanges since the last episode as ``conversation``
        memories (docs/episodes.md); the episode cursor commits with them. Returns how
        many were stored (0 when episodes are off or there is nothing new). With an
        embedder and ``embed``, each gets its vector now (the backfill passes False: the
        sidecar's background embedding pass gives those theirs later)."""
        if not self.settings.episodes.enabled or rec.agent not in self.adapters:
            return 0
        from ..timestamps import to_iso
        from .episodes import build_episodes

        source = f"{rec.agent}:{EPISODE_LOG}"
        done = self.store.get_extraction(source, session_id)
        cursor = done["cursor"] if done else None
        msgs = self._messages(rec, session_id, after=cursor)
        if not msgs:
            return 0
        previous = previous_asks = ""
        last: list[dict[str, Any]] = []
        if cursor is not None:
            last = self.store.list_all(type="conversation", session_id=session_id, limit=1)
            previous = last[0]["content"] if last else ""
            asks = (last[0].get("metadata") or {}).get("asks") if last else None
            previous_asks = asks if isinstance(asks, str) else ""
        from ..evidence.in_repo import touched_paths
        from ..store.episodes import (
            count_noise,
            count_retention,
            episode_message_ids,
            retention_cutoff_ms,
            set_episode_after,
        )
        from ..store.file_touches import add_touches
        from ..timestamps import now_iso
        from .episodes import after_words

        known = episode_message_ids(self.store.db, session_id)
        episodes = [
            e
            for e in build_episodes(msgs, previous, previous_asks)
            if e.message_ids[0] not in known
        ]
        # A throwaway exchange ("hello there") is counted, never stored (docs/episodes.md).
        noise = sum(1 for e in episodes if not e.substance and not e.part)
        episodes = [e for e in episodes if e.substance]
        # What retention would delete at once is never stored (docs/episodes.md).
        cutoff = retention_cutoff_ms(self.settings.episodes.retention_days, time.time())
        too_old = [e for e in episodes if 0 < e.time_ms < cutoff]
        episodes = [e for e in episodes if not 0 < e.time_ms < cutoff]
        # Outside the write transaction: the embedder may take a while to answer.
        vectors = self._embed([e.content for e in episodes]) if embed else []
        stored = 0
        with self.store.atomic():
            first = next((e for e in episodes if not e.part), None)
            if last and first:  # the stored episode before these learns its follow-up
                set_episode_after(self.store.db, last[0]["id"], after_words(first.content))
            for i, ep in enumerate(episodes):
                when = (
                    to_iso(datetime.fromtimestamp(ep.time_ms / 1000, UTC)) if ep.time_ms else None
                )
                mid = self._add_unit(
                    "episode",
                    session_id,
                    "conversation",
                    ep.content,
                    source="episode",
                    metadata=ep.metadata(),
                    entered_by=rec.agent,
                    project=rec.project,
                    session_id=session_id,
                    source_message_ids=ep.message_ids,
                    created_at=when,
                    embedding=vectors[i] if vectors else None,
                    dedupe=False,
                )
                stored += bool(mid)
                if mid and ep.files:  # the files it touched: recall for the file in hand
                    touched = touched_paths(rec.directory, ep.files)
                    add_touches(self.store.db, mid, touched, when or now_iso())
            count_retention(self.store.db, skipped=len(too_old))
            count_noise(self.store.db, exchanges=noise)
            self.store.log_extraction(
                source,
                session_id,
                cursor=msgs[-1].id,
                memory_count=stored,
                message_count=len(msgs),
            )
        if too_old:
            self.retention_skipped += len(too_old)
            if not self._backfilling:  # the backfill says it once for all sessions
                log.info(
                    "session %s: %d exchange(s) older than the %g-day episode retention"
                    " not stored as episodes",
                    session_id,
                    len(too_old),
                    self.settings.episodes.retention_days,
                )
        return stored

    def prune_episodes(self) -> int:
        """Apply ``episodes.retention_days`` and ``episodes.max_count``, after a backup
        export of what goes (``backups/episodes-<time>.json``); returns how many
        episodes were deleted."""
        from ..store import archive
        from ..store.episodes import prune_episodes

        def backup(ids: list[str]) -> None:
            archive.write_backup("episodes", self.store.export_all(limit=None, ids=ids))

        ep = self.settings.episodes
        removed = prune_episodes(self.store, ep.retention_days, ep.max_count, backup)
        if removed:
            log.info(
                "episode retention: %d episode(s) deleted (older than %g days or beyond %d);"
                " a backup export is in the backups folder",
                removed,
                ep.retention_days,
                ep.max_count,
            )
        return removed

    def backfill_episodes(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Once per store (an extraction_log marker): the episodes of every session the
        store knows, of every agent with an adapter. ``progress(done, total)`` is called
        as it goes. Returns how many episodes were stored; idempotent (per-session
        cursors), so a crash half-way resumes where it stopped."""
        if not self.settings.episodes.enabled or not self.settings.episodes.backfill:
            return 0
        if self.store.get_extraction(*EPISODE_BACKFILL):
            return 0
        seen = {
            (r.agent, r.session_id): r
            for r in session_state.all_sessions(self.store.db, limit=BACKFILL_SESSIONS)
        }
        for agent, adapter in self.adapters.items():
            try:
                infos = adapter.list_sessions(limit=BACKFILL_SESSIONS)
            except Exception as exc:
                log.warning("episode backfill: %s sessions unreadable: %s", agent, exc)
                continue
            for info in infos:
                if (info.agent, info.id) in seen:
                    continue
                try:
                    rec = self.track(info.id, info)
                except Exception as exc:  # one odd session never stops the others
                    log.warning("episode backfill: session %r skipped: %s", info.id, exc)
                    continue
                if rec is not None:
                    seen[(rec.agent, rec.session_id)] = rec
        recs = [r for r in seen.values() if r.agent in self.adapters]
        stored = 0
        skipped_before = self.retention_skipped
        self._backfilling = True
        try:
            for i, rec in enumerate(recs, 1):
                try:
                    stored += self.store_episodes(rec, rec.session_id, embed=False)
                except Exception as exc:  # one session's trouble never stops the others
                    log.warning("episode backfill failed for %r: %s", rec.session_id, exc)
                if progress is not None:
                    progress(i, len(recs))
        finally:
            self._backfilling = False
        too_old = self.retention_skipped - skipped_before
        if too_old:
            log.info(
                "episode backfill: %d exchange(s) older than the %g-day episode retention"
                " not stored",
                too_old,
                self.settings.episodes.retention_days,
            )
        with self.store.atomic():
            self.store.log_extraction(*EPISODE_BACKFILL, cursor="done", memory_count=stored)
        return stored

    # -- helpers -------------------------------------------------------------------------
    def _assess(
        self, rec: session_state.SessionRecord, session_id: str, msgs: list[Message]
    ) -> Assessment | None:
        """The session's self-assessment: the model's when the extractor is a
        `SessionAssessor` (the engine degrades to the plain-text counts by itself), else
        the counts."""
        from ..extraction.candidates import Assessment, SessionAssessor
        from ..extraction.summary import self_assessment

        if isinstance(self.extractor, SessionAssessor):
            return self.extractor.assess_session(msgs, session_key=f"{rec.agent}:{session_id}")
        text = self_assessment(msgs)
        return Assessment(text, ["self-assessment"]) if text else None

    def _store_candidates(
        self, rec: session_state.SessionRecord, session_id: str, msgs: list[Message]
    ) -> int:
        from ..extraction.candidates import extract_staged
        from ..extraction.supersede import supersede_replaced
        from ..redact import redact_transcript

        # The sure candidates become memories; the unsure ones wait in the inbox.
        staged = extract_staged(self.extractor, msgs, project=rec.project)
        candidates = staged.memories
        # Outside the write transaction: the embedder may take a while to answer.
        vectors = self._embed([c.content for c in candidates])
        cites = self._citations(rec, session_id, msgs, candidates)
        self._keep_tail(session_id, msgs)

        stored = 0
        with self.store.atomic():
            for c, vec, cited in zip(candidates, vectors, cites, strict=True):
                added = self._add_unit(
                    "candidate memory",
                    session_id,
                    c.type,
                    redact_transcript(c.content),
                    confidence=c.confidence,
                    tags=c.tags,
                    source="extract",
                    entered_by=rec.agent,
                    project=rec.project if c.scope == "project" else None,
                    session_id=session_id,
                    source_message_ids=c.source_message_ids,
                    embedding=vec,
                )
                stored += bool(added)
                if added and cited:
                    self._cite(session_id, added, cited)
                if added and c.replaces:  # "we moved from X to Y": what says X is stale now
                    supersede_replaced(self.store, added, c, rec.project)
            for c in staged.inbox:
                self._stage_unsure(rec, session_id, c, redact_transcript(c.content))
            self.store.log_extraction(
                rec.agent,
                session_id,
                cursor=msgs[-1].id,
                memory_count=stored,
                message_count=len(msgs),
            )
        return stored

    def _citations(
        self,
        rec: session_state.SessionRecord,
        session_id: str,
        msgs: list[Message],
        candidates: list[Candidate],
    ) -> list[list[Citation]]:
        """Each candidate's citations from what its exchange touched
        (`evidence.touched`), captured now, before the write transaction; none when that
        fails (a memory without citations is still stored)."""
        if not candidates or not rec.directory:
            return [[] for _ in candidates]
        from ..evidence.touched import cite_memories, needs_earlier
        from ..redact import redact_transcript

        try:
            context = msgs
            ids = [i for c in candidates for i in c.source_message_ids]
            done = self.store.get_extraction(rec.agent, session_id)
            if needs_earlier(msgs, ids) and done:
                # The exchange before the first new one was read in an earlier pass: kept
                # from it when this coordinator ran it, else read again.
                tail = self._tails.get(session_id)
                if tail and tail[-1].id == done["cursor"]:
                    context = tail + msgs
                else:
                    context = self._messages(rec, session_id) or msgs
            texts = [redact_transcript(c.content) for c in candidates]
            pairs = [(t, c.source_message_ids) for t, c in zip(texts, candidates, strict=True)]
            return cite_memories(rec.directory, pairs, context)
        except Exception as exc:  # citations never cost the memories
            log.warning("session %s: memories stored without citations: %s", session_id, exc)
            return [[] for _ in candidates]

    def _keep_tail(self, session_id: str, msgs: list[Message]) -> None:
        """Remember the last exchange of ``msgs`` for the session's next pass."""
        from ..evidence.touched import last_exchange

        self._tails.pop(session_id, None)
        self._tails[session_id] = last_exchange(msgs)
        while len(self._tails) > TAILS_KEPT:
            del self._tails[next(iter(self._tails))]

    def _cite(self, sid: str, memory_id: str, cited: list[Citation]) -> None:
        """Attach citations in the memory's transaction; refused ones (the memory, an
        older duplicate, holds the most it may) cost only themselves."""
        from ..store import citations

        try:
            citations.add(self.store.db, memory_id, cited)
        except ValidationError as exc:
            log.info("session %s: citations of %s not added: %s", sid, memory_id, exc)

    def _stage_unsure(
        self, rec: session_state.SessionRecord, sid: str, c: Candidate, content: str
    ) -> None:
        """An unsure candidate into the inbox (docs/extraction.md), with what its memory
        would need; one the store refuses is skipped with one log line."""
        meta = {
            "type": c.type,
            "tags": c.tags,
            "project": rec.project if c.scope == "project" else None,
            "agent": rec.agent,
            "session_id": sid,
            "source_message_ids": c.source_message_ids,
        }
        try:
            self.store.add_to_inbox(content, "extract", c.confidence, meta)
        except ValidationError as exc:
            log.warning("session %s: unsure candidate not staged: %s", sid, exc)

    def _add_unit(self, what: str, sid: str, mtype: str, content: str, **fields: Any) -> str:
        """``store.add`` for one unit read from a transcript (an episode, a candidate, a
        summary): one the store refuses is skipped with one log line and costs only itself.
        Returns the new memory's id, or "" when skipped. The store validates before it
        writes, so a refusal leaves the caller's transaction clean."""
        try:
            return self.store.add(mtype, content, **fields)
        except ValidationError as exc:
            log.warning("session %s: %s skipped: %s", sid, what, exc)
            return ""

    def backfill_embeddings(self, limit: int = BACKFILL_BATCH) -> int:
        """Vectors for up to ``limit`` memories stored without one (the embedder was down,
        or they predate it), so semantic search reaches them. Returns how many got one;
        0 without an embedder, or while it backs off after a failure."""
        if self.embedder is None:
            return 0
        if self.embedder.backoff_remaining() > 0:
            return 0
        rows = self.store.missing_embeddings(limit)
        vectors = self._embed([content for _, content in rows])
        return self.store.set_embeddings(
            [(mid, vec) for (mid, _), vec in zip(rows, vectors, strict=True) if vec is not None]
        )

    def _embed(self, texts: list[str]) -> list[list[float] | None]:
        """A vector per text, or Nones when there is no embedder or it fails: a memory
        without a vector is still found by keyword search, and near-duplicate merging
        then falls back to the exact-text check."""
        if self.embedder is None or not texts:
            return [None] * len(texts)
        try:
            return [list(vec) for vec in self.embedder.embed_batch(texts)]
        except Exception as exc:  # a dead or misconfigured server must not cost the memory
            from ..model.ollama import OllamaTimeout, OllamaUnavailable

            # The embedder logs an outage once; a misconfiguration is said every time.
            quiet = isinstance(exc, OllamaUnavailable | OllamaTimeout)
            log.log(
                logging.DEBUG if quiet else logging.INFO,
                "memories stored without embeddings: %s",
                exc,
            )
            return [None] * len(texts)

    def key_memories(self, project: str | None, limit: int = 20) -> list[dict[str, Any]]:
        mems = self.store.list_all(
            type=list(KEY_MEMORY_TYPES), project=project, sort="updated", limit=100
        )
        good = [m for m in mems if (m.get("confidence") or 0) >= KEY_MEMORY_MIN_CONFIDENCE]
        return good[:limit]

    def _write_resume(
        self, rec: session_state.SessionRecord | None, session_id: str
    ) -> Path | None:
        from .resume import build_resume_pack

        msgs = self._messages(rec, session_id) or []
        path = resume_path(session_id, self.ctx_dir)
        if not msgs and path.exists():
            # Right after a compaction the transcript may be empty: keep the pack built
            # from the messages before it rather than replace it with memories only.
            return path
        keys = self.key_memories(rec.project if rec else None)
        if not msgs and not keys:
            return None
        text = build_resume_pack(msgs, keys, session_title=rec.title if rec else None)
        if not text.strip():
            return None
        write_context_file(path, text)
        return path

    def _summary_without_transcript(self, rec: session_state.SessionRecord, reason: str) -> str:
        goal = ""
        pack = resume_path(rec.session_id, self.ctx_dir)
        try:  # a planted symlink is not followed (read_regular_file refuses it)
            pack_text = read_regular_file(pack, 65_536) or ""
        except (OSError, ValidationError, UnicodeDecodeError):
            pack_text = ""
        if pack_text:
            lines = pack_text.splitlines()
            if "## Goal" in lines:
                rest = lines[lines.index("## Goal") + 1 :]
                goal = next((x.strip() for x in rest if x.strip()), "")
        extracted = self.store.get_extraction(rec.agent, rec.session_id)
        count = extracted["memory_count"] if extracted else 0
        title = rec.title or rec.session_id
        text = f"Session '{title}' ({rec.agent}) {reason}."
        if goal:
            text += f" Goal: {goal}"
        return f"{text} {count} memories were extracted from it."

    def reopen(self, session_id: str) -> None:
        """A session that ended was resumed (Copilot CLI ``--resume``): mark it active so
        it is extracted, and summarized again when it ends."""
        rec = session_state.find(self.store.db, session_id)
        if rec is None:
            return
        with self.store.atomic():
            session_state.forget_extraction(self.store.db, f"{rec.agent}:{ENDING_LOG}", session_id)
            rec.state, rec.ended_ms, rec.end_reason = "active", None, None
            session_state.save(self.store.db, rec)

    def cleanup_context_files(self, retention_days: float) -> int:
        """Remove the context files of sessions that ended more than ``retention_days``
        ago. Returns how many sessions were cleaned. One session whose files cannot be
        removed (an id no file name may hold, a folder in the way) is skipped, with one
        log line per call: it never stops the others or the sidecar."""
        cutoff = int((time.time() - retention_days * 86400) * 1000)
        cleaned = 0
        failed: list[str] = []
        for sid in session_state.ended_before(self.store.db, cutoff):
            try:
                faults.hit("cleanup", sid)
                if remove_session_files(sid, self.ctx_dir):
                    cleaned += 1
            except Exception as exc:
                failed.append(f"{sid!r}: {exc}")
        if failed:
            log.warning("cleanup: skipped %d session(s) (first %s)", len(failed), failed[0][:300])
        return cleaned

    def repair_context_files(self, since_ms: int) -> list[str]:
        """Write the missing context file of every active session created since
        ``since_ms`` (a kill between its sessions row and its file). Returns their ids."""
        fixed = []
        for rec in session_state.created_since(self.store.db, since_ms):
            try:
                if context_path(rec.session_id, self.ctx_dir).exists():
                    continue
            except ValueError:  # an id no file may be named after
                continue
            if self.on_created(rec.session_id)[0] == RESULT_SUCCESS:
                fixed.append(rec.session_id)
        return fixed

    def repair_resume_packs(self, ended_after_ms: int) -> list[str]:
        """Write the missing resume pack of every session that has an extraction (active,
        or ended after ``ended_after_ms``): a kill between the memories' commit and the
        pack. Returns the ids that got one."""
        fixed = []
        for rec in session_state.extracted_since(self.store.db, ended_after_ms):
            try:
                if resume_path(rec.session_id, self.ctx_dir).exists():
                    continue
                if self._write_resume(rec, rec.session_id) is not None:
                    fixed.append(rec.session_id)
            except Exception as exc:  # one session's trouble never stops the others
                log.warning("resume pack repair failed for %r: %s", rec.session_id, exc)
        return fixed


def create_session_hook_coordinator(
    config: Config | Mapping[str, Any] | None = None,
    store: MemoryStore | None = None,
    adapters: Mapping[str, SessionAdapter] | None = None,
) -> SessionHookCoordinator:
    """A coordinator with the configured store and, when not given, every adapter whose
    agent is enabled in config (an adapter whose store does not exist yet still works:
    it reports nothing until the agent has run)."""
    settings = _settings(config)
    if store is None:
        store = MemoryStore.from_config(settings)
    if adapters is None:
        adapters = default_adapters(settings)
    from ..extraction.llm import build_extraction_engine
    from ..model.embed import embedder_from_config

    # With the local model when ollama.enabled (a bad base_url is logged, never raised).
    engine = build_extraction_engine(settings, store)
    embedder = embedder_from_config(settings)
    return SessionHookCoordinator(store, adapters, settings, extractor=engine, embedder=embedder)


def _settings(config: Config | Mapping[str, Any] | None) -> Config:
    """The typed config of a public entry point above: ``config`` as given (a dict is
    converted here, once), or config.yaml's when none (or an empty dict) is given."""
    if isinstance(config, Config):
        return config
    return Config.from_mapping(config) if config else load_settings()


def default_adapters(config: Config) -> dict[str, SessionAdapter]:
    """Every registered adapter whose ``<agent>.enabled`` is not false, each built from the
    whole config (it picks its own section)."""
    from ..adapters import get_adapter_class, registered_adapters

    out: dict[str, SessionAdapter] = {}
    for name in registered_adapters():
        section = getattr(config, name, None)
        if getattr(section, "enabled", True) is False:
            continue
        try:
            out[name] = get_adapter_class(name).from_config(config)
        except Exception as exc:  # a plugged-in adapter's bug too: the others still run
            log.warning("%s adapter disabled: %s", name, exc)
    return out


# Results after which the registered hook does not run: the built-in hook did nothing new
# (a repeated event, a debounce) or failed (the sidecar retries it, and the hook runs then).
SKIPS_REGISTERED_HOOK = frozenset({RESULT_ALREADY_PROCESSED, RESULT_DEBOUNCED, RESULT_ERROR})


class SessionEventManager:
    """Dispatches a session event: the coordinator's built-in hook, then the hook
    registered for the event (`register_session_hook`), with the session id.

    The sidecar and the Copilot hook command dispatch every event through here, so a
    registered hook runs for what they see. It runs after the built-in hook (the context
    file exists when ``created`` fires it), unless that returned a result of
    `SKIPS_REGISTERED_HOOK`; without a coordinator it runs alone and its return value is
    returned. It fails open: an exception it raises is logged, never raised to the caller
    (a user's hook must not stop the sidecar or block the agent).
    """

    def __init__(self, coordinator: SessionHookCoordinator | None = None) -> None:
        self.coordinator = coordinator

    def builtin(self, event: str) -> Callable[..., HookResult]:
        """The coordinator's own hook for ``event``."""
        coord = self.coordinator
        if coord is None:
            raise ValueError("no coordinator")
        hooks: dict[str, Callable[..., HookResult]] = {
            "created": coord.on_created,
            "idle": coord.on_idle,
            "compacting": coord.on_compacting,
            "ending": coord.on_ending,
        }
        return hooks[_checked_event(event)]

    def emit(self, event: str, session_id: str, *args: Any) -> Any:
        """Run ``event``'s hooks for ``session_id``; ``args`` go to the built-in hook
        (``on_created``'s SessionInfo, ``on_ending``'s reason, ``on_idle``'s force)."""
        _checked_event(event)
        if self.coordinator is None:
            return self.run_registered(event, session_id)
        result = self.builtin(event)(session_id, *args)
        if result[0] not in SKIPS_REGISTERED_HOOK:
            self.run_registered(event, session_id)
        return result

    @staticmethod
    def run_registered(event: str, session_id: str) -> Any:
        """Run the hooks registered for ``event`` in order, each failing open; the last
        one's return value (None: none registered, or it raised)."""
        result: Any = None
        for hook in session_hooks.get(event):
            try:
                result = hook(session_id)
            except Exception:
                log.exception(
                    "registered %s hook %r failed for session %s", event, hook, session_id
                )
                result = None
        return result


def _checked_event(event: str) -> str:
    if event not in VALID_SESSION_EVENT_TYPES:
        raise ValueError(
            f"invalid session event {event!r} (use {', '.join(VALID_SESSION_EVENT_TYPES)})"
        )
    return event
