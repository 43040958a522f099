"""The hub on Debian's own PostgreSQL (15, no pgvector): everything but vectors works.

Debian's server is started by the test (initdb in a temp folder, a Unix socket, passwords
required), so this checks the schema's no-vector path on a real server that lacks the
extension, not on one where it was only switched off. Skips with a reason where Debian's
PostgreSQL is not installed (`.ci/run` installs it).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from machines import Machine, join_line, make_origin
from support.pg import DEBIAN_PG, PgCluster, server_folder, start_debian_cluster

from llmem_hooks.store.hub import Hub, HubMemory

pytest.importorskip("psycopg", reason="the team extra (psycopg) is not installed")
if not (DEBIAN_PG / "initdb").exists():
    pytest.skip("Debian's postgresql-15 is not installed", allow_module_level=True)


@pytest.fixture(scope="module")
def debian(pg: PgCluster) -> Iterator[PgCluster]:
    """Debian's server (``pg`` first: as root it runs as pgserver's system user)."""
    with server_folder() as folder:
        cluster = start_debian_cluster(folder)
        try:
            yield cluster
        finally:
            cluster.stop()


def test_the_whole_flow_works_without_pgvector(debian: PgCluster, tmp_path: Path) -> None:
    import psycopg

    with psycopg.connect(debian.dsn(), autocommit=True) as conn:
        assert conn.execute("SHOW server_version_num").fetchone()[0] < "160000"
        assert not conn.execute(
            "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'"
        ).fetchone()
        conn.execute("CREATE ROLE lead LOGIN CREATEROLE PASSWORD 'lead-pw-1'")
        conn.execute("CREATE DATABASE teamhub OWNER lead")
    lead_dsn = debian.dsn("lead", "lead-pw-1", db="teamhub")
    with Hub.connect(lead_dsn) as hub:
        hub.migrate()
        assert not hub.has_vectors()

    # The whole flow through the CLI: init, a member created and joined, a memory across.
    origin = make_origin(tmp_path)
    a, b = Machine("lead", tmp_path / "a", origin), Machine("dev", tmp_path / "b", origin)
    a.cli("team", "init", lead_dsn)
    added = a.cli("team", "members", "add", "dev1", "--create").stdout
    b.cli("team", "join", join_line(added))
    a.store("Releases are tagged vYYYY.MM.N from the main branch.")
    assert a.sync()["pushed"] == 1
    assert b.sync()["pulled"] == 1
    assert [m for m in b.memories() if "vYYYY.MM.N" in m["content"]]
    hits = b.cli("search", "--team", "how are releases tagged", "--json").stdout
    assert "vYYYY.MM.N" in hits
    with Hub.connect(lead_dsn) as hub:
        found = hub.search([a.project()], ["releases", "tagged"], limit=5, embedding=[0.1] * 8)
        assert [m.content for m, _ in found] == [
            "Releases are tagged vYYYY.MM.N from the main branch."
        ]
        assert isinstance(found[0][0], HubMemory)
