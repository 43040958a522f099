"""Who may read and write what on the team hub, checked the way an outsider would: by
connecting as each person's own PostgreSQL role and using the tables directly. Row-level
security is the boundary; `Hub`'s own checks only give clearer messages."""

from __future__ import annotations

import psycopg
import pytest
from support.pg import HubDb, Team, memory

from llmem_hooks.errors import HubDenied, ValidationError
from llmem_hooks.store.hub import Hub, PushOutcome

TABLES = ("projects", "members", "memories", "mutations")


def _seed(team: Team) -> None:
    with team.alice.hub() as hub:
        assert hub.push([memory(team.key, "m1", "We deploy with blue green switches")]) == [
            PushOutcome.APPLIED
        ]
        hub.push([memory(team.key, "m2", "old fact", deleted_at="2026-11-27T11:00:00Z")])


def test_a_non_member_reads_nothing_of_the_project_directly(team: Team) -> None:
    _seed(team)
    with team.raw(team.carol) as conn:
        for table in TABLES:
            key = "key" if table == "projects" else "project"
            rows = conn.execute(
                f"SELECT count(*) FROM llmem.{table} WHERE {key} = %s", (team.key,)
            ).fetchone()
            assert rows == (0,), table
        # Only her own project is visible to her, and everything in it is hers.
        assert conn.execute("SELECT key FROM llmem.projects").fetchall() == [(team.other,)]
        assert conn.execute("SELECT DISTINCT project FROM llmem.members").fetchall() == [
            (team.other,)
        ]
        # The SECURITY DEFINER helpers answer her only about herself.
        for sql in (
            "SELECT llmem.is_member(%s, %s)",
            "SELECT llmem.can_write(%s, %s)",
            "SELECT llmem.is_admin(%s, %s)",
            "SELECT llmem.access_of(%s, %s) IS NOT NULL",
        ):
            assert conn.execute(sql, (team.key, team.alice.role)).fetchone() == (False,)
        assert conn.execute("SELECT llmem.member_projects(%s)", (team.alice.role,)).fetchone() == (
            [],
        )
        found = conn.execute(
            "SELECT * FROM llmem.search_text(%s, %s, ARRAY['deploy'], 10)",
            (team.alice.role, [team.key]),
        ).fetchall()
        assert found == []
        assert (
            conn.execute(
                "SELECT * FROM llmem.search_text(current_user, %s, ARRAY['deploy'], 10)",
                ([team.key],),
            ).fetchall()
            == []
        )
        assert (
            conn.execute(
                "SELECT * FROM llmem.lock_projects(%s, %s)", ([team.key], team.alice.role)
            ).fetchall()
            == []
        )
    # ... and through the Hub: nothing, and a clear refusal where one is due.
    with team.carol.hub() as hub:
        assert hub.projects() == [(team.other, "carol/own")]
        assert hub.search([team.key], ["deploy", "blue"]) == []
        assert hub.members(team.key) == []
        with pytest.raises(HubDenied, match="not a member"):
            hub.pull(team.key, 0)
        with pytest.raises(HubDenied, match="not a member"):
            hub.head(team.key)


