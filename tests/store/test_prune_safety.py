"""Issue 9, defect 13: `prune --before 2099-01-01` deleted every live memory unasked.

Now a bulk delete shows what goes, asks y/N on a terminal (a real pty here), needs
--yes otherwise, and writes an importable backup of exactly what it deletes, 0600 in a
0700 folder, before deleting anything.
"""

from __future__ import annotations

import json
import os
import pty
import select
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from llmem_hooks.store import MemoryStore

CLI = [sys.executable, "-m", "llmem_hooks.cli"]


def ids(db: Path) -> list[str]:
    conn = sqlite3.connect(db)
    try:
        return sorted(r[0] for r in conn.execute("SELECT id FROM memories"))
    finally:
        conn.close()


@pytest.fixture
def db(llmem_home: Path) -> Path:
    """Three live memories and one expired one in the CLI's default database."""
    path = llmem_home / "memory.db"
    with MemoryStore(path) as st:
        for i in range(3):
            st.add("fact", f"live memory number {i} about the deploy", id=f"live-{i}")
        st.add("fact", "an expired note", id="old-1", expires_at="2001-01-01T00:00:00Z")
    return path


def run(*args: str, stdin: int | None = subprocess.DEVNULL) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, timeout=30, stdin=stdin, env=os.environ
    )


def backups(home: Path) -> list[Path]:
    folder = home / "backups"
    return sorted(folder.glob("prune-*.json")) if folder.exists() else []


def test_prune_without_a_tty_and_without_yes_deletes_nothing(db: Path, llmem_home: Path) -> None:
    before = ids(db)
    r = run("prune", "--before", "2099-01-01")
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == [
        "error: prune would delete 4 memories; rerun with --yes to confirm "
        "(or --dry-run to list them)"
    ]
    assert ids(db) == before
    assert backups(llmem_home) == []


def test_prune_with_yes_writes_an_importable_backup_first(db: Path, llmem_home: Path) -> None:
    r = run("prune", "--before", "2099-01-01", "--yes", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["count"] == 4 and sorted(out["ids"]) == ["live-0", "live-1", "live-2", "old-1"]
    assert ids(db) == []
    (backup,) = backups(llmem_home)
    assert out["backup"] == str(backup)
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600
    assert stat.S_IMODE(backup.parent.stat().st_mode) == 0o700
    saved = json.loads(backup.read_text(encoding="utf-8"))
    assert sorted(m["id"] for m in saved["memories"]) == out["ids"]

    # The backup restores exactly what was deleted.
    r = run("import", str(backup))
    assert r.returncode == 0, r.stderr
    assert ids(db) == ["live-0", "live-1", "live-2", "old-1"]


def test_plain_prune_only_takes_expired_and_backs_them_up(db: Path, llmem_home: Path) -> None:
    r = run("prune", "--yes")
    assert r.returncode == 0, r.stderr
    assert ids(db) == ["live-0", "live-1", "live-2"]
    (backup,) = backups(llmem_home)
    assert [m["id"] for m in json.loads(backup.read_text())["memories"]] == ["old-1"]


def test_dry_run_needs_no_confirmation_and_changes_nothing(db: Path, llmem_home: Path) -> None:
    before = ids(db)
    r = run("prune", "--before", "2099-01-01", "--dry-run")
    assert r.returncode == 0
    assert r.stderr.strip() == "would delete 4 memories"
    assert ids(db) == before and backups(llmem_home) == []


def pty_run(args: list[str], answer: bytes) -> tuple[int, str]:
    """Run the CLI with stdin/stdout/stderr on a real pseudo-terminal; answer the prompt."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [*CLI, *args], stdin=slave, stdout=slave, stderr=slave, env=os.environ, close_fds=True
    )
    os.close(slave)
    seen = b""
    answered = False
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 4096)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not chunk:
                    break
                seen += chunk
                if not answered and b"[y/N]" in seen:
                    os.write(master, answer)
                    answered = True
            elif proc.poll() is not None:
                break
        code = proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    return code, seen.decode("utf-8", "replace")


def test_tty_prompt_no_keeps_everything(db: Path, llmem_home: Path) -> None:
    before = ids(db)
    code, screen = pty_run(["prune", "--before", "2099-01-01"], b"n\n")
    assert "[y/N]" in screen and "delete these 4 memories" in screen
    assert "live-0"[:8] in screen  # the preview shows what would go
    assert "nothing deleted" in screen
    assert code == 1
    assert ids(db) == before and backups(llmem_home) == []


def test_tty_prompt_enter_defaults_to_no(db: Path, llmem_home: Path) -> None:
    before = ids(db)
    code, _ = pty_run(["prune", "--before", "2099-01-01"], b"\n")
    assert code == 1 and ids(db) == before


def test_tty_prompt_yes_deletes_after_backup(db: Path, llmem_home: Path) -> None:
    code, screen = pty_run(["prune", "--before", "2099-01-01"], b"y\n")
    assert code == 0, screen
    assert "deleted 4 memories; backup: " in screen
    assert ids(db) == []
    assert len(backups(llmem_home)) == 1


def test_long_preview_is_cut_to_a_few_lines(llmem_home: Path) -> None:
    with MemoryStore(llmem_home / "memory.db") as st:
        for i in range(12):
            st.add("fact", f"bulk memory {i} for the preview", id=f"bulk-{i:02d}")
    code, screen = pty_run(["prune", "--before", "2099-01-01"], b"n\n")
    assert code == 1
    assert "... and 7 more" in screen
    assert screen.count("bulk memory") == 5


def test_backup_folder_that_is_a_symlink_is_refused(
    db: Path, llmem_home: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (llmem_home / "backups").symlink_to(elsewhere)
    before = ids(db)
    r = run("prune", "--before", "2099-01-01", "--yes")
    assert r.returncode == 2 and "not a plain folder" in r.stderr
    assert ids(db) == before  # no backup, no delete
    assert list(elsewhere.iterdir()) == []


def test_prune_deletes_only_the_previewed_ids(db: Path, llmem_home: Path) -> None:
    """A memory that matches after the preview (the store's only_ids) is not deleted."""
    with MemoryStore(db) as st:
        doomed = [m["id"] for m in st.prune(before="2099-01-01", dry_run=True)]
        st.add("fact", "added between preview and delete", id="late-1")
        gone = st.prune(before="2099-01-01", only_ids=doomed)
    assert sorted(m["id"] for m in gone) == sorted(doomed)
    assert ids(db) == ["late-1"]
