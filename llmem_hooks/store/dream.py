"""The dream cycle's SQL (docs/dream.md): what it reads, the changes it makes, its book.

Every change the cycle applies goes through this module in the caller's transaction and
leaves one ``dream_changes`` row naming the memory and its old values, so `undo_run`
can put them back. ``dream_runs`` lists the runs, ``dream_state`` holds the clocks (last
run, last decay, last boost). The sizes (`db_usage`, `table_sizes`, `project_sizes`)
and the size cap's page work (`incremental_vacuum`, `enable_incremental_vacuum`) live
here too, since they are SQL.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import NotFoundError, ValidationError
from ..text import fuzzy
from ..timestamps import now_iso
from . import vocabulary
from .episodes import EPISODE_WHERE
from .records import check_content, content_hash, normalize_tags
from .relations import relation_room
from .tags import set_tags

if TYPE_CHECKING:
    from .memories import MemoryStore

LIVE = "valid_until IS NULL AND (expires_at IS NULL OR expires_at > ?)"
NOT_EPISODE = f"NOT ({EPISODE_WHERE})"
# The columns a dream change may set, and how their old values are kept.
PLAIN_COLUMNS = (
    "confidence",
    "valid_until",
    "invalidation_reason",
    "metadata",
    "access_count",
    "accessed_at",
    "source_message_ids",
)
# A merge's model rewrite also sets the text (``content``, with its hash); the old text
# and vector are logged, and undo restores them.
RESTORED_COLUMNS = (*PLAIN_COLUMNS, "content", "content_hash")


# -- reading ----------------------------------------------------------------------------------
def live_memories(store: MemoryStore, now: str) -> list[dict[str, Any]]:
    """Every valid, unexpired memory that is not an episode: what merging, linking,
    decay and boosting look at (episodes only age out, see `episodes_to_prune`)."""
    rows = store.db.fetchall(
        "SELECT seq, id, type, content, project, confidence, access_count, accessed_at,"
        " created_at, updated_at, tag_text, embedding IS NOT NULL AS has_vec"
        f" FROM memories WHERE {LIVE} AND {NOT_EPISODE} ORDER BY seq",
        (now,),
    )
    return [dict(r) for r in rows]


def expired_unretired(store: MemoryStore, now: str) -> list[dict[str, Any]]:
    """Memories past ``expires_at`` that are not marked invalid yet."""
    rows = store.db.fetchall(
        "SELECT id, content, project, expires_at FROM memories WHERE valid_until IS NULL"
        " AND expires_at IS NOT NULL AND expires_at <= ? ORDER BY seq",
        (now,),
    )
    return [dict(r) for r in rows]


def memory_rows(store: MemoryStore, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The dream-relevant columns of these memories, by id."""
    out: dict[str, dict[str, Any]] = {}
    for i in range(0, len(ids), 500):
        chunk = list(ids[i : i + 500])
        for r in store.db.fetchall(
            f"SELECT seq, id, content, type, project, tag_text, {', '.join(PLAIN_COLUMNS)},"
            " embedding IS NOT NULL AS has_vec FROM memories"
            f" WHERE id IN ({','.join('?' * len(chunk))})",
            chunk,
        ):
            out[r["id"]] = dict(r)
    return out


def unused_since(
    store: MemoryStore, before: str, now: str, floor: float
) -> list[tuple[str, float]]:
    """(id, confidence) of live non-episode memories last used (recalled, stored or
    reinforced: ``updated_at``) before ``before`` whose confidence is above ``floor``."""
    return [
        (r[0], r[1])
        for r in store.db.fetchall(
            f"SELECT id, confidence FROM memories WHERE {LIVE} AND {NOT_EPISODE}"
            " AND max(updated_at, coalesce(accessed_at, '')) < ? AND confidence > ?",
            (now, before, floor),
        )
    ]


def recalled_since(
    store: MemoryStore, since: str, now: str, min_count: int
) -> list[tuple[str, float, int]]:
    """(id, confidence, access_count) of live non-episode memories recalled after
    ``since`` and at least ``min_count`` times in all, below full confidence."""
    return [
        (r[0], r[1], r[2])
        for r in store.db.fetchall(
            f"SELECT id, confidence, access_count FROM memories WHERE {LIVE} AND {NOT_EPISODE}"
            " AND accessed_at > ? AND access_count >= ? AND confidence < 1.0",
            (now, since, min_count),
        )
    ]


