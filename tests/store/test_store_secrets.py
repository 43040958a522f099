"""Every text the store persists passes redaction; identity fields refuse secrets (issue 9,
defect 6). Field by field: a known secret goes in through the public API, the CLI or the
Copilot hook, and must then be absent from the SQLite file bytes (WAL checkpointed, -wal
included) and from `export`."""

# ruff: noqa: E501 - one field per line reads better
from __future__ import annotations

import io
import json
import random
import string
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from llmem_hooks import MemoryStore, ValidationError
from llmem_hooks.agents import copilot_hook
from llmem_hooks.cli import main as cli_main
from llmem_hooks.redact import REDACTED
from llmem_hooks.store import sessions as session_state


def _token() -> str:
    """A fresh fake GitHub token: the test never passes by remembering one value."""
    rng = random.SystemRandom()
    return "ghp_" + "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(36))


def _word_password() -> str:
    """A short password without digits: the shape the old redactor missed."""
    rng = random.SystemRandom()
    return "".join(rng.choice("bcdfghjklmnpqrstvwxz") for _ in range(9))


def _persisted(db: Path) -> bytes:
    """Everything SQLite keeps for ``db``: the main file after a checkpoint, plus -wal."""
    with MemoryStore(db) as st:
        st.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = db.read_bytes()
    for suffix in ("-wal", "-journal"):
        extra = Path(f"{db}{suffix}")
        if extra.exists():
            data += extra.read_bytes()
    return data


def _exported(db: Path) -> str:
    with MemoryStore(db) as st:
        return json.dumps(st.export_all(limit=None))


def _assert_gone(db: Path, *secrets: str) -> None:
    data, exported = _persisted(db), _exported(db)
    for secret in secrets:
        assert secret.encode() not in data, f"{secret[:8]}... is in the SQLite bytes"
        assert secret not in exported, f"{secret[:8]}... is in the export"


Writer = Callable[[MemoryStore, str], None]


def _imp(**fields: Any) -> Callable[[MemoryStore, str], Any]:
    """Import one memory whose fields are given as templates of the secret ``{s}``."""

    def write(st: MemoryStore, s: str) -> Any:
        rec = {"type": "fact", "content": "c"}
        rec.update(
            {k: (json.loads(v.replace("{s}", s)) if k in ("metadata", "hints", "tags") else v.format(s=s))
             for k, v in fields.items()}
        )  # fmt: skip
        return st.import_memories([rec])

    return write


# Free-text fields: stored with the secret replaced by [REDACTED].
REDACTED_FIELDS: dict[str, Writer] = {
    "content": lambda st, s: st.add("fact", f"push with {s} to the mirror"),
    "summary": lambda st, s: st.add("fact", "the mirror push", summary=f"uses {s}"),
    "metadata value": lambda st, s: st.add("fact", "a note", metadata={"cmd": f"export T={s}"}),
    "metadata nested": lambda st, s: st.add("fact", "a note", metadata={"a": [{"b": f"t {s}"}]}),
    "metadata key": lambda st, s: st.add("fact", "a note", metadata={f"token {s}": 1}),
    "hints": lambda st, s: st.add("fact", "a note", hints=["fine", f"GITHUB_TOKEN={s}"]),
    "update summary": lambda st, s: st.update(st.add("fact", "x y z"), summary=f"token {s}"),
    "update content": lambda st, s: st.update(st.add("fact", "x y z"), content=f"token {s}"),
    "update metadata": lambda st, s: st.update(st.add("fact", "x y"), metadata={"k": f"t {s}"}),
    "update hints": lambda st, s: st.update(st.add("fact", "x y"), hints=[f"token {s}"]),
    "invalidation reason": lambda st, s: st.invalidate(st.add("fact", "x"), f"leaked {s}"),
    "inbox content": lambda st, s: st.add_to_inbox(f"remember {s}"),
    "inbox metadata": lambda st, s: st.add_to_inbox("a note", metadata={"t": f"token {s}"}),
    "import summary": _imp(summary="t {s}"),
    "import metadata": _imp(metadata='{"x": "{s}"}'),
    "import hints": _imp(hints='["{s}"]'),
    "import invalidation reason": _imp(valid_until="2020-01-01T00:00:00Z", invalidation_reason="t {s}"),
}  # fmt: skip

