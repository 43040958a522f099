"""llmem-hooks command line: store, search and manage memories; run the sidecar; hooks.

- `llmem_hooks.cli` (this module): the entry point `main`, kept small on purpose:
  ``llmem-hooks hook copilot <event>`` runs on every Copilot CLI session start and prompt,
  so it is answered by the running sidecar through `llmem_hooks.agents.hook_front`, else by
  `llmem_hooks.agents.copilot_hook`, before typer (or anything else the commands need) is
  imported. ``llmem-hooks mcp`` (the MCP server, `llmem_hooks.agents.mcp_server`)
  is answered the same way.
- `llmem_hooks.cli.quick`: plain ``search``, ``list``, ``stats`` and ``--version``
  without typer (~0.3 s of imports); any other form goes on to typer.
- `llmem_hooks.cli.app`: the typer app and its everyday commands; it registers the
  commands kept in their own modules (`dream`, `agent_tools`, `embed`, `viewer`), which
  import `quick` for what they share and never import `app` back.
- `llmem_hooks.cli.render`: how they print (plain text, ``--json``, ``--markdown``).

This module forwards no attributes: import a submodule by its name
(``import llmem_hooks.cli.app``).

Every command reads the same database (``--db``, else config.yaml's memory.db_path, else
``$LLMEM_HOME/memory.db``). Bad input prints one line starting with ``error:`` on stderr
and exits with code 2; nothing is written in that case.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # not `collections.abc` at run time: ~2 ms of every hook call
if TYPE_CHECKING:
    from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI (``argv`` defaults to ``sys.argv[1:]``); returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["hook"]:  # fast path: the sidecar answers through the front, else
        from ..agents.hook_front import relayed  # the hook runs here, without typer

        data = relayed(args[1:])
        if data is None:
            return 0
        import io

        from ..agents.copilot_hook import main as hook_main

        return hook_main(args[1:], stdin=io.BytesIO(data), exit_on_timeout=argv is None)
    if args == ["mcp"]:  # as the agents start it: the front answers before anything loads
        from ..agents.mcp_front import serve_default

        return serve_default()
    if args[:1] == ["mcp"]:  # a long-lived stdio server: its own small argument parser
        from ..agents.mcp_server import main as mcp_main

        return mcp_main(args[1:])
    from .quick import main as quick_main

    code = quick_main(args)  # plain search / list / stats / --version: no typer
    if code is not None:
        return code
    from .app import main as app_main

    return app_main(args)
