"""config.yaml: defaults, loading, validation.

The file is written with the defaults on first use (mode 0600) so a person can see every
setting. Unknown keys produce a warning (a typo should not silently do nothing); a value
of the wrong kind is a `ConfigError` that names the key.
"""

from __future__ import annotations

import copy
import logging
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .errors import ConfigError, ValidationError
from .paths import (
    check_user_path,
    ensure_private_dir,
    get_config_path,
    read_bounded_text,
    write_private_file,
)

log = logging.getLogger(__name__)

DEFAULT_CONFIG: dict[str, dict[str, Any]] = {
    "memory": {
        "db_path": None,  # None -> <LLMEM_HOME>/memory.db
        "default_confidence": 0.8,
        "inbox_capacity": 100,
        "vec_dimensions": 768,  # must match the embedding model (nomic-embed-text: 768)
        "duplicate_cosine": 0.92,  # a new memory this close to one of its project merges
    },
    "retrieval": {
        "alpha": 0.08,  # chosen by bench/quality.py: hybrid never below FTS (docs/retrieval.md)
        "blend": 0.3,
        "fuzzy_threshold": 0.7,
        "limit": 10,
    },
    "context": {
        "dir": None,  # None -> <LLMEM_HOME>/context
        "budget_tokens": 1500,
    },
    "session": {
        "idle_debounce_seconds": 30,
        "end_after_minutes": 30,
        "context_retention_days": 7,
        "idle_quiet_seconds": 3,  # no new rows for this long after a finished turn = idle
        "poll_seconds": 5,  # the sidecar's safety poll, besides file-change events
    },
    "opencode": {
        "enabled": True,
        "db_path": None,  # None -> $OPENCODE_DB, $XDG_DATA_HOME/opencode/opencode.db, ~/.local/...
        "autostart_sidecar": True,  # the plugin starts `llmem-hooks run` when none runs
        "plugin_wait_ms": 300,  # how long the plugin waits for a new session's context file
    },
    "copilot": {
        "enabled": True,
        "home": None,  # None -> $COPILOT_HOME, else ~/.copilot
        "autostart_sidecar": True,  # the sessionStart hook starts `llmem-hooks run` if none runs
    },
    "ollama": {
        "enabled": True,  # use a local model when one answers; heuristics otherwise
        "base_url": "http://localhost:11434",
        "allow_remote": False,  # only loopback URLs unless set
        "model": "llama3.2",  # extraction and self-assessment model
        "embed_model": "nomic-embed-text",
        "timeout_seconds": 30.0,
        "context_tokens": 4096,  # the model's context; transcripts are chunked to fit
    },
    "budget": {
        "session_tokens": 50_000,  # per session, prompt + output tokens
        "session_seconds": 300.0,
        "day_tokens": 500_000,  # per day (UTC), all sessions
        "day_seconds": 3600.0,
    },
}


def _number(lo: float, hi: float) -> Callable[[Any], float]:
    """A finite int or float in [lo, hi]: inf, nan and 1e20 would crash the sidecar later
    (int(inf), sleep(1e20)), so they are refused here, with the key named."""

    def check(value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"expected a number, got {_short(value)}")
        if (isinstance(value, float) and not math.isfinite(value)) or not lo <= value <= hi:
            raise ValueError(
                f"must be a finite number between {lo:g} and {hi:g}, got {_short(value)}"
            )
        return value

    return check


def _int(lo: int, hi: int) -> Callable[[Any], int]:
    """An integer in [lo, hi] (bounded: SQLite and range() choke on 10**30)."""

    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"expected an integer, got {_short(value)}")
        if not lo <= value <= hi:
            raise ValueError(f"must be an integer between {lo} and {hi}, got {_short(value)}")
        return value

    return check


def _short(value: Any) -> str:
    """repr(value), cut to one short line (a 10**5-digit integer must not flood stderr)."""
    try:
        text = repr(value)
    except ValueError:  # int too large to print (Python's int_max_str_digits)
        return "a huge integer"
    except RecursionError:
        return "a deeply nested value"
    return text if len(text) <= 80 else text[:77] + "..."


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {value!r}")
    return value


def _optional_path(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"expected a path or null, got {value!r}")
    return value


def _name(value: Any) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > 200:
        raise ValueError(f"expected a model name, got {value!r}")
    return value.strip()


def _url(value: Any) -> str:
    if not isinstance(value, str) or not value.startswith(("http://", "https://")):
        raise ValueError("expected an http(s) URL")  # never echo it: it may hold a password
    return value.rstrip("/")


