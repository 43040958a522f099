"""Property/fuzz suite for config.yaml and import files (issue 9).

Random documents go through the real loaders: `load_config` (file -> YAML -> validator)
and `archive.read_export` + `MemoryStore.import_memories` on a real SQLite file. The
properties:

- config: either a valid config (every number finite and in range) or a `ConfigError`
  of one line; when a value is refused, the message names its ``section.key``;
- import: either imported (row count grows by what it reports) or rejected with a
  `ValidationError` / `ImportFormatError` and the row count unchanged;
- never another exception.

Budget: a fixed number of examples per property (about 2,600 in all, ~15-30 s), no
example database on disk, plus a few real CLI subprocesses (exit 2, one line, no
'Traceback').
"""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmem_hooks.config import DEFAULT_CONFIG, VALIDATORS, load_config
from llmem_hooks.errors import ConfigError, ImportFormatError, ValidationError
from llmem_hooks.store import MemoryStore, archive

FUZZ = settings(
    deadline=None,
    database=None,  # nothing written next to the repository
    derandomize=True,  # the same cases on every run: CI failures reproduce
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# -- value strategies -----------------------------------------------------------------------
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    st.sampled_from(["", " ", ".inf", "nan", "1e20", "~", "http://x", "/etc/passwd", "0"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
KNOWN = [(section, key) for section, keys in VALIDATORS.items() for key in keys]


@st.composite
def config_documents(draw: st.DrawFn) -> dict[Any, Any]:
    """A mapping of sections to keys, mostly known ones, with random values."""
    doc: dict[Any, Any] = {}
    for section, key in draw(st.lists(st.sampled_from(KNOWN), max_size=8)):
        doc.setdefault(section, {})[key] = draw(values)
    if draw(st.booleans()):
        doc[draw(st.text(max_size=10))] = draw(values)  # unknown section or odd shape
    if draw(st.integers(0, 9)) == 0 and doc:
        doc[next(iter(doc))] = draw(values)  # a section that is not a mapping
    return doc


def nested(depth: int, kind: str) -> str:
    if kind == "list":
        return "a: " + "[" * depth + "]" * depth + "\n"
    if kind == "map":
        return "a: " + "{b: " * depth + "1" + "}" * depth + "\n"
    return "".join("  " * i + f"k{i}:\n" for i in range(depth)) + "  " * depth + "v\n"


@pytest.fixture(scope="module")
def workdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="llmem-fuzz-") as d:
        yield Path(d)


def check_config_outcome(path: Path, raw: Any = None) -> None:
    """The property: a valid config, or one ConfigError line naming the key."""
    try:
        cfg = load_config(path, create=False)
    except ConfigError as exc:
        message = str(exc)
        assert "\n" not in message and message.startswith("config.yaml"), message
        assert len(message) < 2_000
        if "invalid value for" in message and isinstance(raw, dict):
            named = message.split("invalid value for ", 1)[1].split(":", 1)[0]
            section, key = named.split(".", 1)
            assert (section, key) in KNOWN, message
        return
    assert set(cfg) == set(DEFAULT_CONFIG)
    for section, keys in cfg.items():
        for key, value in keys.items():
            if isinstance(value, float):
                assert math.isfinite(value), (section, key, value)
            if isinstance(value, int) and not isinstance(value, bool):
                assert abs(value) <= 10**12, (section, key, value)


@settings(FUZZ, max_examples=450)
@given(doc=config_documents())
def test_fuzz_config_documents(workdir: Path, doc: dict[Any, Any]) -> None:
    path = workdir / "config.yaml"
    try:
        text = yaml.safe_dump(doc, allow_unicode=True)
    except (yaml.YAMLError, RecursionError):
        return
    path.write_text(text, encoding="utf-8")
    check_config_outcome(path, doc)


NUMERIC = [
    (s, k)
    for s, k in KNOWN
    if isinstance(DEFAULT_CONFIG[s][k], int | float) and not isinstance(DEFAULT_CONFIG[s][k], bool)
]
numbers = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.sampled_from([float("inf"), float("-inf"), float("nan"), 1e20, 10**20, -1, 0]),
)


@settings(FUZZ, max_examples=500)
@given(picks=st.lists(st.tuples(st.sampled_from(NUMERIC), numbers), min_size=1, max_size=4))
def test_fuzz_config_numbers(workdir: Path, picks: list[tuple[tuple[str, str], Any]]) -> None:
    """Every numeric key with non-finite, huge, negative and ordinary numbers."""
    doc: dict[str, dict[str, Any]] = {}
    for (section, key), value in picks:
        doc.setdefault(section, {})[key] = value
    path = workdir / "config.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    check_config_outcome(path, doc)


@settings(FUZZ, max_examples=500)
@given(data=st.binary(max_size=300))
def test_fuzz_config_bytes(workdir: Path, data: bytes) -> None:
    path = workdir / "config.yaml"
    path.write_bytes(data)
    check_config_outcome(path)


yaml_chars = st.text(alphabet=":-[]{}&*!|>'\"%@`#,?\n\t ab0.e+~", max_size=120)


@settings(FUZZ, max_examples=500)
@given(text=yaml_chars)
def test_fuzz_config_yaml_syntax(workdir: Path, text: str) -> None:
    path = workdir / "config.yaml"
    path.write_text("session:\n  " + text, encoding="utf-8")
    check_config_outcome(path)


@pytest.mark.parametrize("kind", ["list", "map", "indent"])
@pytest.mark.parametrize("depth", [50, 1_000, 20_000])
def test_deeply_nested_config(workdir: Path, kind: str, depth: int) -> None:
    path = workdir / f"deep-{kind}.yaml"
    path.write_text(nested(min(depth, 3_000) if kind == "indent" else depth, kind))
    check_config_outcome(path)


# -- import ---------------------------------------------------------------------------------
ID_ALPHABET = "abcdefXYZ0123456789-_.:"
good_float = st.floats(-1.0, 1.0, allow_nan=False)
FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "id": st.one_of(st.text(ID_ALPHABET, min_size=1, max_size=12), values),
    "type": st.one_of(st.sampled_from(["fact", "decision", "preference"]), values),
    "content": st.one_of(st.text(min_size=1, max_size=60), values),
    "summary": values,
    "source": st.one_of(st.text(max_size=300), values),
    "project": st.one_of(st.text(max_size=300), values),
    "session_id": st.one_of(st.text(max_size=300), values),
    "entered_by": values,
    "confidence": st.one_of(st.floats(0, 1), values),
    "tags": st.one_of(st.lists(st.text("abc-1", min_size=1, max_size=70), max_size=70), values),
    "hints": values,
    "metadata": values,
    "access_count": st.one_of(st.integers(0, 2**33), values),
    "created_at": st.one_of(
        st.sampled_from(["2025-01-01T00:00:00Z", "2025-13-01", "yesterday"]), values
    ),
    "expires_at": values,
    "embedding": st.one_of(
        st.lists(good_float, min_size=4, max_size=4),
        st.lists(st.one_of(good_float, values), max_size=6),
        st.sampled_from(["AADAfwAAgD8=", "AAAAAAAAgD8AAAAAAACAPw==", "!!"]),
        values,
    ),
    "relations": st.one_of(
        st.lists(
            st.fixed_dictionaries(
                {"target_id": st.text(ID_ALPHABET, max_size=8), "relation_type": values}
            ),
            max_size=3,
        ),
        values,
    ),
    "invalidation_reason": values,
}


