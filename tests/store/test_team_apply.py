"""Team memory: what a pull brings, applied (store/team.apply_remote). Through the
store's normal add path (redaction, near-duplicate merge), marked with its author, never
queued back (no echo), conflicts by the rule (revision, updated_at, device), tombstones
winning, supersedes as a link. The hub's records are stood in for by a dataclass of the
same shape as `store.hub.records.HubMemory` / `Mutation` (the design's)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from llmem_hooks.errors import ValidationError
from llmem_hooks.store import MemoryStore, team
from llmem_hooks.store.hub import HubMemory, Mutation

P = "a3f0c1d2e4b5a6978877665544332211aabbccdd"
ME = "alice"
BOB_DEVICE = "b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0"
AWS = "AKIA" + "IOSFODNN7EXAMPLE"


def bob(hub_id: str, content: str, revision: int = 1, **kw: Any) -> HubMemory:
    fields: dict[str, Any] = {
        "type": "decision",
        "updated_at": f"2026-11-20T10:00:0{revision}.000000+00:00",
        "device": BOB_DEVICE,
        "author": "bob",
        "provenance": {"source": "extract", "confidence": 0.9},
        "created_at": "2026-11-20T09:00:00.000000+00:00",
        **kw,
    }
    return HubMemory(id=hub_id, project=P, content=content, revision=revision, **fields)


seqs = iter(range(1, 10_000))


def apply(store: MemoryStore, memory: HubMemory) -> str:
    return team.apply_remote(store, Mutation(next(seqs), memory), ME, team.device_id(store.db))


def outbox(store: MemoryStore) -> dict[str, str]:
    return {r[0]: r[1] for r in store.db.fetchall("SELECT memory_id, op FROM team_outbox")}


def local_id(store: MemoryStore, hub_id: str) -> str:
    link = team.link_by_hub_id(store.db, hub_id)
    assert link is not None
    return link.memory_id


@pytest.fixture
def shared(store: MemoryStore) -> MemoryStore:
    team.enroll(store.db, P, ["decision", "fact", "procedure", "project_state"])
    return store


def test_a_pulled_memory_is_added_with_its_author_and_never_queued_back(
    shared: MemoryStore,
) -> None:
    mutation = Mutation(41, bob("hub-1", "Deploys need two approvals", tags=("deploy",)))
    assert team.apply_remote(shared, mutation, ME, team.device_id(shared.db)) == "added"
    mid = local_id(shared, "hub-1")
    mem = shared.get(mid)
    assert mem is not None
    assert (mem["content"], mem["type"], mem["project"], mem["source"]) == (
        "Deploys need two approvals",
        "decision",
        P,
        "team",
    )
    assert mem["entered_by"] == "bob" and mem["tags"] == ["deploy"]
    assert mem["metadata"]["team"] == {"author": "bob", "hub_id": "hub-1"}
    assert mem["confidence"] == 0.9 and mem["created_at"] == "2026-11-20T09:00:00.000000+00:00"
    link = team.link(shared.db, mid)
    assert link is not None and link.author == "bob" and link.revision == link.pushed_revision == 1
    assert outbox(shared) == {}  # no echo
    assert team.cursor(shared.db, P) == 41
    assert team.projects(shared.db)[0].last_pull is not None
    # the same mutation again (a re-sent pull) changes nothing
    assert team.apply_remote(shared, mutation, ME, team.device_id(shared.db)) == "skipped"
    assert shared.count() == 1 and outbox(shared) == {}


def test_a_pulled_secret_is_redacted_on_the_way_in(shared: MemoryStore) -> None:
    assert apply(shared, bob("hub-s", f"The CI key is {AWS}")) == "added"
    mem = shared.get(local_id(shared, "hub-s"))
    assert mem is not None and AWS not in mem["content"] and "[REDACTED]" in mem["content"]


def test_a_pulled_near_duplicate_merges_into_the_local_memory(shared: MemoryStore) -> None:
    local = shared.add("preference", "Deploys need two approvals", project=P)  # not shared
    assert apply(shared, bob("hub-2", "deploys need  two approvals", type="preference")) == (
        "merged"
    )
    assert shared.count() == 1
    mem = shared.get(local)
    assert mem is not None and mem["metadata"]["reinforcements"] == 1
    assert outbox(shared) == {}  # the reinforcement is not pushed back
    # my own memory does not become bob's: his tombstone does not forget it
    assert team.link_by_hub_id(shared.db, "hub-2") is None
    gone = bob("hub-2", "x", revision=2, type="preference", deleted_at="2026-11-21")
    assert apply(shared, gone) == "skipped"
    assert shared.get(local)["valid_until"] is None  # type: ignore[index]


def test_after_leaving_and_joining_again_pulled_copies_link_again(shared: MemoryStore) -> None:
    apply(shared, bob("hub-b", "Docs live in docs/"))
    copy = local_id(shared, "hub-b")
    apply(shared, replace(bob("hub-a", "Use make for tasks"), author=ME))
    mine = local_id(shared, "hub-a")
    team.leave(shared.db, P)
    team.enroll(shared.db, P, ["decision"])
    assert apply(shared, bob("hub-b", "Docs live in docs/")) == "merged"
    assert apply(shared, replace(bob("hub-a", "Use make for tasks"), author=ME)) == "merged"
    assert local_id(shared, "hub-b") == copy and local_id(shared, "hub-a") == mine
    assert team.link(shared.db, mine).author is None  # type: ignore[union-attr]
    assert shared.count() == 2 and outbox(shared) == {}


def test_a_superseding_memory_that_cannot_be_stored_leaves_the_old_one_alone(
    shared: MemoryStore,
) -> None:
    apply(shared, bob("hub-o", "Old rule"))
    old = local_id(shared, "hub-o")
    odd = bob("hub-n2", "New rule", type="no_such_type", supersedes="hub-o")
    assert apply(shared, odd) == "skipped"
    assert shared.get(old)["valid_until"] is None  # type: ignore[index]


def test_an_author_s_edit_updates_the_local_copy(shared: MemoryStore) -> None:
    apply(shared, bob("hub-3", "Staging is on port 8080"))
    mid = local_id(shared, "hub-3")
    assert apply(shared, bob("hub-3", "Staging is on port 9090", revision=2)) == "updated"
    mem = shared.get(mid)
    assert mem is not None and mem["content"] == "Staging is on port 9090"
    assert outbox(shared) == {} and shared.count() == 1
    assert apply(shared, bob("hub-3", "Staging is on port 8080", revision=1)) == "skipped"
    assert shared.get(mid)["content"] == "Staging is on port 9090"  # type: ignore[index]


def test_my_own_memory_comes_back_as_mine(shared: MemoryStore) -> None:
    """A memory I wrote on another machine (or before a re-join): linked with no author,
    so my edits here go to the same hub memory."""
    apply(shared, replace(bob("hub-4", "Use uv for Python envs"), author=ME))
    link = team.link_by_hub_id(shared.db, "hub-4")
    assert link is not None and link.author is None
    shared.update(link.memory_id, content="Use uv for every Python env")
    (item,) = team.outbox_batch(shared.db)
    assert not item.foreign and item.hub_id == "hub-4" and item.revision == 2


def test_my_echo_is_skipped(shared: MemoryStore) -> None:
    mid = shared.add("decision", "Tag releases as vX.Y.Z", project=P)
    (item,) = team.outbox_batch(shared.db)
    team.ack(shared.db, mid, item.queued_at, item.revision)
    echo = HubMemory(
        id=item.hub_id,
        project=P,
        type="decision",
        content=item.content,
        revision=item.revision,
        updated_at=item.updated_at,
        device=item.device,
        author=ME,
    )
    assert apply(shared, echo) == "skipped"
    assert shared.count() == 1 and outbox(shared) == {}


def test_an_edit_of_someone_else_s_memory_is_marked_and_re_pointed_on_ack(
    shared: MemoryStore,
) -> None:
    apply(shared, bob("hub-5", "Lint with flake8"))
    mid = local_id(shared, "hub-5")
    shared.update(mid, content="Lint with ruff")
    (item,) = team.outbox_batch(shared.db)
    assert item.foreign and item.author == "bob" and item.hub_id == "hub-5"
    assert item.revision == 2 and item.content == "Lint with ruff"
    assert team.ack(shared.db, mid, item.queued_at, item.revision, new_hub_id="hub-5-alice")
    link = team.link(shared.db, mid)
    assert link is not None and (link.hub_id, link.author, link.supersedes) == (
        "hub-5-alice",
        None,
        "hub-5",
    )
    # bob's later edit of the memory I superseded is not brought back
    assert apply(shared, bob("hub-5", "Lint with pylint", revision=2)) == "skipped"
    assert shared.count() == 1


def test_someone_else_s_memory_invalidated_here_stays_local(shared: MemoryStore) -> None:
    apply(shared, bob("hub-6", "Ports: 8080"))
    mid = local_id(shared, "hub-6")
    shared.update(mid, content="Ports: 8080 and 8443")
    shared.invalidate(mid, "not true any more")
    assert outbox(shared) == {}  # no tombstone of bob's memory, no pending edit
    shared.delete(mid)
    assert apply(shared, bob("hub-6", "Ports: 8081", revision=2)) == "skipped"
    assert shared.count(valid_only=False) == 0


def test_concurrent_edits_resolve_by_revision_then_time_then_device(
    shared: MemoryStore,
) -> None:
    apply(shared, replace(bob("hub-7", "Cache TTL is 60 s"), author=ME))
    mid = local_id(shared, "hub-7")
    shared.update(mid, content="Cache TTL is 90 s")  # my pending revision 2, stamped now
    # another of my machines wrote revision 2 earlier: mine (later) wins, still queued
    older = replace(bob("hub-7", "Cache TTL is 120 s", revision=2), author=ME)
    assert apply(shared, older) == "kept_local"
    assert outbox(shared) == {mid: "upsert"}
    assert shared.get(mid)["content"] == "Cache TTL is 90 s"  # type: ignore[index]
    # revision 3 wins over my revision 2 whatever the clocks say
    newer = replace(bob("hub-7", "Cache TTL is 30 s", revision=3), author=ME)
    assert apply(shared, newer) == "updated"
    assert outbox(shared) == {}
    assert shared.get(mid)["content"] == "Cache TTL is 30 s"  # type: ignore[index]
    assert team.projects(shared.db)[0].conflicts == 2


def test_same_revision_and_time_the_greater_device_wins(shared: MemoryStore) -> None:
    apply(shared, replace(bob("hub-8", "Retries: 3"), author=ME))
    mid = local_id(shared, "hub-8")
    shared.update(mid, content="Retries: 4")
    link = team.link(shared.db, mid)
    assert link is not None
    tie = dict(revision=2, updated_at=link.updated_at, author=ME)
    low = replace(bob("hub-8", "Retries: 5"), device="0" * 32, **tie)  # type: ignore[arg-type]
    high = replace(bob("hub-8", "Retries: 6"), device="f" * 32, **tie)  # type: ignore[arg-type]
    assert apply(shared, low) == "kept_local"
    assert apply(shared, high) == "updated"
    assert shared.get(mid)["content"] == "Retries: 6"  # type: ignore[index]


def test_a_tombstone_wins_over_a_pending_edit(shared: MemoryStore) -> None:
    apply(shared, replace(bob("hub-9", "Feature flag X is on"), author=ME))
    mid = local_id(shared, "hub-9")
    shared.update(mid, content="Feature flag X is on in staging")
    gone = replace(
        bob("hub-9", "Feature flag X is on"), author=ME, deleted_at="2026-11-20T11:00:00+00:00"
    )
    assert apply(shared, gone) == "deleted"
    mem = shared.get(mid)
    assert mem is not None and mem["valid_until"] is not None
    assert "deleted on the team hub" in (mem["invalidation_reason"] or "")
    assert outbox(shared) == {}
    assert apply(shared, gone) == "skipped"
    # a tombstone of a memory never seen here adds nothing
    assert apply(shared, replace(gone, id="hub-unknown")) == "skipped"
    assert shared.count(valid_only=False) == 1


def test_bob_s_tombstone_names_him(shared: MemoryStore) -> None:
    apply(shared, bob("hub-10", "The wiki moved to Notion"))
    mid = local_id(shared, "hub-10")
    assert apply(shared, bob("hub-10", "x", revision=2, deleted_at="2026-11-21")) == "deleted"
    mem = shared.get(mid)
    assert mem is not None and "bob" in (mem["invalidation_reason"] or "")


def test_a_superseding_memory_invalidates_and_links_the_old_one(shared: MemoryStore) -> None:
    apply(shared, bob("hub-11", "Lint with flake8"))
    old = local_id(shared, "hub-11")
    carol = replace(
        bob("hub-12", "Lint with ruff, not flake8"), author="carol", supersedes="hub-11"
    )
    assert apply(shared, carol) == "added"
    new = local_id(shared, "hub-12")
    old_mem = shared.get(old)
    assert old_mem is not None and old_mem["valid_until"] is not None
    assert "carol" in (old_mem["invalidation_reason"] or "")
    rels = shared.get_relations(new)
    assert [(r["source_id"], r["target_id"], r["relation_type"]) for r in rels] == [
        (new, old, "supersedes")
    ]
    assert outbox(shared) == {}


def test_what_cannot_be_stored_here_is_skipped_and_the_cursor_moves_on(
    shared: MemoryStore,
) -> None:
    assert apply(shared, bob("hub-13", "x", type="no_such_type")) == "skipped"
    assert apply(shared, bob("hub-14", "user: hi", type="conversation")) == "skipped"
    assert shared.count(valid_only=False) == 0
    assert team.cursor(shared.db, P) > 0


def test_a_pull_for_a_project_not_enrolled_is_refused(store: MemoryStore) -> None:
    with pytest.raises(ValidationError, match="not enrolled"):
        team.apply_remote(store, Mutation(1, bob("hub-15", "x y z")), ME, "d")
    assert store.count(valid_only=False) == 0


def test_local_changes_after_a_pull_are_queued_again(shared: MemoryStore) -> None:
    """The no-echo switch lives inside apply_remote's transaction only."""
    apply(shared, replace(bob("hub-16", "Node 20"), author=ME))
    mid = local_id(shared, "hub-16")
    assert team.is_shared(shared.db, mid) and outbox(shared) == {}
    assert shared.db.fetchall("SELECT * FROM team_state WHERE key = 'applying'") == []
    mine = shared.add("decision", "Python 3.12 everywhere", project=P)
    shared.update(mid, content="Node 22")
    assert outbox(shared) == {mine: "upsert", mid: "upsert"}