def unconfirmed_procedures(store: MemoryStore, before: str, now: str) -> list[dict[str, Any]]:
    """Live procedures neither updated nor recalled since ``before`` and not flagged yet."""
    rows = store.db.fetchall(
        "SELECT id, content, project, max(updated_at, coalesce(accessed_at, '')) AS confirmed"
        f" FROM memories WHERE {LIVE} AND type = 'procedure'"
        " AND max(updated_at, coalesce(accessed_at, '')) < ?"
        " AND json_extract(metadata, '$.possibly_stale') IS NULL ORDER BY seq",
        (now, before),
    )
    return [dict(r) for r in rows]


def related_pairs(store: MemoryStore) -> set[tuple[str, str]]:
    """Pairs of memories already linked by any relation (both orders)."""
    out: set[tuple[str, str]] = set()
    for a, b in store.db.fetchall(
        "SELECT source_id, target_id FROM relations WHERE target_type = 'memory'"
    ):
        out.add((a, b))
        out.add((b, a))
    return out


def inbox_items(store: MemoryStore) -> list[dict[str, Any]]:
    return [dict(r) for r in store.db.fetchall("SELECT * FROM inbox ORDER BY created_at, id")]


# -- the book ---------------------------------------------------------------------------------
def begin_run(store: MemoryStore, run_id: str, trigger: str, phases: Sequence[str]) -> None:
    with store.db.transaction():
        store.db.conn.execute(
            "INSERT INTO dream_runs(run_id, started_at, trigger, phases) VALUES (?, ?, ?, ?)",
            (run_id, now_iso(), trigger, ",".join(phases)),
        )


def finish_run(store: MemoryStore, run_id: str, summary: Mapping[str, Any]) -> None:
    with store.db.transaction():
        store.db.conn.execute(
            "UPDATE dream_runs SET finished_at = ?, summary = ? WHERE run_id = ?",
            (now_iso(), json.dumps(summary, sort_keys=True), run_id),
        )


def list_runs(store: MemoryStore, limit: int = 20) -> list[dict[str, Any]]:
    rows = store.db.fetchall(
        "SELECT r.*, (SELECT count(*) FROM dream_changes c WHERE c.run_id = r.run_id) AS changes"
        " FROM dream_runs r ORDER BY started_at DESC, rowid DESC LIMIT ?",
        (limit,),
    )
    return [dict(r) for r in rows]


def get_state(store: MemoryStore, key: str) -> str | None:
    row = store.db.fetchone("SELECT value FROM dream_state WHERE key = ?", (key,))
    return str(row[0]) if row else None


def set_state(store: MemoryStore, run_id: str, key: str, value: str) -> None:
    """Move a clock, logging its old value (an undone run puts the clock back too)."""
    with store.db.transaction():
        old = get_state(store, key)
        store.db.conn.execute(
            "INSERT INTO dream_state(key, value) VALUES (?, ?)"
            " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, value),
        )
        _log(store, run_id, "-", "state", None, key, {"value": old}, {"value": value})


def _log(
    store: MemoryStore,
    run_id: str,
    phase: str,
    action: str,
    memory_id: str | None,
    target: str | None,
    old: Any,
    new: Any,
) -> None:
    store.db.conn.execute(
        "INSERT INTO dream_changes(run_id, phase, action, memory_id, target, old, new)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        (run_id, phase, action, memory_id, target, json.dumps(old), json.dumps(new)),
    )


