"""``memory_search`` with a ``path`` (issue 22 §3): the official MCP client driving
``llmem-hooks mcp`` (a real subprocess) in a real git repository; what is known about a
file, with the query optional, and bad paths as one-line errors."""

from __future__ import annotations

import subprocess
from pathlib import Path

from support.mcp_client import run_calls

CODE = "def retry():\n    limit = 5\n    return limit\n"


def _repo_with_code(repo: Path) -> Path:
    (repo / "net").mkdir()
    (repo / "net" / "retry.py").write_text(CODE)
    git = ["git", "-c", "user.email=dev@example.com", "-c", "user.name=dev"]
    for args in (["add", "."], ["commit", "-q", "-m", "retry"]):
        subprocess.run([*git, *args], cwd=repo, check=True, capture_output=True, timeout=30)
    return repo


def test_search_by_path(repo: Path, llmem_home: Path) -> None:
    _repo_with_code(repo)
    tools, out = run_calls(
        [
            ("memory_remember", {"content": "The retry limit is 5 in net/retry.py",
                                 "citations": ["net/retry.py:2"]}),
            ("memory_remember", {"content": "Deploys go out on Tuesdays"}),
            ("memory_search", {"path": "net/retry.py"}),
            ("memory_search", {"path": str(repo / "net" / "retry.py"), "query": "limit"}),
            ("memory_search", {"path": "net/retry.py", "query": "tuesdays"}),
            ("memory_search", {"path": "README.md"}),
            ("memory_search", {"query": "deploys"}),
        ],
        repo,
    )  # fmt: skip
    search = next(t for t in tools if t.name == "memory_search")
    props = search.inputSchema["properties"]
    assert "path" in props and "path" not in search.inputSchema["required"]
    assert search.inputSchema["required"] == []
    assert all(not err for err, _ in out), out
    by_path, absolute, narrowed, none, plain = (text for _, text in out[2:])
    assert by_path.startswith("1 memories about net/retry.py, citing it")
    assert "The retry limit is 5" in by_path and "Deploys" not in by_path
    assert "The retry limit is 5" in absolute and "matching 'limit'" in absolute
    assert narrowed.startswith("Nothing known about net/retry.py matching 'tuesdays'")
    assert none == "Nothing known about README.md."
    assert "Deploys go out" in plain


def test_bad_paths_are_one_line_errors(repo: Path, llmem_home: Path) -> None:
    _repo_with_code(repo)
    _, out = run_calls(
        [
            ("memory_search", {"path": "../../etc/passwd"}),
            ("memory_search", {"path": "/etc/passwd"}),
            ("memory_search", {"path": "x" * 5000}),
            ("memory_search", {"path": "net/\x00retry.py"}),
            ("memory_search", {}),
            ("memory_search", {"path": "net/retry.py", "limit": 0}),
        ],
        repo,
    )
    for err, text in out:
        assert err and "\n" not in text and len(text) <= 400, text
    assert "inside the repository" in out[0][1] and "inside the repository" in out[1][1]
    assert "longer than 4096" in out[2][1]
    assert "control characters" in out[3][1]
    assert "needs a query, or a path" in out[4][1]
