"""Push and pull on a real hub: idempotent batches, the conflict rule (last writer wins on
(revision, updated_at, device); tombstones win; another author's id is FOREIGN), seqs in
commit order with concurrent writers, and a push killed mid-batch that leaves nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from support.pg import Team, memory

from llmem_hooks.errors import ValidationError
from llmem_hooks.store.hub import Hub, HubMemory, Mutation, PushOutcome

A, S, F, D = PushOutcome.APPLIED, PushOutcome.STALE, PushOutcome.FOREIGN, PushOutcome.DENIED
ROOT = Path(__file__).resolve().parents[2]


def _state(hub: Hub, key: str) -> dict[str, HubMemory]:
    return {m.memory.id: m.memory for m in hub.pull(key, 0)}


def test_a_batch_sent_twice_is_applied_once(team: Team) -> None:
    batch = [memory(team.key, f"m{i}", f"decision number {i}") for i in range(5)]
    with team.alice.hub() as hub:
        assert hub.push(batch) == [A] * 5
        head = hub.head(team.key)
        assert hub.push(batch) == [S] * 5
        assert hub.head(team.key) == head == 5
        pulled = hub.pull(team.key, 0)
    assert [m.seq for m in pulled] == [1, 2, 3, 4, 5]
    assert [m.memory.content for m in pulled] == [f"decision number {i}" for i in range(5)]
    assert {m.memory.author for m in pulled} == {team.alice.role}
    with team.raw(team.alice) as conn:
        assert conn.execute("SELECT count(*) FROM llmem.mutations").fetchone() == (5,)


def test_last_writer_wins_on_revision_then_time_then_device(team: Team) -> None:
    t1, t2 = "2026-11-27T10:00:00Z", "2026-11-27T10:05:00Z"
    with team.alice.hub() as hub:
        assert hub.push([memory(team.key, "m", "v1", revision=1, updated_at=t1)]) == [A]
        assert hub.push([memory(team.key, "m", "v2", revision=2, updated_at=t1)]) == [A]
        # an older revision, even if later in time, loses
        assert hub.push([memory(team.key, "m", "old", revision=1, updated_at=t2)]) == [S]
        # same revision: the later time wins, then the greater device
        assert hub.push([memory(team.key, "m", "v2 later", revision=2, updated_at=t2)]) == [A]
        assert hub.push(
            [memory(team.key, "m", "v2 dev-b", revision=2, updated_at=t2, device="dev-b")]
        ) == [A]
        assert hub.push(
            [memory(team.key, "m", "v2 dev-0", revision=2, updated_at=t2, device="dev-0")]
        ) == [S]
        got = _state(hub, team.key)["m"]
    assert (got.content, got.revision, got.device) == ("v2 dev-b", 2, "dev-b")
    assert got.updated_at == "2026-11-27T10:05:00.000000+00:00"


def test_within_one_batch_the_newest_of_an_id_wins(team: Team) -> None:
    with team.alice.hub() as hub:
        out = hub.push(
            [
                memory(team.key, "m", "r1", revision=1),
                memory(team.key, "m", "r3", revision=3),
                memory(team.key, "m", "r2", revision=2),
            ]
        )
        assert out == [A, A, S]
        assert _state(hub, team.key)["m"].content == "r3"


def test_a_tombstone_wins_over_every_edit_and_blanks_the_content(team: Team) -> None:
    with team.alice.hub() as hub:
        hub.push([memory(team.key, "m", "the staging password is in the vault", revision=5)])
        tomb = memory(team.key, "m", "", revision=1, deleted_at="2026-11-27T12:00:00Z")
        assert hub.push([tomb]) == [A]  # lower revision: a delete still wins
        assert hub.push([memory(team.key, "m", "resurrected", revision=99)]) == [S]
        assert hub.push([tomb]) == [S]
        got = _state(hub, team.key)["m"]
        assert got.deleted_at == "2026-11-27T12:00:00.000000+00:00"
        assert got.content == "" and got.tags == () and got.revision == 5
        # a delete of a memory the hub never saw is kept: a late edit cannot bring it back
        assert hub.push([memory(team.key, "n", "", deleted_at="2026-11-27T12:00:00Z")]) == [A]
        assert hub.push([memory(team.key, "n", "late edit", revision=7)]) == [S]
    with team.raw(team.alice) as conn:
        ops = conn.execute("SELECT memory_id, op FROM llmem.mutations ORDER BY seq").fetchall()
    assert ops == [("m", "upsert"), ("m", "delete"), ("n", "delete")]


def test_another_authors_memory_is_superseded_never_overwritten(team: Team) -> None:
    with team.alice.hub() as hub:
        hub.push([memory(team.key, "m", "use tabs")])
    with team.bob.hub() as hub:
        assert hub.push([memory(team.key, "m", "use spaces", revision=2, device="bob")]) == [F]
        assert hub.push([memory(team.key, "m", "", deleted_at="2026-11-27T12:00:00Z")]) == [F]
        new = memory(team.key, "m-bob", "use spaces", supersedes="m", device="bob")
        assert hub.push([new]) == [A]
        state = _state(hub, team.key)
    assert state["m"].content == "use tabs" and state["m"].author == team.alice.role
    assert state["m-bob"].supersedes == "m" and state["m-bob"].author == team.bob.role


def test_an_id_taken_in_a_project_i_cannot_see_is_foreign(team: Team) -> None:
    with team.alice.hub() as hub:
        hub.push([memory(team.key, "secret-id", "alice's")])
    with team.carol.hub() as hub:
        assert hub.push([memory(team.other, "secret-id", "carol's")]) == [F]
        assert hub.pull(team.other, 0) == []


def test_a_mixed_batch_gets_one_outcome_per_item_in_order(team: Team) -> None:
    with team.alice.hub() as hub:
        hub.push([memory(team.key, "old", "kept")])
    with team.bob.hub() as hub:
        out = hub.push(
            [
                memory(team.key, "b1", "bob's first"),
                memory(team.other, "b2", "not bob's project"),
                memory(team.key, "old", "not bob's memory"),
                memory("no-such-project", "b3", "nowhere"),
                memory(team.key, "b1", "bob's first"),
            ]
        )
    assert out == [A, D, F, D, S]


def test_a_bad_item_refuses_the_whole_batch(team: Team) -> None:
    with team.alice.hub() as hub:
        for bad in (
            memory(team.key, "x", "a" * 10_001),
            memory(team.key, "x", "   "),
            memory(team.key, "x", "ok", revision=0),
            memory(team.key, "x", "ok", updated_at="yesterday"),
            memory(team.key, "", "ok"),
            memory("p" * 201, "x", "ok"),
        ):
            with pytest.raises(ValidationError):
                hub.push([memory(team.key, "good", "fine"), bad])
        assert hub.pull(team.key, 0) == []
        assert hub.head(team.key) == 0
        with pytest.raises(ValidationError):
            hub.push([memory(team.key, f"m{i}", "x") for i in range(5001)])
        for cursor in (-1, "3", 1.5, None):
            with pytest.raises(ValidationError):
                hub.pull(team.key, cursor)  # type: ignore[arg-type]


def test_what_leaves_is_redacted_and_provenance_is_cut_to_its_keys(team: Team) -> None:
    token = "ghp_" + "Zq8rT2mW9xK4vB7nL3pH6sD1fG5jY0cA2eR8"
    with team.alice.hub() as hub:
        hub.push(
            [
                memory(
                    team.key,
                    "m",
                    f"CI uses the token {token} <private>my home address</private> daily",
                    tags=("ci", token),
                    provenance={
                        "source": "extracted",
                        "confidence": 0.9,
                        "session_id": "ses_123",
                        "transcript": "user: here is my token " + token,
                        "path": "/home/alice/secret.txt",
                    },
                )
            ]
        )
    with team.db.cluster.admin(team.db.name) as conn:
        dump = str(conn.execute("SELECT m.*::text FROM llmem.memories m").fetchall())
        dump += str(conn.execute("SELECT m.*::text FROM llmem.mutations m").fetchall())
        prov = conn.execute("SELECT provenance FROM llmem.memories").fetchone()[0]
    assert token not in dump and "home address" not in dump and "ses_123" not in dump
    assert "[REDACTED]" in dump
    assert prov == {"source": "extracted", "confidence": 0.9}


def test_pull_pages_by_cursor_and_gives_each_memory_once_in_its_latest_state(
    team: Team,
) -> None:
    with team.alice.hub() as hub:
        for i in range(12):
            hub.push([memory(team.key, f"m{i}", f"fact {i}")])
        hub.push([memory(team.key, "m3", "fact 3 edited", revision=2)])
        hub.push([memory(team.key, "m5", "", deleted_at="2026-11-27T12:00:00Z")])
    with team.bob.hub() as hub:
        seen: list[Mutation] = []
        cursor = 0
        while page := hub.pull(team.key, cursor, limit=5):
            assert len(page) <= 5
            seen += page
            cursor = page[-1].seq
        assert cursor == hub.head(team.key) == 14
    ids = [m.memory.id for m in seen]
    assert sorted(ids) == sorted(f"m{i}" for i in range(12)) and len(ids) == 12
    assert [m.seq for m in seen] == sorted(m.seq for m in seen)
    by_id = {m.memory.id: m.memory for m in seen}
    assert by_id["m3"].content == "fact 3 edited" and by_id["m5"].deleted_at is not None


def test_concurrent_writers_never_let_a_cursor_skip_a_change(team: Team) -> None:
    """Two writers push batches into one project while a reader follows with a cursor:
    every change it sees, it sees once, and at the end it has seen them all."""
    per_writer, batch = 30, 7
    errors: list[BaseException] = []
    done = threading.Event()
    seen: list[tuple[int, str, int]] = []

    def write(person: str, dsn: str) -> None:
        try:
            with Hub.connect(dsn) as hub:
                for b in range(per_writer):
                    items = [
                        memory(team.key, f"{person}-{b}-{i}", f"{person} {b} {i}", device=person)
                        for i in range(batch)
                    ]
                    assert hub.push(items) == [A] * batch
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    def follow() -> None:
        try:
            with Hub.connect(team.alice.dsn) as hub:
                cursor = 0
                while True:
                    finished = done.is_set()
                    page = hub.pull(team.key, cursor, limit=50)
                    seen.extend((m.seq, m.memory.id, m.memory.revision) for m in page)
                    cursor = page[-1].seq if page else cursor
                    if finished and not page:
                        return
        except BaseException as exc:
            errors.append(exc)

    writers = [
        threading.Thread(target=write, args=("alice", team.alice.dsn)),
        threading.Thread(target=write, args=("bob", team.bob.dsn)),
    ]
    reader = threading.Thread(target=follow)
    reader.start()
    for t in writers:
        t.start()
    for t in writers:
        t.join(120)
    done.set()
    reader.join(120)
    assert errors == []
    ids = [i for _, i, _ in seen]
    assert len(ids) == len(set(ids)) == 2 * per_writer * batch
    assert [s for s, _, _ in seen] == sorted(s for s, _, _ in seen)


_KILLED_PUSH = """
import sys
from llmem_hooks.store.hub import Hub, HubMemory
dsn, key = sys.argv[1], sys.argv[2]
items = [HubMemory(id=f"k{i}", project=key, type="fact", content=f"fact {i}", revision=1,
                   updated_at="2026-11-27T10:00:00Z", device="d") for i in range(300)]
