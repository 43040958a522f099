"""Checking a citation against the working tree: valid, valid with new lines/path, or stale.

The agent sees the working tree, so that is what a citation is checked against (uncommitted
edits count; a citation made on another branch is judged by the files as they are now).
The cited lines are read first; git is asked only when they are not where they were: the
cited text as committed (``git show``) to find it moved, the renames and deletions since
the citation's commit (one ``git diff -M --name-status`` per commit, shared by a batch),
and the commit that changed or deleted it. Every git call is read-only (no optional
locks, no fsmonitor, no external diff or textconv programs), has a timeout taken from the
check's budget and runs without a shell. Without git (not a repository, git missing or
too slow) the working tree alone decides and the reason says so; a check that cannot
finish within its budget is 'unknown', never 'valid'.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import subprocess
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from ..errors import ValidationError
from .cite import MAX_LINES, Citation, check_path, normalize, text_hash

Status = Literal["valid", "stale", "unknown"]

MAX_SCAN_BYTES = 8 * 1024 * 1024  # above this, only the cited place is read (no search)
MAX_GIT_OUTPUT = 16 * 1024 * 1024  # a batch's log larger than this is asked file by file
BATCH = 300  # files asked about in one git call
GIT_SHARE = 0.6  # of what is left of a check's budget, the most one git call may take
_COMMIT = re.compile(r"[0-9a-f]{7,64}")  # only a hash reaches git's argv (never an option)
_HUNK = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_GIT_CONFIG = (
    # `git diff` against the working tree rewrites the index when a file's stat changed but
    # not its content ("racily clean", 2 runs in 40 here), --no-optional-locks or not
    "-c",
    "diff.autoRefreshIndex=false",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.untrackedCache=false",
    "-c",
    "diff.external=",
    "-c",
    "core.quotePath=false",
    "-c",
    "color.ui=false",
    "-c",
    "log.showSignature=false",
    "-c",
    "log.follow=false",
    "-c",
    "diff.interHunkContext=0",
    "--no-optional-locks",
    "--literal-pathspecs",
)


_Hunk = tuple[int, int, list[bytes], list[bytes]]  # old start, old count, removed, added
_Commit = tuple[str, list[_Hunk]]  # a commit and its hunks in one file


@dataclass(frozen=True)
class CheckResult:
    status: Status
    updated: Citation | None  # the citation as it now holds (new lines or path), if moved
    reason: str
    changed_by: str | None  # the commit that changed or deleted the cited text, if known
    ms: float


class _Clock:
    def __init__(self, budget_s: float) -> None:
        self.start = time.monotonic()
        self.deadline = self.start + max(0.0, budget_s)

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def ms(self) -> float:
        return round((time.monotonic() - self.start) * 1000, 3)


class _OutOfTime(Exception):
    """The budget ran out before the check could decide."""


@dataclass
class _Git:
    """Read-only git calls in one repository, answers kept for a batch of checks."""

    root: Path
    note: str | None = None  # why git could not help (missing, not a repository, slow)
    _changes: dict[str, dict[str, tuple[str, str | None]] | None] = field(default_factory=dict)
    _shown: dict[tuple[str, str], list[str] | None] = field(default_factory=dict)
    hints: dict[str, list[str]] = field(default_factory=dict)  # commit -> files a batch may ask
    gone: dict[str, list[str]] = field(default_factory=dict)  # commit -> files missing now
    _deleted: dict[tuple[str, str], str | None] = field(default_factory=dict)
    _history: dict[tuple[str, str], list[_Commit] | None] = field(default_factory=dict)

    def usable(self) -> bool:
        """False once git is known to be missing, too slow, or this is no repository."""
        return self.note is None or self.note.startswith("git failed")

    def run(self, args: list[str], clock: _Clock, feed: bytes | None = None) -> bytes | None:
        if not self.usable():
            return None
        left = clock.left()
        if left <= 0:
            raise _OutOfTime
        timeout = left * GIT_SHARE  # the rest of the budget decides without git if it hangs
        # no inherited GIT_DIR, GIT_INDEX_FILE... (a caller inside a git hook): root decides
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        env.update(GIT_OPTIONAL_LOCKS="0", GIT_TERMINAL_PROMPT="0", LC_ALL="C")
        try:
            out = subprocess.run(
                ["git", *_GIT_CONFIG, *args],
                cwd=self.root,
                capture_output=True,
                timeout=timeout,
                check=False,
                env=env,
                input=feed if feed is not None else b"",
            )
        except FileNotFoundError:
            self.note = "git is not installed"
            return None
        except OSError as exc:
            self.note = f"git could not run ({exc.strerror})"
            return None
        except subprocess.TimeoutExpired:
            self.note = "git was too slow"
            return None
        if out.returncode != 0:
            err = out.stderr.decode("utf-8", "replace")
            if "not a git repository" in err:
                self.note = "not a git repository"
            else:
                self.note = "git failed: " + (err.strip().splitlines() or ["?"])[0][:200]
            return None
        if self.note and self.note.startswith("git failed"):
            self.note = None
        return out.stdout

    def changes(self, commit: str, clock: _Clock) -> dict[str, tuple[str, str | None]] | None:
        """Path at ``commit`` -> (status letter, new path for a rename) up to the working
        tree (renames found by content similarity, as ``git diff -M`` does)."""
        if commit not in self._changes:
            out = self.run(
                ["diff", "--no-ext-diff", "--no-textconv", "-M", "--name-status", "-z", commit],
                clock,
            )
            parsed: dict[str, tuple[str, str | None]] | None = None
            if out is not None:
                parsed = {}
                parts = out.split(b"\x00")
                i = 0
                while i < len(parts) and parts[i]:
                    status = parts[i].decode("ascii", "replace")
                    if status[:1] in ("R", "C") and i + 2 < len(parts):
                        old, new = (
                            p.decode("utf-8", "surrogateescape") for p in parts[i + 1 : i + 3]
                        )
                        if status[:1] == "R":
                            parsed[old] = ("R", new)
                        i += 3
                    else:
                        parsed[parts[i + 1].decode("utf-8", "surrogateescape")] = (status[:1], None)
                        i += 2
            self._changes[commit] = parsed
        return self._changes[commit]

    def show(self, commit: str, path: str, clock: _Clock) -> list[str] | None:
        """The file as committed at ``commit`` (None: not there, or no git). The other
        files the batch may need at that commit come in the same call (``cat-file``)."""
        key = (commit, path)
        if key not in self._shown:
            wanted = [
                key,
                *(
                    (commit, p)
                    for p in self.hints.get(commit, ())
                    if (commit, p) not in self._shown
                ),
            ]
            wanted = list(dict.fromkeys(wanted))[:BATCH]
            feed = b"".join(f"{c}:{p}\n".encode() for c, p in wanted if "\n" not in p)
            out = self.run(["cat-file", "--batch"], clock, feed=feed)
            got = _parse_batch(out or b"", len(wanted))
            for i, item in enumerate(wanted):
                self._shown[item] = got[i] if i < len(got) else None
        return self._shown[key]

    def history(self, commit: str, path: str, clock: _Clock) -> list[_Commit] | None:
        """The commits since ``commit`` that touched ``path``, oldest first, each with its
        hunks (old start, old count, removed lines, added lines). The other files the
        batch may need since that commit come in the same call."""
        key = (commit, path)
        if key not in self._history:
            paths = [
                path,
                *(p for p in self.hints.get(commit, ()) if (commit, p) not in self._history),
            ]
            paths = list(dict.fromkeys(paths))
            args = ["log", "--reverse", "--no-ext-diff", "--no-textconv", "--no-renames"]
            args += ["--src-prefix=a/", "--dst-prefix=b/", "-p", "-U0", "--format=%x00%H"]
            out = self.run([*args, f"{commit}..HEAD", "--", *paths], clock)
            files = None if out is None or len(out) >= MAX_GIT_OUTPUT else _parse_log(out)
            for p in paths:
                if files is not None:
                    self._history[(commit, p)] = files.get(p, [])
                elif p == path:
                    self._history[(commit, p)] = None
        return self._history[key]

    def history_renamed(
        self, commit: str, old: str, new: str, clock: _Clock
    ) -> list[_Commit] | None:
        """The commits since ``commit`` that touched ``old`` and, from its rename on, ``new``
        (the rename's own edits as a patch from the old file), oldest first."""
        args = ["log", "--reverse", "--no-ext-diff", "--no-textconv", "-M"]
        args += ["--src-prefix=a/", "--dst-prefix=b/", "-p", "-U0", "--format=%x00%H"]
        out = self.run([*args, f"{commit}..HEAD", "--", old, new], clock)
        if out is None or len(out) >= MAX_GIT_OUTPUT:
            return None
        files = _parse_log(out)
        chunks = out.split(b"\x00")[1:]
        order = [chunk.split(b"\n", 1)[0].strip().decode("ascii", "replace") for chunk in chunks]
        by_sha = {sha: hunks for name in (old, new) for sha, hunks in files.get(name, [])}
        return [(sha, by_sha[sha]) for sha in order if sha in by_sha]

    def deleted_by(self, commit: str, path: str, clock: _Clock) -> str | None:
        """The commit since ``commit`` that deleted ``path`` (None: still in HEAD, deleted
        in the working tree only). The batch's other missing files come in the same call."""
        key = (commit, path)
        if key not in self._deleted:
            paths = [
                path,
                *(p for p in self.gone.get(commit, ()) if (commit, p) not in self._deleted),
            ]
            paths = list(dict.fromkeys(paths))
            args = [
                "log",
                "--diff-filter=D",
                "--no-renames",
                "--name-only",
                "-z",
                "--format=%x01%H",
            ]
            out = self.run([*args, f"{commit}..HEAD", "--", *paths], clock) or b""
            for p in paths:
                self._deleted.setdefault((commit, p), None)
            for chunk in out.split(b"\x01")[1:]:  # newest first: the last deletion wins
                sha, _, names = chunk.partition(b"\x00")
                for name in names.split(b"\x00"):
                    p = name.strip(b"\n").decode("utf-8", "surrogateescape")
                    if (commit, p) in self._deleted and self._deleted[(commit, p)] is None:
                        self._deleted[(commit, p)] = sha.decode("ascii", "replace").strip()
        return self._deleted[key]


def _unquote(name: bytes) -> str:
    """A path as git prints it in a patch header (C-quoted when it has odd bytes)."""
    name = name.rstrip(b"\t")
    if name.startswith(b'"') and name.endswith(b'"'):
        raw = name[1:-1].decode("latin-1").encode("latin-1").decode("unicode_escape")
        name = raw.encode("latin-1")
    return name.decode("utf-8", "surrogateescape")


def _parse_log(out: bytes) -> dict[str, list[_Commit]]:
    """``git log -p -U0`` of many files -> each file's commits, oldest first."""
    files: dict[str, list[_Commit]] = {}
    for chunk in out.split(b"\x00")[1:]:
        lines = chunk.split(b"\n")
        sha = lines[0].strip().decode("ascii", "replace")
        sections: list[tuple[list[str], list[_Hunk]]] = []  # ([path], hunks) per file
        old = b""
        rem_old = rem_new = 0
        for line in lines[1:]:
            hunks = sections[-1][1] if sections else []
            if rem_old and line[:1] == b"-":
                hunks[-1][2].append(line[1:])
                rem_old -= 1
            elif rem_new and line[:1] == b"+":
                hunks[-1][3].append(line[1:])
                rem_new -= 1
            elif line.startswith(b"diff --git "):
                sections.append(([], []))
            elif line.startswith(b"--- "):
                old = line[4:]
            elif line.startswith(b"+++ ") and sections:
                new = line[4:]
                name = _unquote(old if new.rstrip(b"\t") == b"/dev/null" else new)
                sections[-1][0].append(name[2:] if name[:2] in ("a/", "b/") else name)
            elif (m := _HUNK.match(line)) is not None and sections:
                rem_old, rem_new = int(m.group(2) or b"1"), int(m.group(4) or b"1")
                hunks.append((int(m.group(1)), rem_old, [], []))
        for names, hunks in sections:
            if names:
                files.setdefault(names[0], []).append((sha, hunks))
    return files


def _parse_batch(out: bytes, count: int) -> list[list[str] | None]:
    """``git cat-file --batch`` output -> each object's lines (None: missing)."""
    got: list[list[str] | None] = []
    pos = 0
    while len(got) < count and pos < len(out):
        end = out.find(b"\n", pos)
        if end < 0:
            break
        header = out[pos:end].split()
        if len(header) == 3 and header[1] == b"blob" and header[2].isdigit():
            size = int(header[2])
            got.append(out[end + 1 : end + 1 + size].decode("utf-8", "replace").splitlines())
            pos = end + 1 + size + 1
        elif len(header) == 3 and header[2].isdigit():  # a tree or commit: not a file
            got.append(None)
            pos = end + 1 + int(header[2]) + 1
        else:  # "<name> missing" / "ambiguous"
            got.append(None)
            pos = end + 1
    return got


def _fold(data: list[bytes]) -> list[str]:
    return [" ".join(b.decode("utf-8", "replace").split()) for b in data]


def _changed_by(history: list[_Commit], start: int, end: int) -> str | None:
    """The first commit whose patch touches the cited lines (followed through the
    commits' line shifts; whitespace-only hunks do not count). None: no commit did, so the
    change is in the working tree."""
    for sha, hunks in history:
        shift = grow = 0
        touched = False
        for old_start, old_count, removed, added in hunks:
            last = old_start + old_count - 1
            if old_count == 0:  # an insertion after line old_start
                inside = start <= old_start < end
                before = old_start < start
            else:
                inside = old_start <= end and last >= start
                before = last < start
            if inside and [x for x in _fold(removed) if x] != [x for x in _fold(added) if x]:
                touched = True
                break
            if before:
                shift += len(added) - old_count
            elif inside:
                grow += len(added) - old_count
        if touched:
            return sha
        start += shift
        end += shift + grow
    return None


@dataclass
class _Tree:
    """Files of the working tree read at most once per batch (never outside ``root``)."""

    root: Path
    _files: dict[str, tuple[list[str] | None, bool]] = field(default_factory=dict)

    def read(self, path: str, upto: int) -> tuple[list[str] | None, bool]:
        """(lines, whole): the file's lines (only the first ``upto`` of a huge file; whole
        says all were read), or None when it is missing, not a regular file or outside."""
        cached = self._files.get(path)
        if cached is not None and (cached[1] or cached[0] is None or len(cached[0]) >= upto):
            return cached
        got = _read(self.root, path, upto)
        self._files[path] = got
        return got


def _read(root: Path, path: str, upto: int) -> tuple[list[str] | None, bool]:
    try:
        base = root.resolve()
        target = (root / path).resolve()
        target.relative_to(base)  # a symlink out of the repository is never followed
        fd = os.open(target, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except (OSError, ValueError, RuntimeError):
        return None, True
    with os.fdopen(fd, "rb") as fh:
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):  # a FIFO or device swapped in after resolve
                return None, True
            if st.st_size <= MAX_SCAN_BYTES:
                return fh.read(MAX_SCAN_BYTES + 1).decode("utf-8", "replace").splitlines(), True
            lines: list[str] = []
            for piece in fh:  # a huge file: only as far as the cited lines
                lines.extend(piece.decode("utf-8", "replace").splitlines())
                if len(lines) >= upto:
                    break
            return lines, False
        except OSError:
            return None, True


def _find_hash(
    folded: list[str], target: str, sizes: list[int], near: int, clock: _Clock
) -> tuple[int, int] | None:
    """A (start, end) run of lines (1-based) whose normalized text hashes to ``target``,
    the nearest to ``near``. Windows of each size in ``sizes``; smaller ones must start and
    end on a non-blank line (the cited block without its blank edges)."""
    best: tuple[int, int] | None = None
    for k in sizes:
        edges = k < sizes[0]
        for i in range(0, len(folded) - k + 1):
            if edges and (not folded[i] or not folded[i + k - 1]):
                continue
            if i % 512 == 0 and clock.left() <= 0:
                raise _OutOfTime
            a, b = i, i + k  # `normalize` of lines already folded: drop the blank edges
            while a < b and not folded[a]:
                a += 1
            while b > a and not folded[b - 1]:
                b -= 1
            window = "\n".join(folded[a:b])
            hit = hashlib.sha256(window.encode("utf-8")).hexdigest() == target
            if hit and (best is None or abs(i + 1 - near) < abs(best[0] - near)):
                best = (i + 1, i + k)
        if best is not None:
            return best
    return None


def _find_text(
    folded: list[str], core: list[str], near: int, clock: _Clock
) -> tuple[int, int] | None:
    """Where the normalized block ``core`` stands in the folded file, nearest to ``near``."""
    if not core:
        return None
    k = len(core)
    best: tuple[int, int] | None = None
    for i, line in enumerate(folded):
        if i % 4096 == 0 and clock.left() <= 0:
            raise _OutOfTime
        hit = line == core[0] and folded[i : i + k] == core
        if hit and (best is None or abs(i + 1 - near) < abs(best[0] - near)):
            best = (i + 1, i + k)
    return best


def _at(lines: list[str], c: Citation) -> str | None:
    if c.line_end > len(lines):
        return None
    return text_hash(lines[c.line_start - 1 : c.line_end])


def _locate(
    tree: _Tree, git: _Git, c: Citation, path: str, clock: _Clock
) -> tuple[Literal["same", "moved", "gone", "missing", "big"], tuple[int, int] | None]:
    """Where the cited text stands in ``path`` of the working tree now."""
    lines, whole = tree.read(path, c.line_end)
    if lines is None:
        return "missing", None
    if path == c.path and _at(lines, c) == c.text_hash:
        return "same", (c.line_start, c.line_end)
    if not whole:
        return "big", None
    assert c.text_hash is not None
    folded = [" ".join(line.split()) for line in lines]
    n = c.line_end - c.line_start + 1
    found = _find_hash(folded, c.text_hash, [n], c.line_start, clock)
    if found:
        return "moved", found
    original = None
    if c.commit and git.usable():
        original = git.show(c.commit, c.path, clock)
    if original is not None and text_hash(original[c.line_start - 1 : c.line_end]) == c.text_hash:
        core = normalize(original[c.line_start - 1 : c.line_end]).split("\n")
        found = _find_text(folded, core, c.line_start, clock)
    else:  # the cited text is known only by its hash: try the block without its blank edges
        found = _find_hash(folded, c.text_hash, list(range(n, 0, -1)), c.line_start, clock)
    return ("moved", found) if found else ("gone", None)


def check(root: Path, citation: Citation, *, budget_s: float = 0.5) -> CheckResult:
    """Is ``citation`` still true of the working tree under ``root``?"""
    return _check(_Tree(root), _Git(root), citation, _Clock(budget_s))


def check_many(
    root: Path, citations: list[Citation], budget_s: float = 0.5, *, total_s: float | None = None
) -> list[CheckResult]:
    """Check many citations (a session start): each file is read once, and git is asked
    once per commit for renames and once per (commit, file) for the rest. ``budget_s`` is
    per citation, as for `check`; past ``total_s`` (if given) the rest are 'unknown'."""
    tree, git = _Tree(root), _Git(root)
    for c in citations:  # which files git will be asked about, to ask once per commit
        if not c.commit or not _COMMIT.fullmatch(c.commit) or c.text_hash is None:
            continue
        try:
            lines, _ = tree.read(check_path(c.path), c.line_end)
        except ValidationError:
            continue
        if lines is None:
            git.gone.setdefault(c.commit, []).append(c.path)
        elif c.line_start >= 1 and _at(lines, c) != c.text_hash:
            git.hints.setdefault(c.commit, []).append(c.path)
    whole = _Clock(total_s if total_s is not None else float("inf"))
    out = []
    for c in citations:
        clock = _Clock(min(budget_s, max(0.0, whole.left())))
        out.append(_check(tree, git, c, clock))
    return out


def _check(tree: _Tree, git: _Git, c: Citation, clock: _Clock) -> CheckResult:
    def done(
        status: Status, reason: str, updated: Citation | None = None, by: str | None = None
    ) -> CheckResult:
        if not git.usable() and status != "unknown":
            reason += f" (working tree only: {git.note})"
        return CheckResult(status, updated, reason, by, clock.ms())

    if c.text_hash is None:
        return done("unknown", "the citation was never read (no text hash)")
    try:
        path = check_path(c.path)
    except ValidationError as exc:
        return done("unknown", str(exc))
    if not 1 <= c.line_start <= c.line_end or c.line_end - c.line_start >= MAX_LINES:
        return done("unknown", f"not a line range: {c.line_start}-{c.line_end}")
    commit = c.commit if c.commit and _COMMIT.fullmatch(c.commit) else None
    c = replace(c, path=path, commit=commit)
    try:
        where, lines = _locate(tree, git, c, c.path, clock)
        if where == "same":
            return done("valid", "the cited lines are unchanged")
        if where == "moved" and lines:
            new = replace(c, line_start=lines[0], line_end=lines[1])
            return done("valid", f"the cited text moved to lines {lines[0]}-{lines[1]}", new)
        if where == "big":
            return done("unknown", "the cited lines changed and the file is too large to search")
        if where == "gone":
            by = None
            if c.commit and git.usable():
                history = git.history(c.commit, c.path, clock)
                if history is not None:
                    by = _changed_by(history, c.line_start, c.line_end)
                    if by is None:
                        return done(
                            "stale",
                            "the cited lines were changed in the working tree (not committed)",
                        )
            return done("stale", "the cited text is no longer in the file", by=by)
        # the file is gone: renamed or deleted since the citation's commit?
        if not c.commit:
            return done("stale", "the cited file is gone (no commit recorded to follow a rename)")
        changes = git.changes(c.commit, clock)
        if changes is None:
            return done("stale", "the cited file is gone")
        status, renamed = changes.get(c.path, ("?", None))
        if status == "R" and renamed:
            where, lines = _locate(tree, git, c, renamed, clock)
            if where in ("same", "moved") and lines:
                new = replace(c, path=renamed, line_start=lines[0], line_end=lines[1])
                return done("valid", f"the file was renamed to {renamed}", new)
            if where == "big":
                return done("unknown", f"the file was renamed to {renamed}, too large to search")
            history = git.history_renamed(c.commit, c.path, renamed, clock)
            by = _changed_by(history, c.line_start, c.line_end) if history else None
            why = f"the file was renamed to {renamed} and the cited text is not in it"
            return done("stale", why, by=by)
        if status == "D":
            by = git.deleted_by(c.commit, c.path, clock)
            if by is None:
                return done(
                    "stale", "the cited file was deleted in the working tree (not committed)"
                )
            return done("stale", "the cited file was deleted", by=by)
        return done("stale", "the cited file is gone")
    except _OutOfTime:
        return done("unknown", "could not decide within the time budget")