# -- changing memories ------------------------------------------------------------------------
def update_memories(
    store: MemoryStore,
    run_id: str,
    phase: str,
    action: str,
    changes: Iterable[tuple[str, Mapping[str, Any]]],
) -> int:
    """Set columns of memories (``PLAIN_COLUMNS``, ``tags``, a list, and ``content``),
    each change logged with the old values of what it sets. ``updated_at`` is left alone:
    decay or a merge is not news about the memory. A new ``content`` passes the store's
    redaction (`records.check_content`) and drops the memory's vector (it described the
    old text; the embedding backfill makes a new one). Returns how many memories changed."""
    done = 0
    with store.db.transaction():
        for memory_id, sets in changes:
            row = store.db.conn.execute(
                f"SELECT seq, tag_text, content, content_hash, embedding,"
                f" {', '.join(PLAIN_COLUMNS)} FROM memories WHERE id = ?",
                (memory_id,),
            ).fetchone()
            if row is None:
                continue
            cols = [c for c in sets if c in PLAIN_COLUMNS]
            old: dict[str, Any] = {c: row[c] for c in cols}
            if "content" in sets:
                text = check_content(sets["content"])
                sets = {**sets, "content": text}
                old.update(content=row["content"], content_hash=row["content_hash"],
                           embedding=_b64(row["embedding"]))  # fmt: skip
                store.db.conn.execute(
                    "UPDATE memories SET content = ?, content_hash = ?, embedding = NULL"
                    " WHERE seq = ?",
                    (text, content_hash(text), row["seq"]),
                )
                if row["embedding"] is not None:
                    store.vectors.remove([row["seq"]])
                vocabulary.index_terms(store.db.conn, fuzzy.extract_terms(text))
            if cols:
                store.db.conn.execute(
                    f"UPDATE memories SET {', '.join(f'{c} = ?' for c in cols)} WHERE seq = ?",
                    [*(sets[c] for c in cols), row["seq"]],
                )
            if "tags" in sets:
                old["tags"] = row["tag_text"].split() if row["tag_text"] else []
                set_tags(store.db.conn, row["seq"], normalize_tags(sets["tags"]))
            _log(store, run_id, phase, action, memory_id, None, old, dict(sets))
            done += 1
    return done


def retire_memories(
    store: MemoryStore, run_id: str, phase: str, action: str, reasons: Mapping[str, str]
) -> int:
    """Mark memories invalid (soft: they stay for history and `undo_run`), with a reason
    each; their vectors leave the index and are kept in the change row for an undo."""
    now = now_iso()
    done = 0
    with store.db.transaction():
        for memory_id, reason in reasons.items():
            row = store.db.conn.execute(
                "SELECT seq, valid_until, invalidation_reason, embedding FROM memories"
                " WHERE id = ? AND valid_until IS NULL",
                (memory_id,),
            ).fetchone()
            if row is None:
                continue
            store.db.conn.execute(
                "UPDATE memories SET valid_until = ?, invalidation_reason = ?, embedding = NULL"
                " WHERE seq = ?",
                (now, reason, row["seq"]),
            )
            if row["embedding"] is not None:
                store.vectors.remove([row["seq"]])
            old = {
                "valid_until": None,
                "invalidation_reason": row["invalidation_reason"],
                "embedding": _b64(row["embedding"]),
            }
            _log(store, run_id, phase, action, memory_id, None, old, {"valid_until": now})
            done += 1
    return done


def add_relations(
    store: MemoryStore,
    run_id: str,
    phase: str,
    relation_type: str,
    pairs: Iterable[tuple[str, str]],
) -> list[tuple[str, str]]:
    """Add memory-to-memory relations (existing ones are left as they are and not
    logged, and so are those past a memory's limit); returns the pairs added."""
    now = now_iso()
    done: list[tuple[str, str]] = []
    with store.db.transaction():
        for source, target in pairs:
            if not relation_room(store.db.conn, source):
                continue  # at the per-memory limit: its export must stay importable
            cur = store.db.conn.execute(
                "INSERT OR IGNORE INTO relations(source_id, target_id, target_type,"
                " relation_type, created_at) VALUES (?, ?, 'memory', ?, ?)",
                (source, target, relation_type, now),
            )
            if cur.rowcount:
                _log(store, run_id, phase, "relation", source, target, None, relation_type)
                done.append((source, target))
    return done


def settle_inbox(
    store: MemoryStore,
    run_id: str,
    phase: str,
    promote: Sequence[tuple[Mapping[str, Any], Sequence[str]]],
    remove: Sequence[str],
) -> list[str | None]:
    """The inbox step applied in one transaction: each ``(memory fields, inbox ids)`` of
    ``promote`` becomes a memory (None for one whose items are gone already, or that a
    stored memory equals, or that the store refuses: nothing added) and its items leave
    the inbox; the ``remove`` items leave too. Every row removed and memory added is
    logged for `undo_run`."""
    ids: list[str | None] = []
    with store.db.transaction():
        rows = {r["id"]: r for r in inbox_items(store)}
        gone: set[str] = set()

        def take(item_ids: Sequence[str]) -> list[str]:
            taken = [i for i in item_ids if i in rows and i not in gone]
            for i in taken:
                store.db.conn.execute("DELETE FROM inbox WHERE id = ?", (i,))
                _log(store, run_id, phase, "inbox", None, i, rows[i], None)
                gone.add(i)
            return taken

        for fields, item_ids in promote:
            try:
                rec = store._prepare(fields)
            except ValidationError:  # one the store refuses costs only itself: it goes
                take(item_ids)
                ids.append(None)
                continue
            if not take(item_ids):
                ids.append(None)  # settled meanwhile: never promoted twice
                continue
            if store._find_duplicate(rec) is not None:
                ids.append(None)
                continue
            store._insert([rec])
            _log(store, run_id, phase, "insert", rec["id"], None, None, {"content": rec["content"]})
            ids.append(rec["id"])
        take(remove)
    return ids


