"""Schema migrations: small named functions, each applied once and recorded.

``_schema_migrations`` holds one row per applied migration. A migration that adds an
index or a derived table also backfills it from existing rows, so a database upgraded
step by step ends identical to a fresh one (tests check this).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from ..errors import ValidationError
from ..text import fuzzy
from ..timestamps import now_iso, parse_iso
from . import floor_rows, vocabulary
from .db import transaction

Migration = Callable[[Any], None]


def run_script(conn: Any, sql: str) -> None:
    """Run several statements one by one.

    ``executescript`` would COMMIT the surrounding transaction first, so a failed migration
    could leave half a schema behind; executing statement by statement keeps it atomic.
    """
    buf = ""
    for line in sql.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            if buf.strip():
                conn.execute(buf)
            buf = ""
    if buf.strip():
        raise ValueError(f"incomplete SQL statement in migration: {buf.strip()[:80]}")


def m001_core(conn: Any) -> None:
    """memories, tags, relations and the extraction log."""
    run_script(
        conn,
        """
        CREATE TABLE memories (
            seq INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            type TEXT NOT NULL,
            content TEXT NOT NULL CHECK (length(content) BETWEEN 1 AND 10000),
            summary TEXT,
            source TEXT NOT NULL DEFAULT 'manual',
            confidence REAL NOT NULL DEFAULT 0.8 CHECK (confidence BETWEEN 0.0 AND 1.0),
            metadata TEXT NOT NULL DEFAULT '{}',
            hints TEXT NOT NULL DEFAULT '[]',
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            accessed_at TEXT,
            access_count INTEGER NOT NULL DEFAULT 0,
            valid_until TEXT,
            invalidation_reason TEXT,
            expires_at TEXT,
            entered_by TEXT,
            project TEXT,
            session_id TEXT,
            source_message_ids TEXT NOT NULL DEFAULT '[]',
            content_hash TEXT NOT NULL,
            tag_text TEXT NOT NULL DEFAULT '',
            embedding BLOB
        );
        CREATE INDEX idx_memories_type ON memories(type);
        CREATE INDEX idx_memories_created ON memories(created_at);
        CREATE INDEX idx_memories_project ON memories(project);
        CREATE INDEX idx_memories_entered_by ON memories(entered_by);
        CREATE INDEX idx_memories_session ON memories(session_id);
        CREATE INDEX idx_memories_expires ON memories(expires_at) WHERE expires_at IS NOT NULL;
        CREATE INDEX idx_memories_hash ON memories(content_hash);

        CREATE TABLE tags (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE COLLATE NOCASE
        );
        CREATE TABLE memory_tags (
            memory_seq INTEGER NOT NULL REFERENCES memories(seq) ON DELETE CASCADE,
            tag_id INTEGER NOT NULL REFERENCES tags(id) ON DELETE CASCADE,
            PRIMARY KEY (memory_seq, tag_id)
        ) WITHOUT ROWID;
        CREATE INDEX idx_memory_tags_tag ON memory_tags(tag_id, memory_seq);

        CREATE TABLE relations (
            id INTEGER PRIMARY KEY,
            source_id TEXT NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
            target_id TEXT NOT NULL,
            target_type TEXT NOT NULL DEFAULT 'memory' CHECK (target_type IN ('memory', 'code')),
            relation_type TEXT NOT NULL
                CHECK (relation_type IN ('supersedes', 'related_to', 'derived_from', 'references')),
            created_at TEXT NOT NULL,
            UNIQUE (source_id, target_id, relation_type)
        );
        CREATE INDEX idx_relations_target ON relations(target_id);
        -- A deleted memory takes the edges pointing at it with it.
        CREATE TRIGGER relations_target_gone AFTER DELETE ON memories BEGIN
            DELETE FROM relations WHERE target_type = 'memory' AND target_id = old.id;
        END;

        CREATE TABLE extraction_log (
            source_type TEXT NOT NULL,
            source_id TEXT NOT NULL,
            cursor TEXT,
            memory_count INTEGER NOT NULL DEFAULT 0,
            message_count INTEGER NOT NULL DEFAULT 0,
            runs INTEGER NOT NULL DEFAULT 0,
            extracted_at TEXT NOT NULL,
            PRIMARY KEY (source_type, source_id)
        );
        """,
    )


def m002_fts(conn: Any) -> None:
    """FTS5 index over content, summary and tags, kept in sync by triggers."""
    run_script(
        conn,
        """
        CREATE VIRTUAL TABLE memories_fts USING fts5(
            content, summary, tag_text,
            content='memories', content_rowid='seq',
            tokenize='porter unicode61 remove_diacritics 2'
        );
        CREATE TRIGGER memories_fts_ai AFTER INSERT ON memories BEGIN
            INSERT INTO memories_fts(rowid, content, summary, tag_text)
            VALUES (new.seq, new.content, coalesce(new.summary, ''), new.tag_text);
        END;
        CREATE TRIGGER memories_fts_ad AFTER DELETE ON memories BEGIN
            INSERT INTO memories_fts(memories_fts, rowid, content, summary, tag_text)
            VALUES ('delete', old.seq, old.content, coalesce(old.summary, ''), old.tag_text);
        END;
        CREATE TRIGGER memories_fts_au AFTER UPDATE OF content, summary, tag_text ON memories BEGIN
            INSERT INTO memories_fts(memories_fts, rowid, content, summary, tag_text)
            VALUES ('delete', old.seq, old.content, coalesce(old.summary, ''), old.tag_text);
            INSERT INTO memories_fts(rowid, content, summary, tag_text)
            VALUES (new.seq, new.content, coalesce(new.summary, ''), new.tag_text);
        END;
        INSERT INTO memories_fts(memories_fts, rank) VALUES ('rank', 'bm25(1.0, 0.5, 0.75)');
        INSERT INTO memories_fts(rowid, content, summary, tag_text)
            SELECT seq, content, coalesce(summary, ''), tag_text FROM memories;
        """,
    )


def m003_fuzzy(conn: Any) -> None:
    """Vocabulary and its trigram index for typo-tolerant search."""
    run_script(
        conn,
        """
        CREATE TABLE fuzzy_terms (term TEXT PRIMARY KEY) WITHOUT ROWID;
        CREATE TABLE fuzzy_trigrams (
            trigram TEXT NOT NULL,
            term TEXT NOT NULL,
            PRIMARY KEY (trigram, term)
        ) WITHOUT ROWID;
        """,
    )
    terms: set[str] = set()
    for content, summary, tag_text in conn.execute(
        "SELECT content, coalesce(summary, ''), tag_text FROM memories"
    ):
        terms |= fuzzy.extract_terms(f"{content} {summary} {tag_text}")
    vocabulary.index_terms(conn, terms)


def m004_inbox(conn: Any) -> None:
    """Working-memory inbox, promoted to long-term memory by consolidate()."""
    run_script(
        conn,
        """
        CREATE TABLE inbox (
            id TEXT PRIMARY KEY,
            content TEXT NOT NULL CHECK (length(content) BETWEEN 1 AND 10000),
            source TEXT NOT NULL DEFAULT 'note'
                CHECK (source IN ('note', 'learn', 'extract', 'consolidation')),
            attention_score REAL NOT NULL DEFAULT 0.5
                CHECK (attention_score BETWEEN 0.0 AND 1.0),
            metadata TEXT NOT NULL DEFAULT '{}',
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        );
        CREATE INDEX idx_inbox_attention ON inbox(attention_score DESC, created_at ASC);
        """,
    )


def m005_fts_scope(conn: Any) -> None:
    """Index each memory's scope (its project, or 'global') in FTS5 so a project-filtered
    search narrows the match before BM25 ranks it, instead of ranking every project's rows
    and filtering afterwards. The scope token is 'p' + hex(project): one opaque token, so
    'acme/api' never matches 'acme/api-v2'. Its BM25 weight is 0: it filters, never ranks."""
    run_script(
        conn,
        """
        DROP TRIGGER memories_fts_ai;
        DROP TRIGGER memories_fts_ad;
        DROP TRIGGER memories_fts_au;
        DROP TABLE memories_fts;
        ALTER TABLE memories ADD COLUMN fts_scope TEXT GENERATED ALWAYS AS (
            CASE WHEN project IS NULL THEN 'global' ELSE 'p' || hex(project) END
        ) VIRTUAL;
        CREATE VIRTUAL TABLE memories_fts USING fts5(
            content, summary, tag_text, fts_scope,
            content='memories', content_rowid='seq',
            tokenize='porter unicode61 remove_diacritics 2'
        );
        CREATE TRIGGER memories_fts_ai AFTER INSERT ON memories BEGIN
            INSERT INTO memories_fts(rowid, content, summary, tag_text, fts_scope)
            VALUES (new.seq, new.content, coalesce(new.summary, ''), new.tag_text, new.fts_scope);
        END;
        CREATE TRIGGER memories_fts_ad AFTER DELETE ON memories BEGIN
            INSERT INTO memories_fts(memories_fts, rowid, content, summary, tag_text, fts_scope)
            VALUES ('delete', old.seq, old.content, coalesce(old.summary, ''), old.tag_text,
                    old.fts_scope);
        END;
        CREATE TRIGGER memories_fts_au AFTER UPDATE OF content, summary, tag_text, project
        ON memories BEGIN
            INSERT INTO memories_fts(memories_fts, rowid, content, summary, tag_text, fts_scope)
            VALUES ('delete', old.seq, old.content, coalesce(old.summary, ''), old.tag_text,
                    old.fts_scope);
            INSERT INTO memories_fts(rowid, content, summary, tag_text, fts_scope)
            VALUES (new.seq, new.content, coalesce(new.summary, ''), new.tag_text, new.fts_scope);
        END;
        INSERT INTO memories_fts(memories_fts, rank) VALUES ('rank', 'bm25(1.0, 0.5, 0.75, 0.0)');
        INSERT INTO memories_fts(rowid, content, summary, tag_text, fts_scope)
            SELECT seq, content, coalesce(summary, ''), tag_text, fts_scope FROM memories;
        """,
    )


def m006_sessions(conn: Any) -> None:
    """Sessions the sidecar has seen: their project and lifecycle clocks, so a restart
    resumes (idle and ending deadlines, deletions noticed while it was down)."""
    run_script(
        conn,
        """
        CREATE TABLE sessions (
            agent TEXT NOT NULL,
            session_id TEXT NOT NULL,
            project TEXT,
            directory TEXT,
            title TEXT,
            state TEXT NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'ended')),
            created_ms INTEGER NOT NULL DEFAULT 0,
            last_activity_ms INTEGER NOT NULL DEFAULT 0,
            turn_done_ms INTEGER NOT NULL DEFAULT 0,
            idle_done_ms INTEGER NOT NULL DEFAULT 0,
            compacted_ms INTEGER NOT NULL DEFAULT 0,
            ended_ms INTEGER,
            end_reason TEXT,
            PRIMARY KEY (agent, session_id)
        ) WITHOUT ROWID;
        CREATE INDEX idx_sessions_state ON sessions(state, last_activity_ms);
        """,
    )


def m007_model_usage(conn: Any) -> None:
    """What the local model cost, per UTC day and per session (``<agent>:<session id>``),
    so the budget caps hold across hook calls and sidecar restarts (see `model/budget.py`)."""
    run_script(
        conn,
        """
        CREATE TABLE model_usage (
            day TEXT NOT NULL,
            session_key TEXT NOT NULL,
            calls INTEGER NOT NULL DEFAULT 0,
            prompt_tokens INTEGER NOT NULL DEFAULT 0,
            output_tokens INTEGER NOT NULL DEFAULT 0,
            seconds REAL NOT NULL DEFAULT 0.0,
            updated_at TEXT NOT NULL,
            PRIMARY KEY (day, session_key)
        ) WITHOUT ROWID;
        CREATE INDEX idx_model_usage_session ON model_usage(session_key);
        """,
    )


def m008_pending_hooks(conn: Any) -> None:
    """Hooks the sidecar owes: written in the same transaction as the adapter cursor that
    moved past their events, deleted only once the hook has run, replayed at start. So a
    consumed event is never lost to a crash or a stop (see docs/sidecar.md)."""
    run_script(
        conn,
        """
        CREATE TABLE pending_hooks (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id TEXT NOT NULL,
            event TEXT NOT NULL CHECK (event IN ('created', 'compacting', 'ending')),
            arg TEXT NOT NULL DEFAULT '',
            attempts INTEGER NOT NULL DEFAULT 0,
            created_ms INTEGER NOT NULL DEFAULT 0,
            UNIQUE (session_id, event)
        );
        """,
    )


def m009_timestamps(conn: Any) -> None:
    """``extraction_log.extracted_at`` in the one canonical form (`timestamps.to_iso`):
    adapter cursors were stamped by SQLite's ``datetime('now')`` (``2026-11-22 13:15:00``,
    UTC without an offset), so comparing them as text against the rest was wrong."""
    rows = conn.execute(
        "SELECT source_type, source_id, extracted_at FROM extraction_log"
        " WHERE extracted_at NOT LIKE '%+00:00'"
    ).fetchall()
    fixed = []
    for source_type, source_id, stamp in rows:
        try:
            fixed.append((parse_iso(stamp, field="extracted_at"), source_type, source_id))
        except ValidationError:
            continue  # not a date at all: leave it for a person to see
    conn.executemany(
        "UPDATE extraction_log SET extracted_at = ? WHERE source_type = ? AND source_id = ?",
        fixed,
    )


def m010_fts_context(conn: Any) -> None:
    """A fifth, low-weight FTS5 column: the words around a memory that are not its own.

    An episode (a ``conversation`` memory, one exchange of a session) is also found by the
    words of the exchange before it and by its time as words (``metadata.fts_context``,
    written by `llmem_hooks.session.episodes`), while the hit is the episode itself. The column is
    a generated one over the metadata (nothing is stored twice) and ranks at 0.3 of the
    content's weight, so an episode whose own text matches still wins (docs/episodes.md)."""
    run_script(
        conn,
        """
        DROP TRIGGER memories_fts_ai;
        DROP TRIGGER memories_fts_ad;
        DROP TRIGGER memories_fts_au;
        DROP TABLE memories_fts;
        ALTER TABLE memories ADD COLUMN fts_context TEXT GENERATED ALWAYS AS (
            coalesce(json_extract(metadata, '$.fts_context'), '')
        ) VIRTUAL;
        CREATE VIRTUAL TABLE memories_fts USING fts5(
            content, summary, tag_text, fts_scope, fts_context,
            content='memories', content_rowid='seq',
            tokenize='porter unicode61 remove_diacritics 2'
        );
        CREATE TRIGGER memories_fts_ai AFTER INSERT ON memories BEGIN
            INSERT INTO memories_fts(rowid, content, summary, tag_text, fts_scope, fts_context)
            VALUES (new.seq, new.content, coalesce(new.summary, ''), new.tag_text, new.fts_scope,
                    new.fts_context);
        END;
        CREATE TRIGGER memories_fts_ad AFTER DELETE ON memories BEGIN
            INSERT INTO memories_fts(memories_fts, rowid, content, summary, tag_text, fts_scope,
                                     fts_context)
            VALUES ('delete', old.seq, old.content, coalesce(old.summary, ''), old.tag_text,
                    old.fts_scope, old.fts_context);
        END;
        CREATE TRIGGER memories_fts_au AFTER UPDATE OF content, summary, tag_text, project,
            metadata ON memories BEGIN
            INSERT INTO memories_fts(memories_fts, rowid, content, summary, tag_text, fts_scope,
                                     fts_context)
            VALUES ('delete', old.seq, old.content, coalesce(old.summary, ''), old.tag_text,
                    old.fts_scope, old.fts_context);
            INSERT INTO memories_fts(rowid, content, summary, tag_text, fts_scope, fts_context)
            VALUES (new.seq, new.content, coalesce(new.summary, ''), new.tag_text, new.fts_scope,
                    new.fts_context);
        END;
        INSERT INTO memories_fts(memories_fts, rank)
            VALUES ('rank', 'bm25(1.0, 0.5, 0.75, 0.0, 0.3)');
        INSERT INTO memories_fts(rowid, content, summary, tag_text, fts_scope, fts_context)
            SELECT seq, content, coalesce(summary, ''), tag_text, fts_scope, fts_context
            FROM memories;
        """,
    )


