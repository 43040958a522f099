"""Ids stay in their project (issue 18, item 7): memory_get, memory_forget and
memory_timeline from an agent in project A reach A's memories and global ones, never
project B's, unless the call says ``any_project``. Through the real MCP server (stdio,
the official client) and the real socket."""

from __future__ import annotations

from pathlib import Path

from support.mcp_client import run_calls

from llmem_hooks.project import project_key
from llmem_hooks.service import client
from llmem_hooks.service import protocol as proto
from llmem_hooks.service.operations import QueryService
from llmem_hooks.service.server import ServiceServer
from llmem_hooks.store import MemoryStore


def _other_project(tmp_path: Path) -> Path:
    other = tmp_path / "other"
    other.mkdir()
    return other


def _seed(db: Path, repo: Path, other: Path) -> tuple[str, str, str]:
    """A memory of project A (``repo``), one of project B (``other``), one global."""
    with MemoryStore(db) as st:
        mine = st.add("fact", "MINE the build uses make all", project=project_key(repo))
        theirs = st.add(
            "fact",
            "THEIRS the billing token lives in vault",
            project=project_key(other),
            session_id="ses_b",
        )
        st.add(
            "fact",
            "THEIRS-NEXT rotation is monthly",
            project=project_key(other),
            session_id="ses_b",
        )
        shared = st.add("preference", "GLOBAL answer in English")
    return mine, theirs, shared


def test_mcp_tools_stay_in_the_project(repo: Path, tmp_path: Path, llmem_home: Path) -> None:
    other = _other_project(tmp_path)
    db = llmem_home / "memory.db"
    llmem_home.mkdir(parents=True, exist_ok=True)
    mine, theirs, shared = _seed(db, repo, other)
    _, out = run_calls(
        [
            ("memory_get", {"ids": [mine[:8], theirs[:8], shared[:8]]}),
            ("memory_timeline", {"id": theirs[:8]}),
            ("memory_forget", {"id": theirs[:8], "reason": "crossing projects"}),
            ("memory_get", {"ids": [theirs[:8]], "any_project": True}),
            ("memory_timeline", {"id": theirs[:8], "any_project": True}),
        ],
        repo,
    )
    (_, got), (tl_err, tl), (forget_err, forgot), (_, crossed), (_, tl_crossed) = out
    assert "MINE" in got and "GLOBAL" in got
    assert "THEIRS" not in got and "not in this project" in got
    assert tl_err and "THEIRS" not in tl and "not in this project" in tl
    assert forget_err and "not in this project" in forgot
    with MemoryStore(db) as st:
        assert st.get(theirs)["valid_until"] is None  # type: ignore[index]  # not forgotten
    assert "THEIRS the billing token" in crossed  # an explicit any_project crosses
    assert "THEIRS-NEXT" in tl_crossed
    _, out = run_calls(
        [("memory_forget", {"id": theirs[:8], "reason": "moved", "any_project": True})], repo
    )
    assert out[0] == (False, f"Forgot [{theirs[:8]}].")


def test_socket_calls_stay_in_the_project(repo: Path, tmp_path: Path, llmem_home: Path) -> None:
    other = _other_project(tmp_path)
    db = tmp_path / "scope.db"
    mine, theirs, shared = _seed(db, repo, other)
    with MemoryStore(db) as store:
        service = QueryService(store, {"ollama": {"enabled": False}})
        with ServiceServer(service, proto.socket_path(llmem_home)):
            here = {"directory": str(repo)}
            got = client.call("get", {"ids": [mine, theirs, shared], **here})
            assert {m["full_id"] for m in got["memories"]} == {mine, shared}
            assert [m["id"] for m in got["missing"]] == [theirs]
            for method, params in (
                ("forget", {"id": theirs, "reason": "x"}),
                ("timeline", {"id": theirs}),
            ):
                try:
                    client.call(method, {**params, **here})
                except client.ServiceCallError as exc:
                    assert exc.code == proto.NOT_FOUND and "not in this project" in str(exc)
                else:
                    raise AssertionError(f"{method} crossed into another project")
            # The timeline of our own memory shows no other project's neighbours either.
            items = client.call("timeline", {"id": mine, **here})["items"]
            assert all("THEIRS" not in i["line"] for i in items)
            # Explicit crossings: any_project, or naming the project.
            crossed = client.call("get", {"ids": [theirs], "any_project": True, **here})
            assert crossed["memories"][0]["full_id"] == theirs
            named = client.call("get", {"ids": [theirs], "project": project_key(other)})
            assert named["memories"][0]["full_id"] == theirs
            try:
                client.call("get", {"ids": [theirs], "any_project": "yes", **here})
            except client.ServiceCallError as exc:
                assert exc.code == proto.BAD_PARAMS
            else:
                raise AssertionError("any_project must be a boolean")
            gone = client.call("forget", {"id": theirs, "reason": "moved", "any_project": True})
            assert gone["status"] == "forgotten"
        service.close()
