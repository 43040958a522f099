"""config.yaml: typed settings, their defaults and bounds, loading, validation.

Each section of config.yaml is one frozen dataclass below (`MemorySettings`,
`RetrievalSettings`, ...), and `Config` holds one of each. A default and its bounds are
written once, on the dataclass field; `DEFAULT_CONFIG` (the dict written to a new
config.yaml) and `VALIDATORS` are derived from them, so no other module restates a
default: a module that needs one reads the typed config (``Config.from_mapping(cfg).ollama
.model``) or the field's default (``OllamaSettings.model``).

The file is written with the defaults on first use (mode 0600) so a person can see every
setting. Unknown keys produce a warning (a typo should not silently do nothing); a value
of the wrong kind is a `ConfigError` that names the key.

One typed `Config` inside; the dict shape only at the edges. `load_settings` (what the
CLI and the sidecar call) returns the `Config`; `load_config` returns the validated dict,
for what speaks dicts: config.yaml itself and the Copilot hook's JSON cache of it (the
hook reads three values of that dict and types it only to open the store: importing this
module costs it ~20 ms). `Config.from_mapping` turns the one into the other.

A function inside takes `Config`. The public entry points that callers (tests, a user's
script) hand the dict `load_config` returns also accept it and convert it at once with
`Config.coerce`, passing only the `Config` on: every ``X.from_config(config)``
(`MemoryStore`, `EmbeddingEngine`, `OllamaClient`, `BudgetLimits`, the session adapters,
each picking its own section(s) with `section_of`; the ones that read a single section
also accept that section alone), and the constructors `QueryService`, `Dreamer`,
`SessionHookCoordinator`, `Sidecar`, `ViewerData`, `create_session_hook_coordinator`,
`build_extraction_engine`, `diagnose` and the service `Client`.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from .errors import ConfigError, ValidationError
from .paths import (
    check_user_path,
    ensure_private_dir,
    get_config_path,
    read_bounded_text,
    write_private_file,
)

log = logging.getLogger(__name__)


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


def _setting(default: Any, check: Callable[[Any], Any]) -> Any:
    """A settings field: its default and the check a config.yaml value goes through."""
    return field(default=default, metadata={"check": check})


# How `Section.from_mapping` gives a value its field's type (annotations are strings here).
_AS_TYPE: dict[str, Callable[[Any], Any]] = {
    "int": int,
    "float": float,
    "bool": bool,
    "tuple[str, ...]": tuple,
}

S = TypeVar("S", bound="Section")


@dataclass(frozen=True)
class Section:
    """A config.yaml section: the base of the typed settings below."""

    section: ClassVar[str] = ""  # the YAML key

    @classmethod
    def from_mapping(cls: type[S], values: Mapping[str, Any] | None) -> S:
        """Settings from a section mapping. A missing or null key takes its default, keys
        this section does not have are ignored; values get the field's type but are not
        validated (`validate_config` does that when config.yaml is read)."""
        values = values or {}
        found: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            value = values.get(f.name)
            if value is not None:
                found[f.name] = _AS_TYPE.get(str(f.type), _same)(value)
        return cls(**found)

    def to_dict(self) -> dict[str, Any]:
        """The dict form: a tuple setting becomes the list YAML and JSON hold."""
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _same(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class MemorySettings(Section):
    """``memory:`` the database and how memories are stored and merged."""

    section: ClassVar[str] = "memory"
    db_path: str | None = _setting(None, _optional_path)  # None -> <LLMEM_HOME>/memory.db
    default_confidence: float = _setting(0.8, _number(0.0, 1.0))
    inbox_capacity: int = _setting(100, _int(1, 100_000))
    # must match the embedding model (nomic-embed-text: 768)
    vec_dimensions: int = _setting(768, _int(1, 8192))
    # a new memory this close to one of its project merges
    duplicate_cosine: float = _setting(0.92, _number(0.0, 1.0))


@dataclass(frozen=True)
class RetrievalSettings(Section):
    """``retrieval:`` hybrid search weights and the default result count."""

    section: ClassVar[str] = "retrieval"
    # the semantic list's weight in hybrid search: with a real small embedding model,
    # alpha 0.3 with a sharp semantic RRF k (10) measured best and never below keyword-only
    # (bench/minilm_sweep.py, docs/retrieval.md); hybrid only runs when a model answers
    alpha: float = _setting(0.3, _number(0.0, 1.0))
    blend: float = _setting(0.3, _number(0.0, 1.0))
    fuzzy_threshold: float = _setting(0.7, _number(0.0, 1.0))
    limit: int = _setting(10, _int(1, 1000))
    # RRF k of the semantic list fused with keyword hits (keyword hits use k = 10); 60
    # would flatten the model's order until it hardly matters (docs/retrieval.md)
    rrf_k_semantic: int = _setting(10, _int(1, 1000))
    # characters of text shown for a whole result list (search, agent tools): a long memory
    # (an episode) shows the lines that answer the query; 0 shows every content whole.
    # 1,750 keeps five results under 1,800 (issue 23; bench/devmem.py, docs/retrieval.md:
    # DevMemBench coverage 0.851 at 1,885 characters with 1,950, 0.834 at 1,708 with this).
    passage_chars: int = _setting(1750, _int(0, 1_000_000))


@dataclass(frozen=True)
class ContextSettings(Section):
    """``context:`` the per-session context files."""

    section: ClassVar[str] = "context"
    dir: str | None = _setting(None, _optional_path)  # None -> <LLMEM_HOME>/context
    budget_tokens: int = _setting(1500, _int(50, 1_000_000))


@dataclass(frozen=True)
class SessionSettings(Section):
    """``session:`` when the sidecar calls a session idle or ended, and cleans up."""

    section: ClassVar[str] = "session"
    idle_debounce_seconds: float = _setting(30, _number(0.0, 86_400.0))
    end_after_minutes: float = _setting(30, _number(0.0, 525_600.0))  # max: a year
    context_retention_days: float = _setting(7, _number(0.0, 36_500.0))
    # no new rows for this long after a finished turn = idle
    idle_quiet_seconds: float = _setting(3, _number(0.0, 3600.0))
    # the sidecar's safety poll, besides file-change events
    poll_seconds: float = _setting(5, _number(0.05, 3600.0))


@dataclass(frozen=True)
class OpenCodeSettings(Section):
    """``opencode:`` the OpenCode adapter and plugin."""

    section: ClassVar[str] = "opencode"
    enabled: bool = _setting(True, _bool)
    # None -> $OPENCODE_DB, $XDG_DATA_HOME/opencode/opencode.db, ~/.local/...
    db_path: str | None = _setting(None, _optional_path)
    # the plugin starts `llmem-hooks run` when none runs
    autostart_sidecar: bool = _setting(True, _bool)
    # how long the plugin waits for a new session's context file
    plugin_wait_ms: int = _setting(300, _int(0, 60_000))
    # per-prompt recall: the plugin asks the query service on every user message
    plugin_recall: bool = _setting(True, _bool)
    # ... and gives up after this long (no block then: the prompt never waits longer)
    plugin_recall_timeout_ms: int = _setting(250, _int(1, 60_000))
    # the memory_* agent tools, and how long one call may take
    plugin_tools: bool = _setting(True, _bool)
    plugin_tool_timeout_ms: int = _setting(3000, _int(1, 60_000))


@dataclass(frozen=True)
class CopilotSettings(Section):
    """``copilot:`` the Copilot CLI adapter and hooks."""

    section: ClassVar[str] = "copilot"
    enabled: bool = _setting(True, _bool)
    home: str | None = _setting(None, _optional_path)  # None -> $COPILOT_HOME, else ~/.copilot
    # the sessionStart hook starts `llmem-hooks run` if none runs
    autostart_sidecar: bool = _setting(True, _bool)


@dataclass(frozen=True)
class OllamaSettings(Section):
    """``ollama:`` the local model server, for extraction and embeddings."""

    section: ClassVar[str] = "ollama"
    # use a local model when one answers; heuristics otherwise
    enabled: bool = _setting(True, _bool)
    base_url: str = _setting("http://localhost:11434", _url)
    allow_remote: bool = _setting(False, _bool)  # only loopback URLs unless set
    model: str = _setting("llama3.2", _name)  # extraction and self-assessment model
    embed_model: str = _setting("nomic-embed-text", _name)
    timeout_seconds: float = _setting(30.0, _number(0.1, 3600.0))
    # the model's context; transcripts are chunked to fit
    context_tokens: int = _setting(4096, _int(256, 10_000_000))


@dataclass(frozen=True)
class BudgetSettings(Section):
    """``budget:`` caps on local-model use."""

    section: ClassVar[str] = "budget"
    session_tokens: int = _setting(50_000, _int(0, 10**12))  # per session, prompt + output
    session_seconds: float = _setting(300.0, _number(0.0, 86_400.0))
    day_tokens: int = _setting(500_000, _int(0, 10**12))  # per day (UTC), all sessions
    day_seconds: float = _setting(3600.0, _number(0.0, 86_400.0))


@dataclass(frozen=True)
class EpisodeSettings(Section):
    """``episodes:`` every exchange kept as a searchable ``conversation`` memory."""

    section: ClassVar[str] = "episodes"
    enabled: bool = _setting(True, _bool)
    retention_days: float = _setting(365, _number(0.0, 36_500.0))  # 0: kept forever
    max_count: int = _setting(200_000, _int(0, 10_000_000))  # 0: no cap; oldest go first
    # the existing sessions of both agents are indexed once, on the sidecar's first start
    backfill: bool = _setting(True, _bool)
    # the database's size cap in MB (0: none): above it the dream cycle prunes the oldest
    # episodes first (after a backup) and returns the pages with an incremental VACUUM
    max_db_mb: float = _setting(0, _number(0.0, 10_000_000.0))


@dataclass(frozen=True)
class RecallSettings(Section):
    """``recall:`` per-prompt recall by the query service (docs/query-service.md): the
    memories and episodes relevant to a prompt that the session was not given yet."""

    section: ClassVar[str] = "recall"
    enabled: bool = _setting(True, _bool)
    budget_tokens: int = _setting(400, _int(0, 100_000))  # the block's size (~4 chars/token)
    max_results: int = _setting(5, _int(1, 50))
    # the floor (measured: bench/recall_floor.py, docs/query-service.md): a prompt needs
    # this many content words, or one rare one ...
    min_content_words: int = _setting(2, _int(1, 20))
    # ... "rare": found in at most this share of the memories
    rare_word_share: float = _setting(0.01, _number(0.0, 1.0))
    # words in more than this share of the memories are not searched on (still counted
    # by the coverage floor)
    common_word_share: float = _setting(0.1, _number(0.0, 1.0))
    # a hit must hold at least this share of the prompt's content words, each weighed by
    # its rarity in the store (0.45-0.5 held more noise than answers on the dev sets) ...
    min_coverage: float = _setting(0.5, _number(0.0, 1.0))
    # ... and at least this share of the best match's (and more than the best of what the
    # session was given holds: a question its context answers gets nothing)
    relative_floor: float = _setting(0.75, _number(0.0, 1.0))
    # a semantic-only hit (no shared word) counts within this cosine distance
    semantic_max_distance: float = _setting(0.35, _number(0.0, 2.0))
    # longest text of one entry, in characters (episodes are clipped)
    entry_chars: int = _setting(320, _int(40, 10_000))


# A systemd OnCalendar expression: letters, digits and ``*-:/,.~`` and spaces only, so
# nothing a shell or a unit file could read as code ever reaches a generated unit.
SCHEDULE_PATTERN = r"^[A-Za-z0-9*:/,.~ -]{1,100}$"


def check_schedule(value: Any) -> str:
    """A schedule for ``install --service`` (systemd OnCalendar syntax), refused when it
    holds a shell metacharacter (``$ ` ; | & < > ( ) \\ ' "``, newlines...)."""
    import re

    if not isinstance(value, str) or not re.fullmatch(SCHEDULE_PATTERN, value.strip()):
        raise ValueError(
            f"expected a systemd calendar expression like '*-*-* 03:00:00' (letters, digits,"
            f" spaces and *-:/,.~ only), got {_short(value)}"
        )
    return value.strip()


@dataclass(frozen=True)
class DreamSettings(Section):
    """``dream:`` the dream cycle (docs/dream.md): merge, decay, boost, link, retire."""

    section: ClassVar[str] = "dream"
    # the sidecar runs the cycle (with --apply) when idle, at most once per interval
    enabled: bool = _setting(True, _bool)
    interval_hours: float = _setting(24, _number(0.01, 8760.0))
    # "idle": no session had activity for this long and the worker has nothing queued
    idle_minutes: float = _setting(10, _number(0.0, 1440.0))
    # light: memories with embeddings this close (cosine) merge ...
    similarity_threshold: float = _setting(0.92, _number(0.0, 1.0))
    # ... and, compared by their normalized words, this much overlap (Jaccard)
    merge_overlap: float = _setting(0.8, _number(0.0, 1.0))
    # light: ask the local model (the ollama section) to rewrite a merge group's kept text
    # into one sentence holding every fact; checked, else the best text stays. Off: opt in
    model_rewrite: bool = _setting(False, _bool)
    model_rewrite_max_groups: int = _setting(50, _int(0, 100_000))  # asked per run, at most
    # deep: unused for decay_interval_days -> confidence x (1 - decay_rate), not below the
    # floor; at most one decay per interval
    decay_rate: float = _setting(0.1, _number(0.0, 1.0))
    decay_interval_days: float = _setting(30, _number(0.01, 36_500.0))
    decay_floor: float = _setting(0.3, _number(0.0, 1.0))
    # deep: recalled at least this often (and since the last boost) -> + boost_amount
    boost_threshold: int = _setting(3, _int(1, 1_000_000))
    boost_amount: float = _setting(0.05, _number(0.0, 1.0))
    # deep: inbox items scoring at least this become memories, the rest are evicted
    consolidate_min_score: float = _setting(0.5, _number(0.0, 1.0))
    # deep: a candidate extraction was not sure of waits in the inbox this long for a later
    # session to say it again (or the model to confirm it), then it is dropped
    inbox_days: float = _setting(14, _number(0.01, 36_500.0))
    # deep: with ollama.enabled, waiting inbox candidates the model is asked about per run
    inbox_model_checks: int = _setting(20, _int(0, 10_000))
    # rem: related_to links from this cosine (embeddings) or this word overlap (none)
    auto_link_threshold: float = _setting(0.8, _number(0.0, 1.0))
    auto_link_overlap: float = _setting(0.5, _number(0.0, 1.0))
    max_links_per_memory: int = _setting(5, _int(0, 1000))
    # rem: procedures not confirmed (updated or recalled) for this long are flagged
    stale_procedure_days: float = _setting(90, _number(0.0, 36_500.0))
    # `install --service`: when the timer runs `llmem-hooks dream --apply`
    schedule: str = _setting("*-*-* 03:00:00", check_schedule)


@dataclass(frozen=True)
class ViewerSettings(Section):
    """``viewer:`` the local viewer (`llmem-hooks ui`) and the HTML report (docs/viewer.md)."""

    section: ClassVar[str] = "viewer"
    # memories listed in the page and the report (newest first; search reaches them all)
    list_limit: int = _setting(500, _int(1, 100_000))
    # the server stops by itself after this long without a request (0: only on Ctrl-C)
    idle_exit_minutes: float = _setting(120, _number(0.0, 10_080.0))


def check_dsn(value: Any) -> str | None:
    """The team hub's PostgreSQL DSN, null for none: a URI (``postgresql://role@host/db``) or
    ``key=value`` words, never with a password (that goes to a 0600 pgpass file). The value
    is never echoed: a refused one may hold the very password."""
    import re

    if value is None:
        return None
    if (
        not isinstance(value, str)
        or not value.strip()
        or len(value) > 1000
        or "\n" in value
        or "\r" in value
    ):
        raise ValueError("expected a PostgreSQL connection string (one line) or null")
    text = value.strip()
    if text.startswith(("postgresql://", "postgres://")):
        userinfo = text.split("://", 1)[1].split("/", 1)[0].rpartition("@")[0]
        if ":" in userinfo or re.search(r"[?&]password=", text, re.IGNORECASE):
            raise ValueError("the DSN holds a password: keep it in the pgpass file instead")
    elif "=" in text:
        if re.search(r"(^|\s)password\s*=", text, re.IGNORECASE):
            raise ValueError("the DSN holds a password: keep it in the pgpass file instead")
    else:
        raise ValueError("expected a PostgreSQL connection string: postgresql://role@host/db")
    return text


def check_share_types(value: Any) -> list[str]:
    """Memory types a project shares by default: names, never ``conversation`` (episodes
    stay on the machine whatever config.yaml says). A list, as YAML holds it; the typed
    `TeamSettings` holds a tuple."""
    import re

    if not isinstance(value, list | tuple) or len(value) > 100:
        raise ValueError(f"expected a list of memory types, got {_short(value)}")
    out: list[str] = []
    for item in value:
        if not isinstance(item, str) or not re.fullmatch(r"[a-z][a-z0-9_]{0,39}", item):
            raise ValueError(f"expected memory type names, got {_short(item)}")
        if item == "conversation":
            raise ValueError("conversation memories (episodes) are never shared")
        if item not in out:
            out.append(item)
    return out


@dataclass(frozen=True)
class TeamSettings(Section):
    """``team:`` the team hub (docs/team.md): off until ``llmem-hooks team join``."""

    section: ClassVar[str] = "team"
    # the hub's PostgreSQL DSN without a password (null: no team); the password is in pgpass
    hub: str | None = _setting(None, check_dsn)
    # the types an enrolled project shares from their insert on (episodes never are)
    share_types: tuple[str, ...] = _setting(
        ("decision", "procedure", "fact", "project_state"), check_share_types
    )
    # the sidecar pushes and pulls this often (and retries a down hub with back-off)
    interval_seconds: float = _setting(30, _number(1.0, 86_400.0))
    # changes per push, mutations per pull
    batch: int = _setting(200, _int(1, 10_000))


@dataclass(frozen=True)
class CitationSettings(Section):
    """``citations:`` checking memories' code citations and recall for the file in hand
    (docs/citations.md)."""

    section: ClassVar[str] = "citations"
    # the sidecar checks a project's citations when a session starts there, and the dream
    # cycle checks every project's; off: citations are kept and shown, never checked
    check: bool = _setting(True, _bool)
    # what one session start's check may take in all, and one citation at most (seconds)
    start_budget_seconds: float = _setting(2.0, _number(0.05, 600.0))
    per_citation_seconds: float = _setting(0.5, _number(0.01, 60.0))
    # stale memories are left out of the session-start context and per-prompt recall
    hide_stale: bool = _setting(True, _bool)
    # the dream cycle retires a memory stale this long (0: never)
    retire_stale_days: float = _setting(30, _number(0.0, 36_500.0))
    # what memory knows about a file the agent reads or edits, once per file per session
    file_recall: bool = _setting(True, _bool)


# Section name -> its settings class, in config.yaml's order.
SECTIONS: dict[str, type[Section]] = {
    kind.section: kind
    for kind in (
        MemorySettings,
        RetrievalSettings,
        ContextSettings,
        SessionSettings,
        OpenCodeSettings,
        CopilotSettings,
        OllamaSettings,
        BudgetSettings,
        EpisodeSettings,
        RecallSettings,
        DreamSettings,
        ViewerSettings,
        TeamSettings,
        CitationSettings,
    )
}


@dataclass(frozen=True)
class Config:
    """The whole configuration, typed: one settings object per config.yaml section."""

    memory: MemorySettings = field(default_factory=MemorySettings)
    retrieval: RetrievalSettings = field(default_factory=RetrievalSettings)
    context: ContextSettings = field(default_factory=ContextSettings)
    session: SessionSettings = field(default_factory=SessionSettings)
    opencode: OpenCodeSettings = field(default_factory=OpenCodeSettings)
    copilot: CopilotSettings = field(default_factory=CopilotSettings)
    ollama: OllamaSettings = field(default_factory=OllamaSettings)
    budget: BudgetSettings = field(default_factory=BudgetSettings)
    episodes: EpisodeSettings = field(default_factory=EpisodeSettings)
    recall: RecallSettings = field(default_factory=RecallSettings)
    dream: DreamSettings = field(default_factory=DreamSettings)
    viewer: ViewerSettings = field(default_factory=ViewerSettings)
    team: TeamSettings = field(default_factory=TeamSettings)
    citations: CitationSettings = field(default_factory=CitationSettings)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None) -> Config:
        """The typed form of a config dict (normally `load_config`'s, already validated);
        a missing section or key takes its default, unknown ones are ignored."""
        data = data or {}
        sections: dict[str, Any] = {
            name: kind.from_mapping(_mapping(data.get(name))) for name, kind in SECTIONS.items()
        }
        return cls(**sections)

    @classmethod
    def coerce(cls, config: Config | Mapping[str, Any] | None) -> Config:
        """``config`` if typed already, else `from_mapping` of it (None: the defaults)."""
        return config if isinstance(config, Config) else cls.from_mapping(config)

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """The dict form (`load_config`'s shape, what config.yaml holds)."""
        return {name: getattr(self, name).to_dict() for name in SECTIONS}


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def section_of(config: Config | Mapping[str, Any] | Section | None, kind: type[S]) -> S:
    """One section's typed settings out of ``config``: a `Config`, a config dict (as
    `load_config` returns it), None (the defaults), or, for the reference's callers of a
    single-section ``from_config``, the section itself (typed or as a mapping). A mapping
    counts as a whole config when any of its keys is a section name."""
    if isinstance(config, kind):
        return config
    if isinstance(config, Config):
        found: S = getattr(config, kind.section)
        return found
    if config is None:
        return kind()
    if not isinstance(config, Mapping):
        raise TypeError(f"expected a config or a {kind.section} section, got {type(config)}")
    if any(name in config for name in SECTIONS):
        return kind.from_mapping(_mapping(config.get(kind.section)))
    return kind.from_mapping(config)


# The dict forms, derived from the dataclasses above (each default and bound written once).
DEFAULT_CONFIG: dict[str, dict[str, Any]] = Config().to_dict()

VALIDATORS: dict[str, dict[str, Callable[[Any], Any]]] = {
    name: {f.name: f.metadata["check"] for f in dataclasses.fields(kind)}
    for name, kind in SECTIONS.items()
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


def load_settings(path: Path | None = None, create: bool = True) -> Config:
    """`load_config`, typed."""
    return Config.from_mapping(load_config(path, create))


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
