"""Opening the memory database: driver choice, pragmas and transactions.

The stdlib ``sqlite3`` of many Python builds (pyenv among them) cannot load extensions,
so sqlite-vec would never load. We use the stdlib when it can load sqlite-vec, else
sqlean-py (a DB-API twin of ``sqlite3`` with a recent SQLite and extension loading), else
the stdlib without vectors.

A search runs under a time limit (`time_limit`): SQLite's progress handler, called
every `PROGRESS_STEPS` virtual-machine steps, aborts the statement once the deadline has
passed (``OperationalError: interrupted``, which `is_interrupted` recognises), so one
costly query cannot hold a connection for tens of seconds.

Every connection runs in WAL mode with a non-zero ``busy_timeout`` (a writer waits for a
lock instead of dropping data with "database is locked") and foreign keys on. Writes use
``BEGIN IMMEDIATE`` so two writers queue on the lock up front rather than deadlocking
when a read transaction tries to upgrade.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

log = logging.getLogger(__name__)

BUSY_TIMEOUT_MS = 10_000
PROGRESS_STEPS = 2_000  # VM steps between two looks at the clock (~tens of microseconds)


@functools.cache
def _driver() -> ModuleType:
    """The stdlib ``sqlite3`` when it can load sqlite-vec; else sqlean-py (a DB-API twin
    that can); else the stdlib anyway (search is then FTS-only, and ``doctor`` says so)."""
    if _loads_vec(sqlite3):
        return sqlite3
    try:
        import sqlean  # type: ignore[import-untyped]

        return sqlean
    except ImportError:  # pragma: no cover - depends on the install
        return sqlite3


def _loads_vec(driver: ModuleType) -> bool:
    try:
        conn = driver.connect(":memory:")
    except Exception:  # pragma: no cover
        return False
    try:
        return _load_vec(conn)
    finally:
        conn.close()


def driver_name() -> str:
    """Which SQLite binding and library version the store runs on (for ``doctor``)."""
    driver = _driver()
    name = "sqlite3 (stdlib)" if driver is sqlite3 else "sqlean-py"
    return f"{name}, SQLite {driver.sqlite_version}"


def connect(path: Path | str, *, load_vec: bool = True) -> Any:
    """Open ``path`` with our pragmas; returns a DB-API connection in autocommit mode."""
    driver = _driver()
    conn = driver.connect(
        str(path), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
    )
    conn.row_factory = driver.Row
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    # Before WAL and the first table: a new database frees pages with `incremental_vacuum`
    # (the size cap, docs/dream.md); on an existing one this is a no-op until a VACUUM.
    conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
    if str(path) != ":memory:":
        conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    if load_vec:
        _load_vec(conn)
    return conn


def backup_to(conn: Any, path: Path | str) -> None:
    """SQLite's online backup of ``conn``'s database into the file ``path``: page for page
    (free pages and layout as they are), one consistent snapshot; the caller holds the
    connection's lock and made ``path`` (0600) first."""
    dst = _driver().connect(str(path), isolation_level=None)
    try:
        conn.backup(dst)
    finally:
        dst.close()


SQLITE_HEADER = b"SQLite format 3\x00"


def is_sqlite_file(path: Path | str) -> bool:
    """True if ``path`` starts with SQLite's header, or is empty (SQLite makes an empty
    file a new database). Checked before SQLite opens a path a user gave, so a wrong
    path fails with one line and SQLite never writes into (or next to) a foreign file."""
    with open(path, "rb") as fh:
        head = fh.read(len(SQLITE_HEADER))
    return head == SQLITE_HEADER or head == b""


def connect_readonly(path: Path | str, *, load_vec: bool = True) -> Any:
    """Open ``path`` read-only: works on a file and folder the user cannot write, and
    writes nothing. When no other connection is open (no ``-wal``/``-shm`` next to it)
    the file is opened ``immutable`` so SQLite does not create those two files either
    (a short read races at worst with a writer that starts meanwhile, and then sees
    the state before it); otherwise ``mode=ro`` shares the existing WAL."""
    driver = _driver()
    p = Path(os.path.abspath(path))
    in_use = os.path.exists(f"{p}-wal") or os.path.exists(f"{p}-shm")
    uri = p.as_uri() + ("?mode=ro" if in_use else "?mode=ro&immutable=1")
    conn = driver.connect(
        uri,
        uri=True,
        timeout=BUSY_TIMEOUT_MS / 1000,
        isolation_level=None,
        check_same_thread=False,
    )
    conn.row_factory = driver.Row
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA query_only = ON")
    if load_vec:
        _load_vec(conn)
    return conn


