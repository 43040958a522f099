"""config.yaml: defaults written on first use, overrides, warnings, errors, and the CLI's use."""

from __future__ import annotations

import ast
import copy
import dataclasses
import json
import logging
import os
import sqlite3
import stat
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
import yaml

import llmem_hooks
from adapters.copilot import CopilotAdapter
from adapters.opencode import OpenCodeAdapter
from llmem_hooks import ConfigError, LLMemError, load_config, write_config_yaml
from llmem_hooks.cli import main
from llmem_hooks.config import (
    DEFAULT_CONFIG,
    SECTIONS,
    VALIDATORS,
    BudgetSettings,
    Config,
    MemorySettings,
    OllamaSettings,
    load_settings,
    section_of,
)
from llmem_hooks.model.budget import BudgetLimits
from llmem_hooks.model.embed import EmbeddingEngine
from llmem_hooks.model.ollama import OllamaClient
from llmem_hooks.store import MemoryStore

EXPECTED_DEFAULTS = {
    "memory": {
        "db_path": None,
        "default_confidence": 0.8,
        "inbox_capacity": 100,
        "vec_dimensions": 768,
        "duplicate_cosine": 0.92,
    },
    "retrieval": {
        "alpha": 0.3,
        "blend": 0.3,
        "fuzzy_threshold": 0.7,
        "limit": 10,
        "rrf_k_semantic": 10,
        "passage_chars": 1750,
    },
    "context": {"dir": None, "budget_tokens": 1500},
    "session": {
        "idle_debounce_seconds": 30,
        "end_after_minutes": 30,
        "context_retention_days": 7,
        "idle_quiet_seconds": 3,
        "poll_seconds": 5,
    },
    "opencode": {
        "enabled": True,
        "db_path": None,
        "autostart_sidecar": True,
        "plugin_wait_ms": 300,
        "plugin_recall": True,
        "plugin_recall_timeout_ms": 250,
        "plugin_tools": True,
        "plugin_tool_timeout_ms": 3000,
    },
    "copilot": {"enabled": True, "home": None, "autostart_sidecar": True},
    "ollama": {
        "enabled": True,
        "base_url": "http://localhost:11434",
        "allow_remote": False,
        "model": "llama3.2",
        "embed_model": "nomic-embed-text",
        "timeout_seconds": 30.0,
        "context_tokens": 4096,
    },
    "budget": {
        "session_tokens": 50_000,
        "session_seconds": 300.0,
        "day_tokens": 500_000,
        "day_seconds": 3600.0,
    },
    "episodes": {
        "enabled": True,
        "retention_days": 365,
        "max_count": 200_000,
        "backfill": True,
        "max_db_mb": 0,
    },
    "recall": {
        "enabled": True,
        "budget_tokens": 400,
        "max_results": 5,
        "min_content_words": 2,
        "rare_word_share": 0.01,
        "common_word_share": 0.1,
        "min_coverage": 0.5,
        "relative_floor": 0.75,
        "semantic_max_distance": 0.35,
        "entry_chars": 320,
    },
    "dream": {
        "enabled": True,
        "interval_hours": 24,
        "idle_minutes": 10,
        "similarity_threshold": 0.92,
        "merge_overlap": 0.8,
        "model_rewrite": False,
        "model_rewrite_max_groups": 50,
        "decay_rate": 0.1,
        "decay_interval_days": 30,
        "decay_floor": 0.3,
        "boost_threshold": 3,
        "boost_amount": 0.05,
        "consolidate_min_score": 0.5,
        "inbox_days": 14,
        "inbox_model_checks": 20,
        "auto_link_threshold": 0.8,
        "auto_link_overlap": 0.5,
        "max_links_per_memory": 5,
        "stale_procedure_days": 90,
        "schedule": "*-*-* 03:00:00",
    },
    "viewer": {"list_limit": 500, "idle_exit_minutes": 120},
    "team": {
        "hub": None,
        "share_types": ["decision", "procedure", "fact", "project_state"],
        "interval_seconds": 30,
        "batch": 200,
    },
    "citations": {
        "check": True,
        "start_budget_seconds": 2.0,
        "per_citation_seconds": 0.5,
        "hide_stale": True,
        "retire_stale_days": 30,
        "file_recall": True,
    },
}


@pytest.fixture
def config_path(llmem_home: Path) -> Path:
    return llmem_home / "config.yaml"


