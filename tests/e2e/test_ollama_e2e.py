"""End-to-end with a local model: the real OpenCode and the real Copilot CLI, the sidecar,
and the fake Ollama server (tests/support/fake_ollama.py, a real HTTP server on 127.0.0.1)
configured as ``ollama.base_url``.

A turn states something the heuristics do not pick up (no "remember", no "we decided"):
only the model can turn it into a memory. The fake model answers the extraction request
with that knowledge, and the next session's first model request must carry it. The
requests the fake model saw must hold no secret typed in the same turn.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from copilot_harness import CopilotEnv, session_context
from oc_harness import OpenCodeEnv, system_texts, wait_until
from support.fake_ollama import start_server

pytestmark = [pytest.mark.e2e]

MEMORY_WAIT_S = 25
SECRET = "ghp_" + "Zq8" * 12  # a GitHub token shape; must never reach the model
TURN = (
    "The flaky date test only passes after pinning tzdata to 2024a in requirements-dev.txt. "
    f"My token is {SECRET} by the way."
)
LEARNED = "Pin tzdata to 2024a in requirements-dev.txt to fix the flaky date test (LLM-E2E)"


def _instance(schema: dict[str, Any], item: bool = False) -> Any:
    """An answer of the requested JSON schema's shape carrying LEARNED (field by name)."""
    kind = schema.get("type")
    if "enum" in schema:
        values = schema["enum"]
        return "procedure" if "procedure" in values else values[0]
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        out = {}
        for key, sub in props.items():
            if key in ("content", "text", "memory"):
                out[key] = LEARNED
            elif key == "confidence":
                out[key] = 0.9
            elif key == "scope":
                out[key] = "project"
            elif key == "tags":
                out[key] = ["tests", "tzdata"]
            else:
                out[key] = _instance(sub, item)
        return out
    if kind == "array":
        return [_instance(schema.get("items", {}), True)]
    if kind == "integer":
        return 1
    if kind == "number":
        return 0.9
    if kind == "boolean":
        return True
    return "LLM-E2E"


def _responder(body: dict[str, Any]) -> str:
    schema = body.get("format")
    prompt = str(body.get("prompt", ""))
    if isinstance(schema, dict) and "tzdata" in prompt and "memor" in json.dumps(schema):
        return json.dumps(_instance(schema))
    if isinstance(schema, dict):
        return json.dumps({})  # other calls (self-assessment...): an empty, invalid answer
    return ""


@pytest.fixture(scope="module")
def ollama() -> Iterator[Any]:
    srv, url = start_server()
    srv.control.responder = _responder
    srv.url = url
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()


def _configure(home: Any, url: str) -> None:
    with (home / "config.yaml").open("a") as fh:
        fh.write(
            f"ollama:\n  base_url: {url}\n  model: llama3.2\n  embed_model: nomic-embed-text\n"
        )


def _learned(world: Any) -> list[dict[str, Any]]:
    return [m for m in world.memories() if "LLM-E2E" in m["content"]]


def _model_saw_no_secret(ollama: Any) -> None:
    bodies = [json.dumps(b) for _, b in ollama.control.requests]
    assert any("tzdata" in b for b in bodies), "the model never saw the turn"
    assert not any(SECRET in b for b in bodies), "a secret reached the model"


@pytest.mark.opencode
def test_opencode_llm_memory_reaches_the_next_session(
    make_opencode_env: Callable[..., OpenCodeEnv], ollama: Any
) -> None:
    world = make_opencode_env()
    _configure(world.llmem_home, ollama.url)
    world.opencode("session", "list")
    sc = world.sidecar().start()
    try:
        world.run(TURN)
        hits = wait_until(
            lambda: _learned(world),
            MEMORY_WAIT_S,
            0.3,
            f"the sidecar to store the model's memory\n{sc.log()}",
        )
        assert hits[0]["type"] == "procedure" and hits[0]["project"] == world.project_key
        assert SECRET not in json.dumps(world.memories())
        _model_saw_no_secret(ollama)

        sid2 = world.run("hello again")
        systems = system_texts(world.fake.conversation_requests(sid2)[0])
        assert any("LLM-E2E" in s for s in systems), systems
    finally:
        sc.stop()


@pytest.mark.copilot
def test_copilot_llm_memory_reaches_the_next_session(
    make_copilot_env: Callable[..., CopilotEnv], ollama: Any
) -> None:
    world = make_copilot_env()
    _configure(world.llmem_home, ollama.url)
    sc = world.sidecar().start()
    try:
        world.prompt(TURN)  # -p: the session ends, and its final extraction runs
        wait_until(
            lambda: _learned(world),
            MEMORY_WAIT_S,
            0.3,
            f"the sidecar to store the model's memory\n{sc.log()}",
        )
        assert SECRET not in json.dumps(world.memories())
        _model_saw_no_secret(ollama)

        run = world.prompt("hello from a new session")
        assert "LLM-E2E" in session_context(run.first), run.first
    finally:
        sc.stop()
