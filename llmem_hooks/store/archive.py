"""Export and import: `export_all` / `import_memories` (behind `MemoryStore`'s methods) and the
file format, a versioned JSON envelope around what `export_all` returns.

```json
{"format": "llmem-hooks-export", "version": 1, "exported_at": "...", "count": 2,
 "memories": [{"id": "...", "type": "fact", "content": "...", "tags": [...], ...}]}
```
A bare JSON list of memories is accepted on import too (hand-written files).
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ImportFormatError, ValidationError
from ..paths import DIR_MODE, FILE_MODE, get_llmem_home, read_bounded_text, write_private_file
from ..timestamps import now_iso
from . import citations
from .db import Database
from .records import DEFAULT_EXPORT_LIMIT, MEMORY_COLUMNS, row_to_memory, validate_import_record
from .relations import check_relation

if TYPE_CHECKING:
    from .memories import MemoryStore

FORMAT = "llmem-hooks-export"
VERSION = 1


def wrap(memories: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "version": VERSION,
        "exported_at": now_iso(),
        "count": len(memories),
        "memories": list(memories),
    }


def unwrap(data: Any) -> list[Any]:
    """The memories list of an export document; raises ImportFormatError if it is not one."""
    if isinstance(data, list):
        return data
    if not isinstance(data, Mapping):
        raise ImportFormatError("import file must hold a JSON object or list")
    if data.get("format") != FORMAT:
        raise ImportFormatError(f"not an llmem-hooks export (format {data.get('format')!r})")
    if data.get("version") != VERSION:
        raise ImportFormatError(
            f"unsupported export version {data.get('version')!r} (this llmem-hooks reads {VERSION})"
        )
    memories = data.get("memories")
    if not isinstance(memories, list):
        raise ImportFormatError("export file has no 'memories' list")
    return memories


def write_export(path: Path, memories: Sequence[Mapping[str, Any]]) -> None:
    """Write an export file atomically, mode 0600 (memories are private). The folder must
    exist: a typo in a path should not silently create a tree of folders."""
    if not path.parent.is_dir():
        raise ValidationError(f"cannot write {path}: folder {path.parent} does not exist")
    write_private_file(path, json.dumps(wrap(memories), ensure_ascii=False, indent=1) + "\n")


def backup_dir() -> Path:
    """``$LLMEM_HOME/backups`` (0700), where bulk deletes leave a copy of what they delete.
    Refused if it is a symlink or not a folder: a backup must not land somewhere else."""
    folder = get_llmem_home() / "backups"
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        raise ValidationError(f"{folder} is not a plain folder; not writing a backup there")
    if not folder.exists():
        folder.mkdir(parents=True, mode=DIR_MODE)
        os.chmod(folder, DIR_MODE)  # we created it: make sure the umask did not widen it
    return folder


def backup_name(kind: str) -> Path:
    """The path `write_backup` would first try now (nothing is created): a dream dry run
    logs it as its rehearsal's backup, so its change rows take the bytes apply's do."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    return get_llmem_home() / "backups" / f"{kind}-{stamp}.json"


def write_backup(kind: str, memories: Sequence[Mapping[str, Any]]) -> Path:
    """Write ``memories`` as an importable export file ``backups/<kind>-<UTC time>.json``
    (0600, created exclusively, never through a symlink, fsynced) and return its path.

    Written BEFORE a bulk delete: if this fails, nothing is deleted.
    """
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    data = (json.dumps(wrap(memories), ensure_ascii=False, indent=1) + "\n").encode("utf-8")
    folder = backup_dir()
    for attempt in range(100):
        path = folder / f"{kind}-{stamp}{f'-{attempt}' if attempt else ''}.json"
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, FILE_MODE)
        except FileExistsError:
            continue
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
        except BaseException:
            path.unlink(missing_ok=True)
            raise
        return path
    raise ValidationError(f"cannot find a free backup file name in {folder}")


MAX_IMPORT_BYTES = 512 * 1024 * 1024  # an export of 10,000 memories with vectors is ~60 MB


def read_export(path: Path) -> list[Any]:
    """The memories of an export file. Anything unreadable (missing, not UTF-8, over
    MAX_IMPORT_BYTES, not JSON, nested too deeply, a 5,000-digit number) is one
    ImportFormatError line, never a traceback."""
    try:
        text = read_bounded_text(path, MAX_IMPORT_BYTES)
    except ValueError as exc:
        raise ImportFormatError(str(exc)) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ImportFormatError(
            f"{path} is not valid JSON: {exc.msg} at line {exc.lineno}"
        ) from None
    except RecursionError:
        raise ImportFormatError(f"{path} is nested too deeply") from None
    except ValueError as exc:  # e.g. an integer of more than 4,300 digits
        raise ImportFormatError(f"{path} is not usable JSON: {str(exc)[:120]}") from None
    return unwrap(data)