def m011_recall_given(conn: Any) -> None:
    """Which memories each session was already given by per-prompt recall (the query
    service, docs/query-service.md): kept in the store so the sidecar and the in-process
    fallback (a new process per prompt) never give a session the same memory twice."""
    run_script(
        conn,
        """
        CREATE TABLE recall_given (
            session_id TEXT NOT NULL,
            memory_id TEXT NOT NULL,
            given_at TEXT NOT NULL,
            PRIMARY KEY (session_id, memory_id)
        ) WITHOUT ROWID;
        CREATE INDEX idx_recall_given_at ON recall_given(given_at);
        """,
    )


AFTER_WEIGHT = 0.1  # the exchange after an episode: a tenth of its own text's weight
# The exchange before an episode (and its time words): 0.3 in migrations 10 and 12, 0.45
# since 2026-11-27 (issue 23, docs/episodes.md): recall@10 on the technical conversations
# 0.847 -> 0.867, on the long conversational set 0.832 -> 0.844 (dev halves).
CONTEXT_WEIGHT = 0.45
# The weights of `memories_fts`'s columns (content, summary, tag_text, fts_scope,
# fts_context, fts_after) that search ranks by: every ranked query names them
# (`BM25_RANK`), so a store keeps the ``rank`` its last FTS migration configured (an
# unused default) and needs no rebuild when they change.
RANK_WEIGHTS = (1.0, 0.5, 0.75, 0.0, CONTEXT_WEIGHT, AFTER_WEIGHT)
# The same ranking as a function call: selecting ``rank`` next to ``ORDER BY rank`` makes
# FTS5 score every match twice (the BM25 of a common phrase reads its whole row list),
# and ordering by the selected value scores it once: half the time of a ranked stage.
BM25_RANK = f"bm25(memories_fts, {', '.join(map(str, RANK_WEIGHTS))})"


