"""The dream cycle's citation step: every project checked against its latest session
directory, memories stale longer than ``citations.retire_stale_days`` retired (shown in the
dry run, undone by ``dream --undo``)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from support.git_repo import CITED, LIMIT, commit, git, make_repo, remember

from llmem_hooks.config import DEFAULT_CONFIG
from llmem_hooks.dream.cycle import Dreamer
from llmem_hooks.project import project_key
from llmem_hooks.store import MemoryStore
from llmem_hooks.store import citations as cited
from llmem_hooks.store import sessions as session_state

LONG_AGO = "2020-01-01T00:00:00.000000+00:00"


def config(**citations: Any) -> dict[str, Any]:
    cfg = {k: dict(v) for k, v in DEFAULT_CONFIG.items()}
    cfg["citations"].update(citations)
    return cfg


def _setup(st: MemoryStore, tmp_path: Path) -> tuple[Path, str, str]:
    """A memory citing a line a later commit changed, and a session of its project."""
    repo = make_repo(tmp_path / "repo")
    stale = remember(st, repo)
    fine = remember(st, repo, "the first helper returns 0", f"{CITED}:1-2")
    (repo / CITED).write_text((repo / CITED).read_text().replace(LIMIT, "MAX_RETRIES = 2\n"))
    commit(repo, "change the limit")
    session_state.save(
        st.db,
        session_state.SessionRecord(
            "copilot", "s1", project_key(repo), str(repo), last_activity_ms=1
        ),
    )
    return repo, stale, fine


def _retired(st: MemoryStore, mid: str) -> bool:
    (row,) = st.conn.execute("SELECT valid_until FROM memories WHERE id = ?", (mid,)).fetchall()
    return row[0] is not None


def test_retires_after_the_configured_days_and_undo_brings_it_back(
    tmp_path: Path, llmem_home: Path
) -> None:
    with MemoryStore(tmp_path / "m.db") as st:
        _, stale, fine = _setup(st, tmp_path)
        first = Dreamer(st, config(retire_stale_days=30)).run(["light"], apply=True)
        light = first.results[0]
        assert light.retired == []  # stale since just now: not yet
        assert any("1 valid, 1 stale" in n for n in light.notes), light.notes
        assert cited.of_memory(st.db, stale)[0].status == "stale"
        assert cited.of_memory(st.db, fine)[0].status == "valid"

        st.conn.execute(
            "UPDATE citations SET stale_since = ? WHERE memory_id = ?", (LONG_AGO, stale)
        )
        plan = Dreamer(st, config(retire_stale_days=30)).run(["light"], apply=False)
        assert plan.counts()["light"]["retired"] == 1
        assert [r["id"] for r in plan.results[0].retired] == [stale]
        assert not _retired(st, stale)  # a dry run writes nothing

        run = Dreamer(st, config(retire_stale_days=30)).run(["light"], apply=True)
        assert run.counts()["light"]["retired"] == 1
        (item,) = run.results[0].retired
        assert (item["reason"], item["stale_since"], item["citation"]) == (
            "stale",
            LONG_AGO,
            f"{CITED}:21",
        )
        assert _retired(st, stale) and not _retired(st, fine)
        assert run.report is not None and "stale since" in run.report.read_text()

        Dreamer(st, config()).undo(run.run_id)
        assert not _retired(st, stale)


def test_zero_days_never_retires_and_check_false_does_nothing(tmp_path: Path) -> None:
    with MemoryStore(tmp_path / "m.db") as st:
        _, stale, _ = _setup(st, tmp_path)
        Dreamer(st, config(retire_stale_days=0)).run(["light"], apply=True, write_files=False)
        st.conn.execute(
            "UPDATE citations SET stale_since = ? WHERE memory_id = ?", (LONG_AGO, stale)
        )
        run = Dreamer(st, config(retire_stale_days=0)).run(["light"], apply=True, write_files=False)
        assert run.results[0].retired == [] and not _retired(st, stale)

        off = Dreamer(st, config(check=False, retire_stale_days=1)).run(
            ["light"], apply=True, write_files=False
        )
        assert off.results[0].retired == []
        assert "citations: not checked (citations.check is off)" in off.results[0].notes


def test_a_project_without_a_session_directory_is_skipped_and_said(tmp_path: Path) -> None:
    with MemoryStore(tmp_path / "m.db") as st:
        repo, stale, _ = _setup(st, tmp_path)
        shutil.rmtree(repo)
        run = Dreamer(st, config()).run(["light"], apply=True, write_files=False)
        notes = run.results[0].notes
        assert any("not checked (no session directory of it exists here)" in n for n in notes)
        assert cited.of_memory(st.db, stale)[0].status == "unchecked"


def test_a_memory_learned_on_an_unmerged_branch_is_never_retired(
    tmp_path: Path, llmem_home: Path
) -> None:
    """Stale on main (its file is only on the feature branch), kept by the dream however
    long; valid again back on the branch. A memory stale on its own line of history is
    retired as before."""
    repo = make_repo(tmp_path / "repo")
    git(repo, "checkout", "-q", "-b", "feature")
    (repo / "src" / "flags.py").write_text("FEATURE_FLAG_LIMIT = 7\n")
    commit(repo, "feature flags")
    with MemoryStore(tmp_path / "m.db") as st:
        on_branch = remember(st, repo, "the flag limit is FEATURE_FLAG_LIMIT", "src/flags.py:1")
        git(repo, "checkout", "-q", "main")
        changed = remember(st, repo)  # learned on main; then main changes the line
        (repo / CITED).write_text((repo / CITED).read_text().replace(LIMIT, "MAX_RETRIES = 2\n"))
        commit(repo, "change the limit")
        session_state.save(
            st.db,
            session_state.SessionRecord(
                "copilot", "s1", project_key(repo), str(repo), last_activity_ms=1
            ),
        )
        Dreamer(st, config(retire_stale_days=30)).run(["light"], apply=True)
        assert cited.of_memory(st.db, on_branch)[0].status == "stale"  # not here
        assert cited.of_memory(st.db, changed)[0].status == "stale"
        st.conn.execute("UPDATE citations SET stale_since = ?", (LONG_AGO,))
        run = Dreamer(st, config(retire_stale_days=30)).run(["light"], apply=True)
        assert [r["id"] for r in run.results[0].retired] == [changed]
        assert any("learned on a branch not merged" in n for n in run.results[0].notes)
        assert not _retired(st, on_branch) and _retired(st, changed)

        git(repo, "checkout", "-q", "feature")  # back on its branch: it holds again
        Dreamer(st, config(retire_stale_days=30)).run(["light"], apply=True)
        assert cited.of_memory(st.db, on_branch)[0].status == "valid"
