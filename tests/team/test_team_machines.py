"""Team memory across machines, through the real CLI and a real PostgreSQL hub.

Each machine has its own HOME, LLMEM_HOME and clone of one repository (tests/team/machines.py).
Alice owns the hub's database and runs ``team init``; Bob is added with ``team members add
--create`` and joins with the line it prints; Carol may sign in to the hub but is a member
of nothing. What is asserted is what each person (and each PostgreSQL role, queried
directly) can see.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from machines import Machine, join_line, make_origin
from support.pg import HubDb, owner_role
from support.secrets_corpus import secret_cases, seed_from_env

from llmem_hooks.errors import ValidationError
from llmem_hooks.redact import redact_secrets
from llmem_hooks.store import MemoryStore


class World:
    """Alice (admin), Bob (member, joined), Carol (a hub login, member of nothing)."""

    def __init__(self, root: Path, hub_db: HubDb) -> None:
        self.hub_db = hub_db
        origin = make_origin(root)
        self.alice_role, self.alice_pw = owner_role(hub_db)
        self.a = Machine("alice", root / "alice", origin)
        self.b = Machine("bob", root / "bob", origin)
        self.c = Machine("carol", root / "carol", origin)
        self.a.cli("team", "init", hub_db.dsn(self.alice_role, self.alice_pw))
        self.bob_role = f"bob_{hub_db.name}"
        hub_db.roles.append(self.bob_role)  # dropped (first) with the database
        added = self.a.cli("team", "members", "add", self.bob_role, "--create").stdout
        self.bob_dsn = join_line(added)
        self.b.cli("team", "join", self.bob_dsn)
        self.carol_role, self.carol_pw = hub_db.make_role("carol", member=True)
        self.c.cli("team", "join", hub_db.dsn(self.carol_role, self.carol_pw))
        self.key = self.a.project()

    def raw(self, role: str, password: str) -> Any:
        return self.hub_db.connect(role, password)

    def hub_rows(self) -> list[dict[str, Any]]:
        """Every memory row on the hub, read as the superuser (what the server holds)."""
        with self.hub_db.cluster.admin(db=self.hub_db.name) as conn:
            cur = conn.execute(
                "SELECT id, author, content, revision, deleted_at, supersedes FROM llmem.memories"
            )
            cols = [d.name for d in cur.description]
            return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


@pytest.fixture
def world(tmp_path: Path, hub_db: HubDb) -> World:
    return World(tmp_path, hub_db)


def shared_state(m: Machine, key: str) -> dict[str, str]:
    """The valid memories of the project a machine holds that came from or went to the
    team: content -> type (what every machine must agree on)."""
    with sqlite3.connect(m.db()) as conn:
        rows = conn.execute(
            "SELECT m.content, m.type FROM memories m JOIN team_links l ON l.memory_id = m.id"
            " WHERE m.project = ? AND m.valid_until IS NULL AND l.unshared_at IS NULL",
            (key,),
        ).fetchall()
    return dict(rows)


def test_a_decision_reaches_a_teammate_and_nothing_reaches_an_outsider(world: World) -> None:
    a, b, c = world.a, world.b, world.c
    mid = a.store("We use pnpm, not npm, for the widgets monorepo (decided 2026-11).")
    assert a.sync()["pushed"] == 1
    assert b.sync()["pulled"] == 1
    c.sync()

    (got,) = [m for m in b.memories() if "pnpm" in m["content"]]
    assert got["entered_by"] == world.alice_role and got["project"] == world.key
    assert got["source"] == "team" and got["type"] == "decision"
    hits = json.loads(b.cli("search", "which package manager pnpm", "--json").stdout)
    assert hits and "pnpm" in hits[0]["content"]

    # Carol, through every command: nothing.
    assert not [m for m in c.memories() if "pnpm" in m["content"]]
    assert "pnpm" not in c.cli("search", "pnpm", check=False).stdout
    refused = c.cli("search", "pnpm", "--team", check=False)
    assert refused.returncode != 0 and "pnpm" not in refused.stdout
    assert refused.stderr.count("\n") == 1, refused.stderr
    listed = c.cli("team", "members", "list", "--project", world.key, check=False)
    assert world.alice_role not in listed.stdout
    status = c.json("team", "status")
    assert status["reachable"] is True and status["projects"] == []

    # ... and PostgreSQL itself, queried directly as Carol's role.
    with world.raw(world.carol_role, world.carol_pw) as conn:
        for table in ("memories", "mutations", "members"):
            n = conn.execute(f"SELECT count(*) FROM llmem.{table} WHERE project = %s", (world.key,))
            assert n.fetchone()[0] == 0, table
        assert conn.execute("SELECT count(*) FROM llmem.projects WHERE key = %s", (world.key,))
        with pytest.raises(Exception, match=r"row-level security|permission denied"):
            conn.execute(
                "INSERT INTO llmem.memories(id, project, type, content, revision, updated_at,"
                " device) VALUES ('x', %s, 'fact', 'planted', 1, now(), 'd')",
                (world.key,),
            )
    # Bob sees it directly too (he is a member), so the check above is not vacuous.
    from psycopg.conninfo import conninfo_to_dict

    bob_pw = str(conninfo_to_dict(world.bob_dsn)["password"])
    with world.raw(world.bob_role, bob_pw) as conn:
        n = conn.execute("SELECT count(*) FROM llmem.memories WHERE project = %s", (world.key,))
        assert n.fetchone()[0] == 1
    assert mid


def test_removed_member_sees_nothing_more_and_leaving_keeps_local_memories(world: World) -> None:
    a, b = world.a, world.b
    a.store("The widgets API listens on port 8443 in staging.")
    a.sync()
    b.sync()
    a.cli("team", "members", "remove", world.bob_role)
    a.store("The widgets API moved to port 9443 in staging.")
    a.sync()
    report = b.sync()
    assert report["pulled"] == 0 and world.key in report["left"]
    assert not [m for m in b.memories() if "9443" in m["content"]]
    assert [m for m in b.memories() if "8443" in m["content"]]  # what was pulled stays
    b.cli("team", "leave")
    assert not (b.llmem_home / "team" / "pgpass").exists()
    assert [m for m in b.memories() if "8443" in m["content"]]


def test_500_changes_while_the_hub_is_down_arrive_once(world: World) -> None:
    """Two machines change 250 memories each while the hub is stopped; nothing is lost or
    doubled when it comes back, and both end with the same shared memory."""
    a, b = world.a, world.b
    cluster = world.hub_db.cluster
    cluster.stop()
    try:
        for m, who in ((a, "alpha"), (b, "beta")):
            store = MemoryStore(m.db())
            try:
                ids = [
                    store.add(
                        "decision",
                        f"{who} service {i} uses queue q-{who}-{i}.",
                        project=m.project(),
                    )
                    for i in range(200)
                ]
                for i in ids[:30]:  # edits
                    mem = store.get(i)
                    assert mem is not None
                    store.update(i, content=mem["content"] + " Retries: 3.")
                for i in ids[30:50]:  # deletes
                    store.invalidate(i, "no longer true")
            finally:
                store.close()
        down = a.cli("team", "sync", check=False)
        assert down.returncode != 0 and down.stderr.count("\n") == 1, down.stderr
        assert world.alice_pw not in down.stderr
    finally:
        cluster.start()
    for m in (a, b, a, b):
        m.sync()
    rows = world.hub_rows()
    live = [r for r in rows if r["deleted_at"] is None]
    assert len(rows) == 400 and len(live) == 360
    assert len({r["content"] for r in live}) == 360
    assert sum("Retries: 3." in r["content"] for r in live) == 60
    assert shared_state(a, world.key) == shared_state(b, world.key)
    assert len(shared_state(a, world.key)) == 360


@pytest.mark.parametrize("point", ["team-mid-push", "team-pushed"])
def test_a_push_killed_mid_batch_loses_and_doubles_nothing(world: World, point: str) -> None:
    a, b = world.a, world.b
    store = MemoryStore(a.db())
    try:
        for i in range(120):
            store.add(
                "procedure", f"To rebuild shard {i}, run make shard-{i}.", project=a.project()
            )
    finally:
        store.close()
    killed = a.cli("team", "sync", check=False, env={"LLMEM_FAULT": point})
    assert killed.returncode == 137, killed.stderr
    a.sync()
    a.sync()
    b.sync()
    rows = world.hub_rows()
    assert len(rows) == 120 and len({r["id"] for r in rows}) == 120
    assert shared_state(a, world.key) == shared_state(b, world.key)
    assert a.json("team", "status")["outbox"] == 0


def test_a_push_sigkilled_from_outside_loses_and_doubles_nothing(world: World) -> None:
    """A real SIGKILL at a moment the test does not choose (while it sends 2,000)."""
    a = world.a
    store = MemoryStore(a.db())
    try:
        for i in range(2000):
            store.add("fact", f"Host h{i} serves region r{i % 7}.", project=a.project())
    finally:
        store.close()
    proc = subprocess.Popen(
        [sys.executable, "-m", "llmem_hooks.cli", "team", "sync"],
        cwd=a.repo,
        env={**a.env, "LLMEM_FAULT": "slow:team-pushed"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(200):  # until the hub has some of them, then kill
            if world.hub_rows():
                break
            import time

            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(30)
    a.sync()
    rows = world.hub_rows()
    assert len(rows) == 2000 and len({r["content"] for r in rows}) == 2000


def test_concurrent_edits_and_a_delete_end_the_same_everywhere(
    world: World, tmp_path: Path
) -> None:
    """Alice on two machines edits one memory at once (last writer wins); Bob edits
    Alice's memory (his becomes a new memory superseding hers); Alice deletes another that
    Bob edited (the tombstone wins). Every machine ends with the same shared memories."""
    a, b = world.a, world.b
    a2 = Machine("alice-laptop", tmp_path / "alice2", a.origin)
    a2.cli("team", "join", world.hub_db.dsn(world.alice_role, world.alice_pw))
    first = a.store("Deploys go out on Tuesdays.")
    second = a.store("The cache TTL is 60 seconds.")
    third = a.store("Feature flags live in flags.yaml.")
    for m in (a, a2, b):
        m.sync()

    def edit(m: Machine, text_in: str, new: str) -> None:
        store = MemoryStore(m.db())
        try:
            (mem,) = [x for x in store.list_all(limit=1000) if text_in in x["content"]]
            store.update(mem["id"], content=new)
        finally:
            store.close()

    def forget(m: Machine, text_in: str) -> None:
        store = MemoryStore(m.db())
        try:
            (mem,) = [x for x in store.list_all(limit=1000) if text_in in x["content"]]
            store.invalidate(mem["id"], "wrong")
        finally:
            store.close()

    edit(a, "Tuesdays", "Deploys go out on Wednesdays.")
    edit(a2, "Tuesdays", "Deploys go out on Thursdays.")  # later: wins
    edit(b, "cache TTL", "The cache TTL is 90 seconds.")  # Alice's memory: superseded
    edit(b, "flags.yaml", "Feature flags live in config/flags.yaml.")
    forget(a, "flags.yaml")  # Alice deletes her own memory: the tombstone wins
    for m in (b, a, a2, b, a, a2):
        m.sync()
    states = [shared_state(m, world.key) for m in (a, a2, b)]
    assert states[0] == states[1] == states[2], states
    final = set(states[0])
    assert "Deploys go out on Thursdays." in final
    assert "The cache TTL is 90 seconds." in final and "The cache TTL is 60 seconds." not in final
    rows = {r["content"]: r for r in world.hub_rows()}
    assert rows["The cache TTL is 90 seconds."]["author"] == world.bob_role
    assert rows["The cache TTL is 90 seconds."]["supersedes"]
    assert first and second and third


def test_a_credential_in_a_shared_memory_never_reaches_the_hub(world: World) -> None:
    """Every secret shape of the corpus in shared memories, through the store's normal
    path, and one memory that holds a secret already (an older store, edited by hand):
    the hub's tables never hold one."""
    a = world.a
    # The shapes the redaction rules recognize in this run's random values (a weak value
    # like "the password is 'ember'" can pass them: that is the redactor's own measure,
    # tests/foundations/test_secrets_corpus.py); every one of these must stay off the hub.
    cases = [
        c
        for c in secret_cases(random.Random(seed_from_env()))
        if c.value not in (redact_secrets(f"For staging: {c.text}") or "")
    ]
    store = MemoryStore(a.db())
    try:
        for case in cases:
            # A private key is refused whole: never stored, never sent.
            with contextlib.suppress(ValidationError):
                store.add("procedure", f"For staging: {case.text}", project=a.project())
        mid = store.add(
            "decision", "The staging database password is kept in vault.", project=a.project()
        )
    finally:
        store.close()
    # The planted value: one the redaction rules recognize in the planted sentence too (a
    # weak value such as a plain word after "password is" passes them in some seeds).
    planted = next(
        c.value
        for c in cases
        if c.value not in redact_secrets(f"The staging database password is {c.value}")
    )
    with sqlite3.connect(a.db()) as conn:  # bypass every write path: a secret already there
        conn.execute(
            "UPDATE memories SET content = ? WHERE id = ?",
            (f"The staging database password is {planted}", mid),
        )
    a.sync()
    with world.hub_db.cluster.admin(db=world.hub_db.name) as conn:
        dump = "\n".join(
            str(row)
            for table in ("memories", "mutations", "projects", "members")
            for row in conn.execute(f"SELECT * FROM llmem.{table}").fetchall()
        )
    assert "staging" in dump
    # whole values only: a weak password such as "ember" sits inside "remember" in another
    # case's (redacted) text, which made this test fail for some seeds
    leaked = [c.shape for c in cases if re.search(rf"(?<!\w){re.escape(c.value)}(?!\w)", dump)]
    assert not leaked, leaked


