"""The llmem-hooks command line: every command's success path and its bad-input paths.

Most tests call `llmem_hooks.cli.main([...])` in-process (it returns the exit code and
never raises SystemExit) with capsys; a few run the real `python -m llmem_hooks.cli` and
`llmem-hooks` entry point in a subprocess. Every test gets its own LLMEM_HOME (conftest)
and real SQLite files, inspected afterwards with the stdlib sqlite3 module.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import sqlite3
import stat
import subprocess
import sys
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import sqlean  # type: ignore[import-untyped]

import llmem_hooks
from llmem_hooks.cli import main

ROOT = Path(__file__).resolve().parents[2]
AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
GITHUB_TOKEN = "ghp_" + "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dF3hJ5"


@dataclass
class Run:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)

    def ids(self) -> list[str]:
        return [m["id"] for m in self.json()]


CLI = Callable[..., Run]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> CLI:
    """Run `llmem-hooks ARGS...` in-process; returns exit code, stdout and stderr."""

    def run(*args: object) -> Run:
        capsys.readouterr()
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return Run(code, out, err)

    return run


@pytest.fixture
def db(llmem_home: Path) -> Path:
    """The database the CLI uses when neither --db, LLMEM_DB nor config name one."""
    return llmem_home / "memory.db"


def rows(path: Path) -> list[tuple[Any, ...]]:
    """The memories in a database file, read with the stdlib driver ([] if none yet)."""
    if not path.exists():
        return []
    conn = sqlite3.connect(path)
    try:
        if not conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'memories'"
        ).fetchone():
            return []
        return conn.execute(
            "SELECT id, type, content, tag_text, valid_until, expires_at FROM memories ORDER BY seq"
        ).fetchall()
    finally:
        conn.close()


def row_ids(path: Path) -> list[str]:
    return [r[0] for r in rows(path)]


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def stored(cli: CLI, *args: object) -> str:
    """Run `store ARGS` and return the new id."""
    r = cli("store", *args)
    assert r.code == 0, r.err
    mid = r.out.strip()
    assert len(mid) == 36 and mid.count("-") == 4, r.out
    return mid


def show(cli: CLI, mid: str, *extra: object) -> dict[str, Any]:
    r = cli("show", mid, "--json", *extra)
    assert r.code == 0, r.err
    return r.json()


def assert_bad_input(r: Run) -> None:
    """Exit 2, nothing on stdout, exactly one line on stderr starting with 'error:'."""
    assert r.code == 2, (r.out, r.err)
    assert r.out == ""
    lines = r.err.splitlines()
    assert len(lines) == 1, r.err
    assert lines[0].startswith("error: ")


def export_doc(memories: list[dict[str, Any]], version: Any = 1) -> str:
    return json.dumps(
        {
            "format": "llmem-hooks-export",
            "version": version,
            "exported_at": "2026-01-01T00:00:00Z",
            "count": len(memories),
            "memories": memories,
        }
    )


# Memories with fixed creation dates, loaded with `import` (store always uses "now").
CORPUS = [
    {
        "id": "mem-api",
        "type": "procedure",
        "content": "deploy the api with docker compose",
        "tags": ["docker", "infra"],
        "entered_by": "alice",
        "created_at": "2024-01-10T12:00:00Z",
    },
    {
        "id": "mem-worker",
        "type": "fact",
        "content": "deploy the worker with docker swarm",
        "tags": ["docker"],
        "entered_by": "bob",
        "created_at": "2025-06-01T12:00:00Z",
    },
    {
        "id": "mem-docs",
        "type": "decision",
        "content": "deploy the docs site with netlify",
        "tags": ["web"],
        "entered_by": "alice",
        "project": "site",
        "created_at": "2025-09-01T12:00:00Z",
    },
]


@pytest.fixture
def corpus(cli: CLI, tmp_path: Path, db: Path) -> Path:
    src = tmp_path / "corpus.json"
    src.write_text(export_doc(CORPUS), encoding="utf-8")
    r = cli("import", src)
    assert r.code == 0, r.err
    assert row_ids(db) == [m["id"] for m in CORPUS]
    return db


# -- store and search ---------------------------------------------------------------------
def test_store_then_search_in_every_output_format(cli: CLI, db: Path) -> None:
    mid = stored(cli, "We deploy the api with docker compose", "--tags", "infra,docker")
    assert row_ids(db) == [mid]

    plain = cli("search", "docker")
    assert plain.code == 0 and plain.err == ""
    (line,) = plain.out.splitlines()
    assert line.startswith(mid[:8]) and "fact" in line
    assert "We deploy the api with docker compose" in line and "[infra, docker]" in line

    as_json = cli("search", "docker", "--json")
    assert as_json.code == 0
    (hit,) = as_json.json()
    assert hit["id"] == mid
    assert hit["content"] == "We deploy the api with docker compose"
    assert hit["type"] == "fact"
    assert hit["tags"] == ["infra", "docker"]
    assert hit["match"] == "fts" and hit["score"] > 0
    assert not any(k.startswith("_") for k in hit)

    assert cli("--json", "search", "docker").ids() == [mid]  # global --json works too

    md = cli("search", "docker", "--markdown")
    assert md.code == 0
    assert md.out.splitlines() == [
        f"- **fact** `{mid[:8]}`: We deploy the api with docker compose _(tags: infra, docker)_"
    ]


def test_search_without_hits(cli: CLI) -> None:
    stored(cli, "redis runs on port 6380")
    r = cli("search", "postgres")
    assert (r.code, r.out, r.err) == (0, "", "No memories found.\n")
    r = cli("search", "postgres", "--json")
    assert r.code == 0 and r.json() == []


def test_store_json_output_and_exact_duplicates(cli: CLI, db: Path) -> None:
    r = cli("store", "Tests run with pytest -q", "--json")
    assert r.code == 0
    mid = r.json()["id"]
    # Same text up to case and spacing: the existing id comes back, nothing new is stored.
    assert stored(cli, "tests  RUN with pytest -q", "--tags", "ci") == mid
    assert row_ids(db) == [mid]
    assert show(cli, mid)["tags"] == ["ci"]


def test_store_with_every_option(cli: CLI) -> None:
    mid = stored(
        cli,
        "Use helm for the staging cluster",
        "--type",
        "decision",
        "--tags",
        "Infra, k8s,infra",
        "--expires",
        "2099-12-31",
        "--entered-by",
        "opencode",
        "--project",
        "github.com/acme/api",
        "--confidence",
        "0.95",
    )
    mem = show(cli, mid)
    assert mem["id"] == mid
    assert mem["content"] == "Use helm for the staging cluster"
    assert mem["type"] == "decision"
    assert mem["tags"] == ["infra", "k8s"]
    assert mem["expires_at"] == "2099-12-31T00:00:00.000000+00:00"
    assert mem["entered_by"] == "opencode"
    assert mem["project"] == "github.com/acme/api"
    assert mem["confidence"] == 0.95
    assert mem["source"] == "cli"
    assert mem["relations"] == []


def test_store_defaults(cli: CLI) -> None:
    mem = show(cli, stored(cli, "the linter is ruff"))
    assert mem["type"] == "fact"
    assert mem["entered_by"] == "user"
    assert mem["project"] is None
    assert mem["expires_at"] is None
    assert mem["confidence"] == 0.8
    assert mem["tags"] == []


def test_store_from_file_and_stdin(
    cli: CLI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = "Release checklist:\n1. bump the version\n2. tag vX.Y.Z\n"
    src = tmp_path / "note.md"
    src.write_text(text, encoding="utf-8")
    mid = stored(cli, "--file", src, "--type", "procedure")
    mem = show(cli, mid)
    assert mem["content"] == text and mem["type"] == "procedure"
    assert cli("search", "checklist", "--json").ids() == [mid]

    monkeypatch.setattr(sys, "stdin", io.StringIO("piped from stdin: use uv for installs"))
    mid2 = stored(cli, "--file", "-")
    assert show(cli, mid2)["content"] == "piped from stdin: use uv for installs"


def test_content_of_exactly_10000_characters_is_accepted(cli: CLI, db: Path) -> None:
    text = ("abcdefghi " * 1000)[:-1] + "j"
    assert len(text) == 10_000
    mid = stored(cli, text)
    assert rows(db)[0][2] == text
    assert show(cli, mid)["content"] == text


# -- search filters -----------------------------------------------------------------------
def test_search_filters(cli: CLI, corpus: Path) -> None:
    def found(*args: str) -> set[str]:
        r = cli("search", "deploy", "--json", *args)
        assert r.code == 0, r.err
        return set(r.ids())

    assert found() == {"mem-api", "mem-worker", "mem-docs"}
    assert found("--tags", "docker,infra") == {"mem-api"}
    assert found("--tags", "docker") == {"mem-api", "mem-worker"}
    assert found("--any-tag", "infra,web") == {"mem-api", "mem-docs"}
    assert found("--after", "2025-01-01") == {"mem-worker", "mem-docs"}
    assert found("--before", "2025-01-01") == {"mem-api"}
    assert found("--after", "2025-01-01", "--before", "2025-07-01T00:00:00Z") == {"mem-worker"}
    assert found("--after", "2030-01-01") == set()
    assert found("--entered-by", "alice") == {"mem-api", "mem-docs"}
    assert found("--entered-by", "bob") == {"mem-worker"}
    assert found("--type", "decision") == {"mem-docs"}
    assert found("-t", "procedure") == {"mem-api"}
    assert found("--project", "other") == {"mem-api", "mem-worker"}  # plus global ones
    assert found("--project", "site") == {"mem-api", "mem-worker", "mem-docs"}
    assert found("--type", "fact", "--entered-by", "alice") == set()


def test_search_hands_the_retriever_one_filter_object(
    cli: CLI, corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI's filter options become one MemoryFilter, given to `Retriever.find` as is
    (the filter is spelled once, in `llmem_hooks.store.records`)."""
    from llmem_hooks.search.retriever import Retriever
    from llmem_hooks.store import MemoryFilter

    seen: list[MemoryFilter | None] = []
    real = Retriever.find

    def spy(self: Retriever, query: str, filter: MemoryFilter | None = None, **kw: Any) -> Any:
        seen.append(filter)
        return real(self, query, filter, **kw)

    monkeypatch.setattr(Retriever, "find", spy)
    r = cli(
        "search",
        "deploy",
        "--json",
        "--tags",
        "docker",
        "--any-tag",
        "infra,web",
        "--entered-by",
        "alice",
        "-t",
        "procedure",
        "--project",
        "other",
    )
    assert r.code == 0 and r.ids() == ["mem-api"], r.err
    (flt,) = seen
    assert flt == MemoryFilter(
        type="procedure",
        tags_all="docker",
        tags_any="infra,web",
        entered_by="alice",
        project="other",
    )


