"""``llmem-hooks team ...``, ``share`` and ``unshare``: team memory from the command line.

Registered on the typer app by `llmem_hooks.cli.app`. The hub is PostgreSQL (docs/team.md):
who may read what is decided there, by row-level security on each person's own role;
these commands only set it up, show it and move memories now instead of at the sidecar's
next pass.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..errors import LLMemError, NotFoundError, ValidationError
from .quick import Invocation

if TYPE_CHECKING:
    from ..store import MemoryStore
    from ..store.hub import Hub
    from ..team.connection import HubAddress

team_app = typer.Typer(
    name="team",
    help="Share project memory with a team through PostgreSQL (docs/team.md).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
members_app = typer.Typer(
    name="members",
    help="Who may read and write a project's shared memory.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
team_app.add_typer(members_app)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.")]
ProjectOpt = Annotated[
    str | None,
    typer.Option(
        "--project",
        help="The project (its name, key or key prefix; default: the current directory's).",
    ),
]


class HubError(LLMemError):
    """No hub is joined here (exit 1)."""


def _home() -> Path:
    from ..paths import get_llmem_home

    return get_llmem_home()


def _address(inv: Invocation | None = None) -> HubAddress:
    from ..team import connection

    configured = inv.config(create=False).team.hub if inv is not None else None
    address = connection.load(_home(), configured)
    if address is None:
        raise HubError("no team hub: run `llmem-hooks team join DSN` first")
    return address


@contextlib.contextmanager
def _hub(address: HubAddress | str | None = None, inv: Invocation | None = None) -> Iterator[Hub]:
    from ..team import connection

    hub = connection.connect(address if address is not None else _address(inv), _home())
    try:
        yield hub
    finally:
        hub.close()


def _project(store: MemoryStore, given: str | None) -> tuple[str, str]:
    """(key, readable name) of ``--project`` or of the current directory's repository."""
    from ..project import project_key, project_name
    from ..store import projects as project_names

    if given is not None:
        key = project_names.resolve(store.db, given)
        if not project_names.is_known(store.db, key):
            raise ValidationError(
                f"no project {given!r} in this store: run it inside the repository, or give"
                " the name or key of a project seen here"
            )
        return key, project_names.name_of(store.db, key) or given
    cwd = Path.cwd()
    key = project_key(cwd)
    if key == str(cwd.resolve()):
        raise ValidationError("not in a git repository: give --project KEY or run it in one")
    return key, project_name(cwd) or key[:12]


def _project_here(inv: Invocation, given: str | None) -> tuple[str, str]:
    """`_project` read from this invocation's store (the members commands)."""
    inv.config()
    with inv.open_store() as st:
        return _project(st, given)


def _sync(inv: Invocation, store: MemoryStore, hub: Hub) -> dict[str, Any]:
    from ..team.sync import TeamSync

    return TeamSync(store, hub, inv.config().team).sync().as_dict()


def _echo_json(value: Any) -> None:
    typer.echo(json.dumps(value, indent=1, default=str))


@team_app.command("init")
def init(
    ctx: typer.Context,
    dsn: Annotated[str, typer.Argument(help="The hub database, as its owner: postgresql://...")],
    project: ProjectOpt = None,
    name: Annotated[
        str | None, typer.Option("--name", help="The project's readable name on the hub.")
    ] = None,
) -> None:
    """Create (or upgrade) the hub's schema, register this project, join it yourself, and
    print what each member runs."""
    from ..team import connection

    inv = Invocation.of(ctx)
    inv.config()
    with inv.open_store() as st:
        key, shown = _project(st, project)
        with _hub(dsn) as hub:
            applied = hub.migrate()
            hub.register_project(key, name or shown)
            address = connection.save(dsn, _home())
            result = _sync(inv, st, hub)
    typer.echo(
        f"hub ready at {address.display()} (schema migrations applied: {len(applied)}); "
        f"project {name or shown} registered, you ({address.role}) are its admin"
    )
    typer.echo(f"synced: pushed {result['pushed']}, pulled {result['pulled']}")
    typer.echo("next, for each member:")
    typer.echo(f"  you:  llmem-hooks team members add ROLE --create --project {name or shown}")
    typer.echo("  they: llmem-hooks team join 'postgresql://ROLE:PASSWORD@HOST:PORT/DB'")