def write_config(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def memory_count(db: Path) -> int:
    if not db.exists():
        return 0
    conn = sqlite3.connect(db)
    try:
        has_table = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'memories'"
        ).fetchone()
        return conn.execute("SELECT count(*) FROM memories").fetchone()[0] if has_table else 0
    finally:
        conn.close()


def run(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


# -- loading --------------------------------------------------------------------------------
def test_defaults_match_the_documentation() -> None:
    assert DEFAULT_CONFIG == EXPECTED_DEFAULTS


def test_first_use_writes_the_defaults_privately(
    llmem_home: Path, config_path: Path, permissive_umask: None
) -> None:
    assert not llmem_home.exists()
    config = load_config()
    assert config == EXPECTED_DEFAULTS
    assert mode(llmem_home) == 0o700
    assert mode(config_path) == 0o600
    text = config_path.read_text(encoding="utf-8")
    assert text.startswith("#")  # a comment pointing at the docs
    assert yaml.safe_load(text) == EXPECTED_DEFAULTS
    assert load_config() == EXPECTED_DEFAULTS  # read back from the file just written
    assert config_path.read_text(encoding="utf-8") == text  # not rewritten


def test_first_use_tightens_an_existing_home(
    llmem_home: Path, config_path: Path, permissive_umask: None
) -> None:
    llmem_home.mkdir(mode=0o755)
    os.chmod(llmem_home, 0o755)
    load_config()
    assert mode(llmem_home) == 0o700
    assert mode(config_path) == 0o600


def test_load_returns_a_copy(config_path: Path) -> None:
    first = load_config()
    first["retrieval"]["limit"] = 99
    assert load_config()["retrieval"]["limit"] == 10
    assert DEFAULT_CONFIG["retrieval"]["limit"] == 10


def test_no_file_without_create(config_path: Path) -> None:
    assert load_config(create=False) == EXPECTED_DEFAULTS
    assert not config_path.exists()


def test_explicit_path(tmp_path: Path, config_path: Path) -> None:
    other = tmp_path / "elsewhere" / "cfg.yaml"
    write_config(other, "retrieval:\n  limit: 4\n")
    assert load_config(other)["retrieval"]["limit"] == 4
    assert not config_path.exists()


def test_user_value_overrides_one_default(config_path: Path) -> None:
    text = "retrieval:\n  limit: 3\nmemory:\n  db_path: ~/somewhere/mem.db\n"
    write_config(config_path, text)
    config = load_config()
    assert config["retrieval"]["limit"] == 3
    # Paths come back absolute (~ expanded; relative ones against LLMEM_HOME).
    assert config["memory"]["db_path"] == str(Path.home() / "somewhere" / "mem.db")
    expected = copy.deepcopy(EXPECTED_DEFAULTS)
    expected["retrieval"]["limit"] = 3
    expected["memory"]["db_path"] = str(Path.home() / "somewhere" / "mem.db")
    assert config == expected  # every other key keeps its default
    assert config_path.read_text(encoding="utf-8") == text  # the user's file is left alone


@pytest.mark.parametrize(
    "text",
    ["", "# only a comment\n", "retrieval:\n", "retrieval: {}\nsession:\n"],
    ids=["empty", "comment", "null section", "empty sections"],
)
def test_empty_file_or_sections_mean_defaults(config_path: Path, text: str) -> None:
    write_config(config_path, text)
    assert load_config() == EXPECTED_DEFAULTS


def test_unknown_keys_warn_and_are_ignored(
    config_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_config(config_path, "retrieval:\n  limitt: 3\n  limit: 4\nretreival:\n  alpha: 0.1\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # reported through logging, not warnings.warn
        with caplog.at_level(logging.WARNING, logger="llmem_hooks.config"):
            config = load_config()
    assert config["retrieval"]["limit"] == 4
    assert config["retrieval"]["alpha"] == 0.3
    assert "limitt" not in config["retrieval"] and "retreival" not in config
    messages = [r.getMessage() for r in caplog.records if r.name == "llmem_hooks.config"]
    assert all(r.levelno == logging.WARNING for r in caplog.records)
    assert any("retrieval.limitt" in m for m in messages), messages
    assert any("retreival" in m for m in messages), messages
    assert len(messages) == 2


BAD_VALUES = [
    ("retrieval", "limit", -1),
    ("retrieval", "limit", 0),
    ("retrieval", "limit", "ten"),
    ("retrieval", "limit", 2.5),
    ("retrieval", "limit", True),
    ("retrieval", "limit", None),
    ("retrieval", "alpha", 2),
    ("retrieval", "blend", -0.1),
    ("retrieval", "fuzzy_threshold", "high"),
    ("memory", "default_confidence", 1.5),
    ("memory", "inbox_capacity", 0),
    ("memory", "db_path", 5),
    ("memory", "db_path", "  "),
    ("context", "budget_tokens", 10),
    ("context", "dir", ["a", "b"]),
    ("session", "end_after_minutes", -5),
    ("session", "idle_debounce_seconds", "30s"),
    ("session", "context_retention_days", False),
]


@pytest.mark.parametrize(
    ("section", "key", "value"),
    BAD_VALUES,
    ids=[f"{s}.{k}={v!r}" for s, k, v in BAD_VALUES],
)
def test_bad_value_is_a_config_error_naming_the_key(
    config_path: Path, section: str, key: str, value: Any
) -> None:
    write_config(config_path, yaml.safe_dump({section: {key: value}}))
    with pytest.raises(ConfigError) as info:
        load_config()
    assert f"{section}.{key}" in str(info.value)
    assert repr(value) in str(info.value)  # and shows what was given
    assert isinstance(info.value, LLMemError)


def test_documented_error_message(config_path: Path) -> None:
    write_config(config_path, "retrieval:\n  alpha: 2\n")
    with pytest.raises(ConfigError) as info:
        load_config()
    assert str(info.value) == (
        "config.yaml: invalid value for retrieval.alpha: must be a finite number between 0 and 1,"
        " got 2"
    )


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("retrieval: 5\n", "retrieval"),
        ("memory: [a, b]\n", "memory"),
        ("- retrieval\n- memory\n", "mapping"),
        ("just a string\n", "mapping"),
    ],
)
def test_wrong_shape_is_a_config_error(config_path: Path, text: str, named: str) -> None:
    write_config(config_path, text)
    with pytest.raises(ConfigError, match=named):
        load_config()


@pytest.mark.parametrize(
    "text",
    ["retrieval:\n  limit: [1\n", "retrieval:\n  limit: 3\n alpha: 0.5\n", "a: b: c\n", "\t- x\n"],
)
def test_malformed_yaml_is_a_config_error(config_path: Path, text: str) -> None:
    write_config(config_path, text)
    with pytest.raises(ConfigError) as info:
        load_config()
    assert "config.yaml" in str(info.value)
    assert str(config_path) in str(info.value)
    assert config_path.read_text(encoding="utf-8") == text  # not replaced by the defaults


def test_write_config_yaml_keeps_an_existing_file(config_path: Path) -> None:
    write_config(config_path, "retrieval:\n  limit: 3\n")
    assert write_config_yaml(config_path, DEFAULT_CONFIG) is False
    assert load_config()["retrieval"]["limit"] == 3
    assert write_config_yaml(config_path, DEFAULT_CONFIG, force=True) is True
    assert load_config() == EXPECTED_DEFAULTS


# -- the CLI --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args",
    [
        ["store", "a memory that must not be stored"],
        ["search", "anything"],
        ["list"],
        ["stats"],
    ],
)
def test_cli_with_a_bad_config_value_exits_2(
    capsys: pytest.CaptureFixture[str], config_path: Path, llmem_home: Path, args: list[str]
) -> None:
    write_config(config_path, "retrieval:\n  limit: -1\n")
    code, out, err = run(capsys, *args)
    assert code == 2
    assert out == ""
    (line,) = err.splitlines()
    assert line.startswith("error: ")
    assert "retrieval.limit" in line
    assert memory_count(llmem_home / "memory.db") == 0