def test_search_json_is_the_memory_plus_score_and_match(cli: CLI, corpus: Path) -> None:
    """``search --json``: exactly the Memory record's fields, then time, score and match,
    and the project's readable name (issue 20)."""
    from llmem_hooks.store import Memory

    hits = cli("search", "deploy", "--json").json()
    assert hits and all(
        list(h) == [*Memory.__annotations__, "time", "score", "match", "project_name"] for h in hits
    )


def test_the_cli_package_layout() -> None:
    """Entry point, commands and output in their own modules, none over 900 lines; the
    render module formats only (no store, no config)."""
    import llmem_hooks.cli as cli
    from llmem_hooks.cli import app, render

    assert cli.app is app and cli.render is render and callable(app.app)
    folder = ROOT / "llmem_hooks" / "cli"
    for module in folder.glob("*.py"):
        assert len(module.read_text().splitlines()) <= 900, module
    text = (folder / "render.py").read_text()
    assert "open_store" not in text and "load_config" not in text and "MemoryStore" not in text


def test_search_limit_and_offset(cli: CLI, corpus: Path) -> None:
    def count(*args: str) -> int:
        r = cli("search", "deploy", "--json", *args)
        assert r.code == 0, r.err
        return len(r.json())

    assert count() == 3
    assert count("--limit", "2") == 2
    assert count("-n", "1") == 1
    assert count("--offset", "1") == 2
    assert count("--offset", "2", "--limit", "5") == 1
    assert count("--offset", "3") == 0
    everything = set(cli("search", "deploy", "--json").ids())
    assert set(cli("search", "deploy", "--json", "--offset", "1").ids()) < everything


