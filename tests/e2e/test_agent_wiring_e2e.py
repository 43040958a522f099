"""The agents' wiring with the real agents (issue 18, item 11 and the title request).

* Copilot CLI loads the plugin from a folder with no ``llmem-hooks`` on PATH: the launcher
  (bin/llmem-hook) finds it through ``$LLMEM_HOME/entry-point``; with nothing to find,
  the first request carries one "memory is unavailable" notice instead of silence.
* The MCP server of the plugin answers through the launcher too (its tools reach the model).
* OpenCode's title request (the small model) carries no memory; the main request does.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from copilot_harness import CopilotEnv, session_context
from oc_harness import REPO, OpenCodeEnv, llmem_hooks_exe, system_texts, user_texts

PLUGIN_FILES = ("hooks.json", ".github", "bin")


def _plugin_copy(dest: Path) -> Path:
    """The plugin as `copilot plugin install` would place it: no checkout, no .venv."""
    dest.mkdir(parents=True)
    for name in PLUGIN_FILES:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, dest / name)
        else:
            shutil.copy2(src, dest / name)
    return dest


def _path_without_llmem() -> str:
    """PATH with node and git but no llmem-hooks (nor the venv's python)."""
    keep = []
    for folder in ("/usr/local/bin", "/usr/bin", "/bin"):
        if not (Path(folder) / "llmem-hooks").exists():
            keep.append(folder)
    node = shutil.which("node")
    if node and str(Path(node).parent) not in keep:
        keep.insert(0, str(Path(node).parent))
    return ":".join(keep)


@pytest.mark.copilot
def test_copilot_plugin_works_without_llmem_hooks_on_path(
    make_copilot_env: Callable[..., CopilotEnv], tmp_path: Path
) -> None:
    world = make_copilot_env()
    plugin = _plugin_copy(tmp_path / "plugin")
    world.env["PATH"] = _path_without_llmem()
    world.copilot_args = lambda: [  # type: ignore[method-assign]
        "--plugin-dir",
        str(plugin),
        "--allow-all-tools",
        "--no-auto-update",
    ]
    world.llmem("store", "the deploy target is MARKER-NOPATH-DEPLOY", "--type", "fact")
    (world.llmem_home / "entry-point").write_text(llmem_hooks_exe() + "\n")
    (world.llmem_home / "entry-point").chmod(0o600)
    world.sidecar().start()  # the default set-up (the hook would start it)
    run = world.prompt("how do we deploy?")
    assert "MARKER-NOPATH-DEPLOY" in session_context(run.first), run.first["body"]["messages"]
    tools = [t.get("function", {}).get("name", "") for t in run.first["body"].get("tools", [])]
    assert any("memory_search" in name for name in tools), tools

    # Nothing to find: one notice the model is asked to pass on, not silence.
    (world.llmem_home / "entry-point").unlink()
    run = world.prompt("how do we deploy?")
    context = session_context(run.first)
    assert "Long-term memory is unavailable" in context, run.first["body"]["messages"]
    assert "MARKER-NOPATH-DEPLOY" not in context


@pytest.mark.copilot
def test_copilot_starts_the_tool_hook_after_file_tools_only(
    make_copilot_env: Callable[..., CopilotEnv], tmp_path: Path
) -> None:
    """hooks.json's postToolUse ``matcher``: Copilot starts our launcher after a ``view``,
    never after ``bash`` (whose payload carries the command's whole output, read for
    nothing on every shell call before)."""
    world = make_copilot_env()
    plugin = _plugin_copy(tmp_path / "plugin")
    launcher = plugin / "bin" / "llmem-hook"
    launcher.rename(plugin / "bin" / "llmem-hook.real")
    log = tmp_path / "launched"
    launcher.write_text(
        f'#!/bin/sh\necho "$*" >> {log}\nexec sh "${{0%/*}}/llmem-hook.real" "$@"\n'
    )
    world.copilot_args = lambda: [  # type: ignore[method-assign]
        "--plugin-dir",
        str(plugin),
        "--allow-all-tools",
        "--no-auto-update",
    ]
    (world.repo / "notes.txt").write_text("the notes\n")
    world.prompt("USE-BASH cat notes.txt")
    bash_calls = log.read_text().splitlines()
    world.prompt('USE-TOOL view {"path": "%s"}' % (world.repo / "notes.txt"))
    view_calls = log.read_text().splitlines()[len(bash_calls) :]
    assert "copilot postToolUse" not in bash_calls, bash_calls
    assert "copilot sessionStart" in bash_calls  # the launcher did run for this session
    assert view_calls.count("copilot postToolUse") == 1, view_calls


TITLE_ASK = "Generate a title for this conversation"


@pytest.mark.opencode
def test_title_request_gets_no_memory(oc_env: OpenCodeEnv) -> None:
    oc_env.llmem("store", "MARKER-TITLE-FACT: releases are cut on Tuesdays", "--type", "fact")
    oc_env.set_plugin_settings(wait_ms=4000)  # the first request waits for the sidecar's file
    sidecar = oc_env.sidecar().start()
    try:
        sid = oc_env.run("when do we cut releases", split=False)
    finally:
        sidecar.stop()
        oc_env.set_plugin_settings(wait_ms=300)
    reqs = oc_env.fake.chat_requests(sid)
    titles = [r for r in reqs if any(TITLE_ASK in t for t in user_texts(r))]
    main = [r for r in reqs if r not in titles]
    assert titles and main, [user_texts(r) for r in reqs]
    for req in titles:
        text = "\n".join(system_texts(req) + user_texts(req))
        assert "MARKER-TITLE-FACT" not in text and "llmem" not in text.lower(), text[-2000:]
    assert any("MARKER-TITLE-FACT" in "\n".join(system_texts(r)) for r in main)
