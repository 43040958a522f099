"""The hub's schema: numbered migrations in the PostgreSQL schema ``llmem``.

Each migration is a named function applied once, in its own transaction, and recorded in
``llmem.schema_migrations`` (as store/migrations.py does for SQLite). ``h002_vectors``
is applied only where ``CREATE EXTENSION vector`` works (pgserver's PostgreSQL 16 has
it, Debian's 15 does not); it is not recorded when skipped, so a later ``migrate`` adds
vectors once pgvector is installed.

Who may read and write what is decided here, by PostgreSQL (docs/security.md, "The team
hub"): row-level security on every table through the ``members`` table, keyed on the
role a person connects as. The SECURITY DEFINER functions run as the schema's owner and
trust only ``session_user`` (or a role it may become) as the caller, so no one asks them
about another person.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MEMBER_ROLE = "llmem_member"
TS_CONFIG = "english"


@dataclass(frozen=True)
class MigrationContext:
    """What a migration needs to know of the database it runs in."""

    owner: str  # the role running the migration: it owns the tables and the functions
    dims: int  # the embedding column's dimensions (h002)


Migration = Callable[[Any, MigrationContext], bool]


def _ident(name: str) -> str:
    """A role name as a quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def h001_core(conn: Any, ctx: MigrationContext) -> bool:
    """Projects, members, memories, mutations; RLS; the membership helpers; the triggers
    that number every change of a project under its row lock."""
    owner = _ident(ctx.owner)
    conn.execute(
        f"""
        DO $$ BEGIN
            IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{MEMBER_ROLE}') THEN
                CREATE ROLE {MEMBER_ROLE} NOLOGIN;
            END IF;
        END $$;
        DO $$ BEGIN
            EXECUTE format('GRANT CONNECT ON DATABASE %I TO {MEMBER_ROLE}', current_database());
        END $$;
        REVOKE ALL ON SCHEMA llmem FROM PUBLIC;
        GRANT USAGE ON SCHEMA llmem TO {MEMBER_ROLE};

        CREATE TABLE llmem.projects (
            key text PRIMARY KEY CHECK (length(key) BETWEEN 1 AND 200),
            name text NOT NULL DEFAULT '' CHECK (length(name) <= 300),
            created_by name NOT NULL DEFAULT current_user,
            created_at timestamptz NOT NULL DEFAULT now(),
            last_seq bigint NOT NULL DEFAULT 0
        );
        CREATE TABLE llmem.members (
            project text NOT NULL REFERENCES llmem.projects(key) ON DELETE CASCADE,
            role name NOT NULL,
            access text NOT NULL CHECK (access IN ('read', 'write', 'admin')),
            added_by name NOT NULL DEFAULT current_user,
            added_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (project, role)
        );
        CREATE INDEX members_role ON llmem.members (role, project);

        CREATE FUNCTION llmem.tags_text(text[]) RETURNS text
            LANGUAGE sql IMMUTABLE PARALLEL SAFE
            AS $f$ SELECT coalesce(array_to_string($1, ' '), '') $f$;

        CREATE TABLE llmem.memories (
            id text PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 200),
            project text NOT NULL REFERENCES llmem.projects(key),
            author name NOT NULL DEFAULT current_user,
            type text NOT NULL CHECK (length(type) BETWEEN 1 AND 64),
            content text NOT NULL CHECK (length(content) <= 10000),
            tags text[] NOT NULL DEFAULT '{{}}' CHECK (cardinality(tags) <= 100),
            provenance jsonb NOT NULL DEFAULT '{{}}'
                CHECK (jsonb_typeof(provenance) = 'object' AND length(provenance::text) <= 4000),
            revision integer NOT NULL CHECK (revision >= 1),
            updated_at timestamptz NOT NULL,
            device text NOT NULL CHECK (length(device) BETWEEN 1 AND 64),
            deleted_at timestamptz,
            supersedes text CHECK (length(supersedes) <= 200),
            created_at timestamptz NOT NULL DEFAULT now(),
            seq bigint NOT NULL DEFAULT 0,
            tsv tsvector GENERATED ALWAYS AS (
                to_tsvector('{TS_CONFIG}'::regconfig, content || ' ' || llmem.tags_text(tags))
            ) STORED,
            CHECK (deleted_at IS NOT NULL OR length(content) >= 1)
        );
        CREATE INDEX memories_tsv ON llmem.memories USING gin (tsv);
        CREATE INDEX memories_project_seq ON llmem.memories (project, seq);

        CREATE TABLE llmem.mutations (
            project text NOT NULL REFERENCES llmem.projects(key),
            seq bigint NOT NULL,
            memory_id text NOT NULL,
            revision integer NOT NULL,
            op text NOT NULL CHECK (op IN ('upsert', 'delete')),
            author name NOT NULL,
            at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (project, seq)
        );

        -- Who is asking: the role a policy sees as current_user, accepted by a SECURITY
        -- DEFINER function only if the session's login role is it or may become it.
        CREATE FUNCTION llmem.caller_is(who name) RETURNS boolean
            LANGUAGE sql STABLE SET search_path = pg_catalog
            AS $f$ SELECT who = session_user OR pg_has_role(session_user, who, 'MEMBER') $f$;

        CREATE FUNCTION llmem.member_projects(who name DEFAULT current_user) RETURNS text[]
            LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, llmem
            AS $f$ SELECT coalesce(array_agg(project), '{{}}') FROM llmem.members
                   WHERE role = who AND llmem.caller_is(who) $f$;
        CREATE FUNCTION llmem.writable_projects(who name DEFAULT current_user) RETURNS text[]
            LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, llmem
            AS $f$ SELECT coalesce(array_agg(project), '{{}}') FROM llmem.members
                   WHERE role = who AND access IN ('write', 'admin')
                     AND llmem.caller_is(who) $f$;
        CREATE FUNCTION llmem.access_of(p text, who name) RETURNS text
            LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, llmem
            AS $f$ SELECT access FROM llmem.members
                   WHERE project = p AND role = who AND llmem.caller_is(who) $f$;
        CREATE FUNCTION llmem.is_member(p text, who name DEFAULT current_user) RETURNS boolean
            LANGUAGE sql STABLE SET search_path = pg_catalog, llmem
            AS $f$ SELECT llmem.access_of(p, who) IS NOT NULL $f$;
        CREATE FUNCTION llmem.can_write(p text, who name DEFAULT current_user) RETURNS boolean
            LANGUAGE sql STABLE SET search_path = pg_catalog, llmem
            AS $f$ SELECT coalesce(llmem.access_of(p, who) IN ('write', 'admin'), false) $f$;
        CREATE FUNCTION llmem.is_admin(p text, who name DEFAULT current_user) RETURNS boolean
            LANGUAGE sql STABLE SET search_path = pg_catalog, llmem
            AS $f$ SELECT coalesce(llmem.access_of(p, who) = 'admin', false) $f$;

        -- A push locks the rows of the projects it writes, in key order (no deadlock
        -- between two pushers), and learns which of them the caller may write.
        CREATE FUNCTION llmem.lock_projects(keys text[], who name) RETURNS SETOF text
            LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, llmem
            AS $f$ SELECT key FROM llmem.projects
                   WHERE key = ANY(keys) AND llmem.can_write(key, who)
                   ORDER BY key FOR NO KEY UPDATE $f$;

        -- Full-text search runs here because @@ is not leakproof: under a policy the GIN
        -- index could not be used. Membership is checked inside; the caller reads the
        -- rows themselves through RLS again. Each word brings at most 500 candidates
        -- (a rare word is never crowded out by a common one, and a word in half the
        -- hub costs no more than 500 rows); the candidates are ranked by all words.
        CREATE FUNCTION llmem.search_text(who name, keys text[], words text[], lim integer)
            RETURNS TABLE (id text, rank real)
            LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, llmem
            AS $f$
            WITH allowed AS (
                SELECT array(SELECT unnest(keys)
                             INTERSECT SELECT unnest(llmem.member_projects(who))) AS a
            ), qs AS (
                SELECT plainto_tsquery('{TS_CONFIG}', w) AS q FROM unnest(words) AS w
                WHERE plainto_tsquery('{TS_CONFIG}', w)::text <> ''
            ), q AS (
                SELECT string_agg('(' || qs.q::text || ')', ' | ')::tsquery AS q FROM qs
            ), cand AS (
                SELECT DISTINCT c.id FROM qs, allowed, LATERAL (
                    SELECT m.id FROM llmem.memories m
                    WHERE m.tsv @@ qs.q AND m.deleted_at IS NULL AND m.project = ANY(allowed.a)
                    LIMIT 500) AS c
            )
            SELECT m.id, ts_rank_cd(m.tsv, q.q) FROM cand
                JOIN llmem.memories m ON m.id = cand.id CROSS JOIN q
            ORDER BY 2 DESC, 1 LIMIT least(lim, 200)
            $f$;

        -- Every write of a memory takes the next seq of its project while holding the
        -- project's row lock (to commit), so seqs commit in order and a puller's cursor
        -- never skips one. The seqs handed out are counted in a transaction-local
        -- setting; one statement-level trigger per statement stores the last one and
        -- logs the changes (not one UPDATE of the project's row per memory).
        CREATE FUNCTION llmem.memories_number() RETURNS trigger
            LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, llmem
            AS $f$
            DECLARE
                counter text := 'llmem.s' || md5(NEW.project);
                s bigint;
            BEGIN
                IF TG_OP = 'UPDATE' THEN
                    IF NEW.id <> OLD.id OR NEW.project <> OLD.project
                       OR NEW.author <> OLD.author THEN
                        RAISE EXCEPTION 'a memory keeps its id, project and author'
                            USING ERRCODE = '42501';
                    END IF;
                    IF OLD.deleted_at IS NOT NULL THEN
                        RAISE EXCEPTION 'a deleted memory stays deleted' USING ERRCODE = '42501';
                    END IF;
                END IF;
                IF NEW.deleted_at IS NOT NULL THEN
                    NEW.content := '';
                    NEW.tags := '{{}}';
                END IF;
                -- Locking a row this transaction holds already writes nothing; the
                -- stored last_seq bounds the counter, so a forged setting can only
                -- leave gaps, never reuse or go back.
                SELECT last_seq INTO s FROM llmem.projects
                    WHERE key = NEW.project FOR NO KEY UPDATE;
                IF s IS NULL THEN
                    RAISE EXCEPTION 'no such project' USING ERRCODE = '42501';
                END IF;
                s := greatest(s, coalesce(nullif(current_setting(counter, true), '')::bigint, 0));
                NEW.seq := s + 1;
                PERFORM set_config(counter, (s + 1)::text, true);
                RETURN NEW;
            END $f$;
        CREATE TRIGGER memories_number BEFORE INSERT OR UPDATE ON llmem.memories
            FOR EACH ROW EXECUTE FUNCTION llmem.memories_number();

        CREATE FUNCTION llmem.memories_log() RETURNS trigger
            LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, llmem
            AS $f$ BEGIN
                INSERT INTO llmem.mutations (project, seq, memory_id, revision, op, author)
                SELECT project, seq, id, revision,
                       CASE WHEN deleted_at IS NULL THEN 'upsert' ELSE 'delete' END, author
                FROM changed;
                UPDATE llmem.projects p SET last_seq = greatest(p.last_seq, c.top)
                FROM (SELECT project, max(seq) AS top FROM changed GROUP BY project) AS c
                WHERE p.key = c.project;
                RETURN NULL;
            END $f$;
        CREATE TRIGGER memories_log_insert AFTER INSERT ON llmem.memories
            REFERENCING NEW TABLE AS changed
            FOR EACH STATEMENT EXECUTE FUNCTION llmem.memories_log();
        CREATE TRIGGER memories_log_update AFTER UPDATE ON llmem.memories
            REFERENCING NEW TABLE AS changed
            FOR EACH STATEMENT EXECUTE FUNCTION llmem.memories_log();

        -- The creator of a project is its first admin.
        CREATE FUNCTION llmem.projects_creator() RETURNS trigger
            LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, llmem
            AS $f$ BEGIN
                INSERT INTO llmem.members (project, role, access, added_by)
                VALUES (NEW.key, NEW.created_by, 'admin', NEW.created_by);
                RETURN NULL;
            END $f$;
        CREATE TRIGGER projects_creator AFTER INSERT ON llmem.projects
            FOR EACH ROW EXECUTE FUNCTION llmem.projects_creator();

        -- A person added to a project gets the table privileges (RLS still decides
        -- which rows); the role must exist.
        CREATE FUNCTION llmem.members_grant() RETURNS trigger
            LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, llmem
            AS $f$ BEGIN
                IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = NEW.role) THEN
                    RAISE EXCEPTION 'no role % on this server', NEW.role USING ERRCODE = '42704';
                END IF;
                IF NOT pg_has_role(NEW.role, '{MEMBER_ROLE}', 'MEMBER') THEN
                    EXECUTE format('GRANT {MEMBER_ROLE} TO %I', NEW.role);
                END IF;
                RETURN NULL;
            END $f$;
        CREATE TRIGGER members_grant AFTER INSERT ON llmem.members
            FOR EACH ROW EXECUTE FUNCTION llmem.members_grant();

        -- Privileges: PUBLIC nothing, members what the policies then narrow.
        REVOKE ALL ON ALL FUNCTIONS IN SCHEMA llmem FROM PUBLIC;
        GRANT EXECUTE ON FUNCTION llmem.tags_text(text[]), llmem.caller_is(name),
            llmem.member_projects(name), llmem.access_of(text, name),
            llmem.is_member(text, name), llmem.can_write(text, name),
            llmem.is_admin(text, name), llmem.lock_projects(text[], name),
            llmem.search_text(name, text[], text[], integer),
            llmem.writable_projects(name) TO {MEMBER_ROLE};
        GRANT SELECT ON llmem.projects, llmem.members, llmem.memories, llmem.mutations,
            llmem.schema_migrations TO {MEMBER_ROLE};
        GRANT INSERT (key, name) ON llmem.projects TO {MEMBER_ROLE};
        GRANT INSERT (project, role, access), UPDATE (access), DELETE
            ON llmem.members TO {MEMBER_ROLE};
        GRANT INSERT (id, project, type, content, tags, provenance, revision, updated_at,
                      device, deleted_at, supersedes, created_at),
              UPDATE (type, content, tags, provenance, revision, updated_at, device,
                      deleted_at, supersedes)
            ON llmem.memories TO {MEMBER_ROLE};

        -- Row-level security, forced. The owner runs the SECURITY DEFINER functions
        -- above, so it sees every row (it could switch RLS off anyway); people never
        -- connect as the owner.
        ALTER TABLE llmem.projects ENABLE ROW LEVEL SECURITY;
        ALTER TABLE llmem.projects FORCE ROW LEVEL SECURITY;
        ALTER TABLE llmem.members ENABLE ROW LEVEL SECURITY;
        ALTER TABLE llmem.members FORCE ROW LEVEL SECURITY;
        ALTER TABLE llmem.memories ENABLE ROW LEVEL SECURITY;
        ALTER TABLE llmem.memories FORCE ROW LEVEL SECURITY;
        ALTER TABLE llmem.mutations ENABLE ROW LEVEL SECURITY;
        ALTER TABLE llmem.mutations FORCE ROW LEVEL SECURITY;
        ALTER TABLE llmem.schema_migrations ENABLE ROW LEVEL SECURITY;
        ALTER TABLE llmem.schema_migrations FORCE ROW LEVEL SECURITY;

        CREATE POLICY owner_all ON llmem.projects TO {owner} USING (true) WITH CHECK (true);
        CREATE POLICY owner_all ON llmem.members TO {owner} USING (true) WITH CHECK (true);
        CREATE POLICY owner_all ON llmem.memories TO {owner} USING (true) WITH CHECK (true);
        CREATE POLICY owner_all ON llmem.mutations TO {owner} USING (true) WITH CHECK (true);
        CREATE POLICY owner_all ON llmem.schema_migrations TO {owner}
            USING (true) WITH CHECK (true);
        CREATE POLICY read_all ON llmem.schema_migrations FOR SELECT TO {MEMBER_ROLE}
            USING (true);

        CREATE POLICY read ON llmem.projects FOR SELECT TO {MEMBER_ROLE}
            USING (key = ANY ((SELECT llmem.member_projects(current_user))::text[]));
        CREATE POLICY register ON llmem.projects FOR INSERT TO {MEMBER_ROLE}
            WITH CHECK (created_by = current_user AND last_seq = 0);

        CREATE POLICY read ON llmem.members FOR SELECT TO {MEMBER_ROLE}
            USING (project = ANY ((SELECT llmem.member_projects(current_user))::text[]));
        CREATE POLICY add ON llmem.members FOR INSERT TO {MEMBER_ROLE}
            WITH CHECK (llmem.is_admin(project, current_user) AND added_by = current_user);
        CREATE POLICY change ON llmem.members FOR UPDATE TO {MEMBER_ROLE}
            USING (llmem.is_admin(project, current_user))
            WITH CHECK (llmem.is_admin(project, current_user));
        CREATE POLICY remove ON llmem.members FOR DELETE TO {MEMBER_ROLE}
            USING (llmem.is_admin(project, current_user));

        CREATE POLICY read ON llmem.memories FOR SELECT TO {MEMBER_ROLE}
            USING (project = ANY ((SELECT llmem.member_projects(current_user))::text[]));
        CREATE POLICY write ON llmem.memories FOR INSERT TO {MEMBER_ROLE}
            WITH CHECK (author = current_user
                        AND project = ANY ((SELECT llmem.writable_projects(current_user))::text[]));
        CREATE POLICY edit ON llmem.memories FOR UPDATE TO {MEMBER_ROLE}
            USING (author = current_user
                   AND project = ANY ((SELECT llmem.writable_projects(current_user))::text[]))
            WITH CHECK (author = current_user
                        AND project = ANY ((SELECT llmem.writable_projects(current_user))::text[]));

        CREATE POLICY read ON llmem.mutations FOR SELECT TO {MEMBER_ROLE}
            USING (project = ANY ((SELECT llmem.member_projects(current_user))::text[]));
        """
    )
    return True


