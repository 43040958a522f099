"""A real git repository in tmp_path for the citation tests: commit, move, rename, change
and delete a cited passage, and a memory citing it (captured as `llmem-hooks store --cite`
would)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from llmem_hooks.evidence.cite import capture, parse
from llmem_hooks.project import project_key
from llmem_hooks.store import MemoryStore
from llmem_hooks.store import citations as cited

GIT = [
    "git",
    "-c",
    "user.email=dev@example.com",
    "-c",
    "user.name=dev",
    "-c",
    "init.defaultBranch=main",
]
CITED = "src/net/retry.py"
BODY = [f"def helper_{i}():\n    return {i}\n" for i in range(30)]  # 60 lines
LIMIT = "MAX_RETRIES = 5  # the retry limit\n"


def git(repo: Path, *args: str) -> str:
    out = subprocess.run(
        [*GIT, *args], cwd=repo, check=True, capture_output=True, text=True, timeout=30
    )
    return out.stdout.strip()


def commit(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def make_repo(path: Path) -> Path:
    """A repository whose src/net/retry.py holds the retry limit at line 21."""
    (path / "src" / "net").mkdir(parents=True)
    (path / CITED).write_text("".join(BODY[:10]) + LIMIT + "".join(BODY[10:]))
    (path / "README.md").write_text("demo\n")
    git(path, "init", "-q")
    commit(path, "init")
    return path


def remember(
    store: MemoryStore,
    repo: Path,
    text: str = "the retry limit is MAX_RETRIES",
    spec: str = f"{CITED}:21",
    *,
    project: str | None = "repo",
) -> str:
    """A memory of ``repo``'s project (``project="repo"``) or global (None) citing ``spec``."""
    key = project_key(repo) if project == "repo" else project
    mid = store.add("fact", text, project=key)
    cited.add(store.db, mid, [capture(repo, parse(spec))])
    return mid