def m012_fts_after(conn: Any) -> None:
    """A sixth FTS5 column at a tenth of the content's weight: the opening of the exchange
    *after* an episode (``metadata.fts_after``). A follow-up ("that fixed it", "and the
    staging one?") names what an answer did; but the next exchange often starts new work,
    and at the context column's weight (0.3) its words made the episode a near miss for
    questions about that work (docs/episodes.md has the measurements)."""
    run_script(
        conn,
        f"""
        DROP TRIGGER memories_fts_ai;
        DROP TRIGGER memories_fts_ad;
        DROP TRIGGER memories_fts_au;
        DROP TABLE memories_fts;
        ALTER TABLE memories ADD COLUMN fts_after TEXT GENERATED ALWAYS AS (
            coalesce(json_extract(metadata, '$.fts_after'), '')
        ) VIRTUAL;
        CREATE VIRTUAL TABLE memories_fts USING fts5(
            content, summary, tag_text, fts_scope, fts_context, fts_after,
            content='memories', content_rowid='seq',
            tokenize='porter unicode61 remove_diacritics 2'
        );
        CREATE TRIGGER memories_fts_ai AFTER INSERT ON memories BEGIN
            INSERT INTO memories_fts(rowid, content, summary, tag_text, fts_scope, fts_context,
                                     fts_after)
            VALUES (new.seq, new.content, coalesce(new.summary, ''), new.tag_text, new.fts_scope,
                    new.fts_context, new.fts_after);
        END;
        CREATE TRIGGER memories_fts_ad AFTER DELETE ON memories BEGIN
            INSERT INTO memories_fts(memories_fts, rowid, content, summary, tag_text, fts_scope,
                                     fts_context, fts_after)
            VALUES ('delete', old.seq, old.content, coalesce(old.summary, ''), old.tag_text,
                    old.fts_scope, old.fts_context, old.fts_after);
        END;
        CREATE TRIGGER memories_fts_au AFTER UPDATE OF content, summary, tag_text, project,
            metadata ON memories BEGIN
            INSERT INTO memories_fts(memories_fts, rowid, content, summary, tag_text, fts_scope,
                                     fts_context, fts_after)
            VALUES ('delete', old.seq, old.content, coalesce(old.summary, ''), old.tag_text,
                    old.fts_scope, old.fts_context, old.fts_after);
            INSERT INTO memories_fts(rowid, content, summary, tag_text, fts_scope, fts_context,
                                     fts_after)
            VALUES (new.seq, new.content, coalesce(new.summary, ''), new.tag_text, new.fts_scope,
                    new.fts_context, new.fts_after);
        END;
        INSERT INTO memories_fts(memories_fts, rank)
            VALUES ('rank', 'bm25(1.0, 0.5, 0.75, 0.0, 0.3, {AFTER_WEIGHT})');
        INSERT INTO memories_fts(rowid, content, summary, tag_text, fts_scope, fts_context,
                                 fts_after)
            SELECT seq, content, coalesce(summary, ''), tag_text, fts_scope, fts_context,
                   fts_after
            FROM memories;
        """,
    )