def test_a_non_member_writes_nothing_directly(team: Team) -> None:
    _seed(team)
    attempts = [
        # a memory in alice's project, as herself and pretending to be alice
        (
            "INSERT INTO llmem.memories (id, project, type, content, revision, updated_at, "
            "device) VALUES ('c1', %s, 'fact', 'x', 1, now(), 'd')",
            (team.key,),
        ),
        (
            "INSERT INTO llmem.memories (id, project, author, type, content, revision, "
            "updated_at, device) VALUES ('c2', %s, %s, 'fact', 'x', 1, now(), 'd')",
            (team.key, team.alice.role),
        ),
        # herself onto the project, a change log entry, the project's counter
        (
            "INSERT INTO llmem.members (project, role, access) VALUES (%s, current_user, 'admin')",
            (team.key,),
        ),
        (
            "INSERT INTO llmem.mutations (project, seq, memory_id, revision, op, author) "
            "VALUES (%s, 99, 'm1', 1, 'upsert', current_user)",
            (team.key,),
        ),
        ("UPDATE llmem.projects SET last_seq = 0 WHERE key = %s", (team.key,)),
        ("DELETE FROM llmem.memories WHERE project = %s", (team.key,)),
        ("DELETE FROM llmem.projects WHERE key = %s", (team.key,)),
        ("TRUNCATE llmem.memories", None),
        ("ALTER TABLE llmem.memories DISABLE ROW LEVEL SECURITY", None),
    ]
    with team.raw(team.carol) as conn:
        for sql, params in attempts:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(sql, params)
        # An UPDATE of a row she cannot see touches nothing.
        cur = conn.execute("UPDATE llmem.memories SET content = 'pwned' WHERE id = 'm1'")
        assert cur.rowcount == 0
    with team.carol.hub() as hub:
        assert hub.push([memory(team.key, "c3", "carol was here")]) == [PushOutcome.DENIED]
        with pytest.raises(HubDenied):
            hub.add_member(team.key, team.carol.role)
    with team.alice.hub() as hub:
        assert [m.memory.id for m in hub.pull(team.key, 0)] == ["m1", "m2"]
        assert hub.pull(team.key, 0)[0].memory.content == "We deploy with blue green switches"
        assert [r for r, _ in hub.members(team.key)] == sorted([team.alice.role, team.bob.role])


def test_a_writer_cannot_overwrite_or_take_anothers_memory(team: Team) -> None:
    _seed(team)
    with team.raw(team.bob) as conn:
        assert conn.execute("SELECT count(*) FROM llmem.memories").fetchone() == (2,)
        cur = conn.execute("UPDATE llmem.memories SET content = 'changed' WHERE id = 'm1'")
        assert cur.rowcount == 0
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("UPDATE llmem.memories SET author = current_user WHERE id = 'm1'")
        cur = conn.execute("UPDATE llmem.members SET access = 'admin' WHERE role = current_user")
        assert cur.rowcount == 0
        assert conn.execute(
            "SELECT access FROM llmem.members WHERE role = current_user"
        ).fetchone() == ("write",)
    with team.bob.hub() as hub:
        assert hub.push([memory(team.key, "m1", "bob's version", revision=9)]) == [
            PushOutcome.FOREIGN
        ]
        with pytest.raises(HubDenied, match="admin"):
            hub.add_member(team.key, team.carol.role)
    with team.alice.hub() as hub:
        assert hub.pull(team.key, 0)[0].memory.content == "We deploy with blue green switches"


def test_a_reader_reads_but_cannot_write(team: Team) -> None:
    _seed(team)
    with team.alice.hub() as hub:
        hub.add_member(team.key, team.carol.role, "read")
    with team.carol.hub() as hub:
        assert [m.memory.id for m in hub.pull(team.key, 0)] == ["m1", "m2"]
        assert hub.push([memory(team.key, "c1", "a reader's note")]) == [PushOutcome.DENIED]
    with team.raw(team.carol) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute(
            "INSERT INTO llmem.memories (id, project, type, content, revision, "
            "updated_at, device) VALUES ('c2', %s, 'fact', 'x', 1, now(), 'd')",
            (team.key,),
        )


def test_a_removed_member_reads_nothing_any_more(team: Team) -> None:
    _seed(team)
    with team.alice.hub() as hub:
        assert hub.remove_member(team.key, team.bob.role) is True
        assert hub.remove_member(team.key, team.bob.role) is False
        assert hub.members(team.key) == [(team.alice.role, "admin")]
    with team.raw(team.bob) as conn:
        for table in TABLES:
            assert conn.execute(f"SELECT count(*) FROM llmem.{table}").fetchone() == (0,)
    with team.bob.hub() as hub, pytest.raises(HubDenied):
        hub.pull(team.key, 0)


