"""The commands of `llmem-hooks`: a typer application (loaded by `llmem_hooks.cli.main`).

Every command reads the same database (``--db``, else config.yaml's memory.db_path, else
``$LLMEM_HOME/memory.db``). What each prints is formatted by `llmem_hooks.cli.render`
(plain text, ``--json``, ``--markdown``). Bad input prints one line starting with
``error:`` on stderr and exits with code 2; nothing is written in that case.

`llmem_hooks.cli` is the entry point: it answers ``llmem-hooks hook ...`` (the Copilot CLI
hook command, run on every session start) without importing this module or typer.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from enum import StrEnum
from importlib import resources
from pathlib import Path
from typing import Annotated

import typer

try:  # typer >= 0.2x vendors its own copy of click
    from typer._click.exceptions import UsageError  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - older typer with click as a dependency
    from click.exceptions import UsageError  # type: ignore[import-not-found,no-redef,assignment,unused-ignore]

from ..errors import NotFoundError, ValidationError
from ..evidence.cite import capture_specs
from ..paths import check_user_path
from ..redact import find_secrets
from ..registry import DEFAULT_MEMORY_TYPES
from ..store import archive, citations
from ..store import projects as project_names
from ..timestamps import parse_iso
from . import agent_tools, embed, team, viewer
from .citations import citations_app
from .dream import dream, dream_service
from .quick import (
    EXIT_USAGE,
    Invocation,
    MissingDatabase,
    begin,
    exit_code_for,
    run_list,
    run_search,
    run_stats,
)
from .render import Format, memory_line, print_memory, print_pruned, print_status

app = typer.Typer(
    name="llmem-hooks",
    help="A local memory layer for coding agents: the sidecar, and memory commands.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.")]
MarkdownOpt = Annotated[bool, typer.Option("--markdown", help="Print markdown.")]


def _agent_guide() -> str:
    return resources.files("llmem_hooks").joinpath("AGENT_GUIDE.md").read_text(encoding="utf-8")


@app.callback(invoke_without_command=True)
def root(
    ctx: typer.Context,
    db: Annotated[
        Path | None, typer.Option("--db", envvar="LLMEM_DB", help="Database file.", dir_okay=False)
    ] = None,
    as_json: JsonOpt = False,
    as_markdown: MarkdownOpt = False,
    agent_context: Annotated[
        bool,
        typer.Option(
            "--agent-context", help="Print the guide for agents (how to write and find memories)."
        ),
    ] = False,
    version: Annotated[bool, typer.Option("--version", help="Print the version.")] = False,
) -> None:
    """A local memory layer for coding agents: store, search and manage memories."""
    inv = Invocation.of(ctx)
    inv.db = db
    inv.fmt = inv.fmt_for(as_json, as_markdown)
    if agent_context:
        typer.echo(_agent_guide(), nl=False)
        raise typer.Exit(0)
    if version:
        from .. import __version__

        typer.echo(__version__)
        raise typer.Exit(0)
    if ctx.invoked_subcommand is None:
        typer.echo(ctx.get_help())


# -- commands -----------------------------------------------------------------------------
def _embedding_for(inv: Invocation, content: str) -> list[float] | None:
    """The memory's vector when a local embedder answers (so semantic search finds it and
    near-duplicates merge); None otherwise, silently: keyword search still finds it."""
    from ..redact import redact_secrets

    safe = redact_secrets(content)
    if safe is None:
        return None  # the store refuses it with a clear error
    engine, vector = inv.local_embedding(safe)
    if engine is not None:
        engine.close()
    elif inv.model.failure is not None and inv.model.failure.kind == "timeout":
        typer.echo(
            f"store: stored without an embedding (the sidecar adds it later): "
            f"{inv.model.cause()}{inv.model.retry_note()}",
            err=True,
        )
    return vector


@app.command()
def store(
    ctx: typer.Context,
    content: Annotated[str | None, typer.Argument(help="The memory text (or use --file).")] = None,
    file: Annotated[
        Path | None,
        typer.Option(
            "--file", "-f", help="Read the content from a file ('-' for stdin).", dir_okay=False
        ),
    ] = None,
    type: Annotated[
        str, typer.Option("--type", "-t", help=f"Memory type: {', '.join(DEFAULT_MEMORY_TYPES)}.")
    ] = "fact",
    tags: Annotated[str | None, typer.Option("--tags", help="Comma-separated tags.")] = None,
    expires: Annotated[
        str | None, typer.Option("--expires", help="Expiry date (ISO 8601).")
    ] = None,
    entered_by: Annotated[str, typer.Option("--entered-by", help="Who stores it.")] = "user",
    project: Annotated[
        str | None,
        typer.Option("--project", help="Project name, key or key prefix (default: global)."),
    ] = None,
    confidence: Annotated[
        float | None, typer.Option("--confidence", help="0..1 (default 0.8).")
    ] = None,
    cite: Annotated[
        list[str] | None,
        typer.Option(
            "--cite",
            metavar="PATH[:START[-END]]",
            help="Code the memory is about, relative to the current git repository (repeatable).",
        ),
    ] = None,
    as_json: JsonOpt = False,
    as_markdown: MarkdownOpt = False,
) -> None:
    """Store a memory. Prints its id."""
    inv = Invocation.of(ctx)
    fmt = inv.fmt_for(as_json, as_markdown)
    if content is None and file is None:
        raise ValidationError("nothing to store: give the content as an argument or with --file")
    if content is not None and file is not None:
        raise ValidationError("give the content as an argument or with --file, not both")
    if file is not None:
        try:
            content = sys.stdin.read() if str(file) == "-" else file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ValidationError(f"cannot read {file}: {exc}") from None
    assert content is not None
    if expires:
        expires = parse_iso(expires, field="--expires date")
    cites = capture_specs(Path.cwd(), cite) if cite else []  # before anything is written
    secrets = find_secrets(content)
    vector = _embedding_for(inv, content)
    with inv.open_store() as st, st.atomic():
        if project is not None:
            project = project_names.resolve(st.db, project)
        mid = st.add(
            type,
            content,
            tags=tags,
            expires_at=expires,
            entered_by=entered_by,
            project=project,
            confidence=confidence,
            source="cli",
            embedding=vector,
        )
        citations.add(st.db, mid, cites)
    if secrets:
        typer.echo(
            f"warning: the content looks like it holds a credential ({', '.join(secrets)});"
            " it was stored as [REDACTED]: store a pointer to where the secret lives instead",
            err=True,
        )
    typer.echo(json.dumps({"id": mid}) if fmt is Format.json else mid)


@app.command()
def search(
    ctx: typer.Context,
    query: Annotated[
        str,
        typer.Argument(help='Words (ANDed), AND/OR/NOT, "phrase", prefix*, or a plain question.'),
    ],
    tags: Annotated[
        str | None, typer.Option("--tags", help="Only memories with all these tags.")
    ] = None,
    any_tag: Annotated[
        str | None, typer.Option("--any-tag", help="Only memories with any of these tags.")
    ] = None,
    after: Annotated[
        str | None, typer.Option("--after", help="Created on/after (ISO date).")
    ] = None,
    before: Annotated[
        str | None, typer.Option("--before", help="Created before (ISO date).")
    ] = None,
    entered_by: Annotated[str | None, typer.Option("--entered-by")] = None,
    type: Annotated[str | None, typer.Option("--type", "-t")] = None,
    project: Annotated[
        str | None,
        typer.Option(
            "--project",
            help="This project's memories plus global ones (its name, key or key prefix).",
        ),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option("--limit", "-n", min=1, max=1000, help="Max results (config: 10)."),
    ] = None,
    offset: Annotated[int, typer.Option("--offset", min=0)] = 0,
    fuzzy: Annotated[
        bool | None,
        typer.Option(
            "--fuzzy/--no-fuzzy",
            help="Typo-tolerant matching (default: when fewer than 5 exact hits).",
        ),
    ] = None,
    threshold: Annotated[
        float | None,
        typer.Option("--threshold", min=0.0, max=1.0, help="Fuzzy similarity threshold (0.7)."),
    ] = None,
    mode: Annotated[
        str | None,
        typer.Option(
            "--mode",
            help="hybrid (keywords + embeddings), fts or semantic. Default: hybrid when the"
            " embedding model answers, else fts.",
        ),
    ] = None,
    full: Annotated[
        bool,
        typer.Option(
            "--full",
            help="Show every result whole (default: a long one shows the lines that answer).",
        ),
    ] = False,
    team_too: Annotated[
        bool,
        typer.Option("--team", help="Ask the team hub too; its answers fused with yours."),
    ] = False,
    as_json: JsonOpt = False,
    as_markdown: MarkdownOpt = False,
) -> None:
    """Search memories, best match first."""
    inv = Invocation.of(ctx)
    run_search(
        inv,
        query,
        tags=tags,
        any_tag=any_tag,
        after=after,
        before=before,
        entered_by=entered_by,
        type=type,
        project=project,
        limit=limit,
        offset=offset,
        fuzzy=fuzzy,
        threshold=threshold,
        mode=mode,
        full=full,
        fmt=inv.fmt_for(as_json, as_markdown),
        team=team.team_search_hits if team_too else None,
    )


class SortField(StrEnum):
    created = "created"
    updated = "updated"
    accessed = "accessed"
    expires = "expires"
    confidence = "confidence"
    content = "content"
    type = "type"


class Order(StrEnum):
    asc = "asc"
    desc = "desc"


@app.command(name="list")
def list_(
    ctx: typer.Context,
    sort: Annotated[SortField, typer.Option("--sort")] = SortField.created,
    order: Annotated[Order, typer.Option("--order")] = Order.desc,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, max=100000)] = 20,
    offset: Annotated[int, typer.Option("--offset", min=0)] = 0,
    type: Annotated[str | None, typer.Option("--type", "-t")] = None,
    tags: Annotated[str | None, typer.Option("--tags")] = None,
    project: Annotated[
        str | None, typer.Option("--project", help="Project name, key or key prefix.")
    ] = None,
    entered_by: Annotated[str | None, typer.Option("--entered-by")] = None,
    include_invalid: Annotated[
        bool, typer.Option("--all", help="Include forgotten and expired memories.")
    ] = False,
    as_json: JsonOpt = False,
    as_markdown: MarkdownOpt = False,
) -> None:
    """List memories (newest first by default)."""
    inv = Invocation.of(ctx)
    run_list(
        inv,
        sort=sort.value,
        order=order.value,
        limit=limit,
        offset=offset,
        type=type,
        tags=tags,
        project=project,
        entered_by=entered_by,
        include_invalid=include_invalid,
        fmt=inv.fmt_for(as_json, as_markdown),
    )


@app.command()
def show(
    ctx: typer.Context,
    memory_id: Annotated[str, typer.Argument(metavar="ID", help="Id or unique id prefix.")],
    as_json: JsonOpt = False,
    as_markdown: MarkdownOpt = False,
) -> None:
    """Show one memory with all its fields and relations."""
    inv = Invocation.of(ctx)
    fmt = inv.fmt_for(as_json, as_markdown)
    with inv.open_store(read_only=True) as st:
        mem = st.get(st.resolve_id(memory_id))
        assert mem is not None
        names = project_names.display_names(st.db)
        cites = citations.of_memory(st.db, mem["id"])
        print_memory(mem, st.get_relations(mem["id"]), fmt, names, cites)


@app.command()
def forget(
    ctx: typer.Context,
    memory_id: Annotated[str, typer.Argument(metavar="ID", help="Id or unique id prefix.")],
    reason: Annotated[str | None, typer.Option("--reason", help="Why it no longer holds.")] = None,
) -> None:
    """Invalidate a memory: it stays in history but is no longer returned."""
    with Invocation.of(ctx).open_store() as st:
        full = st.resolve_id(memory_id)
        if not st.invalidate(full, reason):
            raise ValidationError(f"memory {full} is already forgotten")
    typer.echo(f"forgot {full}")


PREVIEW_LINES = 5


def _stdin_is_tty() -> bool:
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (AttributeError, ValueError, OSError):  # closed or replaced stdin
        return False


def _confirm(question: str) -> bool:
    """Ask on the terminal (prompt on stderr, so --json output stays clean); only an
    explicit y/yes says yes."""
    sys.stderr.write(f"{question} [y/N] ")
    sys.stderr.flush()
    answer = sys.stdin.readline()
    return answer.strip().lower() in ("y", "yes")


@app.command()
def prune(
    ctx: typer.Context,
    before: Annotated[
        str | None,
        typer.Option("--before", help="Also delete memories created before this date (ISO 8601)."),
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only show what would go.")] = False,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Delete without asking (needed when not a TTY).")
    ] = False,
    as_json: JsonOpt = False,
    as_markdown: MarkdownOpt = False,
) -> None:
    """Delete expired memories for good (and, with --before, older ones). Shows what goes,
    asks on a terminal (--yes otherwise), and first writes what it deletes to
    $LLMEM_HOME/backups/prune-<time>.json (restore with `llmem-hooks import`)."""
    inv = Invocation.of(ctx)
    fmt = inv.fmt_for(as_json, as_markdown)
    if before:
        before = parse_iso(before, field="--before date")
    with inv.open_store() as st:
        doomed = st.prune(before=before, dry_run=True)
        n = len(doomed)
        noun = f"memor{'y' if n == 1 else 'ies'}"
        if dry_run or not doomed:
            print_pruned(doomed, fmt, dry_run=dry_run, backup=None)
            return
        if not yes:
            preview = [memory_line(m) for m in doomed[:PREVIEW_LINES]]
            if n > PREVIEW_LINES:
                preview.append(f"... and {n - PREVIEW_LINES} more (see them with --dry-run)")
            if not _stdin_is_tty():
                raise ValidationError(
                    f"prune would delete {n} {noun}; rerun with --yes to confirm "
                    "(or --dry-run to list them)"
                )
            typer.echo("\n".join(preview), err=True)
            if not _confirm(f"delete these {n} {noun} for good (a backup is kept)?"):
                typer.echo("nothing deleted", err=True)
                raise typer.Exit(1)
        backup = archive.write_backup(
            "prune", st.export_all(limit=None, ids=[m["id"] for m in doomed])
        )
        gone = st.prune(before=before, only_ids=[m["id"] for m in doomed])
    print_pruned(gone, fmt, dry_run=False, backup=backup)


@app.command()
def stats(
    ctx: typer.Context,
    as_json: JsonOpt = False,
    as_markdown: MarkdownOpt = False,
    embeddings: Annotated[
        bool, typer.Option("--embeddings", help="Embedding quality metrics instead.")
    ] = False,
) -> None:
    """Counts by type, tag, agent and project, and the database size; with --embeddings,
    the quality of the stored vectors (anisotropy, similarity range, discrimination gap)."""
    inv = Invocation.of(ctx)
    run_stats(inv, inv.fmt_for(as_json, as_markdown), embeddings)


@app.command()
def doctor(ctx: typer.Context, as_json: JsonOpt = False, as_markdown: MarkdownOpt = False) -> None:
    """Which extractor the hooks use and why: Ollama enabled and reachable, base URL
    allowed, model pulled, budget left today. Exit 0 even without Ollama (the heuristics
    run); 2 for a configuration that cannot work."""
    from ..agents.doctor import diagnose, exit_code, render

    inv = Invocation.of(ctx)
    fmt = inv.fmt_for(as_json, as_markdown)
    cfg = inv.config(create=False)  # a diagnosis creates nothing (no home, no database)
    try:
        with inv.open_store(read_only=True) as st:
            checks = diagnose(cfg, st)
    except MissingDatabase:
        checks = diagnose(cfg, None)
    if fmt is Format.json:
        typer.echo(json.dumps({"checks": [c.as_dict() for c in checks]}, indent=1))
    else:
        typer.echo(render(checks, markdown=fmt is Format.markdown), nl=False)
    raise typer.Exit(exit_code(checks))


@app.command(name="export")
def export_(
    ctx: typer.Context,
    file: Annotated[
        Path, typer.Argument(help="JSON file to write ('-' for stdout).", dir_okay=False)
    ],
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, help="At most this many (default: all).")
    ] = None,
) -> None:
    """Export all memories (with tags, relations and embeddings) to a JSON file."""
    if str(file) != "-":
        file = check_user_path(file.absolute(), "file", "export")
    from ..progress import Progress

    if str(file) != "-" and not file.parent.is_dir():
        raise ValidationError(f"cannot write {file}: folder {file.parent} does not exist")
    opened = Invocation.of(ctx).open_store(read_only=True)
    with opened as st, Progress("exporting memories", min_total=1000) as bar:
        memories = st.export_all(limit=limit, progress=bar.update)
    if str(file) == "-":
        typer.echo(json.dumps(archive.wrap(memories), ensure_ascii=False, indent=1))
        return
    archive.write_export(file, memories)
    typer.echo(f"exported {len(memories)} memories to {file}", err=True)


@app.command(name="import")
def import_(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(help="JSON file written by 'export'.", dir_okay=False)],
) -> None:
    """Import memories from an export file: all or nothing, existing ids are skipped."""
    from ..progress import Progress

    memories = archive.read_export(file)
    with (
        Invocation.of(ctx).open_store() as st,
        Progress("importing memories", min_total=1000) as bar,
    ):
        added = st.import_memories(memories, progress=bar.update)
    typer.echo(f"imported {added} memories ({len(memories) - added} already present)", err=True)


# -- entry point --------------------------------------------------------------------------


# -- the sidecar and sessions ---------------------------------------------------------------
@app.command()
def run(
    ctx: typer.Context,
) -> None:
    """Run the sidecar in the foreground: watch the agents' session stores and fire the
    created / idle / compacting / ending hooks (Ctrl-C or SIGTERM stops it). One per
    LLMEM_HOME: a second one exits with a message."""
    from ..agents import hook_door
    from ..agents.hook_relay import RELAY_METHOD, relay
    from ..sidecar.lock import AlreadyRunning
    from ..sidecar.loop import run_foreground

    try:  # the Copilot hook's front and the launcher's door have the sidecar do its work
        code = run_foreground(
            Invocation.of(ctx).config_for_db(),
            relays={RELAY_METHOD: relay},
            companions=(hook_door.start,),
        )
    except AlreadyRunning as exc:
        typer.echo(f"llmem-hooks run: {exc}", err=True)
        raise typer.Exit(1) from None
    raise typer.Exit(code)


@app.command()
def status(ctx: typer.Context, as_json: JsonOpt = False, as_markdown: MarkdownOpt = False) -> None:
    """Whether the sidecar runs (pid), which stores it watches, the sessions it has seen
    and the last event of each."""
    from ..service.client import answers
    from ..session.hooks import default_adapters
    from ..sidecar.lock import running_pid
    from ..store import sessions as session_state

    inv = Invocation.of(ctx)
    fmt = inv.fmt_for(as_json, as_markdown)
    cfg = inv.config(create=False)
    pid = running_pid()
    service = answers(timeout=0.5) if pid is not None else None
    stores = {name: [str(p) for p in a.watch_paths()] for name, a in default_adapters(cfg).items()}
    with inv.open_store(read_only=True) as st:
        sessions = session_state.all_sessions(st.db, limit=50)
        rows = []
        for rec in sessions:
            last = session_state.last_extraction_at(st.db, rec.session_id)
            rows.append(
                {
                    "session_id": rec.session_id,
                    "agent": rec.agent,
                    "project": rec.project,
                    "state": rec.state,
                    "end_reason": rec.end_reason,
                    "last_activity_ms": rec.last_activity_ms,
                    "last_extraction": last,
                }
            )
    print_status(pid, stores, rows, fmt, service)


@app.command()
def context(
    ctx: typer.Context,
    session_id: Annotated[str, typer.Argument(help="The agent's session id.")],
    resume: Annotated[
        bool, typer.Option("--resume", help="Print the resume pack instead.")
    ] = False,
) -> None:
    """Print a session's context file (what its prompt carries), or its resume pack."""
    from ..paths import get_context_dir, read_regular_file, validate_session_id
    from ..session.context import context_path, resume_path

    validate_session_id(session_id)
    folder = get_context_dir(Invocation.of(ctx).config(create=False).context.dir)
    path = resume_path(session_id, folder) if resume else context_path(session_id, folder)
    text = read_regular_file(path)  # never through a symlink planted in the folder
    if text is None:
        raise NotFoundError(f"no {'resume pack' if resume else 'context'} for session {session_id}")
    typer.echo(text, nl=False)


