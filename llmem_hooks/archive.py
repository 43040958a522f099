"""The export file format: a versioned JSON envelope around `MemoryStore.export_all`.

```json
{"format": "llmem-hooks-export", "version": 1, "exported_at": "...", "count": 2,
 "memories": [{"id": "...", "type": "fact", "content": "...", "tags": [...], ...}]}
```
A bare JSON list of memories is accepted on import too (hand-written files).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .errors import ImportFormatError, ValidationError
from .paths import DIR_MODE, FILE_MODE, get_llmem_home, read_bounded_text, write_private_file
from .timestamps import now_iso

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
