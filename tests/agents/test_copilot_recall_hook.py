"""Per-prompt recall in the Copilot CLI hook (`llmem-hooks hook copilot`): the block for
``userPromptSubmitted``, the ``initialPrompt`` recall of ``sessionStart``, the lock that
keeps the two concurrent hooks from repeating a memory, the resume pack next to it, and
the sidecar's socket (a real ``llmem-hooks run``) versus the in-process fallback."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from support.waiting import sidecar_process

from llmem_hooks import paths
from llmem_hooks.agents import copilot_hook
from llmem_hooks.project import project_key
from llmem_hooks.service.client import answers
from llmem_hooks.store import MemoryStore

SID = "7e1d0c52-6a1b-4d7e-9d43-0b5d0f4f2a11"
FACT = "The staging database is called pg-orchid-7 (MARKER-OLD-FACT)"
QUESTION = "What is the staging database called?"
NO_AUTOSTART = "copilot:\n  autostart_sidecar: false\n"
EXE = Path(sys.executable).with_name("llmem-hooks")


@pytest.fixture
def world(llmem_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, repo: Path) -> Path:
    """LLMEM_HOME (autostart off) with 200 recent distractors and one old fact."""
    llmem_home.mkdir(mode=0o700, parents=True, exist_ok=True)
    (llmem_home / "config.yaml").write_text(NO_AUTOSTART)
    (tmp_path / "copilot-home" / "session-state").mkdir(parents=True)
    now = datetime.now(UTC)
    with MemoryStore(llmem_home / "memory.db") as st:
        old = (now - timedelta(days=300)).isoformat()
        st.add("fact", FACT, project=project_key(repo), created_at=old)
        for i in range(200):
            st.add(
                "decision",
                f"Decision {i}: module m{i} logs through structlog at level {i % 5}",
                project=project_key(repo),
                confidence=0.9,
                created_at=(now - timedelta(minutes=i)).isoformat(),
            )
    return llmem_home


def _payload(event: str, repo: Path, **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"sessionId": SID, "timestamp": 1795332381466, "cwd": str(repo)}
    if event == "sessionStart":
        base["source"] = "new"
    return {**base, **fields}


def hook(event: str, data: dict[str, Any]) -> str:
    """The hook in-process; '' or the additionalContext."""
    out = io.StringIO()
    raw = io.BytesIO(json.dumps(data).encode())
    assert copilot_hook.main(["copilot", event], stdin=raw, stdout=out) == 0
    text = out.getvalue()
    return json.loads(text)["additionalContext"] if text.strip() else ""


def hook_cmd(event: str, data: dict[str, Any]) -> tuple[str, float]:
    """The real command, as Copilot runs it; (additionalContext, seconds)."""
    t0 = time.monotonic()
    proc = subprocess.run(
        [str(EXE), "hook", "copilot", event],
        input=json.dumps(data).encode(),
        capture_output=True,
        timeout=30,
        check=False,
    )
    elapsed = time.monotonic() - t0
    assert proc.returncode == 0 and proc.stderr == b""
    out = proc.stdout.decode()
    return (json.loads(out)["additionalContext"] if out.strip() else ""), elapsed


def test_a_prompt_gets_its_old_fact_once(world: Path, repo: Path) -> None:
    block = hook("userPromptSubmitted", _payload("userPromptSubmitted", repo, prompt=QUESTION))
    assert block.startswith("<llmem-recall>") and "pg-orchid-7" in block
    assert "Decision" not in block
    again = hook("userPromptSubmitted", _payload("userPromptSubmitted", repo, prompt=QUESTION))
    assert again == ""  # never twice in a session
    other = _payload("userPromptSubmitted", repo, prompt=QUESTION, sessionId="another-session")
    assert "pg-orchid-7" in hook("userPromptSubmitted", other)  # another session: again


@pytest.mark.parametrize("prompt", ["continue", "thanks!", "hi", ""])
def test_small_talk_gets_nothing(world: Path, repo: Path, prompt: str) -> None:
    assert hook("userPromptSubmitted", _payload("userPromptSubmitted", repo, prompt=prompt)) == ""


def test_a_subagent_prompt_gets_nothing(world: Path, repo: Path) -> None:
    data = _payload(
        "userPromptSubmitted",
        repo,
        prompt=QUESTION,
        sessionId="agent-1",
        agentId="agent-1",
        parentAgentId=SID,
    )
    assert hook("userPromptSubmitted", data) == ""


def test_session_start_appends_the_recall_for_its_initial_prompt(world: Path, repo: Path) -> None:
    text = hook("sessionStart", _payload("sessionStart", repo, initialPrompt=QUESTION))
    context = (world / "context" / f"{SID}.md").read_text()
    assert text.startswith(context.rstrip("\n")) and "pg-orchid-7" not in context
    assert text.count("pg-orchid-7") == 1 and "<llmem-recall>" in text
    # The concurrent userPromptSubmitted hook for the same prompt then adds nothing.
    assert hook("userPromptSubmitted", _payload("x", repo, prompt=QUESTION)) == ""


def test_the_two_concurrent_hooks_never_both_inject(world: Path, repo: Path) -> None:
    """Copilot starts sessionStart and userPromptSubmitted together for the first prompt:
    real processes, started at once, several sessions: the fact is injected exactly once."""
    for n in range(3):
        sid = f"{SID[:-1]}{n}"
        outs: dict[str, str] = {}

        def run(event: str, data: dict[str, Any], outs: dict[str, str] = outs) -> None:
            outs[event] = hook_cmd(event, data)[0]

        start = _payload("sessionStart", repo, sessionId=sid, initialPrompt=QUESTION)
        prompt = _payload("userPromptSubmitted", repo, sessionId=sid, prompt=QUESTION)
        threads = [
            threading.Thread(target=run, args=("sessionStart", start)),
            threading.Thread(target=run, args=("userPromptSubmitted", prompt)),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        both = outs["sessionStart"] + outs["userPromptSubmitted"]
        assert both.count("pg-orchid-7") == 1, outs


def test_resume_pack_and_recall_share_one_output(world: Path, repo: Path, tmp_path: Path) -> None:
    session_dir = tmp_path / "copilot-home" / "session-state" / SID
    (session_dir / "checkpoints").mkdir(parents=True)
    (session_dir / "checkpoints" / "001-session.md").write_text("summary")
    (world / "context").mkdir(mode=0o700, exist_ok=True)
    (world / "context" / f"{SID}.compact.md").write_text("# Resume pack\n\n- we were here\n")
    text = hook("userPromptSubmitted", _payload("x", repo, prompt=QUESTION))
    pack, _, block = text.partition("\n\n<llmem-recall>")
    assert pack == "# Resume pack\n\n- we were here" and "pg-orchid-7" in block


def test_recall_can_be_turned_off(world: Path, repo: Path) -> None:
    (world / "config.yaml").write_text(NO_AUTOSTART + "recall:\n  enabled: false\n")
    assert hook("userPromptSubmitted", _payload("x", repo, prompt=QUESTION)) == ""


def test_a_held_lock_means_no_recall_not_a_late_hook(world: Path, repo: Path) -> None:
    import fcntl

    (world / "context").mkdir(mode=0o700, exist_ok=True)
    lock = world / "context" / f"{SID}{paths.RECALL_LOCK_SUFFIX}"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        out, elapsed = hook_cmd("userPromptSubmitted", _payload("x", repo, prompt=QUESTION))
    finally:
        os.close(fd)
    assert out == "" and elapsed < 2.0


@pytest.fixture
def sidecar(world: Path, tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A real `llmem-hooks run` whose query service answers on the socket."""
    env = {**os.environ, "LLMEM_HOME": str(world), "COPILOT_HOME": str(tmp_path / "copilot-home")}
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg-data")  # no OpenCode store
    with sidecar_process(env, lambda: answers(world) is not None) as proc:
        yield proc


