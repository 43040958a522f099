"""One dream at a time (docs/dream.md, docs/security.md "One dream at a time").

Two real ``llmem-hooks dream --apply`` processes: the first is frozen (SIGSTOP) while it
holds the dream lock; the second is refused with one line naming it and changes nothing;
the first then finishes, and every merge is logged once. A run killed with SIGKILL while
it holds the lock leaves it usable (an flock: the kernel drops it). An undo that a later
run depends on (it touched the same memories) is refused with a line naming that run.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_dream import config, dump, mem, seed

from llmem_hooks import Dreamer, MemoryStore
from llmem_hooks.dream.cycle import LOCK_SUFFIX, DreamBusy, one_dream_at_a_time
from llmem_hooks.errors import ValidationError


def _cli(*args: str, home: Path | None = None) -> subprocess.Popen[str]:
    env = dict(os.environ)
    if home is not None:
        env["LLMEM_HOME"] = str(home)
    return subprocess.Popen(
        [sys.executable, "-m", "llmem_hooks.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out, err


def _lock_of(home: Path) -> Path:
    return Path(str((home / "memory.db").resolve()) + LOCK_SUFFIX)


def _held(lock: Path) -> bool:
    """Whether someone holds the flock (asked on our own descriptor: it leaves theirs be)."""
    fd = os.open(lock, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _stopped(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rsplit(")", 1)[1].split()[0] in ("T", "t")


def _frozen_holding_the_lock(base: Path) -> tuple[subprocess.Popen[str], Path]:
    """A real ``dream --apply`` stopped (SIGSTOP) while it holds the dream lock, mid-run:
    stopped as soon as it names itself in the lock file, and checked to hold it then (a
    run that finished first is let go and tried again on a fresh store)."""
    for attempt in range(8):
        home = base / f"try{attempt}"
        with MemoryStore(home / "memory.db") as st:
            seed(st)
        lock = _lock_of(home)
        proc = _cli("dream", "--apply", home=home)
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                if lock.read_text().startswith(f"pid {proc.pid},"):
                    os.kill(proc.pid, signal.SIGSTOP)
                    break
            time.sleep(0.001)
        else:
            _finish(proc)
            assert lock.exists(), f"a run never took the dream lock {lock}"
            continue
        while not _stopped(proc.pid):
            time.sleep(0.001)
        if _held(lock):
            return proc, home
        os.kill(proc.pid, signal.SIGCONT)
        _finish(proc)
    raise AssertionError("never caught a run holding the lock")


def _merged_log(db: Path) -> list[tuple[str, str]]:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return conn.execute(
            "SELECT run_id, memory_id FROM dream_changes WHERE action = 'merged'"
        ).fetchall()


def test_a_second_run_is_refused_while_the_first_holds_the_lock(tmp_path: Path) -> None:
    first, home = _frozen_holding_the_lock(tmp_path)
    db, lock = home / "memory.db", _lock_of(home)
    try:
        before = _merged_log(db)
        code, out, err = _finish(_cli("dream", "--apply", home=home))
        assert code == 1, (out, err)
        assert err.count("\n") == 1 and err.startswith("error: another dream run is in progress")
        assert f"pid {first.pid}" in err
        code, _, err = _finish(_cli("dream", "--undo", "anything", home=home))
        assert code == 1 and "another dream run is in progress" in err  # nor an undo
        assert _merged_log(db) == before  # the refused ones changed nothing
    finally:
        os.kill(first.pid, signal.SIGCONT)
    code, out, err = _finish(first)
    assert code == 0, err
    merged = _merged_log(db)
    assert merged and len({m for _, m in merged}) == len(merged)  # each merge logged once
    with contextlib.closing(sqlite3.connect(db)) as conn:
        assert conn.execute("SELECT count(*) FROM dream_runs").fetchone()[0] == 1
    assert lock.read_text() == "" and not _held(lock)  # released, nobody named
    assert stat.S_IMODE(lock.stat().st_mode) == 0o600


def test_two_runs_started_together_never_log_a_change_twice(llmem_home: Path) -> None:
    db = llmem_home / "memory.db"
    with MemoryStore(db) as st:
        seed(st)
    procs = [_cli("dream", "--apply") for _ in range(2)]
    results = [_finish(p) for p in procs]
    assert sorted(code for code, _, _ in results) in ([0, 0], [0, 1])
    for code, _, err in results:
        if code == 1:
            assert "another dream run is in progress" in err
    merged = _merged_log(db)
    assert merged and len({m for _, m in merged}) == len(merged)


def test_a_run_killed_mid_way_leaves_the_lock_usable(tmp_path: Path) -> None:
    doomed, home = _frozen_holding_the_lock(tmp_path)
    os.kill(doomed.pid, signal.SIGKILL)  # kill -9 in the middle of the run
    assert doomed.wait(30) == -signal.SIGKILL
    doomed.communicate()
    lock = _lock_of(home)
    assert lock.read_text().startswith(f"pid {doomed.pid},")  # its name stays behind ...
    assert not _held(lock)  # ... but the kernel dropped its lock
    code, out, err = _finish(_cli("dream", "--apply", home=home))
    assert code == 0, err
    assert "dream run" in out and _merged_log(home / "memory.db")


def test_in_one_process_another_thread_is_refused_too(store: MemoryStore) -> None:
    """The sidecar dreams on its worker thread: another thread of the same process is
    refused as another process would be (the holder's own thread may re-enter)."""
    import threading

    taken, done = threading.Event(), threading.Event()

    def hold() -> None:
        with one_dream_at_a_time(store.db_path, "the worker"):
            taken.set()
            done.wait(30)

    worker = threading.Thread(target=hold)
    worker.start()
    try:
        assert taken.wait(30)
        with pytest.raises(DreamBusy, match="the worker"):
            Dreamer(store, config()).run(apply=True)
        Dreamer(store, config()).run(apply=False)  # a dry run changes nothing: never waits
    finally:
        done.set()
        worker.join(30)
    with one_dream_at_a_time(store.db_path, "the CLI"):
        Dreamer(store, config()).run(apply=True, write_files=False)  # re-entered


def _state(store: MemoryStore, key: str) -> str | None:
    row = store.conn.execute("SELECT value FROM dream_state WHERE key = ?", (key,)).fetchone()
    return row[0] if row else None


def test_undo_refused_while_a_later_run_depends_on_it(store: MemoryStore) -> None:
    seed(store)
    dreamer = Dreamer(store, config())
    first = dreamer.run(apply=True, write_files=False)
    kept = first.results[0].merged[0]["id"]  # the memory the duplicates were merged into
    text = store.get(kept)["content"]
    # a new duplicate of the kept memory: the next run merges it with the kept one
    store.import_memories([mem("dup-new", text + " ", 0, confidence=0.95)])
    second = dreamer.run(apply=True, write_files=False)
    assert any(kept in (m["id"], *(o["id"] for o in m["merged"])) for m in second.results[0].merged)
    before = dump(store)
    with pytest.raises(ValidationError, match=f"later run {second.run_id}") as err:
        dreamer.undo(first.run_id)
    assert "\n" not in str(err.value)
    assert dump(store) == before  # nothing was put back
    dreamer.undo(second.run_id)  # newest first: then the older one may go
    dreamer.undo(first.run_id)
    for m in ("dup-a", "dup-b", "dup-c", "dup-new"):
        assert store.get(m)["valid_until"] is None, m
        assert "merged into" not in (store.get(m)["invalidation_reason"] or "")


def test_undo_of_an_independent_older_run_keeps_the_later_clock(store: MemoryStore) -> None:
    seed(store)
    dreamer = Dreamer(store, config())
    first = dreamer.run(apply=True, write_files=False)
    second = dreamer.run(apply=True, write_files=False)  # nothing new: only its clocks
    assert _state(store, "last_run_at") == second.started_at
    dreamer.undo(first.run_id)
    assert _state(store, "last_run_at") == second.started_at  # not put back under it


def test_cli_undo_refusal_is_one_line_naming_the_later_run(llmem_home: Path) -> None:
    db = llmem_home / "memory.db"
    with MemoryStore(db) as st:
        seed(st)
        dreamer = Dreamer(st, config())
        first = dreamer.run(apply=True, write_files=False)
        kept = first.results[0].merged[0]["id"]
        st.import_memories([mem("dup-new", st.get(kept)["content"] + " ", 0, confidence=0.95)])
        second = dreamer.run(apply=True, write_files=False)
    code, _, err = _finish(_cli("dream", "--undo", first.run_id))
    assert code == 2 and err.count("\n") == 1
    assert f"later run {second.run_id}" in err and f"--undo {second.run_id}" in err
