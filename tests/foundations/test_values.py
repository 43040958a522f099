"""Issue 9, defect 8: config and import values that used to crash commands.

Each bad value must end in one `error:` line on stderr and exit code 2, never a
traceback, and an import must write nothing when any record is bad. The CLI runs as a
real subprocess here, as a user would run it.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from llmem_hooks.config import load_config
from llmem_hooks.errors import ConfigError, ValidationError
from llmem_hooks.store import MemoryStore


def run_cli(*args: object, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """`llmem-hooks ARGS...` in a fresh interpreter, with the test's LLMEM_HOME."""
    return subprocess.run(
        [sys.executable, "-m", "llmem_hooks.cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
        stdin=subprocess.DEVNULL,
    )


def assert_one_line_exit_2(r: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("error: ")
    for needle in needles:
        assert needle in lines[0], lines[0]


def write_config(home: Path, text: str | bytes) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    path = home / "config.yaml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def count_rows(db: Path) -> int:
    if not db.exists():
        return 0
    conn = sqlite3.connect(db)
    try:
        return conn.execute("SELECT count(*) FROM memories").fetchone()[0]
    finally:
        conn.close()


# -- config -------------------------------------------------------------------------------
SIDECAR_CRASHERS = [
    ("session", "poll_seconds", ".inf"),
    ("session", "poll_seconds", "1.0e20"),
    ("session", "end_after_minutes", ".inf"),
    ("session", "context_retention_days", ".inf"),
    ("session", "idle_quiet_seconds", ".nan"),
    ("session", "idle_debounce_seconds", "-.inf"),
    ("budget", "day_seconds", ".nan"),
    ("ollama", "timeout_seconds", ".inf"),
    ("retrieval", "limit", "100000000000000000000"),
    ("memory", "inbox_capacity", str(10**30)),
    ("memory", "vec_dimensions", "100000"),
    ("opencode", "plugin_wait_ms", "99999999999"),
]


@pytest.mark.parametrize(("section", "key", "value"), SIDECAR_CRASHERS)
def test_non_finite_or_huge_config_value_is_refused_with_the_key(
    llmem_home: Path, section: str, key: str, value: str
) -> None:
    write_config(llmem_home, f"{section}:\n  {key}: {value}\n")
    with pytest.raises(ConfigError) as info:
        load_config()
    message = str(info.value)
    assert f"{section}.{key}" in message
    assert "\n" not in message and len(message) < 300


def test_documented_poll_seconds_message(llmem_home: Path) -> None:
    write_config(llmem_home, "session:\n  poll_seconds: .inf\n")
    with pytest.raises(ConfigError) as info:
        load_config()
    assert str(info.value) == (
        "config.yaml: invalid value for session.poll_seconds: "
        "must be a finite number between 0.05 and 3600, got inf"
    )


@pytest.mark.parametrize(
    "value", ["poll_seconds: .inf", "end_after_minutes: .inf", "idle_quiet_seconds: .nan"]
)
def test_sidecar_start_with_bad_value_exits_2_in_one_line(llmem_home: Path, value: str) -> None:
    """These used to crash `llmem-hooks run` with a traceback (int(inf), sleep(nan)...)."""
    write_config(llmem_home, f"session:\n  {value}\n")
    r = run_cli("run", timeout=20)
    assert_one_line_exit_2(r, "session." + value.split(":")[0])


def test_search_with_huge_limit_exits_2(llmem_home: Path) -> None:
    write_config(llmem_home, "retrieval:\n  limit: 100000000000000000000\n")
    assert_one_line_exit_2(run_cli("search", "anything"), "retrieval.limit")


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"session:\n  poll_seconds: 5\n# caf\xe9 \xff\xfe\n", "not UTF-8"),
        ("a: " + "[" * 5000 + "]" * 5000 + "\n", "config.yaml"),
        ("a: " + "{b: " * 3000 + "1" + "}" * 3000 + "\n", "config.yaml"),
        ("session:\n  poll_seconds: " + "9" * 5000 + "\n", "digits"),
    ],
    ids=["non-utf8", "deep-lists", "deep-maps", "5000-digit-int"],
)
def test_unreadable_config_is_one_line(llmem_home: Path, content: str | bytes, needle: str) -> None:
    write_config(llmem_home, content)
    assert_one_line_exit_2(run_cli("stats"), needle)


def test_oversized_config_is_one_line(llmem_home: Path) -> None:
    write_config(llmem_home, "# padding\n" * 120_000)
    with pytest.raises(ConfigError, match="larger than"):
        load_config()


def test_sane_values_at_the_bounds_still_load(llmem_home: Path) -> None:
    write_config(
        llmem_home,
        "session:\n  poll_seconds: 0.05\n  end_after_minutes: 0\n  idle_quiet_seconds: 3600\n"
        "retrieval:\n  limit: 1000\n",
    )
    cfg = load_config()
    assert cfg["session"]["poll_seconds"] == 0.05
    assert cfg["retrieval"]["limit"] == 1000


# -- import -------------------------------------------------------------------------------
def record(i: int, **extra: Any) -> dict[str, Any]:
    return {"id": f"imp-{i}", "type": "fact", "content": f"imported memory number {i}", **extra}


