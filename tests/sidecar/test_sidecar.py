"""The sidecar process: one per LLMEM_HOME, clean stop on signals, logs, status."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from llmem_hooks.sidecar.lock import AlreadyRunning, running_pid, single_instance


def _env(home: Path, tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["LLMEM_HOME"] = str(home)
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg-data")  # no OpenCode store: nothing to tail
    env["COPILOT_HOME"] = str(tmp_path / "copilot")
    env.pop("OPENCODE_DB", None)
    return env


def _start(home: Path, tmp_path: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "llmem_hooks.cli", "run"],
        env=_env(home, tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(cond: object, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_single_instance_and_clean_stop(
    llmem_home: Path, tmp_path: Path, sig: signal.Signals
) -> None:
    first = _start(llmem_home, tmp_path)
    try:
        pid_file = llmem_home / "sidecar.pid"
        _wait_for(lambda: pid_file.exists() and running_pid(llmem_home) == first.pid)
        second = subprocess.run(
            [sys.executable, "-m", "llmem_hooks.cli", "run"],
            env=_env(llmem_home, tmp_path),
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert second.returncode == 1
        assert "already running" in second.stderr and str(first.pid) in second.stderr
        assert len(second.stderr.strip().splitlines()) == 1
        first.send_signal(sig)
        first.wait(timeout=10)
        assert first.returncode == 0
        assert not pid_file.exists()
        assert running_pid(llmem_home) is None
        log = (llmem_home / "logs" / "sidecar.log").read_text()
        assert "sidecar started" in log and "sidecar stopped" in log
        assert (llmem_home / "logs" / "sidecar.log").stat().st_mode & 0o777 == 0o600
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()


def test_lock_in_process(llmem_home: Path) -> None:
    with single_instance(llmem_home):
        assert running_pid(llmem_home) == os.getpid()
        with pytest.raises(AlreadyRunning), single_instance(llmem_home):
            pass
    assert running_pid(llmem_home) is None
    with single_instance(llmem_home):  # the lock is free again
        pass


def test_stale_pid_file_does_not_count(llmem_home: Path) -> None:
    llmem_home.mkdir(parents=True, exist_ok=True)
    (llmem_home / "sidecar.pid").write_text(f"{os.getpid()}\n")  # alive, but holds no lock
    assert running_pid(llmem_home) is None


def test_status_json(llmem_home: Path, tmp_path: Path) -> None:
    from llmem_hooks.store import MemoryStore

    MemoryStore(llmem_home / "memory.db").close()  # without one: exit 1 (test_cli_reads)
    proc = subprocess.run(
        [sys.executable, "-m", "llmem_hooks.cli", "status", "--json"],
        env=_env(llmem_home, tmp_path),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["sidecar"] == {"running": False, "pid": None}
    assert out["sessions"] == []


def test_a_failure_log_line_is_one_line_without_credentials(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An exception may quote user text (a SQL value, a path): the sidecar's error line is
    one line and passes redaction like everything else we write."""
    from llmem_hooks.sidecar.loop import Throttled

    secret = "ghp_" + "A1b2C3d4" * 5
    with caplog.at_level("ERROR", logger="llmem_hooks.sidecar.loop"):
        Throttled().error("k", "idle", RuntimeError(f"bad value\nPGPASSWORD={secret} here"))
    lines = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert len(lines) == 1 and "\n" not in lines[0]
    assert secret not in lines[0] and "[REDACTED]" in lines[0]


def test_a_stop_signal_right_at_start_ends_the_run_cleanly(
    llmem_home: Path, tmp_path: Path
) -> None:
    """SIGTERM as soon as the pid file names the sidecar (while it still builds its
    coordinators) stops it with exit 0, not by the signal."""
    proc = _start(llmem_home, tmp_path)
    try:
        pid_file = llmem_home / "sidecar.pid"
        _wait_for(pid_file.exists, timeout=10.0)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0, proc.stderr.read() if proc.stderr else ""
        assert not pid_file.exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
