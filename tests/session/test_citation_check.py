"""`session.citation_check`: a project's citations checked against a real git repository
with real commits, and the verdicts recorded in a real SQLite store."""

from __future__ import annotations

import multiprocessing
import sqlite3
from pathlib import Path

from support.git_repo import CITED, LIMIT, commit, git, make_repo, remember

from llmem_hooks.evidence.check import CheckResult
from llmem_hooks.project import project_key
from llmem_hooks.session.citation_check import check_project
from llmem_hooks.store import MemoryStore
from llmem_hooks.store import citations as cited


def _check(st: MemoryStore, repo: Path, total_s: float = 30.0):  # type: ignore[no-untyped-def]
    return check_project(st, project_key(repo), repo, total_s=total_s, per_citation_s=5.0)


def test_the_five_commits(tmp_path: Path) -> None:
    """(a) unchanged, (b) moved 40 lines down, (c) renamed with git mv, (d) the cited line
    changed, (e) the file deleted -> valid / valid+updated / valid+updated / stale (with
    the commit that changed it) / stale."""
    repo = make_repo(tmp_path / "repo")
    with MemoryStore(tmp_path / "m.db") as st:
        mid = remember(st, repo)

        (repo / "README.md").write_text("demo, unrelated change\n")
        commit(repo, "a: leave the cited lines alone")
        done = _check(st, repo)
        assert [(r.status, r.moved_to) for r in done.results] == [("valid", None)]
        (row,) = cited.of_memory(st.db, mid)
        assert (row.status, row.spec(), row.stale_since) == ("valid", f"{CITED}:21", None)
        assert row.checked_at and row.check_ms is not None

        text = (repo / CITED).read_text()
        (repo / CITED).write_text("".join(f"# pad {i}\n" for i in range(40)) + text)
        commit(repo, "b: move them 40 lines down")
        done = _check(st, repo)
        assert [(r.status, r.moved_to) for r in done.results] == [("valid", f"{CITED}:61")]
        assert cited.of_memory(st.db, mid)[0].spec() == f"{CITED}:61"

        git(repo, "mv", CITED, "src/net/policy.py")
        commit(repo, "c: rename the file")
        done = _check(st, repo)
        assert [(r.status, r.moved_to) for r in done.results] == [("valid", "src/net/policy.py:61")]
        assert cited.state(st.db, mid) == "valid"

        policy = repo / "src/net/policy.py"
        policy.write_text(policy.read_text().replace(LIMIT, "MAX_RETRIES = 9  # more\n"))
        changed = commit(repo, "d: change the cited line")
        done = _check(st, repo)
        assert [(r.status, r.changed_by) for r in done.results] == [("stale", changed)]
        (row,) = cited.of_memory(st.db, mid)
        assert (row.status, row.changed_by, row.spec()) == (
            "stale",
            changed,
            "src/net/policy.py:61",
        )
        assert row.stale_since == row.checked_at
        first_stale = row.stale_since
        assert cited.state(st.db, mid) == "stale"

        git(repo, "rm", "-q", "src/net/policy.py")
        deleted = commit(repo, "e: delete the file")
        done = _check(st, repo)
        assert [(r.status, r.changed_by) for r in done.results] == [("stale", deleted)]
        (row,) = cited.of_memory(st.db, mid)
        assert row.status == "stale" and row.stale_since == first_stale  # stale since (d)
        assert "deleted" in (row.reason or "")