BAD_FIELDS: list[tuple[str, Any]] = [
    ("embedding", 5),
    ("embedding", True),
    ("embedding", {"a": 1}),
    ("embedding", [1.0, "x"]),
    ("embedding", [float("nan")] * 4),
    ("embedding", [1e300] * 4),
    ("embedding", [10**400] * 4),
    ("embedding", []),
    ("embedding", "AADAfwAAgD8="),  # base64 of packed float32 [nan, 1.0]
    ("embedding", "AAAA/w"),  # not base64
    ("embedding", b"\x00\x00\xc0\x7f"),  # packed float32 NaN, as bytes
    ("embedding", b"\x00\x00\x80"),  # not a whole float32
    ("access_count", 10**30),
    ("access_count", -1),
    ("access_count", 1.5),
    ("source", "s" * 200_000),
    ("project", "p" * 200_000),
    ("session_id", "x" * 200_000),
    ("entered_by", "e" * 257),
    ("type", "t" * 300),
    ("invalidation_reason", "r" * 5_000),
    ("summary", "s" * 20_000),
    ("tags", ["t"] * 65),
    ("tags", ["a" * 65]),
    ("tags", 7),
    ("hints", ["h" * 3_000]),
    ("hints", {"a": 1}),
    ("metadata", {"blob": "m" * 70_000}),
    ("metadata", {"x": float("inf")}),
    ("metadata", [1, 2]),
    ("confidence", float("nan")),
    ("confidence", 10**30),
    ("created_at", 12345),
    ("created_at", "2026-01-01" + "x" * 100),
    ("relations", [{"target_id": "imp-1", "relation_type": "related_to", "x": "y" * 5_000}]),
]


@pytest.mark.parametrize(
    ("field", "value"), BAD_FIELDS, ids=[f"{f}-{i}" for i, (f, _) in enumerate(BAD_FIELDS)]
)
def test_bad_import_field_is_named_and_nothing_is_written(
    store: MemoryStore, field: str, value: Any
) -> None:
    store.add("fact", "already here")
    before = store.count(valid_only=False)
    data = [record(1), record(2), {**record(3), field: value}, record(4)]
    with pytest.raises(ValidationError) as info:
        store.import_memories(data)
    message = str(info.value)
    assert "memory imp-3:" in message and "(record #3)" in message, message
    assert f"field {field!r}" in message or field in message, message
    assert len(message) < 400
    assert store.count(valid_only=False) == before


def test_import_accepts_packed_bytes_from_python_callers(store: MemoryStore) -> None:
    """`import_memories` is an API too: callers (bench/vector_corpus.py) pass the packed
    float32 bytes the store itself holds; the range checks must not refuse them."""
    import struct

    vec = struct.pack("<768f", *([0.5] * 768))
    assert store.import_memories([record(1, embedding=vec)]) == 1


def test_import_accepts_the_limits_exactly(store: MemoryStore) -> None:
    data = [
        record(
            1,
            source="s" * 256,
            project="p" * 256,
            session_id="x" * 256,
            entered_by="e" * 256,
            tags=[f"t{i}" for i in range(64)],
            access_count=2**31,
            metadata={"k": "v" * 60_000},
        )
    ]
    assert store.import_memories(data) == 1


@pytest.mark.parametrize("field", ["source", "project", "session_id", "entered_by"])
def test_every_route_in_bounds_ids_and_names(store: MemoryStore, field: str) -> None:
    """Not only import: the API (and so the CLI and extraction) refuses a 200,000-character
    project, source, session id or author, naming the field."""
    with pytest.raises(ValidationError, match=field):
        store.add("fact", "a plain fact", **{field: "z" * 200_000})
    assert store.count(valid_only=False) == 0


def test_a_project_may_be_a_long_folder_path(store: MemoryStore) -> None:
    deep = "/home/dev/" + "/".join(["segment"] * 500)  # ~4,000 characters, under PATH_MAX
    mid = store.add("fact", "a plain fact", project=deep)
    assert store.get(mid)["project"] == deep


def test_store_with_a_huge_project_exits_2(llmem_home: Path) -> None:
    r = run_cli("store", "we use postgres 16", "--project", "p" * 100_000)
    assert_one_line_exit_2(r, "project")
    r = run_cli("store", "we use postgres 16", "--entered-by", "e" * 1_000)
    assert_one_line_exit_2(r, "entered_by")


def test_exported_file_with_huge_fields_exits_2_via_cli(llmem_home: Path, tmp_path: Path) -> None:
    src = tmp_path / "bad.json"
    src.write_text(
        json.dumps([record(1), record(2, source="s" * 200_000), record(3, embedding=5)]),
        encoding="utf-8",
    )
    r = run_cli("import", src)
    assert_one_line_exit_2(r, "memory imp-2:", "record #2", "source")
    assert count_rows(llmem_home / "memory.db") == 0


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b'[{"id": "a", "content": "caf\xe9"}]', "not UTF-8"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (
            b'[{"id": "a", "type": "fact", "content": "x", "access_count": ' + b"9" * 5000 + b"}]",
            "JSON",
        ),
    ],
    ids=["non-utf8", "deep", "5000-digit-int"],
)
def test_unreadable_import_file_is_one_line(
    llmem_home: Path, tmp_path: Path, content: bytes, needle: str
) -> None:
    src = tmp_path / "in.json"
    src.write_bytes(content)
    assert_one_line_exit_2(run_cli("import", src), needle)
    assert count_rows(llmem_home / "memory.db") == 0


def test_oversized_import_file_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from llmem_hooks.errors import ImportFormatError
    from llmem_hooks.store import archive

    monkeypatch.setattr(archive, "MAX_IMPORT_BYTES", 1000)
    src = tmp_path / "big.json"
    src.write_text(json.dumps([record(i) for i in range(100)]), encoding="utf-8")
    with pytest.raises(ImportFormatError, match="larger than"):
        archive.read_export(src)