def oldest_episodes_for(
    store: MemoryStore, excess: float, skip: set[int], factor: float = 2.0
) -> tuple[list[tuple[int, str]], float]:
    """The oldest episodes whose rows add up to about ``excess`` bytes (text, metadata
    and vector, times ``factor`` for the FTS index, the vec tables and page overhead),
    and the bytes that estimate expects them to free."""
    out: list[tuple[int, str]] = []
    total = 0.0
    rows = store.db.fetchall(
        "SELECT seq, id, length(CAST(content AS BLOB)) + length(CAST(metadata AS BLOB))"
        " + coalesce(length(embedding), 0) FROM memories"
        f" WHERE {EPISODE_WHERE} ORDER BY created_at, seq",
    )
    for seq, mid, size in rows:
        if seq in skip:
            continue
        if total >= excess:
            break
        out.append((seq, mid))
        total += size * factor
    return out, total


def delete_memories(
    store: MemoryStore,
    run_id: str,
    phase: str,
    action: str,
    doomed: Sequence[tuple[int, str]],
    backup: str,
) -> int:
    """Delete memories for good (their backup, an importable export, is already written:
    ``backup`` names it in each change row, and `undo_run` imports it back)."""
    done = 0
    for start in range(0, len(doomed), 5000):
        batch = doomed[start : start + 5000]
        seqs = [seq for seq, _ in batch]
        with store.db.transaction():
            cur = store.db.conn.execute(
                f"DELETE FROM memories WHERE seq IN ({','.join('?' * len(seqs))})", seqs
            )
            store.vectors.remove(seqs)
            store.db.conn.executemany(
                "INSERT INTO dream_changes(run_id, phase, action, memory_id, target, old, new)"
                " VALUES (?, ?, ?, ?, ?, NULL, NULL)",
                [(run_id, phase, action, mid, backup) for _, mid in batch],
            )
            done += cur.rowcount
    return done


# -- undo -------------------------------------------------------------------------------------
# The memories a run touched: the ones it changed, and the far end of a relation it added.
_TOUCHED = (
    "SELECT memory_id FROM dream_changes WHERE run_id = :run AND memory_id IS NOT NULL"
    " UNION SELECT target FROM dream_changes WHERE run_id = :run AND action = 'relation'"
)
_LATER = (
    "SELECT run_id FROM dream_runs WHERE undone_at IS NULL"
    " AND rowid > (SELECT rowid FROM dream_runs WHERE run_id = :run)"
)


def later_dependents(store: MemoryStore, run_id: str) -> list[str]:
    """The later runs, not undone, that touched a memory run ``run_id`` touched: undoing
    it first would put back old values under their changes (a memory "merged into" one
    that is valid again), so they must be undone first, newest first."""
    rows = store.db.conn.execute(
        f"WITH touched(id) AS ({_TOUCHED}) SELECT r.run_id FROM dream_runs r"
        f" WHERE r.run_id IN ({_LATER}) AND EXISTS (SELECT 1 FROM dream_changes c"
        " WHERE c.run_id = r.run_id AND (c.memory_id IN touched"
        " OR (c.action = 'relation' AND c.target IN touched)))"
        " ORDER BY r.rowid DESC",
        {"run": run_id},
    ).fetchall()
    return [str(r[0]) for r in rows]


