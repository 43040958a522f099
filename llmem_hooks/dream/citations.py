"""The dream cycle's citation step (light phase): check every project's citations, then
retire the memories stale for longer than ``citations.retire_stale_days`` (docs/dream.md).

A project is checked against the most recent directory of its sessions that still exists
and is in the same repository (its project key); a project with none is skipped and the
run's notes say so. Retiring is the dream's usual soft retirement (`store.dream.
retire_memories`, logged with the old values), so ``dream --undo RUN`` brings the memory
back; its citations stay stale, so unless they are fixed or confirmed meanwhile the next
run retires it again. The checks themselves are observations of the working tree, written
as the sidecar's are (not dream changes: an undo does not put an old verdict back).
``citations.check: false`` turns the step off (no check, no retiring).

Branches: a memory is retired only when every stale citation's commit is in the history
of the checkout it was judged against (``git merge-base --is-ancestor``). A memory learned
on a branch not merged here is stale *here* (left out of this checkout's sessions) but kept:
back on its branch its citations check out again. Nothing is thrown away because a
branch changed; when git cannot tell, the memory is kept.
"""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from ..evidence.cite import repo_root
from ..project import git_output, project_key, project_label
from ..session.citation_check import check_project
from ..store import citations as cited
from ..store import dream as book
from ..store import projects
from ..timestamps import to_iso

if TYPE_CHECKING:
    from .cycle import Dreamer, DreamResult

_HEX = re.compile(r"[0-9a-f]{7,64}")
PROJECT_BUDGET_S = 30.0  # at least this long per project (more if a session start may)


def project_root(dreamer: Dreamer, project: str) -> Path | None:
    """The top of the repository of the most recent session directory of ``project`` that
    still exists and has that project key (None: no such directory here)."""
    for directory in cited.session_directories(dreamer.store.db, project):
        path = Path(directory)
        if not path.is_dir():
            continue
        root = repo_root(path)
        if root is not None and project_key(root) == project:
            return root
    return None


def check_and_retire(dreamer: Dreamer, result: DreamResult) -> None:
    """Check each cited project's citations, then retire what has been stale too long."""
    settings = dreamer.config.citations
    if not settings.check:
        result.notes.append("citations: not checked (citations.check is off)")
        return
    names = projects.display_names(dreamer.store.db)
    budget = max(PROJECT_BUDGET_S, settings.start_budget_seconds)
    roots: dict[str, Path] = {}
    for project in cited.cited_projects(dreamer.store.db):
        label = project_label(project, names)
        root = project_root(dreamer, project)
        if root is None:
            result.notes.append(
                f"citations of {label}: not checked (no session directory of it exists here)"
            )
            continue
        roots[project] = root
        done = check_project(
            dreamer.store,
            project,
            root,
            total_s=budget,
            per_citation_s=settings.per_citation_seconds,
        )
        result.notes.append(f"citations of {label}: " + done.line().split(": ", 1)[1])
    days = settings.retire_stale_days
    if days <= 0:
        return
    found = cited.stale_memories(dreamer.store.db, to_iso(dreamer.now() - timedelta(days=days)))
    rows = book.memory_rows(dreamer.store, [m["id"] for m in found]) if found else {}
    elsewhere = _off_branch(dreamer, found, rows, roots)
    if elsewhere:
        result.notes.append(
            f"citations: {len(elsewhere)} stale memory(ies) kept: learned on a branch not"
            " merged into the checkout they were judged against"
        )
        found = [m for m in found if m["id"] not in elsewhere]
    for m in found:
        row = rows.get(m["id"]) or {}
        result.retired.append(
            {"id": m["id"], "reason": "stale", "stale_since": m["stale_since"],
             "citation": m["citation"], "why": m["why"], "content": row.get("content"),
             "project": row.get("project"),
             "project_name": project_label(row.get("project"), names)}
        )  # fmt: skip
    if result.apply and found:
        book.retire_memories(
            dreamer.store, result.run_id or "", "light", "retire",
            {m["id"]: f"stale since {m['stale_since']}: {m['citation']} ({m['why']})"[:500]
             for m in found},
        )  # fmt: skip


def _off_branch(
    dreamer: Dreamer,
    found: list[dict[str, object]],
    rows: dict[str, dict[str, object]],
    roots: dict[str, Path],
) -> set[str]:
    """The ids among ``found`` with a stale citation whose commit is not (or not known to
    be) in the history of HEAD of their project's checkout: one git call per commit."""
    answers: dict[tuple[Path, str], bool] = {}
    out: set[str] = set()
    for m in found:
        mid = str(m["id"])
        project = (rows.get(mid) or {}).get("project")
        root = roots.get(project) if isinstance(project, str) else None
        for c in cited.of_memory(dreamer.store.db, mid):
            if c.status != "stale" or not c.commit or not _HEX.fullmatch(c.commit):
                continue
            if root is None:
                out.add(mid)
                break
            key = (root, c.commit)
            if key not in answers:
                answers[key] = (
                    git_output(root, "merge-base", "--is-ancestor", c.commit, "HEAD") is not None
                )
            if not answers[key]:
                out.add(mid)
                break
    return out