def h002_vectors(conn: Any, ctx: MigrationContext) -> bool:
    """pgvector: an embedding column, an HNSW index and the vector search; False (not
    recorded) where the extension cannot be created."""
    available = conn.execute(
        "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'"
    ).fetchone()
    if available is None:
        return False
    try:
        with conn.transaction():  # a savepoint: no privilege to create it is not fatal
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except Exception as exc:  # psycopg is not imported at module level
        if getattr(exc, "sqlstate", None) in {"42501", "58P01", "0A000"}:
            return False
        raise
    row = conn.execute(
        "SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'vector'"
    ).fetchone()
    ext = row[0]
    dims = int(ctx.dims)
    conn.execute(
        f"""
        ALTER TABLE llmem.memories ADD COLUMN embedding {ext}.vector({dims});
        GRANT INSERT (embedding), UPDATE (embedding) ON llmem.memories TO {MEMBER_ROLE};
        CREATE INDEX memories_embedding ON llmem.memories
            USING hnsw (embedding {ext}.vector_cosine_ops);
        CREATE FUNCTION llmem.search_vector(who name, keys text[], q {ext}.vector, lim integer)
            RETURNS TABLE (id text, distance double precision)
            LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, llmem, {ext}
            SET hnsw.ef_search = 200
            AS $f$ SELECT m.id, m.embedding <=> q FROM llmem.memories m
                   WHERE m.embedding IS NOT NULL AND m.deleted_at IS NULL
                     AND m.project = ANY(keys)
                     AND m.project = ANY((SELECT llmem.member_projects(who))::text[])
                   ORDER BY m.embedding <=> q LIMIT least(lim, 200) $f$;
        REVOKE ALL ON FUNCTION llmem.search_vector(name, text[], {ext}.vector, integer)
            FROM PUBLIC;
        GRANT EXECUTE ON FUNCTION llmem.search_vector(name, text[], {ext}.vector, integer)
            TO {MEMBER_ROLE};

        CREATE FUNCTION llmem.memories_forget_vector() RETURNS trigger
            LANGUAGE plpgsql SET search_path = pg_catalog, llmem
            AS $f$ BEGIN
                IF NEW.deleted_at IS NOT NULL THEN NEW.embedding := NULL; END IF;
                RETURN NEW;
            END $f$;
        CREATE TRIGGER memories_forget_vector BEFORE INSERT OR UPDATE ON llmem.memories
            FOR EACH ROW EXECUTE FUNCTION llmem.memories_forget_vector();
        """
    )
    return True


