"""sqlite-vec tables that mirror ``memories.embedding``, for nearest-neighbour search.

Why a module of its own and not a numbered migration: the vec0 tables need the extension
(a process that cannot load sqlite-vec cannot even read them) and they are declared with
the embedding dimension, which is a setting. So they are created here, when sqlite-vec
loads and the first vector of that dimension exists, and rebuilt when the dimension changes.

Tables (rowid = ``memories.seq``):

* ``memories_vec``      vec0 ``scope text partition key, embedding float[D]
  distance_metric=cosine``: exact KNN.
* ``memories_vec_bit``  vec0 ``scope text partition key, embedding bit[D]``
  (``vec_quantize_binary``): the prefilter.
* ``_vec_meta``         plain key/value table: the dimension D every stored vector must have.
* ``_vec_pending``      plain table: seqs whose vector changed in a process without sqlite-vec.

Invariant: the vec tables hold exactly one row per memory whose embedding has D dimensions.
The store keeps it inside the same transaction as the memory write; `reconcile` (run when a
store opens) repairs what a process without the extension left behind: the seqs it noted
in ``_vec_pending``, and a cheap count and highest seq on both sides (an expression index
makes the memories side index-only); on a difference the missing rows are filled and
orphans removed.

``scope`` is ``g`` for global memories (project NULL) and ``p`` for project memories: a
session searches its project's memories plus the global ones, and the global ones would
otherwise be a needle in the other projects' haystack (the nearest vectors to a question
about one project's port are the other projects' ports). Two partitions cost one extra
preallocated chunk; a partition per project would cost one per project. The project's
own memories are found through ``idx_memories_vec_scope`` and scanned exactly when few.

sqlite-vec 0.1.9 has no SIMD: every KNN is brute force (float32 cosine at 100k x 768 is
about 176 ms, bit[768] about 10 ms). Below ``PREFILTER_THRESHOLD`` vectors the float
table is searched exactly; at or above it the bit table gives a few hundred candidates
that are re-ranked exactly with ``vec_distance_cosine`` over ``memories.embedding`` by
seq (rowid lookups into vec0 would be slower). vec0 has no INSERT OR REPLACE: an update
is DELETE + INSERT. Write KNN as ``embedding MATCH ? AND k = ?`` (never LIMIT).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from typing import Any, NamedTuple

from ..errors import ValidationError
from ..timestamps import now_iso
from .db import Database, has_function, transaction
from .records import MEMORY_COLUMNS, MemoryFilter, cosine_distance, pack_embedding, unpack_embedding

log = logging.getLogger(__name__)

VEC_TABLE = "memories_vec"
BIT_TABLE = "memories_vec_bit"
META_TABLE = "_vec_meta"
PENDING_TABLE = "_vec_pending"
LENGTH_INDEX = "idx_memories_vec_scope"
PREFILTER_THRESHOLD = 50_000
PREFILTER_CANDIDATES = 100
# The filtered-KNN planner: fetch this many times the limit (at least KNN_MIN_K) and widen
# at most KNN_MAX_ROUNDS times; a project with at most OWN_SCAN_MAX vectors is scanned
# exactly; without sqlite-vec, a Python scan reads at most BRUTE_FORCE_MAX_ROWS rows.
KNN_OVERFETCH = 2
KNN_MIN_K = 20
KNN_MAX_ROUNDS = 3
OWN_SCAN_MAX = 2_000
BRUTE_FORCE_MAX_ROWS = 10_000
SCOPE_GLOBAL = "g"
SCOPE_PROJECT = "p"
_SCOPE_SQL = f"CASE WHEN project IS NULL THEN '{SCOPE_GLOBAL}' ELSE '{SCOPE_PROJECT}' END"
_DIM = re.compile(r"\b(?:float|bit)\[(\d+)\]")
_OUR_TABLES = (VEC_TABLE, BIT_TABLE, META_TABLE, PENDING_TABLE)


class VectorStatus(NamedTuple):
    """What `llmem-hooks doctor` shows about vector search."""

    available: bool
    reason: str
    stored: int  # vectors in the index (not `count`: that would hide tuple.count)


def unavailable_reason() -> str:
    """Why sqlite-vec cannot be loaded in this Python ("" if it can)."""
    try:
        import sqlite_vec  # type: ignore[import-untyped]
    except ImportError:
        return "the sqlite-vec package is not installed (pip install sqlite-vec)"
    from .db import _driver

    driver = _driver()
    conn = driver.connect(":memory:")
    try:
        if not hasattr(conn, "enable_load_extension"):
            return (
                f"this Python's SQLite driver ({driver.__name__}) cannot load extensions;"
                " install sqlean-py"
            )
        try:
            conn.enable_load_extension(True)
            sqlite_vec.load(conn)
        except Exception as exc:
            return f"loading sqlite-vec failed: {exc}"
    finally:
        conn.close()
    return ""


def _declared_dimensions(sql: str) -> int | None:
    m = _DIM.search(sql)
    return int(m.group(1)) if m else None


def check_dimensions(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 8192:
        raise ValidationError(f"vector dimensions must be an integer from 1 to 8192, got {value!r}")
    return value


class VectorIndex:
    """The vec0 tables of one connection. Not locked: the store calls it under its lock,
    and the write methods inside the store's transaction."""

    def __init__(
        self,
        conn: Any,
        dimensions: int | None = None,
        *,
        enabled: bool = True,
        prefilter_threshold: int = PREFILTER_THRESHOLD,
        prefilter_candidates: int = PREFILTER_CANDIDATES,
    ) -> None:
        self.conn = conn
        self.requested = None if dimensions is None else check_dimensions(dimensions)
        self.enabled = enabled
        self.loaded = enabled and has_function(conn, "vec_version")
        self.prefilter_threshold = prefilter_threshold
        self.prefilter_candidates = prefilter_candidates
        self.dimensions: int | None = None
        self._has_tables = False
        # Set when a write changed the schema or the dimension: if its transaction rolls
        # back, the cached state is wrong, so the next reader re-reads it.
        self._changed = False

    # -- schema ------------------------------------------------------------------------
    def _tables(self) -> dict[str, str]:
        rows = self.conn.execute(
            f"SELECT name, sql FROM sqlite_master WHERE name IN ({','.join('?' * 4)})",
            _OUR_TABLES,
        ).fetchall()
        return {r[0]: r[1] or "" for r in rows}

    def _recorded(self, tables: dict[str, str]) -> int | None:
        if META_TABLE not in tables:
            return None
        row = self.conn.execute(
            f"SELECT value FROM {META_TABLE} WHERE key = 'dimensions'"
        ).fetchone()
        return int(row[0]) if row and row[0] is not None else None

    def _ensure_plain_tables(self) -> None:
        """The meta and pending tables and the length index (plain SQL, no extension)."""
        self.conn.execute(
            f"CREATE TABLE IF NOT EXISTS {META_TABLE} (key TEXT PRIMARY KEY, value) WITHOUT ROWID"
        )
        self.conn.execute(f"CREATE TABLE IF NOT EXISTS {PENDING_TABLE} (seq INTEGER PRIMARY KEY)")
        # Makes the reconcile counts and the per-project vector counts index-only (no read
        # of 100k rows on every open or search).
        self.conn.execute(
            f"CREATE INDEX IF NOT EXISTS {LENGTH_INDEX} ON memories(length(embedding), project) "
            "WHERE embedding IS NOT NULL"
        )

    def _record(self, dims: int) -> None:
        self._ensure_plain_tables()
        self.conn.execute(
            f"INSERT INTO {META_TABLE}(key, value) VALUES ('dimensions', ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (dims,),
        )
        self.dimensions = dims

    @property
    def _names(self) -> tuple[str, ...]:
        """The vec tables of the current dimension (binary quantization needs D % 8 == 0;
        every real model's size is, a test's 3-d vectors are not: no prefilter then)."""
        return (VEC_TABLE, BIT_TABLE) if (self.dimensions or 0) % 8 == 0 else (VEC_TABLE,)

    @property
    def has_prefilter(self) -> bool:
        return BIT_TABLE in self._names

    def _create_tables(self) -> None:
        d = self.dimensions
        self.conn.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS {VEC_TABLE} USING vec0("
            f"scope text partition key, embedding float[{d}] distance_metric=cosine)"
        )
        if self.has_prefilter:
            self.conn.execute(
                f"CREATE VIRTUAL TABLE IF NOT EXISTS {BIT_TABLE} USING vec0("
                f"scope text partition key, embedding bit[{d}])"
            )
        self._has_tables = True

    def _drop_tables(self) -> None:
        self.conn.execute(f"DROP TABLE IF EXISTS {VEC_TABLE}")
        self.conn.execute(f"DROP TABLE IF EXISTS {BIT_TABLE}")
        self._has_tables = False

    def _fill(self, where: str = "1", params: Sequence[Any] = ()) -> int:
        """Copy the vectors of matching memories (of dimension D) into both tables."""
        cond = f"embedding IS NOT NULL AND length(embedding) = ? AND ({where})"
        args = [4 * (self.dimensions or 0), *params]
        before = self.conn.total_changes
        self.conn.execute(
            f"INSERT INTO {VEC_TABLE}(rowid, scope, embedding) SELECT seq, {_SCOPE_SQL}, "
            f"embedding FROM memories WHERE {cond}",
            args,
        )
        added = self.conn.total_changes - before
        if self.has_prefilter:
            # No ORDER BY here: a sorter drops the value's subtype, and vec0 then takes the
            # quantized blob for a float vector.
            self.conn.execute(
                f"INSERT INTO {BIT_TABLE}(rowid, scope, embedding) SELECT seq, {_SCOPE_SQL}, "
                f"vec_quantize_binary(embedding) FROM memories WHERE {cond}",
                args,
            )
        return added

    def _rebuild(self) -> int:
        self._drop_tables()
        self.conn.execute(f"DELETE FROM {PENDING_TABLE}")
        if not self._mem_side()[0]:
            return 0  # created lazily, with the first vector (vec0 preallocates a chunk)
        self._create_tables()
        return self._fill()

    # -- opening -----------------------------------------------------------------------
    def open(self) -> None:
        """Adopt (or record) the dimension; rebuild on a changed one; then `reconcile`."""
        tables = self._tables()
        recorded = self._recorded(tables)
        if self.requested is not None and recorded != self.requested:
            with transaction(self.conn):
                tables = self._tables()  # re-read under the write lock
                recorded = self._recorded(tables)
                if recorded != self.requested:
                    if recorded is not None:
                        log.info(
                            "vector dimension changed from %s to %s: rebuilding the vector index",
                            recorded,
                            self.requested,
                        )
                    self._record(self.requested)
                    if self.loaded:
                        self._rebuild()
                    return
        self.dimensions = recorded
        self._has_tables = all(t in tables for t in self._names)
        if recorded is not None and self.loaded:
            self.reconcile()

    def refresh(self) -> None:
        """Re-read the dimension and tables (another process may have set them up)."""
        self._changed = False
        tables = self._tables()
        self.dimensions = self._recorded(tables)
        self._has_tables = all(t in tables for t in self._names)

    def _mem_side(self) -> tuple[int, int | None]:
        """(count, highest seq) of the memories with a D-sized embedding; two queries,
        since together they would defeat SQLite's count and max shortcuts (3 vs 5 ms)."""
        where = "WHERE embedding IS NOT NULL AND length(embedding) = ?"
        args = (4 * (self.dimensions or 0),)
        count = self.conn.execute(f"SELECT count(*) FROM memories {where}", args).fetchone()[0]
        top = self.conn.execute(f"SELECT max(seq) FROM memories {where}", args).fetchone()[0]
        return count, top

    def _vec_side(self, table: str) -> tuple[int, int | None]:
        count = self.conn.execute(f"SELECT count(*) FROM {table}_rowids").fetchone()[0]
        top = self.conn.execute(f"SELECT max(rowid) FROM {table}_rowids").fetchone()[0]
        return count, top

    def reconcile(self) -> dict[str, int]:
        """Make the vec tables match the memories again; returns rows added and removed.

        Cheap when nothing is wrong (count and highest seq on both sides, from indexes:
        about 3 ms at 100k vectors). A process running this code without sqlite-vec leaves
        the seqs it changed in ``_vec_pending``; a writer that knows nothing of vectors
        shows up as a different count or highest seq (then every row is compared)."""
        done = {"added": 0, "removed": 0}
        if not self.loaded or self.dimensions is None:
            return done
        tables = self._tables()
        names = self._names
        have = all(t in tables for t in names)
        stale = (
            have
            and any(
                _declared_dimensions(tables[t]) != self.dimensions
                or "partition key" not in tables[t]
                for t in names
            )
        ) or (BIT_TABLE in tables and BIT_TABLE not in names)
        pending = PENDING_TABLE in tables and bool(
            self.conn.execute(f"SELECT 1 FROM {PENDING_TABLE} LIMIT 1").fetchone()
        )
        mem = self._mem_side()
        if have and not stale and not pending:
            if all(self._vec_side(t) == mem for t in names):
                self._has_tables = True
                return done
        elif not have and not mem[0]:
            return done
        with transaction(self.conn):
            self._ensure_plain_tables()
            if stale or not have:
                log.info("building the vector index (%s dimensions)", self.dimensions)
                done["added"] = self._rebuild()
                return done
            self._has_tables = True
            seqs = [r[0] for r in self.conn.execute(f"SELECT seq FROM {PENDING_TABLE}")]
            if seqs:
                done["removed"] += self._delete(seqs)
                done["added"] += self._fill(
                    "seq IN (SELECT value FROM json_each(?))", [json.dumps(seqs)]
                )
                self.conn.execute(f"DELETE FROM {PENDING_TABLE}")
            dim_cond = "embedding IS NOT NULL AND length(embedding) = ?"
            nbytes = 4 * self.dimensions
            for table in names:
                orphans = [
                    r[0]
                    for r in self.conn.execute(
                        f"SELECT rowid FROM {table}_rowids WHERE rowid NOT IN "
                        f"(SELECT seq FROM memories WHERE {dim_cond})",
                        (nbytes,),
                    )
                ]
                for i in range(0, len(orphans), 500):
                    chunk = orphans[i : i + 500]
                    self.conn.execute(
                        f"DELETE FROM {table} WHERE rowid IN ({','.join('?' * len(chunk))})",
                        chunk,
                    )
                if table == VEC_TABLE:
                    done["removed"] += len(orphans)
            absent = " OR ".join(f"seq NOT IN (SELECT rowid FROM {t}_rowids)" for t in names)
            missing = [
                r[0]
                for r in self.conn.execute(
                    f"SELECT seq FROM memories WHERE {dim_cond} AND ({absent})", (nbytes,)
                )
            ]
            if missing:
                self._delete(missing)  # present in one table only
                done["added"] += self._fill(
                    "seq IN (SELECT value FROM json_each(?))", [json.dumps(missing)]
                )
        if done["added"] or done["removed"]:
            log.info("vector index repaired: %(added)d added, %(removed)d removed", done)
        return done

    # -- writes (inside the store's transaction) ---------------------------------------
    def check(self, blob: bytes | None) -> None:
        """Reject a vector whose dimension is not the store's (ValidationError)."""
        if blob is None:
            return
        if self._changed:
            self.refresh()
        dims = self.dimensions or self.requested
        if dims is not None and len(blob) // 4 != dims:
            raise ValidationError(
                f"embedding has {len(blob) // 4} dimensions but this memory store holds "
                f"{dims}-dimensional vectors (memory.vec_dimensions); use the embedding "
                "model the store was built with, or change memory.vec_dimensions (the "
                "vector index is then rebuilt)"
            )

    def write(self, items: Sequence[tuple[int, bytes | None]], *, fresh: bool = False) -> None:
        """Mirror these memories' vectors: (seq, packed float32) sets it, (seq, None) removes.
        Call after writing the memories rows. ``fresh``: the seqs have no rows yet (see
        `inserted`)."""
        if not items:
            return
        vecs = [(s, b) for s, b in items if b is not None]
        self.refresh()
        if self.dimensions is None:
            if not vecs:
                return  # no vector was ever stored: nothing to mirror
            self._record(len(vecs[0][1]) // 4)  # the first vector sets the dimension
            self._changed = True
        for _, blob in vecs:
            self.check(blob)
        if not self.loaded:
            self._ensure_plain_tables()
            self.conn.executemany(
                f"INSERT OR IGNORE INTO {PENDING_TABLE}(seq) VALUES (?)", [(s,) for s, _ in items]
            )
            return
        if not self._has_tables:
            if vecs:  # the first vectors: copy every stored embedding of this size
                self._create_tables()
                self._fill()
                self._changed = True
            return
        if not fresh:
            self._delete([s for s, _ in items])  # vec0 has no INSERT OR REPLACE
        if vecs:  # copied from the memories rows: they hold the vector and the project
            self._fill(
                "seq IN (SELECT value FROM json_each(?))", [json.dumps([s for s, _ in vecs])]
            )

    def inserted(self, first_seq: int, items: Sequence[tuple[int, bytes]]) -> None:
        """Mirror new memories (seqs >= ``first_seq``, all with a vector). Rows at those
        seqs can only be left over from deleted memories whose seq is reused (seq is
        max + 1): they go first."""
        self.refresh()
        if self.loaded and self._has_tables:
            for table in self._names:
                stale = [
                    (r[0],)
                    for r in self.conn.execute(
                        f"SELECT rowid FROM {table}_rowids WHERE rowid >= ?", (first_seq,)
                    )
                ]
                self.conn.executemany(f"DELETE FROM {table} WHERE rowid = ?", stale)
        if not items:
            return
        if self.loaded and self._has_tables and self.dimensions is not None:
            for _, blob in items:
                self.check(blob)
            self._fill("seq >= ?", [first_seq])  # one INSERT ... SELECT for a whole import
        else:
            self.write(items, fresh=True)

    def remove(self, seqs: Sequence[int]) -> None:
        """Forget these memories' vectors (deleted, or their embedding cleared)."""
        self.write([(s, None) for s in seqs])

    def _delete(self, seqs: Sequence[int]) -> int:
        """Delete the rows of these seqs that exist (a lookup in vec0's rowid table is
        cheaper than a DELETE of each)."""
        removed = 0
        for table in self._names:
            present: list[int] = []
            for i in range(0, len(seqs), 10_000):
                present.extend(
                    r[0]
                    for r in self.conn.execute(
                        f"SELECT rowid FROM {table}_rowids WHERE rowid IN "
                        "(SELECT value FROM json_each(?))",
                        (json.dumps(list(seqs[i : i + 10_000])),),
                    )
                )
            self.conn.executemany(f"DELETE FROM {table} WHERE rowid = ?", [(s,) for s in present])
            if table == VEC_TABLE:
                removed = len(present)
        return removed

    # -- search ------------------------------------------------------------------------
    def usable(self, query: bytes) -> bool:
        """True if KNN can answer a query of this size (ValidationError on a wrong size)."""
        if self._changed:
            self.refresh()
        if self.dimensions is not None:
            self.check(query)
        return self.loaded and self._has_tables and self.dimensions is not None

    def count(self) -> int:
        """Vectors in the index (0 when it does not exist)."""
        if not (self.loaded and self._has_tables):
            return 0
        return self.conn.execute(f"SELECT count(*) FROM {VEC_TABLE}_rowids").fetchone()[0]

    def count_scope(self, project: str | None, cap: int) -> int:
        """Vectors of ``project``'s memories (None: the global ones), counted on the index,
        at most ``cap`` (so a huge project costs no more than that)."""
        return self.conn.execute(
            "SELECT count(*) FROM (SELECT 1 FROM memories WHERE embedding IS NOT NULL "
            "AND length(embedding) = ? AND project IS ? LIMIT ?)",
            (4 * (self.dimensions or 0), project, cap),
        ).fetchone()[0]

    def knn(
        self, query: bytes, k: int, *, scope: str | None = None, searched: int | None = None
    ) -> list[tuple[int, float]]:
        """The ``k`` nearest (seq, cosine distance), nearest first, among all vectors or
        those of one ``scope`` (SCOPE_GLOBAL, SCOPE_PROJECT).

        ``searched``: how many vectors that is (default: all). Below ``prefilter_threshold``
        an exact KNN on the float table; at or above, a Hamming KNN on the bit table for
        max(prefilter_candidates, 2k) candidates and their exact cosine distances from
        ``memories.embedding``. (vec0's KNN time grows with k as well as with n.)"""
        searched = self.count() if searched is None else searched
        part, args = ("", []) if scope is None else (" AND scope = ?", [scope])
        if searched < self.prefilter_threshold or not self.has_prefilter:
            rows = self.conn.execute(
                f"SELECT rowid, distance FROM {VEC_TABLE} WHERE embedding MATCH ? AND k = ?" + part,
                [query, k, *args],
            ).fetchall()
            return [(r[0], r[1]) for r in rows if r[1] is not None]
        cands = max(self.prefilter_candidates, 2 * k)
        seqs = [
            r[0]
            for r in self.conn.execute(
                f"SELECT rowid FROM {BIT_TABLE} WHERE embedding MATCH vec_quantize_binary(?) "
                "AND k = ?" + part,
                [query, cands, *args],
            )
        ]
        return self.rerank(query, seqs, k)

    def rerank(self, query: bytes, seqs: Sequence[int], k: int) -> list[tuple[int, float]]:
        """Exact cosine distances of these memories, nearest ``k`` first."""
        rows = self.conn.execute(
            "SELECT seq, vec_distance_cosine(embedding, ?) AS d FROM memories "
            "WHERE seq IN (SELECT value FROM json_each(?)) AND length(embedding) = ? "
            "AND d IS NOT NULL ORDER BY d LIMIT ?",
            (query, json.dumps(list(seqs)), len(query), k),
        ).fetchall()
        return [(r[0], r[1]) for r in rows]

    # -- status ------------------------------------------------------------------------
    def status(self) -> VectorStatus:
        """(available, why / how, vectors indexed) for `llmem-hooks doctor`."""
        self.refresh()
        if not self.loaded:
            why = (
                "sqlite-vec is disabled for this store"
                if not self.enabled
                else unavailable_reason() or "sqlite-vec is not loaded"
            )
            n = self.conn.execute(
                "SELECT count(*) FROM memories WHERE embedding IS NOT NULL"
            ).fetchone()[0]
            how = (
                f"keyword search, plus a Python scan of at most 10,000 of the {n:,} embeddings"
                if n
                else "search is FTS-only"
            )
            return VectorStatus(False, f"{why}: {how}", n)
        version = self.conn.execute("SELECT vec_version()").fetchone()[0]
        if self.dimensions is None:
            return VectorStatus(True, f"sqlite-vec {version}; no vectors stored yet", 0)
        n = self.count()
        prefilter = n >= self.prefilter_threshold and self.has_prefilter
        mode = "binary prefilter + exact re-rank" if prefilter else "exact KNN"
        other = self.conn.execute(
            "SELECT count(*) FROM memories WHERE embedding IS NOT NULL AND length(embedding) != ?",
            (4 * self.dimensions,),
        ).fetchone()[0]
        reason = f"sqlite-vec {version}: {n:,} vectors of {self.dimensions} dimensions, {mode}"
        if other:
            reason += f"; {other:,} embeddings of another dimension are not indexed"
        return VectorStatus(True, reason, n)


def vector_status(store: Any) -> VectorStatus:
    """(available, reason, count) of a `MemoryStore`'s vector search."""
    with store.db.lock:
        return store.vectors.status()


# -- the filtered nearest-neighbour planner (called by MemoryStore) ------------------------
def nearest_rows(
    db: Database,
    index: VectorIndex,
    query: bytes,
    cond: str,
    params: Sequence[Any],
    limit: int,
    max_distance: float | None = None,
    scope: tuple[str | None, bool] | None = None,
) -> list[tuple[float, Any]]:
    """(distance, row) of the ``limit`` nearest memories satisfying ``cond`` (over
    alias ``m``), at most ``max_distance`` away. Call under the lock.

    ``scope``: None searches every vector; ``(project, with_global)`` only that
    project's memories (if project is not None) and the global ones (if with_global).
    A project's own memories are scanned exactly when at most OWN_SCAN_MAX, else found
    by KNN in the project partition; the global ones by KNN in theirs."""
    vi = index
    if limit < 1 or not vi.usable(query):
        return scan_rows(db, query, cond, params, limit, max_distance)
    total = vi.count()
    if scope is None:
        return knn_rows(db, index, query, cond, params, limit, max_distance, None, total)
    project, with_global = scope
    hits: list[tuple[float, Any]] = []
    n_global = vi.count_scope(None, total) if with_global else 0
    if project is not None:
        own = (f"{cond} AND m.project = ?", [*params, project])
        if vi.count_scope(project, OWN_SCAN_MAX + 1) <= OWN_SCAN_MAX:
            hits += scan_rows(db, query, *own, limit, max_distance)
        else:
            hits += knn_rows(
                db, index, query, *own, limit, max_distance, SCOPE_PROJECT, total - n_global
            )
    if n_global:
        hits += knn_rows(
            db,
            index,
            query,
            f"{cond} AND m.project IS NULL",
            params,
            limit,
            max_distance,
            SCOPE_GLOBAL,
            n_global,
        )
    hits.sort(key=lambda dr: dr[0])
    return hits[:limit]


def knn_rows(
    db: Database,
    index: VectorIndex,
    query: bytes,
    cond: str,
    params: Sequence[Any],
    limit: int,
    max_distance: float | None,
    scope: str | None,
    searched: int,
) -> list[tuple[float, Any]]:
    """KNN in one partition (or all vectors), the filter applied to the neighbours;
    more are fetched while too few pass, and a filter too selective for that is
    answered by scanning its rows instead."""
    cols = ", ".join("m." + c.strip() for c in MEMORY_COLUMNS.split(","))
    k = min(searched, max(limit * KNN_OVERFETCH, KNN_MIN_K))
    for _ in range(KNN_MAX_ROUNDS):
        if k <= 0:
            return []
        cands = index.knn(query, k, scope=scope, searched=searched)
        near = cands if max_distance is None else [c for c in cands if c[1] <= max_distance]
        dist = dict(near)
        rows = db.conn.execute(
            f"SELECT {cols}, m.seq FROM memories m WHERE m.seq IN "
            f"(SELECT value FROM json_each(?)) AND {cond}",
            [json.dumps(list(dist)), *params],
        ).fetchall()
        scored = sorted(((dist[r["seq"]], r) for r in rows), key=lambda dr: dr[0])
        # Done when enough passed the filter, or no vector is left to look at (all
        # seen, or the rest are farther than max_distance).
        if len(scored) >= limit or k >= searched or len(near) < len(cands):
            return scored[:limit]
        if not rows:
            break  # a very selective filter: scanning its rows beats a bigger KNN
        k = min(searched, 2 * k * max(2, (limit * len(cands)) // len(rows)))
        if k > searched // 4:
            break
    return scan_rows(db, query, cond, params, limit, max_distance)


def scan_rows(
    db: Database,
    query: bytes,
    cond: str,
    params: Sequence[Any],
    limit: int,
    max_distance: float | None = None,
) -> list[tuple[float, Any]]:
    """Exact distances of every memory satisfying ``cond``: ``vec_distance_cosine``
    when sqlite-vec is loaded, else Python over at most BRUTE_FORCE_MAX_ROWS rows."""
    cols = ", ".join("m." + c.strip() for c in MEMORY_COLUMNS.split(","))
    base = f"FROM memories m WHERE m.embedding IS NOT NULL AND length(m.embedding) = ? AND {cond}"
    if vec_loaded(db):
        where_d = "" if max_distance is None else "AND _distance <= ?"
        rows = db.conn.execute(
            f"SELECT {cols}, m.seq, vec_distance_cosine(m.embedding, ?) AS _distance {base} "
            f"{where_d} ORDER BY _distance LIMIT ?",
            [
                query,
                len(query),
                *params,
                *([] if max_distance is None else [max_distance]),
                limit,
            ],
        ).fetchall()
        return [(r["_distance"], r) for r in rows if r["_distance"] is not None]
    rows = db.conn.execute(
        f"SELECT {cols}, m.seq, m.embedding AS _emb {base} LIMIT ?",
        [len(query), *params, BRUTE_FORCE_MAX_ROWS],
    ).fetchall()
    scored = sorted(((cosine_distance(query, r["_emb"]), r) for r in rows), key=lambda dr: dr[0])
    if max_distance is not None:
        scored = [dr for dr in scored if dr[0] <= max_distance]
    return scored[:limit]


def vec_loaded(db: Database) -> bool:
    return db.has_function("vec_distance_cosine")


def get_embeddings_with_types(db: Database, limit: int | None = 10_000) -> list[tuple[bytes, str]]:
    """(embedding BLOB, type) of live memories with an embedding, newest first; at most
    ``limit`` (None or 0: all, negative: 10,000) since the metrics are O(n^2)."""
    limit = 10_000 if limit is not None and limit < 0 else limit
    cond, params = MemoryFilter().to_sql(now_iso())
    sql = (
        f"SELECT m.embedding, m.type FROM memories m WHERE m.embedding IS NOT NULL AND {cond}"
        " ORDER BY m.seq DESC"
    )
    if limit:
        sql += " LIMIT ?"
        params.append(limit)
    with db.lock:
        rows = db.conn.execute(sql, params).fetchall()
    return [(bytes(r[0]), str(r[1])) for r in rows]


def missing_embeddings(db: Database, limit: int = 32) -> list[tuple[str, str]]:
    """(id, content) of live memories without a vector, newest first: the ones
    semantic search and near-duplicate merging cannot see yet."""
    cond, params = MemoryFilter().to_sql(now_iso())
    with db.lock:
        rows = db.conn.execute(
            f"SELECT m.id, m.content FROM memories m WHERE m.embedding IS NULL AND {cond} "
            "ORDER BY m.seq DESC LIMIT ?",
            [*params, limit],
        ).fetchall()
    return [(r[0], r[1]) for r in rows]


def count_missing_embeddings(db: Database) -> int:
    """How many live memories have no vector yet (`missing_embeddings` gives them)."""
    cond, params = MemoryFilter().to_sql(now_iso())
    with db.lock:
        return int(
            db.conn.execute(
                f"SELECT COUNT(*) FROM memories m WHERE m.embedding IS NULL AND {cond}", params
            ).fetchone()[0]
        )


def set_embeddings(
    db: Database, index: VectorIndex, vectors: Sequence[tuple[str, Sequence[float]]]
) -> int:
    """Give memories their vectors (kept in step with the vec tables) without touching
    ``updated_at``: a vector added later is not news about the memory. Returns how
    many memories took one."""
    done = 0
    with db.transaction():
        for memory_id, vec in vectors:
            blob = pack_embedding(vec)
            index.check(blob)
            row = db.conn.execute(
                "SELECT seq FROM memories WHERE id = ? AND embedding IS NULL", (memory_id,)
            ).fetchone()
            if row is None:
                continue
            db.conn.execute("UPDATE memories SET embedding = ? WHERE seq = ?", (blob, row[0]))
            index.write([(row[0], blob)])
            done += 1
    return done


def count_embeddings(db: Database) -> int:
    """How many live memories have an embedding."""
    cond, params = MemoryFilter().to_sql(now_iso())
    with db.lock:
        return db.conn.execute(
            f"SELECT COUNT(*) FROM memories m WHERE m.embedding IS NOT NULL AND {cond}", params
        ).fetchone()[0]


def get_embedding(db: Database, memory_id: str) -> list[float] | None:
    blob = embedding_blob(db, memory_id)
    return unpack_embedding(blob) if blob is not None else None


def embedding_blob(db: Database, memory_id: str) -> bytes | None:
    """A memory's vector as stored (packed float32), ready for `MemoryStore.nearest`."""
    row = db.fetchone("SELECT embedding FROM memories WHERE id = ?", (memory_id,))
    return bytes(row[0]) if row and row[0] is not None else None
