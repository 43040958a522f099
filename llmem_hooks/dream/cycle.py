"""The dream cycle: light, deep and rem phases over the store (docs/dream.md).

- light: retire expired memories, and those whose citations are stale too long (checked
  first, `dream.citations`); merge near-duplicates (by embedding cosine when both
  have a vector, else by normalized wording, `llmem_hooks.dream.likeness`), keeping the best
  text and the union of tags and provenance; prune episodes past their retention or the
  database size cap (after a backup export), then return the pages (incremental VACUUM).
- deep: consolidate the inbox (candidates said again or confirmed); supersede a memory a
  newer change statement contradicts ("we moved from Jenkins to ..."); boost memories that
  keep being recalled; decay the confidence of unused ones (at most once per
  ``decay_interval_days``).
- rem: link related memories (``related_to``); flag procedures not confirmed for
  ``stale_procedure_days`` as possibly stale.

A dry run (the default) writes nothing to the store: it rehearses the real cycle on a
private copy of it (`store.snapshot`), so each step sees what the steps before it changed
(a memory merged away or superseded is not decayed too) and its plan is what ``apply``
then does on the same store; it asks no model and writes no backup, diary or report.
``apply`` makes each step one transaction and logs every change with the old values
(``dream_changes``), so `Dreamer.undo` (``llmem-hooks dream --undo RUN``) puts them
back; the diary (``dream-diary.md``, appended) and the report (``dream-report.html``) go
to LLMEM_HOME.
One applied run or undo at a time per database: `one_dream_at_a_time` holds an flock on
``<database>.dream.lock`` (the kernel drops it when the holder dies, even by kill -9); a
second one is refused with `DreamBusy`. Hooks registered with `register_dream_hook` (or an
installed package's ``llmem_hooks.dream_hooks`` entry point) run after their phase, in
order; their errors are logged and never stop the cycle. Episodes
(conversation records) only age out: they are never merged, decayed, boosted or linked.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ..config import Config, DreamSettings, EpisodeSettings
from ..errors import LLMemError, ValidationError
from ..extraction.candidates import words as candidate_words
from ..extraction.supersede import SUPERSEDABLE_TYPES, replaced_term, replacement_term
from ..paths import get_llmem_home
from ..project import project_label
from ..registry import VALID_DREAM_PHASES, get_registered_dream_hooks
from ..store import MemoryFilter, MemoryStore, archive, projects
from ..store import dream as book
from ..store.episodes import episodes_to_prune
from ..timestamps import now_iso, to_iso
from . import likeness

log = logging.getLogger(__name__)

PHASES = VALID_DREAM_PHASES
DIARY_FILE = "dream-diary.md"
REPORT_FILE = "dream-report.html"
LAST_RUN = "last_run_at"  # a full applied run (the sidecar's once-per-interval clock)
LAST_SEQ = "last_run_seq"  # the highest row number a full applied run saw: newer rows are new
LAST_DECAY = "last_decay_at"
LAST_BOOST = "last_boost_at"
MiB = 1024 * 1024
SIZE_CAP_ROUNDS = 20  # prune-and-measure passes before the size cap gives up for this run
LOCK_SUFFIX = ".dream.lock"


class DreamBusy(LLMemError):
    """Another applied dream run or undo holds this database's dream lock."""


_HELD: dict[tuple[Path, int], int] = {}  # (lock, thread): depth, so a holder may re-enter


def lock_path(db_path: Path | str) -> Path | None:
    """``<database>.dream.lock`` beside the real file (None for an in-memory store)."""
    db = str(db_path)
    if db == ":memory:" or db.startswith("file:"):
        return None
    return Path(os.path.realpath(db) + LOCK_SUFFIX)


