"""Issue 18, defect 1: text from a transcript is redacted, never refused, and each unit
(an exchange, a candidate memory, a summary) is stored or skipped on its own.

Sessions are written as the agents store them (Copilot ``events.jsonl`` and
``workspace.yaml``, OpenCode ``opencode.db``) and run through the real sidecar over a real
store; every secret shape of tests/support/secrets_corpus.py and PEM private keys go in."""

from __future__ import annotations

import logging
import random
import re
import sqlite3
from pathlib import Path

import pytest
from support import secrets_corpus as corpus
from support.copilot_home import CopilotHome
from support.opencode_db import OpenCodeDB, text

from llmem_hooks import MemoryStore, SessionHookCoordinator
from llmem_hooks.adapters import CopilotAdapter, OpenCodeAdapter
from llmem_hooks.config import DEFAULT_CONFIG
from llmem_hooks.redact import redact_secrets
from llmem_hooks.sidecar.loop import Sidecar
from llmem_hooks.store import sessions as session_state

SEED = corpus.seed_from_env()
FACTS = [
    "we deploy the billing service with blue-green releases",
    "the staging database runs postgres 16",
    "we release on tuesdays only",
    "the api gateway is written in go",
    "integration tests run nightly at two",
    "we use ruff for linting python code",
    "the frontend bundles with vite",
    "feature flags live in launchdarkly",
    "the queue is rabbitmq with quorum queues",
    "logs ship to loki through promtail",
    "the mobile app targets android fourteen",
]
KEY_BODY = [
    "MIIEowIBAAKCAQEAz8Xy2hVw0bF3qLr9nTtYc1uPq7kM2xVj",
    "k3Lq9VwPzR7sT1yU4iO8pA2sD5fG6hJ9kL0zX3cV6bN1mQ4w",
    "E7rT0yU3iO6pA9sD2fG5hJ8kL1zX4cV7bN0mQ3wE6rT9yU2i",
]


def pem(kind: str, end: bool = True, sep: str = "\n") -> str:
    head = f"-----BEGIN {kind}PRIVATE KEY-----"
    tail = [f"-----END {kind}PRIVATE KEY-----"] if end else []
    return sep.join([head, *KEY_BODY, *tail])


PEMS = [
    pem("RSA "),
    pem("EC "),
    pem("OPENSSH "),
    pem("ENCRYPTED "),
    pem(""),
    pem("RSA ", sep="\\n"),  # as it sits inside a JSON string a tool was given
    pem("RSA ", end=False),  # cut: no END line
]


def config(**episodes: object) -> dict:
    cfg = {k: dict(v) for k, v in DEFAULT_CONFIG.items()}
    cfg["session"].update(idle_quiet_seconds=0, idle_debounce_seconds=0, end_after_minutes=600)
    cfg["episodes"].update(episodes)
    return cfg


def secrets_to_paste() -> list[tuple[str, list[str]]]:
    """(text, the values that must not be stored): every corpus case the detector finds
    in its own text, and each PEM key (its body lines)."""
    out = []
    for case in corpus.secret_cases(random.Random(SEED)):
        if case.value in (redact_secrets(case.text) or ""):
            continue  # a detector miss on the bare text: test_secrets_corpus.py checks those
        out.append((case.text, [case.value]))
    out += [(p, KEY_BODY) for p in PEMS]
    return out


def dump(db: Path) -> str:
    """Everything the store file holds, FTS shadow tables included."""
    conn = sqlite3.connect(db)
    try:
        return "\n".join(conn.iterdump())
    finally:
        conn.close()


def learned_facts(store: MemoryStore) -> list[str]:
    return [
        m["content"].lower()
        for m in store.list_all(limit=10_000)
        if m["source"] == "extract" and m["type"] != "conversation"
    ]


def episodes(store: MemoryStore) -> list[dict]:
    return [m for m in store.list_all(limit=100_000) if m["source"] == "episode"]


def assert_all_facts_learned(store: MemoryStore) -> None:
    facts = learned_facts(store)
    for fact in FACTS:
        assert any(fact.split()[-2] in f for f in facts), (SEED, fact, facts)