def test_search_fuzzy_and_threshold(cli: CLI) -> None:
    mid = stored(cli, "we deploy with docker compose")

    def found(*args: str) -> list[str]:
        r = cli("search", "dokcer", "--json", *args)
        assert r.code == 0, r.err
        return r.ids()

    assert found() == [mid]  # default: fuzzy when fewer than 5 exact hits
    assert found("--fuzzy") == [mid]
    assert cli("search", "dokcer", "--json", "--fuzzy").json()[0]["match"] == "fuzzy"
    assert found("--no-fuzzy") == []
    # similarity(dokcer, docker) = 1 - 1/6 = 0.83
    assert found("--threshold", "0.8") == [mid]
    assert found("--threshold", "0.9") == []
    assert found("--fuzzy", "--threshold", "0.9") == []


# -- list -----------------------------------------------------------------------------------
def test_list_sort_order_limit_offset(cli: CLI, tmp_path: Path) -> None:
    memories = [
        {"id": "m1", "type": "fact", "content": "charlie", "created_at": "2025-01-01T00:00:00Z"},
        {"id": "m2", "type": "event", "content": "alpha", "created_at": "2025-02-01T00:00:00Z"},
        {"id": "m3", "type": "decision", "content": "bravo", "created_at": "2025-03-01T00:00:00Z"},
    ]
    src = tmp_path / "list.json"
    src.write_text(export_doc(memories), encoding="utf-8")
    assert cli("import", src).code == 0

    def listed(*args: str) -> list[str]:
        r = cli("list", "--json", *args)
        assert r.code == 0, r.err
        return r.ids()

    assert listed() == ["m3", "m2", "m1"]  # newest first
    assert listed("--order", "asc") == ["m1", "m2", "m3"]
    assert listed("--sort", "content", "--order", "asc") == ["m2", "m3", "m1"]
    assert listed("--sort", "content", "--order", "desc") == ["m1", "m3", "m2"]
    assert listed("--sort", "type", "--order", "asc") == ["m3", "m2", "m1"]
    assert listed("--limit", "2") == ["m3", "m2"]
    assert listed("-n", "1", "--offset", "1") == ["m2"]
    assert listed("--offset", "2") == ["m1"]
    assert listed("--offset", "3") == []
    assert listed("--type", "event") == ["m2"]

    plain = cli("list", "--sort", "content", "--order", "asc")
    assert plain.code == 0
    assert [line.split()[0] for line in plain.out.splitlines()] == ["m2", "m3", "m1"]


