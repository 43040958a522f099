"""A private, throwaway copy of the memory database: where a dream dry run rehearses the
real cycle (docs/dream.md), so that its plan is what ``--apply`` then does (each step
sees what the steps before it changed) while the store itself is never written or
locked for writing (a copy is one read; hooks keep writing meanwhile).

The copy is SQLite's online backup (page for page, so the size cap measures what it
would on the store) into a 0600 file in a 0700 folder ``.dream-plan-<pid>-<random>``
beside the database (same file system and same privacy as the store); `discard_copy`
removes it. A folder left by a process that died (kill -9) is removed by the next copy.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
from pathlib import Path

from .db import backup_to
from .memories import MemoryStore

log = logging.getLogger(__name__)

PREFIX = ".dream-plan-"
DB_NAME = "plan.db"


def private_copy(store: MemoryStore) -> MemoryStore | None:
    """A store on a fresh copy of ``store``'s database, opened with its settings; None
    when there is no file to copy (an in-memory store) or the copy cannot be made (a
    folder we cannot write, a full disk: logged), so the caller plans without it."""
    src = str(store.db_path)
    if src == ":memory:" or src.startswith("file:"):
        return None
    folder = Path(os.path.realpath(src)).parent
    _sweep(folder)
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=folder))
    except OSError as exc:
        log.info("dream plan: no copy of the store (%s)", exc)
        return None
    path = tmp / DB_NAME
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR | os.O_NOFOLLOW, 0o600))
        with store.db.lock:
            backup_to(store.db.conn, path)
        vec = store.vectors
        return MemoryStore(
            path,
            inbox_capacity=store.inbox_capacity,
            default_confidence=store.default_confidence,
            vec_dimensions=vec.requested,
            duplicate_cosine=store.duplicate_cosine,
            load_vec=vec.enabled,
            prefilter_threshold=vec.prefilter_threshold,
        )
    except Exception as exc:  # OSError, or the driver's error on a full disk
        log.info("dream plan: no copy of the store (%s: %s)", type(exc).__name__, exc)
        shutil.rmtree(tmp, ignore_errors=True)
        return None


def discard_copy(copy: MemoryStore) -> None:
    """Close the copy and remove its folder."""
    copy.close()
    folder = Path(copy.db_path).parent
    if folder.name.startswith(PREFIX):
        shutil.rmtree(folder, ignore_errors=True)


def _sweep(folder: Path) -> None:
    """Remove the copies of processes that are gone (a dry run killed in the middle)."""
    with contextlib.suppress(OSError):
        for entry in folder.iterdir():
            if not entry.name.startswith(PREFIX) or entry.is_symlink() or not entry.is_dir():
                continue
            pid = entry.name[len(PREFIX) :].split("-", 1)[0]
            if pid.isdigit() and not _alive(int(pid)):
                shutil.rmtree(entry, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive
        return True
    return True
