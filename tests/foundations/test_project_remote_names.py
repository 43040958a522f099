"""A project's readable name (`llmem_hooks.project.project_name`, issue 20 §2): the git
remote's ``owner/repo`` (origin first; https, ssh ``git@host:owner/repo.git`` and
``ssh://``; ``.git`` stripped; credentials never shown), else the repository folder's
name. Real repositories, made with ``git init`` and ``git remote add`` in tmp."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from llmem_hooks.project import name_from_remote, project_key, project_label, project_name

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
}


def git(cwd: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, **GIT_ENV},
    )
    return out.stdout.strip()


def repo(path: Path, *remotes: tuple[str, str], commit: bool = True) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q")
    for name, url in remotes:
        git(path, "remote", "add", name, url)
    if commit:
        git(path, "commit", "-q", "--allow-empty", "-m", "root")
    return path


TOKEN = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
URLS = [
    ("https://github.com/acme/api.git", "acme/api"),
    ("https://github.com/acme/api", "acme/api"),
    ("https://github.com/acme/api/", "acme/api"),
    (f"https://user:{TOKEN}@github.com/acme/api.git", "acme/api"),
    (f"https://{TOKEN}@github.com/acme/api", "acme/api"),
    ("git@github.com:acme/api.git", "acme/api"),
    ("github.com:acme/api", "acme/api"),
    ("ssh://git@github.com/acme/api.git", "acme/api"),
    ("ssh://git@git.example.com:2222/acme/api.git", "acme/api"),
    ("git+ssh://git@example.com/acme/api.git", "acme/api"),
    ("https://gitlab.com/group/sub/api.git", "sub/api"),
    ("https://github.com/acme/api.git?ref=main#frag", "acme/api"),
]


@pytest.mark.parametrize(("url", "name"), URLS)
def test_a_remote_url_gives_owner_repo(url: str, name: str) -> None:
    assert name_from_remote(url) == name


@pytest.mark.parametrize(
    "url",
    [
        "/srv/git/api.git",
        "../api",
        "file:///srv/acme/api.git",
        "https://github.com/api",
        "git@github.com:api.git",
        "https://host/ac me/api",
        "https://host/acme/<script>",
        "https://host/acme/..",
        "",
        "x" * 5000,
    ],
)
def test_a_local_or_odd_url_gives_no_remote_name(url: str) -> None:
    assert name_from_remote(url) is None


def test_a_token_in_the_url_never_reaches_the_name(tmp_path: Path) -> None:
    url = f"https://user:{TOKEN}@github.com/acme/api.git"
    r = repo(tmp_path / "checkout", ("origin", url))
    name = project_name(r)
    assert name == "acme/api"
    assert TOKEN not in (name or "") and "user" not in (name or "")


def test_origin_comes_first_whatever_the_order(tmp_path: Path) -> None:
    r = repo(
        tmp_path / "fork",
        ("upstream", "git@github.com:acme/api.git"),
        ("origin", "git@github.com:me/api-fork.git"),
    )
    assert project_name(r) == "me/api-fork"


def test_without_origin_another_remote_names_it(tmp_path: Path) -> None:
    r = repo(tmp_path / "x", ("upstream", "ssh://git@example.com/acme/tools.git"))
    assert project_name(r) == "acme/tools"


def test_without_a_remote_the_repository_folder_names_it_from_anywhere_inside(
    tmp_path: Path,
) -> None:
    r = repo(tmp_path / "billing-service")
    (r / "src" / "deep").mkdir(parents=True)
    assert project_name(r) == "billing-service"
    assert project_name(r / "src" / "deep") == "billing-service"
    assert project_key(r / "src" / "deep") == project_key(r)


def test_a_worktree_has_its_repositorys_name(tmp_path: Path) -> None:
    r = repo(tmp_path / "ledger")
    git(r, "worktree", "add", "-q", str(tmp_path / "ledger-feature"), "-b", "feature")
    assert project_name(tmp_path / "ledger-feature") == "ledger"
    assert project_key(tmp_path / "ledger-feature") == project_key(r)


def test_a_local_path_remote_falls_back_to_the_folder(tmp_path: Path) -> None:
    r = repo(tmp_path / "notes", ("origin", str(tmp_path / "bare.git")))
    assert project_name(r) == "notes"


def test_a_repository_without_commits_and_a_plain_folder(tmp_path: Path) -> None:
    assert project_name(repo(tmp_path / "fresh", commit=False)) == "fresh"
    plain = tmp_path / "scratch"
    plain.mkdir()
    assert project_name(plain) == "scratch"
    assert project_name(tmp_path / "missing") is None


def test_label_a_name_a_short_sha_or_the_key() -> None:
    sha = "a" * 40
    assert project_label(sha, {sha: "acme/api"}) == "acme/api"
    assert project_label(sha, {}) == "a" * 12
    assert project_label("/home/me/scratch", None) == "/home/me/scratch"
    assert project_label(None, {sha: "x"}) is None