@team_app.command("join")
def join(
    ctx: typer.Context,
    dsn: Annotated[str, typer.Argument(help="postgresql://ROLE[:PASSWORD]@HOST:PORT/DB")],
    as_json: JsonOpt = False,
) -> None:
    """Join a hub: keep its address (the password in a 0600 file), enroll every project
    your role may read, and sync once."""
    from ..team import connection

    inv = Invocation.of(ctx)
    inv.config()
    with _hub(dsn) as hub:  # check it before anything is kept
        role = hub.role
    address = connection.save(dsn, _home())
    with inv.open_store() as st, _hub(address) as hub:
        result = _sync(inv, st, hub)
        projects = hub.projects()
    if as_json:
        _echo_json({"hub": address.display(), "role": role, "projects": projects, **result})
        return
    listed = ", ".join(n or k[:12] for k, n in projects) or "none yet (ask an admin)"
    typer.echo(f"joined {address.display()} as {role}; projects: {listed}")
    typer.echo(f"synced: pushed {result['pushed']}, pulled {result['pulled']}")


@team_app.command("leave")
def leave(ctx: typer.Context) -> None:
    """Stop syncing: forget the hub and its password here. Local memories stay, those
    pulled from the team included; nothing is deleted on the hub."""
    from ..store import team as local
    from ..team import connection

    inv = Invocation.of(ctx)
    inv.config()
    with inv.open_store() as st:
        enrolled = [p.project for p in local.projects(st.db)]
        for key in enrolled:
            local.leave(st.db, key)
    removed = connection.forget(_home())
    if not removed and not enrolled:
        typer.echo("not in a team")
        return
    typer.echo(f"left the team hub ({len(enrolled)} projects); local memories stay")


