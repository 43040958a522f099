"""A tool's file path made repository-relative (`evidence.in_repo`): real folders, a real
git repository, symlinks."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmem_hooks.errors import ValidationError
from llmem_hooks.evidence.in_repo import relative, touched_paths, work_tree


def test_relative_from_anywhere_in_the_repository(repo: Path, tmp_path: Path) -> None:
    (repo / "src" / "deep").mkdir(parents=True)
    (repo / "src" / "app.py").write_text("x\n")
    src = str(repo / "src")
    assert work_tree(str(repo / "src" / "deep")) == str(repo.resolve())
    assert relative(str(repo), "src/app.py") == "src/app.py"
    assert relative(src, "app.py") == "src/app.py"
    assert relative(src, str(repo / "src" / "app.py")) == "src/app.py"
    assert relative(None, str(repo / "src" / "app.py")) == "src/app.py"
    assert relative(src, "./deep/../app.py") == "src/app.py"
    assert relative(src, "not-yet-there.py") == "src/not-yet-there.py"  # a file being created
    assert relative(str(repo), ".") is None  # the repository itself
    for outside in ("../../x.py", "/etc/passwd", str(tmp_path / "elsewhere.py"), "..", "/"):
        assert relative(src, outside) is None, outside
    assert relative(None, "src/app.py") is None  # relative without a folder: no key
    assert relative("relative/dir", "app.py") is None
    assert relative(str(tmp_path / "not-a-repo"), "a.py") is None


def test_a_symlink_out_of_the_repository_has_no_key(repo: Path, tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("s\n")
    (repo / "link.txt").symlink_to(tmp_path / "secret.txt")
    (repo / "inner.txt").write_text("i\n")
    (repo / "alias.txt").symlink_to(repo / "inner.txt")
    assert relative(str(repo), "link.txt") is None
    assert relative(str(repo), "alias.txt") == "inner.txt"


@pytest.mark.parametrize("bad", ["", "   ", "a\x00b", "a\nb", "x" * 5000, 3, None])
def test_bad_paths_are_one_line_errors(repo: Path, bad: object) -> None:
    with pytest.raises(ValidationError) as info:
        relative(str(repo), bad)  # type: ignore[arg-type]
    assert "\n" not in str(info.value)


def test_touched_paths_keep_what_is_inside(repo: Path) -> None:
    files = ["README.md", str(repo / "README.md"), "/etc/hosts", "a\x00b", "x" * 5000, "../y"]
    assert touched_paths(str(repo), files) == ["README.md"]
    assert touched_paths(None, files) == []
