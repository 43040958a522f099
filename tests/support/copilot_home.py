"""A COPILOT_HOME writer for tests: session folders shaped like Copilot CLI 1.0.102's.

`CopilotHome` writes ``session-state/<uuid>/`` folders the way the recorded fixtures
(``tests/fixtures/copilot/copilot-home``, written by the real CLI) look: ``workspace.yaml``
at creation, ``events.jsonl`` appended one envelope line at a time (``{type, data, id,
timestamp, parentId[, agentId]}``, compact JSON), ``checkpoints/NNN-*.md`` per compaction,
``inuse.<pid>.lock`` + ``.hold`` while a process has the session open.
`copy_fixture_home` copies the recorded tree with its lock files pointed at pids that are
known to be dead or alive.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "copilot"
FIXTURE_HOME = FIXTURES / "copilot-home"
SHARE_FIXTURE = FIXTURES / "share" / "copilot-session-5f0c2b1e-0000-4000-8000-0000000000aa.md"
REPO = "/home/dev/projects/demo-repo"
T0 = int(time.time() * 1000) - 3_600_000  # an hour ago

# The recorded sessions (see tests/fixtures/copilot/README.md).
S_RESUMED = "4f2ad85e-fa2c-402f-a6ce-9aedfb155865"  # -p run, resumed once
S_COMPACTED = "f864940f-0db0-4178-be15-4c099c6463ed"  # resumed with /compact
S_AUTO_COMPACTED = "7a070c0e-0000-4000-8000-00000000c0a1"  # synthetic: threshold compaction
S_INTERACTIVE = "a9331f84-59d2-4f62-a50f-f44088e8aaad"  # TUI, two prompts, /exit
S_SUBAGENT = "a784390a-69b6-474b-9b95-955ff5a7ca3d"  # task tool: lines with agentId
S_ERROR = "70555d4d-8fe2-45a7-8886-44a9abfccd16"  # model call failed (HTTP 400)
S_KILLED = "9d9c0bc6-2125-4430-9ebf-9601afabc040"  # SIGKILL: stale inuse.14866.lock
S_BUSY = "5e55a1de-0000-4000-8000-00000000b0a5"  # synthetic: mid-turn, inuse.4242.lock
S_LEGACY = "1e9ac701-0000-4000-8000-000000000001"  # legacy flat session-state/<id>.jsonl
SUBAGENT_ID = "10fe2082-0d53-41bd-992d-dd70aade73f7"


def iso(ms: int) -> str:
    """ISO-8601 with milliseconds and ``Z``, as the CLI writes timestamps."""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.") + (
        f"{ms % 1000:03d}Z"
    )


def iso_ms(text: str) -> int:
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    proc = subprocess.Popen(["sleep", "0"])
    proc.wait()
    return proc.pid


def relock(folder: Path, old: int, new: int) -> None:
    """Point a session's ``inuse.<old>.lock`` / ``.hold`` at another pid."""
    (folder / f"inuse.{old}.lock").unlink()
    (folder / f"inuse.{old}.hold").unlink()
    (folder / f"inuse.{new}.lock").write_text(f"{new}\n")
    (folder / f"inuse.{new}.hold").write_text("")


def copy_fixture_home(dest: Path, *, live_pid: int, dead: int) -> Path:
    """The recorded home at ``dest``, the killed session's lock naming ``dead`` and the busy
    one's naming ``live_pid`` (the recorded pids may belong to anything on this machine)."""
    shutil.copytree(FIXTURE_HOME, dest)
    relock(dest / "session-state" / S_KILLED, 14866, dead)
    relock(dest / "session-state" / S_BUSY, 4242, live_pid)
    return dest