def hook_probe(event: str, data: dict[str, Any]) -> dict[str, Any]:
    """The hook in a fresh interpreter: its output and which of our heavier modules it
    loaded (``loaded``: module name -> imported?)."""
    probe = (
        "import io, json, sys\n"
        "from llmem_hooks.cli import main\n"
        "sys.stdin = io.TextIOWrapper(io.BytesIO(sys.argv[1].encode()))\n"
        "out = io.StringIO(); sys.stdout, real = out, sys.stdout\n"
        "main(['hook', 'copilot', sys.argv[2]])\n"
        "sys.stdout = real\n"
        "heavy = ('llmem_hooks.search.retriever', 'llmem_hooks.store',\n"
        "         'llmem_hooks.session.hooks', 'llmem_hooks.agents.copilot_hook')\n"
        "loaded = {m: m in sys.modules for m in heavy}\n"
        "print(json.dumps({'out': out.getvalue(), 'loaded': loaded}))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe, json.dumps(data), event],
        capture_output=True,
        text=True,
        timeout=30,
    )
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def test_with_a_sidecar_the_hook_asks_its_socket(
    world: Path, repo: Path, sidecar: subprocess.Popen[bytes]
) -> None:
    """The same answer, through the socket: the hook process loads neither the retriever
    nor the hook module (its front relays the payload, agents/hook_front.py)."""
    result = hook_probe("userPromptSubmitted", _payload("x", repo, prompt=QUESTION))
    assert "pg-orchid-7" in result["out"]
    assert not any(result["loaded"].values()), result["loaded"]


