"""``llmem-hooks citations check``: check a project's cited memories now (docs/citations.md).

Registered on the typer app by `llmem_hooks.cli.app`. The check is the one the sidecar runs
at a session start (`session.citation_check.check_project`), against the working tree of
the current directory's git repository, with a longer budget (a person asked for it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from ..errors import LLMemError, ValidationError
from .quick import Invocation

CLI_BUDGET_S = 60.0  # the whole check (each citation: citations.per_citation_seconds)

citations_app = typer.Typer(
    name="citations",
    help="Check memories' code citations against the working tree (docs/citations.md).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _inert(text: str) -> str:
    return "".join(ch if ch.isprintable() else "?" for ch in text)


@citations_app.command("check")
def check(
    ctx: typer.Context,
    project: Annotated[
        str | None,
        typer.Option(
            "--project",
            help="The project whose memories to check (its name, key or key prefix; default:"
            " the current repository's). Checked against the current repository.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Check the cited memories of this repository's project now and record the results:
    one line per memory (id, state) and per citation (status, reason)."""
    from ..evidence.cite import repo_root
    from ..project import project_key
    from ..session.citation_check import check_project
    from ..store import citations as cited
    from ..store import projects as project_names

    here = Path.cwd()
    root = repo_root(here)
    if root is None:  # before anything is read or made (no config.yaml, no database)
        raise ValidationError(f"not in a git repository: {here} (run it inside one)")
    inv = Invocation.of(ctx)
    settings = inv.config().citations
    with inv.open_store() as st:
        if project is not None:
            key = project_names.resolve(st.db, project)
            if not project_names.is_known(st.db, key):
                raise ValidationError(f"no project {project!r} in this store")
        else:
            key = project_key(root)
        done = check_project(
            st,
            key,
            root,
            total_s=max(CLI_BUDGET_S, settings.start_budget_seconds),
            per_citation_s=settings.per_citation_seconds,
        )
        if done.busy:
            raise LLMemError("another check of this project is running; try again later")
        ids = list(dict.fromkeys(r.memory_id for r in done.results))
        states = {mid: cited.state(st.db, mid) for mid in ids}
    memories: list[dict[str, Any]] = [
        {
            "id": mid,
            "state": states[mid],
            "citations": [r.as_dict() for r in done.results if r.memory_id == mid],
        }
        for mid in ids
    ]
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "project": key,
                    "root": str(root),
                    "seconds": round(done.seconds, 3),
                    "counts": done.counts(),
                    "skipped_global": done.skipped_global,
                    "memories": memories,
                },
                indent=1,
            )
        )
        return
    for m in memories:  # paths and reasons may hold anything a file name can: shown inert
        typer.echo(f"{m['id']}  {m['state']}")
        for c in m["citations"]:
            extra = f" -> {c['moved_to']}" if c["moved_to"] and c["moved_to"] != c["spec"] else ""
            by = f", changed by {c['changed_by'][:12]}" if c["changed_by"] else ""
            typer.echo(_inert(f"  {c['spec']}  {c['status']} ({c['reason']}{by}){extra}"))
    counts = done.counts()
    typer.echo(
        f"{len(done.results)} citations of {len(memories)} memories checked against {root}:"
        f" {counts['valid']} valid, {counts['stale']} stale, {counts['unknown']} unknown"
        f" ({done.seconds:.2f} s)"
    )