@contextlib.contextmanager
def one_dream_at_a_time(db_path: Path | str, what: str) -> Iterator[None]:
    """Hold the database's dream lock while ``what`` runs (raises `DreamBusy` at once if
    another process or thread holds it; the thread that holds it may enter again). An
    flock: the kernel releases it when its holder exits, even by kill -9, so a crashed
    run never blocks the next one. The file says who holds it (pid and what), for the
    refusal's line; it is kept, never removed (removing a lock file races its next user)."""
    path = lock_path(db_path)
    if path is None:
        yield
        return
    key = (path, threading.get_ident())
    if key in _HELD:
        _HELD[key] += 1
        try:
            yield
        finally:
            _HELD[key] -= 1
        return
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as exc:
        raise LLMemError(f"cannot open the dream lock {path}: {exc.strerror or exc}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip()
            raise DreamBusy(
                "another dream run is in progress on this database"
                + (f" ({holder})" if holder else "")
                + "; nothing was done (try again when it has finished)"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}, {what}\n".encode(), 0)
        _HELD[key] = 1
        try:
            yield
        finally:
            del _HELD[key]
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
    finally:
        os.close(fd)  # closing drops the flock


@dataclass
class DreamResult:
    """What one phase did (or, in a dry run, would do). Each list holds one dict per
    memory touched, naming it and its old and new values."""

    phase: str
    apply: bool
    run_id: str | None = None
    retired: list[dict[str, Any]] = field(default_factory=list)
    merged: list[dict[str, Any]] = field(default_factory=list)
    pruned: list[dict[str, Any]] = field(default_factory=list)
    consolidated: list[dict[str, Any]] = field(default_factory=list)
    evicted: list[dict[str, Any]] = field(default_factory=list)
    superseded: list[dict[str, Any]] = field(default_factory=list)
    boosted: list[dict[str, Any]] = field(default_factory=list)
    decayed: list[dict[str, Any]] = field(default_factory=list)
    linked: list[dict[str, Any]] = field(default_factory=list)
    stale: list[dict[str, Any]] = field(default_factory=list)
    vacuumed_pages: int = 0
    backups: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0

    COUNTED = (
        "retired",
        "merged",
        "pruned",
        "consolidated",
        "evicted",
        "superseded",
        "boosted",
        "decayed",
        "linked",
        "stale",
    )

    def counts(self) -> dict[str, int]:
        """How many of each kind of change (only the kinds with any)."""
        out = {k: len(getattr(self, k)) for k in self.COUNTED if getattr(self, k)}
        if self.vacuumed_pages:
            out["vacuumed_pages"] = self.vacuumed_pages
        return out

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class DreamRun:
    """One run of the cycle: its phases' results and where its diary and report went."""

    run_id: str
    apply: bool
    trigger: str
    started_at: str
    results: list[DreamResult] = field(default_factory=list)
    diary: Path | None = None
    report: Path | None = None
    seconds: float = 0.0

    def counts(self) -> dict[str, dict[str, int]]:
        return {r.phase: r.counts() for r in self.results}

    def as_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "apply": self.apply,
            "trigger": self.trigger,
            "started_at": self.started_at,
            "seconds": round(self.seconds, 3),
            "diary": str(self.diary) if self.diary else None,
            "report": str(self.report) if self.report else None,
            "results": [r.as_dict() for r in self.results],
        }


def _ago(now: datetime, days: float) -> str:
    return to_iso(now - timedelta(days=days))


def _mentions(text: str, term: str) -> bool:
    return bool(re.search(rf"(?<![\w-]){re.escape(term)}(?![\w-])", text, re.I))


