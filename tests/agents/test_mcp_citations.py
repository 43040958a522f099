"""``memory_remember`` with ``citations`` and ``memory_get`` showing them: the official MCP
client driving ``llmem-hooks mcp`` (a real subprocess) in a real git repository."""

from __future__ import annotations

import subprocess
from pathlib import Path

from support.mcp_client import run_calls

from llmem_hooks.evidence.cite import text_hash
from llmem_hooks.service.operations import QueryService
from llmem_hooks.store import MemoryStore
from llmem_hooks.store import citations as cited

CODE = "def retry():\n    limit = 5\n    return limit\n"


def _repo_with_code(repo: Path) -> Path:
    (repo / "net").mkdir()
    (repo / "net" / "retry.py").write_text(CODE)
    git = ["git", "-c", "user.email=dev@example.com", "-c", "user.name=dev"]
    for args in (["add", "."], ["commit", "-q", "-m", "retry"]):
        subprocess.run([*git, *args], cwd=repo, check=True, capture_output=True, timeout=30)
    return repo


def _id(text: str) -> str:
    return text.split("[", 1)[1].split("]", 1)[0]


def test_remember_with_citations_then_get(repo: Path, llmem_home: Path) -> None:
    _repo_with_code(repo)
    tools, out = run_calls(
        [
            (
                "memory_remember",
                {"content": "The retry limit is 5, set in net/retry.py",
                 "citations": ["net/retry.py:2", "README.md"]},
            ),
            ("memory_remember", {"content": "Deploys go out on Tuesdays"}),
        ],
        repo / "net",  # the server's folder: a subfolder of the repository
    )  # fmt: skip
    remember = next(t for t in tools if t.name == "memory_remember")
    assert remember.inputSchema["properties"]["citations"]["type"] == "array"
    (err, stored), (err2, plain) = out
    assert not err and not err2, stored
    mid, bare = _id(stored), _id(plain)
    with MemoryStore(llmem_home / "memory.db") as st:
        full = st.resolve_id(mid)
        rows = cited.of_memory(st.db, full)
    assert [(c.spec(), c.text_hash) for c in rows] == [
        ("net/retry.py:2", text_hash(["    limit = 5"])),
        ("README.md:1", text_hash(["demo"])),
    ]

    _, out = run_calls([("memory_get", {"ids": [mid, bare]})], repo)
    ((err, text),) = out
    assert not err
    first, second = text.split("\n\n")[:2]
    assert "citation_state: unchecked" in first
    assert "citations: net/retry.py:2 unchecked; README.md:1 unchecked" in first
    assert "citation_state: not checkable" in second and "citations:" not in second


def test_a_bad_citation_stores_nothing(repo: Path, llmem_home: Path) -> None:
    _repo_with_code(repo)
    _, out = run_calls(
        [
            ("memory_remember", {"content": "Secret config lives in /etc",
                                 "citations": ["net/retry.py:2", "../../etc/passwd:1"]}),
            ("memory_remember", {"content": "Retry limit in line 40",
                                 "citations": ["net/retry.py:40"]}),
            ("memory_remember", {"content": "Too many", "citations": ["net/retry.py:1"] * 21}),
        ],
        repo,
    )  # fmt: skip
    for err, text in out:
        assert err, text
        assert len(text.splitlines()) == 1
    assert "relative to the repository" in out[0][1]
    assert "the file has 3 lines" in out[1][1]
    assert "at most 20" in out[2][1]
    with MemoryStore(llmem_home / "memory.db") as st:
        assert st.count(valid_only=False) == 0


def test_the_service_shows_citations_as_data(repo: Path, llmem_home: Path) -> None:
    """``get`` over the service (what the OpenCode plugin reads): the state and one line."""
    _repo_with_code(repo)
    with MemoryStore(llmem_home / "memory.db") as st:
        svc = QueryService(st)
        r = svc.remember("limit is 5", directory=str(repo), citations=["net/retry.py:2-3"])
        assert r["status"] == "stored"
        dup = svc.remember("limit is 5", directory=str(repo), citations=["net/retry.py:1"])
        assert dup["status"] == "duplicate"  # the known memory gains the citation
        (mem,) = svc.get([r["id"]], directory=str(repo))["memories"]
        assert mem["citation_state"] == "unchecked"
        assert mem["citations"] == "net/retry.py:2-3 unchecked; net/retry.py:1 unchecked"
