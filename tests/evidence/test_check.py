"""Checking citations against a real git repository made in tmp: the five moves of issue 22's
proof (untouched, moved down, renamed, changed, deleted), the working tree's own edits,
whitespace, no git at all, and files a check must not read or must not take long on."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from llmem_hooks.errors import ValidationError
from llmem_hooks.evidence.check import check, check_many
from llmem_hooks.evidence.cite import Citation, capture, parse, text_hash

ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(root: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", *args], cwd=root, env=ENV, capture_output=True, text=True, check=True
    )
    return out.stdout.strip()


def commit(root: Path, message: str) -> str:
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message)
    return git(root, "rev-parse", "HEAD")


BODY = [f"def f{i}(x):  # line {i}" if i % 5 else "" for i in range(1, 101)]


def write(root: Path, path: str, lines: list[str]) -> None:
    target = root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("\n".join(lines) + "\n", encoding="utf-8")


def lines_of(root: Path, path: str) -> list[str]:
    return (root / path).read_text(encoding="utf-8").splitlines()


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, Citation]:
    """A repository with src/mod.py; the citation of its lines 11-14 made at commit A."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    write(root, "src/mod.py", BODY)
    write(root, "README", ["hello"])
    a = commit(root, "A")
    cited = capture(root, parse("src/mod.py:11-14"))
    assert cited.commit == a and cited.text_hash
    return root, cited


def test_untouched_lines_are_valid(repo: tuple[Path, Citation]) -> None:
    root, cited = repo
    lines = lines_of(root, "src/mod.py")
    lines[79] = "changed far away"
    write(root, "src/mod.py", lines)
    commit(root, "B")
    r = check(root, cited)
    assert (r.status, r.updated, r.changed_by) == ("valid", None, None)
    assert r.ms >= 0


def test_lines_moved_40_down_are_valid_with_new_lines(repo: tuple[Path, Citation]) -> None:
    root, cited = repo
    write(root, "src/mod.py", [f"# new {i}" for i in range(40)] + lines_of(root, "src/mod.py"))
    commit(root, "B")
    r = check(root, cited)
    assert r.status == "valid"
    assert r.updated is not None and (r.updated.line_start, r.updated.line_end) == (51, 54)
    assert r.updated.text_hash == cited.text_hash and r.updated.path == cited.path


def test_block_moved_without_its_blank_edge_is_found_through_git(tmp_path: Path) -> None:
    root = tmp_path / "r"
    root.mkdir()
    git(root, "init", "-q")
    write(root, "a.py", ["x = 1", "", "def g():", "    return 2", "y = 3"])
    commit(root, "A")
    cited = capture(root, parse("a.py:2-4"))  # a blank line, then the function
    write(root, "a.py", ["def g():", "    return 2", "x = 1", "y = 3"])
    commit(root, "B")
    r = check(root, cited)
    assert r.status == "valid" and r.updated is not None
    assert (r.updated.line_start, r.updated.line_end) == (1, 2)


def test_git_mv_is_valid_with_the_new_path(repo: tuple[Path, Citation]) -> None:
    root, cited = repo
    git(root, "mv", "src/mod.py", "src/renamed.py")
    commit(root, "rename")
    r = check(root, cited)
    assert r.status == "valid" and r.updated is not None
    assert (r.updated.path, r.updated.line_start, r.updated.line_end) == ("src/renamed.py", 11, 14)


def test_rename_with_small_edits_elsewhere(repo: tuple[Path, Citation]) -> None:
    root, cited = repo
    lines = lines_of(root, "src/mod.py")
    lines[90] = "edited"
    (root / "src/mod.py").unlink()
    write(root, "lib/mod2.py", ["import os", "import re", "import sys", *lines])
    commit(root, "rename and edit")
    r = check(root, cited)
    assert r.status == "valid" and r.updated is not None
    assert (r.updated.path, r.updated.line_start, r.updated.line_end) == ("lib/mod2.py", 14, 17)


def test_changed_lines_are_stale_with_the_changing_commit(repo: tuple[Path, Citation]) -> None:
    root, cited = repo
    lines = lines_of(root, "src/mod.py")
    write(root, "src/mod.py", ["# header", *lines])  # shifts the cited lines by one
    commit(root, "shift")
    lines = lines_of(root, "src/mod.py")
    lines[12] = "    retries = 5  # the cited line, changed"
    write(root, "src/mod.py", lines)
    d = commit(root, "D")
    lines[95] = "later"
    write(root, "src/mod.py", lines)
    commit(root, "after D")
    r = check(root, cited)
    assert (r.status, r.changed_by) == ("stale", d)
    assert r.updated is None