def snapshot(root: Path) -> dict[str, tuple[int, int, int]]:
    """Every path below ``root`` with (mtime ns, size, mode): what 'read-only' compares."""
    out: dict[str, tuple[int, int, int]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [".", *dirnames, *filenames]:
            p = Path(dirpath) / name
            st = os.lstat(p)
            out[str(p.relative_to(root))] = (st.st_mtime_ns, st.st_size, st.st_mode)
    return out


class Session:
    """One session folder; each method appends the lines the CLI writes for that step."""

    def __init__(self, home: CopilotHome, sid: str, cwd: str, name: str) -> None:
        self.home = home
        self.id = sid
        self.cwd = cwd
        self.name = name
        self.folder = home.sessions / sid
        self.events = self.folder / "events.jsonl"
        self.parent: str | None = None
        self.checkpoints = 0
        self._calls = 0

    # -- raw writing -------------------------------------------------------------------------
    def raw(self, data: str | bytes) -> None:
        with open(self.events, "ab") as fh:
            fh.write(data.encode() if isinstance(data, str) else data)

    def line(
        self, typ: str, data: dict[str, Any] | None = None, *, agent_id: str | None = None
    ) -> dict[str, Any]:
        ms = self.home.tick()
        obj: dict[str, Any] = {
            "type": typ,
            "data": data or {},
            "id": str(uuid.uuid4()),
            "timestamp": iso(ms),
            "parentId": self.parent,
        }
        if agent_id:
            obj["agentId"] = agent_id
        self.parent = obj["id"]
        self.raw(json.dumps(obj, separators=(",", ":")) + "\n")
        return obj

    def workspace(self, **extra: Any) -> None:
        fields = {
            "id": self.id,
            "cwd": self.cwd,
            "git_root": self.cwd,
            "repository": "example-org/demo-repo",
            "host_type": "github",
            "branch": "main",
            "client_name": "github/cli",
            "name": self.name,
            "user_named": "false",
            "summary_count": self.checkpoints,
            "fork_count": 0,
            "created_at": iso(self.home.ms),
            "updated_at": iso(self.home.ms),
            **extra,
        }
        text = "".join(f"{k}: {v}\n" for k, v in fields.items())
        (self.folder / "workspace.yaml").write_text(text)

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self, cwd: str | None = None) -> dict[str, Any]:
        context = {"cwd": cwd or self.cwd, "gitRoot": cwd or self.cwd, "branch": "main"}
        return self.line(
            "session.start",
            {
                "sessionId": self.id,
                "version": 1,
                "producer": "copilot-agent",
                "copilotVersion": "1.0.102",
                "startTime": iso(self.home.ms),
                "selectedModel": "gpt-4.1",
                "context": context,
                "alreadyInUse": False,
            },
        )

    def resume(self) -> dict[str, Any]:
        size = self.events.stat().st_size if self.events.exists() else 0
        return self.line(
            "session.resume",
            {
                "resumeTime": iso(self.home.ms),
                "eventCount": 1,
                "eventsFileSizeBytes": size,
                "context": {"cwd": self.cwd},
                "sessionWasActive": False,
            },
        )

    def shutdown(self, reason: str = "complete") -> dict[str, Any]:
        self.hook("sessionEnd", {"reason": reason})
        return self.line(
            "session.shutdown",
            {"shutdownType": "routine", "totalPremiumRequests": 0, "codeChanges": {}},
        )

    def lock(self, pid: int) -> None:
        (self.folder / f"inuse.{pid}.lock").write_text(f"{pid}\n")
        (self.folder / f"inuse.{pid}.hold").write_text("")

    def unlock(self, pid: int) -> None:
        (self.folder / f"inuse.{pid}.lock").unlink()
        (self.folder / f"inuse.{pid}.hold").unlink()

    # -- conversation --------------------------------------------------------------------------
    def hook(
        self, hook_type: str, inp: dict[str, Any] | None = None, agent_id: str | None = None
    ) -> None:
        hid = str(uuid.uuid4())
        payload = {"sessionId": agent_id or self.id, "cwd": self.cwd, **(inp or {})}
        self.line(
            "hook.start",
            {"hookInvocationId": hid, "hookType": hook_type, "input": payload},
            agent_id=agent_id,
        )
        self.line(
            "hook.end",
            {"hookInvocationId": hid, "hookType": hook_type, "success": True},
            agent_id=agent_id,
        )

    def user(self, text: str, agent_id: str | None = None, **extra: Any) -> str:
        mid = str(uuid.uuid4())
        self.hook("userPromptSubmitted", {"prompt": text}, agent_id)
        self.line(
            "user.message",
            {
                "content": text,
                "transformedContent": f"<current_datetime>{iso(self.home.ms)}</current_datetime>"
                f"\n\n{text}\n\n<system_reminder>\ninjected\n</system_reminder>",
                "messageId": mid,
                "delivery": "idle",
                "interactionId": str(uuid.uuid4()),
                **extra,
            },
            agent_id=agent_id,
        )
        return mid

    def turn_start(self, turn: int = 0, agent_id: str | None = None) -> None:
        self.line("assistant.turn_start", {"turnId": str(turn)}, agent_id=agent_id)

    def turn_end(self, turn: int = 0, agent_id: str | None = None) -> None:
        self.line("assistant.turn_end", {"turnId": str(turn)}, agent_id=agent_id)

    def call_id(self) -> str:
        self._calls += 1
        return f"call_{self.id[:4]}{self._calls:06d}"

    def assistant(
        self,
        content: str = "",
        tools: list[tuple[str, Any]] | None = None,
        reasoning: str | None = None,
        agent_id: str | None = None,
    ) -> tuple[str, list[str]]:
        """An assistant.message; (messageId, toolCallIds)."""
        mid = str(uuid.uuid4())
        calls = [self.call_id() for _ in tools or []]
        data: dict[str, Any] = {
            "messageId": mid,
            "model": "gpt-4.1",
            "content": content,
            "toolRequests": [
                {"toolCallId": c, "name": n, "arguments": a, "type": "function"}
                for c, (n, a) in zip(calls, tools or [], strict=True)
            ],
        }
        if reasoning is not None:
            data["reasoningText"] = reasoning
        self.line("assistant.message", data, agent_id=agent_id)
        return mid, calls

    def tool_run(
        self,
        call_id: str,
        name: str,
        args: Any,
        success: bool = True,
        output: str = "ok",
        agent_id: str | None = None,
    ) -> None:
        """tool.execution_start, the tool hooks, tool.execution_complete."""
        self.line(
            "tool.execution_start",
            {"toolCallId": call_id, "toolName": name, "arguments": args, "turnId": "0"},
            agent_id=agent_id,
        )
        self.hook("preToolUse", {"toolName": name}, agent_id)
        self.hook("postToolUse", {"toolName": name}, agent_id)
        done: dict[str, Any] = {"toolCallId": call_id, "success": success, "turnId": "0"}
        if success:
            done["result"] = {"content": output}
        else:
            done["error"] = {"message": output, "code": "failure"}
        self.line("tool.execution_complete", done, agent_id=agent_id)

    def exchange(
        self,
        prompt: str,
        reply: str,
        tool: tuple[str, Any] | None = None,
        tool_ok: bool = True,
    ) -> None:
        """One prompt: an optional tool turn, the reply turn, the agentStop hook."""
        self.user(prompt)
        self.line("system.message", {"role": "system", "content": "<redacted: 23408 chars>"})
        turn = 0
        if tool is not None:
            self.turn_start(turn)
            _, calls = self.assistant("", [tool])
            self.tool_run(calls[0], tool[0], tool[1], success=tool_ok)
            self.turn_end(turn)
            turn += 1
        self.turn_start(turn)
        self.line("session.usage_record", {"usage": {"model": "gpt-4.1", "inputTokens": 1200}})
        self.assistant(reply)
        self.turn_end(turn)
        self.hook("agentStop", {"stopReason": "end_turn"})

    def subagent(self, agent_id: str, prompt: str, reply: str) -> None:
        """A ``task`` tool call whose sub-agent writes into this file (lines with agentId)."""
        self.turn_start(0)
        _, calls = self.assistant("", [("task", {"description": "Explore repo", "prompt": prompt})])
        call = calls[0]
        self.line("tool.execution_start", {"toolCallId": call, "toolName": "task", "turnId": "0"})
        self.line(
            "subagent.started", {"toolCallId": call, "agentName": "explore"}, agent_id=agent_id
        )
        self.user(prompt, agent_id=agent_id)
        self.turn_start(0, agent_id)
        self.assistant(reply, agent_id=agent_id)
        self.turn_end(0, agent_id)
        self.hook("agentStop", {"stopReason": "end_turn"}, agent_id)
        self.line(
            "subagent.completed", {"toolCallId": call, "agentName": "explore"}, agent_id=agent_id
        )
        done = {"toolCallId": call, "success": True, "result": {"content": reply}}
        self.line("tool.execution_complete", done)
        self.turn_end(0)

    def compaction(self, summary: str, *, in_event: bool = True, success: bool = True) -> Path:
        """``/compact``: start, preCompact hook, model.* lines, the checkpoint file, complete.
        ``in_event=False`` leaves summaryContent out (the checkpoint file has it)."""
        attempt = str(uuid.uuid4())
        self.line("session.compaction_start", {"compactionAttemptId": attempt, "trigger": "manual"})
        self.hook("preCompact", {"trigger": "manual"})
        self.line("model.turn_started", {"kind": "turn_started", "model": "gpt-4.1"})
        self.line("model.response", {"kind": "response", "response": {"content": summary}})
        self.line("model.messages_snapshot", {"kind": "messages_snapshot", "messages": []})
        self.checkpoints += 1
        name = f"{self.checkpoints:03d}-session-{self.id[:8]}.md"
        path = self.folder / "checkpoints" / name
        path.parent.mkdir(exist_ok=True)
        path.write_text(summary + "\n")
        data: dict[str, Any] = {
            "success": success,
            "outcome": "applied" if success else "failed",
            "compactionAttemptId": attempt,
            "trigger": "manual",
            "checkpointNumber": self.checkpoints,
            "checkpointPath": str(path),
        }
        if in_event:
            data["summaryContent"] = summary
        self.line("session.compaction_complete", data)
        return path