def _load_vec(conn: Any) -> bool:
    """Load sqlite-vec if the driver allows it; search falls back to Python otherwise."""
    try:
        import sqlite_vec  # type: ignore[import-untyped]

        conn.enable_load_extension(True)
        sqlite_vec.load(conn)
        conn.enable_load_extension(False)
        return True
    except Exception as exc:  # AttributeError on builds without extension loading
        log.debug("sqlite-vec not loaded: %s", exc)
        return False


def has_function(conn: Any, name: str) -> bool:
    """True if SQL function ``name`` exists on ``conn`` (e.g. ``vec_distance_cosine``)."""
    row = conn.execute("SELECT 1 FROM pragma_function_list WHERE name = ?", (name,)).fetchone()
    return row is not None


@contextlib.contextmanager
def transaction(conn: Any) -> Iterator[Any]:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``; rolls back on any exception (nothing half-written).

    Nested use joins the outer transaction, so a caller can group several store writes
    (memories and the cursor that produced them) into one commit."""
    if conn.in_transaction:
        yield conn
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    else:
        conn.execute("COMMIT")


_deadlines: dict[int, float] = {}  # id(conn) -> the deadline of the outermost time_limit
_deadlines_lock = threading.Lock()


@contextlib.contextmanager
def time_limit(conn: Any, seconds: float | None) -> Iterator[None]:
    """Abort any statement ``conn`` runs after ``seconds`` from now (None: no limit).

    Nested use keeps the outer (earlier) deadline. A statement cut off raises the
    driver's ``OperationalError`` ("interrupted"; `is_interrupted`)."""
    if seconds is None:
        yield
        return
    key = id(conn)
    with _deadlines_lock:
        outer = key in _deadlines
        if not outer:
            _deadlines[key] = time.monotonic() + max(0.0, seconds)
    if outer:
        yield
        return
    deadline = _deadlines[key]

    def past_deadline() -> int:
        return 1 if time.monotonic() > deadline else 0

    conn.set_progress_handler(past_deadline, PROGRESS_STEPS)
    try:
        yield
    finally:
        with contextlib.suppress(Exception):  # a connection closed meanwhile
            conn.set_progress_handler(None, 0)
        with _deadlines_lock:
            _deadlines.pop(key, None)


def is_interrupted(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLite's "interrupted": a statement `time_limit` cut off."""
    return type(exc).__name__ == "OperationalError" and "interrupted" in str(exc).lower()


class Database:
    """The one seam into the memory database: a connection and the re-entrant lock that
    serialises it (the connection is shared between threads). `MemoryStore` owns one as
    ``store.db``; every table module takes it instead of reaching into the store.

    Reads fetch all their rows under the lock (a cursor read after it is released would
    race another thread's statement); `transaction` is the lock plus ``BEGIN IMMEDIATE``;
    `locked` holds the lock over several statements and yields the raw connection."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.lock = threading.RLock()
        self._functions: dict[str, bool] = {}

    def fetchone(self, sql: str, params: Sequence[Any] = ()) -> Any:
        with self.lock:
            return self.conn.execute(sql, params).fetchone()

    def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        with self.lock:
            return list(self.conn.execute(sql, params).fetchall())

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """One statement under the lock (a write outside a transaction, or a pragma)."""
        with self.lock:
            return self.conn.execute(sql, params)

    @contextlib.contextmanager
    def locked(self) -> Iterator[Any]:
        """The raw connection, held for several statements that must see one state."""
        with self.lock:
            yield self.conn

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Any]:
        """The lock and `transaction`: all the writes inside land, or none (joins an
        outer transaction, so `MemoryStore.atomic` can group several)."""
        with self.lock, transaction(self.conn):
            yield self.conn

    def time_limit(self, seconds: float | None) -> contextlib.AbstractContextManager[None]:
        """Statements abort after ``seconds`` (see the module-level `time_limit`)."""
        return time_limit(self.conn, seconds)

    def has_function(self, name: str) -> bool:
        """`has_function`, asked once per connection (``vec_distance_cosine``)."""
        if name not in self._functions:
            with self.lock:
                self._functions[name] = has_function(self.conn, name)
        return self._functions[name]

    def close(self) -> None:
        with self.lock:
            if self.conn is not None:
                self.conn.close()
                self.conn = None