def m013_dream(conn: Any) -> None:
    """The dream cycle's book (docs/dream.md): one row per run, one per change it made
    with the old values (``--undo RUN`` restores them), and its clocks (last run, last
    decay, last boost) so a restart keeps "at most once per interval"."""
    run_script(
        conn,
        """
        CREATE TABLE dream_runs (
            run_id TEXT PRIMARY KEY,
            started_at TEXT NOT NULL,
            finished_at TEXT,
            trigger TEXT NOT NULL DEFAULT 'cli',
            phases TEXT NOT NULL,
            summary TEXT NOT NULL DEFAULT '{}',
            undone_at TEXT
        );
        CREATE TABLE dream_changes (
            id INTEGER PRIMARY KEY,
            run_id TEXT NOT NULL REFERENCES dream_runs(run_id) ON DELETE CASCADE,
            phase TEXT NOT NULL,
            action TEXT NOT NULL,
            memory_id TEXT,
            target TEXT,
            old TEXT,
            new TEXT
        );
        CREATE INDEX idx_dream_changes_run ON dream_changes(run_id, id);
        CREATE TABLE dream_state (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
        """,
    )


def m014_project_names(conn: Any) -> None:
    """A name people know for each project key (``owner/repo`` or a folder's name),
    written when a project's directory is seen (`store.projects`): displays show it and
    ``--project`` accepts it; the key stays the identity."""
    run_script(
        conn,
        """
        CREATE TABLE project_names (
            project TEXT PRIMARY KEY,
            name TEXT NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
            updated_at TEXT NOT NULL
        ) WITHOUT ROWID;
        CREATE INDEX idx_project_names_name ON project_names(name);
        """,
    )


