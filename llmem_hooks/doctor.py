"""``llmem-hooks doctor``: which extractor the hooks will use, and why.

Extraction silently falling back to the heuristics is the designed behaviour when the
model cannot be used, so a person needs one place that says why: is Ollama enabled, is
its base URL allowed (loopback unless ``ollama.allow_remote``), does it answer, is the
model pulled, is today's budget left. No Ollama at all is a valid setup (the heuristics
run): only a configuration that cannot work is an error (exit code 2).

URLs are printed without credentials (`url_validate.strip_credentials`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

from .budget import BudgetLimits, ModelBudget
from .config import Config, OllamaSettings
from .errors import ConfigError
from .paths import get_config_path, get_llmem_home
from .store import MemoryStore
from .url_validate import is_loopback_host, strip_credentials, validate_base_url

Status = Literal["ok", "warn", "error", "skip"]
EXIT_OK = 0
EXIT_BAD_CONFIG = 2
PROBE_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class Check:
    """One line of the diagnosis. ``warn``: works, but degraded (e.g. no Ollama: the
    heuristics run); ``error``: the configuration cannot work as written; ``skip``: not
    applicable (e.g. Ollama disabled)."""

    name: str
    status: Status
    detail: str

    @property
    def ok(self) -> bool:
        return self.status in ("ok", "skip")

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


def exit_code(checks: list[Check]) -> int:
    """0 unless a check found a configuration that cannot work (2)."""
    return EXIT_BAD_CONFIG if any(c.status == "error" for c in checks) else EXIT_OK


def _budget_check(
    config: Config, store: MemoryStore | None, clock: Callable[[], float]
) -> tuple[Check, str | None]:
    """Today's model usage against the day caps; the reason the model is skipped, if so."""
    if store is None:
        return Check("budget", "skip", "no database opened"), None
    limits = BudgetLimits.from_config(config)
    report = ModelBudget(store, limits, clock=clock).report()
    today = report["today"]
    detail = (
        f"today ({report['day']} UTC): {today['calls']} calls, {today['tokens']} of "
        f"{limits.day_tokens} tokens, {today['seconds']:.1f} of {limits.day_seconds:g} s; "
        f"per session: {limits.session_tokens} tokens, {limits.session_seconds:g} s"
    )
    if report["day_tokens_left"] <= 0 or report["day_seconds_left"] <= 0:
        why = "today's model budget is spent (heuristics until the next UTC day)"
        return Check("budget", "warn", f"{detail}; {why}"), why
    return Check("budget", "ok", detail), None


def _ollama_checks(
    section: OllamaSettings, timeout: float
) -> tuple[list[Check], str | None, Status]:
    """(checks, why the model cannot be used or None, status of that reason)."""
    from .ollama import OllamaClient, OllamaError

    url = section.base_url
    shown = strip_credentials(url)
    allow_remote = section.allow_remote
    model = section.model
    checks: list[Check] = []
    try:
        validate_base_url(url, allow_remote)
    except ConfigError as exc:
        checks.append(Check("base_url", "error", str(exc)))
        return checks, f"ollama.base_url {shown} is refused", "error"
    from urllib.parse import urlsplit

    local = is_loopback_host(urlsplit(url).hostname or "")
    where = "on this machine" if local else "remote, allowed by ollama.allow_remote"
    checks.append(Check("base_url", "ok", f"{shown} ({where})"))
    try:
        with OllamaClient(url, allow_remote=allow_remote, timeout=timeout) as client:
            version = client.version(timeout)
            checks.append(Check("ollama", "ok", f"Ollama {version} answers at {shown}"))
            names = client.models(timeout)
    except OllamaError as exc:
        checks.append(Check("ollama", "warn", f"not reachable: {exc}"))
        return checks, f"Ollama does not answer at {shown}", "warn"
    want = model if ":" in model else f"{model}:latest"
    if want in names or model in names:
        checks.append(Check("model", "ok", f"{model} is installed"))
        return checks, None, "ok"
    checks.append(Check("model", "warn", f"{model} is not installed (run: ollama pull {model})"))
    return checks, f"model {model} is not installed", "warn"