def undo_run(store: MemoryStore, run_id: str) -> dict[str, int]:
    """Put back what run ``run_id`` changed, newest change first, in one transaction:
    old column values, retired memories made valid again (with their vectors),
    relations and consolidated memories removed, inbox rows and deleted episodes (from
    the run's backups) restored, clocks reset (unless a later run moved them since).
    Refused when a later run that is not undone touched the same memories
    (`later_dependents`). Returns counts by action."""
    from . import archive

    counts: dict[str, int] = {}
    backups: list[str] = []
    with store.db.transaction():
        row = store.db.conn.execute(
            "SELECT undone_at FROM dream_runs WHERE run_id = ?", (run_id,)
        ).fetchone()
        if row is None:
            raise NotFoundError(f"no dream run {run_id!r} (see `llmem-hooks dream --runs`)")
        if row[0] is not None:
            raise ValidationError(f"dream run {run_id} was already undone at {row[0]}")
        later = later_dependents(store, run_id)
        if later:
            more = f" (and {len(later) - 1} more)" if len(later) > 1 else ""
            raise ValidationError(
                f"cannot undo dream run {run_id}: the later run {later[0]}{more} changed"
                f" the same memories; undo it first (llmem-hooks dream --undo {later[0]})"
            )
        moved_since = {
            str(r[0])
            for r in store.db.conn.execute(
                f"SELECT DISTINCT target FROM dream_changes WHERE action = 'state'"
                f" AND run_id IN ({_LATER})",
                {"run": run_id},
            )
        }
        changes = store.db.conn.execute(
            "SELECT * FROM dream_changes WHERE run_id = ? ORDER BY id DESC", (run_id,)
        ).fetchall()
        for ch in changes:
            action = ch["action"]
            old: Any = json.loads(ch["old"]) if ch["old"] is not None else {}
            if action == "delete":
                if ch["target"] not in backups:
                    backups.append(ch["target"])
            elif action == "relation":
                store.db.conn.execute(
                    "DELETE FROM relations WHERE source_id = ? AND target_id = ?"
                    " AND relation_type = ?",
                    (ch["memory_id"], ch["target"], json.loads(ch["new"])),
                )
            elif action == "insert":
                seq = _seq(store, ch["memory_id"])
                if seq is not None:
                    store.db.conn.execute("DELETE FROM memories WHERE seq = ?", (seq,))
                    store.vectors.remove([seq])
            elif action == "inbox":
                cols = list(old)
                store.db.conn.execute(
                    f"INSERT OR IGNORE INTO inbox({', '.join(cols)})"
                    f" VALUES ({', '.join('?' * len(cols))})",
                    [old[c] for c in cols],
                )
            elif action == "state":
                if ch["target"] in moved_since:  # a later run's clock stands
                    pass
                elif old["value"] is None:
                    store.db.conn.execute("DELETE FROM dream_state WHERE key = ?", (ch["target"],))
                else:
                    store.db.conn.execute(
                        "UPDATE dream_state SET value = ? WHERE key = ?",
                        (old["value"], ch["target"]),
                    )
            else:
                _restore_columns(store, ch["memory_id"], old)
            counts[action] = counts.get(action, 0) + 1
        for path in reversed(backups):
            from pathlib import Path

            store.import_memories(archive.read_export(Path(path)))
        store.db.conn.execute(
            "UPDATE dream_runs SET undone_at = ? WHERE run_id = ?", (now_iso(), run_id)
        )
    return counts


def _seq(store: MemoryStore, memory_id: str) -> int | None:
    row = store.db.conn.execute("SELECT seq FROM memories WHERE id = ?", (memory_id,)).fetchone()
    return int(row[0]) if row else None


def _restore_columns(store: MemoryStore, memory_id: str, old: Mapping[str, Any]) -> None:
    seq = _seq(store, memory_id)
    if seq is None:
        return
    cols = [c for c in old if c in RESTORED_COLUMNS]
    if cols:
        store.db.conn.execute(
            f"UPDATE memories SET {', '.join(f'{c} = ?' for c in cols)} WHERE seq = ?",
            [*(old[c] for c in cols), seq],
        )
    if "tags" in old:
        set_tags(store.db.conn, seq, normalize_tags(old["tags"]))
    if old.get("embedding"):
        blob = base64.b64decode(old["embedding"])
        store.db.conn.execute("UPDATE memories SET embedding = ? WHERE seq = ?", (blob, seq))
        store.vectors.write([(seq, blob)])
    elif "content" in old:  # a rewritten text without a vector: a newer vector is of the new text
        store.db.conn.execute("UPDATE memories SET embedding = NULL WHERE seq = ?", (seq,))
        store.vectors.remove([seq])


def _b64(blob: bytes | None) -> str | None:
    return base64.b64encode(blob).decode("ascii") if blob is not None else None