def test_whitespace_commit_before_the_change_is_not_the_changer(
    repo: tuple[Path, Citation],
) -> None:
    root, cited = repo
    lines = lines_of(root, "src/mod.py")
    lines[11] = "    " + lines[11] + "   "  # re-indent: still valid
    write(root, "src/mod.py", lines)
    commit(root, "reindent")
    assert check(root, cited).status == "valid"
    lines[11] = "something else"
    write(root, "src/mod.py", lines)
    d = commit(root, "D")
    r = check(root, cited)
    assert (r.status, r.changed_by) == ("stale", d)


def test_deleted_file_is_stale_with_the_deleting_commit(repo: tuple[Path, Citation]) -> None:
    root, cited = repo
    git(root, "rm", "-q", "src/mod.py")
    e = commit(root, "E")
    write(root, "README", ["later"])
    commit(root, "after E")
    r = check(root, cited)
    assert (r.status, r.changed_by) == ("stale", e)
    assert "deleted" in r.reason


def test_uncommitted_edit_and_delete_count(repo: tuple[Path, Citation]) -> None:
    root, cited = repo
    lines = lines_of(root, "src/mod.py")
    lines[12] = "edited, not committed"
    write(root, "src/mod.py", lines)
    r = check(root, cited)
    assert (r.status, r.changed_by) == ("stale", None)
    assert "working tree" in r.reason
    (root / "src/mod.py").unlink()
    r = check(root, cited)
    assert (r.status, r.changed_by) == ("stale", None) and "deleted" in r.reason


def test_whitespace_only_reindent_is_valid(repo: tuple[Path, Citation]) -> None:
    root, cited = repo
    write(
        root,
        "src/mod.py",
        ["\t" + line.replace(" ", "   ") for line in lines_of(root, "src/mod.py")],
    )
    commit(root, "reindent")
    assert check(root, cited).status == "valid"


