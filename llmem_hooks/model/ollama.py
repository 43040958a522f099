"""A small Ollama client over httpx: generate, embed, list models.

Every failure becomes one `OllamaError` subclass, so callers (extraction, embeddings,
``doctor``) can fall back to the heuristics or FTS-only search and say why:

- `OllamaUnavailable`: nothing listens (connection refused, unknown host);
- `OllamaTimeout`: no answer within the timeout;
- `ModelNotFound`: the server answered 404 for the model ("try pulling it first");
- `OllamaResponseError`: any other status, a redirect, or a body that is not what Ollama
  sends.

Safety: the base URL passes `url_validate.validate_base_url` (loopback only unless
``allow_remote``); redirects are never followed; proxies from the environment are ignored
(``trust_env=False``: a loopback request must not be routed through a remote proxy); the
URL in logs and errors has its credentials stripped, and request bodies (transcripts) are
never logged.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..config import Config, OllamaSettings, section_of
from ..errors import LLMemError
from ..url_validate import strip_credentials, validate_base_url

if TYPE_CHECKING:
    import httpx

log = logging.getLogger(__name__)
# httpx logs every request URL at INFO, user:password included: keep it quiet.
logging.getLogger("httpx").setLevel(logging.WARNING)
logging.getLogger("httpcore").setLevel(logging.WARNING)

DEFAULT_BASE_URL: str = OllamaSettings.base_url
DEFAULT_TIMEOUT_S: float = OllamaSettings.timeout_seconds
PROBE_TIMEOUT_S = 2.0


class OllamaError(LLMemError):
    """The model server could not do what we asked."""


class OllamaUnavailable(OllamaError):
    """Nothing answers at the base URL."""


class OllamaTimeout(OllamaError):
    """The server did not answer in time."""


class ModelNotFound(OllamaError):
    """The server does not have the model (``ollama pull`` it)."""


class OllamaResponseError(OllamaError):
    """An error status, a redirect, or a malformed body."""


@dataclass(frozen=True)
class GenerateResult:
    """One ``/api/generate`` answer and what it cost."""

    text: str
    prompt_tokens: int
    output_tokens: int
    seconds: float

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.output_tokens


@dataclass(frozen=True)
class EmbedResult:
    """One ``/api/embed`` answer: a vector per input, in order."""

    vectors: list[list[float]]
    prompt_tokens: int
    seconds: float


def _count(body: Mapping[str, Any], key: str) -> int:
    value = body.get(key)
    return value if isinstance(value, int) and value >= 0 else 0


class OllamaClient:
    """Talks to one Ollama server. Thread-safe (httpx.Client is)."""

    def __init__(
        self,
        base_url: str = DEFAULT_BASE_URL,
        *,
        allow_remote: bool = False,
        timeout: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self.base_url = validate_base_url(base_url, allow_remote)
        self.shown_url = strip_credentials(self.base_url)
        self.timeout = timeout
        self._client: httpx.Client | None = None
        self._client_lock = threading.Lock()

    @property
    def _http(self) -> httpx.Client:
        """The HTTP client, built (and httpx imported, ~0.3 s with what it pulls in) on the
        first request: a command that never reaches the model (a keyword search, a server
        in back-off) pays nothing for it."""
        with self._client_lock:
            if self._client is None:
                import httpx

                self._client = httpx.Client(
                    base_url=self.base_url,
                    timeout=self.timeout,
                    follow_redirects=False,
                    trust_env=False,
                    headers={"User-Agent": "llmem-hooks"},
                )
            return self._client

    @classmethod
    def from_config(
        cls, config: Config | OllamaSettings | Mapping[str, Any] | None
    ) -> OllamaClient:
        """A client for the config's ``ollama`` section (the whole config, or that section:
        see `llmem_hooks.config`). Raises ConfigError on a bad URL."""
        section = section_of(config, OllamaSettings)
        return cls(
            section.base_url, allow_remote=section.allow_remote, timeout=section.timeout_seconds
        )

    def close(self) -> None:
        with self._client_lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    def __enter__(self) -> OllamaClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- requests ----------------------------------------------------------------------
    def _request(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> Any:
        """One request; returns the decoded JSON body or raises an OllamaError."""
        http = self._http
        import httpx  # loaded by `_http`

        try:
            resp = http.request(
                method, path, json=body, timeout=self.timeout if timeout is None else timeout
            )
        except httpx.TimeoutException:
            raise OllamaTimeout(f"{self.shown_url}{path}: no answer in time") from None
        except (httpx.ConnectError, httpx.NetworkError) as exc:
            raise OllamaUnavailable(
                f"{self.shown_url}: cannot connect ({type(exc).__name__})"
            ) from None
        except httpx.HTTPError as exc:
            raise OllamaResponseError(f"{self.shown_url}{path}: {type(exc).__name__}") from None
        if resp.is_redirect:
            target = strip_credentials(resp.headers.get("location", "?"))
            raise OllamaResponseError(f"{self.shown_url}{path}: redirect to {target} refused")
        try:
            data = resp.json()
        except ValueError:
            data = None
        if (
            resp.status_code == 404
            and isinstance(data, dict)
            and "not found" in str(data.get("error", ""))
        ):
            model = (body or {}).get("model", "?")
            raise ModelNotFound(f"model {model!r} not found on {self.shown_url}")
        if resp.status_code >= 400:
            error = data.get("error") if isinstance(data, dict) else None
            detail = f": {str(error)[:200]}" if error else ""
            raise OllamaResponseError(f"{self.shown_url}{path}: HTTP {resp.status_code}{detail}")
        if data is None:
            raise OllamaResponseError(f"{self.shown_url}{path}: answer is not JSON")
        return data

    def version(self, timeout: float = PROBE_TIMEOUT_S) -> str:
        data = self._request("GET", "/api/version", timeout=timeout)
        if not isinstance(data, dict):
            raise OllamaResponseError(f"{self.shown_url}/api/version: unexpected answer")
        return str(data.get("version", "?"))

    def models(self, timeout: float = PROBE_TIMEOUT_S) -> list[str]:
        """Names of the installed models (``name:tag``)."""
        data = self._request("GET", "/api/tags", timeout=timeout)
        models = data.get("models") if isinstance(data, dict) else None
        if not isinstance(models, list):
            raise OllamaResponseError(f"{self.shown_url}/api/tags: unexpected answer")
        return [str(m.get("name")) for m in models if isinstance(m, dict) and m.get("name")]

    def has_model(self, model: str, timeout: float = PROBE_TIMEOUT_S) -> bool:
        names = self.models(timeout)
        want = model if ":" in model else model + ":latest"
        return want in names or model in names

    def generate(
        self,
        model: str,
        prompt: str,
        *,
        schema: Mapping[str, Any] | None = None,
        system: str | None = None,
        num_ctx: int | None = None,
        timeout: float | None = None,
    ) -> GenerateResult:
        """``/api/generate`` with ``stream: false``; ``schema`` goes in ``format`` so the
        model answers JSON of that shape (the caller still validates it)."""
        body: dict[str, Any] = {
            "model": model,
            "prompt": prompt,
            "stream": False,
            "options": {"temperature": 0},
        }
        if schema is not None:
            body["format"] = dict(schema)
        if system:
            body["system"] = system
        if num_ctx:
            body["options"]["num_ctx"] = num_ctx
        started = time.monotonic()
        data = self._request("POST", "/api/generate", body, timeout)
        seconds = time.monotonic() - started
        if not isinstance(data, dict) or not isinstance(data.get("response"), str):
            raise OllamaResponseError(f"{self.shown_url}/api/generate: no response text")
        return GenerateResult(
            text=data["response"],
            prompt_tokens=_count(data, "prompt_eval_count"),
            output_tokens=_count(data, "eval_count"),
            seconds=seconds,
        )

    def embed(
        self, model: str, texts: Sequence[str], *, timeout: float | None = None
    ) -> EmbedResult:
        """``/api/embed`` for several texts in one request."""
        started = time.monotonic()
        data = self._request("POST", "/api/embed", {"model": model, "input": list(texts)}, timeout)
        seconds = time.monotonic() - started
        vectors = data.get("embeddings") if isinstance(data, dict) else None
        if not isinstance(vectors, list) or len(vectors) != len(texts):
            raise OllamaResponseError(f"{self.shown_url}/api/embed: wrong number of vectors")
        out: list[list[float]] = []
        for vec in vectors:
            if not isinstance(vec, list) or not all(
                isinstance(x, int | float) and not isinstance(x, bool) for x in vec
            ):
                raise OllamaResponseError(f"{self.shown_url}/api/embed: malformed vector")
            out.append([float(x) for x in vec])
        return EmbedResult(out, _count(data, "prompt_eval_count"), seconds)


def is_ollama_running(base_url: str = DEFAULT_BASE_URL, allow_remote: bool = False) -> bool:
    """True if an Ollama server answers at ``base_url`` within two seconds."""
    try:
        with OllamaClient(base_url, allow_remote=allow_remote, timeout=PROBE_TIMEOUT_S) as c:
            c.version()
        return True
    except (OllamaError, LLMemError):
        return False
