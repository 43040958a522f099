"""Checking one project's cited memories against a repository, and recording what was found.

The sidecar runs it when a session starts in a project (before that session's context file
is written, `StartChecks`), the dream cycle for every project (`dream.citations`) and
``llmem-hooks citations check`` on demand; never an agent's hook. The checking itself is
`evidence.check.check_many` (read-only, within a budget); the rows are written by
`store.citations.record_results` (an 'unknown' keeps the verdict before it).

Which citations: those of the project's live memories, the longest undecided first, and
those of global memories whose citation commit is a commit of this repository (a global
memory has no repository of its own: a citation made in another one is never judged
here). At most one check of a project at a time per database: an flock on a file beside
the database (``<database>.citecheck/<hash of the project>.lock``), so the sidecar, the
dream cycle and the CLI never check one project at once (a second one waits within its
budget, then gives up); the kernel drops the lock of a process killed mid-check.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..evidence.check import check_many
from ..evidence.cite import head_commit, repo_root
from ..project import project_key
from ..store import citations as cited
from ..timestamps import now_iso

if TYPE_CHECKING:
    from ..config import CitationSettings
    from ..store import MemoryStore
    from ..store.sessions import SessionRecord

log = logging.getLogger(__name__)

RECHECK_S = 2.0  # a project checked this recently is not checked again at a session start
LOCK_POLL_S = 0.05
_HEX = frozenset("0123456789abcdef")


@dataclass(frozen=True)
class Checked:
    """One citation's check, as recorded (or not: `recorded` False when the row changed
    while it was checked, or the memory went)."""

    memory_id: str
    spec: str
    status: str  # valid | stale | unknown
    reason: str
    changed_by: str | None
    moved_to: str | None  # the citation's new spec when the check moved it
    recorded: bool

    def as_dict(self) -> dict[str, Any]:
        return {
            "spec": self.spec,
            "status": self.status,
            "reason": self.reason,
            "changed_by": self.changed_by,
            "moved_to": self.moved_to,
            "recorded": self.recorded,
        }


@dataclass
class ProjectCheck:
    """What one check of a project did."""

    project: str
    root: str
    results: list[Checked] = field(default_factory=list)
    skipped_global: int = 0  # global memories' citations made in another repository
    busy: bool = False  # another check of the project held it for the whole budget
    seconds: float = 0.0

    def counts(self) -> dict[str, int]:
        out = {"valid": 0, "stale": 0, "unknown": 0}
        for r in self.results:
            out[r.status] = out.get(r.status, 0) + 1
        return out

    def line(self) -> str:
        """One line for a log or a report."""
        if self.busy:
            return f"project {self.project[:12]}: another check of it is running; skipped"
        c = self.counts()
        return (
            f"project {self.project[:12]}: {len(self.results)} citations checked against"
            f" {self.root}: {c['valid']} valid, {c['stale']} stale, {c['unknown']} unknown"
            f" in {self.seconds:.2f} s"
        )


def lock_file(store: MemoryStore, project: str) -> Path | None:
    """The file whose flock says a check of ``project`` runs (None: an in-memory store)."""
    db = str(store.db_path)
    if db == ":memory:" or db.startswith("file:"):
        return None
    folder = Path(os.path.realpath(db) + ".citecheck")
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder / (hashlib.sha256(project.encode()).hexdigest()[:24] + ".lock")


@contextlib.contextmanager
def _one_check(store: MemoryStore, project: str, wait_s: float) -> Iterator[bool]:
    """Hold the project's check lock (yields False if it could not be had in ``wait_s``)."""
    path = lock_file(store, project)
    if path is None:
        yield True
        return
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags, 0o600)
    try:
        deadline = time.monotonic() + max(0.0, wait_s)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    yield False
                    return
                time.sleep(LOCK_POLL_S)
        yield True
    finally:
        os.close(fd)  # closing drops the flock


