"""llmem-hooks command line: store, search and manage memories; run the sidecar; hooks.

The commands themselves live in `llmem_hooks.cli_app` (a typer application). This module
is the entry point and stays small: ``llmem-hooks hook copilot <event>`` runs on every
Copilot CLI session start and prompt, so it is answered by `llmem_hooks.copilot_hook`
before typer (or anything else the commands need) is imported.

Every command reads the same database (``--db``, else config.yaml's memory.db_path, else
``$LLMEM_HOME/memory.db``). Bad input prints one line starting with ``error:`` on stderr
and exits with code 2; nothing is written in that case.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI (``argv`` defaults to ``sys.argv[1:]``); returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["hook"]:  # fast path: no typer, nothing the hook does not use
        from .copilot_hook import main as hook_main

        return hook_main(args[1:], exit_on_timeout=argv is None)
    from .cli_app import main as app_main

    return app_main(args)


def __getattr__(name: str) -> Any:
    """``llmem_hooks.cli.app`` and friends, from `llmem_hooks.cli_app` (PEP 562)."""
    if name.startswith("__"):
        raise AttributeError(name)
    from . import cli_app

    return getattr(cli_app, name)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