# Identity fields: a secret there is refused (ValidationError), nothing is written.
REFUSED_FIELDS: dict[str, Writer] = {
    "source": lambda st, s: st.add("fact", "a note", source=s),
    "entered_by": lambda st, s: st.add("fact", "a note", entered_by=s),
    "session_id": lambda st, s: st.add("fact", "a note", session_id=s),
    "project": lambda st, s: st.add("fact", "a note", project=f"https://x:{s}@github.com/o/r"),
    "tags": lambda st, s: st.add("fact", "a note", tags=["ok", s]),
    "source_message_ids": lambda st, s: st.add("fact", "a note", source_message_ids=[s]),
    "import source": _imp(source="{s}"),
    "import entered_by": _imp(entered_by="{s}"),
    "import session_id": _imp(session_id="{s}"),
    "import tags": _imp(tags='["{s}"]'),
    "code relation": lambda st, s: st.add_relation(
        st.add("fact", "x"), f"src/{s}.py:1:2", "references", "code"
    ),
}  # fmt: skip


@pytest.mark.parametrize("field", list(REDACTED_FIELDS))
def test_free_text_fields_are_redacted(field: str, tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    secret = _token()
    with MemoryStore(db) as st:
        REDACTED_FIELDS[field](st, secret)
        stored = json.dumps([st.export_all(limit=None), st.list_inbox()])
    assert REDACTED in stored
    _assert_gone(db, secret)


@pytest.mark.parametrize("field", list(REFUSED_FIELDS))
def test_identity_fields_refuse_secrets(field: str, tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    secret = _token()
    with MemoryStore(db) as st, pytest.raises(ValidationError):
        REFUSED_FIELDS[field](st, secret)
    _assert_gone(db, secret)


def test_metadata_password_key_takes_a_plain_word(tmp_path: Path) -> None:
    """{"password": "hunter"}: the name makes even a dictionary word a secret."""
    db = tmp_path / "memory.db"
    word = _word_password()
    with MemoryStore(db) as st:
        mid = st.add("fact", "db access", metadata={"password": word, "host": "db1"})
        assert st.get(mid)["metadata"] == {"password": REDACTED, "host": "db1"}  # type: ignore[index]
    _assert_gone(db, word)


def test_import_from_a_file_through_the_cli(tmp_path: Path, capsys: Any) -> None:
    db = tmp_path / "memory.db"
    secret, word = _token(), _word_password()
    src = tmp_path / "in.json"
    record = {
        "id": "11111111-2222-4333-8444-555555555555",
        "type": "fact",
        "content": f"the db is postgres://app:{word}@db/app",
        "summary": f"token {secret}",
        "metadata": {"PGPASSWORD": word},
        "hints": [f"GITHUB_TOKEN={secret}"],
    }
    src.write_text(json.dumps([record]))
    assert cli_main(["--db", str(db), "import", str(src)]) == 0
    out = tmp_path / "out.json"
    assert cli_main(["--db", str(db), "export", str(out)]) == 0
    _assert_gone(db, secret, word)
    assert secret not in out.read_text() and word not in out.read_text()


def test_cli_forget_reason_and_store_tags(tmp_path: Path, capsys: Any) -> None:
    db = tmp_path / "memory.db"
    secret = _token()
    assert cli_main(["--db", str(db), "store", "a fact to forget"]) == 0
    mid = capsys.readouterr().out.split()[-1]
    assert cli_main(["--db", str(db), "forget", mid, "--reason", f"token {secret}"]) == 0
    capsys.readouterr()
    assert cli_main(["--db", str(db), "store", "tagged", "--tags", f"ok,{secret}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and secret not in err
    _assert_gone(db, secret)


def test_sessions_table_title_directory_and_end_reason(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    secret = _token()
    with MemoryStore(db) as st:
        rec = session_state.SessionRecord(
            agent="copilot",
            session_id="s1",
            title=f"deploy with {secret}",
            directory=f"/tmp/{secret}",
            end_reason=f"ended: token {secret}",
        )
        session_state.save(st.db, rec)
        saved = session_state.get(st.db, "copilot", "s1")
        assert saved is not None and saved.title == f"deploy with {REDACTED}"
    _assert_gone(db, secret)


def test_copilot_session_start_initial_prompt(
    tmp_path: Path, llmem_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first prompt becomes the session title: it is redacted before it is stored."""
    llmem_home.mkdir(mode=0o700, parents=True, exist_ok=True)
    (llmem_home / "config.yaml").write_text("copilot:\n  autostart_sidecar: false\n")
    secret, word = _token(), _word_password()
    payload = {
        "sessionId": "55634ac8-b1c4-44ad-a4cf-4c99a1b09a4c",
        "timestamp": 1795332381466,
        "cwd": str(tmp_path),
        "source": "new",
        "initialPrompt": f"push with {secret}; the admin pw is {word}",
    }
    out = io.StringIO()
    raw = io.BytesIO(json.dumps(payload).encode())
    assert copilot_hook.main(["copilot", "sessionStart"], stdin=raw, stdout=out) == 0
    db = llmem_home / "memory.db"
    with MemoryStore(db) as st:
        rec = session_state.find(st.db, payload["sessionId"])
    assert rec is not None and rec.title is not None and REDACTED in rec.title
    _assert_gone(db, secret, word)