def test_valid_again_clears_stale_since(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    with MemoryStore(tmp_path / "m.db") as st:
        mid = remember(st, repo)
        original = (repo / CITED).read_text()
        (repo / CITED).write_text(original.replace(LIMIT, "MAX_RETRIES = 7\n"))  # not committed
        assert [r.status for r in _check(st, repo).results] == ["stale"]
        assert cited.of_memory(st.db, mid)[0].stale_since is not None
        (repo / CITED).write_text(original)
        assert [r.status for r in _check(st, repo).results] == ["valid"]
        row = cited.of_memory(st.db, mid)[0]
        assert (row.status, row.stale_since) == ("valid", None)


def test_unknown_keeps_the_verdict_and_notes_the_attempt(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    with MemoryStore(tmp_path / "m.db") as st:
        mid = remember(st, repo)
        (repo / CITED).write_text("changed\n" * 80)
        _check(st, repo)
        before = cited.of_memory(st.db, mid)[0]
        assert before.status == "stale"
        unknown = CheckResult("unknown", None, "could not decide within the time budget", None, 1.0)
        assert cited.record_results(
            st.db, [(before, unknown)], "2030-01-01T00:00:00.000000+00:00"
        ) == [True]
        after = cited.of_memory(st.db, mid)[0]
        kept = ("status", "reason", "checked_at", "stale_since", "changed_by")
        assert [getattr(after, k) for k in kept] == [getattr(before, k) for k in kept]
        assert after.tried_at == "2030-01-01T00:00:00.000000+00:00"
        assert after.tried_note == "could not decide within the time budget"
        # and the next real verdict clears the note
        _check(st, repo)
        assert cited.of_memory(st.db, mid)[0].tried_note is None


def test_a_result_from_an_old_read_is_not_written_over_a_changed_row(tmp_path: Path) -> None:
    """Two checks (or a check and a fix) at once: a result is recorded only if the row is
    still as it was read."""
    repo = make_repo(tmp_path / "repo")
    with MemoryStore(tmp_path / "m.db") as st:
        mid = remember(st, repo)
        read = cited.of_memory(st.db, mid)[0]
        fixed = read.citation()
        from dataclasses import replace

        assert cited.record_check(
            st.db, read.id, "valid", updated=replace(fixed, line_start=1, line_end=1)
        )
        late = CheckResult("stale", None, "the cited text is no longer in the file", None, 1.0)
        assert cited.record_results(st.db, [(read, late)]) == [False]
        row = cited.of_memory(st.db, mid)[0]
        assert (row.status, row.spec()) == ("valid", f"{CITED}:1")


def test_global_memories_are_checked_only_where_their_commit_is(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    other = make_repo(tmp_path / "other")
    (other / "extra.txt").write_text("x\n")
    commit(other, "another history")
    with MemoryStore(tmp_path / "m.db") as st:
        here = remember(st, repo, "global, cited here", project=None)
        there = remember(st, other, "global, cited in another repository", project=None)
        done = _check(st, repo)
        assert [r.memory_id for r in done.results] == [here]
        assert done.skipped_global == 1
        assert cited.of_memory(st.db, there)[0].status == "unchecked"


def test_oldest_checked_first_within_a_budget(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    with MemoryStore(tmp_path / "m.db") as st:
        a = remember(st, repo, "first")
        b = remember(st, repo, "second", f"{CITED}:1-2")
        _check(st, repo)
        key = project_key(repo)
        st.conn.execute(
            "UPDATE citations SET checked_at = ? WHERE memory_id = ?",
            ("2000-01-01T00:00:00.000000+00:00", b),
        )
        assert [r.memory_id for r, _ in cited.to_check(st.db, key)] == [b, a]


def _check_in_process(db: str, repo: str, out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    with MemoryStore(db) as st:
        done = check_project(
            st, project_key(Path(repo)), Path(repo), total_s=30.0, per_citation_s=5.0
        )
        out.put((done.busy, len(done.results)))


def test_two_checks_of_one_project_at_once_leave_consistent_rows(tmp_path: Path) -> None:
    """Two processes check one project at once: the lock makes them take turns, and every
    row ends as one check wrote it (moved once, not twice; no row lost or doubled)."""
    repo = make_repo(tmp_path / "repo")
    db = tmp_path / "m.db"
    with MemoryStore(db) as st:
        ids = [remember(st, repo, f"memory {i}", f"{CITED}:{i + 1}-{i + 3}") for i in range(40)]
    text = (repo / CITED).read_text()
    (repo / CITED).write_text("# moved down\n" * 7 + text)
    commit(repo, "move")
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    procs = [
        ctx.Process(target=_check_in_process, args=(str(db), str(repo), out)) for _ in range(2)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    results = sorted(out.get(timeout=5) for _ in procs)
    assert results == [(False, 40), (False, 40)]
    conn = sqlite3.connect(db)
    rows = conn.execute(
        "SELECT memory_id, line_start, line_end, status FROM citations ORDER BY id"
    ).fetchall()
    conn.close()
    assert [r[0] for r in rows] == ids
    assert [(r[1], r[2], r[3]) for r in rows] == [(i + 8, i + 10, "valid") for i in range(40)]
