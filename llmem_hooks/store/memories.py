"""MemoryStore: the memories table, its tags and FTS index, behind one lock.

The class is the store's table of contents: the memory methods are written here, the
others are one-line methods that call a table module (relations, inbox, archive,
sessions, vectors) with ``self.db``, the `Database`, so each table's SQL lives in one
file and no module reaches into the class. The store
knows nothing of agents beyond the provenance columns it keeps. Every write runs in one
``BEGIN IMMEDIATE`` transaction, so a failure leaves nothing half-written and concurrent
writers queue on the lock (busy_timeout) instead of losing data.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..config import Config, MemorySettings
from ..errors import NotFoundError, ValidationError
from ..paths import FILE_MODE, ensure_private_dir, get_db_path
from ..registry import check_memory_type
from ..text import fuzzy
from ..timestamps import now_iso, parse_iso
from . import archive, browse, inbox, mentions, projects, relations, sessions, vectors, vocabulary
from .db import Database, connect, connect_readonly, is_sqlite_file
from .floor_rows import keep as keep_floor_rows
from .migrations import BM25_RANK, migrate, schema_lag
from .records import (
    BRIEF_COLUMNS,
    DEFAULT_CONFIDENCE,
    DEFAULT_EXPORT_LIMIT,
    DUPLICATE_COSINE,
    FTS_TEXT_COLUMNS,
    ID_PATTERN,
    MAX_ID_LENGTH,
    MEMORY_COLUMNS,
    REINFORCEMENT,
    SORT_COLUMNS,
    MemoryFilter,
    check_confidence,
    check_content,
    check_hints,
    check_metadata,
    check_reason,
    check_tags,
    content_hash,
    json_dict,
    json_list,
    normalize_tags,
    pack_embedding,
    prepare_record,
    row_to_memory,
)
from .tags import set_tags, tag_ids
from .vectors import PREFILTER_THRESHOLD, VectorIndex


class SchemaBehind(ValidationError):
    """A read-only open found a database older than this version's schema."""


