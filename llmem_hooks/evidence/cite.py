"""A citation: which lines of which file of the repository a memory is about.

Kept as a repository-relative path, a line range (1-based, inclusive), a hash of the cited
lines' normalized text (whitespace runs folded, trailing space and blank edges dropped:
re-indenting or re-wrapping blank lines does not make a memory stale; a changed word
does) and the commit it was seen at. `parse` reads the ``path:12-30`` form people and
agents type; `capture` fills the hash and commit from the working tree as it is now.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath

from ..errors import ValidationError
from ..project import git_output

MAX_PATH = 1000
MAX_LINES = 400  # a citation is a passage, not a file
MAX_FILE_BYTES = 20 * 1024 * 1024  # a bigger file is not read (not source code one cites)
_SPEC = re.compile(r"^(?P<path>.+?)(?::(?P<start>\d{1,7})(?:-(?P<end>\d{1,7}))?)?$")


@dataclass(frozen=True)
class Citation:
    path: str  # repository-relative, '/'-separated
    line_start: int
    line_end: int
    text_hash: str | None = None  # sha256 of the normalized cited text (None: not read yet)
    commit: str | None = None  # the commit the lines were seen at (None: not in git)

    def spec(self) -> str:
        """The ``path:12-30`` form."""
        if self.line_start == self.line_end:
            return f"{self.path}:{self.line_start}"
        return f"{self.path}:{self.line_start}-{self.line_end}"


def check_path(path: str) -> str:
    """A repository-relative path, or ValidationError (absolute, '..', empty, control
    characters, long)."""
    if not isinstance(path, str) or not path.strip() or len(path) > MAX_PATH:
        raise ValidationError("a citation needs a repository-relative file path")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in path):  # NUL, newlines, escapes
        raise ValidationError("a citation path must not hold control characters")
    pure = PurePosixPath(path.strip().replace("\\", "/"))
    if pure.is_absolute() or ".." in pure.parts or str(pure) in (".", ""):
        raise ValidationError(f"citation path {path!r} must be relative to the repository")
    return str(pure)


def parse(spec: str) -> Citation:
    """``path``, ``path:12`` or ``path:12-30`` (a whole-file citation is lines 1-400 of it
    when captured). One clear ValidationError for anything else."""
    if not isinstance(spec, str):
        raise ValidationError("a citation is PATH[:START[-END]]")
    m = _SPEC.match(spec.strip())
    if not m:
        raise ValidationError(f"not a citation: {spec!r} (use PATH[:START[-END]])")
    path = check_path(m.group("path"))
    if m.group("start") is None:  # the whole file: its first MAX_LINES lines
        start, end = 1, MAX_LINES
    else:
        start = int(m.group("start"))
        end = int(m.group("end") or start)
    if start < 1 or end < start:
        raise ValidationError(f"citation {spec!r}: lines must be START-END with 1 <= START <= END")
    if end - start + 1 > MAX_LINES:
        raise ValidationError(f"citation {spec!r}: at most {MAX_LINES} lines")
    return Citation(path, start, end)


def normalize(lines: list[str]) -> str:
    """The cited text as compared: whitespace runs folded to one space, blank lines at
    the edges dropped."""
    folded = [" ".join(line.split()) for line in lines]
    while folded and not folded[0]:
        folded.pop(0)
    while folded and not folded[-1]:
        folded.pop()
    return "\n".join(folded)


def text_hash(lines: list[str]) -> str:
    return hashlib.sha256(normalize(lines).encode("utf-8")).hexdigest()


def read_lines(root: Path, path: str) -> list[str] | None:
    """The file's lines (None if it is missing, not a regular file, over `MAX_FILE_BYTES`,
    or outside ``root``)."""
    target = (root / path).resolve()
    try:
        target.relative_to(root.resolve())
    except ValueError:
        return None
    try:
        if not target.is_file() or target.stat().st_size > MAX_FILE_BYTES:
            return None
        return target.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None


def head_commit(root: Path) -> str | None:
    return git_output(root, "rev-parse", "HEAD") or None


def capture(root: Path, citation: Citation, commit: str | None = None) -> Citation:
    """``citation`` with the hash of its lines as they are in ``root`` now and the commit
    (HEAD unless given). ValidationError when the file or the lines are not there."""
    lines = read_lines(root, citation.path)
    if lines is None:
        raise ValidationError(
            f"cannot cite {citation.path}: no such file in {root} (or not a regular file"
            " under 20 MB)"
        )
    if citation.line_start > len(lines):
        raise ValidationError(f"cannot cite {citation.spec()}: the file has {len(lines)} lines")
    end = min(citation.line_end, len(lines))
    cited = lines[citation.line_start - 1 : end]
    return replace(
        citation,
        line_end=end,
        text_hash=text_hash(cited),
        commit=commit if commit is not None else head_commit(root),
    )


MAX_PER_MEMORY = 20  # citations one memory may carry


def repo_root(directory: Path) -> Path | None:
    """The top folder of the git repository ``directory`` is in (None: not in one)."""
    top = git_output(directory, "rev-parse", "--show-toplevel")
    return Path(top) if top else None


def capture_specs(directory: Path | str | None, specs: object) -> list[Citation]:
    """``PATH[:START[-END]]`` strings, parsed and captured against the repository of
    ``directory`` (the working tree as it is now, HEAD's commit). All of them or one
    ValidationError: a memory is never stored with half its citations."""
    if specs is None:
        return []
    if not isinstance(specs, list | tuple) or not all(isinstance(s, str) for s in specs):
        raise ValidationError("citations must be a list of 'path:12-30' strings")
    if len(specs) > MAX_PER_MEMORY:
        raise ValidationError(f"at most {MAX_PER_MEMORY} citations per memory")
    if not specs:
        return []
    parsed = [parse(s) for s in specs]
    if directory is None:
        raise ValidationError("citations need the caller's directory (its git repository)")
    root = repo_root(Path(directory))
    if root is None:
        raise ValidationError(f"cannot cite: {directory} is not inside a git repository")
    commit = head_commit(root)
    return [capture(root, c, commit) for c in parsed]