@st.composite
def import_records(draw: st.DrawFn) -> Any:
    if draw(st.integers(0, 19)) == 0:
        return draw(values)  # not even an object
    base = {
        "id": draw(st.text(ID_ALPHABET, min_size=1, max_size=12)),
        "type": "fact",
        "content": draw(st.text(min_size=1, max_size=60)),
    }
    for name in draw(st.lists(st.sampled_from(sorted(FIELDS)), max_size=5)):
        base[name] = draw(FIELDS[name])
    return base


@pytest.fixture(scope="module")
def fuzz_store(workdir: Path) -> Iterator[MemoryStore]:
    with MemoryStore(workdir / "import.db") as store:
        yield store


def count(store: MemoryStore) -> tuple[int, int, int]:
    conn = store.conn
    return (
        conn.execute("SELECT count(*) FROM memories").fetchone()[0],
        conn.execute("SELECT count(*) FROM relations").fetchone()[0],
        conn.execute("SELECT count(*) FROM memory_tags").fetchone()[0],
    )


@settings(FUZZ, max_examples=350)
@given(records=st.lists(import_records(), max_size=4))
def test_fuzz_import_records(fuzz_store: MemoryStore, records: list[Any]) -> None:
    before = count(fuzz_store)
    try:
        added = fuzz_store.import_memories(records)
    except ValidationError as exc:  # ImportFormatError is one too
        assert "\n" not in str(exc) and len(str(exc)) < 1_000, str(exc)
        assert count(fuzz_store) == before  # nothing half-written
        return
    assert count(fuzz_store)[0] == before[0] + added