def test_list_empty(cli: CLI, db: Path) -> None:
    from llmem_hooks.store import MemoryStore

    MemoryStore(db).close()  # an empty database (a missing one is an error: test_cli_reads)
    r = cli("list")
    assert (r.code, r.out, r.err) == (0, "", "No memories.\n")


# -- show -----------------------------------------------------------------------------------
def test_show_by_id_and_unique_prefix(cli: CLI) -> None:
    mid = stored(cli, "CI runs on GitHub Actions", "--tags", "ci")
    plain = cli("show", mid)
    assert plain.code == 0 and plain.err == ""
    lines = plain.out.splitlines()
    assert lines[0].split() == ["id:", mid]
    assert "type:                fact" in lines
    assert "tags:                ci" in lines
    assert lines[-1] == "CI runs on GitHub Actions"

    assert show(cli, mid[:8])["id"] == mid
    assert show(cli, mid[:4])["id"] == mid

    md = cli("show", mid, "--markdown")
    assert md.code == 0
    assert md.out.startswith(f"### fact `{mid}`\n\nCI runs on GitHub Actions\n")
    assert "- **tags**: ci" in md.out


def test_show_ambiguous_or_short_prefix(cli: CLI, tmp_path: Path, db: Path) -> None:
    src = tmp_path / "prefix.json"
    src.write_text(
        export_doc(
            [
                {"id": "abcd-one", "type": "fact", "content": "first"},
                {"id": "abcd-two", "type": "fact", "content": "second"},
            ]
        ),
        encoding="utf-8",
    )
    assert cli("import", src).code == 0
    assert show(cli, "abcd-o")["content"] == "first"
    r = cli("show", "abcd")
    assert_bad_input(r)
    assert "ambiguous" in r.err
    assert_bad_input(cli("show", "abc"))  # prefixes need >= 4 characters
    assert row_ids(db) == ["abcd-one", "abcd-two"]


# -- forget ---------------------------------------------------------------------------------
def test_forget_with_reason(cli: CLI, db: Path) -> None:
    keep = stored(cli, "the cache is redis")
    gone = stored(cli, "the queue is rabbitmq on the cache host")
    assert set(cli("search", "cache", "--json").ids()) == {keep, gone}

    r = cli("forget", gone[:8], "--reason", "moved to nats")
    assert (r.code, r.out, r.err) == (0, f"forgot {gone}\n", "")
    assert cli("search", "cache", "--json").ids() == [keep]
    assert cli("search", "rabbitmq", "--json").ids() == []
    assert cli("list", "--json").ids() == [keep]
    assert set(cli("list", "--all", "--json").ids()) == {keep, gone}

    mem = show(cli, gone)  # kept for history
    assert mem["invalidation_reason"] == "moved to nats"
    assert mem["valid_until"] is not None
    assert len(rows(db)) == 2

    before = rows(db)
    r = cli("forget", gone, "--reason", "again")
    assert_bad_input(r)
    assert "already forgotten" in r.err
    assert rows(db) == before


