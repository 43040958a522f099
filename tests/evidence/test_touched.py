"""`evidence.touched`: a learned memory cites only what its exchange touched, at the lines
its tokens are on, captured from a real git repository's working tree."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from llmem_hooks.events import FileTouch, Message
from llmem_hooks.evidence import touched
from llmem_hooks.evidence.cite import MAX_PER_MEMORY, Citation, capture

RETRY = """\
import time


MAX_RETRIES = 5
BACKOFF = 0.5


def retry(fn):
    for i in range(MAX_RETRIES):
        try:
            return fn()
        except OSError:
            time.sleep(BACKOFF)
"""


def git(root: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org"}
    env.update(GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.org")
    return subprocess.run(
        ["git", *args], cwd=root, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "src" / "net").mkdir(parents=True)
    (root / "src" / "net" / "retry.py").write_text(RETRY)
    (root / "README.md").write_text("# Demo\n\nRun `make test`.\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "init")
    return root


def user(mid: str, text: str) -> Message:
    return Message(mid, "s", "user", f"User: {text}")


def tool_msg(mid: str, *touches: FileTouch, text: str = "Assistant: Tool: read") -> Message:
    return Message(
        mid, "s", "assistant", text, files=tuple(t.path for t in touches), touches=touches
    )


def said(mid: str, text: str) -> Message:
    return Message(mid, "s", "assistant", f"Assistant: {text}")


def exchange_after(*touches: FileTouch, remember: str) -> list[Message]:
    """The assistant touched files, then the user said what to remember."""
    return [
        user("u1", "look at the retry code"),
        tool_msg("a1", *touches),
        said("a2", "Here it is."),
        user("u2", remember),
        said("a3", "Noted."),
    ]


def cite(
    repo: Path, msgs: list[Message], *memories: str, cwd: Path | None = None
) -> list[list[Citation]]:
    return touched.cite_memories(cwd or repo, [(m, ["u2"]) for m in memories], msgs)


def expected(repo: Path, path: str, start: int, end: int) -> Citation:
    return capture(repo, Citation(path, start, end))


def test_a_memory_naming_a_read_file_cites_the_lines_of_its_identifiers(repo: Path) -> None:
    path = str(repo / "src/net/retry.py")
    memory = "the retry limit is set in src/net/retry.py (MAX_RETRIES = 5)"
    msgs = exchange_after(FileTouch(path, "read"), remember=f"Remember: {memory}")
    (got,) = cite(repo, msgs, memory)
    # Line 4 (the definition, with the number) only: its use on line 9 is 5 lines away.
    assert got == [expected(repo, "src/net/retry.py", 4, 4)]
    assert got[0].commit == git(repo, "rev-parse", "HEAD")


def test_not_about_the_file_no_citation(repo: Path) -> None:
    msgs = exchange_after(FileTouch(str(repo / "src/net/retry.py"), "read"), remember="x")
    assert cite(repo, msgs, "I prefer tabs over spaces", "we ship on Tuesdays (5 times)") == [
        [],
        [],
    ]


def test_identifiers_in_the_seen_lines_make_a_memory_about_the_file(repo: Path) -> None:
    path = str(repo / "src/net/retry.py")
    seen = exchange_after(FileTouch(path, "read", 3, 6), remember="x")
    (got,) = cite(repo, seen, "failed calls sleep BACKOFF seconds between tries")
    assert got == [expected(repo, "src/net/retry.py", 5, 5)]
    # The identifier is in the file, but not in the lines the session read: not about it.
    unseen = exchange_after(FileTouch(path, "read", 10, 13), remember="x")
    assert cite(repo, unseen, "the limit lives in MAX_RETRIES") == [[]]


def test_fallback_to_the_read_range_or_the_located_edit_never_the_whole_file(repo: Path) -> None:
    path = str(repo / "src/net/retry.py")
    memory = "the loop in retry.py swallows every OS error"
    ranged = exchange_after(FileTouch(path, "read", 8, 13), remember=memory)
    assert cite(repo, ranged, memory) == [[expected(repo, "src/net/retry.py", 8, 13)]]
    whole = exchange_after(FileTouch(path, "read"), remember=memory)
    assert cite(repo, whole, memory) == [[]]
    edit = FileTouch(path, "edit", text="        except OSError:\n            time.sleep(BACKOFF)")
    edited = exchange_after(edit, remember=memory)
    assert cite(repo, edited, memory) == [[expected(repo, "src/net/retry.py", 12, 13)]]
    too_wide = exchange_after(FileTouch(path, "read", 1, 500), remember=memory)
    (repo / "src/net/retry.py").write_text(RETRY * 20)
    assert cite(repo, too_wide, memory) == [[]]


def test_paths_outside_the_repository_or_in_git_are_never_cited(repo: Path, tmp_path: Path) -> None:
    other = tmp_path / "other" / "retry.py"
    other.parent.mkdir()
    other.write_text(RETRY)
    (repo / "evil").symlink_to(other.parent)
    memory = f"the retry limit is in {other} and evil/retry.py and .git/config (MAX_RETRIES)"
    msgs = exchange_after(
        FileTouch(str(other), "read"),
        FileTouch("evil/retry.py", "read"),
        FileTouch(str(repo / ".git" / "config"), "read"),
        FileTouch("../other/retry.py", "read"),
        remember=memory,
    )
    assert cite(repo, msgs, memory) == [[]]


def test_a_path_only_named_in_the_exchange_counts_when_the_memory_names_it(repo: Path) -> None:
    msgs = [
        user("u1", "hi"),
        said("a1", "hello"),
        user("u2", "Remember: src/net/retry.py holds MAX_RETRIES"),
    ]
    assert cite(repo, msgs, "src/net/retry.py holds MAX_RETRIES") == [
        [expected(repo, "src/net/retry.py", 4, 4)]
    ]
    # Named in the exchange, not by the memory: its identifiers alone do not make it cited.
    assert cite(repo, msgs, "MAX_RETRIES is the knob to turn") == [[]]
    # A path the exchange does not name is never searched for.
    quiet = [user("u1", "hi"), said("a1", "hello"), user("u2", "Remember: MAX_RETRIES = 5")]
    assert cite(repo, quiet, "the retry limit is MAX_RETRIES = 5") == [[]]


def test_relative_paths_from_a_subfolder_and_the_exchange_window(repo: Path) -> None:
    sub = repo / "src"
    memory = "net/retry.py: BACKOFF is the pause"
    msgs = exchange_after(FileTouch("net/retry.py", "read"), remember=memory)
    assert cite(repo, msgs, memory, cwd=sub) == [[expected(repo, "src/net/retry.py", 5, 5)]]
    # Touched two exchanges before the memory's: not its exchange.
    memory = "BACKOFF is the pause"
    msgs = exchange_after(FileTouch("net/retry.py", "read"), remember=memory)
    assert cite(repo, msgs, memory, cwd=sub) == [[expected(repo, "src/net/retry.py", 5, 5)]]
    old = [
        user("u0", "first"),
        tool_msg("a0", FileTouch("net/retry.py", "read")),
        *msgs[:1],
        said("a1", "-"),
        *msgs[3:],
    ]
    assert cite(repo, old, memory, cwd=sub) == [[]]


def test_outside_git_nothing_and_without_commits_no_commit(repo: Path, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "retry.py").write_text(RETRY)
    memory = "retry.py: MAX_RETRIES = 5"
    msgs = exchange_after(FileTouch(str(plain / "retry.py"), "read"), remember=memory)
    assert cite(plain, msgs, memory) == [[]]
    assert touched.cite_memories(None, [(memory, ["u2"])], msgs) == [[]]
    git(plain, "init", "-q")
    (got,) = cite(plain, msgs, memory)
    assert [(c.path, c.line_start, c.commit) for c in got] == [("retry.py", 4, None)]


def test_a_secret_in_a_path_keeps_the_path_out(repo: Path) -> None:
    name = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    (repo / f"{name}.py").write_text("MAX_RETRIES = 5\n")
    memory = f"{name}.py sets MAX_RETRIES"
    msgs = exchange_after(FileTouch(str(repo / f"{name}.py"), "read"), remember=memory)
    assert cite(repo, msgs, memory) == [[]]


def test_at_most_max_per_memory_and_odd_files_skipped(repo: Path) -> None:
    touches = []
    for i in range(MAX_PER_MEMORY + 5):
        (repo / f"m{i}.py").write_text(f"SHARED_LIMIT = {i}\n")
        touches.append(FileTouch(str(repo / f"m{i}.py"), "read"))
    (repo / "blob.bin").write_bytes(b"SHARED_LIMIT\x00\x01")
    (repo / "big.py").write_text("SHARED_LIMIT = 1\n" + "x = 1\n" * 400_000)
    os.mkfifo(repo / "pipe.py")
    for odd in ("blob.bin", "big.py", "pipe.py"):
        touches.append(FileTouch(str(repo / odd), "read"))
    msgs = exchange_after(*touches, remember="x")
    (got,) = cite(repo, msgs, "every module sets SHARED_LIMIT")
    assert len(got) == MAX_PER_MEMORY
    assert not {c.path for c in got} & {"blob.bin", "big.py", "pipe.py"}


def test_one_git_call_per_exchange_and_none_when_nothing_can_be_cited(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "git.log"
    wrapper = tmp_path / "bin" / "git"
    wrapper.parent.mkdir()
    real = shutil.which("git")
    wrapper.write_text(f'#!/bin/sh\necho "$@" >> {log}\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper.parent}:{os.environ['PATH']}")
    path = str(repo / "src/net/retry.py")
    msgs = exchange_after(FileTouch(path, "read"), remember="x")
    got = cite(repo, msgs, "retry.py: MAX_RETRIES = 5", "BACKOFF is 0.5", "we like tea")
    assert [len(c) for c in got] == [1, 1, 0]
    assert log.read_text().splitlines() == ["rev-parse --show-toplevel HEAD"]
    log.unlink()
    quiet = [user("u1", "hi"), said("a1", "hello"), user("u2", "we like tea")]
    assert cite(repo, quiet, "we like tea") == [[]]
    assert not log.exists()


def test_tokens_are_code_like_words_not_english() -> None:
    tok = touched.tokens('set `backoff` and retryLimit, MAX_RETRIES=5, HTTP, "connection refused"')
    assert tok.strong == ("backoff", "retryLimit", "MAX_RETRIES")
    assert tok.quoted == ("connection refused",) and tok.numbers == ("5",)
    assert not touched.tokens("We always deploy on Tuesdays after lunch.")


def test_a_session_folder_reached_through_a_link_still_cites(repo: Path, tmp_path: Path) -> None:
    link = tmp_path / "link"
    link.symlink_to(repo)
    memory = "src/net/retry.py: MAX_RETRIES = 5"
    msgs = exchange_after(FileTouch(str(link / "src/net/retry.py"), "read"), remember=memory)
    assert cite(repo, msgs, memory, cwd=link) == [[expected(repo, "src/net/retry.py", 4, 4)]]
    dotted = exchange_after(FileTouch("src/../src/net/retry.py", "read"), remember=memory)
    assert cite(repo, dotted, memory) == [[expected(repo, "src/net/retry.py", 4, 4)]]