@settings(FUZZ, max_examples=300)
@given(
    data=st.one_of(
        st.binary(max_size=200),
        values.map(lambda v: json.dumps(v, allow_nan=True, default=str).encode()),
        st.lists(import_records(), max_size=3).map(
            lambda r: json.dumps(archive.wrap(r), default=str).encode()
        ),
    )
)
def test_fuzz_import_files(workdir: Path, fuzz_store: MemoryStore, data: bytes) -> None:
    path = workdir / "import.json"
    path.write_bytes(data)
    before = count(fuzz_store)
    try:
        memories = archive.read_export(path)
        added = fuzz_store.import_memories(memories)
    except (ValidationError, ImportFormatError) as exc:
        assert "\n" not in str(exc), str(exc)
        assert count(fuzz_store) == before
        return
    assert count(fuzz_store)[0] == before[0] + added


# -- real CLI processes -------------------------------------------------------------------------
def cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "llmem_hooks.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "LLMEM_HOME": str(home)},
    )


def assert_clean_refusal(r: subprocess.CompletedProcess[str]) -> None:
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_cli_refuses_random_bad_configs_in_one_line(tmp_path: Path) -> None:
    rng = random.Random(9)
    bad_values = [".inf", "-.inf", ".nan", "1.0e300", str(10**30), "[1, 2]", "{a: 1}", "yes"]
    for i in range(4):
        section, key = rng.choice(NUMERIC)
        home = tmp_path / f"home-{i}"
        home.mkdir()
        (home / "config.yaml").write_text(f"{section}:\n  {key}: {rng.choice(bad_values)}\n")
        r = cli(home, "stats")
        assert_clean_refusal(r)
        assert f"{section}.{key}" in r.stderr


def test_cli_refuses_random_bad_import_files_in_one_line(tmp_path: Path) -> None:
    rng = random.Random(13)
    home = tmp_path / "home"
    good = {"id": "ok-1", "type": "fact", "content": "a good memory"}
    bad = [
        {"embedding": rng.choice([5, True, {"x": 1}, [1.0, "a"]])},
        {"access_count": 10**30},
        {"source": "s" * 200_000},
        {"metadata": {"k": "v" * 70_000}},
    ]
    for i, extra in enumerate(bad):
        src = tmp_path / f"bad-{i}.json"
        records = [good, {"id": f"bad-{i}", "type": "fact", "content": "bad one", **extra}]
        src.write_text(json.dumps(records), encoding="utf-8")
        r = cli(home, "import", str(src))
        assert_clean_refusal(r)
        assert f"memory bad-{i}:" in r.stderr and "record #2" in r.stderr
    raw = tmp_path / "raw.bin"
    raw.write_bytes(bytes(rng.randrange(256) for _ in range(500)))
    assert_clean_refusal(cli(home, "import", str(raw)))
    r = cli(home, "list", "--json")
    assert r.returncode == 0 and json.loads(r.stdout) == []  # nothing half-written
