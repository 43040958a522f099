"""The memory tools as the agents read them: ``tools.json`` next to this module.

One source for the five tools' names, descriptions (when to search, when to remember) and
argument descriptions: the MCP server (`mcp_server`) reads it here, and the OpenCode plugin
(``plugin/llmem.ts``) gets it written into its installed copy by `install_opencode`
(`plugin_text`), or reads the file itself when run from the repository or the package.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from ..errors import LLMemError

TOOLS_FILE = Path(__file__).with_name("tools.json")
# The line of plugin/llmem.ts that install replaces with the wording.
PLUGIN_TOOLS_LINE = "const INSTALLED_TOOLS: unknown = null // llmem-hooks: tools.json"
ARG_KINDS = frozenset({"string", "integer", "string[]", "boolean"})
METHODS = frozenset({"search", "remember", "forget", "get", "timeline"})  # the service's


@functools.cache
def tool_wording() -> dict[str, dict[str, Any]]:
    """``{tool name: {"method", "description", "args": {name: {"kind", "description",
    "optional"?}}}}``, in the order the agents list the tools. Checked: a broken file is a
    packaging bug, said at once rather than served as half a tool."""
    data = json.loads(TOOLS_FILE.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not data:
        raise LLMemError(f"{TOOLS_FILE}: not a JSON object of tools")
    for name, spec in data.items():
        ok = (
            isinstance(spec, dict)
            and isinstance(spec.get("description"), str)
            and spec.get("method") in METHODS
            and isinstance(spec.get("args"), dict)
            and all(
                isinstance(a, dict)
                and a.get("kind") in ARG_KINDS
                and isinstance(a.get("description"), str)
                for a in spec["args"].values()
            )
        )
        if not ok:
            raise LLMemError(f"{TOOLS_FILE}: tool {name!r} is malformed")
    return data


def description(tool: str) -> str:
    return str(tool_wording()[tool]["description"])


def arg_description(tool: str, arg: str) -> str:
    return str(tool_wording()[tool]["args"][arg]["description"])


def plugin_text(source: str) -> str:
    """The OpenCode plugin ``source`` with the wording written in (what install copies):
    the installed file needs nothing next to it."""
    if source.count(PLUGIN_TOOLS_LINE) != 1:
        raise LLMemError("the OpenCode plugin source lacks its tools line; reinstall llmem-hooks")
    wording = json.dumps(tool_wording(), ensure_ascii=True, separators=(",", ":"))
    return source.replace(PLUGIN_TOOLS_LINE, PLUGIN_TOOLS_LINE.replace("= null", f"= {wording}"), 1)
