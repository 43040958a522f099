"""The OpenCode plugin finds the tools' wording (llmem_hooks/agents/tools.json) under Node.

Installed, the wording is written into llmem.ts (tests/agents/test_tool_wording.py; the behaviour
harness in test_plugin_ts.py runs that form). Run from the repository (plugin/llmem.ts) or
the package (llmem_hooks/plugin/llmem.ts) it reads tools.json next door; without it, or
with a broken one, it registers no tools, logs why, and never throws or prints.
Needs npm and node (skipped without them), like test_plugin_ts.py.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from test_plugin_ts import PLUGIN, plugin_toolchain  # noqa: F401  (the fixture)

from llmem_hooks.agents.tool_wording import TOOLS_FILE, tool_wording

pytestmark = pytest.mark.opencode

PROBE = """
import fs from "node:fs"
import path from "node:path"
import { pathToFileURL } from "node:url"
const [pluginPath, scratch] = process.argv.slice(2)
process.env.LLMEM_HOME = path.join(scratch, "home")
const log = path.join(scratch, "plugin.log")
const mod = await import(pathToFileURL(pluginPath).href)
const hooks = await Object.values(mod)[0](
  { directory: scratch, worktree: scratch },
  { autostart: false, recall: false, log, command: ["false"],
    context_dir: path.join(scratch, "ctx") },
)
const tools = hooks.tool ?? {}
console.log(JSON.stringify({
  tools: Object.keys(tools),
  search: tools.memory_search?.description ?? null,
  query: tools.memory_search?.args?.query?.description ?? null,
  log: fs.existsSync(log) ? fs.readFileSync(log, "utf8") : "",
}))
"""


@pytest.fixture(scope="module")
def compiled_source(plugin_toolchain: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:  # noqa: F811
    """plugin/llmem.ts as in the repository (no wording written in), compiled."""
    folder = tmp_path_factory.mktemp("raw-plugin")
    shutil.copy2(PLUGIN / "llmem.ts", folder / "llmem.ts")
    shutil.copy2(PLUGIN / "tsconfig.json", folder / "tsconfig.json")
    (folder / "node_modules").symlink_to(plugin_toolchain / "node_modules")
    proc = subprocess.run(
        [
            "node",
            str(plugin_toolchain / "node_modules" / "typescript" / "bin" / "tsc"),
            "-p",
            str(folder),
            "--outDir",
            str(folder / "dist"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return folder / "dist" / "llmem.js"


def _run(js: Path, plugin_dir: Path, tmp_path: Path) -> dict[str, object]:
    """The compiled plugin copied to ``plugin_dir``/llmem.js, loaded once under Node."""
    plugin_dir.mkdir(parents=True)
    shutil.copy2(js, plugin_dir / "llmem.js")
    (plugin_dir / "package.json").write_text('{"type": "module"}\n')
    probe = tmp_path / "probe.mjs"
    probe.write_text(PROBE)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    run = subprocess.run(
        ["node", str(probe), str(plugin_dir / "llmem.js"), str(scratch)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0 and run.stderr == "", run.stdout + run.stderr
    (line,) = run.stdout.strip().splitlines()
    return dict(json.loads(line))


@pytest.mark.parametrize("layout", ["repository", "package"])
def test_the_plugin_reads_tools_json_next_door(
    compiled_source: Path, tmp_path: Path, layout: str
) -> None:
    root = tmp_path / "tree"
    agents = root / ("llmem_hooks/agents" if layout == "repository" else "agents")
    agents.mkdir(parents=True)
    shutil.copy2(TOOLS_FILE, agents / "tools.json")
    plugin_dir = root / "plugin"
    out = _run(compiled_source, plugin_dir, tmp_path)
    wording = tool_wording()
    assert out["tools"] == list(wording)
    assert out["search"] == wording["memory_search"]["description"]
    assert out["query"] == wording["memory_search"]["args"]["query"]["description"]


@pytest.mark.parametrize("content", [None, "{ not json", '{"memory_search": {"method": 1}}'])
def test_without_a_good_tools_json_no_tools_and_a_log_line(
    compiled_source: Path, tmp_path: Path, content: str | None
) -> None:
    root = tmp_path / "tree"
    if content is not None:
        (root / "agents").mkdir(parents=True)
        (root / "agents" / "tools.json").write_text(content)
    out = _run(compiled_source, root / "plugin", tmp_path)
    assert out["tools"] == []
    expected = "not found" if content is None else "malformed"
    assert expected in str(out["log"]), out["log"]


TYPE_PROBE = """
import path from "node:path"
import { pathToFileURL } from "node:url"
const [pluginPath, scratch] = process.argv.slice(2)
process.env.LLMEM_HOME = path.join(scratch, "home")
const mod = await import(pathToFileURL(pluginPath).href)
const hooks = await Object.values(mod)[0](
  { directory: scratch, worktree: scratch },
  { autostart: false, recall: false, log: path.join(scratch, "plugin.log"),
    command: ["false"], context_dir: path.join(scratch, "ctx") },
)
const arg = hooks.tool?.memory_search?.args?.type
const zodValues = arg?.unwrap?.()?.options ?? arg?.options ?? null
console.log(JSON.stringify({ zod: zodValues, json: arg?.enum ?? null }))
"""


@pytest.mark.parametrize("with_zod", [True, False])
def test_the_installed_plugin_offers_the_types_as_an_enum(
    plugin_toolchain: Path,  # noqa: F811
    tmp_path: Path,
    with_zod: bool,
) -> None:
    """Installed, ``type`` is one of the registered memory types (as the MCP server says),
    with OpenCode's zod and with plain JSON Schema alike."""
    from llmem_hooks.agents.tool_wording import type_choices

    folder = tmp_path / "installed"
    folder.mkdir()
    shutil.copy2(plugin_toolchain / "llmem.ts", folder / "llmem.ts")  # the installed form
    shutil.copy2(PLUGIN / "tsconfig.json", folder / "tsconfig.json")
    (folder / "node_modules").symlink_to(plugin_toolchain / "node_modules")
    tsc = plugin_toolchain / "node_modules" / "typescript" / "bin" / "tsc"
    proc = subprocess.run(
        ["node", str(tsc), "-p", str(folder), "--outDir", str(folder / "dist")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    plugin_dir = tmp_path / "run"
    plugin_dir.mkdir()
    shutil.copy2(folder / "dist" / "llmem.js", plugin_dir / "llmem.js")
    (plugin_dir / "package.json").write_text('{"type": "module"}\n')
    if with_zod:  # @opencode-ai/plugin importable: the tool schema is zod's
        (plugin_dir / "node_modules").symlink_to(plugin_toolchain / "node_modules")
    probe = tmp_path / "probe.mjs"
    probe.write_text(TYPE_PROBE)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    run = subprocess.run(
        ["node", str(probe), str(plugin_dir / "llmem.js"), str(scratch)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0 and run.stderr == "", run.stdout + run.stderr
    out = json.loads(run.stdout.strip().splitlines()[-1])
    types = type_choices()
    assert "fact" in types and "conversation" in types
    if with_zod:
        assert out["zod"] == types, out
    else:
        assert out["json"] == [*types, None], out