VALIDATORS: dict[str, dict[str, Callable[[Any], Any]]] = {
    "memory": {
        "db_path": _optional_path,
        "default_confidence": _number(0.0, 1.0),
        "inbox_capacity": _int(1, 100_000),
        "vec_dimensions": _int(1, 8192),
        "duplicate_cosine": _number(0.0, 1.0),
    },
    "retrieval": {
        "alpha": _number(0.0, 1.0),
        "blend": _number(0.0, 1.0),
        "fuzzy_threshold": _number(0.0, 1.0),
        "limit": _int(1, 1000),
    },
    "context": {"dir": _optional_path, "budget_tokens": _int(50, 1_000_000)},
    "session": {
        "idle_debounce_seconds": _number(0.0, 86_400.0),
        "end_after_minutes": _number(0.0, 525_600.0),  # a year
        "context_retention_days": _number(0.0, 36_500.0),
        "idle_quiet_seconds": _number(0.0, 3600.0),
        "poll_seconds": _number(0.05, 3600.0),
    },
    "opencode": {
        "enabled": _bool,
        "db_path": _optional_path,
        "autostart_sidecar": _bool,
        "plugin_wait_ms": _int(0, 60_000),
    },
    "copilot": {"enabled": _bool, "home": _optional_path, "autostart_sidecar": _bool},
    "ollama": {
        "enabled": _bool,
        "base_url": _url,
        "allow_remote": _bool,
        "model": _name,
        "embed_model": _name,
        "timeout_seconds": _number(0.1, 3600.0),
        "context_tokens": _int(256, 10_000_000),
    },
    "budget": {
        "session_tokens": _int(0, 10**12),
        "session_seconds": _number(0.0, 86_400.0),
        "day_tokens": _int(0, 10**12),
        "day_seconds": _number(0.0, 86_400.0),
    },
}


def validate_config(raw: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Merge ``raw`` over the defaults, warning on unknown keys and raising on bad values."""
    if not isinstance(raw, Mapping):
        raise ConfigError("config.yaml must hold a mapping of sections")
    config = copy.deepcopy(DEFAULT_CONFIG)
    for section, values in raw.items():
        if section not in VALIDATORS:
            log.warning("config.yaml: unknown section %r ignored", section)
            continue
        if values is None:
            continue
        if not isinstance(values, Mapping):
            raise ConfigError(f"config.yaml: {section} must be a mapping")
        for key, value in values.items():
            check = VALIDATORS[section].get(key)
            if check is None:
                log.warning("config.yaml: unknown key %s.%s ignored", section, key)
                continue
            try:
                config[section][key] = check(value)
            except ValueError as exc:
                raise ConfigError(
                    f"config.yaml: invalid value for {section}.{key}: {exc}"
                ) from None
            except RecursionError:
                raise ConfigError(
                    f"config.yaml: invalid value for {section}.{key}: nested too deeply"
                ) from None
    return _check_paths(config)


# Paths we create, open for writing or chmod: (section, key, "file" or "dir").
_OWN_PATHS = (("memory", "db_path", "file"), ("context", "dir", "dir"))


def _check_paths(config: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Resolve ``memory.db_path`` and ``context.dir`` (relative to LLMEM_HOME) and refuse
    system folders and wrong file kinds, before anything touches the file system: a
    config.yaml naming ``/etc/shadow`` must fail here, not after a mkdir or chmod."""
    for section, key, kind in _OWN_PATHS:
        value = config[section][key]
        if value is None:
            continue
        try:
            config[section][key] = str(check_user_path(value, kind, f"{section}.{key}"))
        except ValidationError as exc:
            raise ConfigError(f"config.yaml: invalid value for {exc}") from None
    return config


def write_config_yaml(path: Path, config: Mapping[str, Any], force: bool = False) -> bool:
    """Write ``config`` as YAML (mode 0600). Returns False if the file exists and not ``force``."""
    if path.exists() and not force:
        return False
    import yaml  # lazy: the Copilot hook path must not pay ~20 ms for it

    text = "# llmem-hooks configuration (see docs/configuration.md)\n"
    text += yaml.safe_dump(dict(config), sort_keys=False)
    write_private_file(path, text)
    return True


def load_config(path: Path | None = None, create: bool = True) -> dict[str, dict[str, Any]]:
    """Read config.yaml (writing the defaults first if it does not exist and ``create``)."""
    path = path or get_config_path()
    if not path.exists():
        if create:
            ensure_private_dir(path.parent)
            write_config_yaml(path, DEFAULT_CONFIG)
        return copy.deepcopy(DEFAULT_CONFIG)
    return validate_config(_read_yaml(path) or {})


MAX_CONFIG_BYTES = 1_048_576


def _read_yaml(path: Path) -> Any:
    """The YAML document in ``path``; any way it cannot be read (missing rights, not UTF-8,
    over 1 MB, malformed, nested too deep for the parser) is one ConfigError line."""
    import yaml

    try:
        text = read_bounded_text(path, MAX_CONFIG_BYTES)
    except ValueError as exc:
        raise ConfigError(f"config.yaml: {exc}") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:  # PyYAML's message spans lines; keep one
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"config.yaml: invalid YAML in {path}{where}: {problem}") from None
    except RecursionError:
        raise ConfigError(f"config.yaml: {path} is nested too deeply") from None
    except (ValueError, TypeError, OverflowError) as exc:  # e.g. a timestamp out of range
        raise ConfigError(f"config.yaml: invalid YAML in {path}: {exc}") from None