def _check_db_file(path: Path, read_only: bool) -> None:
    """Refuse, before SQLite opens it, a path that is not a database: SQLite would create
    a journal next to it or fail later with a less clear message."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if read_only:
            raise NotFoundError(f"no database at {path}") from None
        return
    if not stat.S_ISREG(st.st_mode):
        raise ValidationError(f"database: {path} is not a regular file")
    # With a -wal beside it, SQLite has the file open (maybe this very process: closing
    # any descriptor of it would drop that connection's POSIX locks), so it is a database.
    if not os.path.exists(f"{path}-wal") and not is_sqlite_file(path):
        raise ValidationError(f"database: {path} is not an SQLite database; nothing was changed")


def _scoped_match(match: str | None, flt: MemoryFilter) -> str:
    """``match`` on the text columns, narrowed inside FTS5 to the filter's project and the
    global memories (see m005_fts_scope; the SQL filter applies as well). ``match`` None:
    the scope alone."""
    if flt.project:
        scopes = [projects.fts_scope(flt.project)]
        if not flt.project_only:
            scopes.append('"global"')
        scope = f"fts_scope : ({' OR '.join(scopes)})"
        return scope if match is None else f"{FTS_TEXT_COLUMNS} : ({match}) AND {scope}"
    return f"{FTS_TEXT_COLUMNS} : ({match})"


class MemoryStore:
    """Memories in one SQLite file (default ``<LLMEM_HOME>/memory.db``).

    Usable as a context manager. Thread-safe: one connection behind one re-entrant lock,
    which every public method takes (reads fetch all their rows before releasing it). The
    raw handles ``conn`` and ``vectors`` are not guarded: use them inside `atomic`.

    ``vec_dimensions``: the embedding size (config memory.vec_dimensions); None adopts the
    one recorded in the database, or the first stored vector's. ``duplicate_cosine``: a
    new memory at least this similar to a valid one of its project is merged into it.
    ``load_vec=False`` opens without sqlite-vec (FTS and a Python scan only), as a Python
    that cannot load extensions would. ``prefilter_threshold``: from this many vectors on,
    KNN goes through the binary prefilter (see `llmem_hooks.store.vectors`).
    """

    def __init__(
        self,
        db_path: Path | str | None = None,
        *,
        inbox_capacity: int = MemorySettings.inbox_capacity,
        default_confidence: float = DEFAULT_CONFIDENCE,
        vec_dimensions: int | None = None,
        duplicate_cosine: float = DUPLICATE_COSINE,
        load_vec: bool = True,
        prefilter_threshold: int = PREFILTER_THRESHOLD,
        read_only: bool = False,
    ) -> None:
        path = Path(db_path) if db_path is not None else get_db_path()
        in_memory = str(path) == ":memory:"
        if not in_memory:
            _check_db_file(path, read_only)
        if not in_memory and not read_only:
            ensure_private_dir(path.parent)
            # Create the file 0600 before SQLite opens it: SQLite gives the -wal and -shm
            # files the database file's mode, so they are private from the first write.
            # Only when it does not exist: closing any descriptor of a file drops every
            # POSIX lock this process holds on it, including those of a connection already
            # open here; another process would then think itself the last user and delete
            # the WAL under that connection, whose later commits nobody else would see.
            if not path.exists():
                with contextlib.suppress(FileExistsError):
                    os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, FILE_MODE))
        self.db_path = path
        self.read_only = read_only
        self.inbox_capacity = inbox_capacity
        self.default_confidence = check_confidence(default_confidence, "default confidence")
        self.duplicate_cosine = check_confidence(duplicate_cosine, "duplicate cosine")
        if read_only:
            # Readers never write: no migrations, no vector reconcile, no access counts.
            self.db = Database(connect_readonly(path, load_vec=load_vec))
            lag = schema_lag(self.db.conn)
            if lag:
                self.db.conn.close()
                raise SchemaBehind(
                    f"database {path} lacks {lag} schema upgrade(s) and cannot be written;"
                    " run any llmem-hooks command once with write access to upgrade it"
                )
        else:
            self.db = Database(connect(path, load_vec=load_vec))
            migrate(self.db.conn)
        try:
            self.vectors = VectorIndex(
                self.db.conn,
                None if read_only else vec_dimensions,
                enabled=load_vec,
                prefilter_threshold=prefilter_threshold,
            )
            if read_only:
                self.vectors.refresh()
            else:
                self.vectors.open()
        except BaseException:
            self.db.conn.close()
            raise
        # The types already in this file are accepted by this store alone: opening a
        # database never registers anything process-wide (`llmem_hooks.registry`).
        self._stored_types = frozenset(
            name for (name,) in self.db.conn.execute("SELECT DISTINCT type FROM memories")
        )

    @classmethod
    def from_config(
        cls,
        config: Config | Mapping[str, Any],
        db_path: Path | str | None = None,
        *,
        read_only: bool = False,
    ) -> MemoryStore:
        """The store config.yaml's ``memory`` section describes (``db_path`` overrides its
        path): one rule for the CLI, the sidecar and the hooks. ``read_only``: see
        `connect_readonly` (for commands that only read). ``config``: the whole config,
        typed or the dict (see `llmem_hooks.config`)."""
        mem = Config.coerce(config).memory
        if db_path is None and mem.db_path:
            db_path = Path(mem.db_path).expanduser()
        return cls(
            db_path,
            inbox_capacity=mem.inbox_capacity,
            default_confidence=mem.default_confidence,
            vec_dimensions=mem.vec_dimensions,
            duplicate_cosine=mem.duplicate_cosine,
            read_only=read_only,
        )

    # -- lifecycle -----------------------------------------------------------------------
    @property
    def conn(self) -> Any:
        """The raw connection, for `transaction(store.conn)` and tests. Not guarded: a
        caller that shares the store between threads goes through `atomic` instead."""
        return self.db.conn

    def set_busy_timeout(self, ms: int) -> None:
        """How long a statement waits for another process's write lock before failing
        (a hook with a deadline shortens it)."""
        self.db.execute(f"PRAGMA busy_timeout = {max(0, int(ms))}")

    def time_limit(self, seconds: float | None) -> contextlib.AbstractContextManager[None]:
        """This store's statements abort after ``seconds`` (`db.time_limit`): a search's
        bound, so one costly query cannot hold the connection for long."""
        return self.db.time_limit(seconds)

    def close(self) -> None:
        self.db.close()

    @contextmanager
    def atomic(self) -> Iterator[MemoryStore]:
        """Run several writes as one transaction: all of them land, or none."""
        with self.db.transaction():
            yield self

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- memories ------------------------------------------------------------------------
    def add(
        self,
        type: str,
        content: str,
        *,
        summary: str | None = None,
        source: str = "manual",
        confidence: float | None = None,
        metadata: Mapping[str, Any] | None = None,
        hints: Sequence[str] | None = None,
        tags: Iterable[str] | str | None = None,
        expires_at: str | None = None,
        valid_until: str | None = None,
        entered_by: str | None = None,
        project: str | None = None,
        session_id: str | None = None,
        source_message_ids: Sequence[str] | None = None,
        embedding: Sequence[float] | bytes | None = None,
        id: str | None = None,
        created_at: str | None = None,
        dedupe: bool = True,
    ) -> str:
        """Store a memory and return its id.

        With ``dedupe`` (the default) a duplicate of a valid memory is not stored twice:
        same text up to case and spacing (same type and project), or, given an embedding,
        cosine similarity >= ``duplicate_cosine`` with a memory of the same project (any
        type: an extractor may call the same statement a fact once and a decision the next
        time). The existing memory is reinforced instead (see `_reinforce`) and its id
        returned.
        """
        record = self._prepare(
            {
                "id": id,
                "type": type,
                "content": content,
                "summary": summary,
                "source": source,
                "confidence": confidence,
                "metadata": metadata,
                "hints": hints,
                "tags": tags,
                "expires_at": expires_at,
                "valid_until": valid_until,
                "entered_by": entered_by,
                "project": project,
                "session_id": session_id,
                "source_message_ids": source_message_ids,
                "embedding": embedding,
                "created_at": created_at,
            }
        )
        with self.db.transaction():
            if dedupe:
                existing = self._find_duplicate(record) or self._find_near_duplicate(record)
                if existing is not None:
                    self._reinforce(existing, record)
                    return existing[1]
            self._insert([record])
        return record["id"]

    def _find_near_duplicate(self, record: dict[str, Any]) -> tuple[int, str, str] | None:
        """The valid memory of the same project nearest to the new one's embedding, if its
        cosine similarity reaches ``duplicate_cosine``."""
        if record["embedding"] is None:
            return None
        now = now_iso()
        hits = vectors.nearest_rows(
            self.db,
            self.vectors,
            record["embedding"],
            "m.project IS ? AND (m.valid_until IS NULL OR m.valid_until > ?) "
            "AND (m.expires_at IS NULL OR m.expires_at > ?)",
            [record["project"], now, now],
            1,
            max_distance=1.0 - self.duplicate_cosine,
            scope=(record["project"], record["project"] is None),
        )
        if not hits:
            return None
        row = hits[0][1]
        return (row["seq"], row["id"], row["tag_text"])

    def _reinforce(self, existing: tuple[int, str, str], record: dict[str, Any]) -> None:
        """Seeing a memory again makes it more credible: tags merged, confidence raised
        to the higher of the two plus REINFORCEMENT (at most 1), ``updated_at`` bumped and
        ``metadata.reinforcements`` counted. An embedding it lacked is taken over."""
        seq, _, tag_text = existing
        row = self.db.conn.execute(
            "SELECT confidence, metadata, embedding IS NULL FROM memories WHERE seq = ?", (seq,)
        ).fetchone()
        meta = json.loads(row[1] or "{}")
        count = meta.get("reinforcements")
        meta["reinforcements"] = (count if isinstance(count, int) else 0) + 1
        confidence = min(1.0, max(row[0], record["confidence"]) + REINFORCEMENT)
        sets = {"confidence": confidence, "metadata": json_dict(meta), "updated_at": now_iso()}
        if row[2] and record["embedding"] is not None:
            sets["embedding"] = record["embedding"]
        assignments = ", ".join(f"{col} = ?" for col in sets)
        self.db.conn.execute(
            f"UPDATE memories SET {assignments} WHERE seq = ?", [*sets.values(), seq]
        )
        if "embedding" in sets:
            self.vectors.write([(seq, record["embedding"])])
        if record["tags"]:
            set_tags(self.db.conn, seq, normalize_tags(tag_text.split() + record["tags"]))

    def _find_duplicate(self, record: dict[str, Any]) -> tuple[int, str, str] | None:
        now = now_iso()
        row = self.db.conn.execute(
            # `+type`: the hash index, never (type, created_at) (which reads every memory
            # of the type: ~2 ms an add at 5k memories of one type, when one row is asked).
            "SELECT seq, id, tag_text FROM memories WHERE content_hash = ? AND +type = ? "
            "AND +project IS ? AND (valid_until IS NULL OR valid_until > ?) "
            "AND (expires_at IS NULL OR expires_at > ?) LIMIT 1",
            (record["content_hash"], record["type"], record["project"], now, now),
        ).fetchone()
        return (row[0], row[1], row[2]) if row else None

    def _prepare(self, data: Mapping[str, Any]) -> dict[str, Any]:
        """Validate one memory's fields and return the row to insert (raises ValidationError)."""
        record = prepare_record(data, self.default_confidence, self._stored_types)
        self._check_vector(record["embedding"])
        return record

    def _check_vector(self, blob: bytes | None) -> bytes | None:
        with self.db.lock:  # the index's dimension may change under another thread's write
            self.vectors.check(blob)
        return blob

    _INSERT_COLUMNS = (
        "seq",
        "id",
        "type",
        "content",
        "summary",
        "source",
        "confidence",
        "metadata",
        "hints",
        "created_at",
        "updated_at",
        "accessed_at",
        "access_count",
        "valid_until",
        "invalidation_reason",
        "expires_at",
        "entered_by",
        "project",
        "session_id",
        "source_message_ids",
        "content_hash",
        "tag_text",
        "embedding",
    )

    def _insert(self, records: list[dict[str, Any]]) -> None:
        """Insert validated records (inside the caller's transaction)."""
        start = self.db.conn.execute("SELECT coalesce(max(seq), 0) FROM memories").fetchone()[0]
        for offset, rec in enumerate(records, start=1):
            rec["seq"] = start + offset
        cols = self._INSERT_COLUMNS
        self.db.conn.executemany(
            f"INSERT INTO memories ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
            [tuple(rec[c] for c in cols) for rec in records],
        )
        self.vectors.inserted(
            start + 1,
            [(rec["seq"], rec["embedding"]) for rec in records if rec["embedding"] is not None],
        )
        ids = tag_ids(self.db.conn, {t for rec in records for t in rec["tags"]})
        self.db.conn.executemany(
            "INSERT INTO memory_tags(memory_seq, tag_id) VALUES (?, ?)",
            [(rec["seq"], ids[t]) for rec in records for t in rec["tags"]],
        )
        terms: set[str] = set()
        for rec in records:
            terms |= fuzzy.extract_terms(
                f"{rec['content']} {rec['summary'] or ''} {rec['tag_text']}"
            )
        vocabulary.index_terms(self.db.conn, terms)
        keep_floor_rows(self.db.conn, start + len(records))

    def get(self, memory_id: str, track_access: bool = False) -> dict[str, Any] | None:
        """The memory with this id (valid or not), or None."""
        with self.db.lock:
            row = self.db.conn.execute(
                f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id = ?", (memory_id,)
            ).fetchone()
            if row is None:
                return None
            if track_access:
                self.touch_batch([memory_id])
            return row_to_memory(row)

    def resolve_id(self, id_or_prefix: str) -> str:
        """The full id of the memory whose id is, or starts with, ``id_or_prefix`` (>= 4 chars)."""
        if not id_or_prefix or len(id_or_prefix) > MAX_ID_LENGTH:
            raise NotFoundError(f"no memory with id {id_or_prefix!r}")
        row = self.db.fetchone("SELECT id FROM memories WHERE id = ?", (id_or_prefix,))
        if row:
            return str(row[0])
        if len(id_or_prefix) < 4:
            raise ValidationError(
                f"id {id_or_prefix!r} is too short: give at least 4 characters of the id"
            )
        if ID_PATTERN.match(id_or_prefix):
            rows = self.db.fetchall(
                "SELECT id FROM memories WHERE id >= ? AND id < ? ORDER BY id LIMIT 2",
                (id_or_prefix, id_or_prefix + "\uffff"),
            )
            if len(rows) == 1:
                return str(rows[0][0])
            if len(rows) > 1:
                raise ValidationError(
                    f"id prefix {id_or_prefix!r} is ambiguous; give more characters"
                )
        raise NotFoundError(f"no memory with id {id_or_prefix!r}")

    def get_many(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Memories by id (missing ids are absent from the result)."""
        out: dict[str, dict[str, Any]] = {}
        with self.db.lock:
            for i in range(0, len(ids), 500):
                chunk = list(ids[i : i + 500])
                for row in self.db.conn.execute(
                    f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id IN "
                    f"({','.join('?' * len(chunk))})",
                    chunk,
                ):
                    out[row["id"]] = row_to_memory(row)
        return out

    def update(
        self,
        memory_id: str,
        *,
        content: str | None = None,
        summary: str | None = None,
        type: str | None = None,
        confidence: float | None = None,
        metadata: Mapping[str, Any] | None = None,
        hints: Sequence[str] | None = None,
        tags: Iterable[str] | str | None = None,
        expires_at: str | None = None,
        embedding: Sequence[float] | bytes | None = None,
        clear_embedding: bool = False,
    ) -> bool:
        """Change fields of a memory; returns False if the id does not exist."""
        sets: dict[str, Any] = {}
        if content is not None:
            sets["content"] = check_content(content)
            sets["content_hash"] = content_hash(sets["content"])
        if summary is not None:
            sets["summary"] = check_content(summary, "summary")
        if type is not None:
            sets["type"] = type if type in self._stored_types else check_memory_type(type)
        if confidence is not None:
            sets["confidence"] = check_confidence(confidence)
        if metadata is not None:
            sets["metadata"] = check_metadata(metadata)
        if hints is not None:
            sets["hints"] = json_list(check_hints(hints), "hints")
        if expires_at is not None:
            sets["expires_at"] = parse_iso(expires_at, field="expires_at")
        if embedding is not None:
            sets["embedding"] = self._check_vector(pack_embedding(embedding))
        elif clear_embedding:
            sets["embedding"] = None
        new_tags = check_tags(tags) if tags is not None else None
        with self.db.transaction():
            row = self.db.conn.execute(
                "SELECT seq FROM memories WHERE id = ?", (memory_id,)
            ).fetchone()
            if row is None:
                return False
            sets["updated_at"] = now_iso()
            assignments = ", ".join(f"{col} = ?" for col in sets)
            self.db.conn.execute(
                f"UPDATE memories SET {assignments} WHERE seq = ?", [*sets.values(), row[0]]
            )
            if new_tags is not None:
                set_tags(self.db.conn, row[0], new_tags)
            if "embedding" in sets:
                self.vectors.write([(row[0], sets["embedding"])])
            words = f"{sets.get('content') or ''} {sets.get('summary') or ''}"
            vocabulary.index_terms(self.db.conn, fuzzy.extract_terms(words))
        return True

    def invalidate(self, memory_id: str, reason: str | None = None) -> bool:
        """Soft-delete: the memory stays for history but is no longer returned by default."""
        reason = check_reason(reason)
        now = now_iso()
        with self.db.transaction():
            row = self.db.conn.execute(
                "SELECT seq FROM memories WHERE id = ? "
                "AND (valid_until IS NULL OR valid_until > ?)",
                (memory_id, now),
            ).fetchone()
            if row is None:
                return False
            self.db.conn.execute(
                "UPDATE memories SET valid_until = ?, invalidation_reason = ?, updated_at = ?, "
                "embedding = NULL WHERE seq = ?",
                (now, reason, now, row[0]),
            )
            self.vectors.remove([row[0]])
            return True

    def delete(self, memory_id: str) -> bool:
        """Remove a memory for good (its tags links and relations go with it)."""
        with self.db.transaction():
            row = self.db.conn.execute(
                "SELECT seq FROM memories WHERE id = ?", (memory_id,)
            ).fetchone()
            if row is None:
                return False
            self.db.conn.execute("DELETE FROM memories WHERE seq = ?", (row[0],))
            self.vectors.remove([row[0]])
            return True

    def touch_batch(self, ids: Sequence[str]) -> int:
        """Count one access for each id in one UPDATE; returns the rows updated."""
        ids = list(dict.fromkeys(ids))
        if not ids or self.read_only:  # a read-only open records no accesses
            return 0
        with self.db.transaction():
            cur = self.db.conn.execute(
                "UPDATE memories SET access_count = access_count + 1, accessed_at = ? "
                f"WHERE id IN ({','.join('?' * len(ids))})",
                [now_iso(), *ids],
            )
            return cur.rowcount

    # -- search and listing --------------------------------------------------------------
    def fts_search(
        self,
        match: str,
        flt: MemoryFilter | None = None,
        limit: int = 10,
        offset: int = 0,
    ) -> list[dict[str, Any]]:
        """Memories matching the FTS5 expression ``match``, best BM25 first.

        Each result carries ``_bm25`` (lower is better, as FTS5 reports it).
        """
        flt = flt or MemoryFilter()
        cond, params = flt.to_sql(now_iso())
        expr = _scoped_match(match, flt)
        with self.db.lock:
            if flt.rank_newest:  # rank the newest N matches only (no BM25 in rowid order)
                floor = self.db.conn.execute(
                    "SELECT rowid FROM memories_fts WHERE memories_fts MATCH ? "
                    "ORDER BY rowid DESC LIMIT 1 OFFSET ?",
                    (expr, max(0, int(flt.rank_newest) - 1)),
                ).fetchone()
                if floor is not None:
                    cond += " AND memories_fts.rowid >= ?"
                    params.append(floor[0])
            sql = (
                f"SELECT {', '.join('m.' + c.strip() for c in MEMORY_COLUMNS.split(','))}, "
                f"{BM25_RANK} AS _bm25 FROM memories_fts JOIN memories m "
                "ON m.seq = memories_fts.rowid "
                f"WHERE memories_fts MATCH ? AND {cond} "
                "ORDER BY _bm25 LIMIT ? OFFSET ?"
            )
            rows = self.db.conn.execute(sql, [expr, *params, limit, offset]).fetchall()
        out = []
        for row in rows:
            mem = row_to_memory(row)
            mem["_bm25"] = mem.pop("_bm25")
            out.append(mem)
        return out

    def fts_count(self, match: str | None, flt: MemoryFilter | None, limit: int) -> int:
        """How many rows `fts_search` would see for ``match`` within ``flt``'s project
        (the FTS5 side only: the SQL filter is not applied), counted up to ``limit``.
        ``match`` None: the rows of the project's scope (its own and the global ones)."""
        expr = _scoped_match(match, flt or MemoryFilter())
        with self.db.lock:
            return self.db.conn.execute(
                "SELECT count(*) FROM (SELECT 1 FROM memories_fts WHERE memories_fts MATCH ?"
                " LIMIT ?)",
                (expr, max(0, int(limit))),
            ).fetchone()[0]

    def suggest_terms(self, term: str, threshold: float) -> list[str]:
        """Spellings close to ``term`` from the vocabulary of every memory's words (the
        ``fuzzy_terms`` index, see `llmem_hooks.text.fuzzy`), best first."""
        with self.db.lock:
            return [t for t, _ in vocabulary.suggest(self.db.conn, term, threshold)]

    def size_hint(self) -> int:
        """Upper bound of the number of memories, in O(1) (the highest row number)."""
        with self.db.lock:
            return self.db.conn.execute("SELECT coalesce(max(seq), 0) FROM memories").fetchone()[0]

    def count_matching(self, match: str, limit: int | None = None) -> int:
        """How many memories (valid or not) match an FTS5 expression; cheap, no ranking.
        ``limit``: stop counting there (a common word costs no more than that)."""
        expr = f"{FTS_TEXT_COLUMNS} : ({match})"
        with self.db.lock:
            if limit is None:
                return self.db.conn.execute(
                    "SELECT count(*) FROM memories_fts WHERE memories_fts MATCH ?", (expr,)
                ).fetchone()[0]
            return self.db.conn.execute(
                "SELECT count(*) FROM (SELECT 1 FROM memories_fts WHERE memories_fts MATCH ?"
                " LIMIT ?)",
                (expr, max(0, int(limit))),
            ).fetchone()[0]

    def saying(self, word: str, keys: Iterable[str], by: str = "project") -> set[str]:
        """Which of ``keys`` (projects, or sessions with ``by="session_id"``) hold a memory
        saying ``word`` (`mentions`)."""
        if by == "session_id":
            return mentions.sessions_saying(self.db, word, keys)
        return mentions.projects_saying(self.db, word, keys)

    def has_author(self, names: Sequence[str]) -> bool:
        """Whether any memory was entered by one of ``names`` (exact spellings; indexed)."""
        if not names:
            return False
        with self.db.lock:
            return (
                self.db.conn.execute(
                    "SELECT 1 FROM memories WHERE entered_by IN "
                    f"({','.join('?' * len(names))}) LIMIT 1",
                    list(names),
                ).fetchone()
                is not None
            )

    def has_match(self, match: str) -> bool:
        """Whether any memory matches an FTS5 expression (stems count: 'failing' finds
        'failed'); stops at the first row."""
        with self.db.lock:
            return (
                self.db.conn.execute(
                    "SELECT 1 FROM memories_fts WHERE memories_fts MATCH ? LIMIT 1",
                    (f"{FTS_TEXT_COLUMNS} : ({match})",),
                ).fetchone()
                is not None
            )

    def nearest(
        self, query_vec: bytes, flt: MemoryFilter | None = None, limit: int = 10
    ) -> list[dict[str, Any]]:
        """Memories with an embedding of the same size, nearest (cosine) first.

        KNN over the sqlite-vec index (`llmem_hooks.store.vectors`): exact below the prefilter
        threshold, binary prefilter + exact re-rank above; the filter is applied to the
        neighbours, fetching more while too few pass. Without sqlite-vec, a Python scan
        capped at BRUTE_FORCE_MAX_ROWS rows. Each result carries ``_distance``.
        A query of another dimension than the store's raises ValidationError.
        """
        flt = flt or MemoryFilter()
        cond, params = flt.to_sql(now_iso())
        with self.db.lock:
            scope = (flt.project, not flt.project_only) if flt.project else None
            scored = vectors.nearest_rows(
                self.db, self.vectors, query_vec, cond, params, limit, scope=scope
            )
        out = []
        for dist, row in scored:
            mem = row_to_memory(row)
            mem.pop("_emb", None)
            mem.pop("_distance", None)
            mem["_distance"] = dist
            out.append(mem)
        return out

    def search(
        self,
        query: str,
        limit: int = 20,
        offset: int = 0,
        type: str | Sequence[str] | None = None,
        valid_only: bool = True,
        **filters: Any,
    ) -> list[dict[str, Any]]:
        """Classic FTS5 search with the grep-like syntax (see `llmem_hooks.text.query`)."""
        from ..text.query import parse_query

        parsed = parse_query(query)
        if not parsed.strict_match:
            return []
        flt = MemoryFilter(type=type, valid_only=valid_only, **filters)
        return self.fts_search(parsed.strict_match, flt, limit, offset)

    def list_all(
        self,
        type: str | Sequence[str] | None = None,
        valid_only: bool = True,
        limit: int = 100,
        offset: int = 0,
        sort: str = "created",
        order: str = "desc",
        brief: bool = False,
        **filters: Any,
    ) -> list[dict[str, Any]]:
        """Memories matching the filters, sorted by ``sort`` (created, updated, accessed,
        expires, confidence, content, type). ``brief``: only `BRIEF_COLUMNS`, nothing
        decoded (a session's start context ranks hundreds at every session start)."""
        if sort not in SORT_COLUMNS:
            raise ValidationError(f"invalid sort {sort!r} (use {', '.join(SORT_COLUMNS)})")
        if order.lower() not in ("asc", "desc"):
            raise ValidationError(f"invalid order {order!r} (use asc or desc)")
        flt = MemoryFilter(type=type, valid_only=valid_only, **filters)
        cond, params = flt.to_sql(now_iso())
        sql = (
            f"SELECT {BRIEF_COLUMNS if brief else MEMORY_COLUMNS} FROM memories m WHERE {cond} "
            f"ORDER BY {SORT_COLUMNS[sort]} {order.upper()}, m.seq {order.upper()} "
            "LIMIT ? OFFSET ?"
        )
        with self.db.lock:
            rows = self.db.conn.execute(sql, [*params, limit, offset]).fetchall()
        return [dict(r) for r in rows] if brief else [row_to_memory(r) for r in rows]

    def data_version(self) -> int:
        """SQLite's ``PRAGMA data_version`` on this store's connection: it changes when
        another connection (another thread's store, another process) commits, not for
        this connection's own commits. A cache of what the store holds keys on it."""
        return int(self.db.fetchone("PRAGMA data_version")[0])

    def count(self, valid_only: bool = True) -> int:
        cond, params = MemoryFilter(valid_only=valid_only, include_expired=True).to_sql(now_iso())
        return int(self.db.fetchone(f"SELECT COUNT(*) FROM memories m WHERE {cond}", params)[0])

    def stats(self) -> dict[str, Any]:
        """Counts by type, tag and agent, plus the database size (one consistent read)."""
        with self.db.lock:
            return browse.stats(self.db, self.db_path, self.inbox_count())

    def prune(
        self,
        before: str | None = None,
        dry_run: bool = False,
        only_ids: Sequence[str] | None = None,
    ) -> list[dict[str, Any]]:
        """Delete expired memories (and, with ``before``, all created before that date).

        Returns the memories that were (or, with ``dry_run``, would be) deleted. With
        ``only_ids`` (the ids a person confirmed and a backup holds), only those of them
        that still match are deleted: a memory that became prunable after the preview is
        never deleted unseen.
        """
        now = now_iso()
        cond = "((expires_at IS NOT NULL AND expires_at <= ?)"
        params: list[Any] = [now]
        if before:
            cond += " OR created_at < ?"
            params.append(parse_iso(before, field="--before date"))
        cond += ")"
        if only_ids is not None:
            cond += " AND id IN (SELECT value FROM json_each(?))"
            params.append(json.dumps(list(only_ids)))
        with self.db.transaction():
            rows = self.db.conn.execute(
                f"SELECT {MEMORY_COLUMNS}, seq FROM memories WHERE {cond} ORDER BY seq", params
            ).fetchall()
            if not dry_run and rows:
                self.db.conn.execute(f"DELETE FROM memories WHERE {cond}", params)
                self.vectors.remove([r["seq"] for r in rows])
        return [row_to_memory(r) for r in rows]

    # -- embeddings, export / import, relations, extraction log: one table module each,
    # called with this store's `Database` (the modules never see the store itself) -----
    def get_embedding(self, memory_id: str) -> list[float] | None:
        return vectors.get_embedding(self.db, memory_id)

    def embedding_blob(self, memory_id: str) -> bytes | None:
        return vectors.embedding_blob(self.db, memory_id)

    def get_embeddings_with_types(self, limit: int | None = 10_000) -> list[tuple[bytes, str]]:
        return vectors.get_embeddings_with_types(self.db, limit)

    def missing_embeddings(self, limit: int = 32) -> list[tuple[str, str]]:
        return vectors.missing_embeddings(self.db, limit)

    def set_embeddings(self, items: Sequence[tuple[str, Sequence[float]]]) -> int:
        return vectors.set_embeddings(self.db, self.vectors, items)

    def count_embeddings(self) -> int:
        return vectors.count_embeddings(self.db)

    def export_all(
        self,
        limit: int | None = DEFAULT_EXPORT_LIMIT,
        ids: Sequence[str] | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> list[dict[str, Any]]:
        return archive.export_all(self.db, limit, ids, progress)

    def import_memories(
        self,
        data: Sequence[Mapping[str, Any]] | Mapping[str, Any],
        progress: Callable[[int, int], None] | None = None,
    ) -> int:
        return archive.import_memories(self, data, progress)

    def add_relation(
        self, source_id: str, target_id: str, relation_type: str, target_type: str = "memory"
    ) -> int:
        return relations.add_relation(self.db, source_id, target_id, relation_type, target_type)

    def get_relations(self, memory_id: str) -> list[dict[str, Any]]:
        return relations.get_relations(self.db, memory_id)

    def traverse_relations(
        self,
        memory_id: str,
        relation_type: str | None = None,
        max_depth: int = 3,
        target_type: str | None = None,
    ) -> list[dict[str, Any]]:
        return relations.traverse_relations(
            self.db, memory_id, relation_type, max_depth, target_type
        )

    def log_extraction(
        self,
        source_type: str,
        source_id: str,
        cursor: str | None = None,
        memory_count: int = 0,
        message_count: int = 0,
    ) -> None:
        sessions.log_extraction(
            self.db, source_type, source_id, cursor, memory_count, message_count
        )

    def get_extraction(self, source_type: str, source_id: str) -> dict[str, Any] | None:
        return sessions.get_extraction(self.db, source_type, source_id)

    # -- inbox, the working memory (store/inbox.py, over this store: promotion writes
    # memories) ----------------------------------------------------------------------------
    def add_to_inbox(
        self,
        content: str,
        source: str = "note",
        attention_score: float = 0.5,
        metadata: Mapping[str, Any] | None = None,
    ) -> str:
        return inbox.add_to_inbox(self, content, source, attention_score, metadata)

    def get_from_inbox(self, item_id: str) -> dict[str, Any] | None:
        return inbox.get_from_inbox(self, item_id)

    def list_inbox(self, limit: int = 20) -> list[dict[str, Any]]:
        return inbox.list_inbox(self, limit)

    def inbox_count(self) -> int:
        return inbox.inbox_count(self)

    def update_inbox_attention_score(self, item_id: str, score: float) -> bool:
        return inbox.update_inbox_attention_score(self, item_id, score)

    def remove_from_inbox(self, item_id: str) -> bool:
        return inbox.remove_from_inbox(self, item_id)

    def consolidate(
        self, min_score: float = 0.5, dry_run: bool = False, type: str = "fact"
    ) -> dict[str, list[dict[str, Any]]]:
        return inbox.consolidate(self, min_score, dry_run, type)