class CopilotHome:
    """A ``$COPILOT_HOME`` in a temp folder, with a clock that advances 7 ms per line."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.sessions = root / "session-state"
        self.sessions.mkdir(parents=True, exist_ok=True)
        self.ms = T0

    def tick(self, ms: int = 7) -> int:
        self.ms += ms
        return self.ms

    def session(
        self,
        sid: str | None = None,
        *,
        cwd: str = REPO,
        name: str = "Fix the login bug",
        workspace: bool = True,
        start: bool = True,
    ) -> Session:
        s = Session(self, sid or str(uuid.uuid4()), cwd, name)
        s.folder.mkdir()
        (s.folder / "checkpoints").mkdir()
        (s.folder / "checkpoints" / "index.md").write_text("# Checkpoint History\n")
        if workspace:
            s.workspace()
        if start:
            s.start()
        return s


def launcher_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """An environment for running the hook launcher (`bin/llmem-hook`) as Copilot would:
    every home under ``tmp_path`` (made 0700), no sidecar autostart, none of our or the
    agents' variables inherited, and no llmem-hooks on PATH; ``extra`` is added last."""
    home, llmem = tmp_path / "home", tmp_path / "llmem"
    for d in (home, llmem):
        d.mkdir(mode=0o700)
    (llmem / "config.yaml").write_text("copilot:\n  autostart_sidecar: false\n")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("LLMEM_", "COPILOT", "XDG_", "OPENCODE"))
    }
    env.update(
        HOME=str(home),
        LLMEM_HOME=str(llmem),
        COPILOT_HOME=str(home / ".copilot"),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_DATA_HOME=str(home / ".local" / "share"),
        PATH="/usr/bin:/bin",
        **extra,
    )
    return env
