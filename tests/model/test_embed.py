"""EmbeddingEngine against the real HTTP fake of Ollama (tests/support/fake_ollama.py).

Nothing is mocked: requests go over a socket to the fake, and what it received is read
back from ``server.control.requests``.
"""

from __future__ import annotations

import copy
import json
import socket
import threading
import time
from typing import Any

import pytest
from support.fake_ollama import embed_text, start_server

from llmem_hooks.config import DEFAULT_CONFIG
from llmem_hooks.errors import ConfigError, LLMemError, ValidationError
from llmem_hooks.model.embed import (
    MAX_EMBED_CHARS,
    BatchEmbedder,
    Embedder,
    EmbeddingDimensionError,
    EmbeddingEngine,
    EmbeddingError,
    EmbeddingInputError,
)
from llmem_hooks.model.ollama import (
    ModelNotFound,
    OllamaError,
    OllamaResponseError,
    OllamaTimeout,
    OllamaUnavailable,
)


def embed_bodies(server: Any) -> list[dict[str, Any]]:
    return server.control.bodies("/api/embed")


def sent_texts(server: Any) -> list[str]:
    return [t for body in embed_bodies(server) for t in body["input"]]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Clock:
    """A settable monotonic clock for the back-off."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def engine(fake_ollama: tuple[Any, str]) -> Any:
    _, url = fake_ollama
    with EmbeddingEngine(url) as eng:
        yield eng


# -- basics -------------------------------------------------------------------------------
def test_embed_returns_the_models_vector(fake_ollama: tuple[Any, str], engine: Any) -> None:
    server, _ = fake_ollama
    vec = engine.embed("use uv for python packaging")
    assert vec == pytest.approx(embed_text("use uv for python packaging", 768))
    assert len(vec) == 768 and all(isinstance(x, float) for x in vec)
    assert embed_bodies(server) == [
        {"model": "nomic-embed-text", "input": ["use uv for python packaging"]}
    ]


def test_secrets_and_private_spans_never_reach_the_model(
    fake_ollama: tuple[Any, str], engine: Any
) -> None:
    """The engine is the choke point: a query, a prompt or an episode handed over with a
    credential in it goes out redacted, whoever the caller."""
    server, _ = fake_ollama
    token = "ghp_" + "Zq8" * 12
    engine.embed(f"why does CI fail? my token is {token}")
    engine.embed_batch(["deploy notes <private>the vault pin is 4471</private> done"])
    sent = json.dumps(embed_bodies(server))
    assert token not in sent and "4471" not in sent
    assert "[REDACTED]" in sent and "deploy notes" in sent
    with pytest.raises(EmbeddingInputError):
        engine.embed("<private>everything here</private>")  # nothing safe left to send


def test_engine_is_a_retriever_embedder(engine: Any) -> None:
    embedder: Embedder = engine  # the Retriever's protocol: embed(text) -> Sequence[float]
    assert len(embedder.embed("hello")) == 768
    # ...and what the session hooks need (embed_batch, backoff_remaining)
    assert isinstance(engine, BatchEmbedder) and isinstance(engine, Embedder)


def test_batch_sends_one_request_per_batch_in_input_order(
    fake_ollama: tuple[Any, str], engine: Any
) -> None:
    server, _ = fake_ollama
    texts = [f"memory {i} about topic{i % 7}" for i in range(70)]
    vectors = engine.embed_batch(texts, batch_size=32)
    assert [len(b["input"]) for b in embed_bodies(server)] == [32, 32, 6]
    assert sent_texts(server) == texts
    for text, vec in zip(texts, vectors, strict=True):
        assert vec == pytest.approx(embed_text(text, 768))
    info = engine.cache_info()
    assert (info.hits, info.misses, info.currsize) == (0, 70, 70)


def test_cached_texts_are_not_sent_again(fake_ollama: tuple[Any, str], engine: Any) -> None:
    server, _ = fake_ollama
    old = [f"old memory {i}" for i in range(70)]
    engine.embed_batch(old)
    server.control.requests.clear()
    new = [f"new memory {i}" for i in range(5)]
    mixed = [*old[:40], *new, *old[40:]]
    vectors = engine.embed_batch(mixed)
    assert sent_texts(server) == new  # one request holding only the 5 new texts
    assert len(embed_bodies(server)) == 1
    assert all(v == pytest.approx(embed_text(t, 768)) for t, v in zip(mixed, vectors, strict=True))
    assert engine.stats().hits == 70


def test_duplicates_in_one_batch_are_sent_once(fake_ollama: tuple[Any, str], engine: Any) -> None:
    server, _ = fake_ollama
    vectors = engine.embed_batch(["same text", "other text", "same text"])
    assert sent_texts(server) == ["same text", "other text"]
    assert vectors[0] == vectors[2] and vectors[0] is not vectors[2]
    s = engine.stats()
    assert (s.hits, s.misses, s.requests) == (1, 2, 1)


def test_empty_batch_sends_nothing(fake_ollama: tuple[Any, str], engine: Any) -> None:
    server, _ = fake_ollama
    assert engine.embed_batch([]) == []
    assert embed_bodies(server) == []


def test_counters_hits_misses_tokens_seconds(fake_ollama: tuple[Any, str], engine: Any) -> None:
    engine.embed("one two three")
    engine.embed("one two three")
    engine.embed("four five")
    s = engine.stats()
    assert (s.hits, s.misses, s.requests, s.errors) == (1, 2, 2, 0)
    assert s.tokens == 5  # the fake counts words as prompt_eval_count
    assert s.seconds > 0
    assert s.hit_rate == pytest.approx(1 / 3)
    assert s.to_dict()["hit_rate"] == pytest.approx(1 / 3)
    assert (s.model, s.dimensions, s.cache_capacity) == ("nomic-embed-text", 768, 2048)
    engine.reset_stats()
    assert engine.stats().misses == 0 and engine.cache_info().currsize == 2


# -- the cache ----------------------------------------------------------------------------
def test_lru_evicts_the_least_recently_used(fake_ollama: tuple[Any, str]) -> None:
    server, url = fake_ollama
    with EmbeddingEngine(url, cache_size=3) as eng:
        for text in ("alpha", "beta", "gamma"):
            eng.embed(text)
        eng.embed("alpha")  # now beta is the least recently used
        eng.embed("delta")  # evicts beta
        assert eng.cache_info().currsize == 3
        server.control.requests.clear()
        eng.embed("alpha")
        eng.embed("gamma")
        eng.embed("delta")
        assert embed_bodies(server) == []  # all three still cached
        eng.embed("beta")
        assert sent_texts(server) == ["beta"]


def test_batch_larger_than_the_cache_still_answers_every_text(
    fake_ollama: tuple[Any, str],
) -> None:
    _, url = fake_ollama
    with EmbeddingEngine(url, cache_size=4) as eng:
        texts = [f"text number {i}" for i in range(10)]
        vectors = eng.embed_batch(texts, batch_size=3)
        assert all(
            v == pytest.approx(embed_text(t, 768)) for t, v in zip(texts, vectors, strict=True)
        )
        assert eng.cache_info().currsize == 4


def test_results_are_defensive_copies(engine: Any) -> None:
    first = engine.embed("copy me")
    expected = list(first)
    first[0] = 12345.0
    first.clear()
    second = engine.embed("copy me")
    assert second == expected
    second[1] = -1.0
    assert engine.embed("copy me") == expected
    assert engine.cache_info().hits == 2


def test_cache_is_keyed_by_model(fake_ollama: tuple[Any, str]) -> None:
    server, url = fake_ollama
    with (
        EmbeddingEngine(url, model="nomic-embed-text") as a,
        EmbeddingEngine(url, model="all-minilm", dimensions=384) as b,
    ):
        assert len(a.embed("shared text")) == 768
        assert len(b.embed("shared text")) == 384
    assert [body["model"] for body in embed_bodies(server)] == ["nomic-embed-text", "all-minilm"]


def test_thread_safety(fake_ollama: tuple[Any, str]) -> None:
    server, url = fake_ollama
    texts = [f"concurrent memory {i}" for i in range(40)]
    expected = {t: embed_text(t, 768) for t in texts}
    errors: list[BaseException] = []
    with EmbeddingEngine(url, cache_size=16) as eng:

        def worker(seed: int) -> None:
            try:
                for round_ in range(5):
                    order = texts[seed:] + texts[:seed]
                    if round_ % 2:
                        vectors = eng.embed_batch(order, batch_size=7)
                    else:
                        vectors = [eng.embed(t) for t in order[:10]]
                    for t, v in zip(order, vectors, strict=False):
                        assert v == pytest.approx(expected[t])
                        v[0] = 99.0  # scribbling on a result must not reach the cache
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(i * 5,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not errors, errors[0]
        info = eng.cache_info()
        per_thread = 3 * 10 + 2 * 40
        assert info.hits + info.misses == 8 * per_thread
        assert info.currsize <= 16
        assert eng.stats().misses == len(sent_texts(server))
        assert eng.embed(texts[0]) == pytest.approx(expected[texts[0]])


# -- input ----------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", ["", "   \n\t", None, 42, b"bytes"])
def test_bad_text_is_rejected_before_any_request(
    fake_ollama: tuple[Any, str], engine: Any, bad: Any
) -> None:
    server, _ = fake_ollama
    with pytest.raises(EmbeddingInputError):
        engine.embed(bad)
    with pytest.raises(EmbeddingInputError):
        engine.embed_batch(["fine text", bad])
    assert embed_bodies(server) == []


def test_input_error_is_both_an_embedding_and_a_validation_error() -> None:
    assert issubclass(EmbeddingInputError, EmbeddingError)
    assert issubclass(EmbeddingInputError, ValidationError)
    assert issubclass(EmbeddingError, LLMemError)
    assert issubclass(EmbeddingDimensionError, EmbeddingError)


def test_a_string_is_not_a_batch(engine: Any) -> None:
    with pytest.raises(EmbeddingInputError, match="list of texts"):
        engine.embed_batch("not a list")


def test_oversized_text_is_cut_to_max_chars(fake_ollama: tuple[Any, str], engine: Any) -> None:
    server, _ = fake_ollama
    long = "word " * 5000  # 25,000 characters
    engine.embed(long)
    (sent,) = sent_texts(server)
    assert sent == long[:MAX_EMBED_CHARS] and len(sent) == 8000
    engine.embed(long[:MAX_EMBED_CHARS] + "different tail")  # same first 8,000 chars
    assert len(sent_texts(server)) == 1


@pytest.mark.parametrize("size", [0, -1, True, 1.5])
def test_bad_batch_size(engine: Any, size: Any) -> None:
    with pytest.raises(ValidationError):
        engine.embed_batch(["x"], batch_size=size)


def test_bad_constructor_arguments(fake_ollama: tuple[Any, str]) -> None:
    _, url = fake_ollama
    with pytest.raises(ValidationError):
        EmbeddingEngine(url, cache_size=0)
    with pytest.raises(ValidationError):
        EmbeddingEngine(url, dimensions=-3)
    with pytest.raises(ValidationError):
        EmbeddingEngine(url, model="")


# -- server answers -------------------------------------------------------------------------
def test_dimension_mismatch_names_both_sizes_and_the_key(
    fake_ollama: tuple[Any, str],
) -> None:
    _, url = fake_ollama
    with EmbeddingEngine(url, model="all-minilm") as eng:  # 384 dims, config says 768
        with pytest.raises(EmbeddingDimensionError) as err:
            eng.embed("some memory")
        message = str(err.value)
        assert "384" in message and "768" in message and "memory.vec_dimensions" in message
        assert eng.cache_info().currsize == 0  # nothing wrong was cached
        assert eng.stats().errors == 1
        ok, why = eng.check_available()
        assert not ok and "384" in why and "768" in why


def test_dimension_from_config_matches_another_model(fake_ollama: tuple[Any, str]) -> None:
    _, url = fake_ollama
    config = copy.deepcopy(DEFAULT_CONFIG)
    config["ollama"].update(base_url=url, embed_model="mxbai-embed-large")
    config["memory"]["vec_dimensions"] = 1024
    with EmbeddingEngine.from_config(config) as eng:
        assert (eng.model, eng.dimensions) == ("mxbai-embed-large", 1024)
        assert len(eng.embed("a memory")) == 1024
        assert eng.check_available() == (
            True,
            f"mxbai-embed-large at {url}: 1024-dimensional vectors",
        )


def test_from_config_defaults_and_remote_url() -> None:
    config = copy.deepcopy(DEFAULT_CONFIG)
    with EmbeddingEngine.from_config(config) as eng:
        assert (eng.model, eng.dimensions, eng.cache_size) == ("nomic-embed-text", 768, 2048)
        assert eng.client.base_url.startswith("http://localhost:11434")
    config["ollama"]["base_url"] = "http://203.0.113.7:11434"
    with pytest.raises(ConfigError):
        EmbeddingEngine.from_config(config)
    config["ollama"]["allow_remote"] = True
    with EmbeddingEngine.from_config(config) as eng:
        assert "203.0.113.7" in eng.client.base_url
    with pytest.raises(ConfigError):
        EmbeddingEngine("http://203.0.113.7:11434")


def test_unknown_model_is_model_not_found(fake_ollama: tuple[Any, str]) -> None:
    _, url = fake_ollama
    with EmbeddingEngine(url, model="no-such-embedder") as eng:
        with pytest.raises(ModelNotFound, match="no-such-embedder"):
            eng.embed("text")
        assert eng.backoff_remaining() == 0  # a fast 404 is not a reason to pause
        ok, why = eng.check_available()
        assert not ok and "not installed" in why and "ollama pull no-such-embedder" in why


def test_error_status_is_a_response_error(fake_ollama: tuple[Any, str], engine: Any) -> None:
    server, _ = fake_ollama
    server.control.status = 500
    with pytest.raises(OllamaResponseError, match="500"):
        engine.embed("text")
    server.control.status = None
    assert len(engine.embed("text")) == 768  # no back-off after an error answer


def test_redirect_is_refused(fake_ollama: tuple[Any, str], engine: Any) -> None:
    server, _ = fake_ollama
    target = start_server()
    try:
        server.control.redirect_to = target[1] + "/api/embed"
        with pytest.raises(OllamaResponseError, match="redirect"):
            engine.embed("secret-free text")
        assert target[0].control.requests == []  # never followed
    finally:
        target[0].shutdown()
        target[0].server_close()


def test_timeout_raises_and_pauses(fake_ollama: tuple[Any, str]) -> None:
    server, url = fake_ollama
    clock = Clock()
    with EmbeddingEngine(url, timeout=0.2, clock=clock) as eng:
        server.control.delay_ms = 1000
        started = time.monotonic()
        with pytest.raises(OllamaTimeout):
            eng.embed("slow text")
        assert time.monotonic() - started < 0.9
        assert eng.backoff_remaining() == pytest.approx(60.0)
        server.control.delay_ms = 0


def test_server_down_backs_off_then_retries() -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    clock = Clock()
    with EmbeddingEngine(url, clock=clock, backoff_seconds=60) as eng:
        with pytest.raises(OllamaUnavailable, match="cannot connect"):
            eng.embed("first memory")
        assert eng.backoff_remaining() == pytest.approx(60.0)
        srv, _ = start_server(port)  # Ollama comes back on the same port
        try:
            started = time.monotonic()
            for i in range(20):  # each fails at once, without a request
                with pytest.raises(OllamaUnavailable, match="skipped"):
                    eng.embed(f"memory {i}")
            assert time.monotonic() - started < 0.5
            assert srv.control.requests == []
            assert eng.stats().errors == 21
            clock.now += 61
            assert eng.backoff_remaining() == 0
            assert len(eng.embed("first memory")) == 768
            assert [p for p, _ in srv.control.requests] == ["/api/embed"]
        finally:
            srv.shutdown()
            srv.server_close()


def test_cached_texts_are_answered_during_a_back_off(fake_ollama: tuple[Any, str]) -> None:
    server, url = fake_ollama
    clock = Clock()
    with EmbeddingEngine(url, timeout=0.2, clock=clock) as eng:
        cached = eng.embed("known memory")
        server.control.delay_ms = 600
        with pytest.raises(OllamaTimeout):
            eng.embed("new memory")
        server.control.delay_ms = 0
        assert eng.embed("known memory") == cached
        with pytest.raises(OllamaUnavailable):
            eng.embed("another new memory")


def test_check_available(fake_ollama: tuple[Any, str], engine: Any) -> None:
    server, url = fake_ollama
    ok, why = engine.check_available()
    assert ok and why == f"nomic-embed-text at {url}: 768-dimensional vectors"
    assert [p for p, _ in server.control.requests] == ["/api/embed"]  # (GETs are not logged)
    assert engine.stats().requests == 0  # the probe is not counted
    assert engine.cache_info().currsize == 0  # nor cached


def test_check_available_server_down_and_clears_back_off() -> None:
    port = free_port()
    clock = Clock()
    with EmbeddingEngine(f"http://127.0.0.1:{port}", clock=clock) as eng:
        ok, why = eng.check_available()
        assert not ok and "cannot connect" in why
        with pytest.raises(OllamaUnavailable):
            eng.embed("x")
        assert eng.backoff_remaining() > 0
        srv, _ = start_server(port)
        try:
            assert eng.check_available()[0]
            assert eng.backoff_remaining() == 0
            assert len(eng.embed("x")) == 768
        finally:
            srv.shutdown()
            srv.server_close()


def test_errors_are_ollama_or_embedding_errors() -> None:
    """Callers fall back to FTS-only by catching these two families."""
    for exc in (OllamaUnavailable, OllamaTimeout, ModelNotFound, OllamaResponseError):
        assert issubclass(exc, OllamaError)
    assert issubclass(OllamaError, LLMemError)


def test_text_is_never_logged(
    fake_ollama: tuple[Any, str], caplog: pytest.LogCaptureFixture
) -> None:
    server, url = fake_ollama
    secret_text = "the-private-memory-text-xyzzy"
    clock = Clock()
    with caplog.at_level("DEBUG", logger="llmem_hooks"):
        with EmbeddingEngine(url, timeout=0.2, clock=clock) as eng:
            eng.embed(secret_text)
            server.control.delay_ms = 600
            with pytest.raises(OllamaTimeout) as err:
                eng.embed(secret_text + " again")
            server.control.delay_ms = 0
        with (
            EmbeddingEngine(url, model="all-minilm") as eng2,
            pytest.raises(EmbeddingDimensionError) as err2,
        ):
            eng2.embed(secret_text)
    assert caplog.records  # something was logged...
    assert secret_text not in caplog.text  # ...but never the text
    assert secret_text not in str(err.value) and secret_text not in str(err2.value)