def _vector_checks(config: Config | Mapping[str, Any], store: MemoryStore | None) -> list[Check]:
    """EMBEDDINGS: the embedder and sqlite-vec checks go here (owned by the embeddings
    work: which embedder is active, its model and dimensions, whether sqlite-vec loads).

    ``vectors``: whether sqlite-vec loads (else why: search is FTS-only), how many
    vectors are indexed and which KNN path they take, and a recorded dimension that
    differs from memory.vec_dimensions (warn: rebuilt on the next open with the setting)."""
    config = Config.coerce(config)
    checks = [_embedder_check(config)]
    if store is None:
        return [*checks, Check("vectors", "skip", "no database opened")]
    from .store.db import driver_name
    from .store.vectors import vector_status

    available, reason, _ = vector_status(store)
    reason = f"{driver_name()}: {reason}"
    if not available:
        return [*checks, Check("vectors", "warn", reason)]
    want = config.memory.vec_dimensions
    have = store.vectors.dimensions
    if have is not None and have != want:
        return [
            *checks,
            Check(
                "vectors",
                "warn",
                f"{reason}; memory.vec_dimensions is {want}: the index is rebuilt for"
                f" {want}-dimensional vectors when the store is next opened with it",
            ),
        ]
    return [*checks, Check("vectors", "ok", reason)]


def _embedder_check(config: Config) -> Check:
    """``embedder``: whether memories get vectors (semantic search, near-duplicate
    merging) or search stays keyword-only, and why."""
    from .embed import embedder_from_config

    if not config.ollama.enabled:
        return Check("embedder", "ok", "none: ollama.enabled is false; search is keyword-only")
    engine = embedder_from_config(config)
    if engine is None:
        return Check("embedder", "warn", "none: ollama.base_url is refused (see base_url)")
    try:
        ok, why = engine.check_available()
    finally:
        engine.close()
    if ok:
        return Check("embedder", "ok", why)
    return Check("embedder", "warn", f"none: {why}; search is keyword-only")


def diagnose(
    config: Config | Mapping[str, Any],
    store: MemoryStore | None = None,
    *,
    timeout: float = PROBE_TIMEOUT_S,
    clock: Callable[[], float] = time.time,
) -> list[Check]:
    """Every check, ending with ``extractor``: what the hooks will extract with and why."""
    path = get_config_path()
    checks = [
        Check("config", "ok", str(path) if path.exists() else "defaults (no config.yaml yet)")
    ]
    config = Config.coerce(config)
    section = config.ollama
    why: str | None
    severity: Status = "ok"
    if not section.enabled:
        checks.append(Check("ollama", "skip", "ollama.enabled is false"))
        why, severity = "ollama.enabled is false", "ok"
    else:
        found, why, severity = _ollama_checks(section, timeout)
        checks.extend(found)
    budget, over = _budget_check(config, store, clock)
    checks.append(budget)
    if why is None and over is not None:
        why, severity = over, "warn"
    if why is None:
        model = section.model
        shown = strip_credentials(section.base_url)
        checks.append(Check("extractor", "ok", f"ollama ({model} at {shown}) + heuristics"))
    else:
        status: Status = "ok" if severity == "ok" else "warn"
        checks.append(Check("extractor", status, f"heuristic: {why}"))
    checks.extend(_vector_checks(config, store))
    checks.append(_service_check())
    return checks


def _service_check() -> Check:
    """Whether the sidecar's query service answers (per-prompt recall and the agent tools
    go through it; without it the OpenCode plugin recalls nothing and the Copilot hook and
    the MCP server answer in-process, slower)."""
    from .service_client import answers
    from .service_protocol import socket_path

    status = answers()
    if status is None:
        return Check(
            "query_service",
            "warn",
            f"no sidecar answers on {socket_path(get_llmem_home())}: OpenCode gets no per-prompt"
            " recall until `llmem-hooks run` (its plugin starts it); Copilot and MCP answer"
            " in-process",
        )
    return Check("query_service", "ok", f"the sidecar answers (v{status.get('version', '?')})")


def render(checks: list[Check], markdown: bool = False) -> str:
    """Plain text (one aligned line per check) or a markdown list."""
    if markdown:
        return "\n".join(f"- **{c.name}**: {c.status} — {c.detail}" for c in checks) + "\n"
    width = max((len(c.name) for c in checks), default=0)
    return "\n".join(f"{c.status:<5} {c.name:<{width}}  {c.detail}" for c in checks) + "\n"