def test_not_a_git_repository(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    write(root, "a.txt", BODY)
    cited = capture(root, parse("a.txt:11-14"))
    assert cited.commit is None
    write(root, "a.txt", ["new"] * 7 + BODY)
    r = check(root, cited)
    assert r.status == "valid" and r.updated is not None and r.updated.line_start == 18
    # a citation made in git, checked where there is no git: the working tree decides
    gitted = Citation(cited.path, cited.line_start, cited.line_end, cited.text_hash, "a" * 40)
    write(root, "a.txt", ["nothing of it"])
    r = check(root, gitted)
    assert r.status == "stale" and "not a git repository" in r.reason


def test_git_missing_from_path(
    repo: tuple[Path, Citation], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, cited = repo
    empty = tmp_path / "nobin"
    empty.mkdir()
    lines = lines_of(root, "src/mod.py")
    write(root, "src/mod.py", lines[:9] + ["x"] * 40 + lines[9:])  # moved, blank edge kept
    monkeypatch.setenv("PATH", str(empty))
    r = check(root, cited)
    assert r.status == "valid" and r.updated is not None and r.updated.line_start == 51
    write(root, "src/mod.py", ["gone"])
    r = check(root, cited)
    assert r.status == "stale" and "git is not installed" in r.reason
    (root / "src/mod.py").unlink()
    assert check(root, cited).status == "stale"


def test_symlink_outside_the_repository_is_never_read(
    repo: tuple[Path, Citation], tmp_path: Path
) -> None:
    root, cited = repo
    outside = tmp_path / "outside.py"
    outside.write_text("\n".join(BODY) + "\n", encoding="utf-8")  # the very same text
    (root / "link.py").symlink_to(outside)
    r = check(root, Citation("link.py", 11, 14, cited.text_hash, cited.commit))
    assert r.status != "valid"
    (root / "src" / "mod.py").unlink()
    (root / "src" / "mod.py").symlink_to(outside)
    assert check(root, cited).status != "valid"


def test_huge_file(tmp_path: Path) -> None:
    root = tmp_path / "big"
    root.mkdir()
    row = "x" * 99
    with (root / "huge.log").open("w", encoding="utf-8") as fh:
        fh.write("first\nsecond\nthird\n")
        for _ in range(500_000):
            fh.write(row + "\n")
    assert (root / "huge.log").stat().st_size > 50_000_000
    # `capture` refuses a file this big (nobody cites one); a citation made when the file
    # was small still gets checked within the budget.
    with pytest.raises(ValidationError):
        capture(root, parse("huge.log:2-3"))
    cited = Citation("huge.log", 2, 3, text_hash(["second", "third"]))
    assert check(root, cited).status == "valid"
    with (root / "huge.log").open("r+", encoding="utf-8") as fh:
        fh.write("FIRST\nSECOND")
    r = check(root, cited)
    assert r.status == "unknown" and "too large" in r.reason


def test_binary_file(repo: tuple[Path, Citation]) -> None:
    root, _ = repo
    blob = bytes(range(256)) * 4000
    (root / "img.bin").write_bytes(blob)
    commit(root, "binary")
    cited = capture(root, parse("img.bin:1-3"))
    assert check(root, cited).status == "valid"
    (root / "img.bin").write_bytes(b"\x00\x01other\n" + blob[::-1])
    assert check(root, cited).status == "stale"


def test_path_with_spaces_and_unicode_renamed(tmp_path: Path) -> None:
    root = tmp_path / "r é"
    root.mkdir()
    git(root, "init", "-q")
    write(root, "dir with space/naïve ü.py", BODY)
    commit(root, "A")
    cited = capture(root, parse("dir with space/naïve ü.py:21-24"))
    git(root, "mv", "dir with space", "другой каталог")
    commit(root, "rename dir")
    r = check(root, cited)
    assert r.status == "valid" and r.updated is not None
    assert r.updated.path == "другой каталог/naïve ü.py"


def test_citation_from_another_branch_checks_against_the_working_tree(
    repo: tuple[Path, Citation],
) -> None:
    root, cited = repo
    git(root, "checkout", "-q", "-b", "feature")
    write(root, "feat.py", ["def feature():", "    return 1"])
    commit(root, "feature")
    on_branch = capture(root, parse("feat.py:1-2"))
    lines = lines_of(root, "src/mod.py")
    lines[12] = "changed on the branch"
    write(root, "src/mod.py", lines)
    commit(root, "branch change")
    branch_cited = capture(root, parse("src/mod.py:1-4"))
    git(root, "checkout", "-q", "main")
    assert check(root, on_branch).status == "stale"  # not in this working tree
    assert check(root, branch_cited).status == "valid"  # those lines are the same here
    assert check(root, cited).status == "valid"


def test_no_budget_is_unknown_never_valid(repo: tuple[Path, Citation]) -> None:
    root, cited = repo
    write(root, "src/mod.py", ["# new"] * 40 + lines_of(root, "src/mod.py"))
    r = check(root, cited, budget_s=0)
    assert r.status == "unknown"
    assert check(root, Citation("src/mod.py", 1, 2)).status == "unknown"  # never read: no hash


def test_check_many_agrees_with_check(repo: tuple[Path, Citation]) -> None:
    root, cited = repo
    others = [capture(root, parse(f"src/mod.py:{s}-{s + 3}")) for s in (1, 30, 60)]
    readme = capture(root, parse("README"))
    write(root, "src/mod.py", ["# top"] * 3 + lines_of(root, "src/mod.py"))
    commit(root, "B")
    lines = lines_of(root, "src/mod.py")
    lines[64] = "changed"
    write(root, "src/mod.py", lines)
    git(root, "mv", "README", "README.md")
    commit(root, "C")
    batch = [cited, *others, readme]
    many = check_many(root, batch)
    one = [check(root, c) for c in batch]
    assert [(r.status, r.updated, r.changed_by) for r in many] == [
        (r.status, r.updated, r.changed_by) for r in one
    ]
    assert [r.status for r in many] == ["valid", "valid", "valid", "stale", "valid"]
    assert many[4].updated is not None and many[4].updated.path == "README.md"


def test_hostile_citation_fields_reach_neither_git_options_nor_outside(
    repo: tuple[Path, Citation], tmp_path: Path
) -> None:
    root, cited = repo
    (root / "src/mod.py").unlink()  # a check that would ask git
    target = tmp_path / "written"
    for commit in (f"--output={target}", "HEAD --output=x", "-p"):
        r = check(root, Citation(cited.path, 11, 14, cited.text_hash, commit))
        assert r.status == "stale"
    assert not target.exists() and not (root / "x").exists()
    for bad in (
        Citation("../outside.py", 1, 2, "h"),
        Citation("a.py", 5, 2, "h"),
        Citation("/etc/passwd", 1, 1, "h"),
    ):
        assert check(root, bad).status == "unknown"


def test_fifo_at_the_cited_path_does_not_block(repo: tuple[Path, Citation]) -> None:
    root, cited = repo
    (root / "src/mod.py").unlink()
    os.mkfifo(root / "src/mod.py")
    assert check(root, cited).status == "stale"


def test_check_many_total_budget(repo: tuple[Path, Citation]) -> None:
    root, cited = repo
    write(root, "src/mod.py", ["# new"] * 40 + lines_of(root, "src/mod.py"))
    assert [r.status for r in check_many(root, [cited, cited], total_s=0)] == ["unknown", "unknown"]
    assert [r.status for r in check_many(root, [cited, cited], total_s=30)] == ["valid", "valid"]


def test_check_many_shares_git_calls_across_files(repo: tuple[Path, Citation]) -> None:
    """Changed, deleted and renamed files of one commit, answered by shared git calls:
    each citation still gets its own file's answer."""
    root, cited = repo
    names = [f"m{i} é.py" for i in range(6)]
    for name in names:
        write(root, name, [f"{name} {n}" for n in range(30)])
    commit(root, "files")
    cites = [capture(root, parse(f"{name}:5-8")) for name in names]
    changers = {}
    for i, name in enumerate(names[:3]):
        lines = lines_of(root, name)
        lines[5] = f"changed {i}"
        write(root, name, lines)
        changers[name] = commit(root, f"change {name}")
    git(root, "rm", "-q", names[3], names[4])
    deleter = commit(root, "delete two")
    many = check_many(root, [*cites, cited])
    assert [(r.status, r.changed_by) for r in many] == [
        ("stale", changers[names[0]]),
        ("stale", changers[names[1]]),
        ("stale", changers[names[2]]),
        ("stale", deleter),
        ("stale", deleter),
        ("valid", None),
        ("valid", None),
    ]


def test_renamed_and_changed_is_stale_with_the_changing_commit(repo: tuple[Path, Citation]) -> None:
    root, cited = repo
    git(root, "mv", "src/mod.py", "src/moved.py")
    commit(root, "pure rename")
    lines = lines_of(root, "src/moved.py")
    lines[11] = "changed after the rename"
    write(root, "src/moved.py", lines)
    d = commit(root, "change after rename")
    r = check(root, cited)
    assert (r.status, r.changed_by) == ("stale", d) and "src/moved.py" in r.reason


def test_a_check_writes_nothing_in_the_repository(repo: tuple[Path, Citation]) -> None:
    """git diff against the working tree would refresh the index of a touched file; the
    check's git calls take no optional locks, so .git is left exactly as it was."""
    root, cited = repo
    write(root, "README", ["hello"])  # same content, new stat: the index is stale
    # ... and "racily clean": written no earlier than the index, so git keeps its entry
    # smudged and a diff against the working tree would refresh and rewrite the index
    # (it happened in 2 of 40 runs by chance; a time ahead makes it every run)
    ahead = time.time() + 3
    os.utime(root / "README", (ahead, ahead))
    git(root, "mv", "src/mod.py", "src/other.py")
    before = {p: p.read_bytes() for p in (root / ".git").rglob("*") if p.is_file()}
    r = check(root, cited)
    assert r.status == "valid" and r.updated is not None and r.updated.path == "src/other.py"
    assert {p: p.read_bytes() for p in (root / ".git").rglob("*") if p.is_file()} == before


def test_without_git_a_block_moved_without_its_blank_edges_is_found(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    write(root, "a.py", ["x = 1", "", "def g():", "    return 2", "", "y = 3"])
    cited = capture(root, parse("a.py:2-5"))  # blank, the function, blank
    write(root, "a.py", ["y = 3", "z = 4", "def g():", "  return   2", "x = 1"])
    r = check(root, cited)
    assert r.status == "valid" and r.updated is not None
    assert (r.updated.line_start, r.updated.line_end) == (3, 4)
    write(root, "a.py", ["def g():", "", "    return 2"])  # a blank line inside: changed
    assert check(root, cited).status == "stale"


def test_slow_git_leaves_the_working_tree_to_decide(
    repo: tuple[Path, Citation], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, cited = repo
    slow = tmp_path / "slowbin"
    slow.mkdir()
    (slow / "git").write_text("#!/bin/sh\nexec sleep 30\n", encoding="utf-8")
    (slow / "git").chmod(0o755)
    lines = lines_of(root, "src/mod.py")
    lines[12] = "changed"
    write(root, "src/mod.py", lines)
    monkeypatch.setenv("PATH", f"{slow}{os.pathsep}{os.environ['PATH']}")
    r = check(root, cited, budget_s=1.0)
    assert r.status == "stale" and "git was too slow" in r.reason
    (root / "src/mod.py").unlink()
    r = check(root, cited, budget_s=1.0)
    assert r.status == "stale" and "git was too slow" in r.reason
