"""The hub's schema: numbered migrations, applied once; pgvector only where it can be
created (Debian's PostgreSQL 15 has none); a database owner who is not a superuser."""

from __future__ import annotations

import threading

import psycopg
import pytest
from support.pg import (
    DEBIAN_PG,
    HubDb,
    PgCluster,
    make_team,
    memory,
    server_folder,
    start_debian_cluster,
)

from llmem_hooks.errors import HubDenied
from llmem_hooks.store.hub import Hub, PushOutcome


def _versions(db: HubDb) -> list[tuple[int, str]]:
    with db.cluster.admin(db.name) as conn:
        return conn.execute(
            "SELECT version, name FROM llmem.schema_migrations ORDER BY version"
        ).fetchall()


def _has_embedding_column(db: HubDb) -> bool:
    with db.cluster.admin(db.name) as conn:
        return (
            conn.execute(
                "SELECT 1 FROM information_schema.columns WHERE table_schema = 'llmem' "
                "AND table_name = 'memories' AND column_name = 'embedding'"
            ).fetchone()
            is not None
        )


def test_migrate_applies_each_migration_once(hub_db: HubDb) -> None:
    with Hub.connect(hub_db.dsn()) as owner:
        assert owner.migrate() == [1, 2]
        assert owner.migrate() == []
        assert owner.has_vectors() and owner.vector_dims == 768
    assert _versions(hub_db) == [(1, "core"), (2, "vectors")]
    assert _has_embedding_column(hub_db)


def test_without_pgvector_the_hub_works_and_gains_vectors_later(hub_db: HubDb) -> None:
    team = make_team(hub_db, vectors=False)
    assert _versions(hub_db) == [(1, "core")]
    assert not _has_embedding_column(hub_db)
    with team.alice.hub() as hub:
        assert not hub.has_vectors()
        assert hub.push([memory(team.key, "m", "kept across the upgrade")]) == [PushOutcome.APPLIED]
    with Hub.connect(hub_db.dsn()) as owner:
        assert owner.vector_dims is None
        assert owner.migrate(dims=768) == [2]
    with team.alice.hub() as hub:
        assert hub.has_vectors()
        assert hub.pull(team.key, 0)[0].memory.content == "kept across the upgrade"
        vec = tuple([1.0] + [0.0] * 767)
        hub.push([memory(team.key, "v", "with a vector", embedding=vec)])
        assert hub.search([team.key], [], embedding=vec)[0][0].id == "v"


def test_two_migrators_at_once_apply_everything_once(hub_db: HubDb) -> None:
    results: list[list[int]] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            with Hub.connect(hub_db.dsn()) as owner:
                results.append(owner.migrate())
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == [], [repr(e) for e in errors]
    # Each migration applied once, in order, by whichever got the lock first (one may run
    # h001 and the other h002: both wait on the same lock, one migration at a time).
    assert sorted(n for applied in results for n in applied) == [1, 2]
    assert all(applied == sorted(applied) for applied in results)


def test_a_person_cannot_create_or_change_the_schema(hub_db: HubDb) -> None:
    role, password = hub_db.make_role("alice")
    with hub_db.cluster.admin() as admin:
        admin.execute(f'GRANT CONNECT ON DATABASE "{hub_db.name}" TO "{role}"')
    with Hub.connect(hub_db.dsn(role, password)) as hub, pytest.raises(HubDenied):
        hub.migrate()
    with hub_db.cluster.admin(hub_db.name) as conn:
        assert conn.execute("SELECT to_regclass('llmem.memories')").fetchone() == (None,)


def test_an_owner_who_is_not_a_superuser_runs_a_hub_without_vectors(hub_db: HubDb) -> None:
    """As on a managed PostgreSQL: the database's owner has CREATEROLE but is no
    superuser, so pgvector (not a trusted extension) is left out, RLS is forced on the
    owner's tables and the SECURITY DEFINER functions still see what they must."""
    owner, owner_pw = hub_db.make_role("owner", createrole=True)
    with hub_db.cluster.admin() as admin:
        admin.execute(f'ALTER DATABASE "{hub_db.name}" OWNER TO "{owner}"')
        admin.execute(
            "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'llmem_member') "
            "THEN CREATE ROLE llmem_member NOLOGIN; END IF; END $$"
        )
        admin.execute(f'GRANT llmem_member TO "{owner}" WITH ADMIN OPTION')
    with Hub.connect(hub_db.dsn(owner, owner_pw)) as hub:
        assert hub.migrate() == [1]
        assert not hub.has_vectors()
        hub.create_role("alice_owned_hub", "alice-pw-1")
        hub.create_role("bob_owned_hub", "bob-pw-1")
        hub_db.roles += ["alice_owned_hub", "bob_owned_hub"]
    with Hub.connect(hub_db.dsn("alice_owned_hub", "alice-pw-1")) as alice:
        alice.register_project("root-1", "acme/app")
        alice.add_member("root-1", "bob_owned_hub")
        assert alice.push([memory("root-1", "m", "We ship on Tuesdays")]) == [PushOutcome.APPLIED]
    with Hub.connect(hub_db.dsn("bob_owned_hub", "bob-pw-1")) as bob:
        assert [m.memory.id for m in bob.pull("root-1", 0)] == ["m"]
        assert bob.search(["root-1"], ["tuesdays"])[0][0].id == "m"
    with (
        psycopg.connect(hub_db.dsn(owner, owner_pw), autocommit=True) as conn,
    ):
        forced = conn.execute(
            "SELECT bool_and(relforcerowsecurity) FROM pg_class "
            "WHERE relnamespace = 'llmem'::regnamespace AND relkind = 'r'"
        ).fetchone()
        assert forced == (True,)


def test_debians_postgresql_15_without_pgvector_runs_a_hub(pg: PgCluster) -> None:
    """Debian's packaged PostgreSQL 15 has no pgvector: the hub is made without vectors
    and works (pgserver's pg fixture first: it creates the system user both run as)."""
    if not (DEBIAN_PG / "initdb").exists():
        pytest.skip("Debian's postgresql-15 is not installed (apt-get install postgresql-15)")
    with server_folder() as folder:
        cluster = start_debian_cluster(folder)
        try:
            with Hub.connect(cluster.dsn()) as owner:
                version = owner._conn.info.server_version
                assert owner.migrate() == [1]
                assert not owner.has_vectors()
            assert 150000 <= version < 160000
            db = HubDb(cluster, "postgres")
            team = make_team(db, vectors=True)  # asks for vectors; none to be had
            with team.alice.hub() as hub:
                hub.push([memory(team.key, "m", "Releases are cut on Thursdays")])
            with team.bob.hub() as hub:
                assert [m.memory.id for m in hub.pull(team.key, 0)] == ["m"]
                assert hub.search([team.key], ["thursday"])[0][0].id == "m"
            with team.carol.hub() as hub, pytest.raises(HubDenied):
                hub.pull(team.key, 0)
        finally:
            cluster.stop()