# -- prune ----------------------------------------------------------------------------------
def test_prune_dry_run_then_prune_expired(cli: CLI, db: Path) -> None:
    keep = stored(cli, "keep this note about redis")
    old = stored(cli, "temporary note about the release freeze", "--expires", "2000-01-01")
    assert cli("search", "note", "--json").ids() == [keep]  # expired is not returned
    before = rows(db)

    dry = cli("prune", "--dry-run")
    assert dry.code == 0
    assert dry.out.startswith(old[:8]) and keep[:8] not in dry.out
    assert dry.err == "would delete 1 memory\n"
    assert rows(db) == before

    dry_json = cli("prune", "--dry-run", "--json")
    assert dry_json.json() == {"dry_run": True, "count": 1, "ids": [old]}
    assert rows(db) == before

    r = cli("prune", "--yes")
    assert r.code == 0
    assert r.err.startswith("deleted 1 memory; backup: ")
    assert row_ids(db) == [keep]

    again = cli("prune", "--json")
    assert again.json() == {"dry_run": False, "count": 0, "ids": []}
    assert row_ids(db) == [keep]


def test_prune_before(cli: CLI, corpus: Path) -> None:
    new = stored(cli, "created today")
    dry = cli("prune", "--before", "2025-07-01", "--dry-run", "--json")
    assert set(dry.json()["ids"]) == {"mem-api", "mem-worker"}
    assert len(rows(corpus)) == 4

    r = cli("prune", "--before", "2025-07-01", "--yes")
    assert r.code == 0 and r.err.startswith("deleted 2 memories; backup: ")
    assert row_ids(corpus) == ["mem-docs", new]


# -- stats ----------------------------------------------------------------------------------
def test_stats_plain_and_json(cli: CLI, db: Path) -> None:
    a = stored(cli, "alpha uses docker", "--tags", "docker,infra", "--entered-by", "alice")
    stored(cli, "bravo uses docker too", "--tags", "docker", "--entered-by", "bob")
    stored(cli, "we chose sqlite", "--type", "decision", "--entered-by", "alice")
    assert cli("forget", a).code == 0

    j = cli("stats", "--json")
    assert j.code == 0
    s = j.json()
    assert s["total"] == 3 and s["active"] == 2 and s["invalidated"] == 1 and s["expired"] == 0
    assert s["by_type"] == {"decision": 1, "fact": 1}
    assert s["by_tag"] == {"docker": 1}
    assert s["by_agent"] == {"alice": 1, "bob": 1}
    assert s["by_project"] == {"(global)": 2}
    assert s["db_path"] == str(db)
    assert s["db_size_bytes"] >= db.stat().st_size > 0  # the -wal file counts too

    plain = cli("stats")
    assert plain.code == 0
    lines = plain.out.splitlines()
    assert re.fullmatch(rf"database: {re.escape(str(db))} \(\d+ KiB\)", lines[0])
    assert lines[1] == "memories: 2 active, 1 forgotten, 0 expired, 3 stored; inbox: 0"
    for section, entries in (
        ("by type:", ["  decision: 1", "  fact: 1"]),
        ("by agent:", ["  alice: 1", "  bob: 1"]),
        ("top tags:", ["  docker: 1"]),
    ):
        i = lines.index(section)
        assert sorted(lines[i + 1 : i + 1 + len(entries)]) == entries

    assert "- fact: 1" in cli("stats", "--markdown").out.splitlines()


# -- export / import ------------------------------------------------------------------------
def test_export_then_import_into_a_fresh_db(
    cli: CLI, tmp_path: Path, db: Path, permissive_umask: None
) -> None:
    ids = [
        stored(cli, "pg runs on 5433 locally", "--tags", "postgres,dev", "--project", "api"),
        stored(cli, "we squash-merge pull requests", "--type", "decision"),
        stored(cli, "old fact that no longer holds"),
    ]
    assert cli("forget", ids[2], "--reason", "obsolete").code == 0

    out = tmp_path / "backup.json"
    r = cli("export", out)
    assert r.code == 0 and r.err == f"exported 3 memories to {out}\n"
    assert mode(out) == 0o600
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["format"] == "llmem-hooks-export" and doc["version"] == 1 and doc["count"] == 3
    assert [m["id"] for m in doc["memories"]] == ids

    fresh = tmp_path / "fresh" / "restored.db"
    r = cli("--db", fresh, "import", out)
    assert r.code == 0 and r.err == "imported 3 memories (0 already present)\n"
    assert rows(fresh) == rows(db)  # same ids, types, contents, tags, validity
    assert cli("--db", fresh, "search", "pg", "--json").ids() == [ids[0]]
    restored = cli("--db", fresh, "show", ids[2], "--json").json()
    assert restored["invalidation_reason"] == "obsolete"

    again = cli("--db", fresh, "import", out)  # ids already present are skipped
    assert again.code == 0 and again.err == "imported 0 memories (3 already present)\n"
    assert rows(fresh) == rows(db)


