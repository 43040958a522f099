"""`llmem-hooks dream`: the dream cycle from the command line (docs/dream.md).

Registered on the typer app by `llmem_hooks.cli.app`; kept apart so app.py stays a
table of the everyday commands. Prints plain lines (``--json`` for the whole result).
"""

from __future__ import annotations

import contextlib
import json
from typing import Annotated, Any

import typer

from ..errors import ValidationError
from .quick import Invocation, MissingDatabase

PREVIEW_PER_KIND = 10


def dream(
    ctx: typer.Context,
    apply: Annotated[
        bool, typer.Option("--apply", help="Make the changes (default: only show them).")
    ] = False,
    phase: Annotated[
        list[str] | None,
        typer.Option("--phase", help="light, deep or rem (repeatable; default: all three)."),
    ] = None,
    undo: Annotated[
        str | None, typer.Option("--undo", metavar="RUN", help="Undo an applied run.")
    ] = None,
    runs: Annotated[bool, typer.Option("--runs", help="List the recent runs.")] = False,
    trigger: Annotated[str, typer.Option("--trigger", hidden=True)] = "cli",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """The dream cycle: merge near-duplicates, retire expired memories, prune old
    episodes (light); consolidate the inbox, supersede, boost, decay (deep); link related
    memories, flag stale procedures (rem). A dry run unless --apply; an applied run is
    logged (diary, report, --undo RUN)."""
    from ..dream.cycle import Dreamer, one_dream_at_a_time
    from ..dream.report import describe

    if trigger not in ("cli", "timer", "sidecar"):
        raise ValidationError("--trigger must be cli, timer or sidecar")
    if sum(bool(x) for x in (apply, undo, runs)) > 1:
        raise ValidationError("--apply, --undo and --runs cannot be combined")
    # A change takes the dream lock before the store opens: a second run is refused at
    # once, even while the first holds a write transaction (Dreamer re-enters the lock).
    inv = Invocation.of(ctx)
    inv.config(create=bool(apply or undo))  # a dry run writes no config.yaml either
    path = inv.db_path()
    if not (apply or undo) and not path.exists():
        # A dry run or --runs only reads: it creates no folder and no database.
        raise MissingDatabase(f"no database at {path}")
    guard: Any = contextlib.nullcontext()
    if (apply or undo) and path.parent.is_dir():
        what = f"dream --undo {undo}" if undo else f"dream --apply ({trigger})"
        guard = one_dream_at_a_time(path, what)
    with guard, inv.open_store() as st:
        dreamer = Dreamer(st, inv.config())
        if runs:
            _print_runs(st, as_json)
            return
        if undo:
            counts = dreamer.undo(undo)
            if as_json:
                typer.echo(json.dumps({"undone": undo, "changes": counts}, indent=1))
            else:
                done = ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "nothing"
                typer.echo(f"undid run {undo}: {done}")
            return
        from ..progress import progress

        with progress("dream cycle (steps)") as bar:
            run = dreamer.run(phase or None, apply, trigger=trigger, progress=bar.update)
    if as_json:
        typer.echo(json.dumps(run.as_dict(), indent=1, default=str))
        return
    head = f"dream run {run.run_id}" if apply else "dream (dry run: nothing changed)"
    typer.echo(f"{head} in {run.seconds:.2f} s")
    for r in run.results:
        counts = r.counts()
        summary = ", ".join(f"{n} {k}" for k, n in counts.items()) or "nothing to do"
        typer.echo(f"{r.phase}: {summary}")
        for kind in r.COUNTED:
            items: list[dict[str, Any]] = getattr(r, kind)
            for item in items[:PREVIEW_PER_KIND]:
                typer.echo(f"  {describe(kind, item)}")
            if len(items) > PREVIEW_PER_KIND:
                typer.echo(f"  ... and {len(items) - PREVIEW_PER_KIND} more {kind}")
        for line in [*r.notes, *(f"backup: {b}" for b in r.backups)]:
            typer.echo(f"  {line}")
        for err in r.errors:
            typer.echo(f"  error: {err}", err=True)
    if apply:
        typer.echo(
            f"diary: {run.diary}\nreport: {run.report}\nundo: llmem-hooks dream --undo {run.run_id}"
        )
    else:
        typer.echo("rerun with --apply to make these changes")


def _print_runs(store: Any, as_json: bool) -> None:
    from ..store.dream import list_runs
    from ..timestamps import for_people

    rows = list_runs(store)
    if as_json:
        typer.echo(json.dumps(rows, indent=1))
        return
    if not rows:
        typer.echo("no dream runs yet")
    for r in rows:
        undone = f", undone at {for_people(r['undone_at'])}" if r["undone_at"] else ""
        typer.echo(
            f"{r['run_id']}  {for_people(r['started_at'])}  {r['trigger']}  {r['phases']}"
            f"  {r['changes']} changes{undone}"
        )


def dream_service(inv: Invocation, install: bool) -> None:
    """``install --service`` / ``uninstall --service``: the dream timer's unit files."""
    from ..agents.schedule import install_service, uninstall_service

    if install:
        install_service(inv.config().dream.schedule, report=typer.echo)
    else:
        uninstall_service(report=typer.echo)
