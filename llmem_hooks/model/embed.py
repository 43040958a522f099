"""EmbeddingEngine: text -> vector through Ollama's ``/api/embed``, with an LRU cache.

As in the LLMem reference (Go ``internal/embed``): a 2,048-entry LRU cache keyed by
(model, text) that hands out defensive copies, safe to share between threads, and a
dimension check against ``memory.vec_dimensions`` so a model of another size cannot
fill the store with vectors that sqlite-vec would never compare.

Additions for a sidecar that embeds memories on every idle event:

- `embed_batch` sends the texts the cache does not hold, ``batch_size`` per request;
- after a connection failure or a timeout the server is skipped for ``backoff_seconds``
  (60 s, `backoff.Backoff`), so a dead Ollama costs one timeout per minute, not one per memory;
- counters (hits, misses, requests, tokens, seconds) for benchmarks and ``doctor``.

Errors propagate as `OllamaError` (server side) or `EmbeddingError` (our checks);
callers decide to store memories without vectors or to search with FTS only. Every text
is redacted here, before the cache and the request (``<private>`` spans out, credentials
``[REDACTED]``): one choke point for what reaches the model, whatever the caller (a
memory, an episode, a search query, a prompt being recalled for). Texts are never logged.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from array import array
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, NamedTuple, Protocol, runtime_checkable

from ..config import Config, MemorySettings, OllamaSettings
from ..errors import LLMemError, ValidationError
from ..redact import redact_secrets, strip_private
from .backoff import BACKOFF_SECONDS, Backoff, ModelFailure, SharedBackoff
from .ollama import (
    DEFAULT_BASE_URL,
    DEFAULT_TIMEOUT_S,
    OllamaClient,
    OllamaError,
    OllamaTimeout,
    OllamaUnavailable,
)

log = logging.getLogger(__name__)

DEFAULT_EMBED_MODEL: str = OllamaSettings.embed_model
DEFAULT_DIMENSIONS: int = MemorySettings.vec_dimensions
DEFAULT_CACHE_SIZE = 2048
DEFAULT_BATCH_SIZE = 32
MAX_EMBED_CHARS = 8000  # longer texts are cut: nomic-embed-text reads ~8k tokens at most
PROBE_TEXT = "llmem-hooks embedding probe"


@runtime_checkable
class Embedder(Protocol):
    """Anything that turns text into a vector: what the `Retriever` needs for semantic
    search (`EmbeddingEngine`, a test's hashing double...)."""

    def embed(self, text: str) -> Sequence[float]: ...


@runtime_checkable
class BatchEmbedder(Embedder, Protocol):
    """What the session hooks need to give new memories vectors: many texts per request,
    and whether the model is being skipped after a failure (then nothing is asked)."""

    def embed_batch(self, texts: Sequence[str]) -> Sequence[Sequence[float]]: ...

    def backoff_remaining(self) -> float: ...


class EmbeddingError(LLMemError):
    """A vector could not be produced or is unusable (callers fall back to FTS only)."""


class EmbeddingDimensionError(EmbeddingError):
    """The model answers vectors of another size than ``memory.vec_dimensions``."""


class EmbeddingInputError(EmbeddingError, ValidationError):
    """The text to embed is not a non-empty string."""


class CacheInfo(NamedTuple):
    """Like ``functools.lru_cache``'s: hits, misses, maxsize, currsize."""

    hits: int
    misses: int
    maxsize: int
    currsize: int


@dataclass(frozen=True)
class EmbedStats:
    """What the engine did since it was created (or `reset_stats`)."""

    model: str
    dimensions: int
    hits: int  # texts answered without the server (cache, or a duplicate in the batch)
    misses: int  # texts the cache did not hold (sent, or refused during a back-off)
    requests: int  # /api/embed requests that answered
    errors: int  # requests that failed (including those skipped during a back-off)
    tokens: int  # prompt_eval_count summed over the requests
    seconds: float  # wall time spent in the requests
    cache_size: int
    cache_capacity: int

    @property
    def hit_rate(self) -> float:
        total = self.hits + self.misses
        return self.hits / total if total else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "hit_rate": self.hit_rate}


def _check_text(text: object, max_chars: int) -> str:
    """A non-empty string, redacted and cut to ``max_chars`` (what the model will see)."""
    if not isinstance(text, str):
        raise EmbeddingInputError(f"text to embed must be a string, not {type(text).__name__}")
    if not text.strip():
        raise EmbeddingInputError("text to embed is empty")
    safe = redact_secrets(strip_private(text))
    if safe is None or not safe.strip():
        raise EmbeddingInputError("text to embed holds nothing that may be sent to a model")
    return safe[:max_chars]


class ModelBackedOff(OllamaUnavailable):
    """The model was skipped: it failed recently (see ``failure``), retry later."""

    def __init__(self, failure: ModelFailure, now: float) -> None:
        self.failure = failure
        self.retry_in = failure.remaining(now)
        super().__init__(f"{failure.cause()}; skipped for {self.retry_in:.0f} s more")