class Dreamer:
    """Runs the dream cycle over one store (see the module doc).

    ``config``: the whole configuration (its ``dream`` and ``episodes`` sections).
    ``home``: where the diary and report go (default LLMEM_HOME). ``now``: the clock,
    for tests and benchmarks."""

    def __init__(
        self,
        store: MemoryStore,
        config: Config | Mapping[str, Any] | None = None,
        *,
        home: Path | None = None,
        now: datetime | None = None,
    ) -> None:
        cfg = Config.coerce(config)
        self.config = cfg
        self.store = store
        self.settings: DreamSettings = cfg.dream
        self.episodes: EpisodeSettings = cfg.episodes
        self.home = home
        self._now = now
        self._pairs: dict[str, list[tuple[str, str, float, str]]] | None = None
        self._live: list[dict[str, Any]] | None = None
        self._seen_seq = 0
        self._names: dict[str, str] | None = None
        self._texts: dict[str, Mapping[str, Any]] = {}
        # A rehearsal (a dry run on a private copy, `_plan`): the steps write the copy
        # as an applied run would, but ask no model and write no backup file.
        self.rehearsal = False

    # -- the clock --------------------------------------------------------------------------
    def now(self) -> datetime:
        return self._now or datetime.now(UTC)

    def now_iso(self) -> str:
        return to_iso(self.now()) if self._now else now_iso()

    # -- running --------------------------------------------------------------------------
    def run(
        self,
        phases: Sequence[str] | None = None,
        apply: bool = False,
        *,
        trigger: str = "cli",
        write_files: bool = True,
        progress: Callable[[int, int], None] | None = None,
    ) -> DreamRun:
        """Run ``phases`` (default all three, in order). With ``apply``: the changes, the
        book, the diary and the report; without: the plan only, nothing written.
        ``progress(done, total)`` hears of each finished step (`llmem_hooks.progress`)."""
        chosen = list(phases or PHASES)
        for p in chosen:
            if p not in PHASES:
                raise ValidationError(f"invalid dream phase {p!r} (use {', '.join(PHASES)})")
        chosen = [p for p in PHASES if p in chosen]
        t0 = time.perf_counter()
        stamp = self.now().strftime("%Y%m%dT%H%M%SZ")
        run = DreamRun(
            f"{stamp}-{uuid.uuid4().hex[:6]}", apply, trigger, self.now_iso(), results=[]
        )
        if not apply:  # a plan writes nothing: no need to wait for anyone
            self._plan(run, chosen, t0, progress)
            return run
        with one_dream_at_a_time(self.store.db_path, f"run {run.run_id} ({trigger})"):
            self._run(run, chosen, t0, write_files, progress)
        return run

    def _plan(
        self,
        run: DreamRun,
        chosen: list[str],
        t0: float,
        progress: Callable[[int, int], None] | None,
    ) -> None:
        """A dry run: the applied cycle rehearsed on a private copy of the store, thrown
        away after (the same clock for every step). Without a copy (an in-memory store,
        a folder we cannot write) each step plans on the unchanged store instead, and the
        first phase's notes say that ``apply`` may then do less."""
        from ..store.snapshot import discard_copy, private_copy

        copy = private_copy(self.store)
        if copy is None:
            self._run(run, chosen, t0, False, progress)
            if run.results:
                run.results[0].notes.append(
                    "planned on the store itself (no private copy could be made): each step"
                    " saw the store unchanged, so --apply may do less"
                )
            return
        try:
            twin = Dreamer(copy, self.config, home=self.home, now=self._now or self.now())
            twin.rehearsal = True
            twin._run(run, chosen, t0, False, progress)
        finally:
            discard_copy(copy)

    def _run(
        self,
        run: DreamRun,
        chosen: list[str],
        t0: float,
        write_files: bool,
        progress: Callable[[int, int], None] | None,
    ) -> None:
        apply, trigger = run.apply, run.trigger
        writes = apply or self.rehearsal  # a rehearsal writes its copy as apply would
        self._pairs = self._live = self._names = None
        self._seen_seq = self.store.size_hint()  # rows after this one are the next run's
        if writes:
            book.begin_run(self.store, run.run_id, trigger, chosen)
        hooks = get_registered_dream_hooks()
        steps_total = sum(len(getattr(self, f"_{p}_steps")()) for p in chosen)
        steps_done = 0
        for phase in chosen:
            result = DreamResult(phase, writes, run.run_id if writes else None)
            p0 = time.perf_counter()
            for step in getattr(self, f"_{phase}_steps")():
                try:
                    step(result)
                except (LLMemError, OSError) as exc:  # one step's failure costs that step
                    result.errors.append(f"{step.__name__}: {exc}")
                    log.warning("dream %s: %s failed: %s", phase, step.__name__, exc)
                except Exception as exc:  # a database error: the step rolled back
                    if type(exc).__name__ not in ("OperationalError", "DatabaseError"):
                        raise
                    result.errors.append(f"{step.__name__}: {exc}")
                    log.warning("dream %s: %s failed: %s", phase, step.__name__, exc)
                steps_done += 1
                if progress is not None:
                    progress(steps_done, steps_total)
            result.seconds = time.perf_counter() - p0
            if self.rehearsal:  # what it reports is a plan
                result.apply, result.run_id = False, None
            run.results.append(result)
            for hook in hooks.get(phase, ()):
                try:
                    hook(self, result, apply)
                except Exception as exc:  # a hook never stops the cycle
                    result.errors.append(f"hook: {type(exc).__name__}: {exc}")
                    log.error("dream hook for %s failed: %s: %s", phase, type(exc).__name__, exc)
        run.seconds = time.perf_counter() - t0
        if writes:
            if chosen == list(PHASES):
                book.set_state(self.store, run.run_id, LAST_RUN, run.started_at)
                book.set_state(self.store, run.run_id, LAST_SEQ, str(self._seen_seq))
            book.finish_run(self.store, run.run_id, {"counts": run.counts()})
            if apply and write_files:
                self._write_files(run)

    def undo(self, run_id: str) -> dict[str, int]:
        """Put back what run ``run_id`` changed (see `store.dream.undo_run`; refused while
        another run is in progress, or when a later run changed the same memories)."""
        with one_dream_at_a_time(self.store.db_path, f"undo of run {run_id}"):
            return book.undo_run(self.store, run_id)

    def due(self) -> bool:
        """Whether a full run is owed: none yet, or the last one ``interval_hours`` ago."""
        last = book.get_state(self.store, LAST_RUN)
        if last is None:
            return True
        then = datetime.fromisoformat(last)
        return self.now() - then >= timedelta(hours=self.settings.interval_hours)

    def _write_files(self, run: DreamRun) -> None:
        from .report import append_diary, write_report

        home = self.home or get_llmem_home()
        run.diary = append_diary(home / DIARY_FILE, run)
        run.report = write_report(home / REPORT_FILE, run, self.store)

    # -- the phases' steps ---------------------------------------------------------------
    def _light_steps(self) -> list[Any]:
        return [self.retire_expired, self.check_citations, self.merge_duplicates,
                self.prune_episodes]  # fmt: skip

    def _deep_steps(self) -> list[Any]:
        return [self.consolidate_inbox, self.supersede, self.boost, self.decay]

    def _rem_steps(self) -> list[Any]:
        return [self.auto_link, self.flag_stale]

    def _last_run(self) -> str | None:
        return book.get_state(self.store, LAST_RUN)

    def _is_new(self) -> Any:
        """A test for "stored or changed since the last full applied run" (a row past the
        row number it saw, or updated after it: an import keeps old dates, so the row
        number is what tells); everything is new before the first run."""
        since = self._last_run()
        if since is None:
            return lambda m: True
        seq = int(book.get_state(self.store, LAST_SEQ) or 0)
        return lambda m: m["seq"] > seq or m["updated_at"] > since

    def _about(self, mid: str) -> dict[str, Any]:
        """What a report row shows of memory ``mid`` besides the change: its text, its
        project key and the project's readable name (`project.project_label`)."""
        if self._names is None:
            self._names = projects.display_names(self.store.db)
            self._texts = {m["id"]: m for m in self._live_memories()}
        m = self._texts.get(mid)
        if m is None:
            m = book.memory_rows(self.store, [mid]).get(mid) or {}
            self._texts[mid] = m
        project = m.get("project")
        return {"content": m.get("content"), "project": project,
                "project_name": project_label(project, self._names)}  # fmt: skip

    def _live_memories(self) -> list[dict[str, Any]]:
        if self._live is None:
            self._live = book.live_memories(self.store, self.now_iso())
        return self._live

    # light ------------------------------------------------------------------------------
    def retire_expired(self, result: DreamResult) -> None:
        """Memories past ``expires_at`` are marked invalid (they already hide from search;
        now they say why, and free their vector slot)."""
        found = book.expired_unretired(self.store, self.now_iso())
        names = projects.display_names(self.store.db) if found else {}
        result.retired = [
            {"id": m["id"], "reason": "expired", "expires_at": m["expires_at"],
             "content": m["content"], "project": m["project"],
             "project_name": project_label(m["project"], names)}
            for m in found
        ]  # fmt: skip
        if result.apply and found:
            book.retire_memories(
                self.store, result.run_id or "", "light", "retire",
                {m["id"]: f"expired at {m['expires_at']}" for m in found},
            )  # fmt: skip

    def check_citations(self, result: DreamResult) -> None:
        """Check every project's citations; retire memories stale too long (dream/citations.py)."""
        from .citations import check_and_retire

        check_and_retire(self, result)

    def similar(self) -> dict[str, list[tuple[str, str, float, str]]]:
        """(id, id, score, how) of live memories alike enough to merge ("merge") or to link
        ("link"), computed once per run: word overlap for the same project and type,
        embedding cosine (same project) where both memories have a vector."""
        if self._pairs is not None:
            return self._pairs
        s = self.settings
        live = self._live_memories()
        merge: list[tuple[str, str, float, str]] = []
        link: list[tuple[str, str, float, str]] = []
        low = min(s.merge_overlap, s.auto_link_overlap) or 0.01
        sets = [likeness.words(m["content"]) for m in live]
        groups = [(m["project"], m["type"]) for m in live]
        # Incremental: after a full run, only pairs with a memory stored or changed since
        # (the others were compared then, with the same words)
        is_new = self._is_new()
        only = {i for i, m in enumerate(live) if is_new(m)} if self._last_run() else None
        for i, j, score in likeness.similar_pairs(sets, groups, low, only=only):
            pair = (live[i]["id"], live[j]["id"], round(score, 3), "words")
            if score >= s.merge_overlap and likeness.same_statement(sets[i], sets[j]):
                merge.append(pair)
            else:
                link.append(pair)
        low_cos = min(s.similarity_threshold, s.auto_link_threshold)
        seen = {(a, b) for a, b, _, _ in merge + link}
        for a, b, cos in sorted(set(self._semantic_pairs(live, low_cos))):
            if (a, b) in seen or (b, a) in seen:
                continue
            seen.add((a, b))
            pair = (a, b, round(cos, 3), "embedding")
            (merge if cos >= s.similarity_threshold else link).append(pair)
        self._pairs = {"merge": merge, "link": link}
        return self._pairs

    def _semantic_pairs(
        self, live: list[dict[str, Any]], threshold: float
    ) -> list[tuple[str, str, float]]:
        """Nearest neighbours by stored vector (same project), at least ``threshold``.
        Incremental: only memories stored or changed since the last full run ask for
        their neighbours (among all), so a daily run costs what the day added."""
        is_new = self._is_new()
        with_vec = [m for m in live if m["has_vec"] and is_new(m)]
        if not with_vec:
            return []
        live_ids = {m["id"] for m in live}
        k = max(2, self.settings.max_links_per_memory + 2)
        out: list[tuple[str, str, float]] = []
        for m in with_vec:
            blob = self.store.embedding_blob(m["id"])
            if blob is None:
                continue
            flt = MemoryFilter(project=m["project"], project_only=True)
            for hit in self.store.nearest(blob, flt, limit=k):
                cos = 1.0 - float(hit["_distance"])
                other = hit["id"]
                if other == m["id"] or other not in live_ids or cos < threshold:
                    continue
                out.append((min(m["id"], other), max(m["id"], other), cos))
        return out

    def merge_duplicates(self, result: DreamResult) -> None:
        """Groups of near-duplicates become their best memory: highest confidence, then
        most recalled, then longest text, then newest; it takes the union of the group's
        tags and source messages, the highest confidence and the sum of the recalls; the
        others are retired as "merged into <id>". With ``dream.model_rewrite`` the local
        model may rewrite its text into one sentence of the group's facts
        (`dream_rewrite`); a dry run does not ask it."""
        pairs = self.similar()["merge"]
        if not pairs:
            return
        rewriter = None
        if result.apply and not self.rehearsal:
            from ..model.backoff import FILE_NAME, SharedBackoff
            from .rewrite import build_rewriter

            backoff = SharedBackoff(path=(self.home or get_llmem_home()) / FILE_NAME)
            rewriter = build_rewriter(self.config, self.store, result.run_id or "",
                                      shared_backoff=backoff)  # fmt: skip
        try:
            self._merge_groups(result, pairs, rewriter)
        finally:
            if rewriter is not None:
                rewriter.close()

    def _merge_groups(
        self,
        result: DreamResult,
        pairs: list[tuple[str, str, float, str]],
        rewriter: Any,
    ) -> None:
        parent: dict[str, str] = {}

        def find(x: str) -> str:
            while parent.get(x, x) != x:
                parent[x] = parent.get(parent[x], parent[x])
                x = parent[x]
            return x

        for a, b, _, _ in pairs:
            ra, rb = find(a), find(b)
            if ra != rb:
                parent[rb] = ra
        groups: dict[str, list[str]] = {}
        for x in {x for a, b, _, _ in pairs for x in (a, b)}:
            groups.setdefault(find(x), []).append(x)
        score = {(a, b): (sc, how) for a, b, sc, how in pairs}
        rows = book.memory_rows(self.store, sorted({x for g in groups.values() for x in g}))
        updates: list[tuple[str, dict[str, Any]]] = []
        retire: dict[str, str] = {}
        for members in groups.values():
            members = [m for m in members if m in rows]
            if len(members) < 2:
                continue
            best = max(
                members,
                key=lambda x: (
                    rows[x]["confidence"],
                    rows[x]["access_count"],
                    len(rows[x]["content"]),
                    rows[x]["seq"],
                ),
            )
            others = [m for m in members if m != best]
            keep = rows[best]
            sets = _merged_fields(keep, [rows[o] for o in others])
            rewrite = self._rewrite(rewriter, keep, [rows[o] for o in others], sets)
            updates.append((best, sets))
            for o in others:
                retire[o] = f"merged into {best}"
            sc = [score.get((best, o)) or score.get((o, best)) for o in others]
            result.merged.append(
                {
                    "id": best,
                    **self._about(best),
                    "content": keep["content"],
                    "merged": [
                        {"id": o, "content": rows[o]["content"], "score": s[0] if s else None,
                         "by": s[1] if s else "group"}
                        for o, s in zip(others, sc, strict=True)
                    ],
                    "old": {
                        "confidence": keep["confidence"],
                        "tags": keep["tag_text"].split(),
                        "access_count": keep["access_count"],
                    },
                    "new": {
                        "confidence": sets["confidence"],
                        "tags": sets["tags"],
                        "access_count": sets["access_count"],
                    },
                    **rewrite,
                }
            )  # fmt: skip
        if result.apply and updates:
            with self.store.atomic():
                book.update_memories(self.store, result.run_id or "", "light", "merge", updates)
                book.retire_memories(self.store, result.run_id or "", "light", "merged", retire)
        self._live = [m for m in self._live_memories() if m["id"] not in retire]

    def _rewrite(
        self,
        rewriter: Any,
        keep: Mapping[str, Any],
        others: Sequence[Mapping[str, Any]],
        sets: dict[str, Any],
    ) -> dict[str, Any]:
        """The model's rewrite of a group's kept text, when asked and accepted (it goes in
        ``sets``, with ``metadata.rewritten_by``); the result item's ``rewrite`` fields."""
        import json

        if not (self.config.dream.model_rewrite and self.config.ollama.enabled):
            return {}
        if rewriter is None:  # a dry run: the model is not asked (nothing is spent)
            return {"rewrite": "would ask the model"}
        out = rewriter.rewrite([keep["content"], *(o["content"] for o in others)])
        if out.text is None or out.text == keep["content"]:
            return {"rewrite": out.status}
        sets["content"] = out.text
        meta = json.loads(sets["metadata"])
        meta["rewritten_by"] = rewriter.model
        sets["metadata"] = json.dumps(meta, ensure_ascii=False)
        return {"rewrite": "accepted", "new_content": out.text}

    def prune_episodes(self, result: DreamResult) -> None:
        """Episodes older than ``episodes.retention_days`` (or beyond ``max_count``) go,
        then, above ``episodes.max_db_mb``, the oldest ones until the database fits; a
        backup export of each batch is written first (docs/dream.md)."""
        ep = self.episodes
        cutoff = _ago(self.now(), ep.retention_days) if ep.retention_days > 0 else None
        doomed = episodes_to_prune(self.store.db, cutoff, ep.max_count)
        if doomed:
            result.pruned.append({"reason": "retention", "count": len(doomed)})
            self._delete_episodes(result, doomed, "retention")
        cap = int(ep.max_db_mb * MiB)
        if cap <= 0:
            return
        usage = book.db_usage(self.store)
        if result.apply and usage["auto_vacuum"] != 2:  # noqa: SIM102 - the VACUUM is the test
            if book.enable_incremental_vacuum(self.store):
                result.notes.append("switched the store to auto_vacuum INCREMENTAL (one VACUUM)")
                usage = book.db_usage(self.store)
        skip = {seq for seq, _ in doomed} if not result.apply else set()
        factor = 2.0  # bytes freed per byte of row text: learnt from each round
        for _ in range(SIZE_CAP_ROUNDS):
            excess = usage["used_bytes"] - cap
            if excess <= 0:
                break
            batch, expected = book.oldest_episodes_for(self.store, excess, skip, factor)
            if not batch:
                result.notes.append(
                    f"the database uses {usage['used_bytes'] // MiB} MiB, over the"
                    f" {ep.max_db_mb:g} MiB cap, and no episode is left to prune"
                )
                break
            result.pruned.append({"reason": "size cap", "count": len(batch)})
            if not result.apply:
                break
            self._delete_episodes(result, batch, "size")
            before, usage = usage, book.db_usage(self.store)
            freed = before["used_bytes"] - usage["used_bytes"]
            factor = min(8.0, max(0.1, factor * freed / expected)) if expected else factor
        if result.apply:
            result.vacuumed_pages = book.incremental_vacuum(self.store)

    def _delete_episodes(
        self, result: DreamResult, doomed: Sequence[tuple[int, str]], why: str
    ) -> None:
        if not result.apply:
            return
        if self.rehearsal:  # the copy is thrown away: no backup of it (its name is logged)
            name = str(archive.backup_name(f"dream-{why}"))
            book.delete_memories(self.store, result.run_id or "", "light", "delete", doomed, name)
            return
        ids = [mid for _, mid in doomed]
        backup = archive.write_backup(f"dream-{why}", self.store.export_all(limit=None, ids=ids))
        result.backups.append(str(backup))
        book.delete_memories(
            self.store, result.run_id or "", "light", "delete", doomed, str(backup)
        )

    # deep -------------------------------------------------------------------------------
    def consolidate_inbox(self, result: DreamResult) -> None:
        """The inbox (`dream/inbox.py`): a candidate extraction was unsure of becomes a
        memory when a later session says it again or the model confirms it, and goes
        after ``inbox_days``; notes scoring ``consolidate_min_score`` become memories, the
        rest are evicted."""
        from .inbox import consolidate

        consolidate(self, result)

    def supersede(self, result: DreamResult) -> None:
        """A change statement ("we moved from Jenkins to GitHub Actions") supersedes the
        older memories of its project that still state the old thing: a ``supersedes``
        relation from the new one, the old one retired with the reason. Only statements
        stored since the last run are read again."""
        is_new = self._is_new()
        retire: dict[str, str] = {}
        links: list[tuple[str, str]] = []
        searched: dict[tuple[str, str | None], list[dict[str, Any]]] = {}
        for m in self._live_memories():
            if not is_new(m) or m["type"] not in SUPERSEDABLE_TYPES:
                continue
            old = replaced_term(m["content"])
            if not old or not candidate_words(old):
                continue
            new = replacement_term(m["content"])
            query = '"' + " ".join(candidate_words(old)) + '"'
            key = (query, m["project"])
            if key not in searched:
                try:
                    searched[key] = self.store.search(
                        query, limit=20, type=SUPERSEDABLE_TYPES, project=m["project"]
                    )
                except LLMemError:
                    searched[key] = []
            hits = searched[key]
            for hit in hits:
                text = str(hit.get("content") or "")
                if (
                    hit["id"] == m["id"]
                    or hit["id"] in retire
                    or hit["created_at"] >= m["created_at"]
                    or not _mentions(text, old)
                    or (new and _mentions(text, new))
                    or replaced_term(text)
                ):
                    continue
                retire[hit["id"]] = f"superseded by {m['id']}: {m['content']}"[:500]
                links.append((m["id"], hit["id"]))
                result.superseded.append(
                    {"id": hit["id"], **self._about(hit["id"]), "content": text, "by": m["id"],
                     "by_content": m["content"], "term": old}
                )  # fmt: skip
        if result.apply and links:
            with self.store.atomic():
                book.add_relations(self.store, result.run_id or "", "deep", "supersedes", links)
                book.retire_memories(self.store, result.run_id or "", "deep", "superseded", retire)
        if retire:
            self._live = [m for m in self._live_memories() if m["id"] not in retire]

    def boost(self, result: DreamResult) -> None:
        """Memories recalled at least ``boost_threshold`` times, and again since the last
        boost, gain ``boost_amount`` of confidence (at most 1)."""
        s = self.settings
        now = self.now_iso()
        since = book.get_state(self.store, LAST_BOOST) or _ago(self.now(), s.decay_interval_days)
        found = book.recalled_since(self.store, since, now, s.boost_threshold)
        updates = []
        for mid, conf, uses in found:
            new = round(min(1.0, conf + s.boost_amount), 6)
            updates.append((mid, {"confidence": new}))
            result.boosted.append(
                {"id": mid, **self._about(mid), "old": conf, "new": new, "uses": uses}
            )
        if result.apply:
            with self.store.atomic():
                book.update_memories(self.store, result.run_id or "", "deep", "boost", updates)
                book.set_state(self.store, result.run_id or "", LAST_BOOST, now)

    def decay(self, result: DreamResult) -> None:
        """Memories unused (not recalled, or created) for ``decay_interval_days`` lose
        ``decay_rate`` of their confidence, down to ``decay_floor``; at most once per
        interval (the last decay's time is kept)."""
        s = self.settings
        now = self.now()
        last = book.get_state(self.store, LAST_DECAY)
        interval = timedelta(days=s.decay_interval_days)
        if last is not None and now - datetime.fromisoformat(last) < interval:
            result.notes.append(f"decay skipped: the last one was at {last}")
            return
        boosted = {b["id"] for b in result.boosted}
        found = book.unused_since(self.store, _ago(now, s.decay_interval_days), self.now_iso(),
                                  s.decay_floor)  # fmt: skip
        updates = []
        for mid, conf in found:
            if mid in boosted:
                continue
            new = round(max(s.decay_floor, conf * (1.0 - s.decay_rate)), 6)
            if new >= conf:
                continue
            updates.append((mid, {"confidence": new}))
            result.decayed.append({"id": mid, **self._about(mid), "old": conf, "new": new})
        if result.apply:
            with self.store.atomic():
                book.update_memories(self.store, result.run_id or "", "deep", "decay", updates)
                book.set_state(self.store, result.run_id or "", LAST_DECAY, self.now_iso())

    # rem --------------------------------------------------------------------------------
    def auto_link(self, result: DreamResult) -> None:
        """``related_to`` links between memories alike enough to be related but not to
        merge, strongest first, at most ``max_links_per_memory`` new ones per memory."""
        cap = self.settings.max_links_per_memory
        if cap <= 0:
            return
        live = {m["id"] for m in self._live_memories()}
        existing = book.related_pairs(self.store)
        per: dict[str, int] = {}
        links: list[tuple[str, str]] = []
        for a, b, score, how in sorted(self.similar()["link"], key=lambda p: -p[2]):
            if a not in live or b not in live or (a, b) in existing:
                continue
            if per.get(a, 0) >= cap or per.get(b, 0) >= cap:
                continue
            per[a] = per.get(a, 0) + 1
            per[b] = per.get(b, 0) + 1
            links.append((a, b))
            result.linked.append(
                {"id": a, **self._about(a), "target": b,
                 "target_content": self._about(b)["content"], "score": score, "by": how}
            )  # fmt: skip
        if result.apply and links:
            added = set(
                book.add_relations(self.store, result.run_id or "", "rem", "related_to", links)
            )  # a memory at its relation limit gets none: the rows say what was done
            result.linked = [x for x in result.linked if (x["id"], x["target"]) in added]

    def flag_stale(self, result: DreamResult) -> None:
        """Procedures neither updated nor recalled for ``stale_procedure_days`` get
        ``metadata.possibly_stale`` (the date flagged); nothing else changes."""
        days = self.settings.stale_procedure_days
        if days <= 0:
            return
        found = book.unconfirmed_procedures(self.store, _ago(self.now(), days), self.now_iso())
        names = projects.display_names(self.store.db) if found else {}
        result.stale = [
            {"id": m["id"], "content": m["content"], "project": m["project"],
             "project_name": project_label(m["project"], names),
             "last_confirmed": m["confirmed"]}
            for m in found
        ]  # fmt: skip
        if not (result.apply and found):
            return
        import json

        rows = book.memory_rows(self.store, [m["id"] for m in found])
        updates = []
        for mid, row in rows.items():
            meta = json.loads(row["metadata"] or "{}")
            meta["possibly_stale"] = self.now_iso()[:10]
            updates.append((mid, {"metadata": json.dumps(meta, ensure_ascii=False)}))
        book.update_memories(self.store, result.run_id or "", "rem", "stale", updates)


def _merged_fields(keep: Mapping[str, Any], others: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The kept memory's new fields: tags and source messages united, confidence the
    highest, recalls summed, last recall the latest, ``metadata.merged_from`` listing
    the merged ids."""
    import json

    group = [keep, *others]
    tags: list[str] = []
    msgs: list[str] = []
    for m in group:
        tags += [t for t in (m["tag_text"] or "").split() if t not in tags]
        msgs += [x for x in json.loads(m["source_message_ids"] or "[]") if x not in msgs]
    meta = json.loads(keep["metadata"] or "{}")
    merged = meta.get("merged_from") if isinstance(meta.get("merged_from"), list) else []
    meta["merged_from"] = merged + [m["id"] for m in others]
    accessed = [m["accessed_at"] for m in group if m["accessed_at"]]
    return {
        "tags": tags,
        "source_message_ids": json.dumps(msgs),
        "confidence": max(m["confidence"] for m in group),
        "access_count": sum(m["access_count"] for m in group),
        "accessed_at": max(accessed) if accessed else None,
        "metadata": json.dumps(meta, ensure_ascii=False),
    }
