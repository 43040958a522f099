"""Model tokens per idle event against session length (the fake Ollama, in-process).

A synthetic session grows by one turn (a user request, an assistant tool call with
output, an assistant answer) per idle event; after each, the coordinator extracts with
the Ollama extractor against tests/support/fake_ollama.py on 127.0.0.1. Tokens are what the
budget recorded (``model_usage``: the fake reports prompt words as ``prompt_eval_count``
and answer characters as ``eval_count``) and the chars/4 estimate of what was sent
(instructions included). The last column estimates the same request carrying
the whole transcript so far, as an extractor without a cursor would send.

Usage: .venv/bin/python bench/extraction_tokens.py [--events 20] [--every 5]
Prints a markdown table (for docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from support.fake_ollama import start_server  # noqa: E402

from llmem_hooks.config import DEFAULT_CONFIG  # noqa: E402
from llmem_hooks.events import Message, SessionInfo  # noqa: E402
from llmem_hooks.extraction.llm import build_extraction_engine, render_message  # noqa: E402
from llmem_hooks.model.budget import estimate_tokens  # noqa: E402
from llmem_hooks.session.hooks import SessionHookCoordinator  # noqa: E402
from llmem_hooks.store import MemoryStore  # noqa: E402

SID = "ses_bench"


class GrowingSession:
    """The one session the coordinator reads; a turn is appended per idle event."""

    def __init__(self) -> None:
        self.messages: list[Message] = []

    def get_session(self, session_id: str) -> SessionInfo | None:
        return SessionInfo(SID, "opencode", "/tmp/bench-repo", "benchproject", title="Bench")

    def get_messages(self, session_id: str, after_id: str | None = None) -> list[Message]:
        ids = [m.id for m in self.messages]
        if after_id in ids:
            return self.messages[ids.index(after_id) + 1 :]
        return list(self.messages)

    def turn(self, i: int) -> None:
        n = len(self.messages)
        self.messages += [
            Message(f"msg_{n:05d}", SID, "user", f"User: step {i}: make module_{i}.py pass lint"),
            Message(
                f"msg_{n + 1:05d}",
                SID,
                "assistant",
                f"Assistant: Tool: bash: ruff check module_{i}.py [error]\n"
                + f"module_{i}.py:{i}:1: E501 line too long\n" * 40,
            ),
            Message(
                f"msg_{n + 2:05d}",
                SID,
                "assistant",
                f"Assistant: Wrapped the long lines in module_{i}.py; `ruff check` passes now.",
            ),
        ]


def answer(body: dict[str, Any]) -> str:
    props = (body.get("format") or {}).get("properties", {})
    if "memories" in props:
        item = {
            "type": "procedure",
            "content": "Run ruff check on a module after editing it to catch long lines",
            "confidence": 0.8,
            "tags": ["lint"],
            "scope": "project",
            "source_message_ids": [],
        }
        return json.dumps({"memories": [item]})
    return json.dumps({})


def run(events: int, every: int) -> str:
    srv, url = start_server()
    srv.control.responder = answer
    rows = [
        "| idle event | messages in session | new messages | requests | tokens recorded "
        "| tokens sent (chars/4) | whole session re-sent (chars/4) |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            os.environ["LLMEM_HOME"] = tmp
            cfg = copy.deepcopy(DEFAULT_CONFIG)
            cfg["ollama"]["base_url"] = url
            cfg["session"]["idle_debounce_seconds"] = 0
            store = MemoryStore(Path(tmp) / "memory.db")
            session = GrowingSession()
            engine = build_extraction_engine(cfg, store)
            coord = SessionHookCoordinator(
                store, {"opencode": session}, cfg, Path(tmp) / "ctx", extractor=engine
            )
            budget = engine.extractor.caller.budget  # type: ignore[attr-defined]
            key = f"opencode:{SID}"
            for i in range(1, events + 1):
                session.turn(i)
                before = budget.session_usage(key)
                sent_before = len(srv.control.bodies("/api/generate"))
                coord.on_idle(SID, force=True)
                after = budget.session_usage(key)
                bodies = srv.control.bodies("/api/generate")[sent_before:]
                sent = sum(estimate_tokens(b["system"] + b["prompt"]) for b in bodies)
                # The same request with every message so far instead of the new ones.
                older = sum(estimate_tokens(render_message(m)) for m in session.messages[:-3])
                whole = sent + older
                if i == 1 or i % every == 0 or i == events:
                    rows.append(
                        f"| {i} | {len(session.messages)} | 3 | {after.calls - before.calls} "
                        f"| {after.tokens - before.tokens} | {sent} | {whole} |"
                    )
            store.close()
    finally:
        srv.shutdown()
        srv.server_close()
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=20, help="idle events (one turn each)")
    ap.add_argument("--every", type=int, default=5, help="print every Nth event")
    args = ap.parse_args()
    print(run(args.events, args.every))


if __name__ == "__main__":
    main()
