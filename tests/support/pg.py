"""A real PostgreSQL for the team tests: pgserver's PostgreSQL 16 with pgvector.

One server per test session, in a folder of its own (as root, pgserver runs it as a
system user ``pgserver``, which must be able to reach the folder), reached on a Unix
socket only. Passwords are really checked: the fixture
turns pg_hba's ``trust`` into ``scram-sha-256`` and reloads. Each test gets a fresh
database and roles with names of their own, so tests share the server, not state.
"""

from __future__ import annotations

import itertools
import os
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlparse

from llmem_hooks.store.hub import Hub, HubMemory

_counter = itertools.count(1)


def unique(base: str) -> str:
    """A role or database name no other test of the session uses."""
    return f"{base}_{next(_counter)}_{secrets.token_hex(2)}"


@dataclass
class PgCluster:
    """A running server: its socket folder and the superuser's password."""

    server: Any
    socket_dir: str
    admin_password: str
    pgdata: Path

    def dsn(self, role: str = "postgres", password: str | None = None, db: str = "postgres") -> str:
        pw = self.admin_password if role == "postgres" and password is None else password
        auth = quote(role, safe="") + (":" + quote(pw, safe="") if pw else "")
        return f"postgresql://{auth}@/{quote(db, safe='')}?host={quote(self.socket_dir)}"

    def admin(self, db: str = "postgres") -> Any:
        import psycopg

        return psycopg.connect(self.dsn(db=db), autocommit=True)

    def stop(self) -> None:
        self.server.cleanup()

    def start(self) -> None:
        """Start it again after `stop` (same data, same passwords)."""
        import pgserver

        self.server = pgserver.get_server(self.pgdata, cleanup_mode="stop")


@contextmanager
def server_folder() -> Iterator[Path]:
    """A folder of its own for a server's data, removed afterwards.

    Not under pytest's temp folder: every pytest session that starts (another run on the
    same machine, as the same user) resets ``/tmp/pytest-of-<user>`` to 0700, and the
    server's system user could then no longer reach its own data (PANIC mid-test)."""
    folder = Path(tempfile.mkdtemp(prefix="llmem-pg-"))
    folder.chmod(0o755)
    try:
        yield folder / "data"
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def start_cluster(folder: Path) -> PgCluster:
    """Start pgserver in ``folder`` (its parents must be readable by others: see
    `server_folder`) and require passwords (scram-sha-256 in pg_hba)."""
    import pgserver

    server = pgserver.get_server(folder, cleanup_mode="stop")
    uri = server.get_uri()
    socket_dir = parse_qs(urlparse(uri).query)["host"][0]
    return PgCluster(server, socket_dir, _require_passwords(uri), Path(folder))


def _require_passwords(uri: str) -> str:
    """Give the superuser a random password and turn pg_hba's trust into scram-sha-256;
    returns the password."""
    import psycopg

    password = secrets.token_urlsafe(18)
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET password_encryption = 'scram-sha-256'")
        conn.execute("SELECT pg_reload_conf()")
        verifier = conn.pgconn.encrypt_password(
            password.encode(), b"postgres", b"scram-sha-256"
        ).decode()
        conn.execute(
            psycopg.sql.SQL("ALTER ROLE postgres PASSWORD {}").format(psycopg.sql.Literal(verifier))
        )
        hba = Path(conn.execute("SHOW hba_file").fetchone()[0])
        lines = [
            line.replace("trust", "scram-sha-256")
            if line.split()[:1] in (["local"], ["host"])
            else line
            for line in hba.read_text().splitlines()
        ]
        hba.write_text("\n".join(lines) + "\n")
        conn.execute("SELECT pg_reload_conf()")
    return password


DEBIAN_PG = Path("/usr/lib/postgresql/15/bin")


class DebianServer:
    """Debian's own PostgreSQL 15 (no pgvector), run as pgserver's system user (initdb
    refuses root), on a Unix socket in its data folder."""

    def __init__(self, pgdata: Path, user: str | None) -> None:
        self.pgdata, self.user = pgdata, user

    def _run(self, *args: str) -> None:
        subprocess.run(
            [str(DEBIAN_PG / args[0]), *args[1:]],
            check=True,
            capture_output=True,
            timeout=120,
            user=self.user,
        )

    def start(self) -> None:
        self._run(
            "pg_ctl", "-D", str(self.pgdata), "-w", "-l", str(self.pgdata / "log"),
            "-o", f"-k {self.pgdata} -h ''", "start",
        )  # fmt: skip

    def cleanup(self) -> None:
        self._run("pg_ctl", "-D", str(self.pgdata), "-w", "-m", "fast", "stop")