def test_cli_with_malformed_yaml_prints_one_error_line(
    capsys: pytest.CaptureFixture[str], config_path: Path, llmem_home: Path
) -> None:
    write_config(config_path, "retrieval:\n  limit: [1\n")
    code, out, err = run(capsys, "store", "a memory that must not be stored")
    assert code == 2
    assert memory_count(llmem_home / "memory.db") == 0
    assert out == ""
    (line,) = err.splitlines()
    assert line.startswith("error: config.yaml")


def test_cli_with_malformed_yaml_exits_2_and_stores_nothing(
    capsys: pytest.CaptureFixture[str], config_path: Path, llmem_home: Path
) -> None:
    write_config(config_path, "retrieval:\n  limit: [1\n")
    code, out, err = run(capsys, "store", "a memory that must not be stored")
    assert code == 2
    assert out == ""
    assert err.startswith("error: config.yaml: invalid YAML ")
    assert memory_count(llmem_home / "memory.db") == 0


def test_cli_creates_the_config_on_first_use(
    capsys: pytest.CaptureFixture[str], config_path: Path
) -> None:
    assert not config_path.exists()
    code, _, _ = run(capsys, "list")  # a read creates nothing (tests/cli/test_cli_reads.py)
    assert code == 1 and not config_path.exists()
    code, _, _ = run(capsys, "store", "the first memory")
    assert code == 0
    assert yaml.safe_load(config_path.read_text(encoding="utf-8")) == EXPECTED_DEFAULTS