def test_a_pull_killed_midway_applies_each_change_once(world: World) -> None:
    a, b = world.a, world.b
    store = MemoryStore(a.db())
    try:
        for i in range(150):
            store.add("decision", f"Service s{i} logs to index logs-s{i}.", project=a.project())
    finally:
        store.close()
    a.sync()
    killed = b.cli("team", "sync", check=False, env={"LLMEM_FAULT": "team-mid-pull"})
    assert killed.returncode == 137, killed.stderr
    b.sync()
    held = [m for m in b.memories() if m["content"].startswith("Service s")]
    assert len(held) == 150 and len({m["content"] for m in held}) == 150
    assert shared_state(a, world.key) == shared_state(b, world.key)


def test_one_change_the_hub_refuses_does_not_hold_back_the_others(world: World) -> None:
    """A memory the hub will never take (here a type name longer than the hub allows,
    written by hand into an older store) is dropped with one line in `team status`; the
    rest of its batch arrives."""
    a = world.a
    store = MemoryStore(a.db())
    try:
        ids = [
            store.add("decision", f"Worker w{i} uses pool p{i}.", project=a.project())
            for i in range(5)
        ]
    finally:
        store.close()
    with sqlite3.connect(a.db()) as conn:
        conn.execute("UPDATE memories SET type = ? WHERE id = ?", ("x" * 100, ids[2]))
    report = a.sync()
    assert report["refused"] == 1 and report["pushed"] == 4
    assert {r["content"] for r in world.hub_rows()} == {
        f"Worker w{i} uses pool p{i}." for i in (0, 1, 3, 4)
    }
    status = a.json("team", "status")
    assert status["outbox"] == 0
    assert "not sent" in (status["projects"][0]["last_error"] or "")
