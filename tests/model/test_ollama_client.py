"""OllamaClient against the real fake server (tests/support/fake_ollama.py) on 127.0.0.1: every
failure is one typed error, redirects are refused, URLs never show credentials."""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest

from llmem_hooks.errors import ConfigError, LLMemError
from llmem_hooks.model.ollama import (
    ModelNotFound,
    OllamaClient,
    OllamaError,
    OllamaResponseError,
    OllamaTimeout,
    OllamaUnavailable,
    is_ollama_running,
)

SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}, "n": {"type": "integer"}},
    "required": ["answer", "n"],
}


def closed_port_url() -> str:
    """A loopback URL nothing listens on (connection refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def test_errors_are_llmem_errors() -> None:
    for cls in (OllamaUnavailable, OllamaTimeout, ModelNotFound, OllamaResponseError):
        assert issubclass(cls, OllamaError) and issubclass(cls, LLMemError)


def test_version_models_and_has_model(fake_ollama: tuple[Any, str]) -> None:
    _, url = fake_ollama
    with OllamaClient(url) as client:
        assert client.version() == "0.0.0-fake"
        assert "llama3.2:latest" in client.models()
        assert client.has_model("llama3.2") and client.has_model("llama3.2:latest")
        assert not client.has_model("no-such-model")
    assert is_ollama_running(url)


def test_generate_sends_stream_false_and_the_schema(fake_ollama: tuple[Any, str]) -> None:
    srv, url = fake_ollama
    with OllamaClient(url) as client:
        result = client.generate(
            "llama3.2", "say hi", schema=SCHEMA, system="be brief", num_ctx=2048, timeout=5
        )
    (body,) = srv.control.bodies("/api/generate")
    assert body["stream"] is False and body["format"] == SCHEMA
    assert body["system"] == "be brief" and body["options"]["num_ctx"] == 2048
    assert set(json.loads(result.text)) == {"answer", "n"}
    assert result.prompt_tokens > 0 and result.output_tokens == len(result.text)
    assert result.tokens == result.prompt_tokens + result.output_tokens
    assert result.seconds >= 0


def test_unknown_model_is_model_not_found(fake_ollama: tuple[Any, str]) -> None:
    _, url = fake_ollama
    with OllamaClient(url) as client, pytest.raises(ModelNotFound, match="missing-model"):
        client.generate("missing-model", "hi")


@pytest.mark.parametrize("status", [500, 503, 400])
def test_error_status_is_a_response_error(fake_ollama: tuple[Any, str], status: int) -> None:
    srv, url = fake_ollama
    srv.control.status = status
    with OllamaClient(url) as client, pytest.raises(OllamaResponseError, match=str(status)):
        client.generate("llama3.2", "hi")


def test_slow_answer_is_a_timeout(fake_ollama: tuple[Any, str]) -> None:
    srv, url = fake_ollama
    srv.control.delay_ms = 800
    with OllamaClient(url, timeout=0.2) as client, pytest.raises(OllamaTimeout):
        client.generate("llama3.2", "hi")


def test_nothing_listening_is_unavailable() -> None:
    url = closed_port_url()
    with OllamaClient(url) as client, pytest.raises(OllamaUnavailable, match="cannot connect"):
        client.version()
    assert not is_ollama_running(url)


def test_a_redirect_is_refused_not_followed(fake_ollama: tuple[Any, str]) -> None:
    from support.fake_ollama import start_server

    srv, url = fake_ollama
    other, other_url = start_server()
    try:
        srv.control.redirect_to = f"http://user:hunter2@{other_url[7:]}/api/generate"
        with OllamaClient(url) as client, pytest.raises(OllamaResponseError) as err:
            client.generate("llama3.2", "hi")
        assert "redirect" in str(err.value) and "hunter2" not in str(err.value)
        assert other.control.requests == []  # the target never saw the transcript
    finally:
        other.shutdown()
        other.server_close()


def test_remote_urls_are_refused_unless_allowed() -> None:
    with pytest.raises(ConfigError, match="allow_remote"):
        OllamaClient("http://203.0.113.7:11434")
    OllamaClient("http://203.0.113.7:11434", allow_remote=True).close()


def test_credentials_never_appear_in_errors() -> None:
    url = closed_port_url().replace("http://", "http://alice:s3cr3t@")
    with OllamaClient(url) as client:
        assert "s3cr3t" not in client.shown_url
        with pytest.raises(OllamaUnavailable) as err:
            client.version()
    assert "s3cr3t" not in str(err.value) and "alice" not in str(err.value)
    with pytest.raises(ConfigError) as bad:
        OllamaClient("http://alice:s3cr3t@203.0.113.7:11434")
    assert "s3cr3t" not in str(bad.value)


def test_embed_returns_one_vector_per_text(fake_ollama: tuple[Any, str]) -> None:
    _, url = fake_ollama
    with OllamaClient(url) as client:
        result = client.embed("nomic-embed-text", ["alpha beta", "gamma"])
    assert len(result.vectors) == 2 and len(result.vectors[0]) == 768
