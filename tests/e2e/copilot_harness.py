"""Helpers for driving a real GitHub Copilot CLI (npm ``@github/copilot``) offline with
llmem-hooks.

* ``ensure_copilot``: ``@github/copilot@<COPILOT_VERSION>`` in ``build/npm/`` (npm, once,
  file-locked). Its first run extracts ~235 MB; that package cache is shared by every
  test world through ``COPILOT_PKG_CACHE_HOME`` (``build/npm/copilot-cache/copilot``).
* ``CopilotEnv``: an isolated world (HOME, XDG dirs, TMPDIR, COPILOT_HOME, LLMEM_HOME under
  tmp; BYOK against the fake provider, ``COPILOT_OFFLINE=true``, no auto-update) with a git
  repo. Copilot loads this repository as a plugin (``--plugin-dir``: ``hooks.json`` via
  ``.github/plugin/plugin.json``), so the hooks run ``llmem-hooks hook copilot <event>``
  from the venv on PATH. Built on an `OpenCodeEnv` it shares that world (repo, HOME,
  LLMEM_HOME) so both agents and one sidecar work in the same repository.
* ``prompt`` runs ``copilot -p``; ``interactive`` runs the TUI under a pseudo-terminal.
  ``close()`` kills every process group it started and the sidecars.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pty
import signal
import struct
import subprocess
import termios
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI, text_of
from oc_harness import (
    BUILD_NPM,
    REPO,
    SIDECAR_CONFIG,
    LlmemCli,
    OpenCodeEnv,
    SidecarProcess,
    _own_process,
    _stop_pid,
    file_lock,
    isolated_env,
    npm_install_pinned,
    wait_until,
)

COPILOT_VERSION = "1.0.102"
COPILOT_DIR = BUILD_NPM / f"copilot-{COPILOT_VERSION}"
PKG_CACHE = BUILD_NPM / "copilot-cache" / "copilot"  # $COPILOT_PKG_CACHE_HOME (shared)
COPILOT_MODEL = "gpt-4.1"
RUN_TIMEOUT_S = 90
COPILOT_CONFIG = "copilot:\n  autostart_sidecar: false\n"  # the tests start the sidecar
SECRET_ENV = ("GITHUB_TOKEN", "GH_TOKEN", "COPILOT_GITHUB_TOKEN", "GITHUB_COPILOT_TOKEN")


# -- the binary ------------------------------------------------------------------------------
def _copilot_env(home: Path) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("COPILOT") and k not in SECRET_ENV
    }
    env.update(
        HOME=str(home),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_STATE_HOME=str(home / ".local" / "state"),
        XDG_DATA_HOME=str(home / ".local" / "share"),
        COPILOT_HOME=str(home / ".copilot"),
        COPILOT_PKG_CACHE_HOME=str(PKG_CACHE),
        COPILOT_AUTO_UPDATE="false",
        COPILOT_OFFLINE="true",
    )
    return env


def _copilot_version(exe: Path, scratch: Path) -> str | None:
    if not exe.exists():
        return None
    try:
        out = subprocess.run(
            [str(exe), "--version"],
            env=_copilot_env(scratch),
            capture_output=True,
            text=True,
            timeout=300,  # the first run extracts the package
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def ensure_copilot(scratch: Path) -> Path:
    """``build/npm/copilot-<v>/node_modules/.bin/copilot``, installed with npm on first use
    and run once so its package is extracted into the shared cache (file-locked; an npm
    failure fails the test with npm's output)."""
    exe = COPILOT_DIR / "node_modules" / ".bin" / "copilot"
    with file_lock(BUILD_NPM / f"copilot-{COPILOT_VERSION}.lock"):
        if COPILOT_VERSION not in (_copilot_version(exe, scratch) or ""):
            npm_install_pinned(COPILOT_DIR, "llmem-e2e-copilot", "@github/copilot", COPILOT_VERSION)
            got = _copilot_version(exe, scratch)
            if COPILOT_VERSION not in (got or ""):
                pytest.fail(f"npm installed @github/copilot but {exe} --version says {got!r}")
    return exe


# -- requests --------------------------------------------------------------------------------
def messages(request: dict[str, Any]) -> list[tuple[str, str]]:
    """``(role, text)`` of a logged chat-completions request."""
    return [(m.get("role", ""), text_of(m.get("content"))) for m in request["body"]["messages"]]


def session_context(request: dict[str, Any]) -> str:
    """The sessionStart additionalContext: Copilot sends it as the first user message,
    before the prompt (which starts with ``<current_datetime>``); '' if there is none."""
    users = [text for role, text in messages(request) if role == "user"]
    if len(users) >= 2 and not users[0].startswith("<current_datetime>"):
        return users[0]
    return ""


def last_user_text(request: dict[str, Any]) -> str:
    users = [text for role, text in messages(request) if role == "user"]
    return users[-1] if users else ""


# -- a Copilot run ---------------------------------------------------------------------------
class CopilotRun:
    """One finished ``copilot -p`` process and the model requests it made."""

    def __init__(
        self, session_id: str, proc: subprocess.CompletedProcess[str], requests: list[Any]
    ) -> None:
        self.session_id = session_id
        self.proc = proc
        self.requests = requests

    @property
    def first(self) -> dict[str, Any]:
        assert self.requests, f"no model request:\n{self.proc.stdout}\n{self.proc.stderr}"
        return self.requests[0]


class InteractiveCopilot:
    """The Copilot TUI under a pseudo-terminal (own session: killed as a group). The
    terminal output is drained by a thread so the TUI never blocks on a full pty."""

    def __init__(self, world: CopilotEnv, args: list[str]) -> None:
        self.world = world
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        env = {**world.env, "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40"}
        env["COPILOT_ALLOW_ALL"] = "true"  # trusts the folder: no trust dialog
        self.proc = subprocess.Popen(
            [str(world.copilot_bin), *args],
            cwd=world.repo,
            env=env,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
        )
        os.close(slave)
        self.master = master
        self.output = bytearray()
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:
                return
            if not data:
                return
            self.output += data

    def alive(self) -> bool:
        return self.proc.poll() is None

    def type(self, text: str) -> None:
        os.write(self.master, text.encode())
        time.sleep(0.5)
        os.write(self.master, b"\r")

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Signal the whole process group (npm loader and native CLI)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)

    def close(self) -> None:
        if self.alive():
            self.kill(signal.SIGTERM)
        with contextlib.suppress(ProcessLookupError):  # anything it left behind
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)
        with contextlib.suppress(OSError):
            os.close(self.master)

    def screen(self) -> str:
        return self.output[-3000:].decode(errors="replace")