def test_export_to_stdout(cli: CLI) -> None:
    mid = stored(cli, "export me")
    r = cli("export", "-")
    assert r.code == 0
    doc = r.json()
    assert doc["format"] == "llmem-hooks-export"
    assert [(m["id"], m["content"]) for m in doc["memories"]] == [(mid, "export me")]


def test_import_bare_list(cli: CLI, tmp_path: Path, db: Path) -> None:
    src = tmp_path / "bare.json"
    src.write_text(json.dumps(CORPUS), encoding="utf-8")
    r = cli("import", src)
    assert r.code == 0
    assert row_ids(db) == ["mem-api", "mem-worker", "mem-docs"]
    assert rows(db)[0][2:4] == ("deploy the api with docker compose", "docker infra")


# -- global options -------------------------------------------------------------------------
def test_db_option_and_env(
    cli: CLI, tmp_path: Path, db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = tmp_path / "other" / "x.db"
    r = cli("--db", other, "store", "only in the other database")
    assert r.code == 0
    mid = r.out.strip()
    assert row_ids(other) == [mid]
    assert rows(db) == []
    missing = cli("search", "other database", "--json")  # the default one does not exist
    assert (missing.code, missing.out, missing.err) == (1, "", f"error: no database at {db}\n")

    monkeypatch.setenv("LLMEM_DB", str(other))
    assert cli("search", "other database", "--json").ids() == [mid]
    third = tmp_path / "third.db"
    r = cli("--db", third, "search", "other database", "--json")  # --db wins
    assert (r.code, r.err) == (1, f"error: no database at {third}\n")
    assert rows(db) == [] and not third.exists()


def test_version(cli: CLI) -> None:
    r = cli("--version")
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert (r.code, r.err) == (0, "")
    assert r.out == f"{llmem_hooks.__version__}\n"
    assert r.out.strip() == pyproject["project"]["version"]


def test_agent_context_prints_the_agent_guide(cli: CLI) -> None:
    r = cli("--agent-context")
    assert (r.code, r.err) == (0, "")
    assert r.out == (ROOT / "docs" / "AGENT_GUIDE.md").read_text(encoding="utf-8")


def test_no_command_prints_help(cli: CLI) -> None:
    r = cli()
    assert r.code == 0
    assert "Usage: llmem-hooks" in r.out
    for command in ("store", "search", "list", "show", "forget", "prune", "stats", "export"):
        assert f"  {command} " in r.out


# -- credentials ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("content", "kind"),
    [
        (f"the key is {AWS_KEY}", "AWS access key id"),
        (f"token for the bot: {GITHUB_TOKEN}", "GitHub token"),
    ],
)
def test_credential_like_content_is_stored_redacted_with_a_warning(
    cli: CLI, db: Path, content: str, kind: str
) -> None:
    r = cli("store", content)
    assert r.code == 0
    mid = r.out.strip()
    (line,) = r.err.splitlines()
    assert line.startswith("warning: ")
    assert kind in line
    assert AWS_KEY not in r.err and GITHUB_TOKEN not in r.err  # the secret is not echoed
    stored = rows(db)[0]
    assert stored[:2] == (mid, "fact") and "[REDACTED]" in stored[2]
    assert AWS_KEY not in stored[2] and GITHUB_TOKEN not in stored[2]


def test_no_warning_for_ordinary_content(cli: CLI) -> None:
    r = cli("store", "the api key lives in 1Password under 'acme/prod'")
    assert r.code == 0 and r.err == ""


# -- file modes -----------------------------------------------------------------------------
def test_home_db_and_config_are_private(
    cli: CLI, llmem_home: Path, db: Path, permissive_umask: None
) -> None:
    stored(cli, "first memory")
    assert mode(llmem_home) == 0o700
    assert mode(db) == 0o600
    assert mode(llmem_home / "config.yaml") == 0o600
    for suffix in ("-wal", "-shm"):
        side = Path(f"{db}{suffix}")
        if side.exists():
            assert mode(side) == 0o600

    # While another connection holds the database open, the WAL files stay on disk. The
    # reader uses the same SQLite library as the CLI (sqlean): two libraries in one process
    # do not see each other's POSIX locks, and the CLI would delete the WAL on close.
    reader = sqlean.connect(str(db))
    try:
        reader.execute("SELECT count(*) FROM memories").fetchone()
        mid = stored(cli, "second memory, written to the WAL")
        assert Path(f"{db}-wal").stat().st_size > 0
        for suffix in ("-wal", "-shm"):
            assert mode(Path(f"{db}{suffix}")) == 0o600
        assert reader.execute("SELECT id FROM memories WHERE id = ?", (mid,)).fetchone()
    finally:
        reader.close()


