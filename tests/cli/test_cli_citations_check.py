"""``llmem-hooks citations check``: the real CLI in a subprocess, in a real git repository."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from support.git_repo import CITED, LIMIT, commit, git, make_repo, remember

from llmem_hooks.store import MemoryStore
from llmem_hooks.store import citations as cited

EXE = str(Path(sys.executable).with_name("llmem-hooks"))


def _run(home: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "LLMEM_DB"}
    env["LLMEM_HOME"] = str(home)
    return subprocess.run(
        [EXE, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def test_check_prints_each_memory_and_records(llmem_home: Path, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    llmem_home.mkdir(mode=0o700, exist_ok=True)
    with MemoryStore(llmem_home / "memory.db") as st:
        stale = remember(st, repo)
        moved = remember(st, repo, "helper_0 returns 0", f"{CITED}:1-2")
        bare = st.add("fact", "we deploy on fridays never")  # no citations: not listed
    text = (repo / CITED).read_text().replace(LIMIT, "MAX_RETRIES = 1\n")
    (repo / CITED).write_text("# header\n" * 3 + text)
    changed = commit(repo, "change the limit, move everything down 3 lines")

    r = _run(llmem_home, repo / "src", "citations", "check")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert f"{stale}  stale" in lines
    assert f"{moved}  valid" in lines
    assert f"  {CITED}:1-2  valid (the cited text moved to lines 4-5) -> {CITED}:4-5" in lines
    assert any(line.startswith(f"  {CITED}:21  stale (") and changed[:12] in line for line in lines)
    assert bare not in r.stdout
    assert lines[-1].startswith("2 citations of 2 memories checked against")
    with MemoryStore(llmem_home / "memory.db") as st:
        assert cited.state(st.db, stale) == "stale"
        assert cited.of_memory(st.db, moved)[0].spec() == f"{CITED}:4-5"

    j = _run(llmem_home, repo, "citations", "check", "--json")
    assert j.returncode == 0, j.stderr
    data = json.loads(j.stdout)
    assert data["counts"] == {"valid": 1, "stale": 1, "unknown": 0}
    by_id = {m["id"]: m for m in data["memories"]}
    assert by_id[stale]["state"] == "stale"
    assert by_id[stale]["citations"][0]["changed_by"] == changed
    assert by_id[moved]["citations"][0] == {
        "spec": f"{CITED}:4-5", "status": "valid", "reason": "the cited lines are unchanged",
        "changed_by": None, "moved_to": None, "recorded": True,
    }  # fmt: skip


def test_bad_input(llmem_home: Path, tmp_path: Path) -> None:
    outside = tmp_path / "plain"
    outside.mkdir()
    r = _run(llmem_home, outside, "citations", "check")
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("error: not in a git repository")
    assert not llmem_home.exists()  # nothing read or made: no config.yaml, no database

    repo = make_repo(tmp_path / "repo")
    r = _run(llmem_home, repo, "citations", "check", "--project", "no-such-project")
    assert r.returncode == 2 and r.stderr.startswith("error: no project 'no-such-project'")
    r = _run(llmem_home, repo, "citations", "check", "--bogus")
    assert r.returncode == 2 and r.stderr.startswith("error:")


def test_a_file_name_cannot_drive_the_terminal(llmem_home: Path, tmp_path: Path) -> None:
    """A rename to a name with an escape sequence: the moved-to path is refused (the
    verdict is not recorded) and nothing raw reaches the terminal."""
    repo = make_repo(tmp_path / "repo")
    llmem_home.mkdir(mode=0o700, exist_ok=True)
    with MemoryStore(llmem_home / "memory.db") as st:
        mid = remember(st, repo)
    git(repo, "mv", CITED, "src/net/\x1b[31mred.py")
    commit(repo, "rename to a hostile name")
    r = _run(llmem_home, repo, "citations", "check")
    assert r.returncode == 0, r.stderr
    assert "\x1b" not in r.stdout
    with MemoryStore(llmem_home / "memory.db") as st:
        row = cited.of_memory(st.db, mid)[0]
    assert row.path == CITED and row.status == "unchecked"
    assert row.tried_note and "control characters" in row.tried_note