# -- the world -------------------------------------------------------------------------------
class CopilotEnv(LlmemCli):
    """One isolated world for Copilot CLI (see the module docstring)."""

    def __init__(
        self,
        root: Path,
        copilot_bin: Path,
        fake: FakeOpenAI,
        base: OpenCodeEnv | None = None,
    ) -> None:
        self.root = root
        self.copilot_bin = copilot_bin
        self.fake = fake
        self.base = base
        if base is not None:
            self.repo, self.llmem_home, env = base.repo, base.llmem_home, dict(base.env)
        else:
            self.llmem_home = root / "llmem"
            self.repo = root / "repo"
            env = isolated_env(root, self.llmem_home)
        self.copilot_home = root / "copilot-home"
        self.copilot_home.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in env.items() if not k.startswith("COPILOT") and k not in SECRET_ENV}
        env.update(
            PWD=str(self.repo),
            COPILOT_HOME=str(self.copilot_home),
            COPILOT_PKG_CACHE_HOME=str(PKG_CACHE),
            COPILOT_OFFLINE="true",
            COPILOT_PROVIDER_BASE_URL=fake.base_url,
            COPILOT_MODEL=COPILOT_MODEL,
            COPILOT_AUTO_UPDATE="false",
        )
        self.env = env
        self.context_dir = self.llmem_home / "context"
        self._sidecars: list[SidecarProcess] = []
        self._interactive: list[InteractiveCopilot] = []
        self._running: list[subprocess.Popen[str]] = []
        if base is None:
            self._make_repo()
            self.llmem_home.mkdir(mode=0o700, parents=True)
            (self.llmem_home / "config.yaml").write_text(SIDECAR_CONFIG + COPILOT_CONFIG)
        else:
            with (self.llmem_home / "config.yaml").open("a") as fh:
                fh.write(COPILOT_CONFIG)

    def _make_repo(self) -> None:
        self.repo.mkdir()
        (self.repo / "README.md").write_text("# demo repo for llmem-hooks Copilot e2e tests\n")
        git = ["git", "-c", "user.email=dev@example.com", "-c", "user.name=dev"]
        for args in (["init", "-q"], ["add", "README.md"], ["commit", "-q", "-m", "init"]):
            subprocess.run([*git, *args], cwd=self.repo, env=self.env, check=True, timeout=30)

    def set_autostart(self, on: bool) -> None:
        path = self.llmem_home / "config.yaml"
        text = path.read_text().replace(COPILOT_CONFIG, "")
        path.write_text(text + ("" if on else COPILOT_CONFIG))

    # -- llmem-hooks ----------------------------------------------------------------------------
    def sessions(self) -> dict[str, dict[str, Any]]:
        """``llmem-hooks status --json`` sessions by id."""
        out = json.loads(self.llmem("status", "--json").stdout)
        return {s["session_id"]: s for s in out["sessions"]}

    def sidecar(self) -> SidecarProcess:
        """A sidecar helper (not started); stopped at teardown."""
        sc = SidecarProcess(self.env, self.root / "sidecar.log")
        self._sidecars.append(sc)
        return sc

    def sidecar_log(self) -> str:
        try:
            return (self.llmem_home / "logs" / "sidecar.log").read_text(errors="replace")
        except OSError:
            return ""

    def hook_log(self) -> str:
        try:
            return (self.llmem_home / "logs" / "copilot-hook.log").read_text(errors="replace")
        except OSError:
            return ""

    def wait_for_hook(self, session_id: str, event: str, timeout: float = 15) -> str:
        """Wait for a sidecar log line ``session=<id> event=<event>``; returns it."""

        def found() -> str | None:
            for line in self.sidecar_log().splitlines():
                if f"session={session_id} event={event} " in line:
                    return line
            return None

        return wait_until(found, timeout, 0.1, f"the sidecar's {event} hook for {session_id}")

    # -- copilot --------------------------------------------------------------------------------
    def copilot_args(self) -> list[str]:
        return ["--plugin-dir", str(REPO), "--allow-all-tools", "--no-auto-update"]

    def prompt(
        self, text: str, session_id: str | None = None, resume: str | None = None
    ) -> CopilotRun:
        """``copilot -p <text>`` in the repo: a new session (``--session-id``) or
        ``--resume``; fails the test on a non-zero exit or a timeout."""
        sid = resume or session_id or str(uuid.uuid4())
        which = f"--resume={sid}" if resume else f"--session-id={sid}"
        before = len(self.fake.chat_requests())
        cmd = [str(self.copilot_bin), "-p", text, which, *self.copilot_args()]
        proc = subprocess.Popen(
            cmd,
            cwd=self.repo,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self._running.append(proc)
        try:
            out, err = proc.communicate(timeout=RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self._kill_group(proc)
            out, err = proc.communicate()
            pytest.fail(f"copilot -p {text!r} timed out after {RUN_TIMEOUT_S} s:\n{out}\n{err}")
        finally:
            self._kill_group(proc)  # nothing may outlive the run
        done = subprocess.CompletedProcess(cmd, proc.returncode, out, err)
        if proc.returncode != 0:
            pytest.fail(f"copilot -p {text!r} failed ({proc.returncode}):\n{out}\n{err}")
        return CopilotRun(sid, done, self.fake.chat_requests()[before:])

    def interactive(self, text: str, session_id: str) -> InteractiveCopilot:
        """The TUI with a first prompt (``-i``) in a new session ``session_id``."""
        tui = InteractiveCopilot(
            self, ["-i", text, f"--session-id={session_id}", *self.copilot_args()]
        )
        self._interactive.append(tui)
        return tui

    @staticmethod
    def _kill_group(proc: subprocess.Popen[str]) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)

    # -- Copilot's session store (read-only) ----------------------------------------------------
    def session_dir(self, session_id: str) -> Path:
        return self.copilot_home / "session-state" / session_id

    def events(self, session_id: str) -> list[dict[str, Any]]:
        path = self.session_dir(session_id) / "events.jsonl"
        out = []
        with contextlib.suppress(OSError):
            for line in path.read_text().splitlines():
                with contextlib.suppress(ValueError):
                    out.append(json.loads(line))
        return out

    def turn_done(self, session_id: str) -> bool:
        """A root ``assistant.turn_end`` after the last root ``user.message``."""
        root = [e["type"] for e in self.events(session_id) if not e.get("agentId")]
        if "user.message" not in root:
            return False
        last_user = len(root) - 1 - root[::-1].index("user.message")
        return "assistant.turn_end" in root[last_user:]

    def lock_pids(self, session_id: str) -> list[int]:
        return [
            int(p.name.split(".")[1])
            for p in self.session_dir(session_id).glob("inuse.*.lock")
            if p.name.split(".")[1].isdigit()
        ]

    # -- teardown -------------------------------------------------------------------------------
    def close(self) -> None:
        for tui in self._interactive:
            tui.close()
        for proc in self._running:
            self._kill_group(proc)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)
        for sc in self._sidecars:
            sc.stop()
        # A sidecar the hook started on its own (autostart): ours if it has our LLMEM_HOME.
        with contextlib.suppress(OSError, ValueError):
            pid = int((self.llmem_home / "sidecar.pid").read_text().strip())
            if _own_process(pid, self.llmem_home):
                _stop_pid(pid)