def test_odd_hub_rows_are_skipped_and_never_stall_the_pull(shared: MemoryStore) -> None:
    """Another member can write odd rows into the hub: each is skipped (or stored without
    the odd part), the cursor moves on, nothing raises."""
    odd = [
        bob("x" * 300, "an id no client makes"),
        bob("hub-r", "a revision SQLite cannot hold", revision=2**70),
        bob("hub-d", "a 1 MB device", device="d" * 1_000_000),
        bob("hub-c", "c" * 20_000),  # over the content limit
        bob("hub-t", "tags of every kind", tags=("ok", 7, None, "x" * 70)),  # type: ignore[arg-type]
        bob("hub-n", "not a number", embedding=(float("nan"),) * 768),
        bob("hub-w", "a creation date that is no date", created_at="yesterday-ish"),
        bob("hub-p", "provenance of the wrong kind", provenance={"confidence": float("inf")}),
    ]
    outcomes = [apply(shared, m) for m in odd]
    assert outcomes == ["skipped"] * 4 + ["added"] * 4
    mem = shared.get(local_id(shared, "hub-w"))
    assert mem is not None and mem["created_at"].startswith("20")
    assert shared.get(local_id(shared, "hub-t"))["tags"] == ["ok"]  # type: ignore[index]
    assert team.cursor(shared.db, P) > 0 and outbox(shared) == {}
    with pytest.raises(ValidationError, match="sequence"):
        team.apply_remote(shared, Mutation(-1, bob("hub-q", "x")), ME, "d")  # type: ignore[arg-type]


def test_a_forget_undone_after_its_tombstone_was_pushed_comes_back_under_a_new_id(
    shared: MemoryStore,
) -> None:
    from llmem_hooks.store import browse

    def push() -> team.OutboxItem:
        (item,) = team.outbox_batch(shared.db)
        assert team.ack(shared.db, mid, item.queued_at, item.revision)
        return item

    mid = shared.add("decision", "Squash merges only", project=P)
    push()
    shared.invalidate(mid, "forgotten")
    tombstoned = push().hub_id  # the tombstone is on the hub
    assert browse.restore(shared.db, mid)
    (item,) = team.outbox_batch(shared.db)
    assert item.op == "upsert" and item.hub_id != tombstoned and item.supersedes == tombstoned
    # the tombstone's echo does not forget it again
    gone = HubMemory(id=tombstoned, project=P, type="decision", content="Squash merges only",
                     revision=2, updated_at="2026-11-20T10:00:00+00:00", device="d", author=ME,
                     deleted_at="2026-11-20T10:00:00+00:00")  # fmt: skip
    assert apply(shared, gone) == "skipped"
    assert shared.get(mid)["valid_until"] is None  # type: ignore[index]
