"""The dream plan's private copy of the database (`store.snapshot`): page for page, 0600
in a 0700 folder beside the store, removed after; a copy left by a process killed with
-9 is removed by the next one, a live process's copy is not."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

from llmem_hooks import MemoryStore
from llmem_hooks.store.snapshot import PREFIX, discard_copy, private_copy


def _copies(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.name.startswith(PREFIX))


def test_the_copy_is_private_page_for_page_and_removed(tmp_path: Path) -> None:
    with MemoryStore(tmp_path / "memory.db") as st:
        mid = st.add("fact", "The ledger listens on port 5433.", project="p")
        copy = private_copy(st)
        assert copy is not None
        try:
            (folder,) = _copies(tmp_path)
            assert stat.S_IMODE(folder.stat().st_mode) == 0o700
            for f in folder.iterdir():
                assert stat.S_IMODE(f.stat().st_mode) == 0o600, f
            assert copy.get(mid)["content"] == "The ledger listens on port 5433."
            pages = [s.conn.execute("PRAGMA page_count").fetchone()[0] for s in (st, copy)]
            assert pages[0] == pages[1]
            copy.invalidate(mid, "only in the copy")
            assert st.get(mid)["valid_until"] is None
        finally:
            discard_copy(copy)
        assert _copies(tmp_path) == []


def test_a_copy_left_by_kill_9_is_swept_and_a_live_ones_kept(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    with MemoryStore(db) as st:
        st.add("fact", "Something to copy.", project="p")
    script = textwrap.dedent(
        f"""
        import sys, time
        from llmem_hooks import MemoryStore
        from llmem_hooks.store.snapshot import private_copy
        st = MemoryStore({str(db)!r})
        copy = private_copy(st)
        print(copy.db_path, flush=True)
        time.sleep(120)
        """
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    try:
        paths = [Path(p.stdout.readline().strip()) for p in procs]  # type: ignore[union-attr]
        assert all(p.exists() for p in paths)
        procs[0].send_signal(signal.SIGKILL)
        procs[0].wait(30)
        with MemoryStore(db) as st:
            copy = private_copy(st)  # sweeps what the dead one left
            assert copy is not None
            discard_copy(copy)
        assert not paths[0].parent.exists()
        assert paths[1].exists(), "a live process's copy is never removed"
    finally:
        for p in procs:
            if p.poll() is None:
                os.kill(p.pid, signal.SIGKILL)
            p.wait(30)
            if p.stdout:
                p.stdout.close()


def test_an_in_memory_store_has_no_copy() -> None:
    with MemoryStore(":memory:") as st:
        assert private_copy(st) is None
