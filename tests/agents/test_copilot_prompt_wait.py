"""Issue 18, agent overhead: Copilot starts the ``userPromptSubmitted`` hook for a run's
first prompt while ``sessionStart`` is still recalling for that same prompt. sessionStart
marks its recall lock ``pending <time>`` meanwhile, and the plugin's launcher
(bin/llmem-hook) waits for the stamp that follows instead of starting Python for a repeat
recall; a stale or never-cleared mark only costs the wait, then the hook runs as before."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from support.copilot_home import launcher_env

from llmem_hooks.agents import copilot_hook

ROOT = Path(__file__).resolve().parents[2]
LAUNCHER = ROOT / "bin" / "llmem-hook"
EXE = Path(sys.executable).parent / "llmem-hooks"
SID = "5d0c3a1e-7b2f-4c6d-9e8f-0a1b2c3d4e5f"
PROMPT = 'how do deploys go, "make ship"? ü'


@pytest.fixture
def world(tmp_path: Path) -> dict[str, str]:
    """Every home under tmp_path, no sidecar autostart, no llmem-hooks on PATH, and an
    executable that says when it runs (the hook that must not start)."""
    ran = tmp_path / "must-not-run"
    ran.write_text("#!/bin/sh\ncat >/dev/null\necho RAN\n")
    ran.chmod(0o755)
    env = launcher_env(tmp_path, LLMEM_HOOKS_BIN=str(ran))
    (tmp_path / "llmem" / "context").mkdir(mode=0o700)
    return env


def _payload(tmp_path: Path, **extra: Any) -> bytes:
    now_ms = int(time.time() * 1000)  # Copilot's time of the call
    body = {"sessionId": SID, "cwd": str(tmp_path), "timestamp": now_ms, **extra}
    return json.dumps(body, ensure_ascii=False).encode()  # as JSON.stringify writes it


def _lock(env: dict[str, str]) -> Path:
    return Path(env["LLMEM_HOME"]) / "context" / f"{SID}.recall.lock"


def _prompt_hook(env: dict[str, str], tmp_path: Path, prompt: str) -> subprocess.Popen[bytes]:
    """The launcher's userPromptSubmitted, started (not waited for)."""
    body = tmp_path / "prompt.json"
    body.write_bytes(_payload(tmp_path, prompt=prompt))
    with body.open("rb") as stdin:
        return subprocess.Popen(
            ["sh", str(LAUNCHER), "copilot", "userPromptSubmitted"],
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )


def _stamp(prompt: str) -> str:
    return f"{int(time.time())}\n{json.dumps(prompt, ensure_ascii=False)}\n"


def test_the_launcher_waits_for_a_pending_session_start_stamp(
    world: dict[str, str], tmp_path: Path
) -> None:
    lock = _lock(world)
    lock.write_text(f"pending {int(time.time())}\n")
    proc = _prompt_hook(world, tmp_path, PROMPT)
    time.sleep(0.3)  # sessionStart still recalling; then it stamps the prompt
    lock.write_text(_stamp(PROMPT))
    out, err = proc.communicate(timeout=60)
    assert (proc.returncode, out) == (0, b""), err
    assert lock.read_text() == ""  # the stamp is used once


def test_a_pending_mark_that_ends_without_a_stamp_lets_the_hook_run(
    world: dict[str, str], tmp_path: Path
) -> None:
    lock = _lock(world)
    lock.write_text(f"pending {int(time.time())}\n")
    proc = _prompt_hook(world, tmp_path, PROMPT)
    time.sleep(0.3)
    lock.write_text("")  # sessionStart did not recall (e.g. a resume pack to give)
    out, _ = proc.communicate(timeout=60)
    assert out == b"RAN\n"


@pytest.mark.parametrize(
    "mark",
    ["pending {old}\n", "pending {now}\n", "pending x{now}\n", "pending \n", "pendingX\n"],
)
def test_stale_odd_or_stuck_marks_cost_at_most_the_wait(
    world: dict[str, str], tmp_path: Path, mark: str
) -> None:
    """A killed sessionStart leaves its mark: an old one is not waited for, a fresh one
    that never clears only for the launcher's bounded wait; odd text is ignored."""
    now = int(time.time())
    _lock(world).write_text(mark.format(old=now - 60, now=now))
    proc = _prompt_hook(world, tmp_path, PROMPT)
    out, _ = proc.communicate(timeout=60)
    assert out == b"RAN\n"


