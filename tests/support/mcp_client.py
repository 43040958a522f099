"""The official MCP SDK client driving `llmem-hooks mcp` over stdio: a real subprocess
(shared by the MCP server's tests and the id-scope tests)."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

EXE = Path(sys.executable).with_name("llmem-hooks")
TOOLS = {"memory_search", "memory_remember", "memory_forget", "memory_get", "memory_timeline"}
SECRET = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


def mcp_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "COPILOT_AGENT_SESSION_ID"}
    env.update(extra)
    return env


async def _session_calls(
    params: StdioServerParameters, calls: list[tuple[str, dict[str, Any]]]
) -> tuple[list[Any], list[tuple[bool, str]]]:
    """List the tools, then make ``calls`` in order: ``(is_error, text)`` each."""
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = (await session.list_tools()).tools
        out = []
        for name, args in calls:
            res = await session.call_tool(name, args)
            text = "\n".join(getattr(c, "text", "") for c in res.content)
            out.append((bool(res.isError), text))
        return tools, out


def run_calls(
    calls: list[tuple[str, dict[str, Any]]],
    cwd: Path,
    args: tuple[str, ...] = (),
    env: Mapping[str, str] | None = None,
) -> tuple[list[Any], list[tuple[bool, str]]]:
    params = StdioServerParameters(
        command=str(EXE), args=["mcp", *args], env=dict(env or mcp_env()), cwd=str(cwd)
    )
    return asyncio.run(_session_calls(params, calls))