@app.command()
def install(
    ctx: typer.Context,
    opencode: Annotated[
        bool, typer.Option("--opencode", help="Install the OpenCode plugin.")
    ] = False,
    copilot: Annotated[
        bool,
        typer.Option("--copilot", help="Install the GitHub Copilot CLI hooks."),
    ] = False,
    service: Annotated[
        bool, typer.Option("--service", help="Only a timer for the dream cycle (systemd/launchd).")
    ] = False,
) -> None:
    """Set up the agents: with no flag, every agent found on this machine (OpenCode: the
    plugin in ~/.config/opencode/plugin/ and its settings; GitHub Copilot CLI: the hooks
    file ~/.copilot/hooks/llmem.json). Safe to run again."""
    import shutil

    from ..agents import install as installer

    if service:
        return dream_service(Invocation.of(ctx), install=True)

    targets = {"opencode": opencode, "copilot": copilot}
    if not any(targets.values()):
        found_oc = shutil.which("opencode") or installer.opencode_plugin_dir().parent.exists()
        targets["opencode"] = bool(found_oc)
        targets["copilot"] = bool(shutil.which("copilot") or installer.copilot_home().exists())
        if not any(targets.values()):
            typer.echo(
                "no supported agent found (OpenCode, GitHub Copilot CLI); "
                "use --opencode or --copilot to force",
                err=True,
            )
            raise typer.Exit(1)
    if targets["opencode"]:
        installer.install_opencode(report=typer.echo)
    if targets["copilot"]:
        installer.install_copilot(report=typer.echo)