def m015_type_created(conn: Any) -> None:
    """Lists of one type, newest first (the viewer's conversations, ``list --type``): a
    type's rows in date order, instead of all of them sorted (~470 ms over 100k episodes,
    ~2 ms with it)."""
    run_script(
        conn,
        "CREATE INDEX idx_memories_type_created ON memories(type, created_at, seq);",
    )


# SQL for "now" in the canonical text form of `timestamps.to_iso` (milliseconds from
# SQLite, padded to microseconds), for the team triggers below.
SQL_NOW = "strftime('%Y-%m-%dT%H:%M:%f000+00:00', 'now')"
# The same millisecond's last microsecond: a ``valid_until`` Python stamped a moment ago
# (`now_iso`, microseconds) is never read as still in the future.
SQL_NOW_CEIL = "strftime('%Y-%m-%dT%H:%M:%f999+00:00', 'now')"
# A change queued by the team triggers reads this; `store.team.apply_remote` sets it
# inside its own transaction, so what is pulled from the hub is never queued back (no echo).
TEAM_APPLYING = "applying"


def m016_team(conn: Any) -> None:
    """Team memory, the local side (docs/team.md, `store.team`): enrolled projects and
    their pull cursors, the types a project shares, the link of each shared memory to
    its hub identity, the outbox of changes to push, and this database's device id.

    Triggers queue every change of a shared memory in the same transaction as the change,
    so every write path (add, update, invalidate, delete, dream, import) is covered and a
    crash leaves the change and its outbox row both or neither. Their WHEN clauses look
    at an empty or small table only, so a store that shares nothing pays one index probe."""
    now = SQL_NOW
    device = "coalesce((SELECT value FROM team_state WHERE key = 'device'), '')"
    not_applying = f"NOT EXISTS (SELECT 1 FROM team_state WHERE key = '{TEAM_APPLYING}')"
    invalid = f"(new.valid_until IS NOT NULL AND new.valid_until <= {SQL_NOW_CEIL})"
    run_script(
        conn,
        f"""
        CREATE TABLE team_projects (
            project TEXT PRIMARY KEY,
            cursor INTEGER NOT NULL DEFAULT 0,
            enrolled_at TEXT NOT NULL,
            last_push TEXT,
            last_pull TEXT,
            last_error TEXT,
            conflicts INTEGER NOT NULL DEFAULT 0
        ) WITHOUT ROWID;
        CREATE TABLE team_policy (
            project TEXT NOT NULL REFERENCES team_projects(project) ON DELETE CASCADE,
            type TEXT NOT NULL CHECK (type <> 'conversation'),
            PRIMARY KEY (project, type)
        ) WITHOUT ROWID;
        CREATE TABLE team_links (
            memory_id TEXT PRIMARY KEY,
            project TEXT NOT NULL,
            hub_id TEXT NOT NULL UNIQUE,
            author TEXT,
            revision INTEGER NOT NULL DEFAULT 1,
            pushed_revision INTEGER NOT NULL DEFAULT 0,
            updated_at TEXT NOT NULL,
            device TEXT NOT NULL DEFAULT '',
            supersedes TEXT,
            unshared_at TEXT
        ) WITHOUT ROWID;
        CREATE INDEX idx_team_links_project ON team_links(project);
        CREATE INDEX idx_team_links_supersedes ON team_links(supersedes)
            WHERE supersedes IS NOT NULL;
        CREATE TABLE team_outbox (
            memory_id TEXT PRIMARY KEY,
            project TEXT NOT NULL,
            op TEXT NOT NULL CHECK (op IN ('upsert', 'delete')),
            queued_at TEXT NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0
        ) WITHOUT ROWID;
        CREATE INDEX idx_team_outbox_queued ON team_outbox(queued_at, memory_id);
        CREATE TABLE team_state (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;

        -- A new memory of a shared type in an enrolled project is shared from its insert
        -- on. Global memories and episodes never are.
        CREATE TRIGGER team_memory_inserted AFTER INSERT ON memories
        WHEN new.project IS NOT NULL AND new.type <> 'conversation'
            AND EXISTS (SELECT 1 FROM team_policy
                        WHERE project = new.project AND type = new.type)
            AND {not_applying}
            AND NOT {invalid}
        BEGIN
            INSERT OR IGNORE INTO team_links(memory_id, project, hub_id, author, revision,
                                             pushed_revision, updated_at, device)
            VALUES (new.id, new.project, lower(hex(randomblob(16))), NULL, 1, 0, {now},
                    {device});
            INSERT INTO team_outbox(memory_id, project, op, queued_at)
            SELECT new.id, new.project, 'upsert', {now} WHERE true
            ON CONFLICT(memory_id) DO UPDATE SET op = 'upsert', queued_at = excluded.queued_at;
        END;

        -- A change people see (text, type, tags, validity) of a shared memory: its revision
        -- goes up and it is queued; invalidated, it is queued as a tombstone. Someone
        -- else's memory invalidated here stays local (the hub would refuse the tombstone):
        -- its pending edit, if any, is dropped.
        CREATE TRIGGER team_memory_updated
        AFTER UPDATE OF content, summary, type, tag_text, valid_until, expires_at ON memories
        WHEN (new.content IS NOT old.content OR new.summary IS NOT old.summary
              OR new.type IS NOT old.type OR new.tag_text IS NOT old.tag_text
              OR new.valid_until IS NOT old.valid_until OR new.expires_at IS NOT old.expires_at)
            AND EXISTS (SELECT 1 FROM team_links
                        WHERE memory_id = new.id AND unshared_at IS NULL)
            AND {not_applying}
        BEGIN
            -- a memory of mine brought back (a forget undone) after its tombstone reached
            -- the hub: the tombstone wins there for good, so it comes back under a new id
            UPDATE team_links SET hub_id = lower(hex(randomblob(16))), supersedes = hub_id,
                pushed_revision = 0
            WHERE memory_id = new.id AND author IS NULL AND pushed_revision > 0
                AND old.valid_until IS NOT NULL AND old.valid_until <= {SQL_NOW_CEIL}
                AND NOT {invalid}
                AND NOT EXISTS (SELECT 1 FROM team_outbox WHERE memory_id = new.id);
            UPDATE team_links SET revision = revision + 1, updated_at = {now}, device = {device}
            WHERE memory_id = new.id;
            INSERT INTO team_outbox(memory_id, project, op, queued_at)
            SELECT l.memory_id, l.project, CASE WHEN {invalid} THEN 'delete' ELSE 'upsert' END,
                   {now}
            FROM team_links l WHERE l.memory_id = new.id AND (l.author IS NULL OR NOT {invalid})
            ON CONFLICT(memory_id) DO UPDATE SET op = excluded.op, queued_at = excluded.queued_at;
            DELETE FROM team_outbox WHERE memory_id = new.id AND {invalid}
                AND EXISTS (SELECT 1 FROM team_links
                            WHERE memory_id = new.id AND author IS NOT NULL);
        END;

        -- A shared memory deleted for good: mine and on the hub -> a tombstone (the link
        -- stays until it is pushed); mine and never pushed -> forgotten; someone else's ->
        -- nothing to push, the link stays as a marker so a pull does not bring it back.
        CREATE TRIGGER team_memory_deleted AFTER DELETE ON memories
        WHEN EXISTS (SELECT 1 FROM team_links WHERE memory_id = old.id AND unshared_at IS NULL)
            AND {not_applying}
        BEGIN
            UPDATE team_links SET revision = revision + 1, updated_at = {now}, device = {device}
            WHERE memory_id = old.id AND author IS NULL AND pushed_revision > 0;
            INSERT INTO team_outbox(memory_id, project, op, queued_at)
            SELECT l.memory_id, l.project, 'delete', {now} FROM team_links l
            WHERE l.memory_id = old.id AND l.author IS NULL AND l.pushed_revision > 0
            ON CONFLICT(memory_id) DO UPDATE SET op = 'delete', queued_at = excluded.queued_at;
            DELETE FROM team_outbox WHERE memory_id = old.id
                AND NOT EXISTS (SELECT 1 FROM team_links WHERE memory_id = old.id
                                AND author IS NULL AND pushed_revision > 0);
            UPDATE team_links SET unshared_at = {now}
            WHERE memory_id = old.id AND author IS NOT NULL;
            DELETE FROM team_links
            WHERE memory_id = old.id AND author IS NULL AND pushed_revision = 0;
        END;
        """,
    )


