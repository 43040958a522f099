"""``llmem-hooks store --cite`` and ``show``: the real CLI in a subprocess, in a real git
repository made for the test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from llmem_hooks.evidence.cite import text_hash
from llmem_hooks.store import MemoryStore
from llmem_hooks.store import citations as cited

EXE = str(Path(sys.executable).with_name("llmem-hooks"))
GIT = ["git", "-c", "user.email=dev@example.com", "-c", "user.name=dev"]
RETRY = "".join(f"line {i}\n" for i in range(1, 11)) + "MAX_RETRIES = 5\n" + "tail\n" * 5


@pytest.fixture
def code_repo(tmp_path: Path) -> Path:
    """A git repository with src/net/retry.py (16 lines) committed."""
    path = tmp_path / "code"
    (path / "src" / "net").mkdir(parents=True)
    (path / "src" / "net" / "retry.py").write_text(RETRY)
    for args in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "init"]):
        subprocess.run([*GIT, *args], cwd=path, check=True, capture_output=True, timeout=30)
    return path


def _run(home: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "LLMEM_DB"}
    env["LLMEM_HOME"] = str(home)
    return subprocess.run(
        [EXE, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )


def _head(repo: Path) -> str:
    out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True)
    return out.stdout.strip()


def test_store_cite_keeps_path_lines_hash_and_commit(llmem_home: Path, code_repo: Path) -> None:
    sub = code_repo / "src"  # any folder of the repository: paths are from its root
    r = _run(llmem_home, sub, "store", "the retry limit is MAX_RETRIES", "--cite",
             "src/net/retry.py:11", "--cite", "src/net/retry.py:9-12")  # fmt: skip
    assert r.returncode == 0, r.stderr
    mid = r.stdout.strip()
    with MemoryStore(llmem_home / "memory.db") as st:
        rows = cited.of_memory(st.db, mid)
    lines = RETRY.splitlines()
    assert [(c.spec(), c.text_hash, c.commit, c.status) for c in rows] == [
        ("src/net/retry.py:11", text_hash(lines[10:11]), _head(code_repo), "unchecked"),
        ("src/net/retry.py:9-12", text_hash(lines[8:12]), _head(code_repo), "unchecked"),
    ]

    shown = _run(llmem_home, code_repo, "show", mid[:8])
    assert shown.returncode == 0, shown.stderr
    assert "citations:           unchecked" in shown.stdout
    assert "  src/net/retry.py:11  unchecked" in shown.stdout
    as_json = json.loads(_run(llmem_home, code_repo, "show", mid, "--json").stdout)
    assert as_json["citation_state"] == "unchecked"
    assert [c["spec"] for c in as_json["citations"]] == [
        "src/net/retry.py:11",
        "src/net/retry.py:9-12",
    ]
    assert as_json["citations"][0]["commit"] == _head(code_repo)

    plain = _run(llmem_home, code_repo, "store", "we never deploy on fridays")
    assert "citations" not in _run(llmem_home, code_repo, "show", plain.stdout.strip()).stdout
    bare = json.loads(_run(llmem_home, code_repo, "show", plain.stdout.strip(), "--json").stdout)
    assert (bare["citation_state"], bare["citations"]) == ("not checkable", [])


def test_a_whole_file_citation_is_its_lines(llmem_home: Path, code_repo: Path) -> None:
    r = _run(llmem_home, code_repo, "store", "retry.py is small", "--cite", "src/net/retry.py")
    assert r.returncode == 0, r.stderr
    with MemoryStore(llmem_home / "memory.db") as st:
        (row,) = cited.of_memory(st.db, r.stdout.strip())
    assert (row.line_start, row.line_end) == (1, 16)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("/etc/passwd:1", "relative to the repository"),
        ("../code/src/net/retry.py:1", "relative to the repository"),
        ("src/net/missing.py:1", "no such file"),
        ("src/net/retry.py:17-20", "the file has 16 lines"),
        ("src/net/retry.py:3-1", "START-END"),
        ("src/net/retry.py:abc", "no such file"),
        ("link/passwd", "no such file"),  # a symlink out of the repository
        ("src", "no such file"),  # a folder is not a file
    ],
)
def test_bad_citations_store_nothing(
    llmem_home: Path, code_repo: Path, tmp_path: Path, spec: str, message: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "passwd").write_text("secret-ish\n")
    (code_repo / "link").symlink_to(outside)
    r = _run(llmem_home, code_repo, "store", "a claim", "--cite", "src/net/retry.py:1",
             "--cite", spec)  # fmt: skip
    assert r.returncode == 2
    (line,) = r.stderr.splitlines()
    assert line.startswith("error: ") and message in line
    listed = _run(llmem_home, code_repo, "list", "--json")
    assert listed.returncode in (0, 1) and "a claim" not in listed.stdout


def test_cite_outside_a_git_repository(llmem_home: Path, tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "a.py").write_text("x = 1\n")
    r = _run(llmem_home, tmp_path / "plain", "store", "x is one", "--cite", "a.py:1")
    assert r.returncode == 2
    assert "not inside a git repository" in r.stderr


def test_export_import_round_trip_keeps_citations(
    llmem_home: Path, code_repo: Path, tmp_path: Path
) -> None:
    r = _run(llmem_home, code_repo, "store", "the retry limit is 5", "--cite",
             "src/net/retry.py:11")  # fmt: skip
    mid = r.stdout.strip()
    dump = tmp_path / "backup.json"
    assert _run(llmem_home, code_repo, "export", str(dump)).returncode == 0
    other = tmp_path / "other-home"
    back = _run(other, code_repo, "import", str(dump))
    assert back.returncode == 0, back.stderr
    shown = json.loads(_run(other, code_repo, "show", mid, "--json").stdout)
    assert [c["spec"] for c in shown["citations"]] == ["src/net/retry.py:11"]


def test_a_huge_file_is_not_read(llmem_home: Path, code_repo: Path) -> None:
    with (code_repo / "big.log").open("wb") as f:
        f.truncate(21 * 1024 * 1024)  # sparse: cheap to make, too big to cite
    r = _run(llmem_home, code_repo, "store", "the log is big", "--cite", "big.log:1")
    assert r.returncode == 2 and "under 20 MB" in r.stderr