def export_all(
    db: Database,
    limit: int | None = DEFAULT_EXPORT_LIMIT,
    ids: Sequence[str] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[dict[str, Any]]:
    """All memories (valid or not) with tags, outgoing relations, code citations and
    embeddings (base64).

    ``limit`` defaults to 10,000; pass None for no limit. ``ids``: only these memories
    (the backup `prune` writes before it deletes them). ``progress(done, total)`` is
    called as rows are converted (`llmem_hooks.progress`).
    """
    where = ""
    params: list[Any] = []
    if ids is not None:
        where = "WHERE id IN (SELECT value FROM json_each(?))"
        params.append(json.dumps(list(ids)))
    sql = f"SELECT {MEMORY_COLUMNS}, embedding, seq FROM memories {where} ORDER BY seq"
    if limit is not None:
        sql += " LIMIT ?"
        params.append(limit)
    with db.lock:
        rows = db.conn.execute(sql, params).fetchall()
        rels: dict[str, list[dict[str, Any]]] = {}
        for r in db.conn.execute(
            "SELECT source_id, target_id, target_type, relation_type, created_at "
            "FROM relations ORDER BY id"
        ):
            rels.setdefault(r[0], []).append(
                {
                    "target_id": r[1],
                    "target_type": r[2],
                    "relation_type": r[3],
                    "created_at": r[4],
                }
            )
    cites = citations.of_memories(db, [row["id"] for row in rows])
    out = []
    for i, row in enumerate(rows, 1):
        if progress is not None and (i % 100 == 0 or i == len(rows)):
            progress(i, len(rows))
        mem = row_to_memory(row)
        mem["embedding"] = (
            base64.b64encode(row["embedding"]).decode("ascii")
            if row["embedding"] is not None
            else None
        )
        mem["relations"] = rels.get(mem["id"], [])
        mem["citations"] = [c.to_dict() for c in cites.get(mem["id"], [])]
        out.append(mem)
    return out


def import_memories(
    store: MemoryStore,
    data: Sequence[Mapping[str, Any]] | Mapping[str, Any],
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Import memories (as produced by `export_all`) all-or-nothing, in one transaction.

    Every record is validated before anything is written; ids already present are
    skipped (so importing the same file twice is harmless). Returns how many were added.
    ``progress(done, total)``: records validated so far (the write that follows is one
    transaction; the last call comes after it).
    """
    if isinstance(data, Mapping):
        data = unwrap(data)
    if not isinstance(data, Sequence) or isinstance(data, str | bytes):
        raise ValidationError("import data must be a list of memories")
    records: list[dict[str, Any]] = []
    relations: list[tuple[str, str, str, str, str]] = []
    cited: dict[str, list[dict[str, Any]]] = {}
    seen: set[str] = set()
    first_vec: dict[str, Any] | None = None
    total = len(data)
    for i, item in enumerate(data):
        if progress is not None and i % 100 == 0 and i:
            progress(i, total)
        if not isinstance(item, Mapping):
            raise ValidationError(f"memory #{i + 1}: expected an object")
        try:
            validate_import_record(item)
            rec = store._prepare(item)
            rels = item.get("relations") or []
            if not isinstance(rels, list) or not all(isinstance(r, Mapping) for r in rels):
                raise ValidationError("relations must be a list of objects")
            for rel in rels:
                relations.append(
                    check_relation(
                        rec["id"],
                        rel.get("target_id"),
                        rel.get("relation_type"),
                        rel.get("target_type", "memory"),
                        rel.get("created_at"),
                    )
                )
            cited[rec["id"]] = citations.from_export(item.get("citations"))
        except ValidationError as exc:
            mid = item.get("id")
            if isinstance(mid, str) and mid:
                short = mid if len(mid) <= 40 else mid[:37] + "..."
                raise ValidationError(f"memory {short}: {exc} (record #{i + 1})") from None
            raise ValidationError(f"memory #{i + 1}: {exc}") from None
        if rec["id"] in seen:
            raise ValidationError(f"memory {rec['id']}: duplicate id in import data")
        if rec["embedding"] is not None:
            # The store checked the dimension it knows; a first import sets it.
            if first_vec is None:
                first_vec = rec
            elif len(rec["embedding"]) != len(first_vec["embedding"]):
                raise ValidationError(
                    f"memory {rec['id']}: embedding has {len(rec['embedding']) // 4} "
                    f"dimensions, memory {first_vec['id']}'s "
                    f"{len(first_vec['embedding']) // 4}"
                )
        seen.add(rec["id"])
        records.append(rec)
    with store.db.transaction():
        existing: set[str] = set()
        ids = [r["id"] for r in records]
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            existing.update(
                r[0]
                for r in store.db.conn.execute(
                    f"SELECT id FROM memories WHERE id IN ({','.join('?' * len(chunk))})", chunk
                )
            )
        fresh = [r for r in records if r["id"] not in existing]
        if fresh:
            store._insert(fresh)
        for r in fresh:  # an id already here keeps the citations it has
            citations.restore(store.db, r["id"], cited.get(r["id"], []))
        store.db.conn.executemany(
            "INSERT OR IGNORE INTO relations(source_id, target_id, target_type, relation_type,"
            " created_at) VALUES (?, ?, ?, ?, ?)",
            relations,
        )
    if progress is not None:
        progress(total, total)
    return len(fresh)
