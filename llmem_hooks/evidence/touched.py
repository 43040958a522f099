"""Citations for memories learned from a session: only the files the session touched.

A memory extracted from an exchange may cite code, but only code the session actually
touched: a file a tool call of the exchange read, edited or wrote (`events.FileTouch`),
a file attached to a prompt, or a path named in the exchange's text that exists in the
repository. Nothing is guessed: no search of the repository for what the memory might be
about. The rule (docs/citations.md, "Where citations come from"):

1. **The exchange.** A memory's exchange is the exchanges its source messages belong to
   (a user message and the assistant messages after it) and the one before each: "remember:
   the limit is in retry.py" is said after the assistant read retry.py.
2. **About the file.** A touched file is a candidate only when the memory is about it:
   its text names the file's path or (unique among the exchange's files) its base name,
   or one of the memory's identifiers or quoted strings occurs in the lines the session
   saw or wrote there (a read's range, the whole file for a read without a range, an
   edit's new text). A path only named in the exchange must be named by the memory.
3. **The lines.** Where the memory's distinctive tokens (identifiers such as
   ``MAX_RETRIES``, ``retryLimit`` or `` `backoff` ``, quoted strings; numbers only
   beside those) occur in the file: the best line (most distinct tokens, a line the
   session saw first), grown by the hits at most `GAP` lines from it (a definition
   spread over a few lines), so an edit elsewhere in the file leaves it alone. Else the
   tool call's own range: the read's lines or the edit's new text found in the file, when
   it is at most `FALLBACK_LINES` long. Else no citation: never the whole file, which any edit
   anywhere would make stale.
4. **Captured** from the working tree now: the hash of those lines (`cite.text_hash`,
   what `cite.capture` computes) and HEAD's commit, at most `cite.MAX_PER_MEMORY` per
   memory. Outside a git repository nothing is cited.

Cost: no git call when no memory can be about a touched file; else one
(``git rev-parse --show-toplevel HEAD``). Each file is read once, only if it is a regular
file inside the repository of at most `MAX_FILE_BYTES`, and at most `MAX_FILES` files per
exchange are looked at.

Secrets: a citation holds a path, line numbers, a hash and a commit, never text. A path
the redactor would change (a token in a file name) is not cited at all: a redacted path
points at no file, and the path must not carry the secret into the store.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..errors import ValidationError
from ..events import FileTouch, Message
from ..project import git_output
from ..redact import redact_transcript
from .cite import MAX_PER_MEMORY, Citation, check_path, normalize, text_hash

GAP = 3  # a hit at most this many lines from the cited ones joins them
FALLBACK_LINES = 80  # a read range or located edit longer than this is no passage
MAX_FILES = 30  # files looked at per memory (the exchange's latest)
MAX_FILE_BYTES = 2 * 1024 * 1024  # a bigger file is not read (not source code one cites)
MAX_TOKENS = 40  # distinctive tokens of one memory
MAX_TOUCHES = 200  # touches and named paths of an exchange looked at (its latest)
MAX_TEXT = 200_000  # characters of a message searched for named paths
MAX_HITS = 10_000  # token occurrences counted per file

# Path-like words of an exchange's text: with a folder or a file extension.
_NAMED_PATH = re.compile(
    r"(?<![\w/.~-])((?:\.{0,2}/)?(?:[\w.-]+/)*[\w-][\w.-]*\.[A-Za-z][\w]{0,9}|(?:[\w.-]+/)+[\w.-]+)"
    r"(?![\w/])"
)
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BACKTICK = re.compile(r"`([^`\n]{2,80})`")
# Quoted strings; a quote inside a word is an apostrophe ("the user's", "isn't").
_QUOTED = re.compile(r"(?<!\w)\"([^\"\n]{3,120})\"(?!\w)|(?<!\w)'([^'\n]{3,120})'(?!\w)")
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w])")
_CAMEL = re.compile(r"[a-z][A-Z]")


@dataclass(frozen=True)
class _Tokens:
    strong: tuple[str, ...]  # identifiers and code spans, matched as whole words
    quoted: tuple[str, ...]  # quoted strings, matched as substrings
    numbers: tuple[str, ...]  # counted only on lines with a strong or quoted hit

    def __bool__(self) -> bool:
        return bool(self.strong or self.quoted)


@dataclass
class _File:
    rel: str  # repository-relative path
    named_as: set[str]  # the forms the session used for it (as given, relative, base name)
    touches: list[FileTouch]  # what tool calls did to it (empty: only named in the text)


def _identifier(word: str) -> bool:
    """A word that looks like code, not English: snake_case, camelCase, CONSTANT."""
    core = word.strip("_")
    if len(core) < 3 or not any(c.isalpha() for c in core):
        return False
    # All capitals: a constant (TIMEOUT) from five letters, shorter ones are acronyms (HTTP).
    return "_" in core or bool(_CAMEL.search(core)) or (core.isupper() and len(core) >= 5)


def tokens(text: str, paths: Sequence[str] = ()) -> _Tokens:
    """The distinctive tokens of a memory's text (paths it names taken out first, so a
    file name is not taken for an identifier)."""
    for p in sorted(paths, key=len, reverse=True):
        text = text.replace(p, " ")
    strong: list[str] = []
    for span in _BACKTICK.findall(text):
        span = span.strip().rstrip("()")
        if _IDENT.fullmatch(span) and len(span) >= 3:
            strong.append(span)  # `backoff`: marked as code, even a plain word
        elif span and "/" not in span:
            strong.extend(w for w in _IDENT.findall(span) if _identifier(w))
    strong.extend(w for w in _IDENT.findall(text) if _identifier(w))
    quoted = [a or b for a, b in _QUOTED.findall(text)]
    quoted = [q for q in quoted if q.strip() and not _IDENT.fullmatch(q)]
    numbers = [n for n in _NUMBER.findall(text) if n not in ("0", "1")]
    uniq = lambda xs: tuple(dict.fromkeys(xs))[:MAX_TOKENS]  # noqa: E731
    return _Tokens(uniq(strong), uniq(quoted), uniq(numbers))


# -- the exchange ------------------------------------------------------------------------


def _exchange_starts(msgs: Sequence[Message]) -> list[int]:
    """Index of each exchange's first message (a user message, or the very first)."""
    return [i for i, m in enumerate(msgs) if i == 0 or m.role == "user"]


