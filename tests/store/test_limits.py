"""Issue 18, defect 2 (and 12, names): one set of limits, enforced on every write path, so
an export, a prune backup or a dream undo of anything we stored imports again.

Each write path is driven as a user reaches it: the CLI (one line, exit 2), the query
service (socket and MCP `remember`/`forget`), the viewer's edit and forget."""

from __future__ import annotations

import base64
import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from llmem_hooks import MemoryStore
from llmem_hooks.errors import ValidationError
from llmem_hooks.service.operations import QueryService
from llmem_hooks.store import archive
from llmem_hooks.store.records import (
    MAX_CONTENT_CHARS,
    MAX_DIMENSIONS,
    MAX_IMPORT_TEXT,
    MAX_LIST_ITEM_CHARS,
    MAX_LIST_ITEMS,
    MAX_METADATA_BYTES,
    MAX_PROJECT_CHARS,
    MAX_REASON_CHARS,
    MAX_TAGS,
)
from llmem_hooks.viewer.data import ViewerData

NO_MODEL = {"ollama": {"enabled": False}}
TAGS_65 = [f"t{i}" for i in range(MAX_TAGS + 1)]


def cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "llmem_hooks.cli", "--db", str(db), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def one_line_usage_error(proc: subprocess.CompletedProcess[str], words: str) -> None:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], proc.stderr


def rows(db: Path) -> int:
    with MemoryStore(db) as st:
        return st.count(valid_only=False)


# -- each write path refuses beyond a limit ------------------------------------------------


def test_cli_store_with_65_tags_is_one_line_and_exit_2(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    cli(db, "store", "the first memory").check_returncode()
    one_line_usage_error(cli(db, "store", "too many tags", "--tags", ",".join(TAGS_65)), "tags")
    assert rows(db) == 1


def test_cli_forget_with_a_reason_over_the_limit(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    with MemoryStore(db) as st:
        mid = st.add("fact", "we release on tuesdays")
    reason = "x" * (MAX_REASON_CHARS + 1)
    one_line_usage_error(cli(db, "forget", mid, "--reason", reason), "reason")
    with MemoryStore(db) as st:
        mem = st.get(mid)
        assert mem is not None and mem["valid_until"] is None


def test_a_reason_that_redaction_makes_too_long_is_refused(store: MemoryStore) -> None:
    """``PGPASSWORD=otter`` becomes ``PGPASSWORD=[REDACTED]``: the limit holds for what
    is stored."""
    mid = store.add("fact", "we release on tuesdays")
    reason = ("PGPASSWORD=otter " * 200)[:MAX_REASON_CHARS]
    with pytest.raises(ValidationError, match="reason"):
        store.invalidate(mid, reason)


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("session_id", "ses\x00evil", "control character"),
        ("session_id", "ses\nINFO forged", "control character"),
        ("session_id", "../../etc", "must not contain"),
        ("agent", "agent\x00", "control character"),
        ("agent", "copilot\nERROR forged", "control character"),
        ("agent", "../copilot", "must not contain"),
    ],
)
def test_service_remember_refuses_odd_names(
    store: MemoryStore, field: str, value: str, words: str
) -> None:
    with QueryService(store, NO_MODEL) as service:
        out = service.remember("we release on tuesdays", **{field: value})
    assert out["status"] == "rejected" and words in out["reason"], out
    assert store.count(valid_only=False) == 0