def m017_citations(conn: Any) -> None:
    """Code citations of memories (docs/citations.md): which lines of which
    repository-relative file a memory is about, the hash of those lines when cited, and
    what the last check found. Deleted with their memory (the cascade goes through
    ``memories.id``, which is UNIQUE)."""
    run_script(
        conn,
        """
        CREATE TABLE citations (
            id INTEGER PRIMARY KEY,
            memory_id TEXT NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
            path TEXT NOT NULL CHECK (length(path) BETWEEN 1 AND 1000),
            line_start INTEGER NOT NULL CHECK (line_start >= 1),
            line_end INTEGER NOT NULL CHECK (line_end >= line_start),
            text_hash TEXT,
            "commit" TEXT,
            status TEXT NOT NULL DEFAULT 'unchecked'
                CHECK (status IN ('unchecked', 'valid', 'stale')),
            reason TEXT,
            checked_at TEXT,
            changed_by TEXT,
            check_ms REAL,
            created_at TEXT NOT NULL
        );
        CREATE INDEX idx_citations_memory ON citations(memory_id);
        CREATE INDEX idx_citations_path ON citations(path);
        """,
    )


def m018_citation_checks(conn: Any) -> None:
    """What checking citations needs (docs/citations.md, "When checks run"): since when a
    citation has been stale (the dream cycle retires memories stale too long), and the last
    attempt that could not decide (an 'unknown' keeps the verdict before it)."""
    run_script(
        conn,
        """
        ALTER TABLE citations ADD COLUMN stale_since TEXT;
        ALTER TABLE citations ADD COLUMN tried_at TEXT;
        ALTER TABLE citations ADD COLUMN tried_note TEXT;
        """,
    )


