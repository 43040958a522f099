"""Team memory under faults: a process SIGKILLed in the middle of a write leaves the
change and its outbox row both or neither (they commit in one transaction), a pull
killed between its write and its cursor is applied again, whole, and never twice; and
a v15 database (10,000 memories) upgraded by migration 16 equals a fresh one."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from llmem_hooks import faults
from llmem_hooks.store import MemoryStore, team
from llmem_hooks.store.db import connect
from llmem_hooks.store.migrations import MIGRATIONS, migrate

P = "a3f0c1d2e4b5a6978877665544332211aabbccdd"
TYPES = ["decision", "fact"]


def run_child(code: str, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


def enrolled_db(path: Path) -> None:
    with MemoryStore(path) as st:
        team.enroll(st.db, P, TYPES)


def test_a_kill_inside_the_write_leaves_neither_change_nor_outbox_row(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    enrolled_db(db)
    with MemoryStore(db) as st:
        kept = st.add("fact", "The queue is RabbitMQ", project=P)
        item = team.outbox_batch(st.db)[0]
        team.ack(st.db, kept, item.queued_at, item.revision)
    child = run_child(
        """
        import os, signal, sys
        from llmem_hooks.store import MemoryStore
        st = MemoryStore(sys.argv[1])
        with st.atomic():
            st.add("decision", "The queue moves to Kafka", project=sys.argv[2])
            st.update(sys.argv[3], content="The queue was RabbitMQ")
            st.invalidate(sys.argv[3], "moved")
            os.kill(os.getpid(), signal.SIGKILL)
        """,
        str(db),
        P,
        kept,
    )
    child.communicate(timeout=60)
    assert child.returncode == -signal.SIGKILL
    with MemoryStore(db) as st:
        assert st.count(valid_only=False) == 1
        mem = st.get(kept)
        assert mem is not None and mem["content"] == "The queue is RabbitMQ"
        assert mem["valid_until"] is None
        assert st.db.fetchall("SELECT memory_id FROM team_outbox") == []
        link = team.link(st.db, kept)
        assert link is not None and link.revision == 1
        assert [r[0] for r in st.db.fetchall("SELECT memory_id FROM team_links")] == [kept]


WRITER = """
import sys
from llmem_hooks.store import MemoryStore
st = MemoryStore(sys.argv[1])
i = 0
while True:
    mid = st.add("decision", f"decision number {i} about the build", project=sys.argv[2])
    st.update(mid, content=f"decision number {i} about the build, revised")
    if i % 3 == 0:
        st.invalidate(mid, "dropped")
    print(i, flush=True)
    i += 1
"""


def test_a_kill_at_any_moment_keeps_changes_and_outbox_in_step(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    enrolled_db(db)
    child = run_child(WRITER, str(db), P)
    assert child.stdout is not None
    for line in child.stdout:  # let it write for a while, then kill it mid-stride
        if int(line) >= 60:
            break
    child.send_signal(signal.SIGKILL)
    child.communicate(timeout=60)
    with MemoryStore(db) as st:
        mems = {r["id"]: r for r in st.db.fetchall("SELECT id, content, valid_until FROM memories")}
        links = {r[0]: r[1] for r in st.db.fetchall("SELECT memory_id, revision FROM team_links")}
        queued = {r[0]: r[1] for r in st.db.fetchall("SELECT memory_id, op FROM team_outbox")}
    assert len(mems) > 60
    assert set(mems) == set(links) == set(queued)  # every memory: link and outbox row
    for mid, row in mems.items():
        revised = row["content"].endswith("revised")
        invalid = row["valid_until"] is not None
        # the revision counts exactly the changes that committed, and the op matches
        assert links[mid] == 1 + revised + invalid, row
        assert queued[mid] == ("delete" if invalid else "upsert")


APPLIER = """
import sys
from types import SimpleNamespace as NS
from llmem_hooks.store import MemoryStore, team
st = MemoryStore(sys.argv[1])
memory = NS(id="hub-1", project=sys.argv[2], type="decision", content="Deploys need two approvals",
            revision=1, updated_at="2026-11-20T10:00:00+00:00", device="b0b", tags=("deploy",),
            provenance={}, deleted_at=None, supersedes=None, author="bob", embedding=None,
            created_at=None)
print(team.apply_remote(st, NS(seq=7, memory=memory), "alice", team.device_id(st.db)))
"""


def test_a_pull_killed_before_its_cursor_is_applied_again_once(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    enrolled_db(db)
    killed = run_child(APPLIER, str(db), P, env={faults.ENV: "team-apply=hub-1"})
    killed.communicate(timeout=60)
    assert killed.returncode == faults.EXIT_STATUS
    with MemoryStore(db) as st:
        assert st.count(valid_only=False) == 0 and team.cursor(st.db, P) == 0
        assert team.link_by_hub_id(st.db, "hub-1") is None
    for expected in ("added", "skipped"):  # the retry, then a pull sent twice
        again = run_child(APPLIER, str(db), P, env={faults.ENV: ""})
        out, err = again.communicate(timeout=60)
        assert again.returncode == 0, err
        assert out.strip() == expected
    with MemoryStore(db) as st:
        assert st.count(valid_only=False) == 1 and team.cursor(st.db, P) == 7
        assert st.db.fetchall("SELECT * FROM team_outbox") == []


def schema(conn: Any) -> list[tuple[str, str, str]]:
    return sorted(
        (r[0], r[1], r[2] or "")
        for r in conn.execute(
            "SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"
        )
    )


def rows_digest(conn: Any) -> str:
    h = hashlib.sha256()
    for row in conn.execute("SELECT * FROM memories ORDER BY seq"):
        h.update(repr(tuple(row)).encode())
    return h.hexdigest()


def test_an_upgrade_from_v15_with_10k_memories_equals_a_fresh_database(tmp_path: Path) -> None:
    old = connect(tmp_path / "old.db")
    migrate(old, upto=15)
    stamp = "2026-01-01T00:00:00.000000+00:00"
    old.execute("BEGIN")
    old.executemany(
        "INSERT INTO memories(id, type, content, created_at, updated_at, content_hash, project)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        [
            (
                f"m-{i}",
                TYPES[i % 2],
                f"memory {i} of the old release",
                stamp,
                stamp,
                f"h{i}",
                P if i % 3 else None,
            )
            for i in range(10_000)
        ],
    )
    old.execute("COMMIT")
    before = rows_digest(old)
    old.close()

    with MemoryStore(tmp_path / "old.db") as upgraded, MemoryStore(tmp_path / "new.db") as fresh:
        assert schema(upgraded.conn) == schema(fresh.conn)
        versions = [r[0] for r in upgraded.conn.execute("SELECT version FROM _schema_migrations")]
        assert versions == [v for v, _, _ in MIGRATIONS]
        assert rows_digest(upgraded.conn) == before  # the memories are untouched
        for table in ("team_projects", "team_policy", "team_links", "team_outbox"):
            assert upgraded.db.fetchone(f"SELECT count(*) FROM {table}")[0] == 0
        # and it shares like a fresh one: existing memories only when asked
        assert team.enroll(upgraded.db, P, TYPES) == 0
        assert team.enroll(upgraded.db, P, TYPES, existing=True) == 6_666
        assert team.outbox_size(upgraded.db) == 6_666
        mid = upgraded.add("decision", "A new decision after the upgrade", project=P)
        assert team.is_shared(upgraded.db, mid)