def test_with_a_sidecar_session_start_is_one_round_trip(
    world: Path, repo: Path, sidecar: subprocess.Popen[bytes]
) -> None:
    """A new session's context and its first prompt's recall come from the socket's
    ``start`` at once: the hook neither waits for the sidecar to notice the session and
    write its context file (there is no Copilot session folder here: it never would) nor
    builds the context itself. The text is what the in-process path gives."""
    result = hook_probe("sessionStart", _payload("sessionStart", repo, initialPrompt=QUESTION))
    text = json.loads(result["out"])["additionalContext"]
    assert not any(result["loaded"].values()), result["loaded"]
    assert not (world / "context" / f"{SID}.md").exists()
    context, _, block = text.partition("\n\n<llmem-recall>")
    assert context.startswith("# Memory from earlier sessions") and "Decision" in context
    assert "pg-orchid-7" in block and "pg-orchid-7" not in context
    # The first prompt's own hook (stamped by sessionStart) adds nothing.
    assert hook("userPromptSubmitted", _payload("x", repo, prompt=QUESTION)) == ""
    # Built here (no sidecar's answer used) for another session: the same context.
    other = "0e1d0c52-6a1b-4d7e-9d43-0b5d0f4f2a11"
    sidecar.send_signal(signal.SIGTERM)
    sidecar.wait(20)
    local = hook("sessionStart", _payload("sessionStart", repo, sessionId=other))
    assert local.rstrip("\n") == context.rstrip("\n")


def test_an_older_sidecar_without_the_relay_gets_the_hook_run_here(
    world: Path, repo: Path, tmp_path: Path
) -> None:
    """A query service that does not know ``copilot_hook`` (a sidecar started before an
    upgrade) answers ``unknown_method``: the front hands the payload it read to the full
    hook in its own process, which asks the same socket for the recall."""
    from llmem_hooks.service import protocol as proto
    from llmem_hooks.service.operations import QueryService
    from llmem_hooks.service.server import ServiceServer

    with MemoryStore(world / "memory.db") as store:
        service = QueryService(store, {"ollama": {"enabled": False}})
        with ServiceServer(service, proto.socket_path(world)):
            result = hook_probe("userPromptSubmitted", _payload("x", repo, prompt=QUESTION))
        service.close()
    assert "pg-orchid-7" in result["out"]
    assert result["loaded"]["llmem_hooks.agents.copilot_hook"]
    assert not result["loaded"]["llmem_hooks.search.retriever"]  # the socket answered


def test_relayed_and_local_hooks_agree_on_every_event(
    world: Path, repo: Path, tmp_path: Path, sidecar: subprocess.Popen[bytes]
) -> None:
    """The relay runs the same `handle`: for each event, a fresh session through the
    sidecar prints what the hook run in this process prints for another fresh session
    (the session id aside); bad payloads print nothing either way."""
    cases: list[tuple[str, dict[str, Any] | str]] = [
        ("userPromptSubmitted", {"prompt": QUESTION}),
        ("UserPromptSubmit", {"prompt": QUESTION}),
        ("sessionStart", {"source": "new", "initialPrompt": QUESTION}),
        ("agentStop", {"stopReason": "end_turn"}),
        ("postToolUse", {"toolName": "bash", "toolArgs": {"command": "ls"}}),
        ("userPromptSubmitted", "{not json"),
        ("userPromptSubmitted", ""),
        ("noSuchEvent", {"prompt": QUESTION}),
    ]
    for i, (event, fields) in enumerate(cases):
        outs = []
        for side in ("relayed", "local"):
            sid = f"agree-{i}-{side}"
            if isinstance(fields, str):
                data: Any = fields
            else:
                data = {**_payload("x", repo, sessionId=sid), **fields}
            raw = data if isinstance(data, str) else json.dumps(data)
            if side == "relayed":
                proc = subprocess.run(
                    [str(EXE), "hook", "copilot", event],
                    input=raw.encode(),
                    capture_output=True,
                    timeout=30,
                    check=False,
                )
                assert proc.returncode == 0 and proc.stderr == b""
                text = proc.stdout.decode()
            else:
                out = io.StringIO()
                copilot_hook.main(["copilot", event], stdin=io.BytesIO(raw.encode()), stdout=out)
                text = out.getvalue()
            outs.append(text.replace(sid, "SID"))
        assert outs[0] == outs[1], (event, fields)
