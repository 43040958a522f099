"""`llmem-hooks ui` (the local viewer) and `llmem-hooks report --html FILE` (the same as
one self-contained file), registered on the typer app by `llmem_hooks.cli.app`.
See docs/viewer.md."""

from __future__ import annotations

import signal
import sys
import threading
import webbrowser
from pathlib import Path
from types import FrameType
from typing import Annotated

import typer

from ..errors import ValidationError
from ..paths import check_user_path, write_private_file
from .quick import Invocation

SEARCH_LIMIT = 5_000  # report --html: the memories its search reaches by default


def ui(
    ctx: typer.Context,
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="Port on 127.0.0.1 (0: a free one).")
    ] = 0,
    open_browser: Annotated[
        bool, typer.Option("--open", help="Open the page in the default browser.")
    ] = False,
    idle_exit: Annotated[
        float | None,
        typer.Option(
            "--idle-exit",
            min=0.0,
            help="Stop after this many seconds without a request (config: viewer."
            "idle_exit_minutes; 0: only on Ctrl-C).",
        ),
    ] = None,
) -> None:
    """Serve the memory viewer on 127.0.0.1: memories by project and type, search,
    provenance, edit / forget / restore, the inbox, model usage, the dream report.
    Prints the URL (it holds the access token: keep it to yourself); --open gives the
    browser a one-time login code instead. Ctrl-C stops it."""
    from ..model.embed import embedder_from_config
    from ..viewer.data import ViewerData
    from ..viewer.server import ViewerServer

    inv = Invocation.of(ctx)
    cfg = inv.config()
    settings = cfg.viewer
    idle_s = idle_exit if idle_exit is not None else settings.idle_exit_minutes * 60
    embedder = embedder_from_config(cfg, interactive=True)
    try:
        with inv.open_store() as st:
            server = ViewerServer(
                ViewerData(st, cfg, embedder=embedder), port=port, idle_exit_s=idle_s
            )

            def stop(signum: int, frame: FrameType | None) -> None:
                server.stop.set()

            previous = signal.signal(signal.SIGTERM, stop)
            typer.echo(f"llmem-hooks viewer: {server.url}")
            sys.stdout.flush()
            if open_browser:  # a one-time code: the browser's command line is public
                threading.Thread(
                    target=webbrowser.open, args=(server.login_url(),), daemon=True
                ).start()  # a browser that stays in the foreground does not stop the server
            try:
                server.serve()
            except KeyboardInterrupt:
                typer.echo("llmem-hooks viewer: stopped", err=True)
            finally:
                signal.signal(signal.SIGTERM, previous)
    finally:
        if embedder is not None:
            embedder.close()


def report(
    ctx: typer.Context,
    html_file: Annotated[
        Path,
        typer.Option(
            "--html",
            help="Write the viewer as one self-contained HTML file ('-': stdout).",
            dir_okay=False,
        ),
    ],
    search_limit: Annotated[
        int,
        typer.Option(
            "--search-limit",
            min=0,
            max=100_000,
            help="Memories the report's search reaches, newest first (the listed ones at "
            "least; 0: only those). Each adds about 1 KB to the file.",
        ),
    ] = SEARCH_LIMIT,
) -> None:
    """Write what the viewer shows (memories by project and type, each one's provenance,
    the forgotten ones, the inbox, model usage, the dream report) as one HTML file that
    needs no server and loads nothing from elsewhere."""
    from ..viewer.data import ViewerData
    from ..viewer.page import render_page

    target = (
        None if str(html_file) == "-" else check_user_path(html_file.absolute(), "file", "--html")
    )
    if target is not None and not target.parent.is_dir():
        raise ValidationError(f"cannot write {target}: folder {target.parent} does not exist")
    inv = Invocation.of(ctx)
    with inv.open_store(read_only=True) as st:
        data = ViewerData(st, inv.config())
        overview = data.overview(details=True)
        index = data.report_search(overview, search_limit)
        page = render_page(overview, live=False, dream_html=data.dream_report(), search_index=index)
    if target is None:
        sys.stdout.write(page)
        return
    write_private_file(target, page)
    typer.echo(f"wrote the report to {target}", err=True)
