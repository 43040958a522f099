"""End-to-end: a decision learned in Alice's OpenCode session is in Bob's next Copilot
session, through their two sidecars and one PostgreSQL hub; Carol, on the hub but not on
the project, gets nothing.

Real OpenCode and Copilot CLI binaries against the fake provider, three LLMEM_HOMEs with
a sidecar each (their team threads sync every second), one repository cloned on every
machine, and pgserver's PostgreSQL with passwords on (tests/support/pg.py).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from copilot_harness import CopilotEnv, last_user_text, session_context
from oc_harness import OpenCodeEnv, wait_until
from support.pg import HubDb, owner_role

pytestmark = [pytest.mark.e2e, pytest.mark.opencode, pytest.mark.copilot]

TEAM_CONFIG = "team:\n  interval_seconds: 1\n"
SYNC_WAIT_S = 60


def _clone_into(world: CopilotEnv, origin: Path) -> None:
    """The teammate works in a clone of the same repository (same root commit, so the
    same project on both machines)."""
    shutil.rmtree(world.repo)
    subprocess.run(
        ["git", "clone", "-q", str(origin), str(world.repo)],
        check=True,
        timeout=30,
        capture_output=True,
    )


def _pnpm(world: OpenCodeEnv | CopilotEnv) -> list[dict[str, Any]]:
    return [m for m in world.memories() if "pnpm" in m["content"].lower()]


def test_alices_decision_reaches_bobs_copilot_session_and_not_carol(
    make_opencode_env: Callable[..., OpenCodeEnv],
    make_copilot_env: Callable[..., CopilotEnv],
    hub_db: HubDb,
) -> None:
    alice = make_opencode_env()
    bob = make_copilot_env()
    carol = make_copilot_env()
    for world in (bob, carol):
        _clone_into(world, alice.repo)
    for world in (alice, bob, carol):
        with (world.llmem_home / "config.yaml").open("a") as fh:
            fh.write(TEAM_CONFIG)

    role, password = owner_role(hub_db)
    alice.llmem("team", "init", hub_db.dsn(role, password))
    bob_role = f"bob_{hub_db.name}"
    hub_db.roles.append(bob_role)
    added = alice.llmem("team", "members", "add", bob_role, "--create").stdout
    bob.llmem("team", "join", added.split("team join '")[1].split("'")[0])
    carol_role, carol_pw = hub_db.make_role("carol", member=True)
    carol.llmem("team", "join", hub_db.dsn(carol_role, carol_pw))

    alice.opencode("session", "list")
    sidecars = [alice.sidecar().start(), bob.sidecar().start(), carol.sidecar().start()]
    try:
        alice.run("We decided to use pnpm instead of npm for the widgets monorepo.", split=False)
        wait_until(lambda: _pnpm(alice), SYNC_WAIT_S, 0.3, "Alice's decision in her store")
        (pulled,) = wait_until(
            lambda: _pnpm(bob),
            SYNC_WAIT_S,
            0.5,
            f"the decision on Bob's machine\n{bob.sidecar_log()}",
        )
        assert pulled["entered_by"] == role and pulled["source"] == "team"

        run = bob.prompt("Which package manager do we use for the widgets monorepo?")
        seen = " ".join(last_user_text(r) + session_context(r) for r in run.requests)
        assert "pnpm" in seen.lower(), seen[:3000]

        # Carol's sidecar synced all along: nothing of the project reached her.
        cr = carol.prompt("Which package manager do we use for the widgets monorepo?")
        seen_c = " ".join(last_user_text(r) + session_context(r) for r in cr.requests)
        assert "pnpm" not in seen_c.lower()
        assert not _pnpm(carol)
        with hub_db.connect(carol_role, carol_pw) as conn:
            n = conn.execute("SELECT count(*) FROM llmem.memories").fetchone()[0]
            assert n == 0
    finally:
        for sc in sidecars:
            sc.stop()
