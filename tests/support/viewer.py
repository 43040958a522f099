"""A seeded LLMEM_HOME and a real `llmem-hooks ui` subprocess, for the viewer tests and
the browser test: memories in two projects, a session with an episode and a memory
learned from it, a memory whose content is an XSS attempt, a forgotten memory, an
inbox note, model usage and a dream report."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from llmem_hooks.store import MemoryStore
from llmem_hooks.store import sessions as session_state
from support.cli import run_cli

XSS = (
    '<img src=x onerror="document.title=\'pwned\'"></script><script>document.title="pwned"</script>'
)
DREAM_HTML = (
    "<!DOCTYPE html><html><head><style>h1{color:#333}</style></head>"
    "<body><h1>Dream run 7</h1><p>merged 2 memories</p></body></html>"
)


def seed(home: Path) -> dict[str, str]:
    """Fill ``home``/memory.db; returns the ids by role."""
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    st = MemoryStore(home / "memory.db")
    try:
        ids = {
            "deploy": st.add(
                "decision",
                "We deploy staging with make deploy-staging",
                project="acme",
                tags="deploy",
                entered_by="user",
            ),
            "xss": st.add("fact", XSS, entered_by="user"),
            "episode": st.add(
                "conversation",
                "user: how do we run the tests?\nassistant: use make test-all, it sets PYTHONPATH",
                source="episode",
                project="acme",
                session_id="ses_view1",
                source_message_ids=["msg_a", "msg_b"],
                entered_by="opencode",
            ),
            "learned": st.add(
                "procedure",
                "Run the tests with make test-all",
                source="extract",
                project="acme",
                session_id="ses_view1",
                source_message_ids=["msg_b"],
                entered_by="opencode",
            ),
            "forgotten": st.add("fact", "The old CI ran on Jenkins", project="acme"),
            "spare": st.add("preference", "Prefer ripgrep over grep for searching code"),
        }
        for n in range(3):
            ids[f"filler{n}"] = st.add("fact", f"Filler memory number {n} about sqlite pragmas")
        st.invalidate(ids["forgotten"], "we moved to GitHub Actions")
        session_state.save(
            st.db,
            session_state.SessionRecord(
                agent="opencode", session_id="ses_view1", project="acme", title="tests"
            ),
        )
        import time

        from llmem_hooks.model.budget import utc_day

        session_state.add_usage(
            st.db,
            utc_day(time.time()),
            "ses_view1",
            calls=3,
            prompt_tokens=1200,
            output_tokens=300,
            seconds=4.5,
        )
        st.add_to_inbox("Maybe pin the sqlite version", source="note", attention_score=0.7)
    finally:
        st.close()
    (home / "dream-report.html").write_text(DREAM_HTML, encoding="utf-8")
    return ids


def env_for(home: Path, user_home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LLMEM_", "XDG_"))}
    env.update(LLMEM_HOME=str(home), HOME=str(user_home), COPILOT_HOME=str(user_home / "cp"))
    return env


def write_report(env: dict[str, str], out: Path, *args: str) -> Path:
    """``out`` written by the real CLI's ``report --html`` (asserts it exited 0)."""
    run_cli(env, "report", "--html", str(out), *args)
    return out


class ViewerProcess:
    """`llmem-hooks ui` in a subprocess; `url`, `port`, `token` once it printed its URL."""

    def __init__(self, env: dict[str, str], *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "llmem_hooks.cli", "ui", *args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(self.proc.stdout.readline()))  # type: ignore[union-attr]
        reader.start()
        reader.join(30)
        if not line or "http://" not in line[0]:
            self.close()
            raise RuntimeError(f"viewer did not start: {line!r} {self.proc.stderr.read()!r}")  # type: ignore[union-attr]
        self.url = line[0].split(": ", 1)[1].strip()
        self.token = self.url.split("token=", 1)[1]
        self.port = int(self.url.split(":")[2].split("/")[0])
        self.base = f"http://127.0.0.1:{self.port}"

    def close(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            code = self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait(5)
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()
        return code


def api(viewer: ViewerProcess, path: str, body: Any = None, **headers: str) -> tuple[int, Any]:
    """One request with the token header (unless given otherwise); (status, JSON)."""
    import httpx

    hdrs = {"X-LLMem-Token": viewer.token, **headers}
    with httpx.Client(base_url=viewer.base, timeout=10) as client:
        if body is None:
            r = client.get(path, headers=hdrs)
        else:
            r = client.post(path, json=body, headers=hdrs)
    try:
        return r.status_code, r.json()
    except ValueError:
        return r.status_code, r.text