def test_one_pem_key_in_a_copilot_session_costs_nothing_else(
    store: MemoryStore, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The reported case: one user turn holds a PEM key, eleven say "remember that ..."."""
    home = CopilotHome(tmp_path / "copilot")
    s = home.session()
    for i, fact in enumerate(FACTS):
        s.exchange(f"remember that {fact}", "Noted.")
        if i == 5:
            s.exchange(f"here is the deploy key:\n{pem('RSA ')}\nkeep it safe", "Understood.")
    coord = SessionHookCoordinator(
        store, {"copilot": CopilotAdapter(home.root)}, config(), tmp_path / "ctx"
    )
    with caplog.at_level(logging.WARNING):
        Sidecar(coord, config()).tick()
    assert_all_facts_learned(store)
    eps = episodes(store)
    assert len(eps) == len(FACTS) + 1  # the key's exchange too, redacted
    (keyed,) = [e for e in eps if "deploy key" in e["content"]]
    assert "[REDACTED]" in keyed["content"] and "keep it safe" in keyed["content"]
    assert not [r for r in caplog.records if "skipped" in r.getMessage()]
    stored = dump(store.db_path)
    assert not any(line in stored for line in KEY_BODY)
    assert "BEGIN RSA PRIVATE KEY" not in stored


def _fact_at(pastes: list[tuple[str, list[str]]]) -> dict[int, str]:
    """Where the facts go among the pastes: spread over the whole session."""
    step = max(1, len(pastes) // len(FACTS))
    return {j * step: fact for j, fact in enumerate(FACTS)}


def _copilot_session(home: CopilotHome, pastes: list[tuple[str, list[str]]]) -> int:
    """One session: the facts, and each secret in a turn of its own (user turn, assistant
    reply or tool command in turn). Returns the number of exchanges."""
    s = home.session()
    facts = _fact_at(pastes)
    for i, (secret, _) in enumerate(pastes):
        if i in facts:
            s.exchange(f"remember that {facts[i]}", "Noted.")
        if i % 3 == 0:
            s.exchange(f"use this config:\n{secret}\nthen run the tests", "Done.")
        elif i % 3 == 1:
            s.exchange("what is in the env file?", f"It holds:\n{secret}")
        else:
            s.exchange("apply it", "Applied.", tool=("bash", {"command": secret}))
    return len(pastes) + len(facts)


def _opencode_session(db: OpenCodeDB, pastes: list[tuple[str, list[str]]]) -> int:
    sid = db.session("Secrets everywhere")
    facts = _fact_at(pastes)
    for i, (secret, _) in enumerate(pastes):
        if i in facts:
            u = db.user(sid, f"remember that {facts[i]}")
            db.assistant(sid, u, text("Noted."))
        if i % 2 == 0:
            u = db.user(sid, f"use this config:\n{secret}\nthen run the tests")
            db.assistant(sid, u, text("Done."))
        else:
            u = db.user(sid, "what is in the env file?")
            db.assistant(sid, u, text(f"It holds:\n{secret}"))
    return len(pastes) + len(facts)


@pytest.mark.parametrize("agent", ["copilot", "opencode"])
def test_every_secret_shape_is_redacted_and_every_unit_stored(
    agent: str, store: MemoryStore, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pastes = secrets_to_paste()
    assert len(pastes) > 300
    if agent == "copilot":
        home = CopilotHome(tmp_path / "copilot")
        exchanges = _copilot_session(home, pastes)
        adapter: object = CopilotAdapter(home.root)
    else:
        db = OpenCodeDB(tmp_path / "oc" / "opencode.db")
        exchanges = _opencode_session(db, pastes)
        adapter = OpenCodeAdapter(db.path)
    cfg = config()
    coord = SessionHookCoordinator(store, {agent: adapter}, cfg, tmp_path / "ctx")  # type: ignore[dict-item]
    with caplog.at_level(logging.WARNING):
        Sidecar(coord, cfg).tick()
        (rec,) = session_state.all_sessions(store.db)
        assert coord.on_ending(rec.session_id)[0] == "success"  # the summary unit too
    assert_all_facts_learned(store)
    assert len(episodes(store)) == exchanges, SEED  # not one exchange refused
    assert [m for m in store.list_all(limit=10) if m["type"] == "event"]  # the summary
    skipped = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert not skipped, f"SECRETS_SEED={SEED}: {skipped[:3]}"
    stored = dump(store.db_path)
    # a whole value, not a part of a word ("ember" is in "remember")
    leaked = [
        v
        for _, values in pastes
        for v in values
        # the plain `in` first: the same answer, without a regex over the dump per value
        if v in stored and re.search(rf"(?<![A-Za-z0-9]){re.escape(v)}(?![A-Za-z0-9])", stored)
    ]
    assert not leaked, f"SECRETS_SEED={SEED}: {leaked[:5]}"
    if agent == "opencode":
        db.close()


def test_a_unit_the_store_refuses_costs_only_itself(
    store: MemoryStore, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A session whose folder name holds a token: its units are refused (an id is never
    redacted), one log line each, and the other session is learned in full."""
    home = CopilotHome(tmp_path / "copilot")
    odd = home.session(cwd="/home/dev/ghp_" + "A1b2C3d4" * 5)
    odd.exchange("remember that we release on tuesdays only", "Noted.")
    good = home.session()
    for fact in FACTS:
        good.exchange(f"remember that {fact}", "Noted.")
    cfg = config()
    coord = SessionHookCoordinator(
        store, {"copilot": CopilotAdapter(home.root)}, cfg, tmp_path / "ctx"
    )
    with caplog.at_level(logging.WARNING):
        Sidecar(coord, cfg).tick()
    assert_all_facts_learned(store)
    assert len(episodes(store)) == len(FACTS)
    skipped = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert skipped and all(odd.id in line and "\n" not in line for line in skipped)
    assert all("ghp_" not in line for line in skipped)
    assert len(skipped) == 2  # its episode and its candidate: one line per unit


# -- lone surrogates from an agent's store -------------------------------------------------


def _opencode_odd_title(db: OpenCodeDB, sid: str) -> None:
    """The title as OpenCode may leave it: in the session row as text that is not UTF-8
    (a lone surrogate, WTF-8 encoded) and in the event JSON as an escape."""
    db.conn.execute(
        "UPDATE session SET title = CAST(X'4869205F20EDA0BD' AS TEXT) WHERE id = ?", (sid,)
    )
    db.event(
        sid,
        "session.updated.1",
        f'{{"sessionID": "{sid}", "info": {{"id": "{sid}", "title": "Hi \\ud83d",'
        f' "time": {{"created": {db.ms}, "updated": {db.tick()}}}}}}}',
    )


def test_an_odd_opencode_title_costs_at_most_that_title(store: MemoryStore, tmp_path: Path) -> None:
    db = OpenCodeDB(tmp_path / "oc" / "opencode.db")
    sids = []
    for i, fact in enumerate(FACTS[:3]):
        sid = db.session(f"Session {i}")
        u = db.user(sid, f"remember that {fact}")
        db.assistant(sid, u, text("Noted."))
        sids.append(sid)
    _opencode_odd_title(db, sids[1])
    cfg = config()
    coord = SessionHookCoordinator(
        store, {"opencode": OpenCodeAdapter(db.path)}, cfg, tmp_path / "ctx"
    )
    sidecar = Sidecar(coord, cfg)
    assert sidecar.backfill_episodes() == 3  # every session, the odd one included
    sidecar.tick()
    for sid in sids:
        assert (tmp_path / "ctx" / f"{sid}.md").exists()  # created ran for each
    rec = session_state.find(store.db, sids[1])
    assert rec is not None and rec.title is not None and "\ufffd" in rec.title
    assert len(learned_facts(store)) == 3
    db.close()


def test_an_odd_copilot_title_and_message_cost_nothing(store: MemoryStore, tmp_path: Path) -> None:
    home = CopilotHome(tmp_path / "copilot")
    odd = home.session(name='"Deploy \\ud83d"')  # js-yaml writes a lone surrogate escaped
    odd.exchange(f"remember that {FACTS[0]} \ud83d", "Noted \udc00.")  # JSON "\ud83d"
    good = home.session()
    good.exchange(f"remember that {FACTS[1]}", "Noted.")
    cfg = config()
    coord = SessionHookCoordinator(
        store, {"copilot": CopilotAdapter(home.root)}, cfg, tmp_path / "ctx"
    )
    sidecar = Sidecar(coord, cfg)
    assert sidecar.backfill_episodes() == 2
    sidecar.tick()
    assert (tmp_path / "ctx" / f"{odd.id}.md").exists()
    rec = session_state.find(store.db, odd.id)
    assert rec is not None and rec.title == "Deploy \ufffd"
    assert len(learned_facts(store)) == 2
    (ep,) = [e for e in episodes(store) if e["session_id"] == odd.id]
    assert "\ufffd" in ep["content"]


def test_a_key_pasted_over_two_messages_leaves_neither_half(
    store: MemoryStore, tmp_path: Path
) -> None:
    """The header and the first lines in one turn, the rest and the END line in the next:
    each message is redacted on its own, failing closed on both sides."""
    home = CopilotHome(tmp_path / "copilot")
    s = home.session()
    s.exchange(f"the key, part one:\n-----BEGIN RSA PRIVATE KEY-----\n{KEY_BODY[0]}", "Go on.")
    s.exchange(
        f"{KEY_BODY[1]}\n{KEY_BODY[2]}\n-----END RSA PRIVATE KEY-----\nremember that {FACTS[0]}",
        "Noted.",
    )
    cfg = config()
    coord = SessionHookCoordinator(
        store, {"copilot": CopilotAdapter(home.root)}, cfg, tmp_path / "ctx"
    )
    Sidecar(coord, cfg).tick()
    assert len(episodes(store)) == 2
    assert any("blue-green" in f for f in learned_facts(store))
    stored = dump(store.db_path)
    assert not any(line in stored for line in KEY_BODY)