# -- sizes and pages --------------------------------------------------------------------------
def db_usage(store: MemoryStore) -> dict[str, int]:
    """Page size and counts: ``used_bytes`` is what the rows take (free pages aside)."""
    q = store.db.fetchone
    page_size = int(q("PRAGMA page_size")[0])
    pages = int(q("PRAGMA page_count")[0])
    free = int(q("PRAGMA freelist_count")[0])
    return {
        "page_size": page_size,
        "page_count": pages,
        "freelist_count": free,
        "file_bytes": pages * page_size,
        "used_bytes": (pages - free) * page_size,
        "auto_vacuum": int(q("PRAGMA auto_vacuum")[0]),
    }


def incremental_vacuum(store: MemoryStore) -> int:
    """Return the free pages to the file system (auto_vacuum INCREMENTAL); returns how
    many pages were freed (0 on a store still in auto_vacuum NONE)."""
    before = db_usage(store)
    if before["auto_vacuum"] != 2 or not before["freelist_count"]:
        return 0
    with store.db.lock:
        store.db.conn.execute("PRAGMA incremental_vacuum").fetchall()
    return before["page_count"] - db_usage(store)["page_count"]


def enable_incremental_vacuum(store: MemoryStore) -> bool:
    """Switch a store made before auto_vacuum INCREMENTAL to it: one full VACUUM (it
    rewrites the file, so it needs that much free disk and holds the write lock for its
    duration). Returns True if it switched."""
    if db_usage(store)["auto_vacuum"] == 2:
        return False
    with store.db.lock:
        store.db.conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
        store.db.conn.execute("VACUUM")
    return db_usage(store)["auto_vacuum"] == 2


def table_sizes(store: MemoryStore) -> tuple[str, dict[str, int]]:
    """Bytes per table (its indexes and shadow tables folded in): exact from SQLite's
    ``dbstat`` table when the library has it, else estimated from row counts and the
    stored text. Returns ("dbstat" or "estimate", {table: bytes})."""
    try:
        rows = store.db.fetchall(
            "SELECT s.name, coalesce(m.tbl_name, s.name), sum(s.pgsize) FROM dbstat s"
            " LEFT JOIN sqlite_schema m ON m.name = s.name GROUP BY s.name"
        )
    except Exception:  # no dbstat in this SQLite build
        return "estimate", _estimated_sizes(store)
    out: dict[str, int] = {}
    for _name, table, size in rows:
        owner = _owner(str(table))
        out[owner] = out.get(owner, 0) + int(size)
    return "dbstat", dict(sorted(out.items(), key=lambda kv: -kv[1]))


def _owner(table: str) -> str:
    """FTS5 and vec0 shadow tables count for their virtual table."""
    for base in ("memories_fts", "memories_vec_bit", "memories_vec"):
        if table.startswith(base):
            return base
    return table


def _estimated_sizes(store: MemoryStore) -> dict[str, int]:
    out: dict[str, int] = {}
    for (name,) in store.db.fetchall(
        "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        " AND sql NOT LIKE 'CREATE VIRTUAL%'"
    ):
        count = store.db.fetchone(f'SELECT count(*) FROM "{name}"')[0]
        out[_owner(name)] = out.get(_owner(name), 0) + int(count) * 64
    text = store.db.fetchone(
        "SELECT coalesce(sum(length(CAST(content AS BLOB)) + length(CAST(metadata AS BLOB))"
        " + coalesce(length(embedding), 0)), 0) FROM memories"
    )[0]
    out["memories"] = out.get("memories", 0) + int(text)
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def project_sizes(store: MemoryStore, limit: int = 50) -> list[dict[str, Any]]:
    """Per project: memories, episodes among them, and the bytes of their rows (text,
    metadata, vector; an estimate: the FTS index and table pages are not split by
    project)."""
    rows = store.db.fetchall(
        "SELECT coalesce(project, '(global)') AS project, count(*) AS memories,"
        f" sum(CASE WHEN {EPISODE_WHERE} THEN 1 ELSE 0 END) AS episodes,"
        " sum(length(CAST(content AS BLOB)) + length(CAST(metadata AS BLOB))"
        " + coalesce(length(embedding), 0)) AS row_bytes"
        " FROM memories GROUP BY project ORDER BY row_bytes DESC LIMIT ?",
        (limit,),
    )
    return [dict(r) for r in rows]
