"""`StartChecks`: a session start checks its project once within `RECHECK_S`, unless a
commit came in between (a person commits and starts a session at once: the verdicts must
be about that commit). Real git repository, real store."""

from __future__ import annotations

from pathlib import Path

from support.git_repo import CITED, LIMIT, commit, make_repo, remember

from llmem_hooks.config import CitationSettings
from llmem_hooks.project import project_key
from llmem_hooks.session.citation_check import StartChecks
from llmem_hooks.store import MemoryStore
from llmem_hooks.store import citations as cited
from llmem_hooks.store.sessions import SessionRecord


def test_two_starts_at_once_cost_one_check_but_a_commit_between_them_is_checked(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "repo")
    with MemoryStore(tmp_path / "m.db") as st:
        mid = remember(st, repo)
        checks = StartChecks(st, CitationSettings())
        rec = SessionRecord("opencode", "s1", project=project_key(repo), directory=str(repo))
        assert checks.before_context(rec) is not None
        assert checks.before_context(rec) is None  # moments later, nothing new: not again
        cited_file = repo / CITED
        cited_file.write_text(cited_file.read_text().replace(LIMIT, "MAX_RETRIES = 9\n"))
        changed = commit(repo, "change the cited line")
        done = checks.before_context(rec)  # still within RECHECK_S, but HEAD moved
        assert done is not None
        assert [(r.status, r.changed_by) for r in done.results] == [("stale", changed)]
        assert cited.state(st.db, mid) == "stale"