def m019_file_touches(conn: Any) -> None:
    """Which files each episode touched (repository-relative; deleted with the episode)
    and which files a session was already told about: recall for the file in hand
    (docs/citations.md)."""
    run_script(
        conn,
        """
        CREATE TABLE file_touches (
            memory_id TEXT NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
            path TEXT NOT NULL CHECK (length(path) BETWEEN 1 AND 1000),
            touched_at TEXT NOT NULL,
            PRIMARY KEY (memory_id, path)
        );
        CREATE INDEX idx_file_touches_path ON file_touches(path, touched_at);
        CREATE TABLE file_recall_given (
            session_id TEXT NOT NULL,
            path TEXT NOT NULL,
            given_at TEXT NOT NULL,
            PRIMARY KEY (session_id, path)
        );
        CREATE INDEX idx_file_recall_given_at ON file_recall_given(given_at);
        """,
    )


def m020_context_weight(conn: Any) -> None:
    """The context column (the exchange before an episode) at 0.45 of the content's weight,
    was 0.3 (`CONTEXT_WEIGHT`). Search names the weights in every query (`BM25_RANK`); this
    keeps the index's own ``rank`` the same, for whatever orders by it. No rebuild."""
    weights = ", ".join(map(str, RANK_WEIGHTS))
    conn.execute(
        "INSERT INTO memories_fts(memories_fts, rank) VALUES ('rank', ?)", (f"bm25({weights})",)
    )


