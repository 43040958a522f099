"""One source of the agent-facing tool wording (issue 19 §3): ``llmem_hooks/agents/tools.json``.

The five memory tools' names, descriptions and argument descriptions used to be written
twice, in plugin/llmem.ts and in agents/mcp_server.py, kept equal by a test. Now the MCP
server reads tools.json and `install_opencode` writes it into the installed plugin; the
repository's llmem.ts holds none of the words. (The plugin reading the file next door
when run from the repository: tests/e2e/test_plugin_tool_wording.py, with node.)
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from llmem_hooks.agents import install
from llmem_hooks.agents.mcp_server import build_server
from llmem_hooks.agents.tool_wording import (
    PLUGIN_TOOLS_LINE,
    plugin_text,
    resolved_wording,
    tool_wording,
)
from llmem_hooks.errors import LLMemError

ROOT = Path(__file__).resolve().parents[2]
NAMES = ["memory_search", "memory_remember", "memory_forget", "memory_get", "memory_timeline"]


def _installed_wording(text: str) -> object:
    m = re.search(r"^const INSTALLED_TOOLS: unknown = (\{.*\}) // llmem-hooks", text, re.M)
    assert m is not None
    return json.loads(m.group(1))


def test_the_file_names_the_five_tools_with_their_methods() -> None:
    wording = tool_wording()
    assert list(wording) == NAMES
    assert {n: s["method"] for n, s in wording.items()} == {n: n[7:] for n in NAMES}
    assert "BEFORE answering" in wording["memory_search"]["description"]


def test_the_repository_plugin_holds_none_of_the_words() -> None:
    source = (ROOT / "plugin" / "llmem.ts").read_text(encoding="utf-8")
    assert source.count(PLUGIN_TOOLS_LINE) == 1
    for spec in tool_wording().values():
        assert spec["description"][:40] not in source
        for arg in spec["args"].values():
            assert f'"{arg["description"]}"' not in source


def test_the_installed_plugin_carries_the_file_exactly() -> None:
    """Word for word; only "memory_types" becomes the registered types' list."""
    assert _installed_wording(install.plugin_bytes().decode()) == resolved_wording()
    assert resolved_wording(["fact"])["memory_search"]["args"]["type"]["values"] == ["fact"]
    for name, spec in resolved_wording().items():
        assert {k: v for k, v in spec.items() if k != "args"} == {
            k: v for k, v in tool_wording()[name].items() if k != "args"
        }
        for arg, a in spec["args"].items():
            raw = tool_wording()[name]["args"][arg]
            assert {k: v for k, v in a.items() if k != "values"} == {
                k: v for k, v in raw.items() if k != "values"
            }


def test_a_source_without_the_tools_line_is_refused() -> None:
    with pytest.raises(LLMemError, match="tools line"):
        plugin_text("// llmem-hooks plugin for OpenCode\nconst x = 1\n")


def test_the_mcp_server_lists_the_same_tools_and_arguments() -> None:
    server = build_server(lambda method, params: {})
    tools = asyncio.run(server.list_tools())
    wording = tool_wording()
    assert [t.name for t in tools] == NAMES
    for tool in tools:
        assert tool.description == wording[tool.name]["description"]
        assert set(tool.inputSchema["properties"]) == set(wording[tool.name]["args"])
        required = {a for a, s in wording[tool.name]["args"].items() if not s.get("optional")}
        assert set(tool.inputSchema.get("required", [])) == required


def test_the_mcp_front_cache_is_renewed_when_the_wording_changes() -> None:
    """tools/list is answered from a cache keyed by what it depends on: tools.json too."""
    from llmem_hooks.agents import mcp_front, mcp_server
    from llmem_hooks.agents.tool_wording import TOOLS_FILE

    st = TOOLS_FILE.stat()
    assert Path(mcp_front.TOOLS_FILE) == TOOLS_FILE
    assert [st.st_mtime_ns, st.st_size] in mcp_front.cache_stamp(mcp_server.__file__)