def test_the_last_admin_stays_and_admins_are_the_only_ones_to_change_members(
    team: Team,
) -> None:
    with team.alice.hub() as hub:
        with pytest.raises(ValidationError, match="last admin"):
            hub.remove_member(team.key, team.alice.role)
        with pytest.raises(ValidationError, match="no role"):
            hub.add_member(team.key, "nobody_at_all")
        with pytest.raises(ValidationError):
            hub.add_member(team.key, "x; DROP TABLE llmem.memories")
        with pytest.raises(ValidationError):
            hub.add_member(team.key, team.bob.role, "owner")
        hub.add_member(team.key, team.bob.role, "admin")
        assert dict(hub.members(team.key))[team.bob.role] == "admin"
    with team.bob.hub() as hub:  # now an admin: may remove alice, who was one too
        assert hub.remove_member(team.key, team.alice.role) is True


def test_a_key_registered_by_someone_else_is_refused(team: Team) -> None:
    with team.carol.hub() as hub, pytest.raises(HubDenied, match="someone else"):
        hub.register_project(team.key, "mine now")
    with team.alice.hub() as hub:
        hub.register_project(team.key, "acme/widgets")  # a member: idempotent
        assert hub.projects() == [(team.key, "acme/widgets")]


def test_a_tombstone_is_final_even_for_its_author_directly(team: Team) -> None:
    _seed(team)
    with team.raw(team.alice) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="stays deleted"):
            conn.execute(
                "UPDATE llmem.memories SET deleted_at = NULL, content = 'back' WHERE id = 'm2'"
            )
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("DELETE FROM llmem.memories WHERE id = 'm1'")


def test_a_role_outside_the_team_cannot_even_see_the_schema(hub_db: HubDb) -> None:
    with Hub.connect(hub_db.dsn()) as owner:
        owner.migrate(vectors=False)
    role, password = hub_db.make_role("stranger")
    with hub_db.cluster.admin(hub_db.name) as admin:
        admin.execute(f'GRANT CONNECT ON DATABASE "{hub_db.name}" TO "{role}"')
    with (
        hub_db.connect(role, password) as conn,
        pytest.raises(psycopg.errors.InsufficientPrivilege),
    ):
        conn.execute("SELECT count(*) FROM llmem.memories")
    with pytest.raises(HubDenied, match="permission denied for schema llmem"):
        Hub.connect(hub_db.dsn(role, password))


def test_create_role_stores_only_a_scram_verifier(hub_db: HubDb) -> None:
    with Hub.connect(hub_db.dsn()) as owner:
        owner.migrate(vectors=False)
        owner.create_role("dana_hub_test", "correct horse battery")
        hub_db.roles.append("dana_hub_test")
        with pytest.raises(ValidationError, match="already exists"):
            owner.create_role("dana_hub_test", "again")
    with hub_db.cluster.admin() as admin:
        stored = admin.execute(
            "SELECT rolpassword FROM pg_authid WHERE rolname = 'dana_hub_test'"
        ).fetchone()[0]
    assert stored.startswith("SCRAM-SHA-256$") and "correct horse" not in stored
    dsn = hub_db.dsn("dana_hub_test", "correct horse battery")
    with Hub.connect(dsn) as hub:  # a member of llmem_member: may register a project
        hub.register_project("dana-root", "dana/repo")
        assert hub.projects() == [("dana-root", "dana/repo")]
    with pytest.raises(HubDenied) as err:
        Hub.connect(hub_db.dsn("dana_hub_test", "wrong-horse-battery"))
    assert "wrong-horse-battery" not in str(err.value)
    assert "\n" not in str(err.value)


def test_a_person_without_createrole_cannot_create_roles(team: Team) -> None:
    with team.alice.hub() as hub, pytest.raises(HubDenied, match="CREATEROLE"):
        hub.create_role("eve_hub_test", "pw-pw-pw-pw")