def exchange(msgs: Sequence[Message], source_ids: Sequence[str]) -> list[Message]:
    """The messages of the exchanges ``source_ids`` are in and of the exchange before
    each, in order (none when no source message is in ``msgs``)."""
    starts = _exchange_starts(msgs)
    index = {m.id: i for i, m in enumerate(msgs)}
    keep: set[int] = set()
    for sid in source_ids:
        i = index.get(sid)
        if i is None:
            continue
        k = max(n for n, s in enumerate(starts) if s <= i)
        first = starts[max(0, k - 1)]
        end = starts[k + 1] if k + 1 < len(starts) else len(msgs)
        keep.update(range(first, end))
    return [msgs[i] for i in sorted(keep)]


def last_exchange(msgs: Sequence[Message], limit: int = 50) -> list[Message]:
    """The last exchange of ``msgs`` (at most its last ``limit`` messages): what a memory
    of the next pass may be about."""
    starts = _exchange_starts(msgs)
    return list(msgs[starts[-1] :][-limit:]) if starts else []


def needs_earlier(msgs: Sequence[Message], source_ids: Sequence[str]) -> bool:
    """Whether a source message is in the first exchange of ``msgs``: the exchange
    before it (which it may be about) is then not in ``msgs``."""
    starts = _exchange_starts(msgs)
    end = starts[1] if len(starts) > 1 else len(msgs)
    first = {m.id for m in msgs[:end]}
    return any(i in first for i in source_ids)


# -- paths -------------------------------------------------------------------------------