@team_app.command("sync")
def sync(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """Push what changed here and pull what changed on the hub, now."""
    inv = Invocation.of(ctx)
    address = _address(inv)  # not in a team: say so before anything is created
    inv.config()
    with inv.open_store() as st, _hub(address) as hub:
        result = _sync(inv, st, hub)
    if as_json:
        _echo_json(result)
        return
    applied = ", ".join(f"{k} {v}" for k, v in sorted(result["applied"].items()))
    typer.echo(
        f"pushed {result['pushed']} (superseding {result['superseded']}, already there "
        f"{result['stale']}, refused {result['refused']}); pulled {result['pulled']}"
        + (f" ({applied})" if applied else "")
        + f" in {result['seconds']:.2f} s"
    )


@team_app.command("status")
def status(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """The hub (reachable?), your role, and per project: outbox, cursor, last push/pull,
    conflicts, the last error."""
    from ..store import projects as project_names
    from ..store import team as local
    from ..team import connection

    inv = Invocation.of(ctx)
    address = connection.load(_home(), inv.config(create=False).team.hub)
    out: dict[str, Any] = {"joined": address is not None, "hub": None, "reachable": None}
    heads: dict[str, int] = {}
    if address is not None:
        out["hub"] = address.display()
        out["role"] = address.role
        try:
            with _hub(address) as hub:
                out["reachable"] = True
                for key in hub.projects():
                    heads[key[0]] = hub.head(key[0])
        except LLMemError as exc:
            out["reachable"] = False
            out["error"] = str(exc)
    path = inv.db_path()
    projects: list[dict[str, Any]] = []
    if path.exists():
        with inv.open_store(read_only=True) as st:
            names = project_names.display_names(st.db)
            for item in local.projects(st.db):
                row = dataclasses.asdict(item)
                row.update(name=names.get(item.project), hub_head=heads.get(item.project))
                projects.append(row)
            out["outbox"] = local.outbox_size(st.db)
    out["projects"] = projects
    if as_json:
        _echo_json(out)
        return
    if address is None:
        typer.echo("not in a team (llmem-hooks team join DSN)")
        return
    reach = "reachable" if out["reachable"] else f"NOT reachable: {out.get('error')}"
    typer.echo(f"hub {out['hub']} ({reach}); role {address.role}; outbox {out.get('outbox', 0)}")
    for row in projects:
        behind = ""
        if row["hub_head"] is not None:
            behind = f", {max(0, row['hub_head'] - row['cursor'])} behind"
        typer.echo(
            f"  {row['name'] or row['project'][:12]}: cursor {row['cursor']}{behind}, "
            f"last push {row.get('last_push') or 'never'}, last pull "
            f"{row.get('last_pull') or 'never'}, conflicts {row.get('conflicts', 0)}"
            + (f", last error: {row['last_error']}" if row.get("last_error") else "")
        )


@members_app.command("add")
def members_add(
    ctx: typer.Context,
    role: Annotated[str, typer.Argument(help="The member's PostgreSQL role.")],
    project: ProjectOpt = None,
    access: Annotated[
        str, typer.Option("--access", help="read, write (default) or admin.")
    ] = "write",
    create: Annotated[
        bool,
        typer.Option(
            "--create",
            help="Create the role with a new password (printed once, for the member's join).",
        ),
    ] = False,
) -> None:
    """Let ROLE read (and write) the project's shared memory."""
    if access not in ("read", "write", "admin"):
        raise ValidationError("--access must be read, write or admin")
    inv = Invocation.of(ctx)
    key, shown = _project_here(inv, project)
    address = _address(inv)
    password = None
    with _hub(address) as hub:
        if create:
            password = secrets.token_urlsafe(24)
            hub.create_role(role, password)
        hub.add_member(key, role, access)
    typer.echo(f"{role} may now {'read' if access == 'read' else 'read and write'} {shown}")
    if password is not None:
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        parts = {k: v for k, v in conninfo_to_dict(address.dsn).items() if v is not None}
        parts.update(user=role, password=password)
        typer.echo("they join with (the password is shown only now):")
        typer.echo(f"  llmem-hooks team join '{make_conninfo('', **parts)}'")


@members_app.command("remove")
def members_remove(
    ctx: typer.Context,
    role: Annotated[str, typer.Argument(help="The member's PostgreSQL role.")],
    project: ProjectOpt = None,
) -> None:
    """Take ROLE out of the project: from now on the hub shows it nothing of it (what it
    already pulled stays on its machine)."""
    inv = Invocation.of(ctx)
    key, shown = _project_here(inv, project)
    with _hub(inv=inv) as hub:
        if not hub.remove_member(key, role):
            raise NotFoundError(f"{role} is not a member of {shown}")
    typer.echo(f"{role} removed from {shown}")


@members_app.command("list")
def members_list(ctx: typer.Context, project: ProjectOpt = None, as_json: JsonOpt = False) -> None:
    """The project's members and their access."""
    inv = Invocation.of(ctx)
    key, shown = _project_here(inv, project)
    with _hub(inv=inv) as hub:
        rows = hub.members(key)
    if as_json:
        _echo_json([{"role": r, "access": a} for r, a in rows])
        return
    typer.echo(f"{shown}: " + (", ".join(f"{r} ({a})" for r, a in rows) or "no members"))


def _on_memory(ctx: typer.Context, memory_id: str, act: Callable[[Any, str], Any]) -> str:
    """Run ``act(store, full id)`` on the memory ``memory_id`` names; its full id."""
    inv = Invocation.of(ctx)
    inv.config()
    with inv.open_store() as st:
        full = st.resolve_id(memory_id)
        act(st, full)
    return full


def share(
    ctx: typer.Context,
    memory_id: Annotated[str, typer.Argument(metavar="ID", help="A memory id (or prefix).")],
) -> None:
    """Share a memory of an enrolled project with the team (sent at the next sync)."""
    from ..store import team as local

    full = _on_memory(ctx, memory_id, local.share)
    typer.echo(f"shared {full[:12]} (sent at the next sync)")


def unshare(
    ctx: typer.Context,
    memory_id: Annotated[str, typer.Argument(metavar="ID", help="A memory id (or prefix).")],
) -> None:
    """Stop sharing a memory: yours is withdrawn from the hub at the next sync; it stays here."""
    from ..store import team as local

    full = _on_memory(ctx, memory_id, local.unshare)
    typer.echo(f"unshared {full[:12]}")


def team_search_hits(inv: Invocation, query: str, project: str | None, limit: int) -> list[Any]:
    """``search --team``: the hub's hits for ``query`` (enrolled projects, or ``project``)."""
    from ..store import projects as project_names
    from ..store import team as local
    from ..team.search import team_hits

    with inv.open_store(read_only=True) as st:
        if project is not None:
            project = project_names.resolve(st.db, project)
        projects = [project] if project else [p.project for p in local.projects(st.db)]
    if not projects:
        raise HubError("no team project enrolled here: run `llmem-hooks team join DSN` first")
    with _hub(inv=inv) as hub:
        return team_hits(hub, query, projects, limit)
