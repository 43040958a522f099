"""The real sidecar (`llmem-hooks run`) checks a project's citations when a session
starts there, before it writes that session's context file; once for two sessions
starting together; not at all with ``citations.check: false``."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from support.git_repo import CITED, LIMIT, commit, git, make_repo, remember
from support.waiting import wait_for
from test_durability import CONFIG, Rig

from llmem_hooks import MemoryStore
from llmem_hooks.store import citations as cited


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    r = Rig(tmp_path)
    try:
        yield r
    finally:
        r.close()


def _stale_memory(rig: Rig) -> tuple[Path, str, str]:
    """A repository, a memory citing its retry limit, then a commit changing that line."""
    repo = make_repo(rig.tmp / "repo")
    with MemoryStore(rig.db_path) as st:
        mid = remember(st, repo)
    (repo / CITED).write_text((repo / CITED).read_text().replace(LIMIT, "MAX_RETRIES = 8\n"))
    return repo, mid, commit(repo, "change the retry limit")


def test_a_session_start_checks_before_the_context_file(rig: Rig) -> None:
    repo, mid, changed = _stale_memory(rig)
    first = rig.copilot.session(name="Task one", cwd=str(repo))
    second = rig.copilot.session(name="Task two", cwd=str(repo))  # at once: one check
    proc = rig.start()
    for s in (first, second):
        wait_for((rig.ctx / f"{s.id}.md").exists, what=f"the context file of {s.id}")
    assert rig.stop(proc) == 0

    with MemoryStore(rig.db_path) as st:
        (row,) = cited.of_memory(st.db, mid)
    assert (row.status, row.changed_by) == ("stale", changed)
    assert row.checked_at is not None
    log = rig.log()
    assert log.count("citations project") == 1, log  # the other session: checked moments ago
    checker = first if f"session={first.id} citations project" in log else second
    ctx = rig.ctx / f"{checker.id}.md"
    checked = datetime.fromisoformat(row.checked_at).timestamp()
    assert checked <= ctx.stat().st_mtime  # recorded before the file was written
    check_line = log.index(f"session={checker.id} citations project")
    assert check_line < log.index(f"session={checker.id} event=created result=success"), log
    assert "1 stale" in log[check_line:].splitlines()[0]


def test_citations_check_false_turns_it_off(rig: Rig) -> None:
    (rig.home / "config.yaml").write_text(CONFIG + "citations:\n  check: false\n")
    repo, mid, _ = _stale_memory(rig)
    proc = rig.start()
    s = rig.copilot.session(name="Task", cwd=str(repo))
    wait_for((rig.ctx / f"{s.id}.md").exists, what="the context file")
    assert rig.stop(proc) == 0
    with MemoryStore(rig.db_path) as st:
        assert cited.of_memory(st.db, mid)[0].status == "unchecked"
    assert "citations project" not in rig.log()


def test_a_session_outside_the_project_repository_checks_nothing(rig: Rig) -> None:
    repo, mid, _ = _stale_memory(rig)
    elsewhere = rig.tmp / "elsewhere"  # another repository (another root commit: key)
    (elsewhere / "src" / "net").mkdir(parents=True)
    (elsewhere / CITED).write_text((repo / CITED).read_text().replace("MAX_RETRIES = 8", LIMIT))
    git(elsewhere, "init", "-q")
    commit(elsewhere, "a history of its own")
    proc = rig.start()
    s = rig.copilot.session(name="Task", cwd=str(elsewhere))
    wait_for((rig.ctx / f"{s.id}.md").exists, what="the context file")
    assert rig.stop(proc) == 0
    with MemoryStore(rig.db_path) as st:
        assert cited.of_memory(st.db, mid)[0].status == "unchecked"


def test_a_check_that_cannot_run_costs_only_the_check(rig: Rig) -> None:
    """Another check holds the project for longer than the start budget: the sidecar logs
    one line and writes the context file anyway; the rows are untouched."""
    import fcntl
    import os

    from llmem_hooks.project import project_key
    from llmem_hooks.session.citation_check import lock_file

    repo, mid, _ = _stale_memory(rig)
    with MemoryStore(rig.db_path) as st:
        path = lock_file(st, project_key(repo))
    assert path is not None
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # as a running check would hold it
        proc = rig.start()
        s = rig.copilot.session(name="Task", cwd=str(repo))
        wait_for((rig.ctx / f"{s.id}.md").exists, what="the context file")
        assert rig.stop(proc) == 0
    finally:
        os.close(fd)
    log = rig.log()
    assert f"session={s.id} citations project" in log
    assert "another check of it is running; skipped" in log
    assert f"session={s.id} event=created result=success" in log
    with MemoryStore(rig.db_path) as st:
        assert cited.of_memory(st.db, mid)[0].status == "unchecked"