def _relative(path: str, cwd: Path, root: Path) -> str | None:
    """``path`` (absolute, or relative to the session's folder) as a repository-relative
    path, or None: outside the repository, inside ``.git``, or carrying a secret."""
    if not path or len(path) > 4096 or "\x00" in path:
        return None
    if redact_transcript(path) != path:
        return None  # a token in a file name: never stored, not even as a path
    raw = path.replace("\\", "/")
    if raw.startswith("~"):
        return None
    candidate = Path(os.path.normpath(Path(raw) if raw.startswith("/") else cwd / raw))
    # As written, then with its folder's symlinks resolved (a session folder reached
    # through a link; git names the real one). A file that is a link keeps its own name.
    forms = (candidate, Path(os.path.realpath(candidate.parent)) / candidate.name)
    found: str | None = None
    for base in (root, Path(os.path.realpath(root))):
        for form in forms:
            try:
                found = PurePosixPath(form.relative_to(base).as_posix()).as_posix()
                break
            except ValueError:
                continue
        if found:
            break
    if found is None:
        return None
    try:
        rel = check_path(found)
    except ValidationError:
        return None
    return None if rel.split("/", 1)[0] == ".git" else rel


def _read(root: Path, rel: str, cache: dict[str, _Body | None]) -> _Body | None:
    """The file's lines, read once per exchange: a regular file inside the repository
    (symlinks out of it are not followed), at most `MAX_FILE_BYTES`."""
    if rel not in cache:
        cache[rel] = _read_file(root, rel)
    return cache[rel]


def _read_file(root: Path, rel: str) -> _Body | None:
    try:
        real = Path(os.path.realpath(root / rel))
        real.relative_to(os.path.realpath(root))
        # O_NONBLOCK and fstat: a FIFO swapped in after the check cannot hang the read.
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError):
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_FILE_BYTES:
            return None
        data = os.read(fd, MAX_FILE_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) > MAX_FILE_BYTES or b"\x00" in data[:8192]:
        return None  # grew meanwhile, or binary
    return _Body.of(data.decode("utf-8", errors="replace").splitlines())


def _files(window: Sequence[Message], cwd: Path, root: Path) -> list[_File]:
    """The exchange's files, latest touch last: tool calls' and attachments' files, then
    paths named in the text that are files of the repository."""
    by_rel: dict[str, _File] = {}

    def note(given: str, touch: FileTouch | None) -> None:
        rel = _relative(given, cwd, root)
        if rel is None:
            return
        f = by_rel.pop(rel, None) or _File(rel, {rel, given}, [])
        f.named_as.add(given)
        if touch is not None:
            f.touches.append(touch)
        by_rel[rel] = f  # re-inserted: the latest touched file comes last

    given: list[tuple[str, FileTouch]] = []
    for m in window:
        given.extend((t.path, t) for t in m.touches)
        paths = {t.path for t in m.touches}
        # A file tool without details (another adapter): a read of the whole file.
        given.extend((p, FileTouch(p, "read")) for p in m.files if p not in paths)
    for path, touch in given[-MAX_TOUCHES:]:
        note(path, touch)
    named = [p for m in window for p in _NAMED_PATH.findall(m.text[:MAX_TEXT])]
    for path in dict.fromkeys(named[-MAX_TOUCHES:]):
        rel = _relative(path, cwd, root)
        if rel is not None and rel not in by_rel and (root / rel).is_file():
            note(path, None)  # named and there (a word like "e.g" names no file)
    return list(by_rel.values())[-MAX_FILES:]


# -- one memory, one file ----------------------------------------------------------------


def _names(text: str, f: _File, unique_base: bool) -> bool:
    """Whether the memory's text names the file: a form the session used, its
    repository-relative path, or its base name when no other file of the exchange has it."""
    forms = set(f.named_as) | {f.rel}
    if unique_base:
        forms.add(PurePosixPath(f.rel).name)
    for form in forms:
        if form and re.search(rf"(?<![\w.-]){re.escape(form)}(?![\w-])", text):
            return True
    return False