class EmbeddingEngine:
    """Ollama embeddings for one model, cached. Thread-safe; a `BatchEmbedder` (so also
    the `Embedder` the `Retriever` takes).

    ``client`` shares an existing `OllamaClient` (``base_url``, ``allow_remote`` and
    ``timeout`` are then its own); ``clock`` is for tests of the back-off.
    """

    def __init__(
        self,
        base_url: str = DEFAULT_BASE_URL,
        *,
        model: str = DEFAULT_EMBED_MODEL,
        dimensions: int = DEFAULT_DIMENSIONS,
        cache_size: int = DEFAULT_CACHE_SIZE,
        batch_size: int = DEFAULT_BATCH_SIZE,
        max_chars: int = MAX_EMBED_CHARS,
        timeout: float = DEFAULT_TIMEOUT_S,
        allow_remote: bool = False,
        backoff_seconds: float = BACKOFF_SECONDS,
        client: OllamaClient | None = None,
        clock: Callable[[], float] = time.monotonic,
        shared_backoff: SharedBackoff | None = None,
    ) -> None:
        if not model or not isinstance(model, str):
            raise ValidationError("embedding model name must be a non-empty string")
        for name, value in (
            ("dimensions", dimensions),
            ("cache_size", cache_size),
            ("batch_size", batch_size),
            ("max_chars", max_chars),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValidationError(f"{name} must be a positive integer, got {value!r}")
        # The URL check (loopback unless allow_remote) happens in OllamaClient.
        self._owns_client = client is None
        self.client = client or OllamaClient(base_url, allow_remote=allow_remote, timeout=timeout)
        self.model = model
        self.dimensions = dimensions
        self.cache_size = cache_size
        self.batch_size = batch_size
        self.max_chars = max_chars
        self.backoff = Backoff(backoff_seconds, clock)
        self._lock = threading.Lock()
        self._cache: OrderedDict[tuple[str, str], array] = OrderedDict()
        # Interactive commands share the back-off between processes (llmem_hooks.model.backoff).
        self.shared_backoff = shared_backoff
        self.last_failure: ModelFailure | None = None
        self._zero_counters()

    @classmethod
    def from_config(cls, config: Config | Mapping[str, Any], **kwargs: Any) -> EmbeddingEngine:
        """An engine for the whole config (typed or the dict): ``ollama.base_url /
        allow_remote / embed_model / timeout_seconds`` and ``memory.vec_dimensions``.

        Raises ConfigError for a non-loopback URL unless ``ollama.allow_remote``. Does not
        look at ``ollama.enabled``: whether to embed at all is the caller's decision.
        """
        settings = Config.coerce(config)
        return cls(
            model=settings.ollama.embed_model,
            dimensions=settings.memory.vec_dimensions,
            client=OllamaClient.from_config(settings),
            **kwargs,
        )

    def close(self) -> None:
        if self._owns_client:
            self.client.close()

    def __enter__(self) -> EmbeddingEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- embedding -------------------------------------------------------------------------
    def embed(self, text: str) -> list[float]:
        """The vector of one text (a fresh list the caller may modify)."""
        return self.embed_batch([text])[0]

    def embed_batch(self, texts: Sequence[str], batch_size: int | None = None) -> list[list[float]]:
        """Vectors of ``texts``, in input order; one request per ``batch_size`` texts the
        cache does not hold (duplicates are sent once). Nothing is sent if a text is bad."""
        if isinstance(texts, str):
            raise EmbeddingInputError("embed_batch takes a list of texts, not one string")
        size = self.batch_size if batch_size is None else batch_size
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValidationError(f"batch_size must be a positive integer, got {size!r}")
        keys = [(self.model, _check_text(t, self.max_chars)) for t in texts]
        found: dict[tuple[str, str], array] = {}
        missing: list[tuple[str, str]] = []
        with self._lock:
            for key in keys:
                if key in found:
                    continue
                vec = self._cache.get(key)
                if vec is None:
                    found[key] = array("d")  # placeholder: requested once
                    missing.append(key)
                else:
                    self._cache.move_to_end(key)
                    found[key] = vec
            self._hits += len(keys) - len(missing)
            self._misses += len(missing)
        for start in range(0, len(missing), size):
            chunk = missing[start : start + size]
            vectors = self._request([text for _, text in chunk])
            with self._lock:
                for key, vec in zip(chunk, vectors, strict=True):
                    found[key] = vec
                    self._cache[key] = vec
                    self._cache.move_to_end(key)
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        return [found[key].tolist() for key in keys]

    def _request(self, texts: list[str]) -> list[array]:
        """One ``/api/embed`` request, checked; honours and arms the back-off."""
        down = self.backoff.blocked()
        if down is not None:
            with self._lock:
                self._errors += 1
            raise OllamaUnavailable(
                f"{self.client.shown_url}: skipped for {down[0]:.0f} s more after: {down[1]}"
            )
        shared = self.shared_backoff
        if shared is not None:
            failure = shared.blocked(self.client.base_url)
            if failure is not None:
                with self._lock:
                    self._errors += 1
                    self.last_failure = failure
                raise ModelBackedOff(failure, shared.clock())
        try:
            result = self.client.embed(self.model, texts)
        except (OllamaUnavailable, OllamaTimeout) as exc:
            with self._lock:
                self._errors += 1
            first = self.backoff.failed(str(exc))
            if shared is not None:
                kind = "timeout" if isinstance(exc, OllamaTimeout) else "down"
                detail = "cannot connect" if kind == "down" else str(exc)
                self.last_failure = shared.failed(
                    self.client.base_url, kind, detail, self.client.timeout
                )
            # Once an outage (then each retry at debug): a sidecar at rest with no model
            # server would otherwise say the same thing every minute.
            log.log(
                logging.INFO if first else logging.DEBUG,
                "embeddings paused (retried every %.0f s): %s",
                self.backoff.seconds,
                exc,
            )
            raise
        except OllamaError:
            with self._lock:
                self._errors += 1
            raise
        vectors: list[array] = []
        for vec in result.vectors:
            if len(vec) != self.dimensions:
                with self._lock:
                    self._errors += 1
                raise EmbeddingDimensionError(
                    f"model {self.model!r} returns {len(vec)}-dimensional vectors but "
                    f"memory.vec_dimensions is {self.dimensions}: set memory.vec_dimensions "
                    f"to {len(vec)} (stored vectors must then be re-embedded) or use a "
                    f"{self.dimensions}-dimensional embed_model"
                )
            if not math.isfinite(sum(vec)):
                with self._lock:
                    self._errors += 1
                raise EmbeddingError(f"model {self.model!r} returned a non-finite vector")
            vectors.append(array("d", vec))
        with self._lock:
            self._requests += 1
            self._tokens += result.prompt_tokens
            self._seconds += result.seconds
        if self.backoff.succeeded():
            log.info("embeddings resumed: %s answers", self.client.shown_url)
        if shared is not None:
            shared.succeeded(self.client.base_url)
        log.debug("embedded %d texts in %.3f s", len(texts), result.seconds)
        return vectors

    # -- availability ----------------------------------------------------------------------
    def check_available(self) -> tuple[bool, str]:
        """(ok, reason): the server answers, has the model, and its vectors have the
        configured size. One probe embedding, not cached; ignores and clears the back-off."""
        try:
            if not self.client.has_model(self.model):
                return False, (
                    f"model {self.model!r} is not installed on {self.client.shown_url} "
                    f"(ollama pull {self.model})"
                )
            result = self.client.embed(self.model, [PROBE_TEXT])
        except LLMemError as exc:
            return False, str(exc)
        got = len(result.vectors[0])
        if got != self.dimensions:
            return False, (
                f"model {self.model!r} returns {got}-dimensional vectors but "
                f"memory.vec_dimensions is {self.dimensions}"
            )
        self.backoff.succeeded()
        return True, f"{self.model} at {self.client.shown_url}: {got}-dimensional vectors"

    def backoff_remaining(self) -> float:
        """Seconds before the server is tried again after a failure (0 when not backing off)."""
        return self.backoff.remaining()

    # -- counters --------------------------------------------------------------------------
    def _zero_counters(self) -> None:
        self._hits = self._misses = self._requests = self._errors = self._tokens = 0
        self._seconds = 0.0

    def reset_stats(self) -> None:
        with self._lock:
            self._zero_counters()

    def cache_info(self) -> CacheInfo:
        with self._lock:
            return CacheInfo(self._hits, self._misses, self.cache_size, len(self._cache))

    def cache_clear(self) -> None:
        with self._lock:
            self._cache.clear()

    def stats(self) -> EmbedStats:
        with self._lock:
            return EmbedStats(
                model=self.model,
                dimensions=self.dimensions,
                hits=self._hits,
                misses=self._misses,
                requests=self._requests,
                errors=self._errors,
                tokens=self._tokens,
                seconds=self._seconds,
                cache_size=len(self._cache),
                cache_capacity=self.cache_size,
            )


INTERACTIVE_TIMEOUT_S = 2.0


def embedder_from_config(config: Config, *, interactive: bool = False) -> EmbeddingEngine | None:
    """The engine the sidecar, hooks and CLI use: None when ``ollama.enabled`` is off or
    the configured URL is refused (logged; callers then run FTS-only).

    ``interactive`` (CLI commands a person waits for): at most INTERACTIVE_TIMEOUT_S to
    connect and to answer, and the back-off shared between processes, so a hung server
    costs one short wait per minute instead of the full timeout on every command. The
    sidecar keeps the configured timeout and its own back-off.
    """
    settings = config
    if not settings.ollama.enabled:
        return None
    kwargs: dict[str, Any] = {}
    if interactive:
        timeout = min(settings.ollama.timeout_seconds, INTERACTIVE_TIMEOUT_S)
        settings = replace(settings, ollama=replace(settings.ollama, timeout_seconds=timeout))
        kwargs["shared_backoff"] = SharedBackoff()
    try:
        return EmbeddingEngine.from_config(settings, **kwargs)
    except LLMemError as exc:
        log.warning("embeddings off: %s", exc)
        return None