def test_cli_unknown_key_warns_but_runs(
    capsys: pytest.CaptureFixture[str], config_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_config(config_path, "retrieval:\n  limitt: 3\n")
    with caplog.at_level(logging.WARNING, logger="llmem_hooks.config"):
        code, out, _ = run(capsys, "store", "still stored")
    assert code == 0 and out.strip()
    assert any("retrieval.limitt" in r.getMessage() for r in caplog.records)


def test_cli_unknown_key_warning_in_a_real_process(llmem_home: Path, config_path: Path) -> None:
    write_config(config_path, "retrieval:\n  limitt: 3\n")
    env = {k: v for k, v in os.environ.items() if k != "LLMEM_DB"}
    env["LLMEM_HOME"] = str(llmem_home)
    proc = subprocess.run(
        [sys.executable, "-m", "llmem_hooks.cli", "store", "stored despite the typo"],
        env=env,
        cwd=llmem_home,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "WARNING: config.yaml: unknown key retrieval.limitt ignored\n"
    assert memory_count(llmem_home / "memory.db") == 1


def _import_notes(capsys: pytest.CaptureFixture[str], tmp_path: Path, n: int) -> None:
    src = tmp_path / "notes.json"
    src.write_text(
        json.dumps(
            [{"id": f"n{i:02d}", "type": "fact", "content": f"caching note {i}"} for i in range(n)]
        ),
        encoding="utf-8",
    )
    assert run(capsys, "import", src)[0] == 0


def test_search_limit_comes_from_config(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, config_path: Path
) -> None:
    _import_notes(capsys, tmp_path, 14)

    def hits(*args: str) -> int:
        code, out, err = run(capsys, "search", "caching", "--json", *args)
        assert code == 0, err
        return len(json.loads(out))

    assert hits() == 10  # the default retrieval.limit
    write_config(config_path, "retrieval:\n  limit: 3\n")
    assert hits() == 3
    assert hits("--limit", "5") == 5  # the option wins over the config
    assert hits("-n", "12") == 12
    write_config(config_path, "retrieval:\n  limit: 13\n")
    assert hits() == 13


def test_config_fuzzy_threshold_and_default_confidence(
    capsys: pytest.CaptureFixture[str], config_path: Path
) -> None:
    write_config(
        config_path, "retrieval:\n  fuzzy_threshold: 0.9\nmemory:\n  default_confidence: 0.6\n"
    )
    code, out, _ = run(capsys, "store", "we deploy with docker compose")
    assert code == 0
    mid = out.strip()
    _, shown, _ = run(capsys, "show", mid, "--json")
    assert json.loads(shown)["confidence"] == 0.6

    # similarity(dokcer, docker) = 0.83: below the configured 0.9, above an explicit 0.8
    _, out, _ = run(capsys, "search", "dokcer", "--json")
    assert json.loads(out) == []
    _, out, _ = run(capsys, "search", "dokcer", "--json", "--threshold", "0.8")
    assert [m["id"] for m in json.loads(out)] == [mid]


def test_config_db_path_and_its_overrides(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    llmem_home: Path,
    config_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    configured = tmp_path / "configured" / "mem.db"
    write_config(config_path, f"memory:\n  db_path: {configured}\n")
    assert run(capsys, "store", "goes to the configured database")[0] == 0
    assert memory_count(configured) == 1
    assert memory_count(llmem_home / "memory.db") == 0

    flag = tmp_path / "flag.db"
    assert run(capsys, "--db", flag, "store", "goes to the --db database")[0] == 0
    assert memory_count(flag) == 1

    env_db = tmp_path / "env.db"
    monkeypatch.setenv("LLMEM_DB", str(env_db))
    assert run(capsys, "store", "goes to the LLMEM_DB database")[0] == 0
    assert memory_count(env_db) == 1
    assert memory_count(configured) == 1


# -- typed settings ---------------------------------------------------------------------------
def test_the_dict_defaults_and_checks_are_derived_from_the_typed_settings() -> None:
    assert Config().to_dict() == DEFAULT_CONFIG
    assert [f.name for f in dataclasses.fields(Config)] == list(SECTIONS) == list(DEFAULT_CONFIG)
    for name, kind in SECTIONS.items():
        assert kind.section == name
        assert type(getattr(Config(), name)) is kind
        assert list(VALIDATORS[name]) == list(DEFAULT_CONFIG[name])
        for key, check in VALIDATORS[name].items():  # every default passes its own check
            assert check(DEFAULT_CONFIG[name][key]) == DEFAULT_CONFIG[name][key], (name, key)


def test_settings_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        Config().ollama.model = "other"  # type: ignore[misc]


def test_load_settings_is_load_config_typed(config_path: Path) -> None:
    write_config(
        config_path, "ollama:\n  model: qwen3\n  timeout_seconds: 5\nsession:\n  poll_seconds: 1\n"
    )
    settings = load_settings()
    assert settings.ollama.model == "qwen3"
    assert settings.ollama.timeout_seconds == 5.0
    assert isinstance(settings.ollama.timeout_seconds, float)
    assert settings.session.poll_seconds == 1
    assert settings.memory == MemorySettings()
    assert settings.to_dict() == load_config()


def test_from_mapping_fills_in_defaults_and_ignores_unknown_keys() -> None:
    cfg = Config.from_mapping({"ollama": {"model": "m", "nope": 1}, "budget": None, "extra": {}})
    assert cfg.ollama == dataclasses.replace(OllamaSettings(), model="m")
    assert cfg.budget == BudgetSettings()
    assert Config.from_mapping(None) == Config() == Config.coerce(None)
    assert Config.coerce(cfg) is cfg


def test_section_of_takes_the_whole_config_or_the_section_alone() -> None:
    whole = copy.deepcopy(DEFAULT_CONFIG)
    whole["budget"]["day_tokens"] = 7
    typed = Config.from_mapping(whole)
    for given in (whole, typed, {"day_tokens": 7}, typed.budget):
        assert section_of(given, BudgetSettings).day_tokens == 7
    assert section_of({"ollama": {}}, BudgetSettings) == BudgetSettings()  # no budget: defaults
    assert section_of(None, BudgetSettings) == BudgetSettings()
    with pytest.raises(TypeError):
        section_of(3, BudgetSettings)  # type: ignore[arg-type]


def test_every_from_config_takes_the_whole_config_typed_or_not(tmp_path: Path) -> None:
    """The one rule (config.py's docstring): ``X.from_config(config)`` gets the whole
    config, a `Config` or the dict, and reads its own sections."""
    whole = copy.deepcopy(DEFAULT_CONFIG)
    whole["ollama"].update(base_url="http://127.0.0.1:9", timeout_seconds=4.0, embed_model="e")
    whole["memory"].update(
        db_path=str(tmp_path / "m.db"), vec_dimensions=384, inbox_capacity=5, default_confidence=0.5
    )
    whole["budget"]["day_tokens"] = 9
    whole["opencode"]["db_path"] = str(tmp_path / "oc.db")
    whole["copilot"]["home"] = str(tmp_path / "copilot")
    for config in (whole, Config.from_mapping(whole)):
        with OllamaClient.from_config(config) as client:
            assert (client.base_url, client.timeout) == ("http://127.0.0.1:9", 4.0)
        with EmbeddingEngine.from_config(config) as engine:
            assert (engine.model, engine.dimensions) == ("e", 384)
        assert BudgetLimits.from_config(config).day_tokens == 9
        assert OpenCodeAdapter.from_config(config).db_path == tmp_path / "oc.db"
        assert CopilotAdapter.from_config(config).home == tmp_path / "copilot"
        store = MemoryStore.from_config(config)
        try:
            assert store.db_path == tmp_path / "m.db"
            assert (store.inbox_capacity, store.default_confidence) == (5, 0.5)
        finally:
            store.close()


def test_no_string_default_is_restated_outside_config() -> None:
    """A default lives on its settings field; other modules read it from there."""
    root = Path(llmem_hooks.__file__).parent
    defaults = {
        v
        for section in DEFAULT_CONFIG.values()
        for v in section.values()
        if not isinstance(v, list)
    }
    strings = {v for v in defaults if isinstance(v, str)}
    assert {"llama3.2", "nomic-embed-text", "http://localhost:11434"} <= strings
    offenders = []
    for path in [*root.rglob("*.py"), *(root.parent / "adapters").rglob("*.py")]:
        if path == root / "config.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value in strings:
                offenders.append(f"{path.name}:{node.lineno}: {node.value!r}")
    assert offenders == []