def _commits_here(root: Path, commits: set[str], timeout: float) -> set[str]:
    """Which of ``commits`` (hexadecimal) are commits of the repository at ``root``: one
    ``git cat-file --batch-check`` (nothing on a failure or past ``timeout``)."""
    wanted = sorted(c for c in commits if c and set(c) <= _HEX and 7 <= len(c) <= 64)
    if not wanted or timeout <= 0:
        return set()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_OPTIONAL_LOCKS="0", GIT_TERMINAL_PROMPT="0", LC_ALL="C")
    try:
        out = subprocess.run(
            ["git", "--no-optional-locks", "cat-file", "--batch-check=%(objecttype)"],
            cwd=root,
            input="".join(f"{c}\n" for c in wanted).encode(),
            capture_output=True,
            timeout=timeout,
            check=False,
            env=env,
        )
    except (OSError, subprocess.SubprocessError):
        return set()
    answers = out.stdout.decode("utf-8", "replace").splitlines()
    if out.returncode != 0 or len(answers) != len(wanted):
        return set()
    return {c for c, a in zip(wanted, answers, strict=True) if a.strip() == "commit"}


def check_project(
    store: MemoryStore,
    project: str,
    root: Path,
    *,
    total_s: float,
    per_citation_s: float,
    with_global: bool = True,
) -> ProjectCheck:
    """Check ``project``'s cited memories against the working tree at ``root`` (the top
    of its repository) within ``total_s`` seconds (``per_citation_s`` each; those past the
    total are 'unknown'), and record the results."""
    t0 = time.monotonic()
    out = ProjectCheck(project, str(root))
    with _one_check(store, project, total_s) as held:
        if not held:
            out.busy = True
            out.seconds = time.monotonic() - t0
            return out
        rows = cited.to_check(store.db, project, with_global=with_global)
        global_commits = {r.commit for r, p in rows if p is None and r.commit}
        left = total_s - (time.monotonic() - t0)
        here = _commits_here(root, global_commits, left * 0.25) if global_commits else set()
        picked = [r for r, p in rows if p is not None or (r.commit and r.commit in here)]
        out.skipped_global = len(rows) - len(picked)
        left = max(0.0, total_s - (time.monotonic() - t0))
        found = check_many(root, [r.citation() for r in picked], per_citation_s, total_s=left)
        if any(r.updated is not None for r in found):
            # a moved citation is as seen now: its commit becomes HEAD, so the next check
            # follows the file's history from its new path and lines
            head = head_commit(root)
            if head:
                found = [
                    replace(r, updated=replace(r.updated, commit=head)) if r.updated else r
                    for r in found
                ]
        pairs = list(zip(picked, found, strict=True))
        written = cited.record_results(store.db, pairs, now_iso())
        for (row, res), recorded in zip(pairs, written, strict=True):
            moved = res.updated.spec() if res.updated is not None else None
            by = res.changed_by
            out.results.append(
                Checked(row.memory_id, row.spec(), res.status, res.reason, by, moved, recorded)
            )
    out.seconds = time.monotonic() - t0
    return out


class StartChecks:
    """The sidecar's check at a session start: the session's project against the
    repository of its directory, once per project within `RECHECK_S` unless a commit
    came in between (two sessions starting together cost one check), within
    ``citations.start_budget_seconds``."""

    def __init__(self, store: MemoryStore, settings: CitationSettings) -> None:
        self.store = store
        self.settings = settings
        # project -> (monotonic time, HEAD) of its last check
        self._last: dict[str, tuple[float, str | None]] = {}

    def before_context(self, rec: SessionRecord | None) -> ProjectCheck | None:
        """Check the project of session ``rec`` if it is due (None: not due, off, no
        project, not in a git repository, or one whose key is not the session's)."""
        if not self.settings.check or rec is None or not rec.project or not rec.directory:
            return None
        last = self._last.get(rec.project)
        recent = last is not None and time.monotonic() - last[0] < RECHECK_S
        if not cited.any_to_check(self.store.db, rec.project):
            return None
        t0 = time.monotonic()
        budget = self.settings.start_budget_seconds
        directory = Path(rec.directory)
        if not directory.is_dir():
            return None
        root = repo_root(directory)
        # the directory's key: what `track` computed for a Copilot session (cached)
        if root is None or project_key(directory) != rec.project:
            return None
        # Checked moments ago: again only if a commit came in between (a person commits and
        # starts a session at once; the verdicts must be about that commit).
        head = head_commit(root)
        if recent and last is not None and last[1] == head:
            return None
        left = budget - (time.monotonic() - t0)
        if left <= 0:
            log.info("citations: project %s not checked: finding its repository took the budget",
                     rec.project[:12])  # fmt: skip
            return None
        self._last[rec.project] = (time.monotonic(), head)
        return check_project(
            self.store,
            rec.project,
            root,
            total_s=left,
            per_citation_s=self.settings.per_citation_seconds,
        )