def test_recall_lock_marks_pending_and_never_leaves_the_mark(
    world: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in ("LLMEM_HOME", "HOME", "COPILOT_HOME"):
        monkeypatch.setenv(key, world[key])
    settings = copilot_hook.load_settings()
    lock = copilot_hook.RecallLock(settings, SID, time.monotonic() + 60)
    with lock as locked:
        assert locked
        lock.mark_pending()
        first = _lock(world).read_text()
        assert first.startswith("pending ") and first.split()[1].isdigit()
    assert _lock(world).read_text() == ""  # no stamp came: no stale mark left
    with lock as locked:
        lock.mark_pending()
        lock.stamp(PROMPT)
    assert _lock(world).read_text().splitlines()[1] == json.dumps(PROMPT, ensure_ascii=False)


def test_session_start_and_the_prompt_hook_at_once(
    world: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real sessionStart (in this process, a long deadline) with the launcher's
    userPromptSubmitted started as soon as the mark appears: the context and recall come
    once, from sessionStart, and the prompt hook starts no Python."""
    subprocess.run(
        [str(EXE), "store", "MARKER-WAIT-FACT deploys go through make ship", "--type", "fact"],
        cwd=tmp_path,
        env=world,
        check=True,
        capture_output=True,
        timeout=60,
    )
    for key in ("LLMEM_HOME", "HOME", "COPILOT_HOME"):
        monkeypatch.setenv(key, world[key])
    out = io.StringIO()
    stdin = io.BytesIO(_payload(tmp_path, initialPrompt=PROMPT))
    start = threading.Thread(
        target=copilot_hook.main,
        args=(["copilot", "sessionStart"], stdin, out),
        kwargs={"deadline_s": 60.0},
    )
    start.start()
    lock, until = _lock(world), time.monotonic() + 30
    while time.monotonic() < until and not (
        lock.exists() and lock.read_text().startswith(("pending", "1", "2"))
    ):
        time.sleep(0.001)
    proc = _prompt_hook(world, tmp_path, PROMPT)
    start.join(60)
    prompt_out, err = proc.communicate(timeout=60)
    assert (proc.returncode, prompt_out) == (0, b""), err
    assert "MARKER-WAIT-FACT" in json.loads(out.getvalue())["additionalContext"]


def test_the_launcher_hands_session_start_to_the_hook_itself(
    world: dict[str, str], tmp_path: Path
) -> None:
    """sessionStart is waited for: the launcher becomes the hook (exec, no process of
    its own first) with the payload untouched; the hook marks the lock itself."""
    shown = tmp_path / "show-start"
    shown.write_text('#!/bin/sh\necho "pid $$ args $*"\ncat\n')
    shown.chmod(0o755)
    env = {**world, "LLMEM_HOOKS_BIN": str(shown)}
    payload = _payload(tmp_path, initialPrompt=PROMPT)
    proc = subprocess.Popen(
        ["sh", str(LAUNCHER), "copilot", "sessionStart"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
    )
    out, _ = proc.communicate(payload, timeout=60)
    first, _, rest = out.partition(b"\n")
    assert first == f"pid {proc.pid} args hook copilot sessionStart".encode()
    assert rest == payload and not _lock(world).exists()


def test_a_launcher_mark_is_cleared_by_a_hook_that_does_not_stamp(
    world: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in ("LLMEM_HOME", "HOME", "COPILOT_HOME"):
        monkeypatch.setenv(key, world[key])
    _lock(world).write_text(f"pending {int(time.time())}\n")
    lock = copilot_hook.RecallLock(copilot_hook.load_settings(), SID, time.monotonic() + 60)
    with lock as locked:
        assert locked
    assert _lock(world).read_text() == ""


@pytest.mark.parametrize(
    "payload",
    [
        b'{\n  "sessionId": "s",\n  "prompt": "  lead and trail \\\\ \\t  "\n}\n',
        b'{"sessionId":"s","prompt":"no newline at the end"}',
        b'\n\n{"sessionId":"s","prompt":"-e -n %s \xc3\xa9\xf0\x9f\x98\x80"}\n\n',
        b'{"sessionId":"s","toolName":"view","toolArgs":{"path":"a b\\\\c"}}\r\n',
    ],
)
def test_the_launcher_reads_the_payload_with_built_ins_and_passes_it_on_exactly(
    world: dict[str, str], tmp_path: Path, payload: bytes
) -> None:
    """The launcher reads stdin with the shell's own ``read`` (no process before the hook
    for prompts and tool calls) and hands the hook the very bytes Copilot wrote."""
    kept = tmp_path / "kept"
    exe = tmp_path / "keep-stdin"
    exe.write_text(f'#!/bin/sh\ncat > "{kept}"\n')
    exe.chmod(0o755)
    env = {**world, "LLMEM_HOOKS_BIN": str(exe)}
    event = "postToolUse" if b"toolName" in payload else "userPromptSubmitted"
    proc = subprocess.run(
        ["sh", str(LAUNCHER), "copilot", event],
        input=payload,
        capture_output=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0 and kept.read_bytes() == payload