def start_debian_cluster(folder: Path) -> PgCluster:
    """Debian's PostgreSQL 15 in ``folder`` (see `server_folder`), passwords required."""
    import pwd

    user = "pgserver" if os.geteuid() == 0 else None
    folder.mkdir()
    if user:
        entry = pwd.getpwnam(user)
        os.chown(folder, entry.pw_uid, entry.pw_gid)
    server = DebianServer(folder, user)
    server._run("initdb", "-D", str(folder), "-U", "postgres", "--auth=trust", "-E", "UTF8")
    server.start()
    uri = f"postgresql://postgres@/postgres?host={quote(str(folder))}"
    return PgCluster(server, str(folder), _require_passwords(uri), folder)


@dataclass
class HubDb:
    """A fresh database on the session's server, and the roles a test made for it."""

    cluster: PgCluster
    name: str
    roles: list[str] = field(default_factory=list)

    def dsn(self, role: str = "postgres", password: str | None = None) -> str:
        return self.cluster.dsn(role, password, db=self.name)

    def make_role(
        self, base: str, *, createrole: bool = False, member: bool = False
    ) -> tuple[str, str]:
        """A LOGIN role with a random SCRAM password: (name, password). ``member`` puts
        it in llmem_member right away (as `Hub.create_role` does)."""
        import psycopg

        name, password = unique(base), secrets.token_urlsafe(12)
        sql = psycopg.sql
        with self.cluster.admin() as conn:
            verifier = conn.pgconn.encrypt_password(
                password.encode(), name.encode(), b"scram-sha-256"
            ).decode()
            conn.execute(
                sql.SQL(
                    "CREATE ROLE {} LOGIN PASSWORD {}" + (" CREATEROLE" if createrole else "")
                ).format(sql.Identifier(name), sql.Literal(verifier))
            )
            if member:
                conn.execute(sql.SQL("GRANT llmem_member TO {}").format(sql.Identifier(name)))
        self.roles.append(name)
        return name, password

    def connect(self, role: str, password: str) -> Any:
        """A plain psycopg connection as ``role``: for reading the tables directly."""
        import psycopg

        return psycopg.connect(self.dsn(role, password), autocommit=True)


def fresh_database(cluster: PgCluster, owner: str | None = None) -> Iterator[HubDb]:
    """A database for one test, dropped (with its roles) afterwards."""
    import psycopg

    sql = psycopg.sql
    db = HubDb(cluster, unique("hub"))
    with cluster.admin() as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(db.name)))
        conn.execute(
            sql.SQL("REVOKE ALL ON DATABASE {} FROM PUBLIC").format(sql.Identifier(db.name))
        )
    try:
        yield db
    finally:
        with cluster.admin() as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(db.name))
            )
            for role in reversed(db.roles):  # people before the owner who granted them
                conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


@dataclass
class Person:
    role: str
    password: str
    dsn: str

    def hub(self) -> Hub:
        return Hub.connect(self.dsn)


@dataclass
class Team:
    """A migrated hub: alice registered project ``key`` (admin), bob may write to it;
    carol may use the hub (her own project ``other``) but is not on ``key``."""

    db: HubDb
    owner_dsn: str
    key: str
    other: str
    alice: Person
    bob: Person
    carol: Person

    def raw(self, person: Person) -> Any:
        """psycopg as that person: the tables read and written directly."""
        return self.db.connect(person.role, person.password)


def make_team(db: HubDb, *, vectors: bool = True) -> Team:
    with Hub.connect(db.dsn()) as owner:
        owner.migrate(vectors=vectors)
    people = []
    for base in ("alice", "bob", "carol"):
        role, password = db.make_role(base, member=True)
        people.append(Person(role, password, db.dsn(role, password)))
    alice, bob, carol = people
    key, other = "root-" + alice.role, "root-" + carol.role
    with alice.hub() as hub:
        hub.register_project(key, "acme/widgets")
        hub.add_member(key, bob.role, "write")
    with carol.hub() as hub:
        hub.register_project(other, "carol/own")
    return Team(db, db.dsn(), key, other, alice, bob, carol)


def memory(key: str, mid: str, content: str, **kw: Any) -> HubMemory:
    """A shared memory as the sync engine would push it."""
    fields: dict[str, Any] = {
        "type": "decision",
        "revision": 1,
        "updated_at": "2026-11-27T10:00:00+00:00",
        "device": "dev-a",
    }
    fields.update(kw)
    return HubMemory(id=mid, project=key, content=content, **fields)


def owner_role(hub_db: HubDb) -> tuple[str, str]:
    """A team lead's role: owns the hub database and may create roles (what a DBA hands
    over); the vector extension is there already (creating it needs a superuser).
    Returns (name, password)."""
    role, password = hub_db.make_role("alice", createrole=True)
    with hub_db.cluster.admin(db=hub_db.name) as conn:
        conn.execute(f'ALTER DATABASE "{hub_db.name}" OWNER TO "{role}"')
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = 'llmem_member'").fetchone()
        if exists:  # made by an earlier hub of this server: let the lead hand it out
            conn.execute(f'GRANT llmem_member TO "{role}" WITH ADMIN OPTION')
    return role, password
