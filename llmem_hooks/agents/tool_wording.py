"""The memory tools as the agents read them: ``tools.json`` next to this module.

One source for the five tools' names, descriptions (when to search, when to remember) and
argument descriptions: the MCP server (`mcp_server`) reads it here, and the OpenCode plugin
(``plugin/llmem.ts``) gets it written into its installed copy by `install_opencode`
(`plugin_text`), or reads the file itself when run from the repository or the package.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import LLMemError

TOOLS_FILE = Path(__file__).with_name("tools.json")
# The line of plugin/llmem.ts that install replaces with the wording.
PLUGIN_TOOLS_LINE = "const INSTALLED_TOOLS: unknown = null // llmem-hooks: tools.json"
ARG_KINDS = frozenset({"string", "integer", "string[]", "boolean"})
METHODS = frozenset({"search", "remember", "forget", "get", "timeline"})  # the service's
# MCP's tool annotations (hints a client may show or act on: asks before a destructive one).
HINTS = frozenset({"readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"})
VALUES = frozenset({"memory_types"})  # an argument's allowed values: the registered types


@functools.cache
def tool_wording() -> dict[str, dict[str, Any]]:
    """``{tool name: {"method", "description", "annotations", "args": {name: {"kind",
    "description", "optional"?, "minimum"?, "maximum"?, "values"?}}}}``, in the order the
    agents list the tools. Checked: a broken file is a packaging bug, said at once rather
    than served as half a tool."""
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
                and all(isinstance(a.get(k, 0), int) for k in ("minimum", "maximum"))
                and a.get("values", "memory_types") in VALUES
                for a in spec["args"].values()
            )
            and isinstance(spec.get("annotations"), dict)
            and all(k in HINTS and isinstance(v, bool) for k, v in spec["annotations"].items())
        )
        if not ok:
            raise LLMemError(f"{TOOLS_FILE}: tool {name!r} is malformed")
    return data


def description(tool: str) -> str:
    return str(tool_wording()[tool]["description"])


def arg_description(tool: str, arg: str) -> str:
    return str(tool_wording()[tool]["args"][arg]["description"])


def tool_annotations(tool: str) -> dict[str, bool]:
    return dict(tool_wording()[tool]["annotations"])


def input_schema(tool: str, memory_types: Sequence[str]) -> dict[str, Any]:
    """The JSON Schema of ``tool``'s arguments, as MCP lists it and the server checks
    calls against it: every argument described, ``type`` one of ``memory_types``, bounds
    where tools.json sets them, no argument it does not know (a misspelt one is an error,
    not silently dropped)."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, arg in tool_wording()[tool]["args"].items():
        kind = arg["kind"]
        prop: dict[str, Any] = (
            {"type": "array", "items": {"type": "string"}} if kind == "string[]" else {"type": kind}
        )
        prop["description"] = arg["description"]
        for bound in ("minimum", "maximum"):
            if bound in arg:
                prop[bound] = arg[bound]
        if arg.get("values") == "memory_types":
            prop["enum"] = list(memory_types)
        properties[name] = prop
        if not arg.get("optional"):
            required.append(name)
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def type_choices() -> list[str]:
    """The registered memory types as the tools offer them: the built-in ones in their
    usual order, then any a plugin registered."""
    from ..registry import DEFAULT_MEMORY_TYPES, get_registered_types

    registered = get_registered_types()
    types = [t for t in DEFAULT_MEMORY_TYPES if t in registered]
    return types + sorted(registered - set(types))


def resolved_wording(memory_types: Sequence[str] | None = None) -> dict[str, dict[str, Any]]:
    """The wording with each ``"values": "memory_types"`` replaced by the list of types
    (the registered ones by default), for a reader that cannot ask the registry: the
    installed OpenCode plugin offers them as an enum, as the MCP server does."""
    if memory_types is None:
        memory_types = type_choices()
    out = json.loads(json.dumps(tool_wording()))
    for spec in out.values():
        for arg in spec["args"].values():
            if arg.get("values") == "memory_types":
                arg["values"] = list(memory_types)
    return out  # type: ignore[no-any-return]


def plugin_text(source: str) -> str:
    """The OpenCode plugin ``source`` with the wording written in (what install copies),
    the memory types resolved (`resolved_wording`): the installed file needs nothing next
    to it."""
    if source.count(PLUGIN_TOOLS_LINE) != 1:
        raise LLMemError("the OpenCode plugin source lacks its tools line; reinstall llmem-hooks")
    wording = json.dumps(resolved_wording(), ensure_ascii=True, separators=(",", ":"))
    return source.replace(PLUGIN_TOOLS_LINE, PLUGIN_TOOLS_LINE.replace("= null", f"= {wording}"), 1)
