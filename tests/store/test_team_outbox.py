"""Team memory, the local side: every write of a shared memory is queued in its own
transaction (migration 16's triggers), nothing else is; share / unshare; the outbox as
the sync engine reads it (redacted again) and acknowledges it (store/team.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from llmem_hooks.config import DEFAULT_CONFIG
from llmem_hooks.dream.cycle import Dreamer
from llmem_hooks.errors import NotFoundError, ValidationError
from llmem_hooks.store import MemoryStore, team
from llmem_hooks.timestamps import to_iso

P = "a3f0c1d2e4b5a6978877665544332211aabbccdd"  # a project key (a root commit)
OTHER = "ffeeddccbbaa99887766554433221100ffeeddcc"
AWS = "AKIA" + "IOSFODNN7EXAMPLE"  # AWS's documented example key id


def outbox(store: MemoryStore) -> dict[str, str]:
    return {r[0]: r[1] for r in store.db.fetchall("SELECT memory_id, op FROM team_outbox")}


def ack_all(store: MemoryStore) -> None:
    for item in team.outbox_batch(store.db, 10_000):
        assert team.ack(store.db, item.memory_id, item.queued_at, item.revision)
    assert outbox(store) == {}


@pytest.fixture
def shared(store: MemoryStore) -> MemoryStore:
    team.enroll(store.db, P, ["decision", "fact", "procedure", "project_state"])
    return store


def test_a_memory_of_a_shared_type_is_queued_from_its_insert_on(shared: MemoryStore) -> None:
    mid = shared.add("decision", "The hub runs PostgreSQL 16 with pgvector", project=P)
    assert outbox(shared) == {mid: "upsert"}
    link = team.link(shared.db, mid)
    assert link is not None and link.author is None and link.revision == 1
    assert link.pushed_revision == 0 and link.device == team.device_id(shared.db)
    assert team.is_shared(shared.db, mid)


def test_what_is_never_shared_is_never_queued(shared: MemoryStore) -> None:
    ids = [
        shared.add("preference", "I like tabs in Go files", project=P),  # not in the policy
        shared.add("decision", "Global: always answer in English"),  # no project
        shared.add("decision", "Another repo uses MySQL", project=OTHER),  # not enrolled
        shared.add(
            "conversation", "user: which port?\nassistant: 8080", project=P, source="episode"
        ),
    ]
    # even a policy naming episodes does not share them
    team.enroll(shared.db, P, ["decision", "conversation"])
    ids.append(shared.add("conversation", "user: and staging?\nassistant: 8081", project=P))
    assert outbox(shared) == {}
    assert not any(team.is_shared(shared.db, i) for i in ids)
    with pytest.raises(ValidationError, match="global"):
        team.share(shared, ids[1])
    with pytest.raises(ValidationError, match="episodes"):
        team.share(shared, ids[3])
    with pytest.raises(ValidationError, match="not in a team"):
        team.share(shared, ids[2])
    with pytest.raises(NotFoundError):
        team.share(shared, "no-such-memory")


def test_every_write_path_queues_the_change(shared: MemoryStore) -> None:
    mid = shared.add("fact", "The API listens on port 8080", project=P, tags=["api"])
    ack_all(shared)
    revision = team.link(shared.db, mid).revision  # type: ignore[union-attr]

    def queued(op: str = "upsert") -> None:
        nonlocal revision
        assert outbox(shared) == {mid: op}
        now = team.link(shared.db, mid)
        assert now is not None and now.revision == revision + 1
        revision = now.revision
        ack_all(shared)

    shared.update(mid, content="The API listens on port 8081")
    queued()
    shared.update(mid, tags=["api", "ports"])
    queued()
    shared.update(mid, type="decision")
    queued()
    shared.update(mid, summary="API port")
    queued()
    shared.update(mid, expires_at="2099-01-01")
    queued()
    # a change nobody on the team sees is not queued: confidence, access counts, metadata
    shared.update(mid, confidence=0.3, metadata={"note": "x"})
    shared.touch_batch([mid])
    shared.update(mid, tags=["api", "ports"])  # the same tags again
    assert outbox(shared) == {}
    shared.invalidate(mid, "moved to 9090")
    queued("delete")


def test_a_hard_delete_queues_a_tombstone_once_the_hub_has_it(shared: MemoryStore) -> None:
    pushed = shared.add("fact", "Staging is at staging.example.org", project=P)
    ack_all(shared)
    fresh = shared.add("fact", "Builds are cached for a week", project=P)
    shared.delete(pushed)
    shared.delete(fresh)  # never pushed: nothing to tell the hub
    assert outbox(shared) == {pushed: "delete"}
    assert team.link(shared.db, fresh) is None
    (item,) = team.outbox_batch(shared.db)
    assert item.deleted and item.op == "delete" and item.content == ""
    assert team.ack(shared.db, pushed, item.queued_at, item.revision)
    assert team.link(shared.db, pushed) is None  # the tombstone is on the hub: link done


def test_prune_of_an_expired_shared_memory_queues_a_tombstone(shared: MemoryStore) -> None:
    past = to_iso(datetime.now(UTC) - timedelta(days=1))
    mid = shared.add("project_state", "Freeze until Friday", project=P)
    ack_all(shared)
    shared.db.execute("UPDATE memories SET expires_at = ? WHERE id = ?", (past, mid))
    ack_all(shared)  # the expiry itself was a change people see
    assert [m["id"] for m in shared.prune()] == [mid]
    assert outbox(shared) == {mid: "delete"}


def test_import_queues_what_the_policy_shares(shared: MemoryStore) -> None:
    records = [
        {"id": "imp-1", "type": "decision", "content": "Use ruff for lint", "project": P},
        {"id": "imp-2", "type": "preference", "content": "Dark theme", "project": P},
        {
            "id": "imp-3",
            "type": "fact",
            "content": "Port 5432",
            "project": P,
            "valid_until": "2020-01-01",
        },
    ]
    assert shared.import_memories(records) == 3
    assert outbox(shared) == {"imp-1": "upsert"}  # an invalid memory is not shared


def test_dream_merges_queue_every_shared_memory_they_change(shared: MemoryStore) -> None:
    """The dream writes memories with its own SQL: the triggers still see each change."""
    seed = [
        ("dup-a", "The API stores its data in PostgreSQL 16.", ["db"]),
        ("dup-b", "the api stores data in postgresql 16", ["postgres"]),
        ("dup-c", "Our API stores the data in PostgreSQL 16 for now.", []),
        ("other", "Deploys go through the staging cluster first.", []),
    ]
    shared.import_memories(
        [{"id": i, "type": "fact", "content": c, "project": P, "tags": t} for i, c, t in seed]
    )
    ack_all(shared)
    cols = "id, content, summary, type, tag_text, valid_until, expires_at"
    before = {r[0]: tuple(r) for r in shared.db.fetchall(f"SELECT {cols} FROM memories")}
    cfg: dict[str, Any] = {k: dict(v) for k, v in DEFAULT_CONFIG.items()}
    run = Dreamer(shared, cfg).run(["light"], apply=True, write_files=False)
    assert run.results
    after = {r[0]: tuple(r) for r in shared.db.fetchall(f"SELECT {cols} FROM memories")}
    changed = {i for i in before if before[i] != after.get(i)}
    assert changed, "the dream merged nothing: the test proves nothing"
    assert set(outbox(shared)) == changed
    for mid, op in outbox(shared).items():
        gone_or_invalid = mid not in after or after[mid][5] is not None
        assert op == ("delete" if gone_or_invalid else "upsert")


def test_outbox_batch_gives_the_state_now_and_redacts_again(shared: MemoryStore) -> None:
    mid = shared.add("decision", "Deploy with make deploy", project=P, tags=["deploy"])
    shared.update(mid, content="Deploy with make deploy-prod")
    # a text stored before today's redaction rules knew this shape (raw SQL: the store
    # would have redacted it)
    shared.db.execute(
        "UPDATE memories SET content = ? WHERE id = ?",
        (f"Deploy with make deploy-prod, key {AWS}", mid),
    )
    (item,) = team.outbox_batch(shared.db)
    assert AWS not in repr(item)
    assert "[REDACTED]" in item.content and item.content.startswith("Deploy with make deploy")
    assert (item.type, item.tags, item.source, item.op, item.deleted) == (
        "decision",
        ("deploy",),
        "manual",
        "upsert",
        False,
    )
    assert item.revision == 3 and item.pushed_revision == 0 and not item.foreign
    assert item.project == P and len(item.hub_id) == 32 and item.created_at


def test_ack_keeps_a_change_queued_after_the_batch_was_read(shared: MemoryStore) -> None:
    mid = shared.add("fact", "CI runs on GitHub Actions", project=P)
    (item,) = team.outbox_batch(shared.db)
    shared.update(mid, content="CI runs on GitHub Actions and Buildkite")  # during the push
    assert not team.ack(shared.db, mid, item.queued_at, item.revision)
    (again,) = team.outbox_batch(shared.db)
    assert again.revision == item.revision + 1 and "Buildkite" in again.content
    link = team.link(shared.db, mid)
    assert link is not None and link.pushed_revision == item.revision
    # the same queued_at but a newer revision (two changes in one millisecond) stays too
    shared.db.execute(
        "UPDATE team_outbox SET queued_at = ? WHERE memory_id = ?", (item.queued_at, mid)
    )
    assert not team.ack(shared.db, mid, item.queued_at, item.revision)
    assert team.ack(shared.db, mid, item.queued_at, again.revision)
    assert outbox(shared) == {}


def test_unshare_queues_a_tombstone_of_mine_and_a_pull_never_brings_it_back(
    shared: MemoryStore,
) -> None:
    mid = shared.add("decision", "Releases are cut on Tuesdays", project=P)
    ack_all(shared)
    assert team.unshare(shared, mid) and not team.is_shared(shared.db, mid)
    assert not team.unshare(shared, mid)
    (item,) = team.outbox_batch(shared.db)
    assert item.deleted and item.content == "Releases are cut on Tuesdays"
    assert team.ack(shared.db, mid, item.queued_at, item.revision)
    assert shared.get(mid) is not None  # it stays here
    shared.update(mid, content="Releases are cut on Wednesdays")
    assert outbox(shared) == {}  # unshared: its changes stay here
    old_hub_id = item.hub_id
    assert team.share(shared, mid) and not team.share(shared, mid)
    link = team.link(shared.db, mid)
    # the hub keeps the old id's tombstone: shared again under a new id
    assert link is not None and link.hub_id != old_hub_id and link.supersedes == old_hub_id
    assert outbox(shared) == {mid: "upsert"}


def test_unshare_before_the_first_push_drops_the_queued_change(shared: MemoryStore) -> None:
    mid = shared.add("decision", "Use trunk-based development", project=P)
    assert team.unshare(shared, mid)
    assert outbox(shared) == {}


def test_share_of_a_memory_the_policy_leaves_out(shared: MemoryStore) -> None:
    mid = shared.add("preference", "Short commit subjects", project=P)
    assert outbox(shared) == {}
    assert team.share(shared, mid)
    assert outbox(shared) == {mid: "upsert"}
    ack_all(shared)
    shared.update(mid, content="Commit subjects under 50 characters")
    assert outbox(shared) == {mid: "upsert"}


def test_enroll_existing_and_leave(store: MemoryStore) -> None:
    old = store.add("decision", "We vendor no dependencies", project=P)
    mine = store.add("preference", "Verbose logs", project=P)
    assert team.enroll(store.db, P, ["decision"], existing=True) == 1
    assert outbox(store) == {old: "upsert"}
    assert team.enroll(store.db, P, ["decision"], existing=True) == 0  # idempotent
    (status,) = team.projects(store.db)
    assert (status.project, status.types, status.outbox, status.shared) == (
        P,
        ("decision",),
        1,
        1,
    )
    assert team.leave(store.db, P) and not team.leave(store.db, P)
    assert outbox(store) == {} and not team.is_shared(store.db, old)
    assert store.get(old) is not None and store.get(mine) is not None  # memories stay
    assert team.projects(store.db) == []
    store.add("decision", "After leaving nothing is queued", project=P)
    assert outbox(store) == {}


def test_record_push_and_pull_keep_one_redacted_error_line(shared: MemoryStore) -> None:
    team.record_push(shared.db, P, f"connection failed:\n password={AWS}")
    (status,) = team.projects(shared.db)
    assert status.last_error is not None and AWS not in status.last_error
    assert "\n" not in status.last_error and status.last_push is None
    team.record_pull(shared.db, P)
    (status,) = team.projects(shared.db)
    assert status.last_error is None and status.last_pull is not None
    team.set_cursor(shared.db, P, 7)
    team.set_cursor(shared.db, P, 3)  # never back
    assert team.cursor(shared.db, P) == 7 and team.cursor(shared.db, OTHER) == 0


def test_the_device_id_is_made_once(tmp_path: Path) -> None:
    with MemoryStore(tmp_path / "m.db") as st:
        first = team.device_id(st.db)
    with MemoryStore(tmp_path / "m.db") as st:
        assert team.device_id(st.db) == first and len(first) == 32


def test_a_shared_memory_turned_into_an_episode_leaves_as_a_tombstone_only(
    shared: MemoryStore,
) -> None:
    mid = shared.add("fact", "user: the port?\nassistant: 8080", project=P)
    shared.update(mid, type="conversation")
    (item,) = team.outbox_batch(shared.db)
    assert item.deleted and item.op == "delete" and item.content == ""
