"""The plugin inside a real OpenCode (no sidecar needed: context files are written by hand).

Proves: OpenCode loads the installed plugin; a session's context file reaches every model
request as one extra system message and a rewrite reaches the next one; a late file is
waited for; a sub-agent gets its parent's context; the resume pack lands in the
compaction prompt; autostart launches the configured command detached.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from oc_harness import (
    OpenCodeEnv,
    OpenCodeServer,
    system_texts,
    user_texts,
    wait_until,
)

pytestmark = pytest.mark.opencode


@pytest.fixture(scope="module")
def server(oc_env: OpenCodeEnv) -> Iterator[OpenCodeServer]:
    srv = oc_env.serve()
    try:
        yield srv
    finally:
        srv.stop()


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def test_opencode_lists_the_plugin(oc_env: OpenCodeEnv) -> None:
    out = oc_env.opencode("debug", "info").stdout
    plugin = Path(oc_env.env["XDG_CONFIG_HOME"]) / "opencode" / "plugin" / "llmem.ts"
    assert f"file://{plugin}" in out, out


def test_context_file_reaches_every_request(oc_env: OpenCodeEnv, server: OpenCodeServer) -> None:
    sid = server.create_session(title="hand-written context")
    ctx = "# Memory from earlier sessions\n\n## Facts\n\n- MARKER-HAND-1 builds use make\n"
    _write(oc_env.context_dir / f"{sid}.md", ctx)
    server.prompt(sid, "hello there")
    server.prompt(sid, "USE-BASH please")  # a tool loop: two more requests
    reqs = oc_env.fake.chat_requests(sid)
    assert len(reqs) >= 3
    for req in reqs:
        systems = system_texts(req)
        assert len(systems) == 2, [s[:80] for s in systems]
        assert systems[1] == ctx  # one extra system message, byte for byte

    # A rewritten file does not change the session's block (the prompt prefix stays the
    # same for prompt caching) until the session is compacted.
    rewritten = ctx.replace("MARKER-HAND-1", "MARKER-HAND-2")
    _write(oc_env.context_dir / f"{sid}.md", rewritten)
    before = len(reqs)
    server.prompt(sid, "and again")
    later = oc_env.fake.chat_requests(sid)[before:]
    assert later and all(system_texts(r)[1] == ctx for r in later)
    server.wait_idle(sid)
    assert server.summarize(sid) is True
    before = len(oc_env.fake.chat_requests(sid))
    server.prompt(sid, "after the compaction")
    after = oc_env.fake.chat_requests(sid)[before:]
    assert after and all(system_texts(r)[1] == rewritten for r in after)


def test_no_context_file_no_extra_system_message(
    oc_env: OpenCodeEnv, server: OpenCodeServer
) -> None:
    sid = server.create_session(title="no context")
    t0 = time.monotonic()
    server.prompt(sid, "hello")
    took = time.monotonic() - t0
    reqs = oc_env.fake.chat_requests(sid)
    assert reqs and all(len(system_texts(r)) == 1 for r in reqs)
    assert took < 10
    log = (oc_env.llmem_home / "logs" / "plugin.log").read_text()
    assert f"no context file for {sid}" in log
    # no sidecar, no query service: the prompt goes without a recall block (fail open)
    assert f"recall {sid}: " in log
    assert all("<llmem-recall>" not in json.dumps(r["body"]) for r in reqs)


def test_sub_agent_gets_the_parent_context(oc_env: OpenCodeEnv, server: OpenCodeServer) -> None:
    sid = server.create_session(title="parent")
    ctx = "# Memory\n\n- MARKER-PARENT-CTX\n"
    _write(oc_env.context_dir / f"{sid}.md", ctx)
    known = set(oc_env.fake.session_ids())
    server.prompt(sid, "SUBAGENT-TASK please")
    children = [s for s in oc_env.fake.session_ids() if s not in known and s != sid]
    assert children, "no sub-agent session made a model request"
    for child in children:
        for req in oc_env.fake.chat_requests(child):
            assert system_texts(req)[-1] == ctx


def test_resume_pack_goes_into_the_compaction_prompt(
    oc_env: OpenCodeEnv, server: OpenCodeServer
) -> None:
    sid = server.create_session(title="compaction")
    server.prompt(sid, "we are migrating the build to bazel")
    server.wait_idle(sid)
    pack = "## Goal\n\nMARKER-RESUME-PACK: finish the bazel migration\n\n## Next steps\n\n- CI\n"
    _write(oc_env.context_dir / f"{sid}.compact.md", pack)
    assert server.summarize(sid) is True
    compaction = [
        r for r in oc_env.fake.chat_requests(sid) if r.get("reply", "").startswith("## Summary")
    ]
    assert len(compaction) == 1
    assert any(pack in text for text in user_texts(compaction[0]))


def test_plugin_waits_for_a_late_context_file(oc_env: OpenCodeEnv) -> None:
    """A fresh instance with wait_ms 4000: the file appears ~1 s after the prompt was sent,
    i.e. after the first model call started waiting for it."""
    oc_env.set_plugin_settings(wait_ms=4000)
    srv = oc_env.serve()
    try:
        sid = srv.create_session(title="late file")
        ctx = "# Memory\n\n- MARKER-LATE-FILE\n"
        timer = threading.Timer(1.0, _write, (oc_env.context_dir / f"{sid}.md", ctx))
        timer.start()
        try:
            srv.prompt(sid, "hello")
        finally:
            timer.cancel()
        first = oc_env.fake.chat_requests(sid)[0]
        assert system_texts(first)[-1] == ctx
    finally:
        srv.stop()
        oc_env.set_plugin_settings(wait_ms=300)


def test_autostart_launches_the_command_detached(oc_env: OpenCodeEnv, tmp_path: Path) -> None:
    """autostart + no live sidecar.pid: the plugin spawns `command` (here a stand-in that
    writes sidecar.pid and sleeps) once; it outlives OpenCode; a live pid is respected."""
    marker = tmp_path / "spawned.txt"
    script = (
        "import os, pathlib, time\n"
        f"open({str(marker)!r}, 'a').write(str(os.getpid()) + '\\n')\n"
        "home = pathlib.Path(os.environ['LLMEM_HOME'])\n"
        "(home / 'sidecar.pid').write_text(str(os.getpid()))\n"
        "time.sleep(60)\n"
    )
    pid_file = oc_env.llmem_home / "sidecar.pid"
    pid_file.unlink(missing_ok=True)
    oc_env.set_plugin_settings(autostart=True, command=[sys.executable, "-c", script])
    pid = 0
    try:
        oc_env.opencode("debug", "info")
        pid = int(wait_until(lambda: pid_file.exists() and pid_file.read_text().strip(), 15))
        os.kill(pid, 0)  # still running after opencode exited
        oc_env.opencode("debug", "info")  # a live sidecar: no second spawn
        time.sleep(0.5)
        assert marker.read_text().split() == [str(pid)]
        log = (oc_env.llmem_home / "logs" / "plugin.log").read_text()
        assert "started sidecar" in log
    finally:
        oc_env.install_plugin()  # restores the real command
        oc_env.set_plugin_settings(autostart=False)
        if pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        pid_file.unlink(missing_ok=True)