# -- bad input ------------------------------------------------------------------------------
BAD_INPUT = {
    # Words, not one 10,001-letter token: the "password in a URL" pattern of redact.py
    # takes ~1 s on a long run of letters (quadratic backtracking).
    "content over 10,000 characters": ["store", ("word " * 2001)[:10_001]],
    "unknown type": ["store", "some content", "--type", "gossip"],
    "bad expires date": ["store", "some content", "--expires", "next tuesday"],
    "empty content": ["store", ""],
    "blank content": ["store", "  \n\t "],
    "no content": ["store"],
    "content and --file": ["store", "some content", "--file", "{tmp}/note.txt"],
    "missing --file": ["store", "--file", "{tmp}/missing.txt"],
    "empty --file": ["store", "--file", "{tmp}/empty.txt"],
    "bad tag": ["store", "some content", "--tags", "two words"],
    "confidence out of range": ["store", "some content", "--confidence", "1.5"],
    "bad search --after": ["search", "docker", "--after", "yesterday"],
    "bad search --before": ["search", "docker", "--before", "2026-13-45"],
    "search limit 0": ["search", "docker", "--limit", "0"],
    "search threshold over 1": ["search", "docker", "--threshold", "1.5"],
    "search --json and --markdown": ["search", "docker", "--json", "--markdown"],
    "bad list --sort": ["list", "--sort", "size"],
    "bad prune --before": ["prune", "--before", "last year"],
    "show missing id": ["show", "00000000-dead-beef-0000-000000000000"],
    "show without id": ["show"],
    "forget missing id": ["forget", "nope-nope", "--reason", "typo"],
    "import nonexistent file": ["import", "{tmp}/missing.json"],
    "import a directory": ["import", "{tmp}"],
    "unknown command": ["frobnicate"],
    "unknown option": ["search", "docker", "--colour"],
    "unknown global option": ["--verbose", "stats"],
}


@pytest.mark.parametrize("args", list(BAD_INPUT.values()), ids=list(BAD_INPUT))
def test_bad_input_exits_2_with_one_error_line_and_writes_nothing(
    cli: CLI, tmp_path: Path, db: Path, args: list[str]
) -> None:
    (tmp_path / "note.txt").write_text("from a file", encoding="utf-8")
    (tmp_path / "empty.txt").write_text("", encoding="utf-8")
    stored(cli, "we deploy with docker compose", "--tags", "infra")
    before = rows(db)
    r = cli(*(a.replace("{tmp}", str(tmp_path)) for a in args))
    assert_bad_input(r)
    assert rows(db) == before


def test_error_messages_say_what_is_wrong(cli: CLI) -> None:
    assert "10,001 characters" in cli("store", ("word " * 2001)[:10_001]).err
    assert "unknown memory type 'gossip'" in cli("store", "z", "--type", "gossip").err
    assert "--expires" in cli("store", "z", "--expires", "soon").err
    assert "--after" in cli("search", "z", "--after", "soon").err
    assert "No such command 'frobnicate'" in cli("frobnicate").err


def _write_import(path: Path, kind: str) -> None:
    good = [
        {"id": "imp-1", "type": "fact", "content": "imported first"},
        {"id": "imp-2", "type": "fact", "content": "imported second"},
        {"id": "imp-3", "type": "fact", "content": "imported third"},
    ]
    if kind == "malformed json":
        text = '{"format": "llmem-hooks-export", "version": 1, "memories": [{"id": "imp-1",'
    elif kind == "wrong version":
        text = export_doc(good, version=2)
    elif kind == "wrong format":
        text = json.dumps({"format": "something-else", "version": 1, "memories": good})
    elif kind == "no memories list":
        text = json.dumps({"format": "llmem-hooks-export", "version": 1})
    elif kind == "a json string":
        text = json.dumps("imp-1")
    elif kind == "bad type in the middle":
        text = export_doc([good[0], {**good[1], "type": "no_such_type"}, good[2]])
    elif kind == "empty content in the middle":
        text = export_doc([good[0], {**good[1], "content": ""}, good[2]])
    elif kind == "too long content in the middle":
        text = export_doc([good[0], {**good[1], "content": "w" * 10_001}, good[2]])
    elif kind == "bad date in the middle":
        text = export_doc([good[0], {**good[1], "created_at": "not a date"}, good[2]])
    elif kind == "record not an object":
        text = export_doc([good[0], "imp-2", good[2]])
    elif kind == "duplicate id":
        text = export_doc([good[0], {**good[1], "id": "imp-1"}, good[2]])
    elif kind == "tags not a list":
        text = export_doc([good[0], {**good[1], "tags": 5}, good[2]])
    elif kind == "relation not an object":
        text = export_doc([good[0], {**good[1], "relations": ["imp-1"]}, good[2]])
    else:  # pragma: no cover
        raise AssertionError(kind)
    path.write_text(text, encoding="utf-8")


