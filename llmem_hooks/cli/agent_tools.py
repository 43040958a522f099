"""`llmem-hooks recall` (what per-prompt recall gives a prompt) and `llmem-hooks mcp` (the
memory tools over MCP on stdio): the commands agents' integrations use, registered on the
typer app by `llmem_hooks.cli.app`. See docs/query-service.md and docs/mcp.md."""

from __future__ import annotations

import json
import os
from typing import Annotated, Any

import typer

from ..errors import ValidationError
from .quick import Invocation
from .render import Format


def recall(
    ctx: typer.Context,
    prompt: Annotated[str, typer.Argument(help="The user's prompt.")],
    session: Annotated[str, typer.Option("--session", help="The agent's session id.")],
    budget: Annotated[
        int | None, typer.Option("--budget", min=0, max=100_000, help="Tokens (config: 400).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Print what per-prompt recall would put in front of PROMPT in SESSION (the
    sidecar's query service, else in-process; docs/query-service.md). Marks what it
    prints as given to the session. Prints nothing below the relevance floor."""
    from ..service.client import ServiceCallError, call_in_process, query

    params: dict[str, Any] = {"session_id": session, "prompt": prompt, "directory": os.getcwd()}
    if budget is not None:
        params["budget_tokens"] = budget
    inv = Invocation.of(ctx)
    try:
        if inv.db is not None:  # another database than the sidecar's: in-process only
            out = call_in_process("recall", params, config=inv.config_for_db())
        else:
            out = query("recall", params, config=inv.config())
    except ServiceCallError as exc:
        raise ValidationError(str(exc)) from None
    if as_json or inv.fmt is Format.json:
        typer.echo(json.dumps(out, indent=1))
    elif out["block"]:
        typer.echo(out["block"])
    else:
        reason = out.get("reason", "")
        typer.echo(f"recall: nothing to add: {EMPTY_REASONS.get(reason, reason)}", err=True)


# Why `recall` printed nothing (its ``reason``), said on stderr so stdout stays the block.
EMPTY_REASONS = {
    "already_given": "what matches was already given in this session",
    "below_floor": "no memory is relevant enough to this prompt",
    "general": "the prompt asks for general knowledge, not about the project",
    "no_match": "no memory matches this prompt",
    "over_budget": "the matches do not fit the token budget",
    "disabled": "recall is off (recall.enabled false, or a budget of 0)",
    "too_slow": "the search hit its time limit",
}


def mcp(ctx: typer.Context) -> None:
    """Serve the memory tools over MCP on stdio (memory_search, memory_remember,
    memory_forget, memory_get, memory_timeline); `llmem-hooks mcp --help` for its options.
    Configuration for MCP clients: docs/mcp.md."""
    from ..agents.mcp_server import main as mcp_main

    raise typer.Exit(mcp_main(list(ctx.args)))