with Hub.connect(dsn) as hub:
    print("connected", flush=True)
    hub.push(items)
    print("pushed", flush=True)
"""


def test_a_push_killed_mid_batch_leaves_nothing_and_a_resend_applies_once(team: Team) -> None:
    """The pusher is held inside its transaction (after its rows went in, while it logs
    them) by a lock the test takes, then killed with SIGKILL."""
    with team.db.cluster.admin(team.db.name) as admin, team.db.cluster.admin() as watch:
        admin.execute("BEGIN")
        admin.execute("LOCK TABLE llmem.mutations IN SHARE MODE")
        proc = subprocess.Popen(
            [sys.executable, "-c", _KILLED_PUSH, team.alice.dsn, team.key],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "connected"
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                waiting = watch.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE usename = %s "
                    "AND wait_event_type = 'Lock' AND query LIKE 'INSERT INTO llmem.memories%%'",
                    (team.alice.role,),
                ).fetchone()[0]
                if waiting:
                    break
                time.sleep(0.05)
            assert waiting == 1
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            admin.execute("COMMIT")
    with team.alice.hub() as hub:
        assert hub.pull(team.key, 0) == [] and hub.head(team.key) == 0
        items = [memory(team.key, f"k{i}", f"fact {i}") for i in range(300)]
        assert hub.push(items) == [A] * 300
        assert hub.push(items) == [S] * 300
        assert len(hub.pull(team.key, 0, limit=1000)) == 300
    with team.raw(team.alice) as conn:
        assert conn.execute("SELECT count(*) FROM llmem.mutations").fetchone() == (300,)


def test_a_dropped_connection_is_unavailable_and_a_new_one_carries_on(team: Team) -> None:
    """The server ends the session (as a failover would): the next call says
    HubUnavailable, and a new connection carries on."""
    from llmem_hooks.errors import HubUnavailable

    hub = team.alice.hub()
    try:
        with team.db.cluster.admin() as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                (team.alice.role,),
            )
        with pytest.raises(HubUnavailable):
            hub.pull(team.key, 0)
    finally:
        hub.close()
    with team.alice.hub() as again:
        assert again.push([memory(team.key, "m", "after the failover")]) == [A]


def test_the_raw_tables_hold_what_pull_reports(team: Team) -> None:
    with team.alice.hub() as hub:
        hub.push([memory(team.key, "m", "seq check", tags=("a", "b"))])
    with team.raw(team.bob) as conn:
        row = conn.execute(
            "SELECT seq, author, tags, tsv @@ to_tsquery('english', 'check') "
            "FROM llmem.memories WHERE id = 'm'"
        ).fetchone()
    assert row == (1, team.alice.role, ["a", "b"], True)


def test_one_batch_of_inserts_and_updates_numbers_every_change_once(team: Team) -> None:
    with team.alice.hub() as hub:
        hub.push([memory(team.key, f"m{i}", f"first {i}") for i in range(3)])
        out = hub.push(
            [memory(team.key, f"m{i}", f"second {i}", revision=2) for i in range(3)]
            + [memory(team.key, f"n{i}", f"new {i}") for i in range(3)]
        )
        assert out == [A] * 6
        pulled = hub.pull(team.key, 0)
        assert hub.head(team.key) == 9
    assert sorted(m.seq for m in pulled) == [4, 5, 6, 7, 8, 9]
    with team.raw(team.alice) as conn:
        seqs = [r[0] for r in conn.execute("SELECT seq FROM llmem.mutations ORDER BY seq")]
    assert seqs == list(range(1, 10))


def test_a_forged_seq_counter_cannot_send_a_change_back_in_time(team: Team) -> None:
    """The trigger counts a transaction's seqs in a setting a member could set herself:
    the project's stored last_seq still bounds it, so a change never lands behind a
    cursor that has passed."""
    with team.alice.hub() as hub:
        hub.push([memory(team.key, f"m{i}", f"fact {i}") for i in range(5)])
    with team.raw(team.alice) as conn, conn.transaction():
        name = conn.execute("SELECT 'llmem.s' || md5(%s)", (team.key,)).fetchone()[0]
        conn.execute("SELECT set_config(%s, '1', true)", (name,))
        conn.execute(
            "INSERT INTO llmem.memories (id, project, type, content, revision, updated_at, "
            "device) VALUES ('late', %s, 'fact', 'forged', 1, now(), 'd')",
            (team.key,),
        )
    with team.bob.hub() as hub:
        assert [m.memory.id for m in hub.pull(team.key, 5)] == ["late"]
        assert hub.head(team.key) == 6


def test_the_same_batch_pushed_twice_at_once_lands_once(team: Team) -> None:
    """Two copies of one sender (a retry while the first try still runs): the project's
    lock makes one of them see the other's rows, so every item is applied exactly once."""
    batch = [memory(team.key, f"m{i}", f"fact {i}") for i in range(50)]
    results: list[list[PushOutcome]] = []
    errors: list[BaseException] = []

    def send() -> None:
        try:
            with Hub.connect(team.alice.dsn) as hub:
                results.append(hub.push(batch))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=send) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == [], [repr(e) for e in errors]
    assert sorted(results) == sorted([[A] * 50, [S] * 50])
    with team.raw(team.alice) as conn:
        assert conn.execute("SELECT count(*) FROM llmem.mutations").fetchone() == (50,)
