"""The team tests run against a real PostgreSQL (tests/support/pg.py), never a mock.

``pg`` (the session's server) and ``hub_db`` (a fresh database per test) live in
tests/conftest.py: the agents' end-to-end team test uses them too."""

from __future__ import annotations

import pytest
from support.pg import HubDb, Team, make_team


@pytest.fixture
def team(hub_db: HubDb) -> Team:
    return make_team(hub_db)