@dataclass(frozen=True)
class _Body:
    """A file's (or an edit's) lines, and its text joined once for whole-text searches."""

    lines: list[str]
    text: str

    @classmethod
    def of(cls, lines: list[str]) -> _Body:
        return cls(lines, "\n".join(lines))


def _occurrences(text: str, token: str, whole_word: bool) -> Iterator[int]:
    """The 1-based line numbers where ``token`` occurs (``whole_word``: not inside a longer
    word), in order, at most `MAX_HITS`: `str.find` and newline counts, no regex."""
    pos, line, last, n = text.find(token), 1, 0, 0
    while pos >= 0 and n < MAX_HITS:
        end = pos + len(token)
        if not whole_word or (
            (pos == 0 or not _word_char(text[pos - 1]))
            and (end == len(text) or not _word_char(text[end]))
        ):
            line += text.count("\n", last, pos)
            last = pos
            n += 1
            yield line
        pos = text.find(token, pos + 1)


def _word_char(c: str) -> bool:
    return c.isalnum() or c == "_"


def _scores(tok: _Tokens, body: _Body) -> dict[int, int]:
    """Line number -> score for the lines holding a strong or quoted token: two per
    distinct such token, one per distinct number beside them."""
    found: dict[int, set[str]] = {}
    for words, whole in ((tok.strong, True), (tok.quoted, False)):
        for t in words:
            for line in _occurrences(body.text, t, whole):
                found.setdefault(line, set()).add(t)
    nums = _number_pattern(tok)
    return {
        line: 2 * len(toks) + (len(set(nums.findall(body.lines[line - 1]))) if nums else 0)
        for line, toks in found.items()
    }


def _number_pattern(tok: _Tokens) -> re.Pattern[str] | None:
    if not tok.numbers:
        return None
    alts = "|".join(re.escape(n) for n in sorted(tok.numbers, key=len, reverse=True))
    return re.compile(rf"(?<![\w.])(?:{alts})(?![\w])")


def _seen(f: _File, n_lines: int) -> list[tuple[int, int]]:
    """The line ranges (1-based, inclusive) the session saw or wrote of the file, as far
    as the touches say (whole file for a read without a range, an attachment, a write)."""
    out: list[tuple[int, int]] = []
    for t in f.touches:
        if t.kind == "edit":
            continue  # its text is what was seen; located separately
        if t.line_start is not None:
            out.append((t.line_start, min(t.line_end or n_lines, n_lines)))
        else:
            out.append((1, n_lines))
    return out


def _locate(lines: list[str], text: str) -> tuple[int, int] | None:
    """Where an edit's new text is in the file now (its non-blank lines, compared
    normalized), or None."""
    want = [normalize([x]) for x in text.splitlines()]
    want = [w for w in want if w]
    if not want:
        return None
    have = [normalize([x]) for x in lines]
    first = want[0]
    for i, h in enumerate(have):
        if h != first:
            continue
        j, k = i, 0
        while j < len(have) and k < len(want):
            if have[j]:
                if have[j] != want[k]:
                    break
                k += 1
            j += 1
        if k == len(want):
            return i + 1, j
    return None


def _about(tok: _Tokens, f: _File, scores: dict[int, int]) -> bool:
    """Whether a memory's identifiers or quoted strings occur in what the session saw or
    wrote of the file (``scores``: the file's lines holding them)."""
    if not tok:
        return False
    for t in f.touches:
        if t.kind == "edit" and t.text and _scores(tok, _Body.of(t.text.split("\n"))):
            return True
    n_lines = max(scores, default=0)
    seen = _seen(f, n_lines)
    return any(a <= line <= b for line in scores for a, b in seen)