MIGRATIONS: list[tuple[int, str, Migration]] = [
    (1, "core", h001_core),
    (2, "vectors", h002_vectors),
]
VECTORS = 2


def prepare(conn: Any) -> None:
    """The schema and the migrations table, before any migration runs."""
    conn.execute(
        """
        CREATE SCHEMA IF NOT EXISTS llmem;
        CREATE TABLE IF NOT EXISTS llmem.schema_migrations (
            version integer PRIMARY KEY,
            name text NOT NULL,
            applied_at timestamptz NOT NULL DEFAULT now()
        );
        """
    )


def applied(conn: Any) -> set[int]:
    """The versions recorded as applied (empty before the first migration)."""
    if conn.execute("SELECT to_regclass('llmem.schema_migrations')").fetchone()[0] is None:
        return set()
    return {r[0] for r in conn.execute("SELECT version FROM llmem.schema_migrations")}


def migrate(conn: Any, ctx: MigrationContext, *, vectors: bool = True) -> list[int]:
    """Apply what is missing, each migration in its own transaction, one migrator at a
    time (an advisory lock). Returns the versions applied now."""
    done: list[int] = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('llmem.migrate'))")
        prepare(conn)
    for version, name, fn in MIGRATIONS:
        if version == VECTORS and not vectors:
            continue
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('llmem.migrate'))")
            if version in applied(conn):
                continue
            if fn(conn, ctx):
                conn.execute(
                    "INSERT INTO llmem.schema_migrations (version, name) VALUES (%s, %s)",
                    (version, name),
                )
                done.append(version)
    return done