@pytest.mark.parametrize(
    "kind",
    [
        "malformed json",
        "wrong version",
        "wrong format",
        "no memories list",
        "a json string",
        "bad type in the middle",
        "empty content in the middle",
        "too long content in the middle",
        "bad date in the middle",
        "record not an object",
        "duplicate id",
        "tags not a list",
        "relation not an object",
    ],
)
def test_bad_import_file_stores_nothing(cli: CLI, tmp_path: Path, db: Path, kind: str) -> None:
    existing = stored(cli, "already here before the import")
    before = rows(db)
    src = tmp_path / "import.json"
    _write_import(src, kind)
    r = cli("import", src)
    assert_bad_input(r)
    assert rows(db) == before  # all or nothing: not even imp-1, which came first
    assert row_ids(db) == [existing]

    # Same into a fresh database: nothing from the file lands there either.
    fresh = tmp_path / "fresh.db"
    assert_bad_input(cli("--db", fresh, "import", src))
    assert rows(fresh) == []


def test_import_error_names_the_bad_record(cli: CLI, tmp_path: Path) -> None:
    src = tmp_path / "import.json"
    _write_import(src, "bad type in the middle")
    r = cli("import", src)
    assert "imp-2" in r.err and "no_such_type" in r.err
    _write_import(src, "wrong version")
    assert "version 2" in cli("import", src).err


def test_export_to_a_missing_directory_is_bad_input(cli: CLI, tmp_path: Path, db: Path) -> None:
    stored(cli, "something to export")
    target = tmp_path / "no-such-dir" / "out.json"
    r = cli("export", target)
    assert_bad_input(r)
    assert not target.parent.exists()


def test_export_below_a_regular_file_is_an_io_error(cli: CLI, tmp_path: Path) -> None:
    stored(cli, "something to export")
    blocker = tmp_path / "blocker"
    blocker.write_text("a file, not a folder", encoding="utf-8")
    r = cli("export", blocker / "out.json")
    assert r.code == 2  # a path whose folder is a file is bad input
    assert r.out == ""
    (line,) = r.err.splitlines()
    assert line.startswith("error: ")
    assert blocker.read_text(encoding="utf-8") == "a file, not a folder"


def test_a_file_that_is_not_a_database(cli: CLI, tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite, just some bytes " * 40)
    r = cli("--db", junk, "stats")
    assert r.code == 2  # a wrong path is a usage error (issue 9 defect 3)
    (line,) = r.err.splitlines()
    assert line.startswith("error: database: ")
    assert junk.read_bytes() == b"this is not sqlite, just some bytes " * 40


# -- real processes -------------------------------------------------------------------------
def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "LLMEM_DB"}
    env["LLMEM_HOME"] = str(home)
    return env


def _entry_point() -> str:
    path = Path(sys.executable).with_name("llmem-hooks")
    found = str(path) if path.exists() else shutil.which("llmem-hooks")
    if not found:  # pragma: no cover
        pytest.skip("the llmem-hooks entry point is not installed")
    return found


def test_subprocess_module_and_entry_point(llmem_home: Path, db: Path, tmp_path: Path) -> None:
    env = _env(llmem_home)
    stored_proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "llmem_hooks.cli",
            "store",
            "ci uses github actions",
            "--tags",
            "ci",
        ],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert stored_proc.returncode == 0, stored_proc.stderr
    mid = stored_proc.stdout.strip()
    assert row_ids(db) == [mid]

    search_proc = subprocess.run(
        [_entry_point(), "search", "github", "--json"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert search_proc.returncode == 0, search_proc.stderr
    (hit,) = json.loads(search_proc.stdout)
    assert (hit["id"], hit["content"], hit["tags"]) == (mid, "ci uses github actions", ["ci"])


def test_subprocess_bad_input(llmem_home: Path, db: Path, tmp_path: Path) -> None:
    proc = subprocess.run(
        [_entry_point(), "store", "some content", "--type", "gossip"],
        env=_env(llmem_home),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    (line,) = proc.stderr.splitlines()
    assert line.startswith("error: ")
    assert rows(db) == []


def test_subprocess_agent_context(llmem_home: Path, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "llmem_hooks.cli", "--agent-context"],
        env=_env(llmem_home),
        cwd=tmp_path,
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 0 and proc.stderr == b""
    assert proc.stdout == (ROOT / "docs" / "AGENT_GUIDE.md").read_bytes()