@app.command()
def uninstall(
    ctx: typer.Context,
    opencode: Annotated[
        bool, typer.Option("--opencode", help="Remove the OpenCode plugin only.")
    ] = False,
    copilot: Annotated[
        bool, typer.Option("--copilot", help="Remove the GitHub Copilot CLI hooks only.")
    ] = False,
    service: Annotated[
        bool, typer.Option("--service", help="Remove the dream timer only.")
    ] = False,
) -> None:
    """Remove what `install` put in place (memories, config and context files stay)."""
    from ..agents import install as installer

    if service:
        return dream_service(Invocation.of(ctx), install=False)

    both = not (opencode or copilot)
    if opencode or both:
        installer.uninstall_opencode(report=typer.echo)
    if copilot or both:
        installer.uninstall_copilot(report=typer.echo)


# Commands kept in their own modules (imported above; none imports this one), registered
# here in the order `--help` lists them: the dream cycle, the agents' per-prompt recall and
# MCP server, embedding, the viewer (`ui`, `report`).
app.command(name="dream")(dream)
app.command()(agent_tools.recall)
app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(
    agent_tools.mcp
)
app.command()(embed.embed)
app.command()(viewer.ui)
app.command()(viewer.report)
app.add_typer(team.team_app)
app.command()(team.share)
app.command()(team.unshare)
app.add_typer(citations_app)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the typer CLI; map errors to one line on stderr and an exit code."""
    begin()
    command = typer.main.get_command(app)
    try:
        rv = command.main(
            args=list(argv) if argv is not None else None,
            prog_name="llmem-hooks",
            standalone_mode=False,
            obj=Invocation(),  # this run's state, handed to every command (`Invocation.of`)
        )
        if isinstance(rv, int) and not isinstance(rv, bool):  # typer.Exit(code), non-standalone
            return rv
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        typer.echo("aborted", err=True)
        return 130
    except UsageError as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # bare `llmem-hooks`: show the help
            typer.echo(exc.format_message())
            return 0
        typer.echo(f"error: {exc.format_message()}", err=True)
        return EXIT_USAGE
    except Exception as exc:
        code = exit_code_for(exc)
        if code is None:
            raise
        return code
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