def _range(f: _File, lines: list[str], scores: dict[int, int]) -> tuple[int, int] | None:
    """The lines to cite (see the module docstring, rule 3)."""
    seen = _seen(f, len(lines))
    best: tuple[int, int, int] | None = None  # (score, seen, -line)
    for i, score in scores.items():
        key = (score, int(any(a <= i <= b for a, b in seen)), -i)
        if best is None or key > best:
            best = key
    if best is not None:
        lo = hi = -best[2]
        hit = set(scores)
        while any(lo - d in hit for d in range(1, GAP + 1)):
            lo = min(lo - d for d in range(1, GAP + 1) if lo - d in hit)
        while any(hi + d in hit for d in range(1, GAP + 1)):
            hi = max(hi + d for d in range(1, GAP + 1) if hi + d in hit)
        if hi - lo + 1 > FALLBACK_LINES:  # a token on every line: the best line alone
            lo = hi = -best[2]
        return lo, hi
    for t in reversed(f.touches):  # the latest touch that gives a passage
        span: tuple[int, int] | None = None
        if t.kind == "edit" and t.text:
            span = _locate(lines, t.text)
        elif t.kind == "read" and t.line_start is not None and t.line_start <= len(lines):
            span = (t.line_start, min(t.line_end or len(lines), len(lines)))
        if span and span[1] - span[0] + 1 <= FALLBACK_LINES:
            return span
    return None


# -- the whole exchange ------------------------------------------------------------------


def _root_and_head(directory: Path) -> tuple[Path, str | None] | None:
    """The repository's top folder and HEAD's commit in one git call (None: not in a
    repository; commit None: no commit yet)."""
    out = git_output(directory, "rev-parse", "--show-toplevel", "HEAD")
    if out:
        top, _, head = out.partition("\n")
        return Path(top), head.strip() or None
    only = git_output(directory, "rev-parse", "--show-toplevel")  # no HEAD yet
    return (Path(only), None) if only else None


def _maybe(memory: str, window: Sequence[Message]) -> bool:
    """Whether a memory could cite anything, decided without git or files: the exchange
    touched or named a file, and the memory names a path-like word or has a token."""
    if not any(m.touches or m.files or _NAMED_PATH.search(m.text) for m in window):
        return False
    return bool(_NAMED_PATH.search(memory)) or bool(tokens(memory))


def cite_memories(
    directory: str | Path | None,
    memories: Sequence[tuple[str, Sequence[str]]],
    msgs: Sequence[Message],
) -> list[list[Citation]]:
    """For each ``(text, source message ids)`` its citations (module docstring), in the
    order given; all empty outside a git repository or without a session folder."""
    out: list[list[Citation]] = [[] for _ in memories]
    if directory is None or not memories:
        return out
    windows = [exchange(msgs, ids) for _, ids in memories]
    todo = [i for i, (text, _) in enumerate(memories) if _maybe(text, windows[i])]
    cwd = Path(directory)
    if not todo or not cwd.is_dir():
        return out
    found = _root_and_head(cwd)
    if found is None:
        return out
    root, commit = found
    cache: dict[str, _Body | None] = {}  # one read per file for the whole exchange
    for i in todo:
        text = memories[i][0]
        files = _files(windows[i], cwd, root)
        bases = [PurePosixPath(f.rel).name for f in files]
        tok = tokens(text, [form for f in files for form in f.named_as | {f.rel}])
        cites: list[tuple[bool, Citation]] = []
        for f in files:
            named = _names(text, f, bases.count(PurePosixPath(f.rel).name) == 1)
            if not named and (not f.touches or not tok):
                continue  # only named in the exchange, or nothing to find: not about it
            body = _read(root, f.rel, cache)
            if body is None or not body.lines:
                continue
            scores = _scores(tok, body) if tok else {}
            if not (named or _about(tok, f, scores)):
                continue
            lines = body.lines
            span = _range(f, lines, scores)
            if span is None:
                continue
            a, b = span
            cites.append((named, Citation(f.rel, a, b, text_hash(lines[a - 1 : b]), commit)))
        cites.sort(key=lambda nc: not nc[0])  # files the memory names first
        out[i] = [c for _, c in cites][:MAX_PER_MEMORY]
    return out
