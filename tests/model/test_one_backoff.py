"""One model back-off (issue 19 §3): `llmem_hooks.model.backoff.Backoff`.

Embeddings (`EmbeddingEngine`) and extraction (`ModelCaller`) each kept their own
``_down_until``/``_down_reason`` pair; both now hold a `Backoff`. Real servers: a
closed port on 127.0.0.1 (connection refused), nothing mocked of our own code.
"""

from __future__ import annotations

import ast
import socket
from pathlib import Path

import pytest

from llmem_hooks.extraction.llm import ModelCaller
from llmem_hooks.model.backoff import Backoff
from llmem_hooks.model.embed import EmbeddingEngine
from llmem_hooks.model.ollama import OllamaClient, OllamaUnavailable

ROOT = Path(__file__).resolve().parents[2]


def _closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_backoff_counts_down_and_clears() -> None:
    clock = Clock()
    b = Backoff(60.0, clock)
    assert b.blocked() is None and b.remaining() == 0
    b.failed("cannot connect")
    assert b.blocked() == (60.0, "cannot connect")
    clock.now += 59.5
    assert b.remaining() == pytest.approx(0.5)
    clock.now += 1
    assert b.blocked() is None
    b.failed("again")
    b.succeeded()
    assert b.blocked() is None


def test_embeddings_back_off_through_the_shared_class() -> None:
    clock = Clock()
    with EmbeddingEngine(_closed_port_url(), clock=clock, backoff_seconds=30) as eng:
        assert isinstance(eng.backoff, Backoff)
        with pytest.raises(OllamaUnavailable):
            eng.embed("first")
        assert eng.backoff_remaining() == pytest.approx(30.0)
        with pytest.raises(OllamaUnavailable, match="skipped for 30 s more"):
            eng.embed("second")
        clock.now += 31
        assert eng.backoff_remaining() == 0


def test_extraction_backs_off_through_the_shared_class() -> None:
    clock = Clock()
    client = OllamaClient(_closed_port_url(), timeout=2.0)
    try:
        caller = ModelCaller(client, "m", backoff_seconds=45, monotonic=clock)
        assert isinstance(caller.backoff, Backoff)
        with pytest.raises(OllamaUnavailable):
            caller.call_json(
                key="k", system="s", prompt="p", schema={}, validate=lambda v: v, what="test"
            )
        down = caller.backing_off()
        assert down is not None and down.endswith("(retrying in 45 s)")
        clock.now += 46
        assert caller.backing_off() is None
    finally:
        client.close()


@pytest.mark.parametrize("module", ["llmem_hooks/model/embed.py", "llmem_hooks/extraction/llm.py"])
def test_no_second_back_off_state(module: str) -> None:
    """No ``_down_until``-style attribute of its own: the state lives in `Backoff`."""
    tree = ast.parse((ROOT / module).read_text(encoding="utf-8"))
    names = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    assert not {a for a in names if a.startswith("_down")}