def m021_floor_rows(conn: Any) -> None:
    """BM25 as if the store held `floor_rows.FLOOR_ROWS` more rows that say nothing a
    question asks (`llmem_hooks.store.floor_rows`): the table recording when they were
    last written, and the rows themselves for a store that has memories already."""
    conn.execute("CREATE TABLE fts_floor (at_seq INTEGER NOT NULL)")
    last = conn.execute("SELECT coalesce(max(seq), 0) FROM memories").fetchone()[0]
    if last:
        floor_rows.keep(conn, last)


MIGRATIONS: list[tuple[int, str, Migration]] = [
    (1, "core", m001_core),
    (2, "fts", m002_fts),
    (3, "fuzzy", m003_fuzzy),
    (4, "inbox", m004_inbox),
    (5, "fts_scope", m005_fts_scope),
    (6, "sessions", m006_sessions),
    (7, "model_usage", m007_model_usage),
    (8, "pending_hooks", m008_pending_hooks),
    (9, "timestamps", m009_timestamps),
    (10, "fts_context", m010_fts_context),
    (11, "recall_given", m011_recall_given),
    (12, "fts_after", m012_fts_after),
    (13, "dream", m013_dream),
    (14, "project_names", m014_project_names),
    (15, "type_created", m015_type_created),
    (16, "team", m016_team),
    (17, "citations", m017_citations),
    (18, "citation_checks", m018_citation_checks),
    (19, "file_touches", m019_file_touches),
    (20, "context_weight", m020_context_weight),
    (21, "floor_rows", m021_floor_rows),
]


def applied_versions(conn: Any) -> set[int]:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS _schema_migrations ("
        "version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
    )
    return {row[0] for row in conn.execute("SELECT version FROM _schema_migrations")}


def schema_lag(conn: Any) -> int:
    """How many migrations ``conn``'s database lacks, read without writing anything (for
    a read-only open, which must not create the bookkeeping table)."""
    try:
        done = {row[0] for row in conn.execute("SELECT version FROM _schema_migrations")}
    except Exception:  # no table at all: an empty or foreign database
        done = set()
    return sum(1 for version, _, _ in MIGRATIONS if version not in done)


def migrate(conn: Any, upto: int | None = None) -> list[int]:
    """Apply pending migrations in order (each in its own transaction); returns those applied."""
    done = applied_versions(conn)
    applied = []
    for version, name, fn in MIGRATIONS:
        if version in done or (upto is not None and version > upto):
            continue
        with transaction(conn):
            # Re-check under the write lock: another process may have migrated meanwhile.
            if conn.execute(
                "SELECT 1 FROM _schema_migrations WHERE version = ?", (version,)
            ).fetchone():
                continue
            fn(conn)
            conn.execute(
                "INSERT INTO _schema_migrations(version, name, applied_at) VALUES (?, ?, ?)",
                (version, name, now_iso()),
            )
        applied.append(version)
    return applied
