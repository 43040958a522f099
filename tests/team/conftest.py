"""The team tests run against a real PostgreSQL (tests/support/pg.py), never a mock."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.pg import (
    HubDb,
    PgCluster,
    Team,
    fresh_database,
    make_team,
    server_folder,
    start_cluster,
)


@pytest.fixture(scope="session")
def pg() -> Iterator[PgCluster]:
    """One PostgreSQL 16 (+ pgvector) for the session, on a Unix socket, passwords on."""
    pytest.importorskip("psycopg", reason="the team extra (psycopg) is not installed")
    pytest.importorskip("pgserver", reason="pgserver (PostgreSQL as a wheel) is not installed")
    with server_folder() as folder:
        cluster = start_cluster(folder)
        try:
            yield cluster
        finally:
            cluster.stop()


@pytest.fixture
def hub_db(pg: PgCluster) -> Iterator[HubDb]:
    """A fresh database on the session's server for one test."""
    yield from fresh_database(pg)


@pytest.fixture
def team(hub_db: HubDb) -> Team:
    return make_team(hub_db)