def test_cli_store_refuses_an_agent_name_with_a_newline(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    proc = cli(db, "store", "we release on tuesdays", "--entered-by", "me\nERROR forged")
    one_line_usage_error(proc, "control character")


def test_service_remember_and_forget_keep_the_limits(store: MemoryStore) -> None:
    with QueryService(store, NO_MODEL) as service:
        out = service.remember("too many tags", tags=TAGS_65)
        assert out["status"] == "rejected" and "tags" in out["reason"]
        ok = service.remember("we release on tuesdays", tags=TAGS_65[:MAX_TAGS])
        assert ok["status"] == "stored"
    (mem,) = store.list_all(limit=10)
    assert len(mem["tags"]) == MAX_TAGS


def test_viewer_edit_and_forget_keep_the_limits(store: MemoryStore, tmp_path: Path) -> None:
    mid = store.add("fact", "we release on tuesdays", tags=["release"])
    viewer = ViewerData(store, NO_MODEL, home=tmp_path)
    with pytest.raises(ValidationError, match="tags"):
        viewer.edit(mid, tags=TAGS_65)
    with pytest.raises(ValidationError, match="reason"):
        viewer.forget(mid, "y" * (MAX_REASON_CHARS + 1))
    mem = store.get(mid)
    assert mem is not None and mem["tags"] == ["release"] and mem["valid_until"] is None


def test_a_merge_never_grows_tags_beyond_the_limit(store: MemoryStore, tmp_path: Path) -> None:
    """A duplicate reinforces the memory it repeats and adds its tags: at most MAX_TAGS."""
    store.add("fact", "we release on tuesdays", tags=TAGS_65[:MAX_TAGS])
    store.add("fact", "We release on Tuesdays", tags=["extra-one", "extra-two"])
    (mem,) = store.list_all(limit=10)
    assert len(mem["tags"]) == MAX_TAGS
    assert_round_trip(store, tmp_path)


def test_relations_per_memory_stop_at_the_import_limit(store: MemoryStore) -> None:
    src = store.add("fact", "the hub memory")
    for i in range(MAX_LIST_ITEMS):
        store.add_relation(src, f"src/file{i}.py:1:2", "references", "code")
    with pytest.raises(ValidationError, match="relations"):
        store.add_relation(src, "src/one-more.py:1:2", "references", "code")


def test_an_embedding_beyond_the_import_dimensions_is_refused(store: MemoryStore) -> None:
    with pytest.raises(ValidationError, match="dimensions"):
        store.add("fact", "too wide", embedding=[0.5] * (MAX_DIMENSIONS + 1))


def test_content_that_redaction_makes_too_long_is_refused(store: MemoryStore) -> None:
    content = ("PGPASSWORD=otter " * 700)[:MAX_CONTENT_CHARS]
    with pytest.raises(ValidationError, match="content"):
        store.add("fact", content)


# -- what we wrote imports again ------------------------------------------------------------


def fill_to_the_limits(store: MemoryStore) -> list[str]:
    """Memories holding the largest value of every field each write path accepts."""
    vec = [0.25] * 768  # the configured dimensions (MAX_DIMENSIONS: test above)
    big = store.add(
        "fact",
        "c" * MAX_CONTENT_CHARS,
        summary="s" * MAX_CONTENT_CHARS,
        tags=[f"t{i}-" + "x" * 58 for i in range(MAX_TAGS)],
        hints=["h" * MAX_LIST_ITEM_CHARS] * MAX_LIST_ITEMS,
        source_message_ids=[f"m{i}-" + "i" * 200 for i in range(MAX_LIST_ITEMS)],
        metadata={"k": "v" * (MAX_METADATA_BYTES - 20)},
        source="s" * MAX_IMPORT_TEXT,
        entered_by="e" * MAX_IMPORT_TEXT,
        session_id="x" * MAX_IMPORT_TEXT,
        project="/p" * (MAX_PROJECT_CHARS // 2),
        embedding=vec,
    )
    forgotten = store.add("fact", "a memory forgotten with the longest reason", embedding=vec)
    store.invalidate(forgotten, "r" * MAX_REASON_CHARS)
    redacted = store.add("fact", "the admin pw is hunter2, " * 10)
    store.invalidate(redacted, ("PGPASSWORD=abcdefghijklmnop " * 200)[:MAX_REASON_CHARS])
    for i in range(MAX_LIST_ITEMS):
        store.add_relation(big, f"src/file{i}.py:1:2", "references", "code")
    return [big, forgotten, redacted]


def assert_round_trip(store: MemoryStore, tmp_path: Path) -> None:
    out = tmp_path / "export.json"
    proc = cli(store.db_path, "export", str(out))
    assert proc.returncode == 0, proc.stderr
    fresh = tmp_path / "fresh.db"
    proc = cli(fresh, "import", str(out))
    assert proc.returncode == 0, proc.stderr
    assert rows(fresh) == store.count(valid_only=False)


def test_an_export_of_a_store_at_every_limit_imports_again(
    store: MemoryStore, tmp_path: Path
) -> None:
    ids = fill_to_the_limits(store)
    assert_round_trip(store, tmp_path)
    with MemoryStore(tmp_path / "fresh.db") as fresh:
        big = fresh.get(ids[0])
        assert big is not None and len(big["tags"]) == MAX_TAGS
        assert len(fresh.get_relations(ids[0])) == MAX_LIST_ITEMS


def test_a_backup_of_a_store_at_every_limit_imports_again(
    store: MemoryStore, tmp_path: Path
) -> None:
    """What prune, episode retention and dream write before deleting (and undo reads)."""
    ids = fill_to_the_limits(store)
    path = archive.write_backup("prune", store.export_all(limit=None, ids=ids))
    with MemoryStore(tmp_path / "fresh.db") as fresh:
        assert fresh.import_memories(archive.read_export(path)) == len(ids)


def test_a_hand_made_file_is_still_checked(tmp_path: Path) -> None:
    """The import side did not loosen: 65 tags in a file are one line, exit 2."""
    vec = base64.b64encode(struct.pack("<2f", 0.5, 0.5)).decode()
    doc = archive.wrap([{"id": "a1", "type": "fact", "content": "x", "tags": TAGS_65}])
    doc["memories"].append({"id": "a2", "type": "fact", "content": "y", "embedding": vec})
    path = tmp_path / "in.json"
    path.write_text(json.dumps(doc))
    one_line_usage_error(cli(tmp_path / "m.db", "import", str(path)), "tags")


def test_an_inbox_note_keeps_the_limits_of_the_memory_it_becomes(store: MemoryStore) -> None:
    """A note whose metadata is too large for a memory would make consolidation fail."""
    with pytest.raises(ValidationError, match="metadata"):
        store.add_to_inbox("a note", metadata={"k": "v" * MAX_METADATA_BYTES})
    store.add_to_inbox("we release on tuesdays", attention_score=0.9, metadata={"k": "v" * 60_000})
    assert len(store.consolidate(min_score=0.5)["promoted"]) == 1
